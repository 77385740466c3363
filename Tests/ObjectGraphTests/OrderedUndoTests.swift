import Foundation
import XCTest
@testable import ObjectGraph

/// Undo and redo of an ordered to-many, which undo keeps whole once per group: every change to
/// it after the group's first is left to that one record.
final class OrderedUndoTests: ObjectGraphTestCase {
    /// Parents p, with `count` ordered children, and q, with none, stored.
    private func stored(children count: Int) throws -> PersistentStoreCoordinator {
        try seededStore(Self.family(ordered: true)) { writer in
            for name in ["p", "q"] {
                writer.insertNewObject(forEntityName: "Parent")["name"] = name
            }
            let owner = try XCTUnwrap(writer.insertedObjects.first { $0["name"] as? String == "p" })
            owner["children"] = (0..<count).map { number -> ManagedObject in
                let child = writer.insertNewObject(forEntityName: "Child")
                child["name"] = "c\(number)"
                return child
            }
        }.coordinator
    }

    /// A context with an undo manager, p read in it, and p's children.
    private func undoableOwner(children count: Int) throws -> (ManagedObjectContext, ManagedObject, [ManagedObject]) {
        let context = ManagedObjectContext(coordinator: try stored(children: count), notificationCenter: NotificationCenter())
        context.undoManager = ContextUndoManager()
        let owner = try XCTUnwrap(try fetch("Parent", context, "name == 'p'").first)
        return (context, owner, try XCTUnwrap(owner["children"] as? [ManagedObject]))
    }

    private func names(_ owner: ManagedObject) -> [String] {
        ((owner["children"] as? [ManagedObject]) ?? []).map { $0["name"] as? String ?? "?" }
    }

    /// In one group: a leaves (the group keeps the whole relationship), c joins and e joins,
    /// then c leaves again. Undo gives back the relationship before the group; redo gives the
    /// one after it, without c (a record of c's join alone would bring c back on redo).
    func testChangesAfterTheGroupsFirstAreUndoneAndRedoneWithIt() throws {
        let (context, owner, members) = try undoableOwner(children: 3)
        let before = names(owner)
        context.undoManager!.beginUndoGrouping()
        owner.remove(members[0], fromRelationship: "children")
        let c = context.insertNewObject(forEntityName: "Child")
        c["name"] = "c"
        c["parent"] = owner
        let e = context.insertNewObject(forEntityName: "Child")
        e["name"] = "e"
        owner.add(e, toRelationship: "children")
        c["parent"] = nil
        context.undoManager!.endUndoGrouping()
        let after = names(owner)
        XCTAssertEqual(after, ["c1", "c2", "e"])
        context.undo()
        XCTAssertEqual(names(owner), before)
        context.redo()
        XCTAssertEqual(names(owner), after)
        try context.save()
        let reader = ManagedObjectContext(coordinator: context.coordinator)
        XCTAssertEqual(names(try XCTUnwrap(try fetch("Parent", reader, "name == 'p'").first)), after)
    }

    /// 500 of 1,000 members leave in one group: one record keeps the relationship (O(its size)
    /// once), and one for each member's own parent; undone, all are back in their places.
    func testManyRemovalsInOneGroupKeepTheRelationshipOnce() throws {
        let (context, owner, members) = try undoableOwner(children: 1000)
        let before = names(owner)
        context.undoManager!.beginUndoGrouping()
        for (number, member) in members.enumerated() where number % 2 == 0 {
            owner.remove(member, fromRelationship: "children")
        }
        XCTAssertEqual(context.undoManager!.openActionCount, 500 + 1)
        context.undoManager!.endUndoGrouping()
        XCTAssertEqual(names(owner).count, 500)
        context.undo()
        XCTAssertEqual(names(owner), before)
    }

    /// Random groups of removals, joins (new children and old ones coming back), moves to the
    /// other parent and whole replacements, with saves between some groups and event groups
    /// between others. Undone group by group, both parents go back through every state they
    /// had; redone, forward through them again; saved, the store holds the last one in order.
    func testRandomGroupsUndoAndRedoThroughEveryState() throws {
        for seed: UInt64 in [1, 2, 3, 4, 5, 6] {
            let coordinator = try stored(children: 40)
            let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
            context.undoManager = ContextUndoManager()
            let owner = try XCTUnwrap(try fetch("Parent", context, "name == 'p'").first)
            let other = try XCTUnwrap(try fetch("Parent", context, "name == 'q'").first)
            var children = try XCTUnwrap(owner["children"] as? [ManagedObject])
            var random = FetchPowerTests.Generator(state: seed)
            var states = [(names(owner), names(other))]
            for group in 0..<12 {
                let groups = context.undoManager!.undoGroupCount
                let explicit = random.next(2) == 0
                if explicit { context.undoManager!.beginUndoGrouping() }
                for _ in 0..<(1 + random.next(8)) {
                    let child = children[random.next(children.count)]
                    switch random.next(6) {
                    case 0: owner.remove(child, fromRelationship: "children")
                    case 1: child["parent"] = nil
                    case 2: child["parent"] = other
                    case 3: owner.add(child, toRelationship: "children")
                    case 4:
                        let made = context.insertNewObject(forEntityName: "Child")
                        made["name"] = "s\(seed)g\(group)n\(children.count)"
                        made["parent"] = random.next(2) == 0 ? owner : other
                        children.append(made)
                    default:
                        var kept = try XCTUnwrap(owner["children"] as? [ManagedObject])
                        kept.removeAll { _ in random.next(4) == 0 }
                        owner["children"] = Array(kept.reversed())
                    }
                }
                if explicit { context.undoManager!.endUndoGrouping() } else { context.processPendingChanges() }
                // A group that changed nothing is no step of undo.
                if context.undoManager!.undoGroupCount > groups { states.append((names(owner), names(other))) }
                if random.next(3) == 0 { try context.save() }
            }
            let label = "seed \(seed)"
            for state in states.dropLast().reversed() {
                context.undo()
                XCTAssertEqual(names(owner), state.0, "\(label): undone")
                XCTAssertEqual(names(other), state.1, "\(label): undone")
            }
            for state in states.dropFirst() {
                context.redo()
                XCTAssertEqual(names(owner), state.0, "\(label): redone")
                XCTAssertEqual(names(other), state.1, "\(label): redone")
            }
            try context.save()
            let reader = ManagedObjectContext(coordinator: coordinator)
            XCTAssertEqual(names(try XCTUnwrap(try fetch("Parent", reader, "name == 'p'").first)), states.last!.0, label)
            XCTAssertEqual(names(try XCTUnwrap(try fetch("Parent", reader, "name == 'q'").first)), states.last!.1, label)
        }
    }
}
