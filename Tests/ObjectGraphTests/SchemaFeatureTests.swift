import Foundation
import GRDB
import XCTest

@testable import ObjectGraph

/// Schema features of Apple's stores: transient defaults on fetched objects, and WAL files
/// in a coordinator with several stores.
final class SchemaFeatureTests: ObjectGraphTestCase {
    func model() throws -> ManagedObjectModel {
        try xmlModel(
            """
                <entity name="Note">
                    <attribute name="text" optional="YES" attributeType="String"/>
                    <attribute name="isSelected" optional="YES" transient="YES" attributeType="Boolean"
                        defaultValueString="YES"/>
                    <attribute name="label" optional="YES" transient="YES" attributeType="String"
                        defaultValueString="new"/>
                </entity>
                <entity name="Tag">
                    <attribute name="name" optional="YES" attributeType="String"/>
                </entity>
                <configuration name="Notes"><memberEntity name="Note"/></configuration>
                <configuration name="Tags"><memberEntity name="Tag"/></configuration>
            """)
    }

    func testTransientAttributesHaveTheirDefaultsOnFetchedObjects() throws {
        let url = directory.appendingPathComponent("notes.sqlite")
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
            try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            let note = context.insertNewObject(forEntityName: "Note")
            note["text"] = "a"
            note["label"] = "changed, not saved"
            try context.save()
            try coordinator.close()
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let note = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Note")).first)
        XCTAssertEqual(note["isSelected"] as? Bool, true)
        XCTAssertEqual(note["label"] as? String, "new")
        // A value set on the fetched object survives its refresh from the row.
        note["label"] = "kept"
        try context.refresh(note, mergeChanges: true)
        XCTAssertEqual(note["label"] as? String, "kept")
    }

