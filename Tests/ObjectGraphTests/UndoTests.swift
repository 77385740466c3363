import Foundation
import TestSupport
import XCTest
@testable import ObjectGraph

final class UndoTests: BoardTestCase {
    func makeContext(_ kind: StoreKind) throws -> ManagedObjectContext {
        let context = try makeStack(kind).context
        context.undoManager = ContextUndoManager()
        return context
    }

    func testAttributeChangesUndoAndRedoByEvent() {
        forEachStoreKind { kind in
            let context = try makeContext(kind)
            let tag = context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "a"
            try context.save()
            XCTAssertTrue(context.undoManager!.canUndo, "a save keeps the history")
            context.undoManager!.removeAllActions()

            tag["name"] = "b"
            context.processPendingChanges()
            tag["name"] = "c"
            tag["name"] = "d"                 // same event as "c"
            XCTAssertTrue(context.undoManager!.canUndo)
            context.undo()
            XCTAssertEqual(tag["name"] as? String, "b")
            XCTAssertTrue(context.undoManager!.canRedo)
            context.undo()
            XCTAssertEqual(tag["name"] as? String, "a")
            XCTAssertFalse(tag.isUpdated, "back at its saved state")
            XCTAssertFalse(context.hasChanges)
            XCTAssertFalse(context.undoManager!.canUndo)
            context.redo()
            XCTAssertEqual(tag["name"] as? String, "b")
            XCTAssertTrue(tag.isUpdated)
            context.redo()
            XCTAssertEqual(tag["name"] as? String, "d")
            XCTAssertFalse(context.undoManager!.canRedo)
            context.undo()
            tag["name"] = "e"                 // a new change drops what could be redone
            XCTAssertFalse(context.undoManager!.canRedo)
            try context.save()
            XCTAssertEqual(try ManagedObjectContext(coordinator: context.coordinator).names("Tag"), ["e"])
        }
    }

    func testInsertsAndDeletesUndoAndRedo() {
        forEachStoreKind { kind in
            let context = try makeContext(kind)
            let kept = context.insertNewObject(forEntityName: "Tag")
            kept["name"] = "kept"
            try context.save()

            let added = context.insertNewObject(forEntityName: "Tag")
            added["name"] = "added"
            context.processPendingChanges()
            XCTAssertEqual(try context.names("Tag"), ["added", "kept"])
            context.undo()
            XCTAssertFalse(added.isInserted)
            XCTAssertNil(added.managedObjectContext)
            XCTAssertEqual(try context.names("Tag"), ["kept"])
            context.redo()
            XCTAssertTrue(added.isInserted)
            XCTAssertEqual(added["name"] as? String, "added")
            XCTAssertEqual(try context.names("Tag"), ["added", "kept"])

            context.delete(kept)
            context.delete(added)
            context.processPendingChanges()
            XCTAssertEqual(try context.names("Tag"), [])
            context.undo()
            XCTAssertFalse(kept.isDeleted)
            XCTAssertTrue(added.isInserted)
            XCTAssertEqual(try context.names("Tag"), ["added", "kept"])
            context.redo()
            XCTAssertTrue(kept.isDeleted)
            XCTAssertEqual(try context.names("Tag"), [])
            context.undo()
            try context.save()
            XCTAssertEqual(try ManagedObjectContext(coordinator: context.coordinator).names("Tag"), ["added", "kept"])
        }
    }

    func testRelationshipChangesUndoOnBothSides() {
        forEachStoreKind { kind in
            let context = try makeContext(kind)
            let web = context.insertNewObject(forEntityName: "Category")
            let mail = context.insertNewObject(forEntityName: "Category")
            web["name"] = "Web"
            mail["name"] = "Mail"
            let system = context.insertNewObject(forEntityName: "System")
            system["name"] = "site"
            system["userId"] = "user1"
            system["category"] = web
            let tag = context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "work"
            try context.save()

            system["category"] = mail
            system.add(tag, toRelationship: "tags")
            context.processPendingChanges()
            XCTAssertEqual(mail["systems"] as? [ManagedObject], [system])
            XCTAssertEqual(tag["systems"] as? [ManagedObject], [system])
            context.undo()
            XCTAssertTrue(system["category"] as? ManagedObject === web)
            XCTAssertEqual(web["systems"] as? [ManagedObject], [system], "the inverse is back")
            XCTAssertEqual(mail["systems"] as? [ManagedObject], [])
            XCTAssertEqual(system["tags"] as? [ManagedObject], [])
            XCTAssertEqual(tag["systems"] as? [ManagedObject], [])
            context.redo()
            XCTAssertTrue(system["category"] as? ManagedObject === mail)
            XCTAssertEqual(web["systems"] as? [ManagedObject], [])
            XCTAssertEqual(tag["systems"] as? [ManagedObject], [system])
            try context.save()

            let fresh = ManagedObjectContext(coordinator: context.coordinator)
            let stored = try XCTUnwrap(fresh.objects("System").first)
            XCTAssertEqual((stored["category"] as? ManagedObject)?["name"] as? String, "Mail")
            XCTAssertEqual((stored["tags"] as? [ManagedObject])?.map { $0["name"] as? String }, ["work"])
        }
    }

