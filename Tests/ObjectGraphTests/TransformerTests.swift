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
