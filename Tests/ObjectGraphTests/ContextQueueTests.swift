import Foundation
import XCTest
@testable import ObjectGraph

/// Contexts on private and main queues, perform in its three forms, contexts on several
/// queues sharing one coordinator, and child contexts.
// Its helpers are called from perform blocks, one at a time: the tests wait for each.
final class ContextQueueTests: BoardTestCase, @unchecked Sendable {
    func makeCoordinator(_ kind: StoreKind = .sqlite) throws -> PersistentStoreCoordinator {
        try makeBoard(kind).coordinator
    }

    func makeContext(_ kind: StoreKind = .sqlite, _ type: ConcurrencyType = .privateQueue) throws
        -> ManagedObjectContext {
        ManagedObjectContext(coordinator: try makeCoordinator(kind), notificationCenter: NotificationCenter(),
                             concurrencyType: type)
    }

    func testPerformRunsOnThePrivateQueueAndPerformAndWaitNests() throws {
        let context = try makeContext()
        XCTAssertFalse(context.isOnQueue)
        let nested: Bool = context.performAndWait {
            XCTAssertTrue(context.isOnQueue)
            return context.performAndWait { context.isOnQueue }
        }
        XCTAssertTrue(nested, "a nested performAndWait runs at once instead of deadlocking")
        let ran = expectation(description: "perform ran")
        context.perform {
            XCTAssertTrue(context.isOnQueue)
            ran.fulfill()
        }
        wait(for: [ran], timeout: 60)
    }

    func testAsyncPerformReturnsTheResultAndTheError() async throws {
        let context = try makeContext()
        let count: Int = try await context.perform {
            self.item(context, "a", group: nil)
            try context.save()
            return try context.count(for: FetchRequest<ManagedObject>(entityName: "Item"))
        }
        XCTAssertEqual(count, 1)
        do {
            _ = try await context.perform { try context.fetch(FetchRequest<ManagedObject>(entityName: "Nothing")) }
            XCTFail("an unknown entity throws")
        } catch {
            XCTAssertEqual((error as? ObjectGraphError)?.code, .objectNotFound)
        }
    }

    func testAMainQueueContextRunsItsWorkOnTheMainThread() throws {
        let context = try makeContext(.sqlite, .mainQueue)
        XCTAssertTrue(context.isOnQueue, "tests run on the main thread")
        let ran = expectation(description: "perform ran on main")
        DispatchQueue.global().async {
            XCTAssertFalse(context.isOnQueue)
            context.perform {
                XCTAssertTrue(Thread.isMainThread)
                ran.fulfill()
            }
        }
        wait(for: [ran], timeout: 60)
    }

    /// Four private-queue contexts save at the same time through one coordinator; a main-queue
    /// context merges each save on its queue and its fetched results controller follows.
    func testContextsOnSeveralQueuesShareOneCoordinator() throws {
        let coordinator = try makeCoordinator()
        let center = NotificationCenter()
        let main = ManagedObjectContext(coordinator: coordinator, notificationCenter: center,
                                        concurrencyType: .mainQueue)
        let (controller, delegate) = try observe(main)
        let workers = (0..<4).map { _ in ManagedObjectContext(coordinator: coordinator, notificationCenter: center) }
        let merged = expectation(description: "every save merged")
        merged.expectedFulfillmentCount = 4 * 25
        var tokens: [NSObjectProtocol] = []
        for worker in workers {
            let saved = ManagedObjectContext.didSaveNotification
            tokens.append(center.addObserver(forName: saved, object: worker, queue: nil) { note in
                // Only the object IDs cross queues.
                let ids = note.userInfo?[ManagedObjectContext.insertedObjectIDsKey] as? ObjectIDList ?? []
                main.perform {
                    do { try main.mergeChanges(inserted: ids, updated: [ObjectID](), deleted: [ObjectID]()) } catch { XCTFail("\(error)") }
                    merged.fulfill()
                }
            })
        }
        defer { tokens.forEach(center.removeObserver) }
        let group = DispatchGroup()
        for (number, worker) in workers.enumerated() {
            group.enter()
            worker.perform {
                defer { group.leave() }
                do {
                    let team = self.group(worker, "team\(number)")
                    for index in 0..<25 {
                        self.item(worker, "w\(number)-\(index)", group: team)
                        try worker.save()
                    }
                } catch { XCTFail("\(error)") }
            }
        }
        wait(for: [merged], timeout: 120)
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(controller.fetchedObjects?.count, 100)
        XCTAssertEqual(controller.sections.map(\.name), ["team0", "team1", "team2", "team3"])
        XCTAssertEqual(delegate.problems, [])
        XCTAssertEqual(delegate.mirror, try expectedSections(main, where: nil))
        let everything = FetchRequest<ManagedObject>(entityName: "Item")
        XCTAssertEqual(try ManagedObjectContext(coordinator: coordinator).count(for: everything), 100)
    }

