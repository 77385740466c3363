import Foundation
import XCTest
@testable import ObjectGraph

/// A cascade through the context reads each child to delete it; a child's to-one back to a
/// parent still in memory is found there without being written into the child's values (which
/// copied the values each child shares with its committed ones: 100,000 copies in a cascade).
final class CascadeDeleteTests: XCTestCase {
    func testACascadeLeavesTheChildrensValuesAsRead() throws {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")])
        let model = try ManagedObjectModel(entities: [parent, child])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cascade-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(at: url) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        do {
            let writer = ManagedObjectContext(coordinator: coordinator)
            let family = writer.insertNewObject(forEntityName: "Parent")
            family["name"] = "big"
            for number in 0..<300 {
                let member = writer.insertNewObject(forEntityName: "Child")
                member["number"] = number
                member["parent"] = family
            }
            let other = writer.insertNewObject(forEntityName: "Parent")
            other["name"] = "other"
            try writer.save()
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        let parents = try context.fetch(FetchRequest<ManagedObject>(entityName: "Parent"))
        let children = try context.fetch(FetchRequest<ManagedObject>(entityName: "Child"))
        let big = try XCTUnwrap(parents.first { $0["name"] as? String == "big" })
        let slot = try XCTUnwrap(children[0].values.layout.index(of: "parent"))
        context.delete(big)
        context.processPendingChanges()
        XCTAssertTrue(children.allSatisfy(\.isDeleted), "the cascade reached every child")
        for member in children {
            guard case .fault = member.values.slot(slot) else {
                return XCTFail("a deleted child's to-one was written into its values")
            }
        }
        try context.save()
        XCTAssertTrue(children.allSatisfy { $0.managedObjectContext == nil })
        let reader = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Child")).count, 0)
        XCTAssertEqual(try reader.fetch(FetchRequest<ManagedObject>(entityName: "Parent")).map { $0["name"] as? String },
                       ["other"])
    }
}
