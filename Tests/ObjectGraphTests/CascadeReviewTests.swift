import Foundation
import XCTest
@testable import ObjectGraph

/// An outside review's attacks on a cascade deleting unread children as faults (and on the
/// undo of saved deletions): versions brought up to the rows, another process's late link
/// refused, tombstones of deleted faults, undo across saves.
final class CascadeReviewTests: XCTestCase {
    // MARK: - Stale versions: a cascade no longer reads the rows it deletes

    /// A batch update in the same context turns its registered children into faults (keeping the
    /// versions they had); deleting their parent afterwards must not report a conflict.
    func testDeletingAParentAfterABatchUpdateOfItsChildren() throws {
        let store = try CascadeFamily(children: 10)
        defer { store.remove() }
        let context = store.context()
        _ = try store.children(in: context)  // registered, as a list on screen would hold them
        try context.execute(BatchUpdateRequest(entityName: "Child", propertiesToUpdate: ["number": 7]))
        context.delete(try store.parent("big", in: context))
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try store.childCount(), 0)
    }

    /// Children registered (unchanged) in this context, one changed and saved by another
    /// context: nothing here changed, and the cascade used to read the rows it deleted.
    func testDeletingAParentWhoseRegisteredChildWasChangedElsewhere() throws {
        try deleteParentAfterAChildChangedElsewhere(childrenAsFaults: false)
    }

    /// The same with children fetched as faults (their versions known from the fetch).
    func testDeletingAParentWhoseChildFaultWasChangedElsewhere() throws {
        try deleteParentAfterAChildChangedElsewhere(childrenAsFaults: true)
    }

    private func deleteParentAfterAChildChangedElsewhere(childrenAsFaults: Bool) throws {
        let store = try CascadeFamily(children: 10)
        defer { store.remove() }
        let context = store.context()
        let registered = try store.children(in: context, asFaults: childrenAsFaults)
        XCTAssertEqual(registered.allSatisfy(\.isFault), childrenAsFaults)
        let elsewhere = store.context()
        let changed = try XCTUnwrap(try store.children(in: elsewhere).first { $0["number"] as? Int == 3 })
        changed["number"] = 333
        try elsewhere.save()
        context.delete(try store.parent("big", in: context))
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try store.childCount(), 0)
    }

    /// A parent refreshed into a fault (to drop what another context made stale), then deleted:
    /// its fault is no longer fired by its cascade, so its old version is compared.
    func testDeletingARefreshedParentChangedElsewhere() throws {
        let store = try CascadeFamily(children: 5)
        defer { store.remove() }
        let context = store.context()
        let big = try store.parent("big", in: context)
        let elsewhere = store.context()
        try store.parent("big", in: elsewhere)["name"] = "renamed"
        try elsewhere.save()
        try context.refresh(big, mergeChanges: false)
        context.delete(big)
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try store.childCount(), 0)
    }

    /// Another process (a second coordinator on the file) moves a child into the parent after this
    /// context's delete was processed (objectsDidChange told of the cascade) but before its save.
    /// The cascade saw the parent's children already; the late one must not be deleted silently
    /// (enforceDeleteRules: "a merge conflict for Cascade (the rows to cascade to were not seen)").
    func testAChildMovedInByAnotherProcessAfterTheCascadeIsNotDeletedSilently() throws {
        let store = try CascadeFamily(children: 3)
        defer { store.remove() }
        let second = PersistentStoreCoordinator(managedObjectModel: store.model)
        try second.addPersistentStore(type: .sqlite, at: store.url)
        let elsewhere = ManagedObjectContext(coordinator: second)
        let late = elsewhere.insertNewObject(forEntityName: "Child")
        late["number"] = 99
        late["parent"] = try store.parent("other", in: elsewhere)
        try elsewhere.save()

        let context = store.context()
        let announced = Box<Int>(0)
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil
        ) { notification in
            let deleted = notification.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? []
            announced.value += deleted.filter { $0.entity.name == "Child" }.count
        }
        defer { context.notificationCenter.removeObserver(observer) }
        context.delete(try store.parent("big", in: context))
        context.processPendingChanges()
        XCTAssertEqual(announced.value, 3, "the cascade as the user was told of it")

        late["parent"] = try store.parent("big", in: elsewhere)
        try elsewhere.save()

        XCTAssertThrowsError(try context.save(), "the moved child was deleted without a conflict")
        let survivors = try store.children(in: store.context()).compactMap { $0["number"] as? Int }
        XCTAssertTrue(survivors.contains(99), "child 99, moved by another process, is gone: \(survivors)")
    }

    // MARK: - Persistent history

    /// A parent deleted while a fault: its tombstone keeps the preserved attribute.
    func testATombstoneOfAParentDeletedAsAFault() throws {
        let store = try CascadeFamily(children: 3, preserveName: true, history: true)
        defer { store.remove() }
        let context = store.context()
        let big = try store.parent("big", in: context, asFault: true)
        XCTAssertTrue(big.isFault)
        let id = big.objectID
        context.delete(big)
        try context.save()
        let history = try context.fetchHistory(after: nil)
        let deletion = try XCTUnwrap(history.last?.changes.first { $0.changedObjectID == id })
        XCTAssertEqual(deletion.changeType, .delete)
        XCTAssertEqual(deletion.tombstone?["name"] as? String, "big", "the tombstone lost the preserved name")
    }

    /// An object whose only relationship has No Action, deleted while a fault: its tombstone keeps
    /// the preserved attribute (no cascade involved: propagateDeletes no longer reads No Action
    /// relationships, which fired the fault).
    func testATombstoneOfANoActionObjectDeletedAsAFault() throws {
        var title = AttributeDescription(name: "title", type: .string)
        title.preservesValueInHistoryOnDeletion = true
        let note = EntityDescription(
            name: "Note", attributes: [title],
            relationships: [RelationshipDescription(
                name: "folder", destination: "Folder", inverse: "notes", deleteRule: .noAction)])
        let folder = EntityDescription(
            name: "Folder", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "notes", destination: "Note", inverse: "folder", isToMany: true, deleteRule: .cascade)])
        let model = try ManagedObjectModel(entities: [note, folder])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("review-\(UUID().uuidString).sqlite")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.tracksPersistentHistory = true
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let writer = ManagedObjectContext(coordinator: coordinator)
        let box = writer.insertNewObject(forEntityName: "Folder")
        box["name"] = "box"
        let written = writer.insertNewObject(forEntityName: "Note")
        written["title"] = "secret plan"
        written["folder"] = box
        try writer.save()

        let context = ManagedObjectContext(coordinator: coordinator)
        var request = FetchRequest<ManagedObject>(entityName: "Note")
        request.returnsObjectsAsFaults = true
        let fault = try XCTUnwrap(try context.fetch(request).first)
        XCTAssertTrue(fault.isFault)
        let id = fault.objectID
        context.delete(fault)
        try context.save()
        let deletion = try XCTUnwrap(
            try context.fetchHistory(after: nil).last?.changes.first { $0.changedObjectID == id })
        XCTAssertEqual(deletion.tombstone?["title"] as? String, "secret plan", "the tombstone lost the preserved title")
    }

    // MARK: - Observers

    /// A didSave observer reading the children a cascade deleted: those never read were deleted
    /// as faults and, gone from the context, give no values (as Core Data's deleted objects after a
    /// save); one read before the save keeps what was read. Before the save they read their rows
    /// (`CascadeDeleteTests.testADeletedFaultReadsItsRowUntilTheSave`).
    func testADidSaveObserverReadsOnlyTheDeletedChildrenItRead() throws {
        let store = try CascadeFamily(children: 5)
        defer { store.remove() }
        let context = store.context()
        let seen = Box<[Int?]>([])
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { notification in
            let deleted = notification.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? []
            seen.value = deleted.filter { $0.entity.name == "Child" }.map { $0["number"] as? Int }
        }
        defer { context.notificationCenter.removeObserver(observer) }
        var request = FetchRequest<ManagedObject>(entityName: "Child")
        request.predicate = try ObjectGraph.Predicate(format: "number == 2")
        let read = try XCTUnwrap(try context.fetch(request).first)
        XCTAssertEqual(read["number"] as? Int, 2)
        context.delete(try store.parent("big", in: context))
        try context.save()
        XCTAssertEqual(seen.value.count, 5)
        XCTAssertEqual(seen.value.compactMap { $0 }, [2], "deleted children read in didSave: \(seen.value)")
    }

    // MARK: - Undo

    /// A child deleted and saved on its own, then its parent deleted and saved; both undone, then
    /// saved: the child comes back pointing at its brought-back parent.
    func testUndoingTwoSavedDeletionsBringsBackTheChildWithItsParent() throws {
        let store = try CascadeFamily(children: 3)
        defer { store.remove() }
        let context = store.context()
        context.undoManager = ContextUndoManager()
        let big = try store.parent("big", in: context)
        let first = try XCTUnwrap(try store.children(in: context).first { $0["number"] as? Int == 0 })
        context.delete(first)
        try context.save()
        context.delete(big)
        try context.save()
        XCTAssertEqual(try store.childCount(), 0)
        context.undo()
        context.undo()
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try store.childCount(), 3)
        XCTAssertTrue((first["parent"] as? ManagedObject) === big)
    }
}

private final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