    func testExplicitGroupsNestAndEventGroupingCanBeOff() throws {
        let context = try makeContext(.inMemory)
        let undo = context.undoManager!
        let tag = context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "a"
        try context.save()
        undo.removeAllActions()

        undo.beginUndoGrouping()
        tag["name"] = "b"
        context.processPendingChanges()   // does not end an explicit group
        undo.beginUndoGrouping()
        tag["name"] = "c"
        undo.endUndoGrouping()
        XCTAssertEqual(undo.groupingLevel, 1)
        undo.endUndoGrouping()
        context.undo()
        XCTAssertEqual(tag["name"] as? String, "a", "the nested groups undo as one")

        undo.groupsByEvent = false
        tag["name"] = "outside any group"
        XCTAssertFalse(undo.canUndo, "without event grouping, changes outside a group are not recorded")
        undo.beginUndoGrouping()
        tag["name"] = "inside"
        undo.endUndoGrouping()
        context.undo()
        XCTAssertEqual(tag["name"] as? String, "outside any group")
    }

    func testLevelsOfUndoKeepsTheNewestGroups() throws {
        let context = try makeContext(.inMemory)
        context.undoManager!.levelsOfUndo = 2
        let tag = context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "0"
        try context.save()
        for name in ["1", "2", "3"] {
            tag["name"] = name
            context.processPendingChanges()
        }
        context.undo()
        context.undo()
        XCTAssertEqual(tag["name"] as? String, "1")
        XCTAssertFalse(context.undoManager!.canUndo)
        context.undo()
        XCTAssertEqual(tag["name"] as? String, "1")
    }

    func testDisabledRegistrationRecordsNothing() throws {
        let context = try makeContext(.inMemory)
        let undo = context.undoManager!
        let tag = context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "saved"
        try context.save()
        undo.removeAllActions()
        tag["name"] = "recorded"
        context.processPendingChanges()
        undo.disableUndoRegistration()
        XCTAssertFalse(undo.isUndoRegistrationEnabled)
        let quiet = context.insertNewObject(forEntityName: "Tag")
        quiet["name"] = "not recorded"
        context.processPendingChanges()
        undo.enableUndoRegistration()
        context.undo()
        XCTAssertEqual(tag["name"] as? String, "saved")
        XCTAssertTrue(quiet.isInserted, "an unrecorded insert stays")
        XCTAssertFalse(undo.canUndo)
    }

    func testRollbackAndResetClearTheHistoryAndASaveKeepsIt() throws {
        let context = try makeContext(.inMemory)
        let undo = context.undoManager!
        context.insertNewObject(forEntityName: "Tag")["name"] = "x"
        context.processPendingChanges()
        XCTAssertTrue(undo.canUndo)
        context.rollback()
        XCTAssertFalse(undo.canUndo)
        XCTAssertFalse(undo.canRedo)
        context.insertNewObject(forEntityName: "Tag")["name"] = "y"
        context.processPendingChanges()
        context.undo()
        XCTAssertTrue(undo.canRedo)
        context.reset()
        XCTAssertFalse(undo.canRedo)
        context.insertNewObject(forEntityName: "Tag")["name"] = "z"
        try context.save()
        XCTAssertTrue(undo.canUndo)
    }

    /// Undoing saved changes makes unsaved ones that reverse them: a saved rename, a saved
    /// deletion (the object comes back as a new row) and a saved insertion.
    func testUndoAndRedoAcrossSaves() {
        forEachStoreKind { kind in
            let context = try makeContext(kind)
            let stored = { try ManagedObjectContext(coordinator: context.coordinator).names("Tag") }
            let tag = context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "a"
            try context.save()
            tag["name"] = "b"
            try context.save()
            context.delete(tag)
            try context.save()
            XCTAssertEqual(try stored(), [])

            context.undo()
            XCTAssertTrue(tag.isInserted, "the saved deletion comes back as an insertion")
            try context.save()
            XCTAssertEqual(try stored(), ["b"])
            context.undo()
            XCTAssertEqual(tag["name"] as? String, "a")
            XCTAssertTrue(tag.isUpdated)
            try context.save()
            XCTAssertEqual(try stored(), ["a"])
            context.undo()
            XCTAssertTrue(tag.isDeleted, "the saved insertion is taken back by a deletion")
            try context.save()
            XCTAssertEqual(try stored(), [])
            XCTAssertFalse(context.undoManager!.canUndo)

            context.redo()
            try context.save()
            XCTAssertEqual(try stored(), ["a"])
            context.redo()
            context.redo()
            try context.save()
            XCTAssertEqual(try stored(), [])
            context.undo()
            try context.save()
            XCTAssertEqual(try stored(), ["b"])
        }
    }

