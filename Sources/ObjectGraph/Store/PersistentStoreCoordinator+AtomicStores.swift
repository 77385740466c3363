import Foundation
import GRDB

// Atomic stores live in an in-memory schema of the coordinator's connection while open, so
// fetching, saving and validation work as for SQLite; their files are read when added and
// rewritten whole by every transaction that changes something.
extension PersistentStoreCoordinator {
    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registeredClasses: [String: AtomicStore.Type] = [:]

    /// Makes ``addPersistentStore(type:configuration:at:options:)`` open stores of `type`
    /// with `storeClass`, as `NSPersistentStoreCoordinator.registerStoreClass(_:forStoreType:)`.
    public static func registerStoreClass(_ storeClass: AtomicStore.Type, forStoreType type: StoreType) {
        registryLock.lock()
        defer { registryLock.unlock() }
        registeredClasses[type.rawValue] = storeClass
    }

    static func atomicStoreClass(for type: StoreType, url: URL?, options: StoreOptions) throws -> AtomicStore.Type {
        let storeClass: AtomicStore.Type? = {
            switch type {
            case .binary: return BinaryStore.self
            case .xml: return XMLStore.self
            default:
                registryLock.lock()
                defer { registryLock.unlock() }
                return registeredClasses[type.rawValue]
            }
        }()
        guard let storeClass else {
            throw ObjectGraphError(
                code: .storeOpenFailed, message: "no store class is registered for store type '\(type.rawValue)'")
        }
        guard let url else {
            throw ObjectGraphError(code: .storeOpenFailed, message: "a \(type.rawValue) store needs a file URL")
        }
        if options.mustExist, !FileManager.default.fileExists(atPath: url.path) {
            throw ObjectGraphError.missingStore(url.path)
        }
        return storeClass
    }

    /// Reads an atomic store's file into its fresh schema, or creates the file.
    func openAtomicStore(
        _ store: PersistentStore, storeClass: AtomicStore.Type, url: URL, options: StoreOptions
    ) throws {
        let atomic = storeClass.init(url: url, model: managedObjectModel, configurationName: store.configurationName)
        atomic.fileMode = options.fileMode
        do {
            if FileManager.default.fileExists(atPath: url.path) {
                try atomic.load()
                guard let identifier = atomic.metadata[StoreMetadataKey.storeUUID] as? String, !identifier.isEmpty
                else {
                    throw atomic.damaged("its metadata has no \(StoreMetadataKey.storeUUID)")
                }
                store.identifier = identifier
                store.metadata = atomic.metadata
                if !options.ignoresVersioning { try checkCompatibility(of: store, name: url.lastPathComponent) }
                let nodes = atomic.cacheNodes()
                // The schema's Z_METADATA mirrors the file's, so reloadMetadata() reads the same.
                let plist = try PropertyListSerialization.data(
                    fromPropertyList: store.metadata, format: .binary, options: 0)
                try write { db in
                    try insert(nodes, into: store, db, from: url.lastPathComponent)
                    try db.execute(sql: "UPDATE \(store.qualified("Z_METADATA")) SET Z_UUID = ?, Z_PLIST = ?",
                                   arguments: [identifier, plist])
                }
            } else {
                store.metadata[StoreMetadataKey.storeType] = store.type.rawValue
                atomic.metadata = store.metadata
                try atomic.save()
            }
        } catch {
            try? detach(store)
            throw error
        }
        store.atomicStore = atomic
    }

    /// Writes every atomic store's file from its schema (inside the running transaction).
    func saveAtomicStores(_ db: Database) throws {
        for store in persistentStores {
            guard let atomic = store.atomicStore else { continue }
            atomic.replaceCacheNodes(try cacheNodes(of: store, db, references: atomic))
            atomic.metadata = store.metadata
            try atomic.save()
        }
    }

    // MARK: - Rows and nodes

