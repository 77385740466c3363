import Foundation
import XCTest
@testable import ObjectGraph

/// The did-save notification's compact ID lists against the objects the save wrote.
final class ObjectIDListTests: ObjectGraphTestCase {
    /// Dogs and cats share their root's primary keys, so interleaving them breaks runs; notes
    /// live in another store. Every list must read back the saved objects' IDs in order.
    func testADidSaveNotificationListsEverySavedObjectsID() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let recorder = SaveRecorder()
        let token = context.notificationCenter.addObserver(forName: ManagedObjectContext.didSaveNotification,
                                                           object: context, queue: nil) { recorder.saves.append($0) }
        defer { context.notificationCenter.removeObserver(token) }
        var random = FetchPowerTests.Generator(state: 3)
        for index in 0..<300 {
            let entity = ["Dog", "Cat", "Note"][random.next(3)]
            context.insertNewObject(forEntityName: entity)[entity == "Note" ? "title" : "name"] = "\(entity) \(index)"
        }
        try context.save()
        let notes = try context.objects("Note")
        for note in notes.prefix(40) { note["title"] = "changed" }
        for note in notes.suffix(20) { context.delete(note) }
        try context.save()

        let saves = recorder.saves
        XCTAssertEqual(saves.count, 2)
        for save in saves {
            let info = try XCTUnwrap(save.userInfo)
            for (objectsKey, idsKey) in [(ManagedObjectContext.insertedObjectsKey, ManagedObjectContext.insertedObjectIDsKey),
                                         (ManagedObjectContext.updatedObjectsKey, ManagedObjectContext.updatedObjectIDsKey),
                                         (ManagedObjectContext.deletedObjectsKey, ManagedObjectContext.deletedObjectIDsKey)] {
                let objects = try XCTUnwrap(info[objectsKey] as? [ManagedObject])
                let ids = try XCTUnwrap(info[idsKey] as? ObjectIDList)
                XCTAssertEqual(Array(ids), objects.map(\.objectID), idsKey)
                XCTAssertEqual(ids.count, objects.count)
                XCTAssertEqual(ids.reversed(), objects.map(\.objectID).reversed(), "read back to front")
                XCTAssert(ids.allSatisfy { !$0.isTemporaryID }, idsKey)
            }
        }
        let firstSave = try XCTUnwrap(saves.first?.userInfo?[ManagedObjectContext.insertedObjectIDsKey] as? ObjectIDList)
        XCTAssertEqual(firstSave.count, 300)
        XCTAssertEqual(Set(firstSave).count, 300)
        XCTAssertEqual(firstSave, ObjectIDList(Array(firstSave)), "a list equals one built from its IDs")
    }

    /// Runs break where the scope or the numbering does, and never overflow.
    func testRunsBreakOnEveryDiscontinuity() {
        let a = { ObjectID(entityName: "A", storeIdentifier: "S", primaryKey: $0, temporaryNumber: nil) }
        let b = { ObjectID(entityName: "B", storeIdentifier: "S", primaryKey: $0, temporaryNumber: nil) }
        let temporary = ObjectID(entityName: "A", storeIdentifier: nil, primaryKey: nil, temporaryNumber: 2)
        let ids = [a(1), a(2), a(3), b(4), a(4), a(4), a(9), temporary, a(Int64.max - 1), a(Int64.max), a(Int64.min), a(Int64.min + 1)]
        let list = ObjectIDList(ids)
        XCTAssertEqual(Array(list), ids)
        XCTAssertEqual(list.indices.map { list[$0] }, ids)
        XCTAssertEqual(ObjectIDList(), [])
        XCTAssertNotEqual(list, ObjectIDList(ids.dropLast()))
    }
}

/// Notifications posted synchronously on the test's own thread.
private final class SaveRecorder: @unchecked Sendable {
    var saves: [Notification] = []
}
