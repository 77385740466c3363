import Foundation
import TestSupport
import XCTest
@testable import ObjectGraph


/// Keeps its own copy of a controller's sections by applying only the delegate's callbacks,
/// checking each batch as a table view would (indexes in range, no position used twice).
final class MirroringDelegate: FetchedResultsControllerDelegate {
    struct Section: Equatable {
        var name: String
        var objects: [ObjectIdentifier]
    }

    enum Event: Equatable {
        case object(FetchedResultsChangeType, FetchedIndexPath?, FetchedIndexPath?, ObjectIdentifier)
        case section(FetchedResultsChangeType, Int, String)
    }

    var mirror: [Section] = []
    var events: [Event] = []
    var batches = 0
    var problems: [String] = []
    var objectsByID: [ObjectIdentifier: ManagedObject] = [:]
    private var inBatch = false

    func start(from controller: any FetchedResultsControlling) {
        mirror = controller.sections.map { Section(name: $0.name, objects: $0.objects.map(ObjectIdentifier.init)) }
        for object in controller.sections.flatMap(\.objects) { objectsByID[ObjectIdentifier(object)] = object }
    }

    func controllerWillChangeContent(_ controller: any FetchedResultsControlling) {
        if inBatch { problems.append("willChange inside a batch") }
        inBatch = true
        events = []
    }

    func controller(_ controller: any FetchedResultsControlling, didChange object: ManagedObject,
                    at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType,
                    newIndexPath: FetchedIndexPath?) {
        if !inBatch { problems.append("object change outside a batch") }
        objectsByID[ObjectIdentifier(object)] = object
        events.append(.object(type, indexPath, newIndexPath, ObjectIdentifier(object)))
    }

    func controller(_ controller: any FetchedResultsControlling, didChange section: FetchedResultsSection,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {
        if !inBatch { problems.append("section change outside a batch") }
        events.append(.section(type, sectionIndex, section.name))
    }

    func controllerDidChangeContent(_ controller: any FetchedResultsControlling) {
        inBatch = false
        batches += 1
        apply(events)
    }

    private static func holds(_ sections: [Section], _ path: FetchedIndexPath?, _ id: ObjectIdentifier) -> Bool {
        guard let path, sections.indices.contains(path.section),
              sections[path.section].objects.indices.contains(path.item) else { return false }
        return sections[path.section].objects[path.item] == id
    }

    private func apply(_ events: [Event]) {
        let old = mirror
        var removedPaths: Set<FetchedIndexPath> = []
        var removedSections: Set<Int> = []
        var insertedSections: [(Int, String)] = []
        var insertedObjects: [(FetchedIndexPath, ObjectIdentifier)] = []
        var updates: [(FetchedIndexPath, ObjectIdentifier)] = []
        for event in events {
            switch event {
            case .section(.delete, let index, let name):
                guard old.indices.contains(index), old[index].name == name else {
                    problems.append("bad section delete \(index) \(name)")
                    continue
                }
                removedSections.insert(index)
            case .section(.insert, let index, let name):
                insertedSections.append((index, name))
            case .section(let type, _, _):
                problems.append("unexpected section change \(type)")
            case .object(let type, let from, let to, let id):
                if type != .insert, !Self.holds(old, from, id) {
                    problems.append("bad old path \(type) \(String(describing: from))")
                    continue
                }
                if type != .delete, to == nil { problems.append("\(type) without a new path") }
                if type == .delete || type == .move, let from, !removedPaths.insert(from).inserted {
                    problems.append("old path \(from) used twice")
                }
                if type == .insert || type == .move, let to { insertedObjects.append((to, id)) }
                if type == .update, let to { updates.append((to, id)) }
            }
        }
        var next: [Section] = []
        for (index, section) in old.enumerated() {
            let kept = section.objects.enumerated().filter {
                !removedPaths.contains(FetchedIndexPath(item: $0.offset, section: index))
            }
            if removedSections.contains(index) {
                if !kept.isEmpty { problems.append("deleted section \(section.name) still holds \(kept.count)") }
                continue
            }
            next.append(Section(name: section.name, objects: kept.map(\.element)))
        }
        for (index, name) in insertedSections.sorted(by: { $0.0 < $1.0 }) {
            guard index <= next.count else {
                problems.append("section insert \(index) out of range")
                continue
            }
            next.insert(Section(name: name, objects: []), at: index)
        }
        for (path, id) in insertedObjects.sorted(by: { $0.0 < $1.0 }) {
            guard next.indices.contains(path.section), path.item <= next[path.section].objects.count else {
                problems.append("insert at \(path) out of range")
                continue
            }
            next[path.section].objects.insert(id, at: path.item)
        }
        for (to, id) in updates where !Self.holds(next, to, id) {
            problems.append("update's new path \(to) does not hold the object")
        }
        mirror = next
    }

    func count(_ type: FetchedResultsChangeType) -> Int {
        events.filter { if case .object(type, _, _, _) = $0 { return true } else { return false } }.count
    }
    func sectionCount(_ type: FetchedResultsChangeType) -> Int {
        events.filter { if case .section(type, _, _) = $0 { return true } else { return false } }.count
    }
}

/// Items in groups over one store, and the ways the tests look at them.
class BoardTestCase: ObjectGraphTestCase {
    /// How many times more random seeds and steps to run: `OG_SWEEP_SCALE=20` for a long sweep.
    static var sweepScale: Int { max(1, Int(ProcessInfo.processInfo.environment["OG_SWEEP_SCALE"] ?? "") ?? 1) }

