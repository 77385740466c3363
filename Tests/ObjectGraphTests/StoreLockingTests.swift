import Foundation
import XCTest
@testable import ObjectGraph

/// A save locks and commits only the stores it changes: one store's save never waits for, or
/// goes through a super-journal with, the other store.
final class StoreLockingTests: ObjectGraphTestCase {
    func testASaveLocksOnlyTheStoresItChanges() throws {
        let holder = try makeStack(.sqlite)
        let model = try Self.shopModel()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model, busyTimeout: 0.2)
        coordinator.valueTransformers.register(ReversingTransformer(), forName: "TestReversing")
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("shop-Notes.sqlite"))
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Passwords",
                                           at: directory.appendingPathComponent("shop-Passwords.sqlite"))
        let other = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())

        try holder.coordinator.write(stores: [holder.notes]) { _ in
            // The Notes store's write lock is held here; the Passwords store is free.
            let tag = other.insertNewObject(forEntityName: "Tag")
            tag["name"] = "saved while Notes is locked"
            XCTAssertNoThrow(try other.save())
            let note = other.insertNewObject(forEntityName: "Note")
            note["title"] = "waits for the lock"
            XCTAssertThrowsError(try other.save()) { error in
                XCTAssertEqual((error as? ObjectGraphError)?.storeFailure, .busy, "\(error)")
            }
            other.rollback()
        }
        XCTAssertEqual(try holder.context.objects("Tag").map { $0["name"] as? String }, ["saved while Notes is locked"])
        XCTAssertEqual(try holder.context.objects("Note").count, 0)
        try coordinator.close()
    }
}
