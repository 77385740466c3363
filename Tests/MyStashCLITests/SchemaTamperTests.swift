import Foundation
import XCTest

/// Changes to a store's schema made offline with sqlite3 — triggers, views, columns, indexes —
/// which no row tag can see: every command refuses the vault, and check names the change.
final class SchemaTamperTests: CLITestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try initVault()
        try runOK(["password", "add", "Bank", "--category", "Banking"], stdin: "old-secret\n")
        try runOK(["password", "edit", "Bank", "--new-password"], stdin: "new-secret\n")
        try runOK(["note", "add", "Wi-Fi"], stdin: "code 1234")
    }

    static let readingAndWriting: [[String]] = [
        ["password", "show", "Bank"], ["password", "list"], ["category", "list"], ["note", "list"], ["export"],
        ["password", "edit", "Bank", "--new-password"], ["password", "add", "Other"],
    ]

    /// Every command fails with 65 naming `problem`; check lists it and exits 65.
    func assertRefused(_ problem: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for command in Self.readingAndWriting {
            let result = try run(command, stdin: "typed-secret\n")
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)", file: file, line: line)
            XCTAssertTrue(result.stderr.contains("schema was changed outside mystash"), result.stderr, file: file,
                          line: line)
            XCTAssertTrue(result.stderr.contains(problem), "\(command): \(result.stderr)", file: file, line: line)
            XCTAssertEqual(result.stdout, "", "\(command) showed something", file: file, line: line)
        }
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65, check.stderr, file: file, line: line)
        XCTAssertTrue(check.stdout.contains(problem), check.stdout, file: file, line: line)
        XCTAssertFalse(check.stderr.contains("SQLite error"), check.stderr, file: file, line: line)
    }

    /// The attack from the issue: a trigger puts the old ciphertext back after every update, so
    /// a new password would be replaced by the old one and re-tagged as genuine.
    func testATriggerThatPutsTheOldPasswordBackIsRefused() throws {
        let old = try sqlite("Passwords.sqlite", "SELECT hex(ZPASSWORD) FROM ZPASSWORDHISTORY LIMIT 1")
        _ = try sqlite(
            "Passwords.sqlite",
            "CREATE TRIGGER KEEP_OLD AFTER UPDATE ON ZSYSTEM BEGIN "
                + "UPDATE ZSYSTEM SET ZPASSWORD = X'\(old)' WHERE Z_PK = NEW.Z_PK; END")
        try assertRefused("Passwords.sqlite: trigger 'KEEP_OLD' on ZSYSTEM was added outside ObjectGraph")
        _ = try sqlite("Passwords.sqlite", "DROP TRIGGER KEEP_OLD")
        XCTAssertEqual(try runOK(["password", "show", "Bank", "--field", "password"]).stdout, "new-secret\n")
        XCTAssertEqual(try run(["check"]).status, 0)
    }

    /// Found by a reviewer: a trigger named like one of the model's indexes, the index dropped
    /// and made again after it, once hid behind the index, and a delete left the entry in place.
    func testATriggerNamedLikeAnIndexIsRefused() throws {
        let index = "ZSYSTEM_ZUUID_INDEX"
        let definition = try sqlite("Passwords.sqlite", "SELECT sql FROM sqlite_master WHERE name = '\(index)'")
        XCTAssertTrue(definition.hasPrefix("CREATE INDEX \(index) ON ZSYSTEM"), definition)
        _ = try sqlite(
            "Passwords.sqlite",
            "CREATE TRIGGER \(index) BEFORE DELETE ON ZSYSTEM BEGIN SELECT RAISE(IGNORE); END; "
                + "DROP INDEX \(index); \(definition);")
        try assertRefused("Passwords.sqlite: trigger '\(index)' on ZSYSTEM was added outside ObjectGraph")
    }

    /// Found by a reviewer: a foreign key written into ZSYSTEM's definition (its columns look the
    /// same) made removing one entry remove every entry whose category had that entry's number.
    func testAForeignKeyWrittenIntoATableIsRefused() throws {
        let sql = try sqlite("Passwords.sqlite", "SELECT sql FROM sqlite_master WHERE name = 'ZSYSTEM'")
        XCTAssertTrue(sql.contains(" ZCATEGORY INTEGER,"), sql)
        let changed = sql.replacingOccurrences(
            of: " ZCATEGORY INTEGER,", with: " ZCATEGORY INTEGER REFERENCES ZSYSTEM(Z_PK) ON DELETE CASCADE,")
        _ = try sqlite(
            "Passwords.sqlite",
            "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '\(changed)' WHERE name = 'ZSYSTEM';")
        try assertRefused("Passwords.sqlite: table 'ZSYSTEM' is defined otherwise than ObjectGraph defines it")
    }

    func testAViewStandingInForATableIsRefused() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "ALTER TABLE ZCATEGORY RENAME TO ZREAL; CREATE VIEW ZCATEGORY AS SELECT * FROM ZREAL WHERE Z_PK > 1")
        try assertRefused("'ZCATEGORY' is a view where the model has a table: a view can stand in for what a fetch reads")
    }

    /// Dropped, check said "SQLite error 1"; now it names the table, exit 65.
    func testADroppedTableIsNamed() throws {
        _ = try sqlite("Passwords.sqlite", "DROP TABLE ZLIST")
        try assertRefused("Passwords.sqlite: table 'ZLIST' is missing")
    }

    func testAnIndexThatHidesRowsIsRefused() throws {
        _ = try sqlite(
            "Passwords.sqlite",
            "DROP INDEX ZFIELD_ZENTRY_INDEX; CREATE INDEX ZFIELD_ZENTRY_INDEX ON ZFIELD (ZENTRY) WHERE ZENTRY < 0")
        try assertRefused("index 'ZFIELD_ZENTRY_INDEX' on ZFIELD differs from the one ObjectGraph creates")
    }

    func testAnAddedColumnAndAChangedDefaultAreRefused() throws {
        _ = try sqlite("Notes.sqlite", "ALTER TABLE ZNOTE ADD COLUMN ZSPY BLOB DEFAULT X'00'")
        try assertRefused("Notes.sqlite: table 'ZNOTE' differs from the model: column ZSPY was added")
    }

    /// Dropping both stores' record tables switched the integrity record off (the vault passed
    /// for one made before it); the key slot now says the vault has one.
    func testRemovingBothRecordsIsTampering() throws {
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            _ = try sqlite(store, "DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_RECORD; DROP TABLE MYSTASH_BUCKET")
        }
        _ = try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZCATEGORY = (SELECT Z_PK FROM ZCATEGORY WHERE "
                           + "ZNAME = 'Shopping')")
        for command in [["password", "show", "Bank"], ["password", "list"], ["export"], ["note", "list"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("its integrity record was removed outside mystash"), result.stderr)
            XCTAssertEqual(result.stdout, "")
        }
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65)
        XCTAssertTrue(check.stdout.contains("Passwords.sqlite: its integrity record was removed outside mystash"),
                      check.stdout)
    }
}
