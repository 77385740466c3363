import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

/// A thirteenth outside review: ObjectSlots (to-many members and object sets), undo passing
/// over objects other contexts took, and what a failed save gives back after an adoption.
final class ThirteenthReviewTests: ObjectGraphTestCase {

    // MARK: - ObjectSlots against a plain model

    func testObjectSlotsAgainstAPlainArray() throws {
        let entity = EntityDescription(name: "A", attributes: [])
        let pool = (0..<400).map { _ in ManagedObject(entity: entity) }
        for seed in [11, 12, 13, 14] as [UInt64] {
            var random = FetchPowerTests.Generator(state: seed)
            var slots: ObjectSlots
            var expected: [ManagedObject]
            switch seed {
            case 12:
                expected = Array(pool.prefix(150))
                slots = ObjectSlots(distinct: expected)
            case 13:
                let read = (0..<200).map { pool[$0 % 90] }
                slots = ObjectSlots(indexing: read)
                expected = Array(pool.prefix(90))
            default:
                slots = ObjectSlots()
                expected = []
            }
            for step in 0..<30_000 {
                let object = pool[random.next(pool.count)]
                let index = expected.firstIndex { $0 === object }
                switch random.next(100) {
                case 0..<30:
                    XCTAssertEqual(slots.append(object) != nil, index == nil, "seed \(seed) step \(step)")
                    if index == nil { expected.append(object) }
                case 30..<45:
                    if index == nil {
                        slots.appendDistinct(object)
                        expected.append(object)
                    }
                case 45..<60:
                    // The last one, indexed or not.
                    if let last = expected.last {
                        XCTAssertTrue(slots.remove(last), "seed \(seed) step \(step)")
                        expected.removeLast()
                    }
                case 60..<90:
                    XCTAssertEqual(slots.remove(object), index != nil, "seed \(seed) step \(step)")
                    if let index { expected.remove(at: index) }
                case 90..<93:
                    let leaving = Set((0..<5).map { _ in ObjectIdentifier(pool[random.next(pool.count)]) })
                    slots.removeAll { leaving.contains(ObjectIdentifier($0)) }
                    expected.removeAll { leaving.contains(ObjectIdentifier($0)) }
                case 93..<96:
                    if slots.isSparse || random.next(4) == 0 { slots.compact() }
                case 96:
                    XCTAssertEqual(slots.position(of: object) != nil, index != nil, "seed \(seed) step \(step)")
                    if let position = slots.position(of: object) {
                        XCTAssertTrue(slots[position] === object)
                    }
                case 97:
                    if random.next(20) == 0 {
                        slots.removeAll()
                        expected.removeAll()
                    }
                default:
                    // A copy mutated apart from the original.
                    var copy = slots
                    _ = copy.append(pool[random.next(pool.count)])
                    if let first = expected.first { copy.remove(first) }
                }
                XCTAssertEqual(slots.count, expected.count, "seed \(seed) step \(step)")
                if step % 53 == 0 {
                    XCTAssertTrue(slots.objects.elementsEqual(expected, by: ===), "seed \(seed) step \(step)")
                    for object in pool.prefix(40) {
                        XCTAssertEqual(slots.position(of: object) != nil, expected.contains { $0 === object },
                                       "seed \(seed) step \(step)")
                    }
                }
            }
        }
    }

