import Foundation
import GRDB
import ObjectGraph

/// One parent with many children: what an import into one category is. ObjectGraph keeps the
/// to-many and its inverse in memory; GRDB writes and reads the foreign key, as an app would.
enum FamilyModel {
    /// `uniqueNumbers`: children are unique by number, as an import that updates what it finds.
    static func make(uniqueNumbers: Bool = false) throws -> ManagedObjectModel {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string, isIndexed: true)],
            relationships: [RelationshipDescription(
                name: "children", destination: "Child", inverse: "parent", isToMany: true, deleteRule: .cascade)])
        let child = EntityDescription(
            name: "Child",
            attributes: [
                AttributeDescription(name: "number", type: .integer64, isOptional: false, isIndexed: true),
                AttributeDescription(name: "label", type: .string),
            ],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children")],
            uniquenessConstraints: uniqueNumbers ? [["number"]] : [])
        return try ManagedObjectModel(entities: [parent, child])
    }

    static func stack(at path: String, uniqueNumbers: Bool = false) throws -> ManagedObjectContext {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try make(uniqueNumbers: uniqueNumbers))
        try coordinator.addPersistentStore(type: .sqlite, at: URL(fileURLWithPath: path))
        return ManagedObjectContext(coordinator: coordinator)
    }

    static func label(_ number: Int) -> String { "child \(number)" }
}

struct FamilyParent: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "parent"
    static let children = hasMany(FamilyChild.self)
    var id: Int64?
    var name: String

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

struct FamilyChild: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "child"
    var id: Int64?
    var number: Int64
    var label: String
    var parentId: Int64?

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

enum RelationshipCases {
    static let names = [
        "relationship.insertChildren", "relationship.walkChildren", "relationship.reparent1k",
        "relationship.cascadeDelete", "relationship.batchDelete", "relationship.upsertChildren",
    ]

    private static func oursPath(_ directory: String) -> String { "\(directory)/family-ours.sqlite" }
    private static func grdbPath(_ directory: String) -> String { "\(directory)/family-grdb.sqlite" }
    private static func uniqueOursPath(_ directory: String) -> String { "\(directory)/family-unique-ours.sqlite" }
    private static func uniqueGRDBPath(_ directory: String) -> String { "\(directory)/family-unique-grdb.sqlite" }

    /// Writes one family of `size` children (and an empty second parent) with each implementation.
    static func prepare(directory: String, size: Int) throws {
        for path in [oursPath(directory), grdbPath(directory)] { try? FileManager.default.removeItem(atPath: path) }
        let context = try FamilyModel.stack(at: oursPath(directory))
        try insertOurs(context, size: size)
        context.insertNewObject(forEntityName: "Parent")["name"] = "other"
        try context.save()
        let queue = try grdbQueue(grdbPath(directory), creating: true)
        try insertGRDB(queue, size: size)
        try queue.write { db in
            var other = FamilyParent(name: "other")
            try other.insert(db)
        }
        // The same family with children unique by number, for the import that meets them again.
        for path in [uniqueOursPath(directory), uniqueGRDBPath(directory)] {
            try? FileManager.default.removeItem(atPath: path)
        }
        try insertOurs(try FamilyModel.stack(at: uniqueOursPath(directory), uniqueNumbers: true), size: size)
        try insertGRDB(try grdbQueue(uniqueGRDBPath(directory), creating: true, uniqueNumbers: true), size: size)
    }

