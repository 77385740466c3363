import Foundation
import XCTest
@testable import ObjectGraph

/// `schemaProblems()` against stores changed with sqlite3 the way an attacker or a stray tool would.
final class SchemaVerificationTests: ObjectGraphTestCase {
    /// Closes the stack, runs `sql` on the Passwords store, and returns what a new stack finds.
    func problems(after sql: String, extraObjects: (PersistentStore) -> [String] = { _ in [] }) throws -> [String] {
        var stack = try makeStack(.sqlite)
        let url = try XCTUnwrap(stack.passwords.url)
        try stack.coordinator.close()
        _ = try sqlite3(url, sql)
        stack = try makeStack(.sqlite)
        let extra = [stack.passwords.identifier: extraObjects(stack.passwords)]
        return try stack.coordinator.schemaProblems(extraObjects: extra).map(\.message)
    }

    func testANewStoreAndOneWithHistoryHaveNoProblems() throws {
        let stack = try makeStack(.sqlite)
        XCTAssertEqual(try stack.coordinator.schemaProblems(), [])
        var options = StoreOptions()
        options.tracksPersistentHistory = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
        _ = try coordinator.addPersistentStore(
            type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("history.sqlite"),
            options: options)
        XCTAssertEqual(try coordinator.schemaProblems(), [])
    }

    func testTriggersViewsAndForeignTablesAreNamed() throws {
        let table = try XCTUnwrap(try makeStack(.sqlite).coordinator.managedObjectModel.entities(
            forConfiguration: "Passwords").first { $0.superentity == nil }).tableName
        let found = try problems(after: """
            CREATE TRIGGER SNEAKY AFTER INSERT ON \(table) BEGIN SELECT 1; END;
            CREATE VIEW PEEK AS SELECT 1; CREATE TABLE EXTRA (A);
            """)
        XCTAssertEqual(found, [
            "table 'EXTRA' is not part of the model",
            "view 'PEEK' was added outside ObjectGraph: a view can stand in for what a fetch reads",
            "trigger 'SNEAKY' on \(table) was added outside ObjectGraph: a trigger can change what a save writes",
        ])
    }

    func testAddedAndDroppedColumnsAreNamed() throws {
        let stack = try makeStack(.sqlite)
        let root = try XCTUnwrap(stack.coordinator.managedObjectModel.entities(forConfiguration: "Passwords")
            .first { $0.superentity == nil })
        let column = try XCTUnwrap(root.tableAttributes.first).columnName
        try stack.coordinator.close()
        let found = try problems(after: """
            ALTER TABLE \(root.tableName) ADD COLUMN ZNEW TEXT DEFAULT 'x';
            ALTER TABLE \(root.tableName) DROP COLUMN \(column);
            """)
        XCTAssertEqual(found, ["table '\(root.tableName)' differs from the model: column \(column) is missing; "
                               + "column ZNEW was added"])
    }

    /// The caller's own objects may be absent, and must match when present.
    func testExtraObjectsMayBeAbsentButMustMatch() throws {
        let extra = { (_: PersistentStore) in ["CREATE TABLE IF NOT EXISTS MINE (A INTEGER, B BLOB)"] }
        XCTAssertEqual(try problems(after: "SELECT 1", extraObjects: extra), [])
        XCTAssertEqual(try problems(after: "CREATE TABLE MINE (A INTEGER, B BLOB)", extraObjects: extra), [])
        XCTAssertEqual(try problems(after: "DROP TABLE MINE; CREATE TABLE MINE (A INTEGER, B TEXT)",
                                    extraObjects: extra),
                       ["table 'MINE' differs from the model: column B is 'B TEXT not null 0 default none key 0 "
                        + "hidden 0', not 'B BLOB not null 0 default none key 0 hidden 0'"])
    }
}
