import Foundation
import XCTest
@testable import ObjectGraph

/// An outside review of the save's order (deletes first, kept deletions applied once committed,
/// unique values vacated, hooks' links to deleted objects). Each test was a finding.
final class KeptDeletionReviewTests: ObjectGraphTestCase {
    override func tearDownWithError() throws {
        StampingHolder.stamps = 0
        CountingItem.prepared = 0
        try super.tearDownWithError()
    }


    /// Item: title (unique), note, secret (kept in the history's tombstone).
    private func items(_ titles: [String], history: Bool = false, counting: Bool = false) throws
        -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        var secret = AttributeDescription(name: "secret", type: .string)
        secret.preservesValueInHistoryOnDeletion = true
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "title", type: .string),
                                       AttributeDescription(name: "note", type: .string), secret],
            uniquenessConstraints: [["title"]])
        return try seededStore([item], history: history, classes: counting ? ["Item": CountingItem.self] : [:]) { writer in
            for title in titles {
                let object = writer.insertNewObject(forEntityName: "Item")
                object["title"] = title
                object["secret"] = "secret of \(title)"
            }
        }
    }

    private func item(_ title: String, _ context: ManagedObjectContext) throws -> ManagedObject {
        try XCTUnwrap(try fetch("Item", context, "title == %@", title).first, "no item \(title)")
    }

    /// Changes the note of the item titled `title` in another process.
    private func touchElsewhere(_ title: String, _ url: URL, _ model: ManagedObjectModel) throws {
        let other = try elsewhere(url, model)
        try item(title, other)["note"] = "changed elsewhere"
        try other.save()
    }

    private func titles(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        try fetch("Item", ManagedObjectContext(coordinator: coordinator)).compactMap { $0["title"] as? String }.sorted()
    }

    // MARK: - A kept deletion's object afterwards

    /// An item "x" deleted here under the rollback policy after another process changed it:
    /// the save keeps it. Returns its context and object.
    private func keptDeletion(history: Bool = false, counting: Bool = false) throws
        -> (coordinator: PersistentStoreCoordinator, context: ManagedObjectContext, object: ManagedObject) {
        let (coordinator, url, model) = try items(["x", "y"], history: history, counting: counting)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let doomed = try item("x", context)
        context.delete(doomed)
        let other = try elsewhere(url, model, history: history)
        try item("x", other)["note"] = "changed elsewhere"
        try other.save()
        try context.save()
        XCTAssertFalse(doomed.isDeleted)
        XCTAssertEqual(try titles(coordinator), ["x", "y"], "the policy kept the row")
        return (coordinator, context, doomed)
    }


    /// Rollback policy keeps a deletion (row changed elsewhere). Deleted again with nothing
    /// changed since, under either policy, the row must go: the object was left a fault at the
    /// version read before the other process's change, so the error policy saw a conflict, and
    /// the rollback policy kept the row again, for ever, each save reporting success.
    func testAKeptDeletionDeletedAgainIsDeleted() throws {
        for policy in [MergePolicy.error, .rollback] {
            let (coordinator, context, doomed) = try keptDeletion()
            context.mergePolicy = policy
            context.delete(doomed)
            XCTAssertNoThrow(try context.save(), "\(policy): deleted again after its kept deletion")
            XCTAssertEqual(try titles(coordinator), ["y"], "\(policy)")
        }
    }

    /// History with a preserved attribute: deleted again after a kept deletion (object trump, so
    /// the stale version does not block it), its history's tombstone must hold the value. The
    /// object was left a fault with `isPreparedForDeletion` still set, so the second deletion
    /// never reads its row and the tombstone comes out empty.
    func testSecondDeletionAfterAKeptOneKeepsItsTombstone() throws {
        let (coordinator, context, doomed) = try keptDeletion(history: true)
        context.mergePolicy = .mergeByPropertyObjectTrump
        context.delete(doomed)
        try context.save()
        XCTAssertEqual(try titles(coordinator), ["y"])
        let history = try ManagedObjectContext(coordinator: coordinator).fetchHistory(after: nil)
        let deletion = try XCTUnwrap(history.flatMap(\.changes).last { $0.changeType == .delete })
        XCTAssertEqual(deletion.tombstone?["secret"] as? String, "secret of x", "the preserved attribute")
    }

    /// The kept object's prepareForDeletion ran for the deletion that was kept; deleted again,
    /// it is a new deletion and must be prepared again (Core Data calls it on each delete).
    func testSecondDeletionAfterAKeptOneIsPreparedAgain() throws {
        let (coordinator, context, doomed) = try keptDeletion(counting: true)
        XCTAssertEqual(CountingItem.prepared, 1)
        _ = doomed["note"]  // read: its version is the row's again
        context.delete(doomed)
        try context.save()
        XCTAssertEqual(try titles(coordinator), ["y"])
        XCTAssertEqual(CountingItem.prepared, 2, "prepareForDeletion for the second deletion")
    }

    /// Undo of a deletion the policy kept: the object never left the store nor this context, so
    /// undoing must not announce it as inserted (undelete puts an object it finds in the context
    /// but not in the deleted set into `unprocessedInserted`).
    func testUndoOfAKeptDeletionDoesNotAnnounceAnInsertion() throws {
        let (coordinator, url, model) = try items(["x", "y"])
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.undoManager = ContextUndoManager()
        context.mergePolicy = .rollback
        let doomed = try item("x", context)
        context.delete(doomed)
        try touchElsewhere("x", url, model)
        try context.save()
        XCTAssertFalse(doomed.isDeleted)
        let announced = AnnouncedObjects()
        let observer = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil
        ) { note in
            announced.inserted += note.userInfo?[ManagedObjectContext.insertedObjectsKey] as? [ManagedObject] ?? []
        }
        defer { context.notificationCenter.removeObserver(observer) }
        context.undo()
        XCTAssertFalse(announced.inserted.contains { $0 === doomed }, "announced as inserted, yet never inserted")
        XCTAssertFalse(context.insertedObjects.contains { $0 === doomed })
    }

    // MARK: - Vacating unique values

    /// Two rows swap their titles; another process changed one of them meanwhile. With object
    /// trump both renames win, so the swap must save whichever row was the changed one. The
    /// vacate step skips the changed row (Z_OPT differs), and the other row's rename then meets
    /// its old value still in the index.
    func testSwapWithOneRowChangedElsewhereSavesUnderObjectTrump() throws {
        for changed in ["x", "y"] {
            let (coordinator, url, model) = try items(["x", "y"])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let first = try item("x", context), second = try item("y", context)
            first["title"] = "y"
            second["title"] = "x"
            try touchElsewhere(changed, url, model)
            XCTAssertNoThrow(try context.save(), "swap, \(changed) changed elsewhere")
            let fresh = ManagedObjectContext(coordinator: coordinator)
            let notes = Dictionary(uniqueKeysWithValues: try fetch("Item", fresh).map {
                ($0["title"] as? String ?? "?", $0["note"] as? String)
            })
            XCTAssertEqual(Set(notes.keys), ["x", "y"], "changed \(changed)")
            // The row changed elsewhere moved to the other title, its note kept.
            XCTAssertEqual(notes[changed == "x" ? "y" : "x"] ?? nil, "changed elsewhere", "changed \(changed)")
        }
    }

    /// Rollback policy: A moves x→z but was changed elsewhere (the policy keeps its x); B moves
    /// y→x. The save must fail with the uniqueness conflict (133021), not SQLite's error, write
    /// nothing, and leave A's unsaved rename in the context, as any failed save leaves its changes.
    func testRenameIntoTheValueOfAMoveThePolicyRollsBack() throws {
        for order in [false, true] {
            let (coordinator, url, model) = try items(["x", "y"])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .rollback
            let a = try item("x", context), b = try item("y", context)
            if order {
                b["title"] = "x"; a["title"] = "z"
            } else {
                a["title"] = "z"; b["title"] = "x"
            }
            try touchElsewhere("x", url, model)
            XCTAssertThrowsError(try context.save()) { error in
                XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict, "order \(order): \(error)")
            }
            XCTAssertEqual(a["title"] as? String, "z", "order \(order): a failed save keeps A's change")
            XCTAssertTrue(context.updatedObjects.contains { $0 === a }, "order \(order)")
            XCTAssertEqual(try titles(coordinator), ["x", "y"])
        }
    }

    /// Rollback policy: A's row was deleted elsewhere, so the policy forgets A; C's rename was
    /// changed elsewhere, so the policy drops it, and B's rename into C's value then fails the
    /// save (133021). A must still be in the context with its change, and C with its rename.
    func testObjectsThePolicySettledComeBackWhenTheSaveFails() throws {
        let (coordinator, url, model) = try items(["a", "b", "c"])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let a = try item("a", context), b = try item("b", context), c = try item("c", context)
        a["note"] = "mine"
        c["title"] = "z"
        b["title"] = "c"
        let other = try elsewhere(url, model)
        other.delete(try item("a", other))
        try item("c", other)["note"] = "changed elsewhere"
        try other.save()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict, "\(error)")
        }
        XCTAssertTrue(a.managedObjectContext === context, "still this context's")
        XCTAssertTrue(context.registeredObjects.contains { $0 === a })
        XCTAssertEqual(a["note"] as? String, "mine")
        XCTAssertEqual(c["title"] as? String, "z")
        XCTAssertEqual(Set(context.updatedObjects.map(ObjectIdentifier.init)),
                       Set([a, b, c].map(ObjectIdentifier.init)))
        XCTAssertEqual(try titles(coordinator), ["b", "c"], "nothing written")
    }

    // MARK: - Hooks' links to deleted objects

    /// A hook touches an object whose unchanged to-one names a row another process deleted.
    /// Before b2cf1d7 the save wrote the touched object (verifyDestinations checks changed
    /// to-ones only); `deletedObjectsLinked` now resolves every to-one of every object a hook
    /// changed, reads the missing row and keeps a 133000 error that fails the save.
    func testHookTouchingAnObjectWithAnUnrelatedDanglingToOneStillSaves() throws {
        let (coordinator, url, model) = try holders(count: 1)
        let context = ManagedObjectContext(coordinator: coordinator)
        let holder = try XCTUnwrap(try fetch("Holder", context).first)
        holder["name"] = "renamed"
        let other = try elsewhere(url, model)
        for label in try fetch("Label", other) { other.delete(label) }
        try other.save()
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(StampingHolder.stamps, 1)
    }

    /// The same walk reads and registers every destination of every object a hook changed, only
    /// to ask whether it is deleted (a deleted object is always registered): a hook stamping N
    /// objects makes N row reads and N registered objects.
    func testHookWalkDoesNotReadEveryDestination() throws {
        let (coordinator, _, _) = try holders(count: 200)
        let context = ManagedObjectContext(coordinator: coordinator)
        for holder in try fetch("Holder", context) { holder["name"] = "renamed" }
        let before = context.registeredObjects.count
        try context.save()
        XCTAssertEqual(StampingHolder.stamps, 200)
        XCTAssertEqual(context.registeredObjects.count, before, "no label read or registered by the save")
    }

    /// Holder (willSave stamps it) —label→ Label (no inverse, no action), `count` of each.
    private func holders(count: Int) throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let label = EntityDescription(name: "Label", attributes: [AttributeDescription(name: "name", type: .string)])
        let holder = EntityDescription(
            name: "Holder", attributes: [AttributeDescription(name: "name", type: .string),
                                         AttributeDescription(name: "stamp", type: .integer64)],
            relationships: [RelationshipDescription(name: "label", destination: "Label", deleteRule: .noAction)])
        let made = try seededStore([label, holder]) { writer in
            for number in 0..<count {
                let tag = writer.insertNewObject(forEntityName: "Label")
                tag["name"] = "l\(number)"
                let owner = writer.insertNewObject(forEntityName: "Holder")
                owner["name"] = "h\(number)"
                owner["label"] = tag
            }
        }
        made.2.setClass(StampingHolder.self, forEntityName: "Holder")
        return made
    }
}

private final class AnnouncedObjects: @unchecked Sendable {
    var inserted: [ManagedObject] = []
}

/// Stamps itself in willSave, as an app's modification date would.
final class StampingHolder: ManagedObject {
    nonisolated(unsafe) static var stamps = 0

    override func willSave() {
        guard hasChanges, !isDeleted else { return }
        StampingHolder.stamps += 1
        self["stamp"] = StampingHolder.stamps
    }
}

/// Counts prepareForDeletion calls.
final class CountingItem: ManagedObject {
    nonisolated(unsafe) static var prepared = 0

    override func prepareForDeletion() {
        CountingItem.prepared += 1
    }
}

extension ManagedObject {
    /// The number of members of a to-many, however the relationship is exposed.
    func toManyCount(_ key: String) -> Int {
        switch self[key] {
        case let set as Set<ManagedObject>: return set.count
        case let array as [ManagedObject]: return array.count
        case let members as RelationshipMembers: return members.count
        default:
            guard let relationship = entity.relationshipsByName[key] else { return -1 }
            return toManyObjects(relationship).count
        }
    }
}