    func journalMode(_ url: URL) throws -> String {
        String(decoding: try runSQLite3([url.path, "PRAGMA journal_mode"]), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Two stores, the second switched to WAL with sqlite3 (as Apple's Core Data leaves them).
    func makeStores() throws -> (notes: URL, tags: URL) {
        let notes = directory.appendingPathComponent("notes.sqlite")
        let tags = directory.appendingPathComponent("tags.sqlite")
        for (url, configuration) in [(notes, "Notes"), (tags, "Tags")] {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
            try coordinator.addPersistentStore(type: .sqlite, configuration: configuration, at: url)
            try coordinator.close()
        }
        _ = try runSQLite3([tags.path, "PRAGMA journal_mode = WAL"])
        XCTAssertEqual(try journalMode(tags), "wal")
        return (notes, tags)
    }

    func testASecondStoreSwitchesWALFilesToARollbackJournal() throws {
        let (notes, tags) = try makeStores()
        // One store alone keeps its WAL.
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
            try coordinator.addPersistentStore(type: .sqlite, configuration: "Tags", at: tags)
            try coordinator.close()
            XCTAssertEqual(try journalMode(tags), "wal")
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Tags", at: tags)
        XCTAssertEqual(try journalMode(tags), "delete")
        let context = ManagedObjectContext(coordinator: coordinator)
        context.insertNewObject(forEntityName: "Note")["text"] = "n"
        context.insertNewObject(forEntityName: "Tag")["name"] = "t"
        try context.save()
        try coordinator.close()
        XCTAssertEqual(String(decoding: try runSQLite3([tags.path, "SELECT ZNAME FROM ZTAG"]), as: UTF8.self), "t\n")
    }

    /// A read takes every store's shared lock at its start, in the order a save commits them.
    /// Taken as each store was first read, a read could hold the second store while waiting for
    /// the first, which a committing save held while waiting for the second: both waited until
    /// the busy timeout, and the command failed as if the vault were busy.
    func testAReadHoldsEveryStoresSharedLockFromItsStart() throws {
        let (notes, tags) = try makeStores()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Tags", at: tags)
        let reader = try XCTUnwrap(try coordinator.makeReader())
        var configuration = Configuration()
        configuration.busyMode = .timeout(0)
        let writers = try [notes, tags].map { try DatabaseQueue(path: $0.path, configuration: configuration) }
        func writableStores() -> [Bool] {
            writers.map { writer in
                (try? writer.inDatabase { db -> Void in
                    try db.execute(sql: "BEGIN EXCLUSIVE")
                    try db.execute(sql: "ROLLBACK")
                }) != nil
            }
        }
        XCTAssertEqual(writableStores(), [true, true])
        // Nothing read yet inside either: both stores are locked for reading already.
        XCTAssertEqual(try coordinator.performRead { _ in writableStores() }, [false, false])
        XCTAssertEqual(try reader.performRead { _ in writableStores() }, [false, false])
        XCTAssertEqual(writableStores(), [true, true])
    }

    func testWithoutAtomicSavesWALFilesStayAndAStoreThatCannotSwitchIsRefused() throws {
        let (notes, tags) = try makeStores()
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
            coordinator.atomicSavesAcrossStores = false
            try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
            try coordinator.addPersistentStore(type: .sqlite, configuration: "Tags", at: tags)
            try coordinator.close()
            XCTAssertEqual(try journalMode(tags), "wal")
        }
        // Another connection reading the WAL file: it cannot leave WAL, so the store is refused.
        let other = try DatabaseQueue(path: tags.path)
        try other.read { db in
            _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ZTAG")
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(), busyTimeout: 0)
            try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
            XCTAssertThrowsError(try coordinator.addPersistentStore(type: .sqlite, configuration: "Tags", at: tags)) {
                let error = $0 as? ObjectGraphError
                XCTAssertEqual(error?.code, .storeOpenFailed)
                XCTAssertTrue(error?.message.contains("'tags.sqlite' is in WAL mode") == true, "\($0)")
            }
            // The refused store left the coordinator usable.
            XCTAssertEqual(coordinator.persistentStores.count, 1)
            XCTAssertNoThrow(
                try ManagedObjectContext(coordinator: coordinator).fetch(
                    FetchRequest<ManagedObject>(entityName: "Note")))
        }
        XCTAssertEqual(try journalMode(tags), "wal")
    }
}

/// `Z<n>_<REL>` entity columns beside to-one relationships into entity hierarchies.
final class EntityColumnTests: ObjectGraphTestCase {
    func model() throws -> ManagedObjectModel {
        try xmlModel(
            """
                <entity name="Car">
                    <attribute name="plate" optional="YES" attributeType="String"/>
                    <relationship name="driver" optional="YES" maxCount="1" deletionRule="Nullify"
                        destinationEntity="Person" inverseName="car"/>
                </entity>
                <entity name="SportCar" parentEntity="Car"/>
                <entity name="Person">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <relationship name="car" optional="YES" maxCount="1" deletionRule="Nullify"
                        destinationEntity="Car" inverseName="driver"/>
                </entity>
            """)
    }