    func testAChildSavePushesIntoItsParentAndTheParentSaveWrites() {
        forEachStoreKind { kind in
            let parent = try makeContext(kind)
            try parent.performAndWait {
                let alpha = group(parent, "alpha")
                item(parent, "a", group: alpha)
                item(parent, "b", group: alpha)
                try parent.save()
            }
            let child = ManagedObjectContext(parent: parent)
            XCTAssertTrue(child.parent === parent)
            try child.performAndWait {
                let items = try child.objects("Item", sort: [FetchSortDescriptor(key: "name")])
                items[0]["name"] = "a renamed"
                child.delete(items[1])
                let beta = group(child, "beta")
                item(child, "c", rank: 3, group: beta)
                try child.save()
                XCTAssertFalse(child.hasChanges)
            }
            let stored = { try ManagedObjectContext(coordinator: parent.coordinator).names("Item") }
            XCTAssertEqual(try stored(), ["a", "b"], "a child's save does not write the stores")
            try parent.performAndWait {
                XCTAssertTrue(parent.hasChanges)
                XCTAssertEqual(parent.insertedObjects.count, 2)
                XCTAssertEqual(try parent.names("Item"), ["a renamed", "c"])
                let c = try XCTUnwrap(parent.objects("Item", "name == 'c'").first)
                XCTAssertEqual((c["group"] as? ManagedObject)?["name"] as? String, "beta")
                let beta = c["group"] as? ManagedObject
                XCTAssertEqual((beta?["items"] as? [ManagedObject])?.count, 1, "the inverse is set")
                try parent.save()
            }
            XCTAssertEqual(try stored(), ["a renamed", "c"])

            // The child's new object still maps to the parent's, now saved.
            try child.performAndWait {
                let c = try XCTUnwrap(child.registeredObjects.first { $0["name"] as? String == "c" })
                c["rank"] = 7
                try child.save()
            }
            try parent.performAndWait {
                XCTAssertEqual(try parent.objects("Item", "name == 'c'").first?["rank"] as? Int, 7)
                try parent.save()
            }
            let fresh = ManagedObjectContext(coordinator: parent.coordinator)
            XCTAssertEqual(try fresh.objects("Item", "name == 'c'").first?["rank"] as? Int, 7)
        }
    }

    func testAnInvalidChildSaveChangesNothingInTheParent() throws {
        let stack = try makeStack(.sqlite)
        let parent = stack.context
        let category = parent.insertNewObject(forEntityName: "Category")
        category["name"] = "Web"
        try parent.save()
        let child = ManagedObjectContext(parent: parent)
        try child.performAndWait {
            let mine = try XCTUnwrap(child.objects("Category").first)
            mine["name"] = "W"
            XCTAssertThrowsError(try child.save()) { error in
                XCTAssertEqual((error as? ValidationError)?.code.rawValue, 1670, "\(error)")
            }
        }
        XCTAssertFalse(parent.hasChanges)
        XCTAssertEqual(category["name"] as? String, "Web")
    }

