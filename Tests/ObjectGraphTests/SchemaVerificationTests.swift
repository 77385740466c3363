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

    /// A model with what the Shop model lacks: a many-to-many (its join table has a composite
    /// key), an ordered to-many, an entity hierarchy and a uniqueness constraint.
    static func tagModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(
                name: "Post", attributes: [AttributeDescription(name: "slug", type: .string, isIndexed: true)],
                relationships: [
                    RelationshipDescription(name: "tags", destination: "Tag", inverse: "posts", isToMany: true),
                    RelationshipDescription(name: "parts", destination: "Part", inverse: "post", isToMany: true,
                                            isOrdered: true),
                ],
                uniquenessConstraints: [["slug"]]),
            EntityDescription(
                name: "Tag", attributes: [AttributeDescription(name: "label", type: .string)],
                relationships: [RelationshipDescription(name: "posts", destination: "Post", inverse: "tags",
                                                        isToMany: true)]),
            EntityDescription(name: "Part", relationships: [
                RelationshipDescription(name: "post", destination: "Post", inverse: "parts")]),
            EntityDescription(name: "Figure", parent: "Part",
                              attributes: [AttributeDescription(name: "caption", type: .string)]),
        ])
    }

    /// SQLite's own word on what `required` then `optional` make: the names of the first and
    /// every object's definition.
    func definitionsBySQLite(_ required: [String], _ optional: [String],
                             coordinator: PersistentStoreCoordinator? = nil) throws
        -> (required: Set<String>, definitions: [String: SchemaObject.Definition])
    {
        let database = try (coordinator ?? makeStack(.sqlite).coordinator).expectedSchema((required, optional))
        return (database.required, database.definitions)
    }

    /// What is foreseen from the statements' text is what SQLite keeps when it runs them, for
    /// the stores ObjectGraph makes (history and a row authentication's tables included) and
    /// for each shape the foresight reads; a shape it does not read is left to SQLite.
    func testForeseenDefinitionsAreThoseSQLiteKeeps() throws {
        let authentication = RowAuthentication.Tables(
            tags: "ROW_TAG", buckets: "ROW_BUCKET", record: "ROW_RECORD", bucketIndex: "ROW_TAG_BUCKET")
            .definitions { $0 }
        var checked = 0
        let layouts: [(ManagedObjectModel, [String?])] = [
            (try Self.shopModel(), ["Notes", "Passwords"]), (try Self.shopModel(), [nil]), (try Self.tagModel(), [nil]),
        ]
        for (model, configurations) in layouts {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            for store in try configurations.map({ configuration in
                try coordinator.addPersistentStore(
                    type: .sqlite, configuration: configuration,
                    at: directory.appendingPathComponent("\(UUID().uuidString).sqlite"))
            }) {
                let statements = coordinator.expectedStatements(of: store, extraObjects: authentication)
                let foreseen = try XCTUnwrap(SchemaObject.predictedDefinitions(
                    required: statements.required, optional: statements.optional), store.displayName)
                let sqlite = try definitionsBySQLite(statements.required, statements.optional,
                                                     coordinator: coordinator)
                XCTAssertEqual(foreseen.definitions, sqlite.definitions, store.displayName)
                XCTAssertEqual(foreseen.required, sqlite.required, store.displayName)
                checked += sqlite.definitions.count
            }
        }
        XCTAssertGreaterThan(checked, 40)
        let shapes = [
            "CREATE TABLE   \"Q\"\"x\"   ( A INTEGER PRIMARY KEY, B TEXT UNIQUE, C unique )  ;  ",
            "create table if not exists \"main\".W (A INTEGER, B BLOB UNIQUE, PRIMARY KEY (A)) WITHOUT ROWID",
            "CREATE TABLE J (A INTEGER, B INTEGER, PRIMARY KEY (A, B))",
            "CREATE TABLE K (A TEXT PRIMARY KEY, B INTEGER, UNIQUE (B, A))",
            "CREATE TABLE R (ZID INTEGER PRIMARY KEY CHECK (ZID = 1), Z BLOB)",
            "CREATE UNIQUE INDEX IF NOT EXISTS main.\"K_B\" ON K (B COLLATE NOCASE) WHERE B IS NOT NULL;",
            "CREATE INDEX J_B ON \"J\" (B DESC, A)",
        ]
        let foreseen = try XCTUnwrap(SchemaObject.predictedDefinitions(required: shapes, optional: []))
        XCTAssertEqual(foreseen.definitions, try definitionsBySQLite(shapes, []).definitions)
        XCTAssertEqual(foreseen.definitions.count, 13)
        for unread in ["CREATE TABLE D (A INTEGER PRIMARY KEY DESC)", "CREATE VIEW V AS SELECT 1",
                       "CREATE TABLE S (A TEXT DEFAULT 'x')", "CREATE TEMP TABLE T (A)",
                       "CREATE TABLE C AS SELECT 1 AS A", "CREATE TRIGGER X AFTER INSERT ON J BEGIN SELECT 1; END"] {
            XCTAssertNil(SchemaObject.predictedDefinitions(required: [unread], optional: []), unread)
        }
    }

    /// A foresight is only a shortcut: a store that differs from it in any definition goes to
    /// SQLite's comparison, which names the difference.
    func testAStoreUnlikeTheForesightIsComparedBySQLite() throws {
        let table = try XCTUnwrap(try makeStack(.sqlite).coordinator.managedObjectModel.entities(
            forConfiguration: "Passwords").first { $0.superentity == nil }).tableName
        XCTAssertEqual(try problems(after: "CREATE INDEX EXTRA_INDEX ON \(table) (Z_PK)"),
                       ["index 'EXTRA_INDEX' on \(table) was added outside ObjectGraph"])
    }

    /// A trigger may share an index's name (SQLite keeps trigger names apart): put after the
    /// trigger in `sqlite_master`, the index once hid it from the comparison.
    func testATriggerNamedLikeAnIndexIsNamed() throws {
        let url = try XCTUnwrap(try makeStack(.sqlite).passwords.url)
        let index = try XCTUnwrap(try sqlite3(url, """
            SELECT name || '|' || tbl_name || '|' || sql FROM sqlite_master
            WHERE type = 'index' AND sql IS NOT NULL ORDER BY name LIMIT 1
            """).first).split(separator: "|").map(String.init)
        let (name, table, sql) = (index[0], index[1], index[2])
        XCTAssertEqual(try problems(after: """
            CREATE TRIGGER \(name) BEFORE DELETE ON \(table) BEGIN SELECT RAISE(IGNORE); END;
            DROP INDEX \(name); \(sql);
            """), ["trigger '\(name)' on \(table) was added outside ObjectGraph: a trigger can change what a save writes"])
    }

    /// Names and definitions are compared as SQLite compares them, byte for byte: a view named
    /// with the Kelvin sign in place of a table's "K" is another object to SQLite, where Swift's
    /// `==` holds the two names equal.
    func testANameEqualOnlyUpToUnicodeIsAnotherObject() throws {
        let kelvin = "Z_PRIMARY\u{212A}EY"
        XCTAssertEqual(kelvin, "Z_PRIMARYKEY")
        let table = "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)"
        XCTAssertEqual(try problems(after: """
            CREATE VIEW "\(kelvin)" AS SELECT 1;
            CREATE TABLE KEEP AS SELECT * FROM Z_PRIMARYKEY; DROP TABLE Z_PRIMARYKEY; \(table);
            INSERT INTO Z_PRIMARYKEY SELECT * FROM KEEP; DROP TABLE KEEP;
            """), ["view 'Z_PRIMARY\\u{212a}EY' was added outside ObjectGraph: a view can stand in for what a fetch reads"])
    }

    /// SQLite's own tables pass only as SQLite defines them.
    func testSQLitesOwnTablesPassOnlyAsSQLiteDefinesThem() throws {
        XCTAssertEqual(try problems(after: "CREATE TABLE T (A INTEGER PRIMARY KEY AUTOINCREMENT); DROP TABLE T"), [])
        XCTAssertEqual(try problems(after: "ANALYZE"), [])
        XCTAssertEqual(try problems(after: """
            PRAGMA writable_schema = ON;
            UPDATE sqlite_master SET sql = 'CREATE TABLE sqlite_stat1(tbl,idx,stat,hidden)' WHERE name = 'sqlite_stat1';
            """), ["table 'sqlite_stat1' is not part of the model"])
    }

    /// What a table's columns do not show still counts: a foreign key that cascades a delete
    /// to other rows (found by a reviewer: removing one entry removed another), or a collation.
    func testAClauseTheColumnsDoNotShowIsNamed() throws {
        let model = try Self.shopModel()
        let root = try XCTUnwrap(model.entities(forConfiguration: "Passwords").first {
            $0.superentity == nil && !$0.tableToOneRelationships.isEmpty
        })
        let (table, column) = (root.tableName, try XCTUnwrap(root.tableToOneRelationships.first).columnName)
        let url = try XCTUnwrap(try makeStack(.sqlite).passwords.url)
        let sql = try XCTUnwrap(try sqlite3(url, "SELECT sql FROM sqlite_master WHERE name = '\(table)'").first)
        let stated = " \(column) INTEGER"
        XCTAssertTrue(sql.contains(stated), sql)
        for clause in [" REFERENCES \(table)(Z_PK) ON DELETE CASCADE", " COLLATE NOCASE"] {
            let changed = sql.replacingOccurrences(of: stated, with: stated + clause)
            // A collation also shows in the column's index, which is named too.
            let found = try problems(after: """
                PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '\(changed)' WHERE name = '\(table)';
                """)
            XCTAssertEqual(found.first, "table '\(table)' is defined otherwise than ObjectGraph defines it (a key, "
                           + "a constraint, a collation or a clause that its columns do not show)", clause)
            XCTAssertTrue(found.dropFirst().allSatisfy { $0.hasPrefix("index ") }, "\(found)")
            _ = try sqlite3(url, """
                PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '\(sql)' WHERE name = '\(table)';
                """)
        }
    }
}
