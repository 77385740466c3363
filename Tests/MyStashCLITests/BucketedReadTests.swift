import Foundation
import XCTest

/// A command that shows one note or entry checks the integrity record's buckets of what it
/// shows and of where it looked, not every row of the vault: what it shows is still vouched
/// for (a deleted, replayed, moved or swapped row of it is refused), while a change elsewhere
/// is left to the commands that show it, and to `check`.
final class BucketedReadTests: CLITestCase {
    var passwords: URL { vaultDirectory.appendingPathComponent("Passwords.sqlite") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try initVault()
        let document = """
            {"format": "mystash-json", "version": 2, "categories": ["Web Site"], "notes": [], "passwords": [
              {"name": "GitHub", "userId": "ada", "password": "gh-1", "category": "Web Site",
               "fields": [{"name": "PIN", "value": "1234", "hidden": true}],
               "history": [{"password": "gh-0", "replacedAt": "2024-05-06T07:08:09Z"}]},
              {"name": "Mail", "userId": "ada@example.org", "password": "mail-1"},
              {"name": "Bank", "userId": "ada.l", "password": "bank-1",
               "fields": [{"name": "Card", "value": "4111", "hidden": false}]}]}
            """
        let file = home.appendingPathComponent("entries.json")
        try document.write(to: file, atomically: true, encoding: .utf8)
        try runOK(["import", file.path, "--format", "mystash-json"])
    }

    func primaryKey(of name: String) throws -> String {
        let output = try run(["password", "list", "--json"]).stdout
        let entries = try XCTUnwrap(try json(output) as? [[String: Any]])
        let entry = try XCTUnwrap(entries.first { $0["name"] as? String == name })
        return "\(try XCTUnwrap(entry["id"] as? Int))"
    }

    func assertRefused(_ command: [String], naming place: String, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        let result = try run(command)
        XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.hasPrefix("Error: the vault was changed outside mystash: \(place)"),
                      "\(command): \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stdout, "", "\(command): nothing is shown", file: file, line: line)
    }

