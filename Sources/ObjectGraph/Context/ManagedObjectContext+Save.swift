import Foundation
import GRDB

extension ManagedObjectContext {
    /// Writes every change to the stores in one transaction, all or nothing.
    ///
    /// Delete rules are applied first, then every inserted and updated object is validated;
    /// if anything fails, nothing is written and the context keeps its changes, to be fixed
    /// and saved again, or rolled back. A row that another context or process changed
    /// since this one read it is not overwritten: the save fails with a merge conflict.
    ///
    /// - throws: ``ValidationError`` (1560 gathering several), ``ObjectGraphError`` 133020
    ///   on a merge conflict, or a store error (busy, disk full, read-only).
    public func save() throws {
        processPendingChanges()
        try throwDeferredError()
        let metadataPending = coordinator.persistentStores.contains { $0.metadataNeedsSaving }
        guard hasChanges || metadataPending else { return }
        propagateDeletes()
        processPendingChanges()

        // Validated once before taking the write lock, to fail early, and again under it (below),
        // against the stores as they are when the rows are written.
        try validate()

        let inserted = insertedSet.objects
        let updated = updatedSet.objects.filter { !deletedSet.contains($0) }
        let deleted = deletedSet.objects
        // Many-to-many rows are rewritten from the changed objects before the deleted ones go.
        let joinChanges = (inserted + updated.filter { !$0.changedKeys.isEmpty }).filter { $0.entity.hasJoinTables }
        var rowsUpdated: Set<ObjectIdentifier> = []
        do {
            try wrapStoreErrors(.saveFailed, "cannot save") {
                try coordinator.write { db in
                    try validate()
                    try assignPrimaryKeys(inserted, db)
                    let changing = try rowKeys(of: updated + deleted)
                    try coordinator.notifyRowsWillChange(changing, db)
                    for object in inserted { try insertRow(of: object, db) }
                    for object in updated where try updateRow(of: object, db) { rowsUpdated.insert(ObjectIdentifier(object)) }
                    for object in joinChanges { try writeJoinRows(of: object, db) }
                    for object in deleted { try deleteRow(of: object, db) }
                    try enforceDeleteRules(of: deleted, db)
                    let insertedIDs = Set(inserted.map(ObjectIdentifier.init))
                    try verifyDestinations(of: inserted + updated, inserted: insertedIDs, db)
                    try coordinator.notifyRowsDidChange(try rowKeys(of: inserted) + changing, db)
                    try coordinator.writePendingMetadata(db)
                }
            }
        } catch {
            for object in inserted { object.pendingPrimaryKey = nil }
            throw error
        }
        coordinator.metadataWasSaved()
        didCommit(inserted: inserted, updated: updated, deleted: deleted, rowsUpdated: rowsUpdated)
    }

    /// Runs every validation rule on the changed objects; throws them all at once.
    private func validate() throws {
        var failures: [ValidationError] = []
        for object in insertedSet.objects + updatedSet.objects where !deletedSet.contains(object) {
            failures += Validator.errors(for: object)
        }
        for object in deletedSet.objects { failures += Validator.denyErrors(for: object) }
        try throwDeferredError()
        if !failures.isEmpty { throw ValidationError.combining(failures) }
    }

    // MARK: - Delete rules

    /// Applies Cascade and Nullify rules to the objects marked deleted (and those they
    /// cascade to). Deny is checked by validation.
    func propagateDeletes() {
        var queue = deletedSet.objects
        var index = 0
        while index < queue.count {
            let object = queue[index]
            index += 1
            for relationship in object.entity.relationships {
                let destinations = relationship.isToMany ? object.toManyObjects(relationship) : object.toOneObject(relationship).map { [$0] } ?? []
                switch relationship.deleteRule {
                case .cascade:
                    for destination in destinations where !destinationIsGone(destination) {
                        delete(destination)
                        if destination.managedObjectContext === self { queue.append(destination) }
                    }
                case .nullify:
                    guard let inverseName = relationship.inverseName,
                          let inverse = model.entity(named: relationship.destinationEntityName)?.relationship(named: inverseName) else { continue }
                    for destination in destinations where !deletedSet.contains(destination) {
                        destination.primitiveUnlink(inverse, from: object)
                    }
                case .deny, .noAction:
                    break
                }
            }
        }
    }

