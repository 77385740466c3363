import Foundation
import XCTest
@testable import ObjectGraph

/// A cascade through the context: a child's to-one back to a parent still in memory is found
/// there without being written into the child's values (which copied the values each child
/// shares with its committed ones: 100,000 copies in a cascade), and children not read yet are
/// deleted as faults when nothing needs their rows.
final class CascadeDeleteTests: XCTestCase {
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

    /// The objects a save reports deleted.
    private func deletedBySave(_ context: ManagedObjectContext, _ body: () throws -> Void) throws -> [ManagedObject] {
        let deleted = Collected<ManagedObject>()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { notification in
            deleted.items = notification.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? []
        }
        defer { context.notificationCenter.removeObserver(observer) }
        try body()
        return deleted.items
    }

    func testUnreadChildrenAreDeletedWithoutReadingTheirRows() throws {
        let family = try CascadeFamily(children: 200)
        defer { family.remove() }
        let context = family.context()
        let big = try family.parent("big", in: context)
        let deleted = try deletedBySave(context) {
            context.delete(big)
            try context.save()
        }
        let children = deleted.filter { $0.entity.name == "Child" }
        XCTAssertEqual(children.count, 200, "every child was deleted")
        XCTAssertTrue(children.allSatisfy(\.isFault), "no child's row was read to delete it")
        XCTAssertEqual(try family.numbers("Child"), [])
        XCTAssertEqual(try family.context().fetch(FetchRequest<ManagedObject>(entityName: "Parent"))
            .map { $0["name"] as? String }, ["other"])
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
        XCTAssertEqual(deleted.filter { $0.entity.name == "Child" }.count, 25)
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
        let grandchildren = deleted.filter { $0.entity.name == "Grandchild" }
        XCTAssertEqual(grandchildren.count, 50)
        XCTAssertTrue(grandchildren.allSatisfy(\.isFault), "grandchildren need nothing of their rows")
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