    /// Runs one case with one implementation on a copy of the prepared stores; returns the
    /// seconds of the measured work.
    static func run(_ name: String, implementation: String, directory: String, size: Int) throws -> Double {
        let ours = implementation == "ours"
        if name == "relationship.insertChildren" {
            let path = "\(directory)/family-insert-\(UUID().uuidString).sqlite"
            defer { try? FileManager.default.removeItem(atPath: path) }
            if ours {
                let context = try FamilyModel.stack(at: path)
                return try time { try insertOurs(context, size: size) }
            }
            let queue = try grdbQueue(path, creating: true)
            return try time { try insertGRDB(queue, size: size) }
        }
        let path = "\(directory)/family-\(implementation)-\(UUID().uuidString).sqlite"
        let upserts = name == "relationship.upsertChildren"
        let source = upserts ? (ours ? uniqueOursPath(directory) : uniqueGRDBPath(directory))
            : (ours ? oursPath(directory) : grdbPath(directory))
        try FileManager.default.copyItem(atPath: source, toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        switch (name, ours) {
        case ("relationship.upsertChildren", true):
            // Core Data's upsert: new objects meet stored rows by their unique number and, by the
            // merge policy, take the rows' identity with the objects' values.
            let context = try FamilyModel.stack(at: path, uniqueNumbers: true)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let seconds = try time {
                let parent = try context.fetch(parentRequest("big"))[0]
                for number in 0..<size {
                    let child = context.insertNewObject(forEntityName: "Child")
                    child["number"] = number
                    child["label"] = FamilyModel.label(number) + " again"
                    child["parent"] = parent
                }
                try context.save()
            }
            let count = try context.count(for: ObjectGraph.FetchRequest<ManagedObject>(entityName: "Child"))
            guard count == size else { throw BenchError("the upsert left \(count) children, not \(size)") }
            return seconds
        case ("relationship.upsertChildren", false):
            let queue = try grdbQueue(path)
            let seconds = try time {
                try queue.inTransaction { db in
                    let parent = try FamilyParent.filter(Column("name") == "big").fetchOne(db)!
                    for number in 0..<size {
                        var child = FamilyChild(
                            number: Int64(number), label: FamilyModel.label(number) + " again", parentId: parent.id)
                        try child.upsert(db)
                    }
                    return .commit
                }
            }
            let count = try queue.read { try FamilyChild.fetchCount($0) }
            guard count == size else { throw BenchError("the upsert left \(count) children, not \(size)") }
            return seconds
        case ("relationship.walkChildren", true):
            let context = try FamilyModel.stack(at: path)
            var sum = 0
            let seconds = try time {
                let parent = try context.fetch(parentRequest("big"))[0]
                for child in parent["children"] as! [ManagedObject] { sum &+= child["number"] as! Int }
            }
            try checkSum(sum, size: size)
            return seconds
        case ("relationship.walkChildren", false):
            let queue = try grdbQueue(path)
            var sum: Int64 = 0
            let seconds = try time {
                try queue.read { db in
                    let parent = try FamilyParent.filter(Column("name") == "big").fetchOne(db)!
                    for child in try parent.request(for: FamilyParent.children).fetchAll(db) { sum &+= child.number }
                }
            }
            try checkSum(Int(sum), size: size)
            return seconds
        case ("relationship.reparent1k", true):
            let context = try FamilyModel.stack(at: path)
            return try time {
                let other = try context.fetch(parentRequest("other"))[0]
                var request = ObjectGraph.FetchRequest<ManagedObject>(
                    entityName: "Child", predicate: try ObjectGraph.Predicate(format: "number < %@", 1000))
                request.fetchLimit = 1000
                for child in try context.fetch(request) { child["parent"] = other }
                try context.save()
            }
        case ("relationship.reparent1k", false):
            let queue = try grdbQueue(path)
            return try time {
                try queue.inTransaction { db in
                    let other = try FamilyParent.filter(Column("name") == "other").fetchOne(db)!
                    for var child in try FamilyChild.filter(Column("number") < 1000).limit(1000).fetchAll(db) {
                        child.parentId = other.id
                        try child.update(db)
                    }
                    return .commit
                }
            }
        case ("relationship.cascadeDelete", true):
            let context = try FamilyModel.stack(at: path)
            return try time {
                context.delete(try context.fetch(parentRequest("big"))[0])
                try context.save()
            }
        case ("relationship.batchDelete", true):
            // Core Data's other way: rows deleted in SQL, delete rules applied there, no objects.
            let context = try FamilyModel.stack(at: path)
            return try time {
                let result = try context.execute(BatchDeleteRequest(
                    entityName: "Parent", predicate: try ObjectGraph.Predicate(format: "name == %@", "big")))
                guard result.count == size + 1 else { throw BenchError("batch deleted \(result.count) rows") }
            }
        case ("relationship.cascadeDelete", false), ("relationship.batchDelete", false):
            let queue = try grdbQueue(path)
            return try time {
                try queue.inTransaction { db in
                    _ = try FamilyParent.filter(Column("name") == "big").deleteAll(db)
                    return .commit
                }
            }
        default:
            throw BenchError("unknown case \(name) / \(implementation)")
        }
    }

    private static func parentRequest(_ name: String) throws -> ObjectGraph.FetchRequest<ManagedObject> {
        ObjectGraph.FetchRequest<ManagedObject>(
            entityName: "Parent", predicate: try ObjectGraph.Predicate(format: "name == %@", name))
    }

    private static func insertOurs(_ context: ManagedObjectContext, size: Int) throws {
        let parent = context.insertNewObject(forEntityName: "Parent")
        parent["name"] = "big"
        for number in 0..<size {
            let child = context.insertNewObject(forEntityName: "Child")
            child["number"] = number
            child["label"] = FamilyModel.label(number)
            child["parent"] = parent
        }
        try context.save()
    }

    private static func insertGRDB(_ queue: DatabaseQueue, size: Int) throws {
        try queue.inTransaction { db in
            var parent = FamilyParent(name: "big")
            try parent.insert(db)
            for number in 0..<size {
                var child = FamilyChild(number: Int64(number), label: FamilyModel.label(number), parentId: parent.id)
                try child.insert(db)
            }
            return .commit
        }
    }

    /// A GRDB database with the foreign key indexed and cascading, as GRDB's guide lays it out.
    private static func grdbQueue(_ path: String, creating: Bool = false, uniqueNumbers: Bool = false) throws
        -> DatabaseQueue {
        let queue = try DatabaseQueue(path: path)
        guard creating else { return queue }
        try queue.write { db in
            try db.create(table: "parent") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull().indexed()
            }
            try db.create(table: "child") { table in
                table.autoIncrementedPrimaryKey("id")
                if uniqueNumbers {
                    table.column("number", .integer).notNull().unique()
                } else {
                    table.column("number", .integer).notNull().indexed()
                }
                table.column("label", .text)
                table.belongsTo("parent", onDelete: .cascade)
            }
        }
        return queue
    }

    private static func checkSum(_ sum: Int, size: Int) throws {
        guard sum == size * (size - 1) / 2 else { throw BenchError("walked the wrong children (sum \(sum))") }
    }
}
