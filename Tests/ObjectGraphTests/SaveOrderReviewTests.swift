import Foundation
import XCTest
@testable import ObjectGraph

/// From an outside review of the save's order of writes and of the store cascade: unique values
/// moved between rows of one save, deletions a merge policy keeps, and the store cascade
/// agreeing with the object path.
final class SaveOrderReviewTests: ObjectGraphTestCase {
    override func tearDownWithError() throws {
        HookOther.action = nil
        try super.tearDownWithError()
    }

    private func open(_ entities: [EntityDescription], seed: (ManagedObjectContext) throws -> Void) throws
        -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let model = try ManagedObjectModel(entities: entities)
        let url = directory.appendingPathComponent("store-\(UUID().uuidString).sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let writer = ManagedObjectContext(coordinator: coordinator)
        try seed(writer)
        try writer.save()
        return (coordinator, url, model)
    }


    private func count(_ entity: String, _ coordinator: PersistentStoreCoordinator) throws -> Int {
        try fetch(entity, ManagedObjectContext(coordinator: coordinator)).count
    }

    // MARK: - Models

    /// Parent —children (cascade)→ Child; Other (hooks), Label and Holder —label→ Label (no inverse).
    private func family(children: Int = 3) throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "children", destination: "Child", inverse: "parent",
                                                    isToMany: true, deleteRule: .cascade)])
        let subParent = EntityDescription(name: "SubParent", parent: "Parent")
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")])
        let subChild = EntityDescription(name: "SubChild", parent: "Child")
        let other = EntityDescription(name: "Other", attributes: [AttributeDescription(name: "name", type: .string)])
        let label = EntityDescription(name: "Label", attributes: [AttributeDescription(name: "name", type: .string)])
        let holder = EntityDescription(
            name: "Holder", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "label", destination: "Label", deleteRule: .noAction)])
        let made = try open([parent, subParent, child, subChild, other, label, holder]) { writer in
            for (name, entity) in [("big", "Parent"), ("second", "Parent"), ("sub", "SubParent")] {
                let owner = writer.insertNewObject(forEntityName: entity)
                owner["name"] = name
                for number in 0..<children {
                    let member = writer.insertNewObject(forEntityName: number % 2 == 0 ? "Child" : "SubChild")
                    member["number"] = number
                    member["parent"] = owner
                }
            }
            writer.insertNewObject(forEntityName: "Other")["name"] = "other"
            writer.insertNewObject(forEntityName: "Label")["name"] = "l1"
            writer.insertNewObject(forEntityName: "Holder")["name"] = "h"
        }
        made.2.setClass(HookOther.self, forEntityName: "Other")
        return made
    }

    /// Item, unique by title, with a note.
    private func items(_ titles: [String]) throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "title", type: .string),
                                       AttributeDescription(name: "note", type: .string)],
            uniquenessConstraints: [["title"]])
        return try open([item]) { writer in
            for title in titles { writer.insertNewObject(forEntityName: "Item")["title"] = title }
        }
    }

    private func deleteOwner(_ name: String, _ context: ManagedObjectContext, objectPath: Bool) throws {
        context.delete(try XCTUnwrap(try fetch("Parent", context, "name == %@", name).first))
        if objectPath { context.processPendingChanges() }
    }

    // MARK: - 1. Delete order: a failed save must leave the context's changes as they were

    /// Rollback policy: D (title x) is deleted here, changed elsewhere; U is renamed to x. The
    /// policy keeps D's row, so U's rename fails the save: D must still be deleted in the
    /// context, with its values as they were, since nothing was committed.
    func testFailedUpdateAfterAKeptDeletionLeavesTheDeletionInPlace() throws {
        let (coordinator, url, model) = try items(["x", "u"])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let doomed = try XCTUnwrap(try fetch("Item", context, "title == 'x'").first)
        let renamed = try XCTUnwrap(try fetch("Item", context, "title == 'u'").first)
        context.delete(doomed)
        renamed["title"] = "x"
        let other = try elsewhere(url, model)
        try XCTUnwrap(try fetch("Item", other, "title == 'x'").first)["note"] = "changed"
        try other.save()
        XCTAssertThrowsError(try context.save())
        XCTAssertTrue(doomed.isDeleted, "a failed save leaves the context's deletion in place")
        XCTAssertTrue(context.deletedObjects.contains { $0 === doomed })
        XCTAssertNil(doomed["note"] as? String, "a failed save does not load the row into the object")
        _ = coordinator
    }

    /// The same save: its error should be the uniqueness conflict (133021) the check exists to
    /// report, not SQLite's "UNIQUE constraint failed" wrapped as a save failure.
    func testUpdateTakingTheValueOfADeletionThePolicyKeptIsAConstraintConflict() throws {
        let (coordinator, url, model) = try items(["x", "u"])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        context.delete(try XCTUnwrap(try fetch("Item", context, "title == 'x'").first))
        try XCTUnwrap(try fetch("Item", context, "title == 'u'").first)["title"] = "x"
        let other = try elsewhere(url, model)
        try XCTUnwrap(try fetch("Item", other, "title == 'x'").first)["note"] = "changed"
        try other.save()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict, "\(error)")
        }
    }

    /// Two rows swap their unique titles in one save; written one at a time, SQLite's unique
    /// index would refuse the first.
    func testSwapOfUniqueValuesIsSaved() throws {
        let (coordinator, _, _) = try items(["x", "y"])
        let context = ManagedObjectContext(coordinator: coordinator)
        let first = try XCTUnwrap(try fetch("Item", context, "title == 'x'").first)
        let second = try XCTUnwrap(try fetch("Item", context, "title == 'y'").first)
        first["title"] = "y"
        second["title"] = "x"
        XCTAssertNoThrow(try context.save())
        let titles = try fetch("Item", ManagedObjectContext(coordinator: coordinator)).map { $0["title"] as? String }
        XCTAssertEqual(Set(titles.compactMap { $0 }), ["x", "y"])
    }

    /// A chain of renames (x to y, y to z) and a rename into the value of a row this save deletes.
    func testChainOfRenamesAndARenameIntoADeletedRowsValueAreSaved() throws {
        let (coordinator, _, _) = try items(["x", "y", "gone", "kept"])
        let context = ManagedObjectContext(coordinator: coordinator)
        try XCTUnwrap(try fetch("Item", context, "title == 'x'").first)["title"] = "y"
        try XCTUnwrap(try fetch("Item", context, "title == 'y'").first)["title"] = "z"
        context.delete(try XCTUnwrap(try fetch("Item", context, "title == 'gone'").first))
        try XCTUnwrap(try fetch("Item", context, "title == 'kept'").first)["title"] = "gone"
        XCTAssertNoThrow(try context.save())
        let titles = try fetch("Item", ManagedObjectContext(coordinator: coordinator)).compactMap { $0["title"] as? String }
        XCTAssertEqual(titles.sorted(), ["gone", "y", "z"])
    }

    // MARK: - 2. Store cascade

    /// Rollback policy, the owner changed by another process after it was deleted here: the policy
    /// keeps the owner. On the object path its children (unchanged rows, deleted as objects) go;
    /// left to the save, deleteMembers skips a kept owner and they stay. The paths must agree.
    func testADeletionKeptByThePolicyCascadesTheSameOnBothPaths() throws {
        var childrenLeft: [Bool: Int] = [:]
        for objectPath in [true, false] {
            let (coordinator, url, model) = try family()
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .rollback
            try deleteOwner("big", context, objectPath: objectPath)
            let other = try elsewhere(url, model)
            try XCTUnwrap(try fetch("Parent", other, "name == 'big'").first)["name"] = "renamed"
            try other.save()
            XCTAssertNoThrow(try context.save())
            XCTAssertEqual(try fetch("Parent", ManagedObjectContext(coordinator: coordinator), "name == 'renamed'").count,
                           1, "the policy kept the owner")
            childrenLeft[objectPath] = try fetch("Child", ManagedObjectContext(coordinator: coordinator),
                                                 "parent.name == 'renamed'").count
        }
        XCTAssertEqual(childrenLeft[true], childrenLeft[false], "object path vs store cascade: \(childrenLeft)")
    }

    /// A save fails inside its transaction after deleteMembers ran (a destination deleted by
    /// another process); fixed and saved again, everything goes and is announced.
    func testRetryAfterAFailureLaterInTheTransactionDeletesEverything() throws {
        let (coordinator, url, model) = try family()
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let childIDs = Set(try fetch("Child", ManagedObjectContext(coordinator: coordinator),
                                     "parent.name == 'big'").map(\.objectID))
        XCTAssertEqual(childIDs.count, 3)
        let holder = try XCTUnwrap(try fetch("Holder", context).first)
        holder["label"] = try XCTUnwrap(try fetch("Label", context).first)
        try deleteOwner("big", context, objectPath: false)
        let other = try elsewhere(url, model)
        other.delete(try XCTUnwrap(try fetch("Label", other).first))
        try other.save()
        XCTAssertThrowsError(try context.save(), "the holder's label is gone")
        XCTAssertTrue(context.storeCascadeKeys.isEmpty)
        XCTAssertEqual(try count("Child", coordinator), 9, "nothing was written")
        holder["label"] = nil
        let announced = AnnouncedCascadeIDs()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { announced.items = Array($0.userInfo?[ManagedObjectContext.deletedObjectIDsKey] as? ObjectIDList ?? []) }
        defer { context.notificationCenter.removeObserver(observer) }
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try count("Child", coordinator), 6)
        XCTAssertEqual(Set(announced.items).intersection(childIDs), childIDs)
        XCTAssertFalse(context.hasChanges)
    }

    /// A willSave hook of an unrelated object inserts a child linked to the deleted owner: both
    /// paths must end the same way (the owner and all its children gone, or the same error).
    func testHookOfAnUnrelatedObjectLinksANewChildToTheDeletedOwner() throws {
        var outcome: [Bool: String] = [:]
        for objectPath in [true, false] {
            let (coordinator, _, _) = try family()
            let context = ManagedObjectContext(coordinator: coordinator)
            let owner = try XCTUnwrap(try fetch("Parent", context, "name == 'big'").first)
            try XCTUnwrap(try fetch("Other", context).first)["name"] = "touched"
            HookOther.action = { object in
                guard let context = object.managedObjectContext else { return }
                let child = context.insertNewObject(forEntityName: "Child")
                child["number"] = 99
                child["parent"] = owner
            }
            try deleteOwner("big", context, objectPath: objectPath)
            var result: String
            do { try context.save(); result = "saved" } catch { result = "error \((error as? ObjectGraphError)?.code as Any)" }
            HookOther.action = nil
            result += ", children \(try count("Child", coordinator)), parents \(try count("Parent", coordinator))"
            outcome[objectPath] = result
        }
        XCTAssertEqual(outcome[true], outcome[false], "object path vs store cascade")
    }

    /// A hook deletes another owner and calls processPendingChanges() during the save.
    func testProcessPendingChangesInsideAHookDuringSave() throws {
        for objectPath in [true, false] {
            let (coordinator, _, _) = try family()
            let context = ManagedObjectContext(coordinator: coordinator)
            try XCTUnwrap(try fetch("Other", context).first)["name"] = "touched"
            HookOther.action = { object in
                guard let context = object.managedObjectContext,
                      let second = try? self.fetch("Parent", context, "name == 'second'").first else { return }
                context.delete(second)
                context.processPendingChanges()
            }
            try deleteOwner("big", context, objectPath: objectPath)
            XCTAssertNoThrow(try context.save(), objectPath ? "object path" : "store cascade")
            HookOther.action = nil
            XCTAssertEqual(try count("Parent", coordinator), 1, objectPath ? "object path" : "store cascade")
            XCTAssertEqual(try count("Child", coordinator), 3, objectPath ? "object path" : "store cascade")
            XCTAssertTrue(context.storeCascadeKeys.isEmpty)
        }
    }

    /// Owners of an entity and its sub-entity, members of an entity and its sub-entity.
    func testOwnersAndMembersThroughInheritance() throws {
        for objectPath in [true, false] {
            let (coordinator, _, _) = try family()
            let context = ManagedObjectContext(coordinator: coordinator)
            try deleteOwner("big", context, objectPath: objectPath)
            try deleteOwner("sub", context, objectPath: objectPath)
            XCTAssertNoThrow(try context.save())
            XCTAssertEqual(try fetch("Child", ManagedObjectContext(coordinator: coordinator)).count, 3)
            XCTAssertEqual(try fetch("Parent", ManagedObjectContext(coordinator: coordinator)).map { $0["name"] as? String },
                           ["second"])
        }
    }

    /// The owner's row (and its children) deleted by another process after it was read here;
    /// object trump deletes anyway. No child may remain, and the save must not fail.
    func testOwnerDeletedElsewhereMeanwhile() throws {
        for objectPath in [true, false] {
            let (coordinator, url, model) = try family()
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let owner = try XCTUnwrap(try fetch("Parent", context, "name == 'big'").first)
            _ = owner["name"]
            let other = try elsewhere(url, model)
            other.delete(try XCTUnwrap(try fetch("Parent", other, "name == 'big'").first))
            try other.save()
            context.delete(owner)
            if objectPath { context.processPendingChanges() }
            XCTAssertNoThrow(try context.save(), objectPath ? "object path" : "store cascade")
            XCTAssertEqual(try count("Child", coordinator), 6)
        }
    }
}

private final class AnnouncedCascadeIDs: @unchecked Sendable {
    var items: [ObjectID] = []
}

/// An object unrelated to the cascade whose willSave runs a test's action.
final class HookOther: ManagedObject {
    nonisolated(unsafe) static var action: ((ManagedObject) -> Void)?

    override func willSave() {
        Self.action?(self)
    }
}