    /// Items in groups: the book's systems in categories, without validation rules in the way.
    static func boardModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Group", attributes: [AttributeDescription(name: "name", type: .string)],
                              relationships: [
                RelationshipDescription(name: "items", destination: "Item", inverse: "group", isToMany: true),
            ]),
            EntityDescription(name: "Item", attributes: [
                AttributeDescription(name: "name", type: .string),
                AttributeDescription(name: "rank", type: .integer32, defaultValueString: "0"),
            ], relationships: [RelationshipDescription(name: "group", destination: "Group", inverse: "items")]),
        ])
    }

    func makeBoard(_ kind: StoreKind, name: String = "board") throws -> ManagedObjectContext {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.boardModel(), busyTimeout: 30)
        try coordinator.addPersistentStore(type: kind == .sqlite ? .sqlite : .inMemory,
                                           at: directory.appendingPathComponent("\(name).sqlite"))
        return ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
    }

    static var groupedRequest: FetchRequest<ManagedObject> {
        FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "group.name"),
                                                           FetchSortDescriptor(key: "name")])
    }

    @discardableResult
    func item(_ context: ManagedObjectContext, _ name: String, rank: Int = 0, group: ManagedObject?) -> ManagedObject {
        let item = context.insertNewObject(forEntityName: "Item")
        item["name"] = name
        item["rank"] = rank
        item["group"] = group
        return item
    }

    func group(_ context: ManagedObjectContext, _ name: String) -> ManagedObject {
        let group = context.insertNewObject(forEntityName: "Group")
        group["name"] = name
        return group
    }

    /// A controller over Items in sections by group name, with a mirroring delegate.
    func observe(_ context: ManagedObjectContext, where predicate: ObjectGraph.Predicate? = nil) throws
        -> (FetchedResultsController<ManagedObject>, MirroringDelegate) {
        var request = Self.groupedRequest
        request.predicate = predicate
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                                  sectionNameKeyPath: "group.name")
        let delegate = MirroringDelegate()
        controller.delegate = delegate
        try controller.performFetch()
        delegate.start(from: controller)
        return (controller, delegate)
    }

    /// The sections worked out by the test alone: every Item the context fetches, filtered by
    /// `predicate` in memory, ordered by group name (nil first) then name, grouped.
    func expectedSections(_ context: ManagedObjectContext,
                          where predicate: ObjectGraph.Predicate?) throws -> [MirroringDelegate.Section] {
        let items = try context.objects("Item").filter { predicate?.evaluate(with: $0) ?? true }
        let keyed = items.map { (group: $0.value(forKeyPath: "group.name") as? String,
                                 name: $0["name"] as? String ?? "", object: $0) }
        let sorted = keyed.sorted { a, b in
            switch (a.group, b.group) {
            case let (x?, y?) where x != y: return x < y
            case (nil, _?): return true
            case (_?, nil): return false
            default: return a.name < b.name
            }
        }
        var sections: [MirroringDelegate.Section] = []
        for entry in sorted {
            let name = entry.group ?? ""
            if sections.last?.name == name {
                sections[sections.count - 1].objects.append(ObjectIdentifier(entry.object))
            } else {
                sections.append(MirroringDelegate.Section(name: name, objects: [ObjectIdentifier(entry.object)]))
            }
        }
        return sections
    }

    /// Section names and object IDs as a fresh context reads them from the store.
    func storedSections(_ coordinator: PersistentStoreCoordinator,
                        where predicate: ObjectGraph.Predicate?) throws -> [[String]] {
        let fresh = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        var request = Self.groupedRequest
        request.predicate = predicate
        var result: [[String]] = []
        var last: String?
        for object in try fresh.fetch(request) {
            let name = object.value(forKeyPath: "group.name") as? String ?? ""
            if name != last { result.append(["#" + name]); last = name }
            result[result.count - 1].append(object.objectID.description)
        }
        return result
    }

    func described(_ sections: [MirroringDelegate.Section], _ delegate: MirroringDelegate) -> [[String]] {
        sections.map { ["#" + $0.name] + $0.objects.map { delegate.objectsByID[$0]?.objectID.description ?? "?" } }
    }
}

