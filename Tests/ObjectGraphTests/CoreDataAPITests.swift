import Foundation
import XCTest
@testable import ObjectGraph

/// The Core Data API beyond the basics (issue 21, item 7): child fetches over a parent's unsaved
/// objects, faulting control, lifecycle hooks, the container, merging and `SUBQUERY`.
final class CoreDataAPITests: BoardTestCase, @unchecked Sendable {
    // MARK: - Child contexts

    func testAChildFetchIncludesItsParentsUnsavedInsertsAndMatchesItsUpdates() throws {
        forEachStoreKind { kind in
            let parent = try makeBoard(kind)
            let saved = group(parent, "saved")
            item(parent, "low", rank: 1, group: saved)
            item(parent, "raised", rank: 2, group: saved)
            item(parent, "deleted", rank: 9, group: saved)
            try parent.save()
            // Unsaved in the parent: an insert, an update that makes a row match, a deletion.
            let fresh = group(parent, "fresh")
            item(parent, "new", rank: 7, group: fresh)
            try XCTUnwrap(parent.objects("Item", "name == 'raised'").first)["rank"] = 8
            parent.delete(try XCTUnwrap(parent.objects("Item", "name == 'deleted'").first))

            let child = ManagedObjectContext(parent: parent)
            try child.performAndWait {
                XCTAssertEqual(try child.names("Item"), ["low", "new", "raised"])
                XCTAssertEqual(try child.names("Item", "rank > 5"), ["new", "raised"])
                XCTAssertEqual(try child.count(for: FetchRequest<ManagedObject>(entityName: "Item")), 3)
                var limited = FetchRequest<ManagedObject>(entityName: "Item")
                limited.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
                limited.fetchLimit = 1
                XCTAssertEqual(try child.fetch(limited).map { $0["name"] as? String }, ["raised"])
                let new = try XCTUnwrap(child.objects("Item", "name == 'new'").first)
                XCTAssertTrue(new.objectID.isTemporaryID)
                XCTAssertTrue(try child.objects("Item", "name == 'new'").first === new, "one object per ID")
                XCTAssertEqual((new["group"] as? ManagedObject)?["name"] as? String, "fresh")
                XCTAssertTrue(try child.existingObject(with: new.objectID) === new)
                XCTAssertFalse(child.hasChanges, "the parent's state is the child's baseline")
                new["rank"] = 70
                try child.save()
            }
            XCTAssertEqual(try parent.objects("Item", "name == 'new'").first?["rank"] as? Int, 70)
            try parent.save()
            XCTAssertEqual(try makeBoard(kind, name: "other").names("Item"), [], "another store is untouched")
            let reader = ManagedObjectContext(coordinator: parent.coordinator)
            XCTAssertEqual(try reader.names("Item", "rank > 5"), ["new", "raised"])
        }
    }

    func testAChildDeletesItsParentsUnsavedInsertThroughItsSave() throws {
        let parent = try makeBoard(.sqlite)
        item(parent, "keep", group: nil)
        item(parent, "drop", group: nil)
        let child = ManagedObjectContext(parent: parent)
        try child.performAndWait {
            child.delete(try XCTUnwrap(child.objects("Item", "name == 'drop'").first))
            XCTAssertEqual(try child.names("Item"), ["keep"])
            try child.save()
        }
        XCTAssertEqual(try parent.names("Item"), ["keep"])
        XCTAssertEqual(parent.insertedObjects.count, 1)
    }

    func testAGrandchildSeesItsGrandparentsInsertsUnlessTheParentDeletedThem() throws {
        let root = try makeBoard(.sqlite)
        item(root, "kept", group: nil)
        item(root, "dropped", group: nil)
        let middle = ManagedObjectContext(parent: root)
        try middle.performAndWait {
            middle.delete(try XCTUnwrap(middle.objects("Item", "name == 'dropped'").first))
            item(middle, "middle's", group: nil)
        }
        let leaf = ManagedObjectContext(parent: middle)
        try leaf.performAndWait {
            XCTAssertEqual(try leaf.names("Item"), ["kept", "middle's"])
        }
    }

    // MARK: - Faulting and permanent IDs

