import Foundation
import XCTest
@testable import ObjectGraph

/// Row versions a damaged store holds (negative, past 53 bits), on every path that reads or
/// compares them: written by an outside review of the version's packing, which found deletes
/// refused or dropped and merges re-reading such a row each time.
final class RowVersionRangeTests: BoardTestCase {
    static let largest = ManagedObject.largestRowNumber
    static let outOfRange = ["\(largest + 1)", "9223372036854775807", "\(-largest - 2)", "-9223372036854775808"]
    static let policies: [MergePolicy] = [.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump,
                                          .overwrite, .rollback]

    private func store(_ name: String, items: [String], after sql: String) throws -> (URL, ManagedObjectContext) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("\(name).sqlite"))
        let context = try makeBoard(.sqlite, name: name)
        for item in items { context.insertNewObject(forEntityName: "Item")["name"] = item }
        try context.save()
        let url = directory.appendingPathComponent("\(name).sqlite")
        _ = try runSQLite3([url.path, sql])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: context.model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return (url, ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter()))
    }

    private func sql(_ url: URL, _ query: String) throws -> String {
        String(decoding: try runSQLite3([url.path, query]), as: UTF8.self)
    }

    /// A row whose version is out of range is deleted under every merge policy, as one at
    /// exactly 2^52 - 1 is. Compared raw with the version its object keeps, it was a merge
    /// conflict every time under .error (a refresh and retry too), and dropped under rollback and
    /// store trump.
    func testDeleteOfARowWithAVersionOutOfRange() throws {
        for stored in ["\(Self.largest)"] + Self.outOfRange {
            for policy in Self.policies {
                let (url, context) = try store("del", items: ["a"], after: "UPDATE ZITEM SET Z_OPT = \(stored)")
                context.mergePolicy = policy
                let item = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).first)
                context.delete(item)
                var outcome: String
                do {
                    try context.save()
                    outcome = "saved"
                } catch {
                    outcome = "threw \(error)"
                    // The usual answer to a merge conflict: refresh, delete again, save again.
                    if "\(error)".contains("merge conflict") {
                        try context.refresh(item, mergeChanges: false)
                        context.delete(item)
                        do { try context.save() } catch { outcome += " | after refresh: threw again" }
                    }
                }
                let count = try sql(url, "SELECT count(*) FROM ZITEM")
                XCTAssertEqual(count, "0\n", "Z_OPT=\(stored) \(policy): \(outcome)")
            }
        }
    }

    /// A merge of another row's outside change leaves an object whose row version is out of
    /// range alone. Compared raw, the row looked moved at every merge: reported as updated, and
    /// under .rollback the object's unsaved changes were thrown away.
    func testMergeOfExternalChangesLeavesAnUnmovedRowAlone() throws {
        for stored in Self.outOfRange {
            for policy in Self.policies {
                let (url, context) = try store(
                    "merge", items: ["a", "b"], after: "UPDATE ZITEM SET Z_OPT = \(stored) WHERE ZNAME = 'a'")
                context.mergePolicy = policy
                let items = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
                let a = try XCTUnwrap(items.first { $0["name"] as? String == "a" })
                a["rank"] = 7
                XCTAssertFalse(try context.mergeExternalChanges())
                context.processPendingChanges()
                final class Box: @unchecked Sendable { var updated: [ManagedObject] = [] }
                let box = Box()
                let observer = context.notificationCenter.addObserver(
                    forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil
                ) { note in
                    box.updated += note.userInfo?[ManagedObjectContext.updatedObjectsKey] as? [ManagedObject] ?? []
                }
                defer { context.notificationCenter.removeObserver(observer) }
                _ = try sql(url, "UPDATE ZITEM SET ZNAME = 'b2', Z_OPT = Z_OPT + 1 WHERE ZNAME = 'b'")
                XCTAssertTrue(try context.mergeExternalChanges())
                XCTAssertEqual(a["rank"] as? Int, 7, "Z_OPT=\(stored) \(policy): unsaved change kept")
                XCTAssertFalse(box.updated.contains { $0 === a }, "Z_OPT=\(stored) \(policy): reported as updated")
            }
        }
    }

    /// Faults, refresh, undo, child contexts and a uniqueness adoption over odd versions: no trap.
    func testOtherPathsOverOddVersions() throws {
        for stored in ["\(Self.largest)", "\(Self.largest - 1)", "-1"] + Self.outOfRange {
            let (url, context) = try store("paths", items: ["a"], after: "UPDATE ZITEM SET Z_OPT = \(stored)")
            context.undoManager = ContextUndoManager()
            context.mergePolicy = .overwrite
            var request = FetchRequest<ManagedObject>(entityName: "Item")
            request.returnsObjectsAsFaults = true
            let item = try XCTUnwrap(try context.fetch(request).first)
            XCTAssertEqual(item["name"] as? String, "a")
            _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
            item["rank"] = 3
            try context.refresh(item, mergeChanges: true)
            XCTAssertEqual(item["rank"] as? Int, 3)
            // A child edits and deletes through its parent.
            let child = ManagedObjectContext(parent: context)
            let theirs = try XCTUnwrap(try child.fetch(FetchRequest<ManagedObject>(entityName: "Item")).first)
            theirs["name"] = "child"
            try child.save()
            XCTAssertEqual(item["name"] as? String, "child")
            if stored == "\(Self.largest - 1)" || stored == "-1" {
                try context.save()
            } else {
                XCTAssertThrowsError(try context.save()) { XCTAssertTrue("\($0)".contains("cannot grow"), "\($0)") }
                context.rollback()
            }
            context.delete(item)
            try context.save()
            XCTAssertEqual(try sql(url, "SELECT count(*) FROM ZITEM"), "0\n")
            context.undoManager?.undo()
            try context.save()
            XCTAssertEqual(try sql(url, "SELECT Z_OPT FROM ZITEM"), "1\n", stored)
        }
    }

    /// storedNumber's sign extension and mask at every edge, with every flag set around it.
    func testStoredNumberEdges() throws {
        let entity = EntityDescription(name: "Thing", attributes: [AttributeDescription(name: "n", type: .integer64)])
        _ = try ManagedObjectModel(entities: [entity])
        let object = ManagedObject(entity: entity)
        let l = Self.largest
        var edges: [Int64] = [-l - 1, -l, -l + 1, -(1 << 51) - 1, -(1 << 51), -(1 << 51) + 1, -2, -1, 0, 1, 2,
                              (1 << 51) - 1, 1 << 51, (1 << 51) + 1, l - 1, l]
        for bit in 0..<52 { edges += [1 << bit, -(1 << bit), (1 << bit) - 1, -(1 << bit) - 1] }
        for flags in [false, true] {
            object.isFault = flags
            object.isPendingInsert = flags
            object.isPreparedForDeletion = flags
            object.hasJoinedToMany = flags
            object.memberships = ObjectSet.Membership(rawValue: flags ? 0x3F : 0)
            for edge in edges {
                object.version = edge
                XCTAssertEqual(object.version, edge)
                XCTAssertNil(object.pendingPrimaryKey)
                XCTAssertEqual(object.isFault, flags)
                XCTAssertEqual(object.isPendingInsert, flags)
                XCTAssertEqual(object.isPreparedForDeletion, flags)
                XCTAssertEqual(object.hasJoinedToMany, flags)
                XCTAssertEqual(object.memberships.rawValue, flags ? 0x3F : 0)
                if edge >= 0 {
                    object.pendingPrimaryKey = edge
                    XCTAssertEqual(object.pendingPrimaryKey, edge)
                    XCTAssertEqual(object.version, 0)
                    XCTAssertEqual(object.isFault, flags)
                    XCTAssertEqual(object.memberships.rawValue, flags ? 0x3F : 0)
                    object.pendingPrimaryKey = nil
                    XCTAssertEqual(object.version, 0)
                }
            }
        }
        XCTAssertEqual(ManagedObject.rowVersions, -(1 << 52)...(1 << 52) - 2)
    }
}
