import Foundation
import XCTest
@testable import ObjectGraph

/// The context's open-addressed registry against a plain dictionary, over random inserts,
/// replacements and removals of keys that collide (two root entities, the same primary keys),
/// starting empty or from a save's run of consecutive keys.
final class ObjectRegistryTests: XCTestCase {
    func testRegistryBehavesAsADictionary() throws {
        try checkRegistryAgainstADictionary(saving: { _ in [] })
    }

    func testARegisteredRunBehavesAsADictionary() throws {
        try checkRegistryAgainstADictionary(saving: { entities in [(entities[0], 100..<300)] })
    }

    /// A save of a category then its entries, then something else: three runs, no table.
    func testSeveralRegisteredRunsBehaveAsADictionary() throws {
        try checkRegistryAgainstADictionary(saving: { entities in
            [(entities[1], 1..<2), (entities[0], 100..<300), (entities[1], 2..<50), (entities[0], 350..<352)]
        })
    }

    /// More runs than stand in for a table: the save goes into the table.
    func testASaveOfManyShortRunsBehavesAsADictionary() throws {
        try checkRegistryAgainstADictionary(saving: { entities in
            (0..<12).map { (entities[$0 % 2], Int64($0 * 20)..<Int64($0 * 20 + 10)) }
        })
    }

    private func object(of entity: EntityDescription, primaryKey: Int64) -> ManagedObject {
        let object = ManagedObject(entity: entity)
        object.objectID = ObjectID(entityName: entity.name, storeIdentifier: "S", primaryKey: primaryKey, temporaryNumber: nil)
        return object
    }

    /// Starts from one save of the objects `saving` names (entity, keys), then changes at random.
    private func checkRegistryAgainstADictionary(
        saving: ([EntityDescription]) -> [(EntityDescription, Range<Int64>)]
    ) throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: []),
                                                      EntityDescription(name: "B", attributes: [])])
        let entities = try ["A", "B"].map { try XCTUnwrap(model.entity(named: $0)) }
        XCTAssertNotEqual(entities[0].entityNumber, entities[1].entityNumber)
        var random = FetchPowerTests.Generator(state: 5)
        var registry = ObjectRegistry()
        var expected: [ManagedObjectContext.ObjectKey: ManagedObject] = [:]
        let saved = saving(entities).flatMap { entity, keys in keys.map { object(of: entity, primaryKey: $0) } }
        if !saved.isEmpty {
            registry.register(saved: saved)
            for object in saved {
                let key = ManagedObjectContext.ObjectKey(
                    rootEntityNumber: object.entity.entityNumber, primaryKey: object.registeredPrimaryKey)
                XCTAssertNil(expected.updateValue(object, forKey: key))
            }
            XCTAssertEqual(registry.count, saved.count)
            for (key, object) in expected { XCTAssert(registry[key] === object, "\(key)") }
            for entity in entities {
                for primaryKey in [Int64.min, -1, 0, 99, 300, 301, 349, 352, 1_000, Int64.max] {
                    let key = ManagedObjectContext.ObjectKey(rootEntityNumber: entity.entityNumber, primaryKey: primaryKey)
                    XCTAssert(registry[key] === expected[key], "\(key)")
                }
            }
            // Setting an object to its own key changes nothing.
            registry[ManagedObjectContext.ObjectKey(
                rootEntityNumber: saved[0].entity.entityNumber, primaryKey: saved[0].registeredPrimaryKey)] = saved[0]
            XCTAssertEqual(registry.count, saved.count)
        }
        for step in 0..<20_000 {
            if step % 997 == 0 {
                // Many at once, as a save forgetting a cascade's objects does.
                let residue = Int64(random.next(3))
                registry.removeAll { $0.registeredPrimaryKey % 3 == residue }
                expected = expected.filter { $0.key.primaryKey % 3 != residue }
                XCTAssertEqual(registry.count, expected.count, "step \(step)")
            }
            let entity = entities[random.next(2)]
            let key = ManagedObjectContext.ObjectKey(rootEntityNumber: entity.entityNumber, primaryKey: Int64(random.next(400)))
            switch random.next(3) {
            case 0:
                let object = object(of: entity, primaryKey: key.primaryKey)
                registry[key] = object
                expected[key] = object
            case 1:
                XCTAssert(registry.removeValue(forKey: key) === expected.removeValue(forKey: key), "step \(step)")
            default:
                XCTAssert(registry[key] === expected[key], "step \(step)")
            }
            XCTAssertEqual(registry.count, expected.count, "step \(step)")
        }
        for (key, object) in expected { XCTAssert(registry[key] === object) }
        XCTAssertEqual(Set(registry.values.map(ObjectIdentifier.init)), Set(expected.values.map(ObjectIdentifier.init)))
        registry.removeAll()
        XCTAssertTrue(registry.isEmpty)
        XCTAssertNil(registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: 1)])
    }

    /// A save deleting most of what a context holds forgets exactly the deleted objects: the
    /// others are still found by their rows, the deleted ones leave the context.
    func testASaveForgettingManyDeletedObjectsKeepsTheOthers() throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "number", type: .integer64)])])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(at: url) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        for number in 0..<1_000 { context.insertNewObject(forEntityName: "Item")["number"] = number }
        try context.save()
        let items = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
        let (deleted, kept) = (items.filter { ($0["number"] as! Int) % 10 != 0 }, items.filter { ($0["number"] as! Int) % 10 == 0 })
        deleted.forEach(context.delete)
        try context.save()
        XCTAssertEqual(context.registeredObjects.count, kept.count)
        XCTAssertTrue(deleted.allSatisfy { $0.managedObjectContext == nil && !$0.objectID.isTemporaryID })
        for object in kept { XCTAssert(try context.existingObject(with: object.objectID) === object) }
        XCTAssertEqual(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).count, kept.count)
    }
}
