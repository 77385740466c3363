import Foundation
import XCTest
@testable import ObjectGraph

/// A cascade through the context: a child's to-one back to a parent still in memory is found
/// there without being written into the child's values (which copied the values each child
/// shares with its committed ones: 100,000 copies in a cascade), and children not read yet are
/// deleted as faults when nothing needs their rows.
final class CascadeDeleteTests: XCTestCase {
    /// An object inserted and deleted before any save takes its cascade with it: its children,
    /// inserted too, are deleted, not left parentless (where a child must have a parent, the save
    /// failed: a sync receiving an entry with history and its deletion in one go).
    func testAnInsertedParentDeletedBeforeTheSaveCascadesToItsInsertedChildren() throws {
        let family = try CascadeFamily(children: 0, grandchildrenEach: 1, otherParent: false)
        defer { try? FileManager.default.removeItem(at: family.url) }
        let context = ManagedObjectContext(coordinator: family.coordinator)
        let gone = context.insertNewObject(forEntityName: "Parent")
        gone["name"] = "gone"
        for number in 0..<3 {
            let member = context.insertNewObject(forEntityName: "Child")
            member["number"] = number
            member["parent"] = gone
            context.insertNewObject(forEntityName: "Grandchild")["child"] = member
        }
        context.delete(gone)
        XCTAssertTrue(context.insertedObjects.isEmpty, "children and grandchildren go with it")
        try context.save()
        for entity in ["Child", "Grandchild"] {
            XCTAssertEqual(try context.count(for: FetchRequest<ManagedObject>(entityName: entity)), 0, entity)
        }
        XCTAssertEqual(try context.fetch(FetchRequest<ManagedObject>(entityName: "Parent")).map { $0["name"] as? String },
                       ["big"])
    }

