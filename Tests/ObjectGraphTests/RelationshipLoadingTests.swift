import Foundation
import XCTest

@testable import ObjectGraph

/// A relationship whose destination cannot be loaded throws (``ManagedObject/loadedValue(forKey:)``)
/// or fails the context's next fetch, never reads as nil or empty. Stores are Apple's wibosco
/// fixture (model version 3: Post.sections ↔ Section.post), damaged with sqlite3.
final class RelationshipLoadingTests: ObjectGraphTestCase {
    static let folder = "CoreData/wibosco-migration-example/"

    func openStore(damage sql: String) throws -> ManagedObjectContext {
        let source = Self.fixturesURL.appendingPathComponent(Self.folder + "CoreDataMigration_Example_3.sqlite")
        let url = directory.appendingPathComponent("posts.sqlite")
        try FileManager.default.copyItem(at: source, to: url)
        _ = try runSQLite3([url.path, sql])
        let model = try ManagedObjectModel(
            contentsOf: Self.fixturesURL.appendingPathComponent(
                Self.folder + "CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return ManagedObjectContext(coordinator: coordinator)
    }

    func firstSection(_ context: ManagedObjectContext) throws -> ManagedObject {
        let request = FetchRequest<ManagedObject>(
            entityName: "Section", predicate: try Predicate(format: "post != nil"))
        return try XCTUnwrap(try context.fetch(request).first)
    }

    func testAToOneWhoseDestinationRowIsMissingThrowsNamingTheRelationshipAndRow() throws {
        let context = try openStore(
            damage: "UPDATE ZSECTION SET ZPOST = 999 WHERE Z_PK = (SELECT MIN(Z_PK) FROM ZSECTION)")
        let section = try firstSection(context)
        let key = try XCTUnwrap(section.objectID.primaryKey)
        XCTAssertThrowsError(try section.loadedValue(forKey: "post")) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .objectNotFound)
            XCTAssertEqual(error?.message, "Section.post of row \(key) refers to Post row 999, which does not exist")
        }
        // Read without `try`, the value is nil but the next fetch throws what went wrong.
        XCTAssertNil(section["post"])
        XCTAssertThrowsError(try context.fetch(FetchRequest<ManagedObject>(entityName: "Post"))) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .objectNotFound)
        }
        XCTAssertNoThrow(try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")))
    }

    func testAToManyWhoseDestinationCannotBeDecodedThrowsNamingTheValue() throws {
        // A Section's index is an Integer 16: a BLOB there cannot be read.
        let context = try openStore(
            damage: "UPDATE ZSECTION SET ZINDEX = X'00FF' WHERE ZPOST = (SELECT MIN(Z_PK) FROM ZPOST)")
        let post = try XCTUnwrap(try context.existingObject(entityName: "Post", primaryKey: 1))
        XCTAssertThrowsError(try post.loadedValue(forKey: "sections")) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .undecodableValue)
            XCTAssertTrue(error?.message.hasPrefix("cannot read Section.index of row ") == true, error?.message ?? "")
            XCTAssertTrue(
                error?.message.contains("a BLOB, not a value of type Integer 16") == true, error?.message ?? "")
        }
        XCTAssertEqual((post["sections"] as? [ManagedObject])?.count, 0)
        XCTAssertThrowsError(try context.save())
    }

    func testLoadedValueOfAnUnknownKeyThrows() throws {
        let context = try openStore(damage: "SELECT 1")
        let post = try XCTUnwrap(try context.existingObject(entityName: "Post", primaryKey: 1))
        XCTAssertThrowsError(try post.loadedValue(forKey: "author")) { error in
            XCTAssertEqual("\(error)", "entity Post has no property named 'author' (code 133000)")
        }
        XCTAssertEqual((try post.loadedValue(forKey: "sections") as? [ManagedObject])?.isEmpty, false)
    }
}
