import Foundation
import XCTest
@testable import MyStashKit
import StashCrypto

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

    /// Makes the vault one from before the integrity record (which the next change gives it).
    func dropIntegrityRecord() throws {
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            try sqlite(store, "DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_RECORD")
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

    func assertVaultError(_ kind: VaultError.Kind, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line,
                          check: (VaultError) -> Void = { _ in }) {
        do {
            try body()
            XCTFail("expected a \(kind.name) error", file: file, line: line)
        } catch let error as VaultError {
            XCTAssertEqual(error.kind, kind, "\(error)", file: file, line: line)
            check(error)
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
    }
}