    /// ObjectSet: inserts, single and batch removals, reads.
    func testObjectSetAgainstAPlainArray() throws {
        let entity = EntityDescription(name: "A", attributes: [])
        let pool = (0..<300).map { _ in ManagedObject(entity: entity) }
        var random = FetchPowerTests.Generator(state: 99)
        var set = ObjectSet(.updated)
        var expected: [ManagedObject] = []
        for step in 0..<30_000 {
            let object = pool[random.next(pool.count)]
            let index = expected.firstIndex { $0 === object }
            switch random.next(100) {
            case 0..<45:
                XCTAssertEqual(set.insert(object), index == nil)
                if index == nil { expected.append(object) }
            case 45..<60:
                if let last = expected.last {
                    set.remove(last)
                    expected.removeLast()
                }
            case 60..<90:
                set.remove(object)
                if let index { expected.remove(at: index) }
            case 90..<95:
                let leaving = (0..<4).map { _ in pool[random.next(pool.count)] }
                set.remove(leaving)
                expected.removeAll { member in leaving.contains { $0 === member } }
            default:
                XCTAssertTrue(set.objects.elementsEqual(expected, by: ===), "step \(step)")
            }
            XCTAssertEqual(set.count, expected.count, "step \(step)")
            for member in pool.prefix(20) {
                XCTAssertEqual(set.contains(member), expected.contains { $0 === member }, "step \(step)")
            }
        }
        XCTAssertTrue(set.objects.elementsEqual(expected, by: ===))
    }

    /// A to-many's snapshot (undo's, a failed save's) is its own: changes to one never show in the other.
    func testRelationshipMembersCopiesAreIndependent() throws {
        let entity = EntityDescription(name: "A", attributes: [])
        let pool = (0..<200).map { _ in ManagedObject(entity: entity) }
        let members = RelationshipMembers(distinct: Array(pool.prefix(100)))
        let copy = members.copy()
        for object in pool.prefix(80) { XCTAssertTrue(members.remove(object, isStored: { true })) }
        for object in pool.suffix(50) { XCTAssertTrue(members.insert(object, isStored: { false })) }
        XCTAssertEqual(copy.count, 100)
        XCTAssertTrue(copy.objects.elementsEqual(pool.prefix(100), by: ===))
        for object in pool.prefix(100) { XCTAssertTrue(copy.contains(object)) }
        XCTAssertTrue(copy.remove(pool[99], isStored: { true }))
        XCTAssertTrue(copy.remove(pool[0], isStored: { true }))
        XCTAssertEqual(members.count, 70)
        XCTAssertTrue(members.objects.elementsEqual(Array(pool[80..<100]) + Array(pool.suffix(50)), by: ===))
        XCTAssertEqual(members.added.count, 50)
        XCTAssertEqual(members.removed.count, 80)
        XCTAssertEqual(copy.removed.count, 2)
    }

    // MARK: - Object sets across contexts