    func testACascadeLeavesTheChildrensValuesAsRead() throws {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")])
        let model = try ManagedObjectModel(entities: [parent, child])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cascade-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(at: url) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        do {
            let writer = ManagedObjectContext(coordinator: coordinator)
            let family = writer.insertNewObject(forEntityName: "Parent")
            family["name"] = "big"
            for number in 0..<300 {
                let member = writer.insertNewObject(forEntityName: "Child")
                member["number"] = number
                member["parent"] = family
            }
            let other = writer.insertNewObject(forEntityName: "Parent")
            other["name"] = "other"
            try writer.save()
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        let parents = try context.fetch(FetchRequest<ManagedObject>(entityName: "Parent"))
        let children = try context.fetch(FetchRequest<ManagedObject>(entityName: "Child"))
        let big = try XCTUnwrap(parents.first { $0["name"] as? String == "big" })
        let slot = try XCTUnwrap(children[0].values.layout.index(of: "parent"))
        context.delete(big)
        context.processPendingChanges()
        XCTAssertTrue(children.allSatisfy(\.isDeleted), "the cascade reached every child")
        for member in children {
            guard case .fault = member.values.slot(slot) else {
                return XCTFail("a deleted child's to-one was written into its values")
            }
        }
        try context.save()
        XCTAssertTrue(children.allSatisfy { $0.managedObjectContext == nil })
        let reader = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Child")).count, 0)
        XCTAssertEqual(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Parent")).map { $0["name"] as? String },
                       ["other"])
    }

    // MARK: - Unread children deleted as faults

    /// The objects and the IDs a save reports deleted.
    private func deletedBySave(_ context: ManagedObjectContext, _ body: () throws -> Void) throws
        -> (objects: [ManagedObject], ids: [ObjectID]) {
        let deleted = Collected<ManagedObject>()
        let ids = Collected<ObjectID>()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { notification in
            deleted.items = notification.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? []
            ids.items = Array(notification.userInfo?[ManagedObjectContext.deletedObjectIDsKey] as? ObjectIDList ?? [])
        }
        defer { context.notificationCenter.removeObserver(observer) }
        try body()
        return (deleted.items, ids.items)
    }

    /// The IDs of every row of `entityName`, read by a context of their own.
    private func ids(of entityName: String, _ family: CascadeFamily) throws -> Set<ObjectID> {
        Set(try family.context().fetch(FetchRequest<ManagedObject>(entityName: entityName)).map(\.objectID))
    }

    func testUnreadChildrenAreDeletedInTheStoreWithoutObjects() throws {
        let family = try CascadeFamily(children: 200)
        defer { family.remove() }
        let childIDs = try ids(of: "Child", family)
        let context = family.context()
        let big = try family.parent("big", in: context)
        let deleted = try deletedBySave(context) {
            context.delete(big)
            try context.save()
        }
        XCTAssertEqual(deleted.objects.map(\.objectID), [big.objectID], "no object was made for a child")
        XCTAssertEqual(Set(deleted.ids), childIDs.union([big.objectID]), "every child's ID is announced")
        XCTAssertEqual(deleted.ids.count, 201)
        XCTAssertEqual(try family.numbers("Child"), [])
        XCTAssertEqual(try family.context().fetch(FetchRequest<ManagedObject>(entityName: "Parent"))
            .map { $0["name"] as? String }, ["other"])
    }

    /// Another context holding the children (as a list would) lets them go when it merges the save.
    func testAContextMergingTheSaveForgetsTheChildrenItHeld() throws {
        let family = try CascadeFamily(children: 40)
        defer { family.remove() }
        let viewer = family.context()
        let shown = try viewer.fetch(FetchRequest<ManagedObject>(entityName: "Child"))
        XCTAssertEqual(shown.count, 40)
        let context = family.context()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { notification in
            try? viewer.mergeChanges(fromContextDidSave: notification)
        }
        defer { context.notificationCenter.removeObserver(observer) }
        context.delete(try family.parent("big", in: context))
        try context.save()
        XCTAssertTrue(shown.allSatisfy { $0.managedObjectContext == nil }, "each child left the viewing context")
        XCTAssertEqual(try viewer.fetch(FetchRequest<ManagedObject>(entityName: "Child")).count, 0)
    }

    /// History (what sync sends) records the deletion of every child a cascade deleted in the store.
    func testHistoryRecordsEachChildDeletedInTheStore() throws {
        let family = try CascadeFamily(children: 30, history: true)
        defer { family.remove() }
        let childIDs = try ids(of: "Child", family)
        let context = family.context()
        let before = try context.fetchHistory(after: nil).last?.token
        context.delete(try family.parent("big", in: context))
        try context.save()
        let changes = try context.fetchHistory(after: before).flatMap(\.changes)
        let deletedChildren = changes.filter { $0.changeType == .delete && $0.changedObjectID.entityName == "Child" }
        XCTAssertEqual(Set(deletedChildren.map(\.changedObjectID)), childIDs)
        XCTAssertEqual(deletedChildren.count, 30)
    }

    /// A hook of the parent that reads its children makes them objects: they are deleted as such.
    func testAHookReadingTheChildrenHasThemDeletedAsObjects() throws {
        let family = try CascadeFamily(children: 12)
        defer { family.remove() }
        family.model.setClass(CountingParent.self, forEntityName: "Parent")
        let context = family.context()
        let deleted = try deletedBySave(context) {
            context.delete(try family.parent("big", in: context))
            try context.save()
        }
        XCTAssertEqual(CountingParent.childrenSeen, 12)
        XCTAssertEqual(deleted.objects.filter { $0.entity.name == "Child" }.count, 12)
        XCTAssertEqual(deleted.ids.count, 13, "each child once")
        XCTAssertEqual(try family.numbers("Child"), [])
    }

    func testADeletedFaultReadsItsRowUntilTheSave() throws {
        let family = try CascadeFamily(children: 50)
        defer { family.remove() }
        let context = family.context()
        let numbersSeen = Collected<Int>()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil
        ) { notification in
            let deleted = notification.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? []
            numbersSeen.items += deleted.filter { $0.entity.name == "Child" }.compactMap { $0["number"] as? Int }
        }
        defer { context.notificationCenter.removeObserver(observer) }
        context.delete(try family.parent("big", in: context))
        // The end of the event: its delete rules run now, on objects.
        context.processPendingChanges()
        try context.save()
        XCTAssertEqual(numbersSeen.items.sorted(), Array(0..<50), "each deleted child read as its row was")
        XCTAssertEqual(try family.numbers("Child"), [])
    }

    func testPrepareForDeletionReadsAFaultsRow() throws {
        let family = try CascadeFamily(children: 30)
        defer { family.remove() }
        family.model.setClass(PreparedChild.self, forEntityName: "Child")
        PreparedChild.numbers = []
        let context = family.context()
        context.delete(try family.parent("big", in: context))
        try context.save()
        XCTAssertEqual(PreparedChild.numbers.sorted(), Array(0..<30))
        XCTAssertEqual(try family.numbers("Child"), [])
    }

    func testUndoPutsBackCascadedChildrenWithTheirValues() throws {
        let family = try CascadeFamily(children: 40)
        defer { family.remove() }
        let context = family.context()
        context.undoManager = ContextUndoManager()
        context.delete(try family.parent("big", in: context))
        try context.save()
        XCTAssertEqual(try family.numbers("Child"), [])
        context.undo()
        try context.save()
        XCTAssertEqual(try family.numbers("Child"), Array(0..<40), "undo brought back every child's number")
        let reader = family.context()
        let big = try family.parent("big", in: reader)
        XCTAssertEqual((big["children"] as? [ManagedObject])?.count, 40, "and each child's parent")
    }

