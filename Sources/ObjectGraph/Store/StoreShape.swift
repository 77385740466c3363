import Foundation
import GRDB

/// What a SQLite store holds, read from its schema alone: the entities its `Z_PRIMARYKEY`
/// table names, and the columns of its tables (`PRAGMA table_info`).
///
/// This is how a store that ObjectGraph did not write (one made by Apple's Core Data, whose
/// metadata holds Apple's private version hashes) is checked against a model. The rule is
/// ObjectGraph's own and structural, not Apple's hash:
///
/// - every entity of the model (or of the store's configuration) is listed in `Z_PRIMARYKEY`
///   with the same entity number and the same parent, and the store lists no other entity;
///   an entity may be listed under its renaming identifier (`elementID`), as Core Data leaves
///   the old name there when a migration renames an entity;
/// - each root entity's table exists and has exactly the columns the model would create:
///   `Z_PK`, `Z_ENT`, `Z_OPT`, one column per stored attribute (with Core Data's column type),
///   one per to-one relationship, and a `Z<n>_<REL>` entity column for a to-one relationship
///   whose destination has sub-entities;
/// - each many-to-many (or inverse-less to-many) relationship has its join table with exactly its
///   two columns, named as Core Data names them;
/// - the store has no other `Z` table (`Z_MODELCACHE` aside): a table no entity or relationship
///   maps to holds rows nothing would read, so the store does not fit.
///
/// What the schema cannot show is not compared: integer widths (all `INTEGER`), optionality,
/// defaults, validation rules, delete rules and transformer names.
///
/// For example, to find which version of a model a store was made with:
///
/// ```swift
/// let shape = try StoreShape(contentsOf: storeURL)
/// let version = versions.first { shape.differences(from: $0).isEmpty }
/// ```
public struct StoreShape: Sendable, Equatable {
    /// One entity as `Z_PRIMARYKEY` lists it.
    public struct Entity: Sendable, Equatable {
        public var name: String
        public var number: Int
        /// The parent's entity number, 0 for a root entity.
        public var parentNumber: Int
    }

    /// One column of a table, with the type it was declared with (`VARCHAR`, `INTEGER`, ...).
    public struct Column: Sendable, Equatable {
        public var name: String
        public var type: String
    }

    /// Entities by name.
    public var entities: [String: Entity]
    /// Tables by name (only ObjectGraph's and Core Data's `Z` tables), each with its columns in order.
    public var tables: [String: [Column]]

    public init(entities: [String: Entity], tables: [String: [Column]]) {
        self.entities = entities
        self.tables = tables
    }

    /// Reads the shape of the store at `url` without changing it.
    ///
    /// - throws: ``ObjectGraphError`` 134080 when the file is not a SQLite database.
    public init(contentsOf url: URL) throws {
        var configuration = Configuration()
        configuration.readonly = true
        self = try wrapStoreErrors(.storeOpenFailed, "cannot read '\(url.lastPathComponent)'") {
            let queue = try DatabaseQueue(path: url.path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in try StoreShape(db, schema: "main") }
        }
    }

