import Foundation
import GRDB

/// Inserts rows straight into a store, without objects in a context, as
/// `NSBatchInsertRequest`. Each dictionary gives attribute values by name; missing
/// attributes take the model's default.
public struct BatchInsertRequest {
    /// The entity whose table receives the rows.
    public var entityName: String
    /// One dictionary of attribute values per row.
    public var objects: [[String: Any]]

    /// A request inserting `objects` as rows of `entityName`.
    public init(entityName: String, objects: [[String: Any]]) {
        self.entityName = entityName
        self.objects = objects
    }
}

/// Sets attributes of every row a predicate matches, in SQL, as `NSBatchUpdateRequest`.
public struct BatchUpdateRequest {
    /// The entity (and sub-entities) whose rows change.
    public var entityName: String
    /// The rows to change; nil for all. It must run wholly in SQL.
    public var predicate: Predicate?
    /// New attribute values by name (nil or `NSNull` clears).
    public var propertiesToUpdate: [String: Any?]

    /// A request setting `propertiesToUpdate` on the rows `predicate` matches.
    public init(entityName: String, predicate: Predicate? = nil, propertiesToUpdate: [String: Any?]) {
        self.entityName = entityName
        self.predicate = predicate
        self.propertiesToUpdate = propertiesToUpdate
    }
}

/// Deletes every row a predicate matches, in SQL, as `NSBatchDeleteRequest`. Delete rules
/// hold: Cascade deletes the destinations too, Deny refuses while destinations exist,
/// Nullify and No Action clear the references to the deleted rows.
public struct BatchDeleteRequest {
    /// The entity (and sub-entities) whose rows go.
    public var entityName: String
    /// The rows to delete; nil for all. It must run wholly in SQL.
    public var predicate: Predicate?

    /// A request deleting the rows `predicate` matches.
    public init(entityName: String, predicate: Predicate? = nil) {
        self.entityName = entityName
        self.predicate = predicate
    }
}

/// What a batch request changed.
public struct BatchResult {
    /// The rows inserted, updated or deleted (deletes include cascaded rows).
    public var objectIDs: [ObjectID]
    /// How many rows changed.
    public var count: Int { objectIDs.count }
}

extension ManagedObjectContext {
    /// Inserts the request's rows in one transaction, all or nothing.
    ///
    /// - throws: ``ObjectGraphError`` naming the row and attribute when a key is not an
    ///   attribute, a value has the wrong type, or a required value is missing.
    @discardableResult
    public func execute(_ request: BatchInsertRequest) throws -> BatchResult {
        let entity = try batchEntity(request.entityName)
        let root = entity.rootEntity
        let store = try coordinator.store(for: entity)
        let columns = entity.storedColumns
        var rows: [[DatabaseValue]] = []
        var pending: [(index: Int, column: StoredColumn, value: Any)] = []
        for (index, values) in request.objects.enumerated() {
            for key in values.keys where !columns.contains(where: { $0.name == key }) {
                throw ObjectGraphError(
                    code: .saveFailed,
                    message: "batch insert row \(index + 1): \(entity.name) has no stored attribute '\(key)'")
            }
            var row: [DatabaseValue] = []
            for column in columns {
                let attribute = entity.attribute(named: column.name)
                let value = values[column.name].flatMap { $0 is NSNull ? nil : $0 } ?? attribute?.defaultValue
                if column.type == .transformable, let value {
                    pending.append((index, column, value))
                    row.append(.null)
                    continue
                }
                let stored = try batchValue(value, column, entity: entity, row: index + 1)
                if stored.isNull, attribute?.isOptional == false {
                    throw ObjectGraphError(
                        code: .saveFailed,
                        message: "batch insert row \(index + 1): \(entity.name).\(column.name) is required")
                }
                row.append(stored)
            }
            rows.append(row)
        }
        let sql =
            "INSERT INTO \(store.qualified(root.tableName)) (Z_PK, Z_ENT, "
                + "Z_OPT\(columns.map { ", \($0.columnName)" }.joined())) "
            + "VALUES (?, ?, 1\(String(repeating: ", ?", count: columns.count)))"
        let keys = try wrapStoreErrors(.saveFailed, "cannot batch insert \(entity.name)") {
            try coordinator.write(stores: storesLockedForBatch(store)) { db -> [Int64] in
                guard !rows.isEmpty else { return [] }
                let first = try coordinator.allocatePrimaryKeys(db, root: root, count: rows.count)
                // A key handed out again (its row and the key counter changed outside) must find
                // no tag left behind, or the new row would launder the deletion.
                let inserted = rowKeys((0..<Int64(rows.count)).map { first + $0 }, root: root, store: store)
                try coordinator.notifyRowsWillBeInserted(inserted, db)
                for (index, column, value) in pending {
                    let place = ValuePlace(
                        storeIdentifier: store.identifier, entityName: entity.name, attributeName: column.name,
                        primaryKey: first + Int64(index))
                    let position = columns.firstIndex { $0.name == column.name } ?? 0
                    rows[index][position] = try transformer(
                        named: column.transformerName, entity: entity, key: column.name
                    )
                    .transformedValue(value, at: place).databaseValue
                }
                let statement = try db.cachedStatement(sql: sql)
                for (offset, row) in rows.enumerated() {
                    try statement.execute(
                        arguments: StatementArguments(
                            [(first + Int64(offset)).databaseValue, entity.entityNumber.databaseValue] + row))
                }
                let keys = inserted.map(\.primaryKey)
                try coordinator.notifyRowsDidChange(inserted, db)
                try writeHistory(
                    keys.map { HistoryRow(type: .insert, entityNumber: entity.entityNumber, primaryKey: $0) },
                    store: store, db)
                return keys
            }
        }
        return BatchResult(
            objectIDs: keys.map {
                ObjectID(
                    entityName: entity.name, storeIdentifier: store.identifier, primaryKey: $0, temporaryNumber: nil)
            })
    }

