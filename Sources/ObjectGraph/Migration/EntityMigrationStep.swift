import Foundation

/// Code that runs once for every object of an entity during a migration, after the inferred
/// mapping has carried its values over, as a Core Data entity migration policy does. A step
/// covers what cannot be inferred: a type change, a value computed from others, objects
/// split into new entities. A change the inference refuses is accepted when a step is
/// registered for its entity; the step must then give the value.
///
/// For example, moving a post's text into a new `Section` entity:
///
/// ```swift
/// let step = EntityMigrationStep(entity: "Post", from: "Model 2") { post, writer in
///     guard let text = post.sourceValues["content"] as? String else { return }
///     try writer.insert(entity: "Section", values: ["body": text, "post": post.primaryKey])
/// }
/// coordinator.migrationSteps = [step]
/// ```
public struct EntityMigrationStep {
    /// The entity (in the newer version) whose objects the step sees.
    public let entityName: String
    /// The version migrated from; nil runs the step on every migration whose newer version has the entity.
    public let sourceVersion: String?
    let body: (MigratingObject, MigrationWriter) throws -> Void

    /// Makes a step for `entity` when migrating from `sourceVersion` (any version when nil).
    public init(
        entity: String, from sourceVersion: String? = nil,
        _ body: @escaping (MigratingObject, MigrationWriter) throws -> Void
    ) {
        self.entityName = entity
        self.sourceVersion = sourceVersion
        self.body = body
    }

    func covers(_ entity: String, from version: String) -> Bool {
        entityName == entity && (sourceVersion == nil || sourceVersion == version)
    }
}

/// One object being migrated, as a custom step sees it.
public final class MigratingObject {
    /// The entity in the newer version.
    public let entityName: String
    /// The object's primary key in the migrated store.
    public let primaryKey: Int64
    /// The entity's name in the older version.
    public let sourceEntityName: String
    /// The object's values in the older version: attributes decoded (through their transformer
    /// at their old place), relationships as the primary keys their objects have in the migrated
    /// store (to-one: an `Int64`; to-many: a sorted `[Int64]`).
    public let sourceValues: [String: Any]
    /// The object's values in the newer version as the inferred mapping left them; assign
    /// through the subscript to change them.
    public private(set) var values: [String: Any]
    var changedKeys: Set<String> = []

    init(
        entityName: String, primaryKey: Int64, sourceEntityName: String, sourceValues: [String: Any],
        values: [String: Any]
    ) {
        self.entityName = entityName
        self.primaryKey = primaryKey
        self.sourceEntityName = sourceEntityName
        self.sourceValues = sourceValues
        self.values = values
    }

    /// A value of the newer version: an attribute, or a to-one relationship as a primary key.
    public subscript(key: String) -> Any? {
        get { values[key] }
        set {
            values[key] = newValue
            changedKeys.insert(key)
        }
    }
}

/// What a custom step may do beyond changing its object.
public final class MigrationWriter {
    let insertObject: (String, [String: Any]) throws -> Int64

    init(insert: @escaping (String, [String: Any]) throws -> Int64) {
        insertObject = insert
    }

    /// Inserts an object of `entity` (of the newer version) with attribute values and to-one
    /// relationships given as primary keys; attributes left out get their default.
    ///
    /// - returns: the new object's primary key.
    /// - throws: ``ObjectGraphError`` 134110 when the entity or a key is unknown or a value has the wrong type.
    @discardableResult
    public func insert(entity: String, values: [String: Any]) throws -> Int64 {
        try insertObject(entity, values)
    }
}

/// What a migration did to one store: every object carried over, inserted, or dropped with a reason.
public struct MigrationReport: Sendable, CustomStringConvertible {
    /// One migration between two consecutive versions.
    public struct Hop: Sendable {
        /// The version migrated from.
        public var from: String
        /// The version migrated to.
        public var to: String
        /// What the step changed, in the model's words.
        public var changes: [MigrationChange]
    }

    /// The store's file name.
    public var storeName: String
    /// The migrations run, oldest version first.
    public var hops: [Hop] = []
    /// Entity (newer name) → objects carried over from the store.
    public var carried: [String: Int] = [:]
    /// Entity → objects inserted by custom steps.
    public var inserted: [String: Int] = [:]
    /// What was left behind, each with its reason ("Post.content removed from the model: 3 values").
    public var dropped: [String] = []

    /// Where every object went: carried over, inserted by custom steps, or dropped with the reason.
    public var accounting: [String] {
        carried.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "carried \($0.value) \($0.key)" }
            + inserted.sorted { $0.key < $1.key }.map { "inserted \($0.value) \($0.key)" }
            + dropped.map { "dropped \($0)" }
    }

    public var description: String {
        var lines = ["migrated \(storeName): " + hops.map { "\($0.from) → \($0.to)" }.joined(separator: ", ")]
        for hop in hops { lines += hop.changes.map { "  \(hop.to): \($0)" } }
        lines += accounting.map { "  \($0)" }
        return lines.joined(separator: "\n")
    }
}
