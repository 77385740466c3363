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

    /// Those that show one note or entry, and check only what they show, and those that read
    /// the notes store alone, and check only that store (and the other's record).
    var commandsNotReadingEveryEntry: [[String]] {
        readingCommands.filter { $0.count > 1 && (["show", "otp", "history"].contains($0[1]) || $0[0] == "note") }
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
        let before = try Dictionary(uniqueKeysWithValues: commandsNotReadingEveryEntry.map { ($0, try run($0)) })
        let deleted = try sqlite(vaultDirectory.appendingPathComponent("Passwords.sqlite"),
                                 "DELETE FROM ZSYSTEM WHERE Z_PK = 2")
        XCTAssertEqual(deleted.status, 0, deleted.output)
        // A command showing one item checks the buckets of what it shows: Mail (row 2) is
        // refused; what shows another item, or only notes, shows exactly what it showed before.
        for command in readingCommands {
            let result = try run(command)
            if commandsNotReadingEveryEntry.contains(command), !command.contains("Mail") {
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

    /// The other way round: a note deleted by SQLite is refused by every command reading notes,
    /// while lists of entries, which check the passwords store and the notes store's record,
    /// show what they showed before; every change is refused.
    func testCommandsReadingNotesRefuseANoteDeletedBySQLiteAndEntryListsGoOn() throws {
        let entryLists: [[String]] = [
            ["password", "list"], ["password", "search", "Mail"], ["password", "list", "--category", "Banking"],
        ]
        let before = try Dictionary(uniqueKeysWithValues: entryLists.map { ($0, try runOK($0)) })
        let deleted = try sqlite(vaultDirectory.appendingPathComponent("Notes.sqlite"), "DELETE FROM ZNOTE WHERE Z_PK = 1")
        XCTAssertEqual(deleted.status, 0, deleted.output)
        // `category list` checks the whole vault: it loads newer seed categories first.
        for command in [["note", "list"], ["note", "search", "code"], ["note", "show", "Wi-Fi"], ["export"],
                        ["category", "list"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.hasPrefix("Error: the vault was changed outside mystash: Notes.sqlite, Note row 1"),
                "\(command): \(result.stderr)")
            XCTAssertEqual(result.stdout, "", "\(command)")
        }
        for command in entryLists {
            let result = try run(command)
            XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
            XCTAssertEqual(result.stdout, before[command]?.stdout, "\(command)")
        }
        XCTAssertEqual(try run(["password", "edit", "Mail", "--url", "https://mail.example"]).status, 65)
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