    /// Every row of a store as cache nodes, relationships included.
    func cacheNodes(
        of store: PersistentStore, _ db: Database, references: AtomicStore?
    ) throws -> [AtomicStoreCacheNode] {
        var nodes: [AtomicStoreCacheNode] = []
        var byKey: [Int: [Int64: AtomicStoreCacheNode]] = [:]
        var pending: [(AtomicStoreCacheNode, EntityDescription, [(RelationshipDescription, Int64)])] = []
        for root in store.rootEntities {
            let rows = try Row.fetchAll(
                db,
                sql:
                    "SELECT \(root.selectColumns.joined(separator: ", ")) FROM "
                        + "\(store.qualified(root.tableName)) ORDER BY Z_PK"
            )
            for row in rows {
                let primaryKey = try ManagedObjectContext.integer(row, 0, "Z_PK", root: root, store: store)
                let entityNumber = try ManagedObjectContext.integer(row, 1, "Z_ENT", root: root, store: store)
                guard let entity = Int(exactly: entityNumber).flatMap(managedObjectModel.entity(number:)),
                    entity.rootEntity === root
                else {
                    throw ObjectGraphError.undecodable(
                        "\(entityNumber) is not the number of \(root.name) or of one of its sub-entities", store: store,
                        entity: root.name, attribute: "Z_ENT", primaryKey: primaryKey)
                }
                if let references { _ = references.referenceObject(for: entity, primaryKey: primaryKey) }
                let node = AtomicStoreCacheNode(
                    objectID: ObjectID(
                        entityName: entity.name, storeIdentifier: store.identifier,
                        primaryKey: primaryKey, temporaryNumber: nil))
                for column in entity.storedColumns {
                    do {
                        if let value = try StoredValues.value(row[column.index], type: column.type) {
                            node.propertyCache[column.name] = value
                        }
                    } catch {
                        throw ObjectGraphError.undecodable(
                            error, store: store, entity: entity.name, attribute: column.name, primaryKey: primaryKey)
                    }
                }
                for relationship in entity.relationships where relationship.isToMany {
                    node.propertyCache[relationship.name] = [AtomicStoreCacheNode]()
                }
                var toOnes: [(RelationshipDescription, Int64)] = []
                for (relationship, index) in entity.storedToOne {
                    if let key = try ManagedObjectContext.optionalInteger(
                        row, index, relationship.columnName, root: root, store: store)
                    {
                        toOnes.append((relationship, key))
                    }
                }
                pending.append((node, entity, toOnes))
                byKey[root.entityNumber, default: [:]][primaryKey] = node
                nodes.append(node)
            }
        }
        func node(_ key: Int64, of relationship: RelationshipDescription) -> AtomicStoreCacheNode? {
            managedObjectModel.entity(named: relationship.destinationEntityName).flatMap {
                byKey[$0.rootEntity.entityNumber]?[key]
            }
        }
        for (source, entity, toOnes) in pending {
            for (relationship, key) in toOnes {
                // A conversion carries every link or says which one it cannot.
                guard let destination = node(key, of: relationship) else {
                    throw ObjectGraphError.undecodable(
                        "no \(relationship.destinationEntityName) row \(key) to point to", store: store,
                        entity: entity.name, attribute: relationship.name, primaryKey: source.objectID.primaryKey ?? 0)
                }
                source.propertyCache[relationship.name] = destination
                if let inverse = SQLiteSchema.inverse(of: relationship, in: managedObjectModel), inverse.isToMany {
                    destination.propertyCache[inverse.name] =
                        (destination.propertyCache[inverse.name] as? [AtomicStoreCacheNode] ?? []) + [source]
                }
            }
        }
        // Many-to-many (and inverse-less to-many) links, once per declaring entity and relationship.
        for entity in store.entities {
            for relationship in entity.declaredRelationships
            where SQLiteSchema.usesJoinTable(relationship, in: managedObjectModel) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: managedObjectModel)
                let links = try Row.fetchAll(
                    db,
                    sql: "SELECT \(join.sourceColumn), \(join.destinationColumn) FROM \(store.qualified(join.name))")
                for link in links {
                    let sourceKey = try ManagedObjectContext.integer(
                        link, 0, join.sourceColumn, root: entity.rootEntity, store: store)
                    let destinationKey = try ManagedObjectContext.integer(
                        link, 1, join.destinationColumn, root: entity.rootEntity, store: store)
                    guard let source = byKey[entity.rootEntity.entityNumber]?[sourceKey],
                        let destination = node(destinationKey, of: relationship)
                    else {
                        throw ObjectGraphError.undecodable(
                            "the link \(sourceKey) → \(destinationKey) in \(join.name) points to no row",
                            store: store, entity: entity.name, attribute: relationship.name, primaryKey: sourceKey)
                    }
                    // Each declaring entity reads the whole join table; links of its siblings are theirs.
                    guard managedObjectModel.entity(named: source.objectID.entityName)?.isKind(of: entity) == true
                    else { continue }
                    source.propertyCache[relationship.name] =
                        (source.propertyCache[relationship.name] as? [AtomicStoreCacheNode] ?? []) + [destination]
                }
            }
        }
        try orderLists(of: nodes, byKey: byKey, in: store, db)
        return nodes
    }

    /// Puts the destinations of ordered relationships in their stored order (`Z_FOK_`).
    private func orderLists(
        of nodes: [AtomicStoreCacheNode], byKey: [Int: [Int64: AtomicStoreCacheNode]], in store: PersistentStore,
        _ db: Database
    ) throws {
        for entity in store.entities {
            for relationship in entity.declaredRelationships {
                guard let place = SQLiteSchema.orderPlace(of: relationship, of: entity, in: managedObjectModel)
                else { continue }
                var rank: [Int64: [Int64: Int]] = [:]
                let rows = try Row.fetchAll(
                    db, sql: "SELECT \(place.owner), \(place.member) FROM \(store.qualified(place.table)) "
                        + "WHERE \(place.order) IS NOT NULL ORDER BY \(place.owner), \(place.order), \(place.member)")
                for row in rows {
                    guard case .int64(let owner) = (row[0] as DatabaseValue).storage,
                          case .int64(let member) = (row[1] as DatabaseValue).storage else { continue }
                    rank[owner, default: [:]][member] = rank[owner]?.count ?? 0
                }
                for (owner, ranks) in rank {
                    guard let node = byKey[entity.rootEntity.entityNumber]?[owner],
                          let list = node.propertyCache[relationship.name] as? [AtomicStoreCacheNode] else { continue }
                    // Members without an order value keep their place after the ordered ones.
                    node.propertyCache[relationship.name] = list.enumerated().sorted { first, second in
                        let left = first.element.objectID.primaryKey.flatMap { ranks[$0] } ?? Int.max
                        let right = second.element.objectID.primaryKey.flatMap { ranks[$0] } ?? Int.max
                        return (left, first.offset) < (right, second.offset)
                    }.map(\.element)
                }
            }
        }
    }

    /// Writes nodes into a store's empty schema, keeping their primary keys.
    ///
    /// - throws: ``ObjectGraphError`` naming the object and property when a node does not
    ///   fit the model (an unknown entity, a value of the wrong type, a dangling reference).
    func insert(_ nodes: [AtomicStoreCacheNode], into store: PersistentStore, _ db: Database, from file: String) throws
    {
        func damaged(_ problem: String) -> ObjectGraphError {
            ObjectGraphError(code: .storeOpenFailed, message: "'\(file)' does not fit the model: \(problem)")
        }
        var keys: [ObjectIdentifier: Int64] = [:]
        var seen: Set<String> = []
        for node in nodes {
            guard let entity = managedObjectModel.entity(named: node.objectID.entityName),
                store.entities.contains(where: { $0 === entity }),
                !entity.isAbstract
            else {
                throw damaged(
                    "an object of entity '\(node.objectID.entityName)', which this store's configuration does not hold"
                )
            }
            guard let key = node.objectID.primaryKey, key > 0,
                seen.insert("\(entity.rootEntity.entityNumber)/\(key)").inserted
            else {
                throw damaged("\(entity.name) object \(node.objectID) has no identity of its own")
            }
            keys[ObjectIdentifier(node)] = key
        }
        func key(
            _ value: Any?, _ relationship: RelationshipDescription, of node: AtomicStoreCacheNode
        ) throws -> Int64? {
            guard let value else { return nil }
            guard let destination = value as? AtomicStoreCacheNode, let key = keys[ObjectIdentifier(destination)],
                let entity = managedObjectModel.entity(named: destination.objectID.entityName),
                entity.isKind(of: managedObjectModel.entity(named: relationship.destinationEntityName) ?? entity)
            else {
                throw damaged(
                    "\(node.objectID.entityName).\(relationship.name) of \(node.objectID) points at no "
                        + "\(relationship.destinationEntityName) object of the store"
                )
            }
            return key
        }
        for node in nodes {
            guard let entity = managedObjectModel.entity(named: node.objectID.entityName),
                let primaryKey = keys[ObjectIdentifier(node)]
            else { continue }
            for name in node.propertyCache.keys
            where entity.attribute(named: name) == nil && entity.relationship(named: name) == nil {
                throw damaged("\(entity.name) has no property '\(name)' (object \(node.objectID))")
            }
            var arguments: [DatabaseValue] = [
                primaryKey.databaseValue, entity.entityNumber.databaseValue, 1.databaseValue,
            ]
            for column in entity.storedColumns {
                let value = node.propertyCache[column.name]
                let stored = StoredValues.databaseValue(value, type: column.type)
                if stored.isNull, let value, !(value is NSNull) {
                    throw damaged(
                        "\(entity.name).\(column.name) of \(node.objectID) is not a \(column.type.rawValue) value")
                }
                arguments.append(stored)
            }
            for (relationship, _) in entity.storedToOne {
                arguments.append(
                    try key(node.propertyCache[relationship.name], relationship, of: node)?.databaseValue ?? .null)
            }
            let columns =
                ["Z_PK", "Z_ENT", "Z_OPT"] + entity.storedColumns.map(\.columnName)
                + entity.storedToOne.map(\.0.columnName)
            try db.execute(
                sql:
                    "INSERT INTO \(store.qualified(entity.rootEntity.tableName)) (\(columns.joined(separator: ", "))) "
                    + "VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))",
                arguments: StatementArguments(arguments))
        }
        // To-many sides: join rows, and the to-one column when only the to-many side was given.
        for node in nodes {
            guard let entity = managedObjectModel.entity(named: node.objectID.entityName),
                let primaryKey = keys[ObjectIdentifier(node)]
            else { continue }
            for relationship in entity.relationships where relationship.isToMany {
                guard let value = node.propertyCache[relationship.name] else { continue }
                guard let destinations = value as? [AtomicStoreCacheNode] else {
                    throw damaged("\(entity.name).\(relationship.name) of \(node.objectID) is not a list of objects")
                }
                let destinationKeys = try destinations.compactMap { try key($0, relationship, of: node) }
                if SQLiteSchema.usesJoinTable(relationship, in: managedObjectModel) {
                    let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: managedObjectModel)
                    for destinationKey in destinationKeys {
                        try db.execute(
                            sql:
                                "INSERT OR IGNORE INTO \(store.qualified(join.name)) (\(join.sourceColumn), "
                                    + "\(join.destinationColumn)) VALUES (?, ?)",
                            arguments: [primaryKey, destinationKey])
                    }
                } else if let inverse = SQLiteSchema.inverse(of: relationship, in: managedObjectModel),
                    let destination = managedObjectModel.entity(named: relationship.destinationEntityName)
                {
                    for destinationKey in destinationKeys {
                        try db.execute(
                            sql:
                                "UPDATE \(store.qualified(destination.rootEntity.tableName)) SET "
                                    + "\(inverse.columnName) = ? WHERE Z_PK = ?",
                            arguments: [primaryKey, destinationKey])
                    }
                }
                if let place = SQLiteSchema.orderPlace(of: relationship, of: entity, in: managedObjectModel) {
                    for (position, destinationKey) in destinationKeys.enumerated() {
                        try db.execute(
                            sql: "UPDATE \(store.qualified(place.table)) SET \(place.order) = ? "
                                + "WHERE \(place.owner) = ? AND \(place.member) = ?",
                            arguments: [position + 1, primaryKey, destinationKey])
                    }
                }
            }
        }
        for root in store.rootEntities {
            try db.execute(
                sql:
                    "UPDATE \(store.qualified("Z_PRIMARYKEY")) SET Z_MAX = MAX(Z_MAX, (SELECT "
                        + "COALESCE(MAX(Z_PK), 0) FROM "
                    + "\(store.qualified(root.tableName)))) WHERE Z_ENT = ?", arguments: [root.entityNumber])
        }
    }

    // MARK: - Removing and migrating stores

    /// Takes a store out of the coordinator, as `removePersistentStore(_:)`. Objects of
    /// contexts that came from it can no longer be read or saved.
    public func removePersistentStore(_ store: PersistentStore) throws {
        guard persistentStores.contains(where: { $0 === store }) else {
            throw ObjectGraphError(code: .storeOpenFailed, message: "the store is not one of this coordinator's")
        }
        unregister(store)
        try wrapStoreErrors(.storeOpenFailed, "cannot remove the store") { try detach(store) }
    }

    /// Copies a store into a new store of another type (or file) with every object and
    /// relationship, primary keys, identity (`NSStoreUUID`) and metadata kept, then puts the
    /// new store in the old one's place, as `migratePersistentStore(_:to:options:type:)`.
    /// The old store's file is left as it was.
    ///
    /// Any type converts to any other: SQLite, in-memory, binary, XML, a registered atomic
    /// store. Object IDs and their URIs stay valid, and encoded values stay bound to their place.
    ///
    /// - throws: ``ObjectGraphError`` when the destination file exists already or cannot be
    ///   written; the old store then stays in place.
    @discardableResult
    public func migratePersistentStore(
        _ store: PersistentStore, to url: URL?, type: StoreType,
        options: StoreOptions = StoreOptions()
    ) throws -> PersistentStore {
        guard persistentStores.contains(where: { $0 === store }) else {
            throw ObjectGraphError(
                code: .storeOpenFailed, message: "the store to migrate is not one of this coordinator's")
        }
        if let url, type != .inMemory, FileManager.default.fileExists(atPath: url.path) {
            throw ObjectGraphError(
                code: .storeOpenFailed, message: "cannot migrate to '\(url.path)': the file exists already")
        }
        let nodes = try wrapStoreErrors(.storeOpenFailed, "cannot read the store to migrate") {
            try read { db in try cacheNodes(of: store, db, references: nil) }
        }
        unregister(store)
        let migrated: PersistentStore
        do {
            migrated = try addPersistentStore(
                type: type, configuration: store.configurationName, at: url, options: options)
        } catch {
            register(store)
            throw error
        }
        migrated.identifier = store.identifier
        migrated.metadata = store.metadata
        migrated.metadata[StoreMetadataKey.storeType] = type.rawValue
        migrated.metadataNeedsSaving = true
        do {
            try wrapStoreErrors(.saveFailed, "cannot migrate the store") {
                try write { db in
                    try insert(nodes, into: migrated, db, from: url?.lastPathComponent ?? "in-memory store")
                    try db.execute(
                        sql: "UPDATE \(migrated.qualified("Z_METADATA")) SET Z_UUID = ?",
                        arguments: [migrated.identifier])
                    try writePendingMetadata(db)
                }
            }
        } catch {
            unregister(migrated)
            try? detach(migrated)
            if let url, type != .inMemory { try? FileManager.default.removeItem(at: url) }
            register(store)
            throw error
        }
        metadataWasSaved()
        try? detach(store)
        return migrated
    }
}
