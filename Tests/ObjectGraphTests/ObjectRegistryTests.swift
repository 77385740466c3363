import Foundation
import XCTest
@testable import ObjectGraph

/// The context's open-addressed registry against a plain dictionary, over random inserts,
/// replacements and removals of keys that collide (two root entities, the same primary keys),
/// starting empty or from a save's run of consecutive keys.
final class ObjectRegistryTests: XCTestCase {
    func testRegistryBehavesAsADictionary() throws {
        try checkRegistryAgainstADictionary(startingWithARun: false)
    }

    func testARegisteredRunBehavesAsADictionary() throws {
        try checkRegistryAgainstADictionary(startingWithARun: true)
    }

    private func object(of entity: EntityDescription, primaryKey: Int64) -> ManagedObject {
        let object = ManagedObject(entity: entity)
        object.objectID = ObjectID(entityName: entity.name, storeIdentifier: "S", primaryKey: primaryKey, temporaryNumber: nil)
        return object
    }

    private func checkRegistryAgainstADictionary(startingWithARun: Bool) throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: []),
                                                      EntityDescription(name: "B", attributes: [])])
        let entities = try ["A", "B"].map { try XCTUnwrap(model.entity(named: $0)) }
        XCTAssertNotEqual(entities[0].entityNumber, entities[1].entityNumber)
        var random = FetchPowerTests.Generator(state: 5)
        var registry = ObjectRegistry()
        var expected: [ManagedObjectContext.ObjectKey: ManagedObject] = [:]
        if startingWithARun {
            let saved = (100..<300).map { object(of: entities[0], primaryKey: Int64($0)) }
            registry.register(consecutive: saved, rootEntityNumber: entities[0].entityNumber, firstKey: 100)
            for object in saved {
                expected[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: object.registeredPrimaryKey)] = object
            }
            XCTAssertEqual(registry.count, 200)
            XCTAssert(registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: 299)] === saved.last)
            XCTAssertNil(registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: 300)])
            XCTAssertNil(registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[1].entityNumber, primaryKey: 150)])
            XCTAssertNil(registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: Int64.min)])
            // Setting an object to its own key changes nothing.
            registry[ManagedObjectContext.ObjectKey(rootEntityNumber: entities[0].entityNumber, primaryKey: 100)] = saved[0]
            XCTAssertEqual(registry.count, 200)
        }
        for step in 0..<20_000 {
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
}
