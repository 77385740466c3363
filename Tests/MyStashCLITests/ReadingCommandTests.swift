import Foundation
import XCTest

/// Every command that reads the vault verifies it first, as `password list` does, and
/// upgrades an older vault before it reads.
final class ReadingCommandTests: CLITestCase {
    /// Each command that shows something of the vault (the clipboard and browse aside: they
    /// have tests of their own).
    let readingCommands: [[String]] = [
        ["password", "list"], ["password", "show", "Mail"], ["password", "show", "Mail", "--field", "user"],
        ["password", "search", "Mail"], ["password", "otp", "Bank"], ["password", "history", "Mail"],
        ["note", "list"], ["note", "show", "Wi-Fi"], ["note", "search", "code"], ["category", "list"],
        ["seed", "status"], ["export"], ["export", "--format", "csv"],
    ]

    /// Those that show one note or entry, and check only what they show.
    var oneItemCommands: [[String]] {
        readingCommands.filter { $0.count > 1 && ["show", "otp", "history"].contains($0[1]) }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try initVault()
        try runOK(["note", "add", "Wi-Fi"], stdin: "code 1234")
        try runOK(["password", "add", "Bank", "--category", "Banking"], stdin: "bank-secret\n")
        try runOK(["password", "add", "Mail", "--user", "ada"], stdin: "mail-secret\n")
    }

    func testEveryReadingCommandRefusesAVaultWithARowDeletedBySQLite() throws {
        // Before: each one works (Bank has no TOTP secret, which otp reports as not found).
        for command in readingCommands {
            XCTAssertEqual(try run(command).status, command == ["password", "otp", "Bank"] ? 66 : 0, "\(command)")
        }
        let before = try Dictionary(uniqueKeysWithValues: oneItemCommands.map { ($0, try run($0)) })
        let deleted = try sqlite(vaultDirectory.appendingPathComponent("Passwords.sqlite"),
                                 "DELETE FROM ZSYSTEM WHERE Z_PK = 2")
        XCTAssertEqual(deleted.status, 0, deleted.output)
        // A command showing one item checks the buckets of what it shows: Mail (row 2) is
        // refused; what shows another item shows exactly what it showed before.
        for command in readingCommands {
            let result = try run(command)
            if oneItemCommands.contains(command), !command.contains("Mail") {
                XCTAssertEqual(result.status, before[command]?.status, "\(command): \(result.stderr)")
                XCTAssertEqual(result.stdout, before[command]?.stdout, "\(command)")
                continue
            }
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.hasPrefix(
                    "Error: the vault was changed outside mystash: Passwords.sqlite, System row 2"),
                "\(command): \(result.stderr)")
            XCTAssertEqual(result.stdout, "", "\(command): nothing is shown from a tampered vault")
        }
    }

    func testCategoryListUpgradesAVersion1VaultFirst() throws {
        try FileManager.default.removeItem(at: vaultDirectory)
        let password = try installVersion1Vault()
        let listed = try runOK(["category", "list"], environment: password)
        XCTAssertEqual(
            listed.stderr, "Upgraded the vault from model 'MyStash' to 'MyStash 5' (Notes.sqlite, Passwords.sqlite).\n")
        XCTAssertTrue(listed.stdout.contains("Home Lab"), listed.stdout)
        // Seed lists of later versions are loaded after the check: version 5 brought "SSH Key".
        XCTAssertTrue(listed.stdout.contains("SSH Key"), listed.stdout)
        XCTAssertEqual(try runOK(["seed", "status"], environment: password).stderr, "", "upgraded once")
    }
}
