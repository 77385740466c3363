import Foundation
import XCTest
@testable import ObjectGraph

/// The Core Data API beyond the basics (issue 21, item 7): child fetches over a parent's unsaved
/// objects, faulting control, lifecycle hooks, the container, merging and `SUBQUERY`.
final class CoreDataAPITests: BoardTestCase, @unchecked Sendable {
    // MARK: - Child contexts

    func testAChildFetchIncludesItsParentsUnsavedInsertsAndMatchesItsUpdates() throws {
        forEachStoreKind { kind in
            let parent = try makeBoard(kind)
            let saved = group(parent, "saved")
            item(parent, "low", rank: 1, group: saved)
            item(parent, "raised", rank: 2, group: saved)
            item(parent, "deleted", rank: 9, group: saved)
            try parent.save()
            // Unsaved in the parent: an insert, an update that makes a row match, a deletion.
            let fresh = group(parent, "fresh")
            item(parent, "new", rank: 7, group: fresh)
            try XCTUnwrap(parent.objects("Item", "name == 'raised'").first)["rank"] = 8
            parent.delete(try XCTUnwrap(parent.objects("Item", "name == 'deleted'").first))

            let child = ManagedObjectContext(parent: parent)
            try child.performAndWait {
                XCTAssertEqual(try child.names("Item"), ["low", "new", "raised"])
                XCTAssertEqual(try child.names("Item", "rank > 5"), ["new", "raised"])
                XCTAssertEqual(try child.count(for: FetchRequest<ManagedObject>(entityName: "Item")), 3)
                var limited = FetchRequest<ManagedObject>(entityName: "Item")
                limited.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
                limited.fetchLimit = 1
                XCTAssertEqual(try child.fetch(limited).map { $0["name"] as? String }, ["raised"])
                let new = try XCTUnwrap(child.objects("Item", "name == 'new'").first)
                XCTAssertTrue(new.objectID.isTemporaryID)
                XCTAssertTrue(try child.objects("Item", "name == 'new'").first === new, "one object per ID")
                XCTAssertEqual((new["group"] as? ManagedObject)?["name"] as? String, "fresh")
                XCTAssertTrue(try child.existingObject(with: new.objectID) === new)
                XCTAssertFalse(child.hasChanges, "the parent's state is the child's baseline")
                new["rank"] = 70
                try child.save()
            }
            XCTAssertEqual(try parent.objects("Item", "name == 'new'").first?["rank"] as? Int, 70)
            try parent.save()
            XCTAssertEqual(try makeBoard(kind, name: "other").names("Item"), [], "another store is untouched")
            let reader = ManagedObjectContext(coordinator: parent.coordinator)
            XCTAssertEqual(try reader.names("Item", "rank > 5"), ["new", "raised"])
        }
    }

    func testAGrandchildSeesItsGrandparentsInsertsUnlessTheParentDeletedThem() throws {
        let root = try makeBoard(.sqlite)
        item(root, "kept", group: nil)
        item(root, "dropped", group: nil)
        let middle = ManagedObjectContext(parent: root)
        try middle.performAndWait {
            middle.delete(try XCTUnwrap(middle.objects("Item", "name == 'dropped'").first))
            item(middle, "middle's", group: nil)
        }
        let leaf = ManagedObjectContext(parent: middle)
        try leaf.performAndWait {
            XCTAssertEqual(try leaf.names("Item"), ["kept", "middle's"])
        }
    }
}