    private func destinationIsGone(_ object: ManagedObject) -> Bool {
        deletedSet.contains(object) || object.managedObjectContext !== self
    }

    // MARK: - Writing rows

    private func assignPrimaryKeys(_ objects: [ManagedObject], _ db: Database) throws {
        var byRoot: [Int: [ManagedObject]] = [:]
        for object in objects { byRoot[object.entity.rootEntity.entityNumber, default: []].append(object) }
        for (_, group) in byRoot.sorted(by: { $0.key < $1.key }) {
            let first = try coordinator.allocatePrimaryKeys(db, root: group[0].entity.rootEntity, count: group.count)
            for (offset, object) in group.enumerated() { object.pendingPrimaryKey = first + Int64(offset) }
        }
    }

    private func primaryKey(of object: ManagedObject) -> Int64? { object.objectID.primaryKey ?? object.pendingPrimaryKey }

    /// The rows of `objects`, for a ``StoreWriteObserver``.
    private func rowKeys(of objects: [ManagedObject]) throws -> [StoredRowKey] {
        guard coordinator.writeObserver != nil else { return [] }
        return try objects.compactMap { object in
            let root = object.entity.rootEntity
            guard let key = primaryKey(of: object) else { return nil }
            let store = try coordinator.store(for: root)
            return StoredRowKey(storeIdentifier: store.identifier, table: root.tableName, primaryKey: key)
        }
    }

    /// The stored value of an attribute: encoded by its transformer when Transformable.
    private func storedValue(of object: ManagedObject, _ column: StoredColumn, store: PersistentStore, primaryKey: Int64) throws -> DatabaseValue {
        guard column.type == .transformable else { return StoredValues.databaseValue(object.values[column.name], type: column.type) }
        guard let value = object.values[column.name] else { return .null }
        if let encoded = value as? EncodedValue { return encoded.data.databaseValue }
        let place = ValuePlace(storeIdentifier: store.identifier, entityName: object.entity.name, attributeName: column.name, primaryKey: primaryKey)
        return try transformer(named: column.transformerName, entity: object.entity, key: column.name).transformedValue(value, at: place).databaseValue
    }

    /// The stored value of a to-one relationship: the destination's primary key.
    func storedValue(of object: ManagedObject, _ relationship: RelationshipDescription) -> DatabaseValue {
        switch object.values[relationship.name] {
        case let destination as ManagedObject: return primaryKey(of: destination)?.databaseValue ?? .null
        case let fault as FaultReference: return fault.primaryKey.databaseValue
        default: return .null
        }
    }

