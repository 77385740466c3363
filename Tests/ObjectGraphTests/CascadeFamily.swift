import Foundation
import XCTest
@testable import ObjectGraph

/// The family the cascade tests delete: Parent —children (cascade)→ Child —grandchildren
/// (cascade)→ Grandchild; a child may also point at a Tag (nullify) whose inverse lists it.
/// Saved in a store of its own: "big" with `children` children (each numbered), and "other"
/// without any unless `otherParent` is false.
struct CascadeFamily {
    let coordinator: PersistentStoreCoordinator
    let url: URL
    let model: ManagedObjectModel

    /// `preserveName` keeps Parent.name in the history tombstone; `history` turns persistent
    /// history on.
    init(children: Int, grandchildrenEach: Int = 0, tagged: Bool = false, otherParent: Bool = true,
         preserveName: Bool = false, history: Bool = false) throws {
        var name = AttributeDescription(name: "name", type: .string)
        name.preservesValueInHistoryOnDeletion = preserveName
        let parent = EntityDescription(
            name: "Parent", attributes: [name],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        var childRelationships = [
            RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")
        ]
        if grandchildrenEach > 0 {
            childRelationships.append(RelationshipDescription(
                name: "grandchildren", destination: "Grandchild", inverse: "child", isToMany: true,
                deleteRule: .cascade))
        }
        if tagged {
            childRelationships.append(RelationshipDescription(name: "tag", destination: "Tag", inverse: "children"))
        }
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: childRelationships)
        let grandchild = EntityDescription(
            name: "Grandchild", attributes: [AttributeDescription(name: "number", type: .integer64)],
            relationships: [RelationshipDescription(name: "child", destination: "Child", inverse: "grandchildren")])
        let tag = EntityDescription(
            name: "Tag", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "tag", isToMany: true)])
        model = try ManagedObjectModel(
            entities: [parent, child] + (grandchildrenEach > 0 ? [grandchild] : []) + (tagged ? [tag] : []))
        url = FileManager.default.temporaryDirectory.appendingPathComponent("family-\(UUID().uuidString).sqlite")
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.tracksPersistentHistory = history
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let writer = ManagedObjectContext(coordinator: coordinator)
        let big = writer.insertNewObject(forEntityName: "Parent")
        big["name"] = "big"
        if otherParent { writer.insertNewObject(forEntityName: "Parent")["name"] = "other" }
        let label = tagged ? writer.insertNewObject(forEntityName: "Tag") : nil
        label?["name"] = "label"
        for number in 0..<children {
            let member = writer.insertNewObject(forEntityName: "Child")
            member["number"] = number
            member["parent"] = big
            if let label { member["tag"] = label }
            for offset in 0..<grandchildrenEach {
                let grandchild = writer.insertNewObject(forEntityName: "Grandchild")
                grandchild["number"] = number * 100 + offset
                grandchild["child"] = member
            }
        }
        try writer.save()
    }

    /// A new context on the family's store, with a notification center of its own.
    func context() -> ManagedObjectContext {
        ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
    }

    func parent(_ name: String, in context: ManagedObjectContext, asFault: Bool = false) throws -> ManagedObject {
        var request = FetchRequest<ManagedObject>(entityName: "Parent")
        request.predicate = try ObjectGraph.Predicate(format: "name == %@", name)
        request.returnsObjectsAsFaults = asFault
        return try XCTUnwrap(try context.fetch(request).first)
    }

    func children(in context: ManagedObjectContext, asFaults: Bool = false) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: "Child")
        request.returnsObjectsAsFaults = asFaults
        return try context.fetch(request)
    }

    func childCount() throws -> Int { try children(in: context()).count }

    /// What a new context reads of an entity's rows.
    func numbers(_ entity: String) throws -> [Int] {
        try context().fetch(FetchRequest<ManagedObject>(entityName: entity)).compactMap { $0["number"] as? Int }
            .sorted()
    }

    func remove() {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }
}
