import Foundation
import XCTest
@testable import ObjectGraph

/// An outside review's attacks on the store cascade (a save deleting the members of an unread
/// to-many in SQL, no object made for them). Each test compares with the object path, which the
/// documentation says a `processPendingChanges()` before the save takes. The first version failed
/// the Deny, count, uniqueness and validation-hook cases: members reachable from elsewhere or
/// with unique values now go as objects, and objects a hook fetched leave with their rows.
final class StoreCascadeReviewTests: ObjectGraphTestCase {
    private func store(_ entities: [EntityDescription], history: Bool = false,
                       seed: (ManagedObjectContext) throws -> Void) throws -> PersistentStoreCoordinator {
        try seededStore(entities, history: history, seed: seed).coordinator
    }

    private func count(_ entity: String, _ coordinator: PersistentStoreCoordinator) throws -> Int {
        try fetch(entity, ManagedObjectContext(coordinator: coordinator)).count
    }

    /// Deletes the parent named `name` (the only one when nil); on the object path the delete
    /// rules run at once, as objects, else the save may run the cascade in SQL.
    private func deleteParent(in context: ManagedObjectContext, objectPath: Bool, name: String? = nil) throws {
        let parents = try name.map { try fetch("Parent", context, "name == %@", $0) } ?? fetch("Parent", context)
        context.delete(try XCTUnwrap(parents.first))
        if objectPath { context.processPendingChanges() }
    }

    // MARK: - 1. Deny over the owner's own cascaded members

