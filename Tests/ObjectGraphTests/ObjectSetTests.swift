import Foundation
import XCTest
@testable import ObjectGraph

/// A context's object set against a plain ordered list, over random insertions, removals,
/// batch removals, clearing and objects moving to another context's set (which sets the same
/// bit of the object): a removal leaves its entry until a compaction, and nothing of that
/// may show.
final class ObjectSetTests: XCTestCase {
    func testTheSetBehavesAsAnOrderedListOfDistinctObjects() {
        let entity = EntityDescription(name: "Item", attributes: [])
        let objects = (0..<150).map { _ in ManagedObject(entity: entity) }
        var generator = SplitMix(seed: 0x5EED)
        for round in 0..<20 {
            var set = ObjectSet(.inserted)
            var other = ObjectSet(.inserted)
            var expected: [ManagedObject] = []
            var otherExpected: [ManagedObject] = []
            for object in objects { object.memberships = [] }
            for step in 0..<3_000 {
                let object = objects[Int(generator.next() % UInt64(objects.count))]
                switch generator.next() % 100 {
                case 0..<45:
                    guard !otherExpected.contains(where: { $0 === object }) else { break }
                    let isNew = !expected.contains { $0 === object }
                    XCTAssertEqual(set.insert(object), isNew)
                    if isNew { expected.append(object) }
                case 45..<85:
                    // A context removes only its own objects (the bit is the other set's now).
                    guard !otherExpected.contains(where: { $0 === object }) else { break }
                    set.remove(object)
                    expected.removeAll { $0 === object }
                case 85..<92:
                    // Leaves for another context, whose set then has its bit.
                    guard expected.contains(where: { $0 === object }) else { break }
                    set.remove(object)
                    expected.removeAll { $0 === object }
                    object.memberships = []
                    other.insert(object)
                    otherExpected.append(object)
                case 92..<97:
                    // Comes back from the other context.
                    guard otherExpected.contains(where: { $0 === object }) else { break }
                    other.remove(object)
                    otherExpected.removeAll { $0 === object }
                    object.memberships = []
                    set.insert(object)
                    expected.append(object)
                case 97..<99:
                    guard !otherExpected.contains(where: { $0 === object }) else { break }
                    let some = expected.filter { _ in generator.next() % 3 == 0 }
                    set.remove(some + [object])
                    expected.removeAll { candidate in candidate === object || some.contains { $0 === candidate } }
                default:
                    if step % 500 == 0 {
                        set.removeAll()
                        expected = []
                    }
                }
                XCTAssertEqual(set.count, expected.count, "round \(round) step \(step)")
                XCTAssertEqual(set.isEmpty, expected.isEmpty)
                if step % 53 == 0 {
                    XCTAssertTrue(set.objects.elementsEqual(expected, by: ===), "round \(round) step \(step)")
                    XCTAssertTrue(other.objects.elementsEqual(otherExpected, by: ===), "round \(round) step \(step)")
                }
            }
            for object in objects {
                XCTAssertEqual(set.contains(object) || other.contains(object),
                               expected.contains { $0 === object } || otherExpected.contains { $0 === object })
            }
        }
    }

    /// A new object deleted in one context and inserted into another is saved by that one only.
    func testAnObjectDeletedNewAndInsertedElsewhereIsInsertedThereOnly() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", attributes: [AttributeDescription(name: "name", type: .string)]),
        ])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory, at: URL(fileURLWithPath: "/dev/null"))
        let first = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let second = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        var moved: ManagedObject?
        for number in 0..<100 {
            let object = first.insertNewObject(forEntityName: "Item")
            object["name"] = "item \(number)"
            if number == 10 { moved = object }
        }
        let object = try XCTUnwrap(moved)
        first.delete(object)
        second.insert(object)
        XCTAssertEqual(first.insertedObjects.count, 99)
        XCTAssertFalse(first.insertedObjects.contains { $0 === object })
        XCTAssertTrue(second.insertedObjects.elementsEqual([object], by: ===))
        try first.save()
        try second.save()
        let reader = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let names = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Item")).compactMap { $0["name"] as? String }
        XCTAssertEqual(names.filter { $0 == "item 10" }.count, 1)
        XCTAssertEqual(names.count, 100)
    }
}