    /// Reads the shape of the store attached as `schema` on `db`.
    init(_ db: Database, schema: String) throws {
        let quoted = "\"\(schema)\""
        let names = try String.fetchAll(
            db, sql: "SELECT name FROM \(quoted).sqlite_master WHERE type = 'table' AND name LIKE 'Z%'")
        var tables: [String: [Column]] = [:]
        for name in names {
            guard let quotedName = SchemaObject.quoted(name) else { continue }
            let rows = try Row.fetchAll(db, sql: "PRAGMA \(quoted).table_info(\(quotedName))")
            tables[name] = rows.map { Column(name: $0["name"] ?? "", type: ($0["type"] as String? ?? "").uppercased()) }
        }
        var entities: [String: Entity] = [:]
        if tables["Z_PRIMARYKEY"] != nil {
            // Read through DatabaseValue: GRDB's typed subscripts trap on a value of another type.
            // A row that cannot be read is left out, so its entity shows as a difference.
            for row in try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER FROM \(quoted).Z_PRIMARYKEY") {
                let number = row[0] as DatabaseValue, name = row[1] as DatabaseValue, parent = row[2] as DatabaseValue
                guard case .string(let text) = name.storage, case .int64(let entityNumber) = number.storage,
                      let entityNumber = Int(exactly: entityNumber) else { continue }
                let parentNumber: Int
                switch parent.storage {
                case .null: parentNumber = 0
                case .int64(let value): parentNumber = Int(clamping: value)
                default: parentNumber = -1
                }
                entities[text] = Entity(name: text, number: entityNumber, parentNumber: parentNumber)
            }
        }
        self.init(entities: entities, tables: tables)
    }

    /// The shape `model` would give a new store holding the entities of `configuration`
    /// (all entities when nil).
    public init(model: ManagedObjectModel, configuration: String? = nil) {
        self.init(model: model, entities: model.entities(forConfiguration: configuration))
    }

    init(model: ManagedObjectModel, entities members: [EntityDescription]) {
        var entities: [String: Entity] = [:]
        for entity in members {
            entities[entity.name] = Entity(
                name: entity.name, number: entity.entityNumber, parentNumber: entity.superentity?.entityNumber ?? 0)
        }
        var tables: [String: [Column]] = [:]
        var seenRoots: Set<String> = []
        for root in members.map(\.rootEntity) where seenRoots.insert(root.name).inserted {
            tables[root.tableName] = SQLiteSchema.columns(of: root, in: model).map {
                Column(name: $0.name, type: $0.type)
            }
        }
        for entity in members {
            for relationship in entity.declaredRelationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: model)
                guard join.isOwner else { continue }
                tables[join.name] = ([join.sourceColumn, join.destinationColumn] + join.orderColumns).map {
                    Column(name: $0, type: "INTEGER")
                }
            }
        }
        tables["Z_PRIMARYKEY"] = [Column(name: "Z_ENT", type: "INTEGER"), Column(name: "Z_NAME", type: "VARCHAR"),
                                  Column(name: "Z_SUPER", type: "INTEGER"), Column(name: "Z_MAX", type: "INTEGER")]
        tables["Z_METADATA"] = [
            Column(name: "Z_VERSION", type: "INTEGER"), Column(name: "Z_UUID", type: "VARCHAR(255)"),
                                Column(name: "Z_PLIST", type: "BLOB")]
        self.init(entities: entities, tables: tables)
    }

    // MARK: - Comparing

    /// How this store differs from what `model` would create for `configuration`; empty
    /// when the store fits the model.
    public func differences(from model: ManagedObjectModel, configuration: String? = nil) -> [StoreShapeDifference] {
        differences(from: model, entities: model.entities(forConfiguration: configuration))
    }

    func differences(from model: ManagedObjectModel, entities members: [EntityDescription]) -> [StoreShapeDifference] {
        let expected = StoreShape(model: model, entities: members)
        var found: [StoreShapeDifference] = []
        var matched: Set<String> = []
        for entity in members.sorted(by: { $0.name < $1.name }) {
            // Core Data keeps an entity's old name in Z_PRIMARYKEY when a migration renames it.
            guard let stored = entities[entity.name] ?? entity.elementID.flatMap({ entities[$0] }),
                  let wanted = expected.entities[entity.name] else {
                found.append(StoreShapeDifference(entity: entity.name, kind: .entityOnlyInModel))
                continue
            }
            matched.insert(stored.name)
            if stored.number != wanted.number || stored.parentNumber != wanted.parentNumber {
                found.append(StoreShapeDifference(entity: entity.name, kind: .entityPlaceDiffers(
                    store: "number \(stored.number), parent \(stored.parentNumber)",
                    model: "number \(wanted.number), parent \(wanted.parentNumber)")))
            }
        }
        for name in entities.keys.sorted() where !matched.contains(name) {
            found.append(StoreShapeDifference(entity: name, kind: .entityOnlyInStore))
        }
        var seenRoots: Set<String> = []
        for root in members.map(\.rootEntity) where seenRoots.insert(root.name).inserted {
            found += tableDifferences(root, expected: expected, model: model)
        }
        var joinTables: Set<String> = []
        for entity in members {
            for relationship in entity.declaredRelationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: model)
                guard join.isOwner else { continue }
                joinTables.insert(join.name)
                let columns = Set((tables[join.name] ?? []).map(\.name))
                let wanted = Set([join.sourceColumn, join.destinationColumn] + join.orderColumns)
                if !columns.isSuperset(of: wanted) {
                    found.append(StoreShapeDifference(entity: entity.name, property: relationship.name,
                            kind: .propertyOnlyInModel("many-to-many join table \(join.name)")))
                }
                for column in (tables[join.name] ?? []).map(\.name).sorted() where !wanted.contains(column) {
                    let kind: StoreShapeDifference.Kind = Self.orderColumnOwner(column) == nil
                        ? .propertyOnlyInStore(column: column, table: join.name)
                        : .orderColumnInStore(column: column, table: join.name)
                    found.append(StoreShapeDifference(entity: entity.name, property: relationship.name, kind: kind))
                }
            }
        }
        // Every table must be read by something: a table the model would not make (a join table
        // named after the other side, an entity the store no longer lists) holds data no fetch sees.
        let known = Set(expected.tables.keys).union(Self.coreDataTables)
        for name in tables.keys.sorted() where !known.contains(name) {
            found.append(StoreShapeDifference(entity: name, kind: .tableOnlyInStore(name)))
        }
        return found
    }

    /// The uppercased name after `Z_FOK_` of a column Core Data adds to keep the order of an
    /// ordered to-many relationship (`Z_FOK_POST` beside `ZPOST`; `Z_FOK_3ASSETS` in a join table).
    static func orderColumnOwner(_ column: String) -> String? {
        column.hasPrefix("Z_FOK_") ? String(column.dropFirst("Z_FOK_".count)) : nil
    }

    /// Tables Core Data keeps beside the entities' and that hold no object: the model it was
    /// made with (`Z_MODELCACHE`), read by nothing here.
    static let coreDataTables: Set<String> = ["Z_MODELCACHE"]

    private func tableDifferences(
        _ root: EntityDescription, expected: StoreShape, model: ManagedObjectModel
    ) -> [StoreShapeDifference] {
        guard let stored = tables[root.tableName] else {
            // An entity already reported missing from Z_PRIMARYKEY needs no second line.
            let listed = entities[root.name] ?? root.elementID.flatMap { entities[$0] }
            return listed == nil ? [] : [StoreShapeDifference(entity: root.name, kind: .tableMissing(root.tableName))]
        }
        let wanted = expected.tables[root.tableName] ?? []
        let storedByName = Dictionary(stored.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let wantedByName = Dictionary(wanted.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let owners = SQLiteSchema.columnOwners(of: root, in: model)
        var found: [StoreShapeDifference] = []
        for column in wanted {
            let owner = owners[column.name]
            guard let actual = storedByName[column.name] else {
                found.append(StoreShapeDifference(entity: owner?.entity ?? root.name, property: owner?.property,
                                                  kind: .propertyOnlyInModel(owner?.shape ?? "column \(column.name)")))
                continue
            }
            if !SQLiteSchema.sameColumnType(actual.type, column.type) {
                found.append(StoreShapeDifference(entity: owner?.entity ?? root.name, property: owner?.property,
                        kind: .columnTypeDiffers(column: column.name, store: actual.type, model: column.type)))
            }
        }
        for column in stored where wantedByName[column.name] == nil {
            if let ordered = Self.orderColumnOwner(column.name) {
                // Z_FOK_<REL> beside the to-one <REL>: its inverse is an ordered to-many.
                let owner = owners["Z" + ordered]
                found.append(StoreShapeDifference(entity: owner?.entity ?? root.name,
                        property: owner?.property ?? ordered.lowercased(),
                        kind: .orderColumnInStore(column: column.name, table: root.tableName)))
                continue
            }
            found.append(
                StoreShapeDifference(
                    entity: root.name, property: SQLiteSchema.propertyName(ofColumn: column.name),
                                              kind: .propertyOnlyInStore(column: column.name, table: root.tableName)))
        }
        return found
    }
}

extension StoreShape {
    /// The one version among `fitting` (the versions whose layout the store has) that made the
    /// store: the one its metadata names (`recorded`), else the only one.
    ///
    /// - returns: nil when none fits.
    /// - throws: ``ObjectGraphError`` 134100 when several fit and the metadata names none of
    ///   them: which one wrote the store cannot be told, and guessing could read or migrate it wrong.
    static func versionThatMade(
        among fitting: [ManagedObjectModel], recorded: Set<String>
    ) throws -> ManagedObjectModel? {
        if let named = fitting.last(where: { recorded.contains($0.versionIdentifier) }) { return named }
        guard fitting.count > 1 else { return fitting.first }
        let names = fitting.map { "'\($0.versionIdentifier)'" }.joined(separator: ", ")
        throw ObjectGraphError(
            code: .incompatibleVersionHash,
            message: "the store fits several versions of the model (\(names)): they lay out the same tables "
                + "and columns, and the store's metadata names none of them, so which one made it cannot be "
                + "told; open it with the one version that made it")
    }

    /// Refuses a migration that reads only the tables `read` of this store while others hold
    /// rows: they would be left behind, unread, or dropped without being counted as lost.
    ///
    /// - throws: ``ObjectGraphError`` 134110 naming each such table.
    func requireEveryTableRead(_ read: [String], storeName: String) throws {
        let unread = tables.keys.filter { !read.contains($0) && !Self.coreDataTables.contains($0) }.sorted()
        guard !unread.isEmpty else { return }
        throw ObjectGraphError(
            code: .migrationFailed,
            message: "the migration of '\(storeName)' would leave "
                + (unread.count == 1 ? "table \(unread[0])" : "tables \(unread.joined(separator: ", "))")
                + " unread: the store's version does not store anything there; nothing was changed")
    }
}

/// One way a store differs from a model, naming the entity and property.
public struct StoreShapeDifference: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The model has the entity; the store does not.
        case entityOnlyInModel
        /// The store lists the entity; the model does not have it.
        case entityOnlyInStore
        /// Both have the entity, with another number or parent.
        case entityPlaceDiffers(store: String, model: String)
        /// `Z_PRIMARYKEY` lists the entity but its table is missing.
        case tableMissing(String)
        /// The model has the property (described); the store has no column or table for it.
        case propertyOnlyInModel(String)
        /// The store has a column the model would not create.
        case propertyOnlyInStore(column: String, table: String)
        /// Both have the column, declared with different types.
        case columnTypeDiffers(column: String, store: String, model: String)
        /// The store has a table the model would not create, so its rows would never be read.
        case tableOnlyInStore(String)
        /// The store keeps the order of an ordered to-many relationship in this column.
        case orderColumnInStore(column: String, table: String)
    }

    public var entity: String
    /// The property concerned (for a column only in the store, the lowercased column name without `Z`).
    public var property: String?
    public var kind: Kind

    public init(entity: String, property: String? = nil, kind: Kind) {
        self.entity = entity
        self.property = property
        self.kind = kind
    }

    public var description: String {
        let place = property.map { "\(entity).\($0)" } ?? "entity \(entity)"
        switch kind {
        case .entityOnlyInModel: return "entity \(entity) is in the model but not in the store"
        case .entityOnlyInStore: return "entity \(entity) is in the store but not in the model"
        case .entityPlaceDiffers(let store, let model):
            return "entity \(entity) is \(store) in the store but \(model) in the model"
        case .tableMissing(let table): return "entity \(entity) has no table \(table) in the store"
        case .propertyOnlyInModel(let shape): return "\(place) is in the model (\(shape)) but not in the store"
        case .propertyOnlyInStore(let column, let table):
            return "\(place) is in the store (column \(column) of \(table)) but not in the model"
        case .columnTypeDiffers(let column, let store, let model):
            return "\(place) is stored as \(store) (column \(column)) but the model makes it \(model)"
        case .orderColumnInStore(let column, let table):
            return "\(place): column \(column) of \(table) keeps the order of an ordered to-many relationship, "
                + "but the model's relationship is not ordered: reading it so would lose that order"
        case .tableOnlyInStore(let table):
            return "table \(table) is in the store but the model stores nothing there: its rows would go unread"
        }
    }
}