    /// Parent —children (cascade)→ Child, and Parent —pinned (deny)→ Child (inverse noAction).
    private func pinnedFamily() throws -> PersistentStoreCoordinator {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [
                RelationshipDescription(name: "children", destination: "Child", inverse: "parent", isToMany: true,
                                        deleteRule: .cascade),
                RelationshipDescription(name: "pinned", destination: "Child", inverse: "pinnedBy", isToMany: true,
                                        deleteRule: .deny),
            ])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [
                RelationshipDescription(name: "parent", destination: "Parent", inverse: "children"),
                RelationshipDescription(name: "pinnedBy", destination: "Parent", inverse: "pinned",
                                        deleteRule: .noAction),
            ])
        return try store([parent, child]) { writer in
            let big = writer.insertNewObject(forEntityName: "Parent")
            big["name"] = "big"
            for number in 0..<3 {
                let member = writer.insertNewObject(forEntityName: "Child")
                member["number"] = number
                member["parent"] = big
                if number == 0 { member["pinnedBy"] = big }
            }
        }
    }

    /// The pinned child goes with its parent, so the Deny rule has nothing left to deny. Left to
    /// the save, the first version refused it: the child, never marked deleted, looked live.
    func testDenyOverTheOwnersOwnCascadedMembersDoesNotFailTheSave() throws {
        for objectPath in [true, false] {
            let coordinator = try pinnedFamily()
            let context = ManagedObjectContext(coordinator: coordinator)
            try deleteParent(in: context, objectPath: objectPath)
            XCTAssertNoThrow(try context.save(), objectPath ? "object path" : "left to the save")
            XCTAssertEqual(try count("Child", coordinator), 0)
        }
    }

    // MARK: - 2. Validation reading a to-many

    /// Parent —children (cascade)→ Child —tag (noAction)→ Tag; Tag.children bounded (min/max).
    private func taggedFamily(minCount: Int, maxCount: Int) throws -> PersistentStoreCoordinator {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [
                RelationshipDescription(name: "parent", destination: "Parent", inverse: "children"),
                RelationshipDescription(name: "tag", destination: "Tag", inverse: "children", deleteRule: .noAction),
            ])
        let tag = EntityDescription(
            name: "Tag", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "tag", isToMany: true, minCount: minCount,
                maxCount: maxCount)])
        return try store([parent, child, tag]) { writer in
            let big = writer.insertNewObject(forEntityName: "Parent")
            big["name"] = "big"
            let label = writer.insertNewObject(forEntityName: "Tag")
            label["name"] = "label"
            for number in 0..<3 {
                let member = writer.insertNewObject(forEntityName: "Child")
                member["number"] = number
                member["parent"] = big
                member["tag"] = label
            }
        }
    }

    /// A tag changed in the same save is validated and counts its bounded to-many: the children it
    /// reads must not stay registered, live, once their rows are gone (the first version left them
    /// so: it had decided to delete them in SQL before validation read them).
    func testCascadedMembersReadByValidationDoNotStayRegistered() throws {
        for objectPath in [true, false] {
            let coordinator = try taggedFamily(minCount: 0, maxCount: 100)
            let context = ManagedObjectContext(coordinator: coordinator)
            try XCTUnwrap(try fetch("Tag", context).first)["name"] = "renamed"
            try deleteParent(in: context, objectPath: objectPath)
            try context.save()
            XCTAssertEqual(try count("Child", coordinator), 0, "the rows are gone")
            // (The tag may still list them: its inverse is No Action, which Core Data leaves alone.)
            XCTAssertEqual(context.registeredObjects.filter { $0.entity.name == "Child" }.count, 0,
                           "children whose rows the save deleted are still registered")
        }
    }

    /// A tag losing its only children fails its minimum count, whichever way they go (the first
    /// version saved it with none when the cascade was left to the save).
    func testMinimumCountIsNotBypassedByAStoreCascade() throws {
        for objectPath in [true, false] {
            let coordinator = try taggedFamily(minCount: 1, maxCount: 0)
            let context = ManagedObjectContext(coordinator: coordinator)
            try XCTUnwrap(try fetch("Tag", context).first)["name"] = "renamed"
            try deleteParent(in: context, objectPath: objectPath)
            XCTAssertThrowsError(try context.save(), objectPath ? "object path" : "left to the save")
            XCTAssertEqual(try count("Child", coordinator), 3)
        }
    }

    // MARK: - 3. Uniqueness constraint: the cascaded member's value is freed

    /// Parent —notes (cascade)→ Note; Note and Photo are sub-entities of Item, unique by title.
    private func itemFamily() throws -> PersistentStoreCoordinator {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "notes", destination: "Note", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "title", type: .string)],
            uniquenessConstraints: [["title"]])
        let note = EntityDescription(
            name: "Note", parent: "Item",
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "notes")])
        let photo = EntityDescription(name: "Photo", parent: "Item")
        return try store([parent, item, note, photo]) { writer in
            let big = writer.insertNewObject(forEntityName: "Parent")
            big["name"] = "big"
            let first = writer.insertNewObject(forEntityName: "Note")
            first["title"] = "a"
            first["parent"] = big
        }
    }

    /// The deleted note frees its title for a new photo (the first version's uniqueness check,
    /// not told of the rows the save would delete in SQL, refused it: 133021).
    func testUniqueValueOfAStoreCascadedMemberIsFreedForANewSibling() throws {
        for objectPath in [true, false] {
            let coordinator = try itemFamily()
            let context = ManagedObjectContext(coordinator: coordinator)
            try deleteParent(in: context, objectPath: objectPath)
            context.insertNewObject(forEntityName: "Photo")["title"] = "a"
            XCTAssertNoThrow(try context.save(), objectPath ? "object path" : "left to the save")
            XCTAssertEqual(try fetch("Item", ManagedObjectContext(coordinator: coordinator)).map(\.entity.name),
                           ["Photo"])
        }
    }

    // MARK: - 4. A member changed by another process since nothing here read it

    /// Another coordinator changes a child after this context deleted the parent (not yet saved).
    /// On the object path the child was read, and its changed version is a merge conflict; left to
    /// the save, nothing here read it: the cascade takes the children as they are when the save
    /// runs, the changed one included (as documented).
    func testAChildChangedByAnotherProcessBeforeTheSave() throws {
        for objectPath in [true, false] {
            let family = try CascadeFamily(children: 3)
            defer { family.remove() }
            let context = family.context()
            try deleteParent(in: context, objectPath: objectPath, name: "big")
            let second = PersistentStoreCoordinator(managedObjectModel: family.model)
            try second.addPersistentStore(type: .sqlite, at: family.url)
            let elsewhere = ManagedObjectContext(coordinator: second)
            try XCTUnwrap(try fetch("Child", elsewhere, "number == 1").first)["number"] = 111
            try elsewhere.save()
            if objectPath {
                XCTAssertThrowsError(try context.save(), "object path")
                XCTAssertEqual(try family.numbers("Child").count, 3)
            } else {
                XCTAssertNoThrow(try context.save(), "store cascade")
                XCTAssertEqual(try family.numbers("Child"), [])
            }
        }
    }

    /// A validation hook of another object fetches the children the save deletes in SQL: they
    /// leave the context with their rows, announced as deleted objects, not left registered.
    func testChildrenFetchedByAValidationHookLeaveTheContext() throws {
        let family = try CascadeFamily(children: 3)
        defer { family.remove() }
        family.model.setClass(FetchingParent.self, forEntityName: "Parent")
        let context = family.context()
        let deleted = AnnouncedObjects()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { deleted.items = $0.userInfo?[ManagedObjectContext.deletedObjectsKey] as? [ManagedObject] ?? [] }
        defer { context.notificationCenter.removeObserver(observer) }
        try family.parent("other", in: context)["name"] = "renamed"
        try deleteParent(in: context, objectPath: false, name: "big")
        try context.save()
        XCTAssertEqual(FetchingParent.childrenFetched.count, 3, "the hook ran and fetched the children")
        XCTAssertTrue(FetchingParent.childrenFetched.allSatisfy { $0.managedObjectContext == nil })
        XCTAssertEqual(context.registeredObjects.filter { $0.entity.name == "Child" }.count, 0)
        XCTAssertEqual(deleted.items.filter { $0.entity.name == "Child" }.count, 3)
        XCTAssertEqual(try family.numbers("Child"), [])
        FetchingParent.childrenFetched = []
    }

    // MARK: - 5. Destination in another store; ordered; history

    /// Parent in one store, Child in another (configurations): the store cascade deletes in the
    /// children's store, announces and records them there.
    func testMembersInAnotherStore() throws {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade,
                isOrdered: true)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")])
        let model = try ManagedObjectModel(entities: [parent, child], configurations: ["A": ["Parent"], "B": ["Child"]])
        let base = directory.appendingPathComponent("store-\(UUID().uuidString)")
        let urlA = base.appendingPathExtension("a.sqlite"), urlB = base.appendingPathExtension("b.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.tracksPersistentHistory = true
        try coordinator.addPersistentStore(type: .sqlite, configuration: "A", at: urlA, options: options)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "B", at: urlB, options: options)
        let writer = ManagedObjectContext(coordinator: coordinator)
        let big = writer.insertNewObject(forEntityName: "Parent")
        big["name"] = "big"
        for number in 0..<5 {
            let member = writer.insertNewObject(forEntityName: "Child")
            member["number"] = number
            member["parent"] = big
        }
        try writer.save()
        let childIDs = Set(try fetch("Child", ManagedObjectContext(coordinator: coordinator)).map(\.objectID))
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let before = try context.fetchHistory(after: nil).last?.token
        let announced = AnnouncedIDs()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { announced.items = Array($0.userInfo?[ManagedObjectContext.deletedObjectIDsKey] as? ObjectIDList ?? []) }
        defer { context.notificationCenter.removeObserver(observer) }
        context.delete(try XCTUnwrap(try fetch("Parent", context).first))
        try context.save()
        XCTAssertEqual(try count("Child", coordinator), 0)
        XCTAssertEqual(Set(announced.items).intersection(childIDs), childIDs)
        let changes = try context.fetchHistory(after: before).flatMap(\.changes)
        XCTAssertEqual(Set(changes.filter { $0.changedObjectID.entityName == "Child" }.map(\.changedObjectID)), childIDs)
    }
}

private final class AnnouncedIDs: @unchecked Sendable {
    var items: [ObjectID] = []
}

private final class AnnouncedObjects: @unchecked Sendable {
    var items: [ManagedObject] = []
}

/// A parent whose validation fetches every child (as a hook checking a total might).
final class FetchingParent: ManagedObject {
    nonisolated(unsafe) static var childrenFetched: [ManagedObject] = []

    override func validateForSave(into errors: inout [ValidationError]) throws {
        guard let context = managedObjectContext, self["name"] as? String == "renamed" else { return }
        Self.childrenFetched = try context.fetch(FetchRequest<ManagedObject>(entityName: "Child"))
    }
}
