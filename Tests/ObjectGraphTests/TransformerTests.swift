import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

final class TransformerTests: ObjectGraphTestCase {
    func testTransformableIsStoredEncodedAndToldItsPlace() throws {
        let stack = try makeStack(.sqlite)
        let system = stack.context.insertNewObject(forEntityName: "System")
        system["userId"] = "alice"
        system["password"] = "abc"
        try stack.context.save()
        let place = try XCTUnwrap(stack.transformer.places.last)
        XCTAssertEqual(place, ValuePlace(storeIdentifier: stack.passwords.identifier, entityName: "System", attributeName: "password", primaryKey: system.objectID.primaryKey!))
        let queue = try DatabaseQueue(path: stack.passwords.url!.path)
        try queue.read { db in
            XCTAssertEqual(try String.fetchOne(db, sql: "SELECT typeof(ZPASSWORD) FROM ZSYSTEM"), "blob")
            XCTAssertEqual(try Data.fetchOne(db, sql: "SELECT ZPASSWORD FROM ZSYSTEM"), Data("cba".utf8))
        }
        let other = ManagedObjectContext(coordinator: stack.coordinator)
        XCTAssertEqual(try other.objects("System").first?["password"] as? String, "abc")
    }

    func testPredicatesAndSortsOnTransformedAttributesRunOnDecodedValues() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            // Reversed bytes: "ab" is stored "ba", "zb" as "bz"; on bytes, BEGINSWITH 'a' would find nothing.
            for (user, password) in [("one", "ab"), ("two", "zb"), ("three", "ac")] {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["userId"] = user
                system["password"] = password
            }
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let found = try other.objects("System", "password BEGINSWITH 'a'", sort: [FetchSortDescriptor(key: "password", ascending: false)])
            XCTAssertEqual(found.map { $0["userId"] as! String }, ["three", "one"])
            let mixed = try other.objects("System", "password == 'zb' OR userId == 'one'")
            XCTAssertEqual(Set(mixed.map { $0["userId"] as! String }), ["one", "two"])
            var limited = FetchRequest<ManagedObject>(entityName: "System")
            limited.sortDescriptors = [FetchSortDescriptor(key: "password")]
            limited.fetchLimit = 2
            limited.fetchOffset = 1
            XCTAssertEqual(try other.fetch(limited).map { $0["password"] as! String }, ["ac", "zb"])
        }
    }

    func testMissingTransformerIsAClearError() throws {
        let stack = try makeStack(.inMemory)
        stack.coordinator.valueTransformers.register(nil, forName: "TestReversing")
        let note = stack.context.insertNewObject(forEntityName: "Note")
        note["body"] = "text"
        XCTAssertThrowsError(try stack.context.save()) { error in
            XCTAssertTrue("\(error)".contains("no value transformer named 'TestReversing'"), "\(error)")
        }
    }
}

/// Fails to decode any value stored as "bad".
final class PickyTransformer: ValueTransformer {
    struct Refused: Error {}
    var decodes = 0
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data { Data((value as! String).utf8) }
    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        decodes += 1
        guard data != Data("bad".utf8) else { throw Refused() }
        return String(decoding: data, as: UTF8.self)
    }
}

final class PropertiesToFetchTests: ObjectGraphTestCase {
    func testUnrequestedTransformedValuesDecodeOnFirstReadAndFailuresAreReported() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let picky = PickyTransformer()
            stack.coordinator.valueTransformers.register(picky, forName: "TestReversing")
            for (user, password) in [("one", "fine"), ("two", "bad")] {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["userId"] = user
                system["password"] = password
            }
            try stack.context.save()
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            var request = FetchRequest<ManagedObject>(entityName: "System", sortDescriptors: [FetchSortDescriptor(key: "userId")])
            request.propertiesToFetch = []
            picky.decodes = 0
            let systems = try context.fetch(request)
            XCTAssertEqual(picky.decodes, 0, "nothing was decoded while fetching")
            XCTAssertEqual(systems[0]["password"] as? String, "fine")
            XCTAssertEqual(picky.decodes, 1)
            XCTAssertNoThrow(try context.decodeValues(of: systems[0]))
            XCTAssertThrowsError(try context.decodeValues(of: systems[1]), "an explicit decode reports the failure")
            XCTAssertNil(systems[1]["password"])
            XCTAssertThrowsError(try context.fetch(request), "a failed read is reported by the next fetch")
            XCTAssertNoThrow(try context.fetch(request))
        }
    }
}
