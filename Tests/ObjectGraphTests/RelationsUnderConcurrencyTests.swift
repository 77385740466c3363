import Foundation
import ObjectGraph
import XCTest

/// Two coordinators on the same files stand for two processes: one changes the store between
/// the other's read and its save, and the save checks relationships against the store as it is.
final class RelationsUnderConcurrencyTests: ObjectGraphTestCase {
    /// Two stacks on the same files, and an object saved by the first.
    func twoStacksSharing(_ entity: String, _ key: String, _ value: String) throws -> (
        Stack, Stack, ManagedObject, Int64
    ) {
        let (first, second) = (try makeStack(.sqlite), try makeStack(.sqlite))
        let object = first.context.insertNewObject(forEntityName: entity)
        object[key] = value
        try first.context.save()
        return (first, second, object, try XCTUnwrap(object.objectID.primaryKey))
    }

    func testADeleteIsDeniedByARowLinkedAfterTheDeleterRead() throws {
        let (first, second, category, key) = try twoStacksSharing("Category", "name", "Web")

        let stale = try XCTUnwrap(try second.context.existingObject(entityName: "Category", primaryKey: key))
        XCTAssertEqual((stale["systems"] as? Set<ManagedObject>)?.count ?? 0, 0, "the deleter sees no systems")
        let system = first.context.insertNewObject(forEntityName: "System")
        system["userId"] = "ada"
        system["category"] = category
        try first.context.save()

        second.context.delete(stale)
        XCTAssertThrowsError(try second.context.save()) { error in
            XCTAssertEqual((error as? ValidationError)?.code, .relationshipDeniedDelete, "\(error)")
        }
        second.context.rollback()
        XCTAssertNotNil(
            try makeStack(.sqlite).context.existingObject(entityName: "Category", primaryKey: key),
            "nothing was deleted")
    }

    func testADestinationDeletedAfterItWasReadIsAConflictNotADanglingKey() throws {
        let (first, second, category, key) = try twoStacksSharing("Category", "name", "Web")

        let stale = try XCTUnwrap(try second.context.existingObject(entityName: "Category", primaryKey: key))
        first.context.delete(category)
        try first.context.save()

        let system = second.context.insertNewObject(forEntityName: "System")
        system["userId"] = "ada"
        system["category"] = stale
        XCTAssertThrowsError(try second.context.save()) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .mergeConflict)
            XCTAssertTrue(
                error?.message.contains("refers through 'category' to Category row \(key), which was deleted") ?? false,
                "\(String(describing: error))")
        }
        second.context.rollback()
        XCTAssertEqual(try makeStack(.sqlite).coordinator.checkIntegrity(), [])
    }

    func testACascadeOverRowsTheDeleterNeverSawIsAConflict() throws {
        let (first, second, note, key) = try twoStacksSharing("Note", "title", "trip")

        let stale = try XCTUnwrap(try second.context.existingObject(entityName: "Note", primaryKey: key))
        XCTAssertEqual((stale["attachments"] as? Set<ManagedObject>)?.count ?? 0, 0)
        let attachment = first.context.insertNewObject(forEntityName: "Attachment")
        attachment["note"] = note
        try first.context.save()

        second.context.delete(stale)
        XCTAssertThrowsError(try second.context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict, "\(error)")
        }
        second.context.rollback()
        XCTAssertEqual(try makeStack(.sqlite).coordinator.checkIntegrity(), [])
    }
}
