import Foundation
import GRDB

/// What a SQLite store says about itself without a model: its type and UUID from
/// `Z_METADATA`, the model versions it records, and its entities with their row counts
/// (entities from `Z_PRIMARYKEY`, rows counted by `Z_ENT` in the root entity's table).
///
/// For example:
///
/// ```swift
/// let summary = try StoreSummary(contentsOf: storeURL)
/// for entity in summary.entities { print(entity.name, entity.rowCount ?? 0) }
/// ```
public struct StoreSummary: Sendable, Equatable {
    /// One entity of the store.
    public struct Entity: Sendable, Equatable {
        /// The name `Z_PRIMARYKEY` gives the entity.
        public var name: String
        /// The entity number (`Z_ENT`).
        public var number: Int
        /// The parent's name, nil for a root entity.
        public var parentName: String?
        /// Rows of exactly this entity (not its sub-entities); nil when its table is missing.
        public var rowCount: Int?
    }

    /// `NSStoreType` (`SQLite` for stores of Core Data and ObjectGraph).
    public var storeType: String?
    /// `Z_METADATA.Z_UUID`.
    public var identifier: String?
    /// The model version identifiers the store records (`NSStoreModelVersionIdentifiers`).
    public var versionIdentifiers: [String]
    /// Entities by number.
    public var entities: [Entity]

    /// Reads the summary of the store at `url` through a read-only connection.
    ///
    /// - throws: ``ObjectGraphError`` 134080 when the file is not a SQLite store.
    /// - note: reading a store in WAL mode makes SQLite create its `-wal` and `-shm` files beside it.
    public init(contentsOf url: URL) throws {
        self = try StoreMetadataReader.reading(url) { db in
            let metadata = try StoreMetadataReader.metadata(db, schema: "main")
            guard try db.tableExists("Z_PRIMARYKEY"), try db.tableExists("Z_METADATA") else {
                throw ObjectGraphError(
                    code: .storeOpenFailed,
                    message:
                        "'\(url.lastPathComponent)' is a SQLite database but not a store "
                            + "(no Z_PRIMARYKEY or Z_METADATA table)"
                )
            }
            var listed: [(name: String, number: Int, parent: Int)] = []
            for row in try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT") {
                // Read leniently: a damaged Z_PRIMARYKEY row is left out of the summary, not trapped on.
                guard let number = Int.fromDatabaseValue(row[0]), let name = String.fromDatabaseValue(row[1]) else {
                    continue
                }
                listed.append((name, number, Int.fromDatabaseValue(row[2]) ?? 0))
            }
            let byNumber = Dictionary(listed.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            var entities: [Entity] = []
            for entity in listed {
                // The root is found by following parents; a loop in a damaged store stops the walk.
                var root = entity
                var seen: Set<Int> = [root.number]
                while let parent = byNumber[root.parent], seen.insert(parent.number).inserted { root = parent }
                let table = "Z" + root.name.uppercased()
                let count =
                    try db.tableExists(table)
                    ? try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM \"\(table)\" WHERE Z_ENT = ?", arguments: [entity.number])
                    : nil
                entities.append(
                    Entity(
                        name: entity.name, number: entity.number, parentName: byNumber[entity.parent]?.name,
                        rowCount: count))
            }
            return StoreSummary(
                storeType: metadata[StoreMetadataKey.storeType] as? String,
                identifier: try String.fetchOne(db, sql: "SELECT Z_UUID FROM Z_METADATA"),
                versionIdentifiers: metadata[StoreMetadataKey.versionIdentifiers] as? [String] ?? [],
                entities: entities)
        }
    }

    init(storeType: String?, identifier: String?, versionIdentifiers: [String], entities: [Entity]) {
        self.storeType = storeType
        self.identifier = identifier
        self.versionIdentifiers = versionIdentifiers
        self.entities = entities
    }
}