    func testAChangeElsewhereLeavesOneItemReadsExactAndIsCaughtByTheReadsThatShowIt() throws {
        let shown = try runOK(["password", "show", "GitHub", "--reveal"]).stdout
        let mail = try primaryKey(of: "Mail")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET Z_OPT = Z_OPT + 1 WHERE Z_PK = \(mail)"), "")
        // GitHub's buckets do not hold Mail (the test fails here if the buckets ever coincide).
        XCTAssertEqual(try runOK(["password", "show", "GitHub", "--reveal"]).stdout, shown)
        try assertRefused(["password", "show", "Mail"], naming: "Passwords.sqlite, System row \(mail)")
        try assertRefused(["password", "show", "#\(mail)"], naming: "Passwords.sqlite, System row \(mail)")
        try assertRefused(["password", "list"], naming: "Passwords.sqlite, System row \(mail)")
        try assertRefused(["password", "edit", "GitHub", "--user", "x"], naming: "Passwords.sqlite, System row \(mail)")
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65)
        XCTAssertTrue(check.stdout.contains("System row \(mail): the row was changed outside mystash"), check.stdout)
    }

    func testAnEntryDeletedWithItsTagIsRefusedNotReportedMissing() throws {
        let github = try primaryKey(of: "GitHub")
        _ = try sqlite("Passwords.sqlite", "DELETE FROM ZSYSTEM WHERE Z_PK = \(github); "
            + "DELETE FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZSYSTEM' AND ZPK = \(github)")
        for command in [["password", "show", "GitHub"], ["password", "show", "github", "--field", "password"],
                        ["password", "otp", "GitHub"], ["password", "show", "#\(github)"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("rows and their tags were removed or replaced together"),
                          "\(command): \(result.stderr)")
        }
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "password"]).stdout, "mail-1\n")
    }

    func testAnOlderCopyOfTheEntryPutBackWithItsTagIsRefused() throws {
        let github = try primaryKey(of: "GitHub")
        let saved = home.appendingPathComponent("saved.sqlite").path
        _ = try sqlite("Passwords.sqlite", "ATTACH '\(saved)' AS saved; "
            + "CREATE TABLE saved.entry AS SELECT * FROM ZSYSTEM WHERE Z_PK = \(github); "
            + "CREATE TABLE saved.tag AS SELECT * FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZSYSTEM' AND ZPK = \(github)")
        try runOK(["password", "edit", "GitHub", "--new-password"], stdin: "gh-2\n")
        _ = try sqlite("Passwords.sqlite", "ATTACH '\(saved)' AS saved; "
            + "DELETE FROM ZSYSTEM WHERE Z_PK = \(github); INSERT INTO ZSYSTEM SELECT * FROM saved.entry; "
            + "DELETE FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZSYSTEM' AND ZPK = \(github); "
            + "INSERT INTO MYSTASH_ROW_TAG SELECT * FROM saved.tag")
        let result = try run(["password", "show", "GitHub", "--field", "password"])
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.stdout, "", "the old password gh-1 is never shown")
        XCTAssertTrue(result.stderr.contains("rows and their tags were removed or replaced together"), result.stderr)
    }

    func testAFieldDeletedOrMovedToAnotherEntryIsRefusedOnBothEntries() throws {
        let github = try primaryKey(of: "GitHub")
        let bank = try primaryKey(of: "Bank")
        let pin = try sqlite("Passwords.sqlite", "SELECT Z_PK FROM ZFIELD WHERE ZENTRY = \(github)")
        _ = try sqlite("Passwords.sqlite", "UPDATE ZFIELD SET ZENTRY = \(bank) WHERE Z_PK = \(pin)")
        try assertRefused(["password", "show", "GitHub"], naming: "Passwords.sqlite, Field row \(pin)")
        try assertRefused(["password", "show", "Bank", "--field", "Card"], naming: "Passwords.sqlite, Field row \(pin)")
        _ = try sqlite("Passwords.sqlite", "UPDATE ZFIELD SET ZENTRY = \(github) WHERE Z_PK = \(pin)")
        XCTAssertEqual(try runOK(["password", "show", "GitHub", "--field", "PIN"]).stdout, "1234\n")
        _ = try sqlite("Passwords.sqlite", "DELETE FROM ZFIELD WHERE Z_PK = \(pin); "
            + "DELETE FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZFIELD' AND ZPK = \(pin)")
        let result = try run(["password", "show", "GitHub", "--reveal"])
        XCTAssertEqual(result.status, 65, "an entry is never shown without a field it has: \(result.stderr)")
        XCTAssertEqual(result.stdout, "")
    }

    func testSwappedNameKeysAreRefused() throws {
        let github = try primaryKey(of: "GitHub")
        let mail = try primaryKey(of: "Mail")
        _ = try sqlite("Passwords.sqlite", """
            UPDATE ZSYSTEM SET ZNAMEKEY = CASE Z_PK
              WHEN \(github) THEN (SELECT ZNAMEKEY FROM ZSYSTEM WHERE Z_PK = \(mail))
              ELSE (SELECT ZNAMEKEY FROM ZSYSTEM WHERE Z_PK = \(github)) END
            WHERE Z_PK IN (\(github), \(mail))
            """)
        let result = try run(["password", "show", "GitHub", "--field", "password"])
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.stdout, "", "Mail's password is never shown for GitHub")
    }

    func testAVaultOfTheLastReleaseIsCheckedAsItWroteItThenGetsBuckets() throws {
        try FileManager.default.removeItem(at: vaultDirectory)
        let password = try installFixtureVault("vault-v3")
        let first = try runOK(["password", "show", "GitHub", "--field", "PIN"], environment: password)
        XCTAssertEqual(first.stdout, "1234\n")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM pragma_table_info('MYSTASH_ROW_TAG') "
            + "WHERE name = 'ZBUCKET'"), "1")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEM WHERE ZNAMEKEY IS NULL"), "0")
        XCTAssertTrue(try runOK(["check"], environment: password).stderr.contains("All is well."))
        XCTAssertEqual(try runOK(["note", "show", "wi-fi"], environment: password).stdout,
                       "# Wi-Fi\n\ncode 1234\nsecond line\n")

        // The same vault changed with sqlite3 before its first open by this release: the
        // migration to the new model does not launder the change into the new record.
        try FileManager.default.removeItem(at: vaultDirectory)
        _ = try installFixtureVault("vault-v3")
        _ = try sqlite("Passwords.sqlite",
                       "UPDATE ZSYSTEM SET ZCATEGORY = (SELECT Z_PK FROM ZCATEGORY WHERE ZNAME = 'Banking') "
                        + "WHERE Z_PK = 3")
        for command in [["password", "show", "Bank"], ["password", "list"], ["password", "show", "Mail"]] {
            let result = try run(command, environment: password)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("System row 3: the row was changed outside mystash"), result.stderr)
        }
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM pragma_table_info('MYSTASH_RECORD') "
            + "WHERE name = 'ZTAGSUM'"), "1", "the record is not rebuilt over the change")
    }

    var sealRows: String { "SELECT COUNT(*) FROM MYSTASH_BUCKET WHERE ZBUCKET >= 4096" }

    /// (Its first opening by a release that covers the history makes the record again, sealed
    /// in groups, once the vault checked as that release wrote it: `check` writes nothing.)
    func testAVaultOfTheLastReleaseIsCheckedAsItWroteItThenSealedInGroups() throws {
        try FileManager.default.removeItem(at: vaultDirectory)
        let password = try installFixtureVault("vault-v5")
        XCTAssertEqual(try sqlite("Passwords.sqlite", sealRows), "0")
        XCTAssertTrue(try runOK(["check"], environment: password).stderr.contains("All is well."))
        XCTAssertEqual(try sqlite("Passwords.sqlite", sealRows), "0", "check writes nothing")
        XCTAssertEqual(try runOK(["password", "show", "GitHub", "--field", "PIN"], environment: password).stdout,
                       "1234\n")
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            XCTAssertNotEqual(try sqlite(store, sealRows), "0", "\(store) is sealed in groups at its first opening")
        }
        try runOK(["note", "add", "Later"], stdin: "text\n", environment: password)
        XCTAssertTrue(try runOK(["check"], environment: password).stderr.contains("All is well."))
        XCTAssertEqual(try runOK(["note", "show", "wi-fi"], environment: password).stdout,
                       "# Wi-Fi\n\ncode 1234\nsecond line\n")

        // A bucket of that vault changed before its first opening by this release is refused,
        // and the record is not sealed over it.
        try FileManager.default.removeItem(at: vaultDirectory)
        _ = try installFixtureVault("vault-v5")
        _ = try sqlite("Passwords.sqlite", "UPDATE MYSTASH_BUCKET SET ZCOUNT = ZCOUNT + 1 "
            + "WHERE ZBUCKET = (SELECT MIN(ZBUCKET) FROM MYSTASH_BUCKET)")
        for command in [["password", "show", "GitHub"], ["password", "list"], ["note", "show", "wi-fi"]] {
            let result = try run(command, environment: password)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("Passwords.sqlite: its integrity record or its buckets were altered"),
                          result.stderr)
            XCTAssertEqual(result.stdout, "")
        }
        XCTAssertEqual(try sqlite("Passwords.sqlite", sealRows), "0")
    }

    /// (That a read of another group does not read this one is RowAuthenticationTests', where
    /// the buckets do not depend on a random key.)
    func testABucketChangedIsCaughtByTheReadsOfItsGroupAndByCheck() throws {
        let mail = try primaryKey(of: "Mail")
        let bucket = try sqlite("Passwords.sqlite",
                                "SELECT ZBUCKET FROM MYSTASH_ROW_TAG WHERE ZTABLE = 'ZSYSTEM' AND ZPK = \(mail)")
        let group = try XCTUnwrap(Int(bucket)) / 64
        _ = try sqlite("Passwords.sqlite", "UPDATE MYSTASH_BUCKET SET ZCOUNT = ZCOUNT + 1 WHERE ZBUCKET = \(bucket)")
        let problem = "Passwords.sqlite: its buckets were altered (group \(group) does not match its seal"
        try assertRefused(["password", "show", "Mail"], naming: problem)
        try assertRefused(["password", "show", "mail", "--field", "password"], naming: problem)
        try assertRefused(["password", "list"], naming: problem)
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65)
        XCTAssertTrue(check.stdout.contains(problem), check.stdout)
    }
}