    private func insertRow(of object: ManagedObject, _ db: Database) throws {
        let entity = object.entity
        let store = try coordinator.store(for: entity.rootEntity)
        let primaryKey = object.pendingPrimaryKey!
        var arguments: [DatabaseValue] = [primaryKey.databaseValue, entity.entityNumber.databaseValue, 1.databaseValue]
        arguments.reserveCapacity(3 + entity.storedColumns.count + entity.storedToOne.count)
        for column in entity.storedColumns { arguments.append(try storedValue(of: object, column, store: store, primaryKey: primaryKey)) }
        for (relationship, _) in entity.storedToOne { arguments.append(storedValue(of: object, relationship)) }
        let sql = insertSQL[entity.name] ?? {
            let columns = ["Z_PK", "Z_ENT", "Z_OPT"] + entity.storedColumns.map(\.columnName) + entity.storedToOne.map(\.relationship.columnName)
            let sql = "INSERT INTO \(store.qualified(entity.rootEntity.tableName)) (\(columns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
            insertSQL[entity.name] = sql
            return sql
        }()
        try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(arguments))
    }

    /// Writes an updated object's changed columns if the row is still at the version this
    /// context read. Returns false when no column changed (only relationships stored elsewhere).
    private func updateRow(of object: ManagedObject, _ db: Database) throws -> Bool {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.objectID.primaryKey!
        var assignments: [String] = []
        var arguments: [DatabaseValue] = []
        for column in object.entity.storedColumns where object.changedKeys.contains(column.name) {
            assignments.append("\(column.columnName) = ?")
            arguments.append(try storedValue(of: object, column, store: store, primaryKey: primaryKey))
        }
        for (relationship, _) in object.entity.storedToOne where object.changedKeys.contains(relationship.name) {
            assignments.append("\(relationship.columnName) = ?")
            arguments.append(storedValue(of: object, relationship))
        }
        guard !assignments.isEmpty else { return false }
        guard object.version < Int64.max else {
            throw StoredRowHeader.damaged(store: store, root: root, primaryKey: primaryKey,
                                          "its version (Z_OPT) cannot grow any further")
        }
        arguments += [(object.version + 1).databaseValue, primaryKey.databaseValue, object.version.databaseValue]
        try db.execute(sql: "UPDATE \(store.qualified(root.tableName)) SET \(assignments.joined(separator: ", ")), Z_OPT = ? WHERE Z_PK = ? AND Z_OPT = ?",
                       arguments: StatementArguments(arguments))
        if db.changesCount == 0 { throw conflict(object, db, store: store) }
        return true
    }

    private func deleteRow(of object: ManagedObject, _ db: Database) throws {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.objectID.primaryKey!
        try db.execute(sql: "DELETE FROM \(store.qualified(root.tableName)) WHERE Z_PK = ? AND Z_OPT = ?", arguments: [primaryKey, object.version])
        if db.changesCount == 0 { throw conflict(object, db, store: store) }
        for relationship in object.entity.relationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            try db.execute(sql: "DELETE FROM \(store.qualified(join.name)) WHERE \(join.sourceColumn) = ?", arguments: [primaryKey])
        }
    }

    private func writeJoinRows(of object: ManagedObject, _ db: Database) throws {
        guard let primaryKey = primaryKey(of: object) else { return }
        for relationship in object.entity.relationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
            guard object.loadedToMany.contains(relationship.name), object.changedKeys.contains(relationship.name) || object.isInserted else { continue }
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            let store = try coordinator.store(for: object.entity.rootEntity)
            let table = store.qualified(join.name)
            try db.execute(sql: "DELETE FROM \(table) WHERE \(join.sourceColumn) = ?", arguments: [primaryKey])
            for destination in object.toManyObjects(relationship) where !deletedSet.contains(destination) {
                guard let destinationKey = self.primaryKey(of: destination) else { continue }
                try db.execute(sql: "INSERT OR IGNORE INTO \(table) (\(join.sourceColumn), \(join.destinationColumn)) VALUES (?, ?)",
                               arguments: [primaryKey, destinationKey])
            }
        }
    }

    private func conflict(_ object: ManagedObject, _ db: Database, store: PersistentStore) -> ObjectGraphError {
        let root = object.entity.rootEntity
        let current = try? Int64.fetchOne(db, sql: "SELECT Z_OPT FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?", arguments: [object.objectID.primaryKey!])
        let what = current.map { "was changed by someone else (version \(object.version) read, now \($0))" } ?? "was deleted by someone else"
        return ObjectGraphError(code: .mergeConflict,
                                message: "merge conflict: \(object.entity.name) row \(object.objectID.primaryKey!) \(what) since it was read; nothing was saved",
                                objects: [object])
    }

    // MARK: - After commit

    private func didCommit(inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], rowsUpdated: Set<ObjectIdentifier>) {
        for object in inserted {
            let root = object.entity.rootEntity
            let primaryKey = object.pendingPrimaryKey!
            object.pendingPrimaryKey = nil
            object.objectID = ObjectID(entityName: object.entity.name, storeIdentifier: coordinator.persistentStore(for: root)?.identifier,
                                       primaryKey: primaryKey, temporaryNumber: nil)
            object.version = 1
            registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)] = object
        }
        for object in updated where rowsUpdated.contains(ObjectIdentifier(object)) { object.version += 1 }
        for object in inserted + updated {
            var committed = object.values
            for name in object.entity.toManyRelationshipNames { committed[name] = nil }
            object.committedValues = committed
            object.changedKeys = []
            object.isPendingInsert = false
        }
        for object in deleted {
            if let primaryKey = object.objectID.primaryKey {
                registered[ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: primaryKey)] = nil
            }
            object.managedObjectContext = nil
        }
        insertedSet.removeAll()
        updatedSet.removeAll()
        deletedSet.removeAll()
        notificationCenter.post(name: Self.didSaveNotification, object: self, userInfo: [
            Self.insertedObjectsKey: inserted,
            Self.updatedObjectsKey: updated,
            Self.deletedObjectsKey: deleted,
        ])
    }
}
