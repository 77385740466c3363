import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

/// An outside review of kept deletions (a merge policy keeping a row this save deletes) with
/// relationships, announcements and undo, and of store errors reported as constraint conflicts.
/// Each test was a finding.
final class KeptRelationshipReviewTests: ObjectGraphTestCase {
    override func tearDownWithError() throws {
        HookOther.action = nil
        try super.tearDownWithError()
    }


    private func one(_ entity: String, _ context: ManagedObjectContext, _ format: String, _ arguments: Any...)
        throws -> ManagedObject {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        request.predicate = try ObjectGraph.Predicate(format: format, argumentArray: arguments)
        return try XCTUnwrap(try context.fetch(request).first, "no \(entity) \(format) \(arguments)")
    }

    /// Changes `key` of the object of `entity` named `name` in another process.
    private func touchElsewhere(_ entity: String, _ name: String, _ url: URL, _ model: ManagedObjectModel,
                                key: String = "note") throws {
        let other = try elsewhere(url, model)
        try one(entity, other, "name == %@", name)[key] = "changed elsewhere"
        try other.save()
    }

    /// Parent —children (`rule`)→ Child (nullify back), one parent p and its `children`.
    private func parentAndChild(rule: DeleteRule, children: [String] = ["c"]) throws
        -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string),
                                         AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "children", destination: "Child", inverse: "parent",
                                                    isToMany: true, deleteRule: rule)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "name", type: .string),
                                        AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children",
                                                    deleteRule: .nullify)])
        return try seededStore([parent, child]) { writer in
            let owner = writer.insertNewObject(forEntityName: "Parent")
            owner["name"] = "p"
            for name in children {
                let member = writer.insertNewObject(forEntityName: "Child")
                member["name"] = name
                member["parent"] = owner
            }
        }
    }

    // MARK: - Kept deletions and the relationships of others

    /// Item ←→ Tag, many-to-many, nullify both ways. Item "x" (tagged t1, t2) is deleted here,
    /// changed in another process, and the rollback policy keeps it. The store must still link
    /// x to its tags: its row was kept, so were its links. The nullify rule had taken x out of
    /// each tag's (read) `items`; those tags were saved as updated objects and their join-row
    /// deletes were written, though x's own join rows were spared by `deleteRow`.
    func testAKeptDeletionKeepsItsManyToManyLinks() throws {
        let (coordinator, url, model) = try seededStore(Self.itemsAndTags()) { writer in
            let x = writer.insertNewObject(forEntityName: "Item")
            x["name"] = "x"
            var tags: [ManagedObject] = []
            for name in ["t1", "t2"] {
                let t = writer.insertNewObject(forEntityName: "Tag")
                t["name"] = name
                tags.append(t)
            }
            x["tags"] = tags
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let x = try one("Item", context, "name == 'x'")
        for t in try fetch("Tag", context) { XCTAssertEqual(t.toManyCount("items"), 1) }
        context.delete(x)
        try touchElsewhere("Item", "x", url, model)
        try context.save()
        XCTAssertFalse(x.isDeleted, "the policy kept x")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try one("Item", fresh, "name == 'x'").toManyCount("tags"), 2,
                       "the kept item's links to its tags are in the store")
        XCTAssertEqual(x.toManyCount("tags"), 2, "and in this context")
    }

    /// Person ←→ Passport, one-to-one, nullify both ways. The passport's deletion is kept by the
    /// rollback policy: afterwards the person must still be linked to it, in the store and in
    /// this context. `restoreKeptDeletion` only puts back owners' to-manys (inverse to-many);
    /// the person's to-one was nulled by the nullify rule and written as an update.
    func testAKeptDeletionKeepsItsOneToOnePartner() throws {
        let person = EntityDescription(
            name: "Person", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "passport", destination: "Passport", inverse: "person",
                                                    deleteRule: .nullify)])
        let passport = EntityDescription(
            name: "Passport", attributes: [AttributeDescription(name: "name", type: .string),
                                           AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "person", destination: "Person", inverse: "passport",
                                                    deleteRule: .nullify)])
        let (coordinator, url, model) = try seededStore([person, passport]) { writer in
            let p = writer.insertNewObject(forEntityName: "Person")
            p["name"] = "ann"
            let doc = writer.insertNewObject(forEntityName: "Passport")
            doc["name"] = "doc"
            doc["person"] = p
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let ann = try one("Person", context, "name == 'ann'")
        let doc = try one("Passport", context, "name == 'doc'")
        XCTAssertTrue(ann["passport"] as? ManagedObject === doc)
        context.delete(doc)
        try touchElsewhere("Passport", "doc", url, model)
        try context.save()
        XCTAssertFalse(doc.isDeleted, "the policy kept the passport")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        let storedAnn = try one("Person", fresh, "name == 'ann'")
        let storedDoc = try one("Passport", fresh, "name == 'doc'")
        XCTAssertTrue(storedDoc["person"] as? ManagedObject === storedAnn, "the kept passport's row names ann")
        XCTAssertTrue(storedAnn["passport"] as? ManagedObject === storedDoc, "ann's row names the kept passport")
        XCTAssertTrue(ann["passport"] as? ManagedObject === doc, "ann in this context agrees with the store")
    }

    /// Parent —children (nullify)→ Child. The parent's deletion is kept by the rollback policy;
    /// the nullify rule had cleared each child's `parent`, and those updates were written: the
    /// kept parent's row stays, but its children no longer belong to it. (On the object path a
    /// cascade's members going with a kept owner is documented as intended in `deleteMembers`;
    /// a Nullify rule writing the detachment of the children of a row that is kept is the same
    /// design, but here nothing was deleted, only links of a row that stays were cut.)
    func testAKeptParentKeepsItsChildrenUnderNullify() throws {
        let (coordinator, url, model) = try parentAndChild(rule: .nullify, children: ["a", "b"])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let owner = try one("Parent", context, "name == 'p'")
        context.delete(owner)
        try touchElsewhere("Parent", "p", url, model)
        try context.save()
        XCTAssertFalse(owner.isDeleted, "the policy kept the parent")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try fetch("Child", fresh, "parent.name == 'p'").count, 2,
                       "the kept parent's children still belong to it")
    }

    /// A kept child's parent: the child's Nullify rule took it out of the parent's (read)
    /// to-many in memory, the store still links them after the kept deletion; the parent's
    /// to-many must agree with the store.
    func testAKeptDeletionIsStillAMemberOfItsParentsToMany() throws {
        let (coordinator, url, model) = try parentAndChild(rule: .nullify, children: ["a", "b", "c"])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let owner = try one("Parent", context, "name == 'p'")
        XCTAssertEqual(owner.toManyCount("children"), 3)
        let doomed = try one("Child", context, "name == 'c'")
        context.delete(doomed)
        try touchElsewhere("Child", "c", url, model)
        try context.save()
        XCTAssertFalse(doomed.isDeleted)
        let stored = try fetch("Child", ManagedObjectContext(coordinator: coordinator), "parent.name == 'p'").count
        XCTAssertEqual(stored, 3, "the store still links the kept child")
        XCTAssertEqual(owner.toManyCount("children"), stored, "the parent's to-many as the store has it")
    }

    /// The same many-to-many, the save failing after the links were given back (two new tags of
    /// one unique name): the context must be as before the save, the item deleted and out of
    /// its tags.
    func testLinksGivenBackToAKeptDeletionAreTakenBackWhenTheSaveFails() throws {
        let (coordinator, url, model) = try seededStore(Self.itemsAndTags(unique: ["Tag"])) { writer in
            let x = writer.insertNewObject(forEntityName: "Item")
            x["name"] = "x"
            let t1 = writer.insertNewObject(forEntityName: "Tag")
            t1["name"] = "t1"
            x["tags"] = [t1]
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let x = try one("Item", context, "name == 'x'")
        let t1 = try one("Tag", context, "name == 't1'")
        XCTAssertEqual(t1.toManyCount("items"), 1)
        context.delete(x)
        context.processPendingChanges()
        XCTAssertEqual(t1.toManyCount("items"), 0, "the Nullify rule took x out")
        try touchElsewhere("Item", "x", url, model)
        for _ in 0..<2 { context.insertNewObject(forEntityName: "Tag")["name"] = "new" }
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict, "\(error)")
        }
        XCTAssertTrue(x.isDeleted, "the failed save left the deletion")
        XCTAssertEqual(t1.toManyCount("items"), 0, "and the tag as the deletion left it")
    }

    /// A tag's items replaced whole by the app after x's deletion (w dropped, y kept): when the
    /// policy keeps x, the replacement is still the app's, written as given.
    func testAWholeReplacementBesideAKeptDeletionIsWrittenAsGiven() throws {
        let (coordinator, url, model) = try seededStore(Self.itemsAndTags()) { writer in
            let t = writer.insertNewObject(forEntityName: "Tag")
            t["name"] = "t"
            t["items"] = ["x", "y", "w"].map { name -> ManagedObject in
                let item = writer.insertNewObject(forEntityName: "Item")
                item["name"] = name
                return item
            }
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let t = try one("Tag", context, "name == 't'")
        XCTAssertEqual(t.toManyCount("items"), 3)
        context.delete(try one("Item", context, "name == 'x'"))
        context.processPendingChanges()
        t["items"] = [try one("Item", context, "name == 'y'")]
        try touchElsewhere("Item", "x", url, model)
        try context.save()
        // The reading context is held: an object reads its relationships through it.
        let reader = ManagedObjectContext(coordinator: coordinator)
        let stored = try one("Tag", reader, "name == 't'")
        let names = (stored["items"] as? [ManagedObject] ?? []).compactMap { $0["name"] as? String }
        XCTAssertEqual(names, ["y"], "the app's replacement")
    }

    // MARK: - What is announced for a kept deletion

    /// A fetched results controller over Items: the deletion removed "x" from it (objectsDidChange
    /// announced it deleted). The policy keeps x at the save, yet nothing announces it back, so
    /// the controller goes on without a row the store and the context have.
    func testAFetchedResultsControllerSeesAKeptDeletionComeBack() throws {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "note", type: .string)])
        let (coordinator, url, model) = try seededStore([item]) { writer in
            for name in ["x", "y"] { writer.insertNewObject(forEntityName: "Item")["name"] = name }
        }
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.mergePolicy = .rollback
        var request = FetchRequest<ManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
        try controller.performFetch()
        XCTAssertEqual(controller.fetchedObjects?.count, 2)
        let x = try one("Item", context, "name == 'x'")
        context.delete(x)
        context.processPendingChanges()
        XCTAssertEqual(controller.fetchedObjects?.count, 1)
        try touchElsewhere("Item", "x", url, model)
        try context.save()
        XCTAssertFalse(x.isDeleted)
        XCTAssertEqual(try context.fetch(request).count, 2, "a fetch has x again")
        XCTAssertEqual(controller.fetchedObjects?.count, 2, "the controller has x again")
    }

    // MARK: - A kept deletion beside its deleted owner

    /// p and c are both deleted here; c was changed in another process and the rollback policy
    /// keeps it. p goes, and its Nullify rule, enforced in SQL (`enforceDeleteRules`), clears c's
    /// row's `parent` and bumps its Z_OPT. `restoreKeptDeletion` then loads the row as
    /// `deleteRow` read it, before that write: c holds a parent that is gone and a version the
    /// row no longer has, so its next change fails with a merge conflict.
    func testAKeptChildOfADeletedParentTakesItsRowAsCommitted() throws {
        let (coordinator, url, model) = try parentAndChild(rule: .nullify)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let p = try one("Parent", context, "name == 'p'")
        let c = try one("Child", context, "name == 'c'")
        context.delete(c)
        context.delete(p)
        try touchElsewhere("Child", "c", url, model)
        try context.save()
        XCTAssertFalse(c.isDeleted, "the policy kept c")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        let stored = try one("Child", fresh, "name == 'c'")
        XCTAssertNil(stored["parent"], "the store: p went, its rule cleared c's parent")
        XCTAssertNil(c["parent"], "c in this context as its row is")
        XCTAssertEqual(c.version, stored.version, "c at its row's version")
        context.mergePolicy = .error
        c["note"] = "changed here"
        XCTAssertNoThrow(try context.save(), "nobody else changed c since")
    }

    /// As above with a Cascade rule: p is deleted (c, read here, goes as an object); another
    /// process changed c, so the rollback policy keeps c. The save then fails with a merge
    /// conflict ("linked to p by someone else since it was read"), which is what a merge policy
    /// is there to settle, and nobody linked anything; the store cascade path (c not read)
    /// deletes c's row with p and saves.
    func testACascadeOverAKeptChildSavesUnderRollback() throws {
        let (coordinator, url, model) = try parentAndChild(rule: .cascade)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let p = try one("Parent", context, "name == 'p'")
        _ = try one("Child", context, "name == 'c'")
        XCTAssertEqual(p.toManyCount("children"), 1)
        context.delete(p)
        try touchElsewhere("Child", "c", url, model)
        XCTAssertNoThrow(try context.save(), "the policy settles the changed child")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        if try fetch("Parent", fresh).isEmpty {
            XCTAssertEqual(try fetch("Child", fresh, "parent != nil").count, 0, "no child names a parent that is gone")
        }
    }

    // MARK: - refusingDuplicates

    /// Item is unique by title; the store also has a unique index on ZNOTE that the model does
    /// not declare (an app's own index, or one left by an older model). A save that changes only
    /// an item's note into another's is refused by that index, and `refusingDuplicates` reports
    /// it as a conflict of the name constraint ("has the same name as a stored row"), which
    /// neither row breaks: the fallback `constraints.first` names a constraint that had nothing
    /// to do with the write.
    func testAnUndeclaredUniqueIndexIsNotReportedAsTheNameConstraint() throws {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "note", type: .string)],
            uniquenessConstraints: [["name"]])
        let (coordinator, url, _) = try seededStore([item]) { writer in
            for name in ["x", "y"] {
                let object = writer.insertNewObject(forEntityName: "Item")
                object["name"] = name
                object["note"] = "note of \(name)"
            }
        }
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { db in try db.execute(sql: "CREATE UNIQUE INDEX ZITEM_NOTE ON ZITEM (ZNOTE)") }
        try queue.close()
        let context = ManagedObjectContext(coordinator: coordinator)
        try one("Item", context, "name == 'y'")["note"] = "note of x"
        XCTAssertThrowsError(try context.save()) { error in
            let message = "\(error)"
            XCTAssertFalse(message.contains("same name"), "no row has the same name: \(message)")
        }
    }

    // MARK: - Hooks linking to deleted objects

    /// Item —tags (cascade)→ Tag, many-to-many; Other's willSave runs `HookOther.action`.
    /// x is deleted with its tag t1 (cascade). A hook adds x to t2's unread `items` with
    /// `add(_:toRelationship:)` (the O(1) path that leaves it unread): t2 is an updated object
    /// that changed a relationship to a deleted object, so x's rules must apply again and
    /// cascade to t2. `deletedObjectsLinked` only looks at to-manys in `loadedToMany`, so it
    /// misses x; t2 is saved, linked to nothing, while t1 went.
    func testAHookAddingADeletedObjectToAnUnreadToManyAppliesItsRulesAgain() throws {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "tags", destination: "Tag", inverse: "items",
                                                    isToMany: true, deleteRule: .cascade)])
        let tag = EntityDescription(
            name: "Tag", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "items", destination: "Item", inverse: "tags",
                                                    isToMany: true, deleteRule: .nullify)])
        let other = EntityDescription(name: "Other", attributes: [AttributeDescription(name: "name", type: .string)])
        let (coordinator, _, _) = try seededStore([item, tag, other], classes: ["Other": HookOther.self]) { writer in
            let x = writer.insertNewObject(forEntityName: "Item")
            x["name"] = "x"
            let t1 = writer.insertNewObject(forEntityName: "Tag")
            t1["name"] = "t1"
            writer.insertNewObject(forEntityName: "Tag")["name"] = "t2"
            x["tags"] = [t1]
            writer.insertNewObject(forEntityName: "Other")["name"] = "o"
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        let x = try one("Item", context, "name == 'x'")
        let t2 = try one("Tag", context, "name == 't2'")
        try one("Other", context, "name == 'o'")["name"] = "touched"
        context.delete(x)
        context.processPendingChanges()
        HookOther.action = { _ in t2.add(x, toRelationship: "items") }
        XCTAssertNoThrow(try context.save())
        HookOther.action = nil
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try fetch("Item", fresh).count, 0)
        XCTAssertEqual(try fetch("Tag", fresh).compactMap { $0["name"] as? String }, [],
                       "x's cascade took t1 and t2, the tag the hook linked to it")
    }
}
