import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

final class StoreLayoutTests: ObjectGraphTestCase {
    private func schema(_ url: URL) throws -> [String: String] {
        let queue = try DatabaseQueue(path: url.path)
        return try queue.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").map { ($0["name"] as String, $0["sql"] as String) })
        }
    }

    func testSQLiteLayoutFollowsCoreDataConventions() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let category = context.insertNewObject(forEntityName: "Category")
        category["name"] = "Web Site"
        let system = context.insertNewObject(forEntityName: "System")
        system["userId"] = "alice"
        system["category"] = category
        try context.save()

        let passwords = try schema(stack.passwords.url!)
        XCTAssertEqual(passwords["ZSYSTEM"], "CREATE TABLE ZSYSTEM ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCATEGORY INTEGER, ZNAME VARCHAR, ZUSERID VARCHAR, ZPASSWORD BLOB, ZRANK INTEGER )")
        XCTAssertEqual(passwords["ZSYSTEM_ZCATEGORY_INDEX"], "CREATE INDEX ZSYSTEM_ZCATEGORY_INDEX ON ZSYSTEM (ZCATEGORY)")
        XCTAssertEqual(passwords["ZCATEGORY"], "CREATE TABLE ZCATEGORY ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR )")
        // Many-to-many System.tags <-> Tag.systems: System is entity 8, Tag entity 9.
        XCTAssertEqual(passwords["Z_8TAGS"], "CREATE TABLE Z_8TAGS ( Z_8SYSTEMS INTEGER, Z_9TAGS INTEGER, PRIMARY KEY (Z_8SYSTEMS, Z_9TAGS) )")
        XCTAssertEqual(passwords["Z_8TAGS_Z_9TAGS_INDEX"], "CREATE INDEX Z_8TAGS_Z_9TAGS_INDEX ON Z_8TAGS (Z_9TAGS, Z_8SYSTEMS)")
        XCTAssertEqual(passwords["Z_PRIMARYKEY"], "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)")
        XCTAssertEqual(passwords["Z_METADATA"], "CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)")
        XCTAssertNil(passwords["ZNOTE"], "a store holds tables only for its configuration's entities")

        let notes = try schema(stack.notes.url!)
        XCTAssertEqual(notes["ZANIMAL"], "CREATE TABLE ZANIMAL ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR, ZLIVES INTEGER, ZBREED VARCHAR )")
        XCTAssertNotNil(notes["ZANIMAL_Z_ENT_INDEX"])
        XCTAssertNotNil(notes["ZEVERYTHING_ZINT64_INDEX"], "indexed attribute")
        XCTAssertTrue(notes["ZEVERYTHING"]!.contains("ZDATE TIMESTAMP"))
        XCTAssertFalse(notes["ZEVERYTHING"]!.contains("ZSCRATCH"), "transient attributes have no column")
        XCTAssertNil(notes["ZSYSTEM"])

        let queue = try DatabaseQueue(path: stack.passwords.url!.path)
        try queue.read { db in
            let keys = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
            XCTAssertEqual(keys.map { $0["Z_NAME"] as String }, ["Category", "System", "Tag"])
            XCTAssertEqual(keys.map { $0["Z_ENT"] as Int }, [5, 8, 9])
            XCTAssertEqual(keys.map { $0["Z_MAX"] as Int }, [1, 1, 0])
            let row = try XCTUnwrap(try Row.fetchOne(db, sql: "SELECT Z_PK, Z_ENT, Z_OPT, ZCATEGORY FROM ZSYSTEM"))
            XCTAssertEqual(row["Z_ENT"] as Int, 8)
            XCTAssertEqual(row["Z_OPT"] as Int, 1)
            XCTAssertEqual(row["ZCATEGORY"] as Int, try Int.fetchOne(db, sql: "SELECT Z_PK FROM ZCATEGORY"))
            let metadata = try XCTUnwrap(try Row.fetchOne(db, sql: "SELECT Z_VERSION, Z_UUID, Z_PLIST FROM Z_METADATA"))
            XCTAssertEqual(metadata["Z_UUID"] as String, stack.passwords.identifier)
            let plistData: Data = metadata["Z_PLIST"]
            XCTAssertEqual(plistData.prefix(6), Data("bplist".utf8), "Z_PLIST is a binary property list")
            let plist = try XCTUnwrap(try PropertyListSerialization.propertyList(from: plistData, format: nil) as? [String: Any])
            XCTAssertEqual(plist["NSStoreType"] as? String, "SQLite")
            XCTAssertEqual(plist["NSStoreModelVersionIdentifiers"] as? [String], ["Shop 2"])
            let hashes = try XCTUnwrap(plist["NSStoreModelVersionHashes"] as? [String: Data])
            XCTAssertEqual(Set(hashes.keys), ["Category", "System", "Tag"])
            XCTAssertEqual(hashes["System"]?.count, 32)
        }
    }

    func testZOptGrowsByOneOnEverySavedUpdate() throws {
        let stack = try makeStack(.sqlite)
        let tag = stack.context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "a"
        try stack.context.save()
        tag["name"] = "b"
        try stack.context.save()
        tag["name"] = "c"
        try stack.context.save()
        let queue = try DatabaseQueue(path: stack.passwords.url!.path)
        XCTAssertEqual(try queue.read { try Int.fetchOne($0, sql: "SELECT Z_OPT FROM ZTAG") }, 3)
    }

    func testDatesAreSecondsSince2001AndBooleansAreIntegers() throws {
        let stack = try makeStack(.sqlite)
        let object = stack.context.insertNewObject(forEntityName: "Everything")
        object["date"] = Date(timeIntervalSinceReferenceDate: 1234.5)
        object["flag"] = false
        object["uuid"] = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        try stack.context.save()
        let queue = try DatabaseQueue(path: stack.notes.url!.path)
        try queue.read { db in
            let row = try XCTUnwrap(try Row.fetchOne(db, sql: "SELECT ZDATE, ZFLAG, length(ZUUID) AS uuidLength FROM ZEVERYTHING"))
            XCTAssertEqual(row["ZDATE"] as Double, 1234.5)
            XCTAssertEqual(row["ZFLAG"] as Int, 0)
            XCTAssertEqual(row["uuidLength"] as Int, 16)
        }
    }

    func testEveryAttributeTypeRoundTrips() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let object = stack.context.insertNewObject(forEntityName: "Everything")
            XCTAssertEqual(object["int16"] as? Int, 7, "default value")
            XCTAssertEqual(object["string"] as? String, "hello")
            let uuid = UUID()
            object["int32"] = 2_000_000_000
            object["int64"] = Int.max
            object["decimal"] = Decimal(string: "12.5")!
            object["double"] = 2.25
            object["float"] = Float(0.5)
            object["flag"] = false
            object["date"] = Date(timeIntervalSinceReferenceDate: 99)
            object["blob"] = Data([0, 1, 2])
            object["uuid"] = uuid
            object["uri"] = URL(string: "https://example.org/a")!
            object["list"] = ["a", "b"]
            object["scratch"] = "not stored"
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let fetched = try XCTUnwrap(try other.objects("Everything").first)
            XCTAssertEqual(fetched["int32"] as? Int, 2_000_000_000)
            XCTAssertEqual(fetched["int64"] as? Int, Int.max)
            XCTAssertEqual(fetched["decimal"] as? Decimal, Decimal(string: "12.5"))
            XCTAssertEqual(fetched["double"] as? Double, 2.25)
            XCTAssertEqual(fetched["float"] as? Float, 0.5)
            XCTAssertEqual(fetched["flag"] as? Bool, false)
            XCTAssertEqual(fetched["date"] as? Date, Date(timeIntervalSinceReferenceDate: 99))
            XCTAssertEqual(fetched["blob"] as? Data, Data([0, 1, 2]))
            XCTAssertEqual(fetched["uuid"] as? UUID, uuid)
            XCTAssertEqual(fetched["uri"] as? URL, URL(string: "https://example.org/a"))
            XCTAssertEqual(fetched["list"] as? [String], ["a", "b"])
            XCTAssertNil(fetched["scratch"], "transient values are not stored")
        }
    }

    func testEachConfigurationGoesToItsOwnStore() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let note = stack.context.insertNewObject(forEntityName: "Note")
            note["title"] = "n"
            let tag = stack.context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "t"
            try stack.context.save()
            XCTAssertEqual(note.objectID.storeIdentifier, stack.notes.identifier)
            XCTAssertEqual(tag.objectID.storeIdentifier, stack.passwords.identifier)
            XCTAssertTrue(stack.coordinator.persistentStore(for: note.entity) === stack.notes)
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try other.objects("Note").count, 1)
            XCTAssertEqual(try other.names("Tag"), ["t"])
        }
    }

    func testStoreFilesAreCreatedOwnerOnly() throws {
        let stack = try makeStack(.sqlite)
        for url in [stack.notes.url!, stack.passwords.url!] {
            let mode = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o600, url.lastPathComponent)
        }
    }
}