    func testFetchingAsFaultsReadsValuesOnFirstAccess() throws {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            item(context, "a", rank: 1, group: group(context, "g"))
            try context.save()
            let reader = ManagedObjectContext(coordinator: context.coordinator)
            var request = FetchRequest<ManagedObject>(entityName: "Item")
            request.returnsObjectsAsFaults = true
            let fault = try XCTUnwrap(reader.fetch(request).first)
            XCTAssertTrue(fault.isFault)
            // Changed behind the fault's back: it reads the row as it is when fired.
            try XCTUnwrap(context.objects("Item").first)["rank"] = 5
            try context.save()
            XCTAssertEqual(fault["rank"] as? Int, 5)
            XCTAssertFalse(fault.isFault)
            XCTAssertEqual((fault["group"] as? ManagedObject)?["name"] as? String, "g")
            request.returnsObjectsAsFaults = false
            XCTAssertFalse(try XCTUnwrap(ManagedObjectContext(coordinator: context.coordinator).fetch(request).first)
                .isFault)
        }
    }

    /// Key paths as Core Data reads them: the empty path and `SELF` are the object, one key
    /// its value, and dotted paths go through a to-one (nil when it is unset) or a to-many.
    func testKeyPathsOfEveryShapeReadTheValueTheyName() throws {
        let context = try makeBoard(.sqlite)
        item(context, "a", rank: 1, group: group(context, "g"))
        item(context, "b", rank: 2, group: nil)
        try context.save()
        let reader = ManagedObjectContext(coordinator: context.coordinator)
        let items = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
        let first = try XCTUnwrap(items.first { $0["name"] as? String == "a" })
        let second = try XCTUnwrap(items.first { $0["name"] as? String == "b" })
        XCTAssertTrue(first.value(forKeyPath: "") as? ManagedObject === first)
        XCTAssertTrue(first.value(forKeyPath: "SELF") as? ManagedObject === first)
        XCTAssertEqual(first.value(forKeyPath: "rank") as? Int, 1)
        XCTAssertEqual(first.value(forKeyPath: "group.name") as? String, "g")
        XCTAssertEqual(first.value(forKeyPath: "SELF.group.name") as? String, "g")
        XCTAssertNil(second.value(forKeyPath: "group.name"))
        let group = try XCTUnwrap(first.value(forKeyPath: "group") as? ManagedObject)
        XCTAssertEqual(group.value(forKeyPath: "items.name") as? [String], ["a"])
        XCTAssertEqual(group.value(forKeyPath: "items.@count") as? Int, 1)
    }

    func testRefreshWithoutMergingTurnsAnObjectIntoAFaultAndDropsItsChanges() throws {
        let context = try makeBoard(.sqlite)
        let saved = item(context, "a", rank: 1, group: nil)
        try context.save()
        saved["rank"] = 2
        try context.refresh(saved, mergeChanges: false)
        XCTAssertTrue(saved.isFault)
        XCTAssertFalse(context.hasChanges)
        let other = ManagedObjectContext(coordinator: context.coordinator)
        try XCTUnwrap(other.objects("Item").first)["rank"] = 3
        try other.save()
        XCTAssertEqual(saved["rank"] as? Int, 3, "fired, it reads what the store holds now")
        saved["rank"] = 4
        try context.refresh(saved, mergeChanges: true)
        XCTAssertFalse(saved.isFault)
        XCTAssertEqual(saved["rank"] as? Int, 4, "merging keeps the unsaved change")

        try context.refresh(saved, mergeChanges: false)
        other.delete(try XCTUnwrap(other.objects("Item").first))
        try other.save()
        XCTAssertNil(saved["name"])
        XCTAssertThrowsError(try context.objects("Item")) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .objectNotFound, "\(error)")
        }
    }

    func testObtainedPermanentIDsAreTheSavedObjectsIDs() throws {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            let first = item(context, "first", group: nil), second = item(context, "second", group: nil)
            try context.obtainPermanentIDs(for: [first, second])
            XCTAssertFalse(first.objectID.isTemporaryID)
            XCTAssertNotEqual(first.objectID, second.objectID)
            let ids = [first.objectID, second.objectID]
            XCTAssertTrue(first.isInserted)
            XCTAssertTrue(try context.existingObject(with: ids[0]) === first)
            try context.save()
            XCTAssertEqual([first.objectID, second.objectID], ids)
            let reader = ManagedObjectContext(coordinator: context.coordinator)
            XCTAssertEqual(try ids.map { try reader.existingObject(with: $0)["name"] as? String }, ["first", "second"])
            let third = item(context, "third", group: nil)
            try context.save()
            XCTAssertFalse(ids.contains(third.objectID), "keys handed out are not handed out again")
        }
    }

    func testAChildsObtainedIDIsTheParentsAndTheStoresID() throws {
        let parent = try makeBoard(.sqlite)
        let child = ManagedObjectContext(parent: parent)
        let id: ObjectID = try child.performAndWait {
            let new = item(child, "from child", group: nil)
            try child.obtainPermanentIDs(for: [new])
            try child.save()
            return new.objectID
        }
        XCTAssertFalse(id.isTemporaryID)
        XCTAssertEqual(try parent.existingObject(with: id)["name"] as? String, "from child")
        try parent.save()
        XCTAssertEqual(try ManagedObjectContext(coordinator: parent.coordinator).existingObject(with: id)["name"]
            as? String, "from child")
    }

    // MARK: - Lifecycle hooks

    func testLifecycleHooksRunAsCoreDatasDo() throws {
        let context = try makeBoard(.sqlite)
        context.model.setClass(HookedItem.self, forEntityName: "Item")
        context.model.setClass(HookedGroup.self, forEntityName: "Group")
        let group = group(context, "g")
        let stamped = item(context, "stamped", group: group)
        XCTAssertEqual(try XCTUnwrap(context.insertNewObject(forEntityName: "Item") as? HookedItem).awoken, 1)
        context.delete(try XCTUnwrap(context.insertedObjects.first { $0["name"] == nil }))
        try context.save()
        XCTAssertEqual(stamped["rank"] as? Int, 1, "willSave's change is saved")
        let reader = ManagedObjectContext(coordinator: context.coordinator)
        XCTAssertEqual(try reader.objects("Item").map { $0["rank"] as? Int }, [1])

        stamped["name"] = "renamed"
        try context.save()
        XCTAssertEqual(try ManagedObjectContext(coordinator: context.coordinator).objects("Item").first?["rank"]
            as? Int, 2, "once per save that writes it")

        context.delete(group)
        context.processPendingChanges()
        XCTAssertEqual((group as? HookedGroup)?.preparedWith, ["renamed"], "before its delete rules ran")
        XCTAssertEqual((group as? HookedGroup)?.prepared, 1)
        XCTAssertEqual(stamped["group"] as? ManagedObject, nil, "then they ran")
        try context.save()
        XCTAssertEqual((group as? HookedGroup)?.prepared, 1, "once per deletion")
    }

    // MARK: - Container and automatic merging

    func testAContainerLoadsItsStoresAndItsContextsShareThem() throws {
        let container = PersistentContainer(name: "Board", model: try Self.boardModel(),
                                            notificationCenter: NotificationCenter())
        XCTAssertEqual(container.persistentStoreDescriptions.map(\.url?.lastPathComponent), ["Board.sqlite"])
        let url = directory.appendingPathComponent("nested/dir/Board.sqlite")
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: url)]
        var loaded: [(PersistentStoreDescription, Error?)] = []
        container.loadPersistentStores { loaded.append(($0, $1)) }
        XCTAssertEqual(loaded.count, 1)
        XCTAssertNil(loaded.first?.1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: url.path))
        XCTAssertEqual(container.viewContext.concurrencyType, .mainQueue)
        XCTAssertTrue(container.viewContext === container.viewContext)

        let background = container.newBackgroundContext()
        XCTAssertEqual(background.concurrencyType, .privateQueue)
        try background.performAndWait {
            item(background, "from background", group: nil)
            try background.save()
        }
        let done = expectation(description: "background task ran")
        nonisolated(unsafe) var seen: [String] = []
        container.performBackgroundTask { context in
            XCTAssertTrue(context.isOnQueue)
            seen = (try? context.names("Item")) ?? ["<error>"]
            done.fulfill()
        }
        wait(for: [done], timeout: 60)
        XCTAssertEqual(seen, ["from background"])
        XCTAssertEqual(try container.viewContext.names("Item"), ["from background"])
    }

    func testAContainerReportsAStoreItCannotOpen() throws {
        let container = PersistentContainer(name: "Board", model: try Self.boardModel())
        let notAStore = directory.appendingPathComponent("garbage.sqlite")
        try Data("not a database, just text that is long enough to be a header".utf8).write(to: notAStore)
        var memory = PersistentStoreDescription(url: nil, type: .inMemory)
        memory.configuration = "NoSuchConfiguration"
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: notAStore), memory]
        var errors: [Error?] = []
        container.loadPersistentStores { errors.append($1) }
        XCTAssertEqual(errors.count, 2)
        XCTAssertEqual(errors.map { ($0 as? ObjectGraphError)?.code }, [.storeOpenFailed, .storeOpenFailed],
                       "\(errors)")
        XCTAssertTrue(container.persistentStoreCoordinator.persistentStores.isEmpty)
    }

    func testContextsMergeTheirSiblingsSavesWhenAskedTo() throws {
        let writer = try makeBoard(.sqlite)
        let saved = item(writer, "a", rank: 1, group: nil)
        let doomed = item(writer, "doomed", group: nil)
        try writer.save()
        let center = writer.notificationCenter
        let merging = ManagedObjectContext(coordinator: writer.coordinator, notificationCenter: center)
        let notMerging = ManagedObjectContext(coordinator: writer.coordinator, notificationCenter: center)
        merging.automaticallyMergesChangesFromParent = true
        XCTAssertTrue(merging.automaticallyMergesChangesFromParent)
        let (mine, theirs) = try merging.performAndWait {
            (try XCTUnwrap(merging.objects("Item", "name == 'a'").first),
             try XCTUnwrap(merging.objects("Item", "name == 'doomed'").first))
        }
        let unmerged = try XCTUnwrap(notMerging.objects("Item", "name == 'a'").first)
        let child = ManagedObjectContext(parent: merging)
        child.automaticallyMergesChangesFromParent = true
        let childsCopy = try child.performAndWait { try XCTUnwrap(child.objects("Item", "name == 'a'").first) }

        saved["rank"] = 2
        writer.delete(doomed)
        item(writer, "new", group: nil)
        try writer.save()
        // Merges run on each context's queue after the save: a block queued now runs after them.
        merging.performAndWait {
            XCTAssertEqual(mine["rank"] as? Int, 2)
            XCTAssertNil(theirs.managedObjectContext, "the deleted object left the context")
        }
        XCTAssertEqual(unmerged["rank"] as? Int, 1, "a context not asked to merge keeps what it read")

        merging.performAndWait { mine["rank"] = 3 }
        try merging.performAndWait { try merging.save() }
        child.performAndWait { XCTAssertEqual(childsCopy["rank"] as? Int, 3, "a child merges its parent's saves") }
        merging.automaticallyMergesChangesFromParent = false
        try writer.refresh(saved, mergeChanges: false)
        saved["rank"] = 9
        try writer.save()
        merging.performAndWait { XCTAssertEqual(mine["rank"] as? Int, 3, "turned off, it merges no more") }
    }

    // MARK: - SUBQUERY

    func testSubqueryCountsMatchingMembersInSQLAndInMemory() throws {
        forEachStoreKind { kind in
            let context = try makeBoard(kind)
            for (name, ranks) in [("busy", [6, 7, 1]), ("one", [9, 2]), ("quiet", [1, 2, 3]), ("empty", [])] {
                let owner = group(context, name)
                for (index, rank) in ranks.enumerated() { item(context, "\(name)\(index)", rank: rank, group: owner) }
            }
            try context.save()
            let cases: [(String, [Any?], [String])] = [
                ("SUBQUERY(items, $i, $i.rank > %@).@count >= 2", [5], ["busy"]),
                ("SUBQUERY(items, $i, $i.rank > 5).@count == 0", [], ["empty", "quiet"]),
                ("SUBQUERY(items, $item, $item.rank > 5 AND $item.name ENDSWITH '1').@count > 0", [], ["busy"]),
                ("name != 'one' AND SUBQUERY(items, $i, $i.rank < 3).@count BETWEEN {1, 2}", [], ["busy", "quiet"]),
                ("SUBQUERY(items, $i, $i.group.name BEGINSWITH 'o').@count == 2", [], ["one"]),
                ("NOT (SUBQUERY(items, $i, TRUEPREDICATE).@count > 2)", [], ["empty", "one"]),
            ]
            let groupEntity = try XCTUnwrap(context.model.entity(named: "Group"))
            let store = try context.coordinator.store(for: groupEntity)
            let all = try context.objects("Group")
            for (format, arguments, expected) in cases {
                let predicate = try Predicate(format: format, argumentArray: arguments)
                var compiler = PredicateSQLCompiler(model: context.model, store: store)
                XCTAssertNotNil(try compiler.compile(predicate.root, entity: groupEntity, alias: "t0"),
                                "\(format) runs in SQL")
                let fetched = try context.fetch(FetchRequest<ManagedObject>(entityName: "Group", predicate: predicate))
                XCTAssertEqual(fetched.compactMap { $0["name"] as? String }.sorted(), expected,
                               "[\(kind)] SQL: \(format)")
                let inMemory = all.filter { predicate.evaluate(with: $0) }.compactMap { $0["name"] as? String }
                XCTAssertEqual(inMemory.sorted(), expected, "[\(kind)] in memory: \(format)")
            }
        }
    }

    func testSubqueryOverAManyToManyGoesThroughTheJoinTable() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let web = context.insertNewObject(forEntityName: "Tag"), work = context.insertNewObject(forEntityName: "Tag")
        (web["name"], work["name"]) = ("web", "work")
        for (name, tags) in [("mail", [web, work]), ("bank", [work]), ("blog", [web])] {
            let system = context.insertNewObject(forEntityName: "System")
            (system["name"], system["userId"]) = (name, "user1")
            system["tags"] = tags
        }
        try context.save()
        let reader = ManagedObjectContext(coordinator: stack.coordinator)
        XCTAssertEqual(try reader.names("System", "SUBQUERY(tags, $t, $t.name BEGINSWITH 'w').@count == 2"), ["mail"])
        XCTAssertEqual(try reader.names("System", "SUBQUERY(tags, $t, $t.name == 'web').@count == 0"), ["bank"])
        XCTAssertEqual(try reader.names("Tag", "SUBQUERY(systems, $s, $s.name CONTAINS 'a').@count == 2"), ["work"])
    }

    func testAMalformedSubqueryIsRefusedNamingTheProblem() throws {
        let context = try makeBoard(.inMemory)
        for (format, reason) in [
            ("SUBQUERY(items, $i, $i.rank > 5) > 1", "must be followed by .@count"),
            ("SUBQUERY(items, $i, rank > 5).@count > 1", "must start with $i"),
            ("SUBQUERY(items, i, i.rank > 5).@count > 1", "expected a variable"),
            ("SUBQUERY(items, $i, $i.rank > 5.@count > 1", "expected ')'"),
        ] {
            XCTAssertThrowsError(try Predicate(format: format)) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(format): \(error)")
            }
        }
        XCTAssertThrowsError(try context.objects("Group", "SUBQUERY(name, $i, $i.rank > 5).@count > 1")) { error in
            XCTAssertTrue("\(error)".contains("SUBQUERY needs a to-many relationship"), "\(error)")
        }
        XCTAssertThrowsError(try context.objects("Group", "SUBQUERY(items, $i, $i.colour == 1).@count > 1")) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .objectNotFound, "\(error)")
        }
    }
}

/// Counts its hooks: willSave bumps `rank`, so a test can see what was saved.
final class HookedItem: ManagedObject {
    var awoken = 0
    override func awakeFromInsert() { awoken += 1 }
    override func willSave() {
        guard !isDeleted else { return }
        self["rank"] = (self["rank"] as? Int ?? 0) + 1
    }
}

final class HookedGroup: ManagedObject {
    var prepared = 0
    var preparedWith: [String] = []
    override func prepareForDeletion() {
        prepared += 1
        preparedWith = (self["items"] as? [ManagedObject] ?? []).compactMap { $0["name"] as? String }
    }
}
