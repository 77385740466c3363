import Foundation
import GRDB
import XCTest

@testable import ObjectGraph

/// Schema features of Apple's stores: transient defaults on fetched objects, and WAL files
/// in a coordinator with several stores.
final class SchemaFeatureTests: ObjectGraphTestCase {
    func model() throws -> ManagedObjectModel {
        let xml = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
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
            </model>
            """
        return try ManagedObjectModel(
            xcdatamodeldFiles: ["M.xcdatamodel/contents": Data(xml.utf8)], modelName: "M.xcdatamodeld")
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