    func testAChildMovedToAnotherParentStays() throws {
        let family = try CascadeFamily(children: 20)
        defer { family.remove() }
        let context = family.context()
        let big = try family.parent("big", in: context)
        let other = try family.parent("other", in: context)
        var request = FetchRequest<ManagedObject>(entityName: "Child")
        request.predicate = try ObjectGraph.Predicate(format: "number == 7")
        let moved = try XCTUnwrap(try context.fetch(request).first)
        moved["parent"] = other
        context.delete(big)
        try context.save()
        XCTAssertEqual(try family.numbers("Child"), [7])
        let reader = family.context()
        XCTAssertEqual(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Child")).first
            .flatMap { ($0["parent"] as? ManagedObject)?["name"] as? String }, "other")
    }

    func testAChildWithAnotherRuleIsReadAndUnlinked() throws {
        let family = try CascadeFamily(children: 25, tagged: true)
        defer { family.remove() }
        let context = family.context()
        let tag = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Tag")).first)
        XCTAssertEqual((tag["children"] as? [ManagedObject])?.count, 25)
        let deleted = try deletedBySave(context) {
            context.delete(try family.parent("big", in: context))
            try context.save()
        }
        XCTAssertEqual(deleted.objects.filter { $0.entity.name == "Child" }.count, 25)
        XCTAssertEqual((tag["children"] as? [ManagedObject])?.count, 0, "the tag let go of every deleted child")
        XCTAssertEqual(try family.numbers("Child"), [])
    }

    func testGrandchildrenGoToo() throws {
        let family = try CascadeFamily(children: 10, grandchildrenEach: 5)
        defer { family.remove() }
        let context = family.context()
        let deleted = try deletedBySave(context) {
            context.delete(try family.parent("big", in: context))
            try context.save()
        }
        // Children have a rule of their own to run: objects. Grandchildren need nothing: rows.
        XCTAssertEqual(deleted.objects.filter { $0.entity.name == "Child" }.count, 10)
        XCTAssertEqual(deleted.objects.filter { $0.entity.name == "Grandchild" }.count, 0)
        XCTAssertEqual(deleted.ids.filter { $0.entityName == "Grandchild" }.count, 50)
        XCTAssertEqual(try family.numbers("Child"), [])
        XCTAssertEqual(try family.numbers("Grandchild"), [])
    }

    func testAChildChangedBeforeTheSaveIsAConflict() throws {
        let family = try CascadeFamily(children: 10)
        defer { family.remove() }
        let context = family.context()
        context.delete(try family.parent("big", in: context))
        context.processPendingChanges()
        // Someone else changes a child after the cascade read its version, before the save.
        let elsewhere = family.context()
        var request = FetchRequest<ManagedObject>(entityName: "Child")
        request.predicate = try ObjectGraph.Predicate(format: "number == 3")
        try XCTUnwrap(try elsewhere.fetch(request).first)["number"] = 333
        try elsewhere.save()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict, "\(error)")
        }
        XCTAssertEqual(try family.numbers("Child").count, 10, "nothing was deleted")
    }

    func testANewObjectSharesNothingItWrites() throws {
        let family = try CascadeFamily(children: 1)
        defer { family.remove() }
        let context = family.context()
        let first = context.insertNewObject(forEntityName: "Child")
        first["number"] = 1
        let second = context.insertNewObject(forEntityName: "Child")
        XCTAssertNil(second["number"], "a write to one new object reached another")
        second["number"] = 2
        XCTAssertEqual(first["number"] as? Int, 1)
        XCTAssertNil(context.insertNewObject(forEntityName: "Child")["number"])
    }
}

/// What a notification observer collects (posted synchronously on the test's thread).
private final class Collected<Item>: @unchecked Sendable {
    var items: [Item] = []
}

final class PreparedChild: ManagedObject {
    nonisolated(unsafe) static var numbers: [Int] = []
    override func prepareForDeletion() {
        if let number = self["number"] as? Int { Self.numbers.append(number) }
    }
}

/// A parent whose hook reads its children before the save.
final class CountingParent: ManagedObject {
    nonisolated(unsafe) static var childrenSeen = 0

    override func willSave() {
        if isDeleted { Self.childrenSeen = (self["children"] as? [ManagedObject])?.count ?? -1 }
    }
}