final class FetchedResultsControllerTests: BoardTestCase {
    // MARK: - Sections

    func testSectionsNamesCountsIndexTitlesAndLookups() {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            let beta = group(context, "beta"), alpha = group(context, "alpha"), banana = group(context, "banana")
            let a2 = item(context, "a2", group: alpha), a1 = item(context, "a1", group: alpha)
            let b1 = item(context, "b1", group: beta), n1 = item(context, "n1", group: banana)
            let loose = item(context, "loose", group: nil)
            try context.save()

            let controller = FetchedResultsController(fetchRequest: Self.groupedRequest, managedObjectContext: context,
                                                      sectionNameKeyPath: "group.name")
            XCTAssertNil(controller.fetchedObjects)
            try controller.performFetch()
            XCTAssertEqual(controller.sections.map(\.name), ["", "alpha", "banana", "beta"])
            XCTAssertEqual(controller.sections.map(\.numberOfObjects), [1, 2, 1, 1])
            XCTAssertEqual(controller.sections.map(\.indexTitle), [nil, "A", "B", "B"])
            XCTAssertEqual(controller.sectionIndexTitles, ["A", "B"])
            XCTAssertEqual(controller.section(forSectionIndexTitle: "B"), 2)
            XCTAssertNil(controller.section(forSectionIndexTitle: "Z"))
            XCTAssertEqual(controller.fetchedObjects, [loose, a1, a2, n1, b1])
            XCTAssertTrue(controller.object(at: FetchedIndexPath(item: 1, section: 1)) === a2)
            XCTAssertEqual(controller.indexPath(for: b1), FetchedIndexPath(item: 0, section: 3))
            XCTAssertEqual(controller.indexPath(for: loose), FetchedIndexPath(item: 0, section: 0))
            context.delete(beta)
            XCTAssertNil(controller.indexPath(for: beta), "a Group is not in an Item controller")

            let single = FetchedResultsController(fetchRequest: Self.groupedRequest, managedObjectContext: context)
            try single.performFetch()
            XCTAssertEqual(single.sections.count, 1)
            XCTAssertEqual(single.sections[0].numberOfObjects, 5)
        }
    }

    func testTheDelegateCanNameIndexTitles() throws {
        final class Titles: FetchedResultsControllerDelegate {
            func controller(_ controller: any FetchedResultsControlling,
                            sectionIndexTitleForSectionName name: String) -> String? {
                String(name.reversed())
            }
        }
        let context = try makeBoard(.inMemory)
        item(context, "x", group: group(context, "abc"))
        try context.save()
        let controller = FetchedResultsController(fetchRequest: Self.groupedRequest, managedObjectContext: context,
                                                  sectionNameKeyPath: "group.name")
        let titles = Titles()
        controller.delegate = titles
        try controller.performFetch()
        XCTAssertEqual(controller.sectionIndexTitles, ["cba"])
    }

    func testObjectsNotOrderedBySectionAreAClearError() throws {
        let context = try makeBoard(.inMemory)
        let a = group(context, "a"), b = group(context, "b")
        item(context, "1", group: a)
        item(context, "2", group: b)
        item(context, "3", group: a)
        try context.save()
        let request = FetchRequest<ManagedObject>(entityName: "Item",
                                                  sortDescriptors: [FetchSortDescriptor(key: "name")])
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                                  sectionNameKeyPath: "group.name")
        XCTAssertThrowsError(try controller.performFetch()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .invalidRequest)
            XCTAssertTrue("\(error)".contains("section 'a' comes twice"), "\(error)")
        }
        let wrongPath = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                                 sectionNameKeyPath: "group.colour")
        XCTAssertThrowsError(try wrongPath.performFetch()) { error in
            XCTAssertTrue("\(error)".contains("'group.colour' not found"), "\(error)")
        }
    }

    // MARK: - Changes in its own context

    func testEachKindOfChangeInItsOwnContext() {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            let alpha = group(context, "alpha"), beta = group(context, "beta")
            let a1 = item(context, "a1", group: alpha), a2 = item(context, "a2", group: alpha)
            let a3 = item(context, "a3", group: alpha)
            let b1 = item(context, "b1", group: beta)
            try context.save()
            let (controller, delegate) = try observe(context)
            defer { withExtendedLifetime(controller) {} }  // it tells the delegate while it lives

            a2["rank"] = 5                                   // update in place
            try context.save()
            XCTAssertEqual(delegate.events, [.object(.update, FetchedIndexPath(item: 1, section: 0),
                                                     FetchedIndexPath(item: 1, section: 0),
                                                     ObjectIdentifier(a2))])
            a1["name"] = "a9"                                 // moves to the end of its section
            context.processPendingChanges()
            XCTAssertEqual(delegate.events, [.object(.move, FetchedIndexPath(item: 0, section: 0),
                                                     FetchedIndexPath(item: 2, section: 0),
                                                     ObjectIdentifier(a1))])
            let c1 = item(context, "c1", group: group(context, "gamma"))   // new section
            try context.save()
            XCTAssertEqual(delegate.events, [.section(.insert, 2, "gamma"),
                                             .object(.insert, nil, FetchedIndexPath(item: 0, section: 2),
                                                     ObjectIdentifier(c1))])
            b1["group"] = alpha                               // its section empties and goes
            try context.save()
            XCTAssertEqual(delegate.sectionCount(.delete), 1)
            XCTAssertEqual(delegate.count(.move), 1)
            context.delete(a3)
            try context.save()
            XCTAssertEqual(delegate.events, [.object(.delete, FetchedIndexPath(item: 1, section: 0), nil,
                                                     ObjectIdentifier(a3))])
            alpha["name"] = "zeta"                            // a related object's change moves a whole section
            try context.save()
            XCTAssertEqual(delegate.sectionCount(.delete), 1)
            XCTAssertEqual(delegate.sectionCount(.insert), 1)
            XCTAssertEqual(delegate.count(.move), 3)
            let unrelatedBatches = delegate.batches
            beta["name"] = "empty group renamed"              // no Item changes: no callbacks
            try context.save()
            XCTAssertEqual(delegate.batches, unrelatedBatches)

            XCTAssertEqual(delegate.problems, [])
            XCTAssertEqual(delegate.mirror, try expectedSections(context, where: nil))
            XCTAssertEqual(described(delegate.mirror, delegate), try storedSections(context.coordinator, where: nil))
        }
    }

    /// Random inserts, deletes, renames, rank and group changes, saved or only processed,
    /// each batch of callbacks applied to a mirror and compared with a re-fetch.
    func testRandomizedChangesMatchARefetch() {
        forEachStoreKind { kind in
            for seed in UInt64(1)...UInt64(3 * Self.sweepScale) {
                var random = SplitMix64(seed: seed)
                let context = try makeBoard(kind, name: "random\(seed)")
                var groups = (0..<4).map { group(context, "g\($0)") }
                var counter = 0
                func newName() -> String {
                    counter += 1
                    return "n\(String(format: "%04d", Int.random(in: 0..<10_000, using: &random)))-\(counter)"
                }
                for _ in 0..<20 { item(context, newName(), rank: Int.random(in: 0...5, using: &random),
                                       group: groups.randomElement(using: &random)) }
                try context.save()
                let predicate = try Predicate(format: "rank >= %@", 2)
                let (controller, delegate) = try observe(context, where: predicate)
                XCTAssertEqual(delegate.mirror, try expectedSections(context, where: predicate))

                for step in 0..<60 {
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let items = try context.objects("Item")
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0, 1: item(context, newName(), rank: Int.random(in: 0...5, using: &random),
                                        group: groups.randomElement(using: &random))
                        case 2: if let victim = items.randomElement(using: &random) { context.delete(victim) }
                        case 3, 4: items.randomElement(using: &random)?["name"] = newName()
                        case 5, 6: items.randomElement(using: &random)?["rank"] = Int.random(in: 0...5, using: &random)
                        case 7:
                            let destination = Bool.random(using: &random) ? groups.randomElement(using: &random) : nil
                            items.randomElement(using: &random)?["group"] = destination
                        case 8:
                            let number = Int.random(in: 0..<9, using: &random)
                            groups.randomElement(using: &random)?["name"] = "g\(number)-\(step)"
                        default: groups.append(group(context, "g-new-\(step)"))
                        }
                    }
                    let saves = Int.random(in: 0..<3, using: &random) > 0
                    if saves { try context.save() } else { context.processPendingChanges() }
                    XCTAssertEqual(delegate.problems, [], "seed \(seed) step \(step)")
                    XCTAssertEqual(delegate.mirror, controller.sections.map {
                        MirroringDelegate.Section(name: $0.name, objects: $0.objects.map(ObjectIdentifier.init))
                    }, "seed \(seed) step \(step)")
                    XCTAssertEqual(delegate.mirror, try expectedSections(context, where: predicate),
                                   "seed \(seed) step \(step)")
                    if saves {
                        XCTAssertEqual(described(delegate.mirror, delegate),
                                       try storedSections(context.coordinator, where: predicate),
                                       "seed \(seed) step \(step)")
                    }
                    delegate.problems = []
                }
                XCTAssertGreaterThan(delegate.batches, 40)
            }
        }
    }

    // MARK: - Changes from elsewhere

    func testChangesMergedFromAnotherContext() {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            let alpha = group(context, "alpha")
            for name in ["a", "b", "c"] { item(context, name, group: alpha) }
            try context.save()
            let (controller, delegate) = try observe(context)

            let other = ManagedObjectContext(coordinator: context.coordinator,
                                             notificationCenter: NotificationCenter())
            let token = other.notificationCenter.addObserver(forName: ManagedObjectContext.didSaveNotification,
                                                             object: other, queue: nil) { note in
                do { try context.mergeChanges(fromContextDidSave: note) } catch { XCTFail("\(error)") }
            }
            defer { other.notificationCenter.removeObserver(token) }
            let theirs = try other.objects("Item", sort: [FetchSortDescriptor(key: "name")])
            theirs[0]["name"] = "z"
            other.delete(theirs[1])
            item(other, "d", rank: 3, group: try other.objects("Group")[0])
            item(other, "e", group: group(other, "beta"))
            try other.save()

            XCTAssertEqual(delegate.batches, 1, "one merge, one batch")
            XCTAssertEqual(delegate.count(.delete), 1)
            XCTAssertEqual(delegate.count(.insert), 2)
            XCTAssertEqual(delegate.sectionCount(.insert), 1)
            XCTAssertEqual(delegate.problems, [])
            XCTAssertEqual(delegate.mirror, try expectedSections(context, where: nil))
            XCTAssertEqual(described(delegate.mirror, delegate), try storedSections(context.coordinator, where: nil))
            XCTAssertEqual(controller.sections.flatMap(\.objects).map { $0["name"] as? String }, ["c", "d", "z", "e"])
        }
    }

    func testTheChangeCheckIsQuietWithoutOutsideCommits() throws {
        let context = try makeBoard(.sqlite)
        item(context, "a", group: nil)
        try context.save()
        let controller = FetchedResultsController(fetchRequest: Self.groupedRequest, managedObjectContext: context)
        let delegate = MirroringDelegate()
        controller.delegate = delegate
        try controller.performFetch()
        XCTAssertFalse(try controller.processExternalChanges())
        item(context, "b", group: nil)
        try context.save()
        XCTAssertFalse(try controller.processExternalChanges(), "its own commits are not outside changes")
        XCTAssertFalse(try controller.waitForExternalChanges(timeout: 0.2))
        XCTAssertEqual(delegate.batches, 1)
    }

    /// Another process (the sqlite3 shell) commits; the poll sees it and the delegate hears of it.
    func testACommitBySQLite3IsSeenByThePoll() throws {
        let context = try makeBoard(.sqlite)
        let alpha = group(context, "alpha")
        let a = item(context, "a", group: alpha)
        item(context, "b", group: alpha)
        try context.save()
        let (controller, delegate) = try observe(context)

        let sql = """
            UPDATE ZITEM SET ZNAME = 'c', Z_OPT = Z_OPT + 1 WHERE Z_PK = \(a.objectID.primaryKey!);
            UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Item';
            INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME, ZRANK, ZGROUP)
              SELECT Z_MAX, Z_ENT, 1, 'aa', 0, NULL FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item';
            """
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        shell.arguments = [directory.appendingPathComponent("board.sqlite").path, sql]
        try shell.run()
        shell.waitUntilExit()
        XCTAssertEqual(shell.terminationStatus, 0)

        XCTAssertTrue(try controller.waitForExternalChanges(timeout: 30))
        XCTAssertEqual(delegate.problems, [])
        XCTAssertEqual(delegate.count(.insert), 1)
        XCTAssertEqual(delegate.count(.move), 1)
        XCTAssertEqual(controller.sections.map(\.name), ["", "alpha"])
        XCTAssertEqual(controller.sections.flatMap(\.objects).map { $0["name"] as? String }, ["aa", "b", "c"])
        XCTAssertEqual(delegate.mirror, try expectedSections(context, where: nil))
    }

    /// A child process applies random changes, one save each; after each the parent waits for
    /// the change through `data_version` and compares its mirror with a re-fetch.
    func testRandomizedChangesFromAnotherProcessMatchARefetch() throws {
        let context = try makeBoard(.sqlite)
        for name in ["g0", "g1", "g2"] { _ = group(context, name) }
        try context.save()
        let predicate = try Predicate(format: "rank >= %@", 2)
        let (controller, delegate) = try observe(context, where: predicate)

        let input = Pipe(), output = Pipe()
        let child = try spawnChild(action: "boardOps", environment: [:],
                                   entryPoint: "ObjectGraphTests.BoardChildProcessEntry/"
                                       + "testBoardChildProcessEntryPoint",
                                   input: input, output: output)
        defer { if child.isRunning { child.terminate() } }
        var random = SplitMix64(seed: 42)
        var names: [String] = []
        var acknowledged = Data()
        for step in 0..<40 * Self.sweepScale {
            let command: String
            switch names.isEmpty ? 0 : Int.random(in: 0..<6, using: &random) {
            case 0, 1:
                names.append("i\(step)")
                let rank = Int.random(in: 0...5, using: &random), group = Int.random(in: 0...3, using: &random)
                command = "insert \(names.last!) \(rank) g\(group)"
            case 2: command = "delete \(names.remove(at: Int.random(in: 0..<names.count, using: &random)))"
            case 3: command = "rank \(names.randomElement(using: &random)!) \(Int.random(in: 0...5, using: &random))"
            case 4: command = "group \(names.randomElement(using: &random)!) g\(Int.random(in: 0...3, using: &random))"
            default:
                let from = Int.random(in: 0...3, using: &random), to = Int.random(in: 0...3, using: &random)
                command = "renameGroup g\(from) g\(to)"
            }
            input.fileHandleForWriting.write(Data((command + "\n").utf8))
            while !String(decoding: acknowledged, as: UTF8.self).contains("done \(step)") {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { return XCTFail("the child stopped at step \(step) (\(command))") }
                acknowledged += chunk
            }
            if String(decoding: acknowledged, as: UTF8.self).contains("done \(step) unchanged") {
                XCTAssertFalse(try controller.processExternalChanges(), "step \(step): the child committed nothing")
                continue
            }
            XCTAssertTrue(try controller.waitForExternalChanges(timeout: 30), "step \(step): \(command)")
            XCTAssertEqual(delegate.problems, [], "step \(step): \(command)")
            XCTAssertEqual(delegate.mirror, try expectedSections(context, where: predicate),
                           "step \(step): \(command)")
            XCTAssertEqual(described(delegate.mirror, delegate),
                           try storedSections(context.coordinator, where: predicate), "step \(step)")
            delegate.problems = []
        }
        input.fileHandleForWriting.closeFile()
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0)
        XCTAssertGreaterThan(delegate.batches, 20)
    }

    // MARK: - Cache

    func testTheSectionCacheIsReusedOnlyWhileRequestAndStoreAreUnchanged() throws {
        let context = try makeBoard(.sqlite)
        let alpha = group(context, "alpha")
        for name in ["a", "b"] { item(context, name, group: alpha) }
        item(context, "c", rank: 3, group: group(context, "beta"))
        try context.save()
        let cacheDirectory = directory.appendingPathComponent("cache")
        func controller(_ request: FetchRequest<ManagedObject> = Self.groupedRequest) throws
            -> FetchedResultsController<ManagedObject> {
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                                      sectionNameKeyPath: "group.name",
                                                      cacheName: "Items/all", cacheDirectory: cacheDirectory)
            try controller.performFetch()
            return controller
        }
        let first = try controller()
        XCTAssertFalse(first.sectionsCameFromCache)
        let file = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: cacheDirectory.path).first)
        let cacheFile = cacheDirectory.appendingPathComponent(file).path
        let attributes = try FileManager.default.attributesOfItem(atPath: cacheFile)
        let mode = attributes[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)

        let second = try controller()
        XCTAssertTrue(second.sectionsCameFromCache)
        XCTAssertEqual(second.sections.map(\.name), ["alpha", "beta"])
        XCTAssertEqual(second.sections.map(\.numberOfObjects), [2, 1])
        XCTAssertEqual(second.sections.map(\.indexTitle), ["A", "B"])
        XCTAssertEqual(second.sections.flatMap(\.objects), first.sections.flatMap(\.objects))

        var ranked = Self.groupedRequest
        ranked.predicate = try Predicate(format: "rank > %@", 2)
        XCTAssertFalse(try controller(ranked).sectionsCameFromCache, "another request")
        XCTAssertFalse(try controller().sectionsCameFromCache, "the other request replaced the cache")
        XCTAssertTrue(try controller().sectionsCameFromCache)

        // Another coordinator (as another process would) renames a group: the stores changed.
        let elsewhere = ManagedObjectContext(coordinator: {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: context.model)
            _ = try? coordinator.addPersistentStore(type: .sqlite, at: directory.appendingPathComponent("board.sqlite"))
            return coordinator
        }())
        try elsewhere.objects("Group", "name == 'beta'")[0]["name"] = "aardvark"
        try elsewhere.save()
        let afterRename = try controller()
        XCTAssertFalse(afterRename.sectionsCameFromCache)
        XCTAssertEqual(afterRename.sections.map(\.name), ["aardvark", "alpha"])

        FetchedResultsController<ManagedObject>.deleteCache(withName: "Items/all", cacheDirectory: cacheDirectory)
        XCTAssertFalse(try controller().sectionsCameFromCache)
        context.insertNewObject(forEntityName: "Item")["name"] = "unsaved"
        XCTAssertFalse(try controller().sectionsCameFromCache, "unsaved changes are not in the cache")
    }
}

