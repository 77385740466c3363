import Foundation
import XCTest
@testable import ObjectGraph

final class System: ManagedObject, ManagedEntity {
    static let entityName = "System"
    var userId: String? {
        get { self["userId"] as? String }
        set { self["userId"] = newValue }
    }
    var category: ManagedObject? {
        get { self["category"] as? ManagedObject }
        set { self["category"] = newValue }
    }
}

final class ContextTests: ObjectGraphTestCase {
    func testInsertSaveFetchInAnotherContext() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let tag = stack.context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "blue"
            XCTAssertTrue(tag.isInserted)
            XCTAssertTrue(tag.objectID.isTemporaryID)
            try stack.context.save()
            XCTAssertFalse(tag.isInserted)
            XCTAssertEqual(tag.objectID.primaryKey, 1)
            XCTAssertFalse(stack.context.hasChanges)
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try other.names("Tag"), ["blue"])
            XCTAssertEqual(try other.existingObject(with: tag.objectID)["name"] as? String, "blue")
        }
    }

    /// An object finds its context through its ID's scope: it follows every way in and out
    /// of a context, lets go of a context that is gone, and IDs of one row from two contexts
    /// are equal.
    func testAnObjectsContextFollowsItsLife() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let loose = ManagedObject(entity: try XCTUnwrap(context.model.entity(named: "Tag")))
        XCTAssertNil(loose.managedObjectContext)
        context.insert(loose)
        XCTAssert(loose.managedObjectContext === context)
        loose["name"] = "loose"
        let undone = context.insertNewObject(forEntityName: "Tag")
        context.undoManager = ContextUndoManager()
        context.delete(undone)
        XCTAssertNil(undone.managedObjectContext, "deleting an unsaved object takes it out")
        context.undo()
        XCTAssert(undone.managedObjectContext === context, "undoing the deletion puts it back")
        undone["name"] = "undone"
        try context.save()
        let savedID = loose.objectID
        XCTAssertFalse(savedID.isTemporaryID)

        var other: ManagedObjectContext? = ManagedObjectContext(coordinator: stack.coordinator)
        let copy = try XCTUnwrap(other?.existingObject(with: savedID))
        XCTAssert(copy.managedObjectContext === other)
        XCTAssertEqual(copy.objectID, savedID)
        XCTAssertEqual(Set([copy.objectID, savedID]).count, 1)
        other = nil
        XCTAssertNil(copy.managedObjectContext, "the context is held weakly")
        XCTAssertEqual(copy.objectID, savedID, "the ID outlives the context")

        context.delete(loose)
        try context.save()
        XCTAssertNil(loose.managedObjectContext, "a saved deletion takes it out")
        XCTAssertEqual(loose.objectID, savedID)
        context.reset()
        XCTAssertNil(undone.managedObjectContext, "reset forgets every object")
        XCTAssertFalse(undone.objectID.isTemporaryID)
    }

    /// Inserting an object the context already holds changes nothing: it keeps its row and
    /// its ID (found by the review of the registry that reads each object's own number).
    func testInsertingAnObjectTheContextHoldsChangesNothing() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let saved = context.insertNewObject(forEntityName: "Tag")
        saved["name"] = "saved"
        try context.save()
        let savedID = saved.objectID
        let primaryKey = try XCTUnwrap(savedID.primaryKey)
        let fresh = context.insertNewObject(forEntityName: "Tag")
        fresh["name"] = "fresh"
        context.insert(saved)
        context.insert(fresh)
        XCTAssertEqual(saved.objectID, savedID)
        XCTAssertFalse(saved.isInserted)
        XCTAssertEqual(context.insertedObjects.count, 1)
        XCTAssert(try context.existingObject(entityName: "Tag", primaryKey: primaryKey) === saved)
        try context.save()
        XCTAssertEqual(try ManagedObjectContext(coordinator: stack.coordinator).names("Tag"), ["fresh", "saved"])
        context.delete(saved)
        context.insert(saved)
        XCTAssertFalse(saved.isDeleted, "inserting a deleted object takes its deletion back")
        XCTAssertFalse(context.hasChanges)
    }

    func testOneObjectPerRowInAContext() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let tag = stack.context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "x"
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let first = try other.objects("Tag").first!
            let second = try other.objects("Tag", "name == 'x'").first!
            XCTAssertTrue(first === second)
            XCTAssertTrue(try stack.context.objects("Tag").first! === tag)
        }
    }

    func testRollbackForgetsInsertsUpdatesAndDeletes() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let kept = context.insertNewObject(forEntityName: "Tag")
            kept["name"] = "kept"
            let doomed = context.insertNewObject(forEntityName: "Tag")
            doomed["name"] = "doomed"
            try context.save()
            kept["name"] = "changed"
            context.delete(doomed)
            let fresh = context.insertNewObject(forEntityName: "Tag")
            fresh["name"] = "fresh"
            context.rollback()
            XCTAssertFalse(context.hasChanges)
            XCTAssertEqual(kept["name"] as? String, "kept")
            XCTAssertFalse(doomed.isDeleted)
            XCTAssertNil(fresh.managedObjectContext)
            XCTAssertEqual(try context.names("Tag"), ["doomed", "kept"])
        }
    }

    func testRefreshDiscardsOrMergesChanges() throws {
        let stack = try makeStack(.sqlite)
        let tag = stack.context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "one"
        try stack.context.save()
        let other = ManagedObjectContext(coordinator: stack.coordinator)
        let otherTag = try other.objects("Tag").first!
        otherTag["name"] = "two"
        try other.save()
        tag["name"] = "mine"
        try stack.context.refresh(tag, mergeChanges: true)
        XCTAssertEqual(tag["name"] as? String, "mine", "merge keeps unsaved changes")
        try stack.context.refresh(tag, mergeChanges: false)
        XCTAssertEqual(tag["name"] as? String, "two")
        XCTAssertFalse(tag.hasChanges)
        tag["name"] = "three"
        XCTAssertNoThrow(try stack.context.save(), "after refresh the context has the current version")
    }

    func testToOneAndToManyInversesStayInSync() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let web = context.insertNewObject(forEntityName: "Category")
            web["name"] = "Web"
            let desk = context.insertNewObject(forEntityName: "Category")
            desk["name"] = "Desktop"
            let system = context.insertNewObject(forEntityName: "System")
            system["userId"] = "alice"
            system["category"] = web
            XCTAssertEqual(web["systems"] as? [ManagedObject], [system])
            system["category"] = desk
            XCTAssertEqual(web["systems"] as? [ManagedObject], [])
            XCTAssertEqual(desk["systems"] as? [ManagedObject], [system])
            web.add(system, toRelationship: "systems")
            XCTAssertTrue(system["category"] as? ManagedObject === web)
            XCTAssertEqual(desk["systems"] as? [ManagedObject], [], "moving to another to-many removes it from the old one")
            try context.save()

            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let fetchedWeb = try other.objects("Category", "name == 'Web'").first!
            let fetchedSystems = fetchedWeb["systems"] as? [ManagedObject]
            XCTAssertEqual(fetchedSystems?.count, 1)
            XCTAssertTrue(fetchedSystems?.first?["category"] as? ManagedObject === fetchedWeb)
        }
    }

    func testManyToManyIsStoredAndSyncedOnBothSides() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let a = context.insertNewObject(forEntityName: "System")
            a["userId"] = "aaa"
            a["name"] = "a"
            let b = context.insertNewObject(forEntityName: "System")
            b["userId"] = "bbb"
            b["name"] = "b"
            let red = context.insertNewObject(forEntityName: "Tag")
            red["name"] = "red"
            let blue = context.insertNewObject(forEntityName: "Tag")
            blue["name"] = "blue"
            a["tags"] = [red, blue]
            b.add(red, toRelationship: "tags")
            XCTAssertEqual(Set((red["systems"] as! [ManagedObject]).map { $0["name"] as! String }), ["a", "b"])
            try context.save()

            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let fetchedRed = try other.objects("Tag", "name == 'red'").first!
            XCTAssertEqual(Set((fetchedRed["systems"] as! [ManagedObject]).map { $0["name"] as! String }), ["a", "b"])
            let fetchedA = try other.objects("System", "name == 'a'").first!
            fetchedA.remove(fetchedRed, fromRelationship: "tags")
            XCTAssertEqual((fetchedRed["systems"] as! [ManagedObject]).map { $0["name"] as! String }, ["b"])
            try other.save()
            let third = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try third.names("Tag", "ANY systems.name == 'a'"), ["blue"])
        }
    }

    func testCascadeDeletesAndNullifyClears() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let note = context.insertNewObject(forEntityName: "Note")
            note["title"] = "n"
            for _ in 0..<3 {
                let attachment = context.insertNewObject(forEntityName: "Attachment")
                attachment["note"] = note
            }
            let category = context.insertNewObject(forEntityName: "Category")
            category["name"] = "Web"
            let system = context.insertNewObject(forEntityName: "System")
            system["userId"] = "alice"
            system["category"] = category
            try context.save()

            context.delete(note)
            try context.save()
            XCTAssertEqual(try context.objects("Attachment").count, 0, "Cascade deleted the attachments")

            context.delete(system)
            try context.save()
            XCTAssertEqual(category["systems"] as? [ManagedObject], [], "Nullify removed the system from its category")
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try other.objects("Category").first?["systems"] as? [ManagedObject], [])
        }
    }

    func testDenyRefusesWithError1600AndChangesNothing() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let category = context.insertNewObject(forEntityName: "Category")
            category["name"] = "Web"
            let system = context.insertNewObject(forEntityName: "System")
            system["userId"] = "alice"
            system["category"] = category
            try context.save()
            context.delete(category)
            XCTAssertThrowsError(try context.save()) { error in
                let validation = error as? ValidationError
                XCTAssertEqual(validation?.code, .relationshipDeniedDelete)
                XCTAssertEqual(validation?.key, "systems")
                XCTAssertTrue(validation?.object === category)
            }
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try other.objects("Category").count, 1, "nothing was deleted")
            XCTAssertEqual(try other.objects("System").first?["category"] == nil, false)
            context.rollback()
            context.delete(system)
            context.delete(category)
            XCTAssertNoThrow(try context.save(), "once no entry uses it, the category can go")
        }
    }

    func testTypedAccess() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            stack.coordinator.managedObjectModel.setClass(System.self, forEntityName: "System")
            let system = stack.context.insert(System.self)
            system.userId = "typed1"
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let fetched = try other.fetch(FetchRequest<System>(predicate: try Predicate(format: "userId == %@", "typed1")))
            XCTAssertEqual(fetched.first?.userId, "typed1")
        }
    }

    func testInheritanceStoresSubentitiesInTheRootTable() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let dog = stack.context.insertNewObject(forEntityName: "Dog")
            dog["name"] = "Rex"
            dog["breed"] = "collie"
            let cat = stack.context.insertNewObject(forEntityName: "Cat")
            cat["name"] = "Tom"
            XCTAssertEqual(cat["lives"] as? Int, 9)
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try other.names("Animal"), ["Rex", "Tom"])
            XCTAssertEqual(try other.names("Dog"), ["Rex"])
            XCTAssertEqual(try other.objects("Animal", "name == 'Tom'").first?.entity.name, "Cat")
        }
    }
}
