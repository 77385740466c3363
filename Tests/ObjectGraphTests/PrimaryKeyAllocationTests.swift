import Foundation
import XCTest
@testable import ObjectGraph

/// `Z_PRIMARYKEY` allocates every new row's key: a store whose allocation is missing, damaged or
/// at its end cannot take a new object, and `checkIntegrity()` says so instead of passing it.
final class PrimaryKeyAllocationTests: BoardTestCase {
    private func storeWithOneItem() throws -> (URL, ManagedObjectContext) {
        let context = try makeBoard(.sqlite, name: "keys")
        context.insertNewObject(forEntityName: "Item")["name"] = "a"
        try context.save()
        return (directory.appendingPathComponent("keys.sqlite"), context)
    }

    private func problems(after sql: String) throws -> [String] {
        let (url, context) = try storeWithOneItem()
        _ = try runSQLite3([url.path, sql])
        return try context.coordinator.checkIntegrity().map(\.description)
    }

    func testAnUntouchedStoreHasNoProblem() throws {
        let (_, context) = try storeWithOneItem()
        XCTAssertEqual(try context.coordinator.checkIntegrity(), [])
    }

    func testAnAllocationAtItsEndIsReported() throws {
        let found = try problems(after: "UPDATE Z_PRIMARYKEY SET Z_MAX = 9223372036854775807 WHERE Z_NAME = 'Item'")
        XCTAssertTrue(found.contains { $0.contains("Item") && $0.contains("no primary key is left to allocate") }, "\(found)")
    }

    func testAMissingOrDamagedAllocationIsReported() throws {
        let missing = try problems(after: "DELETE FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item'")
        XCTAssertTrue(missing.contains { $0.contains("no row of Z_PRIMARYKEY allocates") }, "\(missing)")
        try FileManager.default.removeItem(at: directory.appendingPathComponent("keys.sqlite"))
        let damaged = try problems(after: "UPDATE Z_PRIMARYKEY SET Z_MAX = 'many' WHERE Z_NAME = 'Item'")
        XCTAssertTrue(damaged.contains { $0.contains("Z_MAX is not a count") }, "\(damaged)")
    }
}