    func testUndoIsAnnouncedSoAFetchedResultsControllerFollows() throws {
        let context = try makeBoard(.sqlite)
        context.undoManager = ContextUndoManager()
        let alpha = group(context, "alpha")
        item(context, "a", group: alpha)
        try context.save()
        let (controller, delegate) = try observe(context)
        let b = item(context, "b", group: group(context, "beta"))
        context.processPendingChanges()
        XCTAssertEqual(controller.sections.map(\.name), ["alpha", "beta"])
        context.undo()
        XCTAssertEqual(controller.sections.map(\.name), ["alpha"])
        XCTAssertEqual(delegate.sectionCount(.delete), 1)
        XCTAssertEqual(delegate.count(.delete), 1)
        context.redo()
        XCTAssertEqual(controller.indexPath(for: b), FetchedIndexPath(item: 0, section: 1))
        XCTAssertEqual(delegate.problems, [])
        XCTAssertEqual(delegate.mirror, try expectedSections(context, where: nil))
    }

    /// Random changes in random groups, some saved; undoing every group walks back through
    /// the same states and then saves as the first state, or redoing walks forward again and
    /// saves as the last.
    func testRandomizedUndoAndRedoRetraceEveryState() {
        forEachStoreKind { kind in
            for seed in UInt64(7)...UInt64(6 + 5 * Self.sweepScale) {
                try retrace(kind, seed: seed, redoing: false)
                try retrace(kind, seed: seed, redoing: true)
            }
        }
    }

    private func retrace(_ kind: StoreKind, seed: UInt64, redoing: Bool) throws {
        var random = SplitMix64(seed: seed)
        let context = try makeBoard(kind, name: "undo\(seed)\(redoing)")
        context.undoManager = ContextUndoManager()
        var all: [ManagedObject] = []
        for name in ["g0", "g1"] { all.append(group(context, name)) }
        for index in 0..<6 { all.append(item(context, "i\(index)", group: all[index % 2])) }
        try context.save()
        let label = "seed \(seed) \(kind) \(redoing ? "redo" : "undo")"

        func state() -> [String] {
            all.map { object in
                guard object.managedObjectContext === context, !object.isDeleted else { return "gone" }
                if object.entity.name == "Group" {
                    let items = (object["items"] as? [ManagedObject] ?? []).filter { !$0.isDeleted }
                    let names = items.map { $0["name"] as? String ?? "" }.sorted()
                    return "\(object["name"] ?? "") [\(names.joined(separator: ","))]"
                }
                return MergePolicyTests.summary(object)
            }
        }
        var states = [state()]
        var saves = 0
        for step in 0..<40 {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let live = all.filter { $0.managedObjectContext === context && !$0.isDeleted }
                let items = live.filter { $0.entity.name == "Item" }
                let groups = live.filter { $0.entity.name == "Group" }
                switch Int.random(in: 0..<7, using: &random) {
                case 0: all.append(item(context, "new\(step)", group: groups.randomElement(using: &random)))
                case 1: if let victim = items.randomElement(using: &random) { context.delete(victim) }
                case 2: items.randomElement(using: &random)?["name"] = "renamed\(step)"
                case 3: items.randomElement(using: &random)?["rank"] = step
                case 4: items.randomElement(using: &random)?["group"] = groups.randomElement(using: &random)
                case 5:
                    if let group = groups.randomElement(using: &random),
                       let item = items.randomElement(using: &random) {
                        group.remove(item, fromRelationship: "items")
                    }
                default: all.append(group(context, "group\(step)"))
                }
            }
            let groups = context.undoManager!.undoGroupCount
            if Int.random(in: 0..<4, using: &random) == 0 {
                try context.save()
                saves += 1
            } else {
                context.processPendingChanges()
            }
            // A step whose changes all were no-ops (a to-one set to what it was) makes no group.
            if context.undoManager!.undoGroupCount > groups { states.append(state()) }
        }
        // Objects made after a state are gone in it.
        func expected(_ index: Int) -> [String] {
            states[index] + Array(repeating: "gone", count: all.count - states[index].count)
        }
        func storedItems() throws -> [String] {
            // Kept in a variable: objects hold their context weakly, and faults need it.
            let fresh = ManagedObjectContext(coordinator: context.coordinator)
            return try fresh.objects("Item").map(MergePolicyTests.summary).sorted()
        }
        func items(of state: [String]) -> [String] { state.filter { $0 != "gone" && !$0.contains("[") }.sorted() }

        for index in stride(from: states.count - 2, through: 0, by: -1) {
            context.undo()
            let now = state()
            guard now == expected(index) else {
                let differences = zip(now, expected(index)).enumerated().filter { $0.element.0 != $0.element.1 }
                return XCTFail("\(label): undo back to state \(index): \(differences)")
            }
        }
        if saves == 0 { XCTAssertFalse(context.hasChanges, "\(label): everything undone") }
        guard redoing else {
            try context.save()
            XCTAssertEqual(try storedItems(), items(of: expected(0)), "\(label): the first state saves")
            return
        }
        for index in 1..<states.count {
            context.redo()
            XCTAssertEqual(state(), expected(index), "\(label): redo to state \(index)")
        }
        try context.save()
        XCTAssertEqual(try storedItems(), items(of: expected(states.count - 1)), "\(label): the last state saves")
    }
}