/// The child process of the cross-process test: applies one command per input line, saving
/// each, and answers `done <n>` after the save.
final class BoardChildProcessEntry: ObjectGraphTestCase {
    override func tearDownWithError() throws {}

    func testBoardChildProcessEntryPoint() throws {
        let environment = ProcessInfo.processInfo.environment
        guard environment["OG_CHILD_ACTION"] == "boardOps", let path = environment["OG_CHILD_DIR"] else {
            throw XCTSkip("helper for the cross-process controller test; runs only as its child process")
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try BoardTestCase.boardModel(),
                                                     busyTimeout: 30)
        try coordinator.addPersistentStore(type: .sqlite,
                                           at: URL(fileURLWithPath: path).appendingPathComponent("board.sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        func group(_ name: String) throws -> ManagedObject {
            if let group = try context.objects("Group", "name == %@", name).first { return group }
            let group = context.insertNewObject(forEntityName: "Group")
            group["name"] = name
            return group
        }
        var step = 0
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            let item = words.count > 1 ? try context.objects("Item", "name == %@", words[1]).first : nil
            switch words.first {
            case "insert":
                let new = context.insertNewObject(forEntityName: "Item")
                new["name"] = words[1]
                new["rank"] = Int(words[2])
                new["group"] = try group(words[3])
            case "delete": if let item { context.delete(item) }
            case "rank": item?["rank"] = Int(words[2])
            case "group": item?["group"] = try group(words[2])
            case "renameGroup": try group(words[1])["name"] = words[2] + "x"
            default: XCTFail("unknown command \(line)")
            }
            let changes = context.hasChanges
            try context.save()
            FileHandle.standardOutput.write(Data("done \(step)\(changes ? "" : " unchanged")\n".utf8))
            step += 1
        }
    }
}
