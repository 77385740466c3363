import Foundation
import XCTest
@testable import ObjectGraph

/// The context's open-addressed registry against a plain dictionary, over random inserts,
/// replacements and removals of keys that collide (two root entities, the same primary keys).
final class ObjectRegistryTests: XCTestCase {
    func testRegistryBehavesAsADictionary() throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: []),
                                                      EntityDescription(name: "B", attributes: [])])
        let entities = try ["A", "B"].map { try XCTUnwrap(model.entity(named: $0)) }
        XCTAssertNotEqual(entities[0].entityNumber, entities[1].entityNumber)
        var random = FetchPowerTests.Generator(state: 5)
        var registry = ObjectRegistry()
        var expected: [ManagedObjectContext.ObjectKey: ManagedObject] = [:]
        for step in 0..<20_000 {
            let entity = entities[random.next(2)]
            let key = ManagedObjectContext.ObjectKey(rootEntityNumber: entity.entityNumber, primaryKey: Int64(random.next(400)))
            switch random.next(3) {
            case 0:
                let object = ManagedObject(entity: entity)
                object.objectID = ObjectID(entityName: entity.name, storeIdentifier: "S", primaryKey: key.primaryKey,
                                           temporaryNumber: nil)
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
