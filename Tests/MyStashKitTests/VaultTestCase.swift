import Foundation
import XCTest
@testable import MyStashKit
import StashPlatform
@testable import StashCrypto

/// Each test gets a fresh temporary directory and, on demand, a vault with a cheap KDF.
class VaultTestCase: XCTestCase {
    var directory: URL!
    let password = SecretBytes.password("correct horse battery staple")
    let cheap = ScryptParameters(logN: 10)

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    static var fixtures: URL { Bundle.module.url(forResource: "Fixtures", withExtension: nil)! }

    func fixture(_ name: String) throws -> Data { try Data(contentsOf: Self.fixtures.appendingPathComponent(name)) }

    /// Imports the KeePass XML fixture `source` into a real KeePassXC database and exports it
    /// as `format` (csv or xml) with keepassxc-cli.
    func keepassxcExport(_ format: String, of source: String = "keepassxc-source.xml") throws -> Data {
        try keepassxcExport(format, xml: Self.fixtures.appendingPathComponent(source))
    }

    /// The KeePass XML file `xml` through a real KeePassXC database, exported as `format`.
    func keepassxcExport(_ format: String, xml: URL) throws -> Data {
        guard let cli = ChildProcess.find("keepassxc-cli") else {
            throw XCTSkip("keepassxc-cli is not installed (apt-get install keepassxc)")
        }
        let work = directory.deletingLastPathComponent().appendingPathComponent("kp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let database = work.appendingPathComponent("test.kdbx").path
        let made = try XCTUnwrap(
            ChildProcess.execute(
                [cli, "import", "-p", xml.path, database],
                input: Data("pw\npw\n".utf8)))
        XCTAssertEqual(made.status, 0, String(decoding: made.errors, as: UTF8.self))
        let exported = try XCTUnwrap(
            ChildProcess.execute([cli, "export", "-f", format, database], input: Data("pw\n".utf8)))
        XCTAssertEqual(exported.status, 0, String(decoding: exported.errors, as: UTF8.self))
        return exported.output
    }

    func makeVault() throws -> Vault {
        try Vault.create(at: directory, password: password, parameters: cheap)
    }

    /// The vault opened again; with verification `.skipped`, changes made outside mystash are left to
    /// the layer under test (field decryption) instead of the integrity record.
    func reopen(verification: Vault.Verification = .immediate) throws -> Vault {
        let vault = try Vault.open(at: directory)
        try vault.unlock(password: password, verification: verification)
        return vault
    }

    /// Makes the vault one from before the integrity record (which the next change gives it):
    /// no record, and a version 1 key slot, which cannot say the vault has one.
    func dropIntegrityRecord() throws {
        let vault = try reopen(verification: .skipped)
        let olderSlot = try KeySlot.wrapping(
            try vault.sessionContents().dataKey, password: password, parameters: cheap, version: 1)
        for store in vault.coordinator.persistentStores {
            vault.coordinator.setMetadata(Data(olderSlot.serialized), forKey: Vault.keySlotKey, in: store)
        }
        try vault.coordinator.saveMetadata()
        try vault.coordinator.close()
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            try sqlite(store, "DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_RECORD; DROP TABLE MYSTASH_BUCKET")
        }
    }

    /// Runs sqlite3 on a store of the vault.
    @discardableResult
    func sqlite(_ store: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [directory.appendingPathComponent(store).path, sql]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, sql)
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a program that must succeed, with `input` on its standard input.
    func must(
        _ arguments: [String], _ input: Data = Data(), file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let result = try XCTUnwrap(ChildProcess.execute(arguments, input: input), arguments[0], file: file, line: line)
        XCTAssertEqual(
            result.status, 0, "\(arguments.joined(separator: " ")): \(String(decoding: result.errors, as: UTF8.self))",
            file: file, line: line)
    }

    /// Runs `body` with GNUPGHOME pointing at a new gpg home holding one key without a
    /// passphrase, for `recipient`; skips the test without gpg.
    /// A new pass store for `recipient` (PASSWORD_STORE_DIR while `body` runs), removed after.
    func withPassStore(for recipient: String, _ body: (_ store: URL) throws -> Void) throws {
        let store = directory.deletingLastPathComponent().appendingPathComponent("store-\(UUID().uuidString)")
        setenv("PASSWORD_STORE_DIR", store.path, 1)
        defer {
            unsetenv("PASSWORD_STORE_DIR")
            try? FileManager.default.removeItem(at: store)
        }
        try must(["pass", "init", recipient])
        try body(store)
    }

    func withTestGPGKey(_ body: (_ recipient: String) throws -> Void) throws {
        guard ChildProcess.find("gpg") != nil else { throw XCTSkip("gpg is not installed (apt-get install gnupg)") }
        // Short: the agent's socket path must fit in 108 bytes.
        let home = directory.deletingLastPathComponent().appendingPathComponent("gnupg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let saved = ProcessInfo.processInfo.environment["GNUPGHOME"]
        setenv("GNUPGHOME", home.path, 1)
        defer {
            _ = ChildProcess.execute(["gpgconf", "--kill", "gpg-agent"])
            if let saved { setenv("GNUPGHOME", saved, 1) } else { unsetenv("GNUPGHOME") }
            try? FileManager.default.removeItem(at: home)
        }
        let recipient = "mystash-test@example.org"
        try must(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", recipient, "default", "default", "never"])
        try body(recipient)
    }

    func assertVaultError(_ kind: VaultError.Kind, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line,
                          check: (VaultError) -> Void = { _ in }) {
        do {
            try body()
            XCTFail("expected a \(kind.rawValue) error", file: file, line: line)
        } catch let error as VaultError {
            XCTAssertEqual(error.kind, kind, "\(error)", file: file, line: line)
            check(error)
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
    }
}
