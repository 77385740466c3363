import Foundation
import XCTest

/// Changes an attacker (or a careless tool) makes with sqlite3 that field encryption alone
/// cannot see, each caught by the integrity record: by an ordinary command, which refuses
/// to go on, and by check, which lists it, both naming the store, entity and row.
final class TamperTests: CLITestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try initVault()
        try runOK(["note", "add", "Wi-Fi"], stdin: "code 1234")
        try runOK(
            ["password", "add", "Bank", "--category", "Banking", "--url", "https://bank.example"], stdin: "old-secret\n"
        )
        try runOK(["password", "add", "Mail"], stdin: "mail-secret\n")
    }

    /// `command` fails with 65 naming `place`, and check lists `place` with `what`.
    func assertDetected(
        _ place: String, _ what: String, by command: [String], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let result = try run(command)
        XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)", file: file, line: line)
        XCTAssertTrue(
            result.stderr.contains("Error: the vault was changed outside mystash: \(place)"), result.stderr, file: file,
            line: line)
        XCTAssertFalse(result.stderr.contains("secret"), file: file, line: line)
        XCTAssertEqual(result.stdout, "", "nothing is shown from a tampered vault", file: file, line: line)
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65, check.stderr, file: file, line: line)
        XCTAssertTrue(check.stdout.contains("\(place): \(what)"), check.stdout, file: file, line: line)
    }

    func testADeletedRow() throws {
        _ = try sqlite("Passwords.sqlite", "DELETE FROM ZSYSTEM WHERE Z_PK = 2")
        try assertDetected(
            "Passwords.sqlite, System row 2", "the row was deleted outside mystash", by: ["password", "list"])
    }

    func testAnEntryMovedToAnotherCategory() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "UPDATE ZSYSTEM SET ZCATEGORY = (SELECT Z_PK FROM ZCATEGORY WHERE ZNAME = 'Shopping') WHERE Z_PK = 1")
        try assertDetected(
            "Passwords.sqlite, System row 1", "the row was changed outside mystash", by: ["password", "show", "Bank"])
    }

    func testAnOlderCiphertextPutBackIntoItsOwnRowAndField() throws {
        let old = try sqlite(
            "Passwords.sqlite", "SELECT hex(ZPASSWORD) || '|' || Z_OPT || '|' || ZUPDATEDAT FROM ZSYSTEM WHERE Z_PK = 1"
        ).split(separator: "|")
        try runOK(["password", "edit", "Bank", "--new-password"], stdin: "new-secret\n")
        _ = try sqlite(
            "Passwords.sqlite",
            "UPDATE ZSYSTEM SET ZPASSWORD = x'\(old[0])', Z_OPT = \(old[1]), ZUPDATEDAT = \(old[2]) WHERE Z_PK = 1")
        try assertDetected(
            "Passwords.sqlite, System row 1", "the row was changed outside mystash",
            by: ["password", "show", "Bank", "--reveal"])
        // A change to the row does not launder it either.
        let edit = try run(["password", "edit", "Bank", "--url", "https://bank.example/new"], environment: [:])
        XCTAssertEqual(edit.status, 65, edit.stderr)
    }

    func testAnOlderCopyOfOneStoreSwappedIn() throws {
        let notes = vaultDirectory.appendingPathComponent("Notes.sqlite")
        let older = home.appendingPathComponent("Notes.older")
        try FileManager.default.copyItem(at: notes, to: older)
        try runOK(["note", "add", "Later"], stdin: "written later")
        try FileManager.default.removeItem(at: notes)
        try FileManager.default.copyItem(at: older, to: notes)
        try assertDetected("Notes.sqlite", "it is an older or foreign copy", by: ["note", "list"])
    }

    func testTextIntegerOrNullInAnEncryptedColumn() throws {
        for (index, value) in ["'https://evil.example'", "5", "NULL"].enumerated() {
            let saved = home.appendingPathComponent("saved-\(index)")
            try FileManager.default.copyItem(at: vaultDirectory, to: saved)
            _ = try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZURL = \(value) WHERE Z_PK = 1")
            try assertDetected(
                "Passwords.sqlite, System row 1", "the row was changed outside mystash", by: ["password", "list"])
            // browse reads the damaged row while the check runs: the check's verdict is what it says.
            try assertDetected(
                "Passwords.sqlite, System row 1", "the row was changed outside mystash", by: ["browse"])
            try FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.moveItem(at: saved, to: vaultDirectory)
        }
    }

    /// Text is read and shown up to its first NUL; bytes put after one still change the row.
    func testBytesPutAfterANulInACategoryName() throws {
        let key = try sqlite("Passwords.sqlite", "SELECT Z_PK FROM ZCATEGORY WHERE ZNAME = 'Banking'")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try sqlite(
            "Passwords.sqlite",
            "UPDATE ZCATEGORY SET ZNAME = ZNAME || CAST(X'00206576696C' AS TEXT) WHERE Z_PK = \(key)")
        try assertDetected(
            "Passwords.sqlite, Category row \(key)", "the row was changed outside mystash", by: ["category", "list"])
        try assertDetected(
            "Passwords.sqlite, Category row \(key)", "the row was changed outside mystash",
            by: ["password", "show", "Bank"])
    }

    func testARowAddedOutsideMystash() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "INSERT INTO ZSYSTEM (Z_PK, Z_ENT, Z_OPT, ZNAME, ZPASSWORD) "
                + "SELECT 9, Z_ENT, 1, ZNAME, ZPASSWORD FROM ZSYSTEM WHERE Z_PK = 2"
        )
        try assertDetected(
            "Passwords.sqlite, System row 9", "the row was added outside mystash", by: ["password", "list"])
    }

    /// Rows and their tags removed together still show in the record's count and sum.
    func testARowDeletedWithItsTag() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "DELETE FROM ZSYSTEM WHERE Z_PK = 2; DELETE FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZSYSTEM' AND ZPK = 2")
        try assertDetected(
            "Passwords.sqlite", "rows and their tags were removed or replaced together", by: ["password", "list"])
    }

    /// A row's tag copied under a table the store does not have: read only when the count of
    /// tags says the tables' own did not hold them all, and still refused.
    func testATagOfATableTheStoreDoesNotHave() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "INSERT INTO MYSTASH_ROW_TAG SELECT 'ZELSEWHERE', ZPK, ZBUCKET, ZTAG FROM MYSTASH_ROW_TAG "
                + "WHERE ZTABLE = 'ZSYSTEM' AND ZPK = 2")
        try assertDetected(
            "Passwords.sqlite", "its table of row tags names a table it does not cover", by: ["password", "list"])
    }

    /// The last entry's row deleted and the key counter put back, so the next add would take
    /// its key: the add is refused, and the deletion stays visible.
    func testADeletedRowsKeyHandedOutAgainIsRefusedNotHidden() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "DELETE FROM ZSYSTEM WHERE Z_PK = 2; UPDATE Z_PRIMARYKEY SET Z_MAX = 1 WHERE Z_NAME = 'System'")
        let add = try run(["password", "add", "Later"], stdin: "later\n")
        XCTAssertEqual(add.status, 65, add.stderr)
        XCTAssertTrue(add.stderr.contains("Passwords.sqlite, System row 2"), add.stderr)
        try assertDetected(
            "Passwords.sqlite, System row 2", "the row was deleted outside mystash", by: ["password", "list"])
    }

    /// An allocation of primary keys at its end: every add is refused naming it, and check lists it.
    func testPrimaryKeysAllocatedToTheEnd() throws {
        _ = try sqlite("Passwords.sqlite", "UPDATE Z_PRIMARYKEY SET Z_MAX = 9223372036854775807 WHERE Z_NAME = 'System'")
        let add = try run(["password", "add", "Later"], stdin: "later\n")
        XCTAssertEqual(add.status, 65, add.stderr)
        XCTAssertTrue(add.stderr.contains("no primary key is left to allocate"), add.stderr)
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65, check.stderr)
        XCTAssertTrue(check.stdout.contains("Passwords.sqlite, System: no primary key is left to allocate"), check.stdout)
    }

    /// What the record cannot see, as FORMAT.md says: the whole vault put back to an older copy
    /// of both stores from the same moment (a backup restored) is a vault mystash wrote.
    func testTheWholeVaultRolledBackIsNotDetected() throws {
        let backup = home.appendingPathComponent("backup")
        try FileManager.default.copyItem(at: vaultDirectory, to: backup)
        try runOK(["note", "add", "Later"], stdin: "written later")
        try FileManager.default.removeItem(at: vaultDirectory)
        try FileManager.default.moveItem(at: backup, to: vaultDirectory)
        try runOK(["check"])
        XCTAssertFalse(try runOK(["note", "list"]).stdout.contains("Later"))
    }

    /// The untouched vault passes, through many changes by several processes.
    /// What `show` prints beside an entry (its attachments, its category, the candidates of a
    /// name matching several) is vouched for with it, by name and by ID.
    func testAnAttachmentMovedToAnotherEntryIsRefusedWhereItWouldBeShown() throws {
        let file = home.appendingPathComponent("codes.txt")
        try Data("recovery codes".utf8).write(to: file)
        try runOK(["password", "attach", "Bank", file.path])
        XCTAssertTrue(try runOK(["password", "show", "Bank"]).stdout.contains("codes.txt"))
        _ = try sqlite("Passwords.sqlite", "UPDATE ZSYSTEMATTACHMENT SET ZENTRY = 2")
        for command in [["password", "show", "Mail"], ["password", "show", "#2"],
                        ["password", "show", "Mail", "--field", "password"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("Passwords.sqlite, SystemAttachment row 1"), result.stderr)
            XCTAssertEqual(result.stdout, "", "\(command)")
        }
    }

    func testACategoryRowDeletedIsRefusedByTheShowOfItsEntry() throws {
        for deletesItsTag in [false, true] {
            let scratch = home.appendingPathComponent("copy-\(deletesItsTag)")
            try FileManager.default.copyItem(at: vaultDirectory, to: scratch)
            defer {
                try? FileManager.default.removeItem(at: vaultDirectory)
                try? FileManager.default.moveItem(at: scratch, to: vaultDirectory)
            }
            let category = "(SELECT ZCATEGORY FROM ZSYSTEM WHERE Z_PK = 1)"
            let tag = deletesItsTag ? "DELETE FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZCATEGORY' AND ZPK = \(category); " : ""
            _ = try sqlite("Passwords.sqlite", tag + "DELETE FROM ZCATEGORY WHERE Z_PK = \(category)")
            for command in [["password", "show", "Bank"], ["password", "show", "#1"]] {
                let result = try run(command)
                XCTAssertEqual(result.status, 65, "\(command), tag deleted: \(deletesItsTag): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains("changed outside mystash: Passwords.sqlite"), result.stderr)
                XCTAssertEqual(result.stdout, "", "\(command)")
            }
        }
    }

    func testTheCandidatesOfANameMatchingSeveralEntriesAreVouchedFor() throws {
        try runOK(["password", "add", "Bank", "--allow-duplicate", "--category", "Banking"], stdin: "other\n")
        XCTAssertEqual(try run(["password", "show", "Bank"]).status, 64)
        _ = try sqlite("Passwords.sqlite", "UPDATE ZCATEGORY SET ZNAME = 'EVIL' WHERE ZNAME = 'Banking'")
        let result = try run(["password", "show", "Bank"])
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertFalse(result.stderr.contains("EVIL"), result.stderr)
        XCTAssertEqual(result.stdout, "")
    }

    func testOrdinaryUseKeepsTheRecordCurrent() throws {
        try runOK(["category", "add", "Travel"])
        try runOK(["category", "rename", "Travel", "Trips"])
        try runOK(["password", "edit", "Mail", "--category", "Trips", "--user", "ada"])
        try runOK(["note", "edit", "Wi-Fi", "--title", "Home Wi-Fi"])
        try runOK(["password", "rm", "Bank", "--force"])
        try runOK(["note", "rm", "Home Wi-Fi", "--force"])
        try runOK(["passwd"], environment: ["MYSTASH_NEW_PASSWORD": "pw2"])
        try runOK(["check"], environment: ["MYSTASH_PASSWORD": "pw2"])
        XCTAssertEqual(
            try sqlite("Passwords.sqlite", "SELECT ZROWCOUNT FROM MYSTASH_RECORD"),
            try sqlite(
                "Passwords.sqlite",
                "SELECT (SELECT COUNT(*) FROM ZSYSTEM) + (SELECT COUNT(*) FROM ZCATEGORY) "
                    + "+ (SELECT COUNT(*) FROM ZLIST)"
            ))
    }
}