    /// Updates the matching rows in one transaction and moves their version (`Z_OPT`) on,
    /// so a context holding an older copy gets a merge conflict instead of overwriting.
    /// Objects of this context that have no unsaved change are refreshed.
    ///
    /// - throws: ``ObjectGraphError`` when the predicate cannot run in SQL (it names a
    ///   transformed or transient attribute), or for an unknown attribute or a wrong type.
    @discardableResult
    public func execute(_ request: BatchUpdateRequest) throws -> BatchResult {
        let entity = try batchEntity(request.entityName)
        let (root, store) = (entity.rootEntity, try coordinator.store(for: entity))
        var assignments: [(column: StoredColumn, value: Any?)] = []
        for (key, value) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            guard let column = entity.storedColumns.first(where: { $0.name == key }) else {
                throw ObjectGraphError(
                    code: .saveFailed, message: "batch update: \(entity.name) has no stored attribute '\(key)'")
            }
            let value = value.flatMap { $0 is NSNull ? nil : $0 }
            if value == nil, entity.attribute(named: key)?.isOptional == false {
                throw ObjectGraphError(code: .saveFailed, message: "batch update: \(entity.name).\(key) is required")
            }
            assignments.append((column, value))
        }
        let (conditions, arguments) = try batchConditions(entity, request.predicate, store: store)
        let table = store.qualified(root.tableName)
        let ids = try wrapStoreErrors(.saveFailed, "cannot batch update \(entity.name)") {
            try coordinator.write(stores: storesLockedForBatch(store)) { db -> [ObjectID] in
                // Every row's key and entity are checked before any is written.
                let rows = try keysAndEntities(
                    db, sql: "SELECT Z_PK, Z_ENT FROM \(table) t0\(conditions)", arguments: arguments,
                    root: root, store: store)
                let setClause = assignments.map { "\($0.column.columnName) = ?" }.joined(separator: ", ")
                let statement = try db.makeStatement(
                    sql:
                        "UPDATE \(table) SET \(setClause)\(setClause.isEmpty ? "" : ", ")Z_OPT = Z_OPT + 1 "
                            + "WHERE Z_PK = ?"
                )
                let changed = rowKeys(rows.map(\.0), root: root, store: store)
                try coordinator.notifyRowsWillChange(changed, db)
                for (primaryKey, _) in rows {
                    var values: [DatabaseValue] = []
                    for (column, value) in assignments {
                        if column.type == .transformable, let value {
                            let place = ValuePlace(
                                storeIdentifier: store.identifier, entityName: entity.name, attributeName: column.name,
                                primaryKey: primaryKey)
                            values.append(
                                try transformer(named: column.transformerName, entity: entity, key: column.name)
                                    .transformedValue(value, at: place).databaseValue)
                        } else {
                            values.append(try batchValue(value, column, entity: entity, row: nil))
                        }
                    }
                    try statement.execute(arguments: StatementArguments(values + [primaryKey.databaseValue]))
                }
                try coordinator.notifyRowsDidChange(changed, db)
                let updatedKeys = Set(assignments.map(\.column.name))
                try writeHistory(
                    rows.map { primaryKey, number in
                        HistoryRow(
                            type: .update, entityNumber: number, primaryKey: primaryKey,
                            columns: PersistentHistoryTables.columnMask(
                                updatedKeys, of: model.entity(number: number) ?? entity
                            ).databaseValue)
                    }, store: store, db)
                return rows.map { objectID(primaryKey: $0.0, entityNumber: $0.1, root: root, store: store) }
            }
        }
        for id in ids {
            guard let key = id.primaryKey,
                let object = registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: key)],
                !object.hasChanges
            else { continue }
            try refresh(object, mergeChanges: false)
        }
        return BatchResult(objectIDs: ids)
    }

    /// Deletes the matching rows (and what their delete rules reach) in one transaction.
    /// Objects of this context for deleted rows leave it.
    ///
    /// - throws: ``ObjectGraphError`` when a Deny rule forbids a delete (nothing is deleted),
    ///   or when the predicate cannot run in SQL.
    @discardableResult
    public func execute(_ request: BatchDeleteRequest) throws -> BatchResult {
        let entity = try batchEntity(request.entityName)
        let store = try coordinator.store(for: entity)
        let (conditions, arguments) = try batchConditions(entity, request.predicate, store: store)
        let deleted = try wrapStoreErrors(.saveFailed, "cannot batch delete \(entity.name)") {
            try coordinator.write(stores: storesLockedForBatch(store)) { db -> BatchDeletion in
                let keys = try keysAndEntities(
                    db, sql: "SELECT Z_PK, Z_ENT FROM \(store.qualified(entity.rootEntity.tableName)) t0\(conditions)",
                    arguments: arguments, root: entity.rootEntity, store: store)
                var deletion = BatchDeletion()
                try deleteRows(keys, root: entity.rootEntity, db, into: &deletion)
                // A row nullified and then deleted by the same request was deleted, as a save records it.
                let deletedRow = { (row: HistoryRow) in
                    let root = self.model.entity(number: row.entityNumber)?.rootEntity.entityNumber ?? row.entityNumber
                    return deletion.keys.contains(ObjectKey(rootEntityNumber: root, primaryKey: row.primaryKey))
                }
                for store in coordinator.persistentStores {
                    let rows = deletion.history[ObjectIdentifier(store)] ?? []
                    try writeHistory(rows.filter { $0.type != .update || !deletedRow($0) }, store: store, db)
                }
                return deletion
            }
        }
        if !registered.isEmpty {
            for key in deleted.keys {
                guard let object = registered.removeValue(forKey: key) else { continue }
                updatedSet.remove(object)
                deletedSet.remove(object)
                object.managedObjectContext = nil
            }
        }
        return BatchResult(objectIDs: deleted.ids)
    }

    /// What a batch delete has deleted so far, and the history it writes for it.
    private struct BatchDeletion {
        var ids: [ObjectID] = []
        var keys: Set<ObjectKey> = []
        /// Each store's change rows, by the store's identity.
        var history: [ObjectIdentifier: [HistoryRow]] = [:]
    }

    /// The stores a batch request locks: its own, or every store when a write observer may
    /// write to any (as a save does).
    private func storesLockedForBatch(_ store: PersistentStore) -> [PersistentStore]? {
        coordinator.writeObserver == nil ? [store] : nil
    }

    private func rowKeys(_ keys: [Int64], root: EntityDescription, store: PersistentStore) -> [StoredRowKey] {
        let table = root.tableName
        return keys.map { StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: $0) }
    }

    /// Deletes rows of a root entity's table after applying their entities' delete rules.
    private func deleteRows(
        _ rows: [(Int64, Int)], root: EntityDescription, _ db: Database, into deletion: inout BatchDeletion
    ) throws {
        let store = try coordinator.store(for: root)
        // A set, not a scan of what was deleted: a cascade may reach rows by the hundred thousand.
        // Each row once, also when two chunks' cascades reach it.
        deletion.keys.reserveCapacity(deletion.keys.count + rows.count)
        let fresh = rows.filter {
            deletion.keys.insert(ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: $0.0)).inserted
        }
        guard !fresh.isEmpty else { return }
        // One ID scope an entity number, not a lookup a row.
        var scopes: [Int: ObjectIDScope] = [:]
        deletion.ids.reserveCapacity(deletion.ids.count + fresh.count)
        for (primaryKey, number) in fresh {
            let scope = scopes[number] ?? {
                let scope = idScope(of: entity(number: number, root: root), storeIdentifier: store.identifier,
                                    kind: .permanent)
                scopes[number] = scope
                return scope
            }()
            deletion.ids.append(ObjectID(scope: scope, number: primaryKey))
        }
        // Grouped by the number each row names (an integer hashed a row), then by the entity it stands for.
        var byEntity: [String: (entity: EntityDescription, keys: [Int64])] = [:]
        for (number, group) in Dictionary(grouping: fresh, by: \.1) {
            let entity = entity(number: number, root: root)
            byEntity[entity.name, default: (entity, [])].keys += group.map(\.0)
        }
        for (_, (entity, keys)) in byEntity.sorted(by: { $0.key < $1.key }) {
            for relationship in entity.relationships {
                // A destination in no added store has no rows to cascade to, nullify or deny for.
                guard let destination = model.entity(named: relationship.destinationEntityName),
                    let destinationStore = try? coordinator.store(for: destination.rootEntity)
                else { continue }
                // Only Deny and Cascade look at the rows at the other end; Nullify's are found below.
                switch relationship.deleteRule {
                case .deny:
                    guard try destinationRows(relationship, of: entity, keys: keys, destination: destination, db)
                        .isEmpty
                    else {
                        throw ObjectGraphError(
                            code: .saveFailed,
                            message: "batch delete refused: \(entity.name).\(relationship.name) "
                                + "denies deleting rows that still have \(relationship.destinationEntityName) "
                                    + "objects; nothing was deleted"
                        )
                    }
                case .cascade:
                    let targets = try destinationRows(
                        relationship, of: entity, keys: keys, destination: destination, db)
                    try deleteRows(targets, root: destination.rootEntity, db, into: &deletion)
                case .nullify, .noAction:
                    break
                }
                if SQLiteSchema.usesJoinTable(relationship, in: model) {
                    let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: model)
                    for chunk in keys.chunked(500) {
                        try db.executeCached(
                            sql:
                                "DELETE FROM \(store.qualified(join.name)) WHERE \(join.sourceColumn) IN "
                                    + "(\(placeholders(chunk.count)))",
                            values: chunk.map { $0.databaseValue })
                    }
                } else if relationship.isToMany, let inverse = SQLiteSchema.inverse(of: relationship, in: model) {
                    let table = destinationStore.qualified(destination.rootEntity.tableName)
                    let inverseColumn = inverse.columnName
                    for chunk in keys.chunked(500) {
                        let referring = "WHERE \(inverseColumn) IN (\(placeholders(chunk.count)))"
                        let values = chunk.map { $0.databaseValue }
                        let nullified = try keysAndEntities(
                            db, sql: "SELECT Z_PK, Z_ENT FROM \(table) \(referring)", arguments: values,
                            root: destination.rootEntity, store: destinationStore)
                        let changed = rowKeys(nullified.map(\.0), root: destination.rootEntity, store: destinationStore)
                        try coordinator.notifyRowsWillChange(changed, db)
                        try db.executeCached(
                            sql: "UPDATE \(table) SET \(inverseColumn) = NULL, Z_OPT = Z_OPT + 1 \(referring)",
                            values: values)
                        try coordinator.notifyRowsDidChange(changed, db)
                        if destinationStore.tracksHistory {
                            deletion.history[ObjectIdentifier(destinationStore), default: []] += nullified.map {
                                HistoryRow(
                                    type: .update, entityNumber: $0.1, primaryKey: $0.0,
                                    columns: PersistentHistoryTables.columnMask(
                                        [inverse.name], of: model.entity(number: $0.1) ?? destination
                                    ).databaseValue)
                            }
                        }
                    }
                }
            }
            let preserved = entity.storedColumns.filter {
                entity.attribute(named: $0.name)?.preservesValueInHistoryOnDeletion == true
            }
            let table = store.qualified(root.tableName)
            for chunk in keys.chunked(500) {
                let values = chunk.map { $0.databaseValue }
                if store.tracksHistory {
                    var tombstones: [Int64: DatabaseValue] = [:]
                    if !preserved.isEmpty {
                        let rows = try Row.fetchAll(
                            db,
                            sql: "SELECT Z_PK\(preserved.map { ", \($0.columnName)" }.joined()) FROM "
                                + "\(table) WHERE Z_PK IN (\(placeholders(chunk.count)))",
                            arguments: StatementArguments(values))
                        for row in rows {
                            guard let key = row[0] as Int64? else { continue }
                            tombstones[key] = try Self.tombstone(
                                preserved.enumerated().map { ($1.name, row[$0 + 1] as DatabaseValue) })
                        }
                    }
                    deletion.history[ObjectIdentifier(store), default: []] += chunk.map {
                        HistoryRow(type: .delete, entityNumber: entity.entityNumber, primaryKey: $0,
                                   tombstone: tombstones[$0] ?? .null)
                    }
                }
                let changed = rowKeys(Array(chunk), root: root, store: store)
                try coordinator.notifyRowsWillChange(changed, db)
                try db.executeCached(
                    sql: "DELETE FROM \(table) WHERE Z_PK IN (\(placeholders(chunk.count)))", values: values)
                try coordinator.notifyRowsDidChange(changed, db)
            }
        }
    }

    /// The rows a relationship of rows `keys` points at: primary key and entity number.
    private func destinationRows(
        _ relationship: RelationshipDescription, of entity: EntityDescription, keys: [Int64],
        destination: EntityDescription, _ db: Database
    ) throws -> [(Int64, Int)] {
        let store = try coordinator.store(for: entity.rootEntity)
        let destinationStore = try coordinator.store(for: destination.rootEntity)
        let table = destinationStore.qualified(destination.rootEntity.tableName)
        var result: [(Int64, Int)] = []
        for chunk in keys.chunked(500) {
            let sql: String
            if !relationship.isToMany {
                sql =
                    "SELECT d.Z_PK, d.Z_ENT FROM \(table) d WHERE d.Z_PK IN (SELECT \(relationship.columnName) FROM "
                    + "\(store.qualified(entity.rootEntity.tableName)) WHERE Z_PK IN (\(placeholders(chunk.count))))"
            } else if SQLiteSchema.usesJoinTable(relationship, in: model) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: model)
                sql =
                    "SELECT d.Z_PK, d.Z_ENT FROM \(table) d WHERE d.Z_PK IN (SELECT \(join.destinationColumn) FROM "
                    + "\(store.qualified(join.name)) WHERE \(join.sourceColumn) IN (\(placeholders(chunk.count))))"
            } else if let inverse = SQLiteSchema.inverse(of: relationship, in: model) {
                sql =
                    "SELECT d.Z_PK, d.Z_ENT FROM \(table) d WHERE d.\(inverse.columnName) IN "
                        + "(\(placeholders(chunk.count)))"
            } else {
                continue
            }
            result += try keysAndEntities(
                db, sql: sql, arguments: chunk.map { $0.databaseValue }, root: destination.rootEntity,
                store: destinationStore)
        }
        return result
    }

    /// Each row's primary key and entity number, read in place (a cascade reads them by the
    /// hundred thousand); a damaged one is named, not read as 0.
    private func keysAndEntities(
        _ db: Database, sql: String, arguments: [DatabaseValue], root: EntityDescription, store: PersistentStore
    ) throws -> [(Int64, Int)] {
        var rows: [(Int64, Int)] = []
        try db.forEachRow(sql: sql, arguments: arguments) { row in
            let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
            let number = try Self.integer(row, 1, "Z_ENT", root: root, store: store)
            rows.append((primaryKey, Int(truncatingIfNeeded: number)))
        }
        return rows
    }

    private static let chunkPlaceholders = Array(repeating: "?", count: 500).joined(separator: ",")

    /// `count` SQL parameters, comma-separated (500 made once: chunks of rows are that size).
    func placeholders(_ count: Int) -> String {
        count == 500 ? Self.chunkPlaceholders : Array(repeating: "?", count: count).joined(separator: ",")
    }

    private func batchEntity(_ name: String) throws -> EntityDescription {
        guard let entity = model.entity(named: name) else {
            throw ObjectGraphError(code: .objectNotFound, message: "the model has no entity named '\(name)'")
        }
        guard !entity.isAbstract || !entity.subentities.isEmpty else {
            throw ObjectGraphError(code: .saveFailed, message: "entity \(name) is abstract")
        }
        return entity
    }

    /// A value as stored in `column`, or an error naming the row and attribute.
    private func batchValue(
        _ value: Any?, _ column: StoredColumn, entity: EntityDescription, row: Int?
    ) throws -> DatabaseValue {
        guard let value else { return .null }
        let stored = StoredValues.databaseValue(value, type: column.type)
        guard stored.isNull else { return stored }
        throw ObjectGraphError(
            code: .saveFailed,
            message: "batch \(row.map { "insert row \($0)" } ?? "update"): "
                + "\(entity.name).\(column.name) needs a \(column.type.rawValue) value, not \(type(of: value))")
    }

    /// The WHERE clause (with its arguments) selecting an entity's rows matching `predicate`
    /// wholly in SQL.
    private func batchConditions(
        _ entity: EntityDescription, _ predicate: Predicate?,
        store: PersistentStore
    ) throws -> (String, [DatabaseValue]) {
        var conditions: [String] = []
        let root = entity.rootEntity
        if entity.selfAndDescendants.count != root.selfAndDescendants.count {
            conditions.append(
                "t0.Z_ENT IN (\(entity.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")))")
        }
        var compiler = PredicateSQLCompiler(model: model, store: store)
        if let predicate {
            let sql: String?
            do {
                sql = try compiler.compile(predicate.root, entity: entity, alias: "t0")
            } catch PredicateSQLCompiler.CompileError.unknownKey(let key, let entityName) {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "keypath '\(key)' not found in entity \(entityName) (predicate '\(predicate.format)')")
            }
            guard let sql else {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "the predicate '\(predicate.format)' cannot run in SQL "
                        + "(it names a transformed or transient attribute); fetch the objects and change them "
                            + "in a context instead"
                )
            }
            conditions.append("(\(sql))")
        }
        return (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "), compiler.arguments)
    }
}

extension PersistentStoreCoordinator {
    /// The ID a URI from ``ObjectID/uriRepresentation`` names, if it belongs to one of
    /// this coordinator's stores and names an entity that store holds; nil otherwise
    /// (temporary IDs are not resolvable). Use ``ManagedObjectContext/existingObject(with:)``
    /// to get the object.
    public func managedObjectID(forURIRepresentation url: URL) -> ObjectID? {
        guard url.scheme == "x-coredata", let host = url.host, !host.isEmpty else { return nil }
        let parts = url.path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, parts[2].first == "p", let primaryKey = Int64(parts[2].dropFirst()),
            primaryKey > 0,
            let store = persistentStores.first(where: { $0.identifier == host }),
            let entity = store.entities.first(where: { $0.name == parts[1] })
        else { return nil }
        return ObjectID(
            entityName: entity.name, storeIdentifier: store.identifier, primaryKey: primaryKey, temporaryNumber: nil)
    }
}