    func testAChildSaveOverAnObjectGoneFromTheStoreChangesNothingInTheParent() throws {
        let parent = try makeContext(.sqlite)
        let doomed: ObjectID = try parent.performAndWait {
            let doomed = item(parent, "doomed", group: nil)
            try parent.save()
            return doomed.objectID
        }
        let child = ManagedObjectContext(parent: parent)
        try child.performAndWait {
            let mine = try child.existingObject(with: doomed)
            let other = ManagedObjectContext(coordinator: parent.coordinator)
            other.delete(try other.existingObject(with: doomed))
            try other.save()
            parent.performAndWait { parent.reset() }   // the parent forgets what it had read
            mine["name"] = "edited"
            item(child, "new", group: nil)
            XCTAssertThrowsError(try child.save()) { error in
                XCTAssertEqual((error as? ObjectGraphError)?.code, .objectNotFound, "\(error)")
            }
            XCTAssertTrue(child.hasChanges, "the child keeps its changes")
        }
        parent.performAndWait { XCTAssertFalse(parent.hasChanges, "nothing half-pushed") }
    }

    /// A parent's unsaved insert deleted in a child and saved into the parent leaves the child
    /// with it: it was still listed among the child's registered objects, without a context, and
    /// deleting it there stopped the process (found by a fuzzer of the object layout's review).
    func testAParentsInsertDeletedInAChildLeavesTheChild() throws {
        let parent = try makeContext(.sqlite)
        parent.performAndWait {
            item(parent, "kept", group: nil)
            item(parent, "gone", group: nil)
        }
        let child = ManagedObjectContext(parent: parent)
        try child.performAndWait {
            let gone = try XCTUnwrap(try child.objects("Item").first { $0["name"] as? String == "gone" })
            child.delete(gone)
            try child.save()
            XCTAssertNil(gone.managedObjectContext)
            XCTAssertFalse(child.registeredObjects.contains { $0 === gone }, "the deleted object left the child")
            XCTAssertTrue(child.registeredObjects.allSatisfy { $0.managedObjectContext === child })
            XCTAssertEqual(try child.objects("Item").map { $0["name"] as? String }, ["kept"])
        }
        try parent.performAndWait {
            XCTAssertEqual(parent.insertedObjects.map { $0["name"] as? String }, ["kept"])
            try parent.save()
        }
        let stored = try ManagedObjectContext(coordinator: parent.coordinator).objects("Item")
        XCTAssertEqual(stored.map { $0["name"] as? String }, ["kept"])
    }

    func testAChildSeesItsParentsUnsavedChangesToSavedObjects() throws {
        let parent = try makeContext(.sqlite)
        try parent.performAndWait {
            let alpha = group(parent, "alpha"), beta = group(parent, "beta")
            item(parent, "kept", rank: 1, group: alpha)
            item(parent, "gone", group: alpha)
            try parent.save()
            let items = try parent.objects("Item", sort: [FetchSortDescriptor(key: "name")])
            items[1]["name"] = "renamed by parent"
            items[1]["group"] = beta
            parent.delete(items[0])
        }
        let child = ManagedObjectContext(parent: parent)
        try child.performAndWait {
            let seen = try child.objects("Item")
            XCTAssertEqual(seen.map { $0["name"] as? String }, ["renamed by parent"], "the parent's deletion hides one")
            let item = try XCTUnwrap(seen.first)
            XCTAssertEqual((item["group"] as? ManagedObject)?["name"] as? String, "beta")
            XCTAssertFalse(child.hasChanges, "the parent's state is the child's baseline")
            item["rank"] = 2
            try child.save()
        }
        try parent.performAndWait {
            let item = try XCTUnwrap(parent.objects("Item").first)
            XCTAssertEqual(item["name"] as? String, "renamed by parent")
            XCTAssertEqual(item["rank"] as? Int, 2)
            try parent.save()
        }
        let stored = try ManagedObjectContext(coordinator: parent.coordinator).objects("Item")
        XCTAssertEqual(stored.map { "\($0["name"] ?? "") \($0["rank"] ?? "")" }, ["renamed by parent 2"])
    }
}