    func testEntityColumnsAreWrittenAndReadAsCoreDataDoes() throws {
        let url = directory.appendingPathComponent("cars.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model())
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let person = context.insertNewObject(forEntityName: "Person")
        let sport = context.insertNewObject(forEntityName: "SportCar")
        person["car"] = sport
        try context.save()
        func row() throws -> String {
            String(decoding: try runSQLite3([url.path, "SELECT ZCAR, Z3_CAR FROM ZPERSON"]), as: UTF8.self)
        }
        // Car 1, SportCar 2, Person 3: the column holds the destination's entity number.
        XCTAssertEqual(try row(), "1|2\n")
        let plain = context.insertNewObject(forEntityName: "Car")
        person["car"] = plain
        try context.save()
        XCTAssertEqual(try row(), "2|1\n")
        person["car"] = nil
        try context.save()
        XCTAssertEqual(try row(), "|\n")
        // A row written by another tool with the column set reads through to the right sub-entity.
        _ = try runSQLite3([url.path, "UPDATE ZPERSON SET ZCAR = 1, Z3_CAR = 2, Z_OPT = Z_OPT + 1"])
        try coordinator.close()
        let reopened = PersistentStoreCoordinator(managedObjectModel: try model())
        try reopened.addPersistentStore(type: .sqlite, at: url)
        let fresh = ManagedObjectContext(coordinator: reopened)
        let read = try XCTUnwrap(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Person")).first)
        XCTAssertEqual((try read.loadedValue(forKey: "car") as? ManagedObject)?.entity.name, "SportCar")
    }
}

/// Derived attributes of Apple's stores: the triggers Core Data creates for them (written here
/// with sqlite3 as Core Data writes them) call SQL functions ObjectGraph provides.
final class DerivedAttributeTests: ObjectGraphTestCase {
    static let triggers = """
        CREATE TRIGGER Z_DA_ZITEM_Item_createdAt_INSERT AFTER INSERT ON ZITEM FOR EACH ROW BEGIN
        UPDATE ZITEM SET ZCREATEDAT = NSCoreDataNow() WHERE Z_PK = NEW.Z_PK;
        SELECT NSCoreDataDATriggerInsertUpdatedAffectedObjectValue('ZITEM', Z_ENT, Z_PK, 'createdAt', ZCREATEDAT)
        FROM ZITEM WHERE Z_PK = NEW.Z_PK; END;
        CREATE TRIGGER Z_DA_ZITEM_Item_attachmentCount_INSERT AFTER INSERT ON ZATTACHMENT FOR EACH ROW BEGIN
        UPDATE ZITEM SET ZATTACHMENTCOUNT = (SELECT IFNULL(COUNT(Z_PK), 0) FROM ZATTACHMENT WHERE ZITEM = NEW.ZITEM)
        WHERE Z_PK = NEW.ZITEM;
        SELECT NSCoreDataDATriggerUpdatedAffectedObjectValue('ZITEM', Z_ENT, Z_PK, 'attachmentCount', ZATTACHMENTCOUNT)
        FROM ZITEM WHERE Z_PK = NEW.ZITEM; END;
        """

    func testInsertsIntoAStoreWithDerivedAttributeTriggersWorkAndObjectsSeeTheDerivedValues() throws {
        let model = try xmlModel(
            """
            <entity name="Attachment">
                <relationship name="item" optional="YES" maxCount="1" deletionRule="Nullify"
                    destinationEntity="Item" inverseName="attachments"/>
            </entity>
            <entity name="Item">
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="createdAt" optional="YES" attributeType="Date" derived="YES"
                    derivationExpression="now()"/>
                <attribute name="attachmentCount" optional="YES" attributeType="Integer 64" derived="YES"
                    derivationExpression="attachments.@count"/>
                <relationship name="attachments" optional="YES" toMany="YES" deletionRule="Cascade"
                    destinationEntity="Attachment" inverseName="item"/>
            </entity>
            """)
        let url = directory.appendingPathComponent("items.sqlite")
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            try coordinator.close()
        }
        _ = try runSQLite3([url.path, Self.triggers])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let before = Date()
        let item = context.insertNewObject(forEntityName: "Item")
        item["name"] = "a"
        for _ in 0..<2 { context.insertNewObject(forEntityName: "Attachment")["item"] = item }
        try context.save()
        let stored = String(
            decoding: try runSQLite3([url.path, "SELECT ZATTACHMENTCOUNT, ZCREATEDAT FROM ZITEM"]), as: UTF8.self)
        let fields = stored.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
        XCTAssertEqual(fields.first, "2")
        let created = try XCTUnwrap(fields.last.flatMap { Double($0) })
        XCTAssertEqual(created, before.timeIntervalSinceReferenceDate, accuracy: 60)
        // The object saved sees what the triggers derived, without a refetch.
        XCTAssertEqual(item["attachmentCount"] as? Int, 2)
        // (sqlite3 prints 15 significant digits)
        let derived = try XCTUnwrap(item["createdAt"] as? Date)
        XCTAssertEqual(derived.timeIntervalSinceReferenceDate, created, accuracy: 0.001)
        XCTAssertFalse(item.hasChanges)
        context.insertNewObject(forEntityName: "Attachment")["item"] = item
        try context.save()
        XCTAssertEqual(item["attachmentCount"] as? Int, 3)
    }
}