    /// A new object changed after its insertion was announced, then deleted (it leaves the
    /// context), is not announced by that context as updated, and taken by another context it
    /// is announced there once.
    func testANewObjectChangedDeletedAndTakenElsewhereIsAnnouncedOnceByItsNewContext() throws {
        let coordinator = try inMemoryItemStore()
        let a = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let b = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let object = a.insertNewObject(forEntityName: "Item")
        object["name"] = "first"
        a.processPendingChanges()
        object["name"] = "changed in A"
        a.delete(object)
        b.insert(object)
        b.processPendingChanges()
        object["name"] = "changed in B"
        let announcedByA = Announcements()
        let observerA = a.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: a, queue: nil
        ) { note in
            announcedByA.updated += (note.userInfo?[ManagedObjectContext.updatedObjectsKey] as? [ManagedObject]) ?? []
        }
        defer { a.notificationCenter.removeObserver(observerA) }
        a.processPendingChanges()
        XCTAssertFalse(announcedByA.updated.contains { $0 === object }, "A announces an object it no longer has")
        object["name"] = "changed in B again"
        let announcedByB = Announcements()
        let observerB = b.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: b, queue: nil
        ) { note in
            announcedByB.updated += (note.userInfo?[ManagedObjectContext.updatedObjectsKey] as? [ManagedObject]) ?? []
        }
        defer { b.notificationCenter.removeObserver(observerB) }
        b.processPendingChanges()
        XCTAssertEqual(announcedByB.updated.filter { $0 === object }.count, 1, "B announces it \(announcedByB.updated.count) times")
    }


    // MARK: - Failed saves after adoptions

    /// Parent (unique name) —children (nullify)→ Child —parent→ Parent; Tag (unique name) for a failing pair.
    private func parents(ordered: Bool = false, code: Bool = false) throws
        -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string),
                                         AttributeDescription(name: "note", type: .string),
                                         AttributeDescription(name: "code", type: .string)],
            relationships: [RelationshipDescription(name: "children", destination: "Child", inverse: "parent",
                                                    isToMany: true, deleteRule: .nullify, isOrdered: ordered)],
            uniquenessConstraints: code ? [["name"], ["code"]] : [["name"]])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children",
                                                    deleteRule: .nullify)])
        let tag = EntityDescription(
            name: "Tag", attributes: [AttributeDescription(name: "name", type: .string)],
            uniquenessConstraints: [["name"]])
        return try seededStore([parent, child, tag]) { writer in
            for (name, code) in [("p", "c1"), ("q", "c2")] {
                let owner = writer.insertNewObject(forEntityName: "Parent")
                owner["name"] = name
                owner["note"] = "stored"
                owner["code"] = code
                var made: [ManagedObject] = []
                for number in 1...2 {
                    let object = writer.insertNewObject(forEntityName: "Child")
                    object["name"] = "\(name)\(number)"
                    made.append(object)
                }
                owner["children"] = made
            }
        }
    }

    private func childNames(_ object: ManagedObject) -> [String] {
        ((object["children"] as? [ManagedObject]) ?? []).compactMap { $0["name"] as? String }.sorted()
    }

    private func storedChildren(_ coordinator: PersistentStoreCoordinator, of name: String) throws -> [String] {
        let context = ManagedObjectContext(coordinator: coordinator)
        return childNames(try XCTUnwrap(try fetch("Parent", context, "name == %@", name).first))
    }

    /// A new parent "p" with a new child meets the stored "p"; two new tags share a name, so the
    /// save fails. Under each policy, with or without the row's object registered (read, with
    /// its children read), the context is as before the save; fixed, the save gives the row the
    /// new child.
    func testAFailedSaveAfterAnAdoptionWithAToManyIsTakenBackUnderEveryPolicy() throws {
        for policy: MergePolicy in [.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite, .rollback] {
            for registeredFirst in [false, true] {
                for ordered in [false, true] {
                    let label = "\(policy) registered: \(registeredFirst) ordered: \(ordered)"
                    let (coordinator, _, _) = try parents(ordered: ordered)
                    let context = ManagedObjectContext(coordinator: coordinator)
                    context.mergePolicy = policy
                    var registered: ManagedObject?
                    if registeredFirst {
                        registered = try fetch("Parent", context, "name == 'p'").first
                        XCTAssertEqual(childNames(try XCTUnwrap(registered)), ["p1", "p2"], label)
                    }
                    let upsert = context.insertNewObject(forEntityName: "Parent")
                    upsert["name"] = "p"
                    upsert["note"] = "new"
                    let child = context.insertNewObject(forEntityName: "Child")
                    child["name"] = "p3"
                    child["parent"] = upsert
                    let temporaryID = upsert.objectID
                    let first = context.insertNewObject(forEntityName: "Tag")
                    first["name"] = "dup"
                    let second = context.insertNewObject(forEntityName: "Tag")
                    second["name"] = "dup"
                    XCTAssertThrowsError(try context.save(), label)
                    XCTAssertEqual(upsert.objectID, temporaryID, label)
                    XCTAssertTrue(upsert.isInserted, label)
                    XCTAssertEqual(upsert["note"] as? String, "new", label)
                    XCTAssertEqual(childNames(upsert), ["p3"], label)
                    XCTAssertTrue(child["parent"] as? ManagedObject === upsert, label)
                    XCTAssertEqual(context.insertedObjects.count, 4, label)
                    XCTAssertTrue(context.updatedObjects.isEmpty, "\(label): \(context.updatedObjects.count) updated")
                    if let registered {
                        XCTAssertTrue(registered.managedObjectContext === context, label)
                        XCTAssertTrue(try context.existingObject(with: registered.objectID) === registered, label)
                        XCTAssertEqual(childNames(registered), ["p1", "p2"], label)
                        XCTAssertFalse(registered.hasChanges, label)
                    }
                    second["name"] = "other"
                    XCTAssertNoThrow(try context.save(), label)
                    XCTAssertFalse(context.hasChanges, label)
                    // Rollback: the row wins, the new child's link to it too.
                    let children = policy == .rollback ? ["p1", "p2"] : ["p1", "p2", "p3"]
                    XCTAssertEqual(try storedChildren(coordinator, of: "p"), children, label)
                    XCTAssertEqual(childNames(upsert), children, label)
                    let stored = try fetch("Parent", ManagedObjectContext(coordinator: coordinator), "name == 'p'")
                    XCTAssertEqual(stored.count, 1, label)
                    XCTAssertEqual(stored.first?["note"] as? String,
                                   [.mergeByPropertyStoreTrump, .rollback].contains(policy) ? "stored" : "new", label)
                }
            }
        }
    }

    /// A new parent with the name of stored "p" and the code of stored "q": it takes "p"'s
    /// identity, then meets "q". The save fails; the new object is given back whole, and with
    /// a code of its own it saves as "p".
    func testAnAdoptionThatThenMeetsAnotherRowFailsAndIsTakenBack() throws {
        for policy: MergePolicy in [.mergeByPropertyObjectTrump, .overwrite] {
            let (coordinator, _, _) = try parents(code: true)
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = policy
            let registered = try XCTUnwrap(try fetch("Parent", context, "name == 'p'").first)
            let upsert = context.insertNewObject(forEntityName: "Parent")
            upsert["name"] = "p"
            upsert["code"] = "c2"
            upsert["note"] = "new"
            let temporaryID = upsert.objectID
            XCTAssertThrowsError(try context.save(), "\(policy)")
            XCTAssertEqual(upsert.objectID, temporaryID, "\(policy)")
            XCTAssertTrue(upsert.isInserted, "\(policy)")
            XCTAssertEqual(upsert["code"] as? String, "c2", "\(policy)")
            XCTAssertTrue(registered.managedObjectContext === context, "\(policy)")
            XCTAssertTrue(try context.existingObject(with: registered.objectID) === registered, "\(policy)")
            upsert["code"] = "c3"
            XCTAssertNoThrow(try context.save(), "\(policy)")
            XCTAssertEqual(upsert.objectID.primaryKey, registered.objectID.primaryKey, "\(policy)")
            let stored = try fetch("Parent", ManagedObjectContext(coordinator: coordinator), "name == 'p'")
            XCTAssertEqual(stored.first?["code"] as? String, "c3", "\(policy)")
        }
    }

    /// A new "p" takes the stored "p"'s row and moves it to code c9, while stored "q" takes "p"'s
    /// old code c1 in the same save: together they conflict with nothing.
    func testAnAdoptedRowMovingOffAValueFreesItForAnotherRowOfTheSameSave() throws {
        XCTAssertEqual(try codesAfterUpsertingP(code: "c9", renamingQTo: "c1"), ["p=c9", "q=c1"])
    }

    /// A new "p" takes the stored "p"'s row keeping its code c1, and stored "q" swaps nothing:
    /// the save writes, the adopted row's code stays (not vacated).
    func testAnAdoptedRowsUnchangedCodeStaysAndItsNameIsNotFreed() throws {
        XCTAssertEqual(try codesAfterUpsertingP(code: "c1", renamingQTo: "c7"), ["p=c1", "q=c7"])
    }

    /// Saves, under object trump, stored "q" moved to another code and a new "p" (which meets the
    /// stored "p") with `code`; the stored names and codes after.
    private func codesAfterUpsertingP(code: String, renamingQTo qCode: String) throws -> Set<String> {
        let (coordinator, _, _) = try parents(code: true)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        let q = try XCTUnwrap(try fetch("Parent", context, "name == 'q'").first)
        q["code"] = qCode
        let upsert = context.insertNewObject(forEntityName: "Parent")
        upsert["name"] = "p"
        upsert["code"] = code
        upsert["note"] = "new"
        XCTAssertNoThrow(try context.save())
        let stored = try fetch("Parent", ManagedObjectContext(coordinator: coordinator))
        return Set(stored.map { "\($0["name"] as? String ?? "")=\($0["code"] as? String ?? "")" })
    }

    // MARK: - Undo after objects moved

    /// A saved object's deletion undone; another context deletes its row and this one merges
    /// that (the object leaves); a redo then finds nothing to delete. Undoing that redo must not
    /// bring the object back as a new insertion: the redo did nothing.
    func testUndoOfARedoThatPassedOverAGoneObjectBringsNothingBack() throws {
        let (coordinator, _, _) = try seededStore([
            EntityDescription(name: "Item", attributes: [AttributeDescription(name: "name", type: .string)]),
        ]) { writer in
            writer.insertNewObject(forEntityName: "Item")["name"] = "x"
        }
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.undoManager = ContextUndoManager()
        let object = try XCTUnwrap(try fetch("Item", context).first)
        context.delete(object)
        context.processPendingChanges()
        context.undo()
        XCTAssertFalse(object.isDeleted)
        XCTAssertFalse(context.hasChanges)
        let other = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        other.delete(try XCTUnwrap(try fetch("Item", other).first))
        let saved = SavedNotes()
        let observer = other.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: other, queue: nil) { saved.notes.append($0) }
        try other.save()
        other.notificationCenter.removeObserver(observer)
        try context.mergeChanges(fromContextDidSave: try XCTUnwrap(saved.notes.first))
        XCTAssertNil(object.managedObjectContext)
        context.redo()
        XCTAssertFalse(context.hasChanges)
        context.undo()
        XCTAssertFalse(context.hasChanges, "the undo of a redo that did nothing inserted \(context.insertedObjects.count)")
        try context.save()
        XCTAssertEqual(try fetch("Item", ManagedObjectContext(coordinator: coordinator)).count, 0,
                       "the row another context deleted came back")
    }

    /// A's insertion undone, the object inserted into B, B gone (never saved); A's redo puts the
    /// object back into A: it is then one of A's inserted objects, and A's save writes it.
    func testRedoAfterTheContextThatTookTheObjectIsGoneInsertsItAgain() throws {
        let coordinator = try inMemoryItemStore()
        let a = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        a.undoManager = ContextUndoManager()
        let object = a.insertNewObject(forEntityName: "Item")
        object["name"] = "moving"
        a.processPendingChanges()
        a.undo()
        XCTAssertFalse(a.hasChanges)
        weak var gone: ManagedObjectContext?
        do {
            let b = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
            b.insert(object)
            gone = b
        }
        XCTAssertNil(gone, "B is still alive: the case is not tested")
        XCTAssertNil(object.managedObjectContext)
        a.redo()
        XCTAssertTrue(object.managedObjectContext === a)
        XCTAssertTrue(a.insertedObjects.contains { $0 === object }, "A owns the object but does not list it as inserted")
        XCTAssertTrue(a.hasChanges)
        try a.save()
        XCTAssertEqual(try fetch("Item", ManagedObjectContext(coordinator: coordinator)).count, 1, "the redone insertion was not saved")
    }

    /// A new object given a permanent ID before the save (obtainPermanentIDs) with a stored row's
    /// unique value: under object trump it takes the row's identity, as one without does.
    func testAnUpsertOfAnObjectWithAPermanentIDTakesTheRow() throws {
        let (coordinator, _, _) = try parents()
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        let upsert = context.insertNewObject(forEntityName: "Parent")
        upsert["name"] = "p"
        upsert["note"] = "new"
        try context.obtainPermanentIDs(for: [upsert])
        XCTAssertNoThrow(try context.save())
        let stored = try fetch("Parent", ManagedObjectContext(coordinator: coordinator), "name == 'p'")
        XCTAssertEqual(stored.count, 1)
        XCTAssertEqual(stored.first?["note"] as? String, "new")
    }

    /// As above with the new parent's children read before the save (and the row's object's), and
    /// a second try after the first failed, and after the failure the new parent's own change kept.
    func testAFailedSaveAfterAnAdoptionOfAReadToManyIsTakenBack() throws {
        for policy: MergePolicy in [.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite] {
            for failures in [0, 1, 2] {
                let label = "\(policy) failures: \(failures)"
                let (coordinator, _, _) = try parents()
                let context = ManagedObjectContext(coordinator: coordinator)
                context.mergePolicy = policy
                let registered = try XCTUnwrap(try fetch("Parent", context, "name == 'p'").first)
                XCTAssertEqual(childNames(registered), ["p1", "p2"], label)
                let upsert = context.insertNewObject(forEntityName: "Parent")
                upsert["name"] = "p"
                XCTAssertEqual(childNames(upsert), [], label)
                let child = context.insertNewObject(forEntityName: "Child")
                child["name"] = "p3"
                upsert.add(child, toRelationship: "children")
                let first = context.insertNewObject(forEntityName: "Tag")
                first["name"] = "dup"
                var tags = [first]
                for attempt in 0..<failures {
                    let second = context.insertNewObject(forEntityName: "Tag")
                    second["name"] = "dup"
                    XCTAssertThrowsError(try context.save(), label)
                    XCTAssertEqual(childNames(upsert), ["p3"], "\(label) attempt \(attempt)")
                    XCTAssertTrue(child["parent"] as? ManagedObject === upsert, label)
                    XCTAssertEqual(childNames(registered), ["p1", "p2"], label)
                    second["name"] = "t\(attempt)"
                    tags.append(second)
                }
                XCTAssertNoThrow(try context.save(), label)
                XCTAssertEqual(try storedChildren(coordinator, of: "p"), ["p1", "p2", "p3"], label)
                XCTAssertEqual(childNames(upsert), ["p1", "p2", "p3"], label)
                XCTAssertEqual(try fetch("Tag", ManagedObjectContext(coordinator: coordinator)).count, tags.count, label)
                XCTAssertFalse(context.hasChanges, label)
            }
        }
    }

    /// A parent with 100 stored children, read: 80 leave (the members compact), 30 new join and
    /// 10 of those leave again, over several saves with random order; then the whole of it undone
    /// and saved. The store and the objects agree at each step.
    func testManyToManyChangesThroughAContextCompactAndUndo() throws {
        for ordered in [false, true] {
            let (coordinator, _, _) = try seededStore(Self.family(ordered: ordered)) { writer in
                let owner = writer.insertNewObject(forEntityName: "Parent")
                owner["name"] = "p"
                owner["children"] = (0..<100).map { number -> ManagedObject in
                    let object = writer.insertNewObject(forEntityName: "Child")
                    object["name"] = String(format: "c%03d", number)
                    return object
                }
            }
            let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
            context.undoManager = ContextUndoManager()
            let owner = try XCTUnwrap(try fetch("Parent", context).first)
            let original = try XCTUnwrap(owner["children"] as? [ManagedObject])
            var expected = original
            context.undoManager!.beginUndoGrouping()
            var random = FetchPowerTests.Generator(state: ordered ? 5 : 6)
            for _ in 0..<80 {
                let leaving = expected.remove(at: random.next(expected.count))
                owner.remove(leaving, fromRelationship: "children")
            }
            var made: [ManagedObject] = []
            for number in 0..<30 {
                let object = context.insertNewObject(forEntityName: "Child")
                object["name"] = "n\(number)"
                owner.add(object, toRelationship: "children")
                expected.append(object)
                made.append(object)
            }
            for object in made.prefix(10) {
                owner.remove(object, fromRelationship: "children")
                expected.removeAll { $0 === object }
            }
            context.undoManager!.endUndoGrouping()
            let label = "ordered: \(ordered)"
            let names = { (objects: [ManagedObject]) in objects.compactMap { $0["name"] as? String } }
            XCTAssertEqual(names(try XCTUnwrap(owner["children"] as? [ManagedObject])).sorted(), names(expected).sorted(), label)
            if ordered {
                XCTAssertEqual(names(try XCTUnwrap(owner["children"] as? [ManagedObject])), names(expected), label)
            }
            try context.save()
            let reader = ManagedObjectContext(coordinator: coordinator)
            let stored = names(try XCTUnwrap(try fetch("Parent", reader).first?["children"] as? [ManagedObject]))
            XCTAssertEqual(ordered ? stored : stored.sorted(), ordered ? names(expected) : names(expected).sorted(), label)
            context.undo()
            XCTAssertEqual(names(try XCTUnwrap(owner["children"] as? [ManagedObject])).sorted(), names(original).sorted(), label)
            try context.save()
            let fresh = ManagedObjectContext(coordinator: coordinator)
            let linked = try fetch("Child", fresh).filter { $0["parent"] != nil }.count
            XCTAssertEqual(linked, 100, "\(label): children with a parent in the store after the undo's save")
            let again = names(try XCTUnwrap(try fetch("Parent", fresh).first?["children"] as? [ManagedObject]))
            XCTAssertEqual(again.sorted(), names(original).sorted(), label)
            XCTAssertEqual(try fetch("Child", ManagedObjectContext(coordinator: coordinator)).count, 100, label)
        }
    }

    /// An ordered to-many a, b, c (stored): removing a and undoing it gives back a, b, c, in memory
    /// and in the store once saved (the undo puts the member back at the end: b, c, a).
    func testUndoingARemovalFromAnOrderedToManyKeepsTheOrder() throws {
        let (coordinator, _, _) = try seededStore(Self.family(ordered: true)) { writer in
            let owner = writer.insertNewObject(forEntityName: "Parent")
            owner["children"] = ["a", "b", "c"].map { name -> ManagedObject in
                let object = writer.insertNewObject(forEntityName: "Child")
                object["name"] = name
                return object
            }
        }
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.undoManager = ContextUndoManager()
        let owner = try XCTUnwrap(try fetch("Parent", context).first)
        let names = { (value: Any?) in ((value as? [ManagedObject]) ?? []).compactMap { $0["name"] as? String } }
        let first = try XCTUnwrap((owner["children"] as? [ManagedObject])?.first)
        owner.remove(first, fromRelationship: "children")
        XCTAssertEqual(names(owner["children"]), ["b", "c"])
        context.undo()
        XCTAssertEqual(names(owner["children"]), ["a", "b", "c"], "in memory")
        try context.save()
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(names(try fetch("Parent", fresh).first?["children"]), ["a", "b", "c"], "stored")
    }

    /// A save adopting stored "p" fails; another process then renames that row and stores a new
    /// "p". Saved again, the new object takes the new row; the renamed row and its object stay.
    func testARetryAfterAFailedAdoptionTakesTheRowThatHasTheValueNow() throws {
        let (coordinator, url, model) = try parents(code: true)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        let registered = try XCTUnwrap(try fetch("Parent", context, "name == 'p'").first)
        let upsert = context.insertNewObject(forEntityName: "Parent")
        upsert["name"] = "p"
        upsert["note"] = "new"
        let first = context.insertNewObject(forEntityName: "Tag")
        first["name"] = "dup"
        let second = context.insertNewObject(forEntityName: "Tag")
        second["name"] = "dup"
        XCTAssertThrowsError(try context.save())
        let other = try elsewhere(url, model)
        try XCTUnwrap(try fetch("Parent", other, "name == 'p'").first)["name"] = "p-old"
        let fresh = other.insertNewObject(forEntityName: "Parent")
        fresh["name"] = "p"
        fresh["code"] = "c5"
        try other.save()
        second["name"] = "other"
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(upsert.objectID.primaryKey, fresh.objectID.primaryKey)
        XCTAssertTrue(registered.managedObjectContext === context)
        let stored = try fetch("Parent", ManagedObjectContext(coordinator: coordinator))
        XCTAssertEqual(Set(stored.map { "\($0["name"] as? String ?? "")|\($0["code"] as? String ?? "")|\($0["note"] as? String ?? "")" }),
                       ["p-old|c1|stored", "p|c5|new", "q|c2|stored"])
    }
}

private final class Announcements: @unchecked Sendable {
    var updated: [ManagedObject] = []
}

private final class SavedNotes: @unchecked Sendable {
    var notes: [Notification] = []
}
