import Foundation
import MyStashKit
import XCTest

/// SSH keys kept in a KeePass attribute, and ones that cannot be read, on import.
final class SSHImportTests: VaultTestCase {
    private func keePassXML(title: String, password: String, attributes: [(String, String)]) -> Data {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        }
        let strings = ([("Title", title), ("Password", password)] + attributes).map { key, value in
            "<String><Key>\(key)</Key><Value ProtectInMemory=\"True\">\(escaped(value))</Value></String>"
        }.joined()
        return Data("""
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <KeePassFile><Meta></Meta><Root><Group><UUID>bQ0TzCYNS0K7EaDNjzwwNQ==</UUID><Name>Root</Name>
            <Group><UUID>8K4D/QnXRUmyn0lbx6tDEw==</UUID><Name>Servers</Name><Entry>\(strings)</Entry></Group>
            </Group></Root></KeePassFile>
            """.utf8)
    }

    func testAKeyInAnAttributeIsDecryptedWithTheEntryPasswordAndStoredAsAddedKeysAre() throws {
        let files = try SSHKeyFiles()
        let path = try files.make("ecdsa", bits: "384", passphrase: "entry pw", comment: "ops@bastion")
        let vault = try makeVault()
        let report = try vault.transfer.importItems(
            keePassXML(title: "bastion", password: "entry pw",
                       attributes: [("SSH private key", try SSHKeyFiles.text(path)), ("Port", "2222")]),
            format: .keepassxcXML)
        XCTAssertEqual(report.warnings, [])
        let entry = try vault.items.entry("bastion", reveal: true)
        XCTAssertEqual(entry.category, "SSH Key")
        XCTAssertEqual(entry.fields?.map(\.name), ["Private key", "Public key", "Fingerprint", "Port", "Folder"])
        XCTAssertEqual(entry.fields?.first?.hidden, true)
        let key = try XCTUnwrap(try vault.items.sshKey("bastion").key)
        XCTAssertEqual(key.publicKeyLine + "\n", try SSHKeyFiles.text(path.appendingPathExtension("pub")))
        // Stored without the passphrase: it reads with none.
        XCTAssertFalse(try XCTUnwrap(entry.fields?.first?.value).contains("bcrypt"))
    }

    func testAKeyThatCannotBeReadIsKeptWithAWarning() throws {
        let files = try SSHKeyFiles()
        let path = try files.make("ed25519", passphrase: "not the entry password")
        let vault = try makeVault()
        let report = try vault.transfer.importItems(
            keePassXML(title: "locked", password: "other", attributes: [("key", try SSHKeyFiles.text(path))]),
            format: .keepassxcXML)
        XCTAssertEqual(report.warnings.map(\.title), ["locked"])
        XCTAssertTrue(report.warnings.first?.reason?.contains("wrong passphrase for the key") == true,
                      "\(report.warnings)")
        XCTAssertEqual(try vault.items.fieldValue("Private key", of: "locked"), try SSHKeyFiles.text(path))
        XCTAssertNotNil(try vault.items.sshKeys().first?.problem)
    }
}
