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

        var failures: [ValidationError] = []
        for object in insertedSet.objects + updatedSet.objects where !deletedSet.contains(object) {
            failures += Validator.errors(for: object)
        }
        for object in deletedSet.objects { failures += Validator.denyErrors(for: object) }
        try throwDeferredError()
        if !failures.isEmpty { throw ValidationError.combining(failures) }

        let inserted = insertedSet.objects
        let updated = updatedSet.objects.filter { !deletedSet.contains($0) }
        let deleted = deletedSet.objects
        // Many-to-many rows are rewritten from the changed objects before the deleted ones go.
        let joinChanges = (inserted + updated).filter { !$0.changedKeys.isEmpty || inserted.contains($0) }
        var rowsUpdated: Set<ObjectIdentifier> = []
        do {
            try wrapStoreErrors(.saveFailed, "cannot save") {
                try coordinator.write { db in
                    try assignPrimaryKeys(inserted, db)
                    for object in inserted { try insertRow(of: object, db) }
                    for object in updated where try updateRow(of: object, db) { rowsUpdated.insert(ObjectIdentifier(object)) }
                    for object in joinChanges { try writeJoinRows(of: object, db) }
                    for object in deleted { try deleteRow(of: object, db) }
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

    /// The stored value of a persisted property: encoded attribute or destination key.
    private func storedValue(of object: ManagedObject, key: String, store: PersistentStore, primaryKey: Int64) throws -> (column: String, value: DatabaseValue)? {
        if let attribute = object.entity.attribute(named: key) {
            guard !attribute.isTransient else { return nil }
            guard attribute.type == .transformable else {
                return (attribute.columnName, StoredValues.databaseValue(object.values[key], type: attribute.type))
            }
            guard let value = object.values[key] else { return (attribute.columnName, .null) }
            let place = ValuePlace(storeIdentifier: store.identifier, entityName: object.entity.name, attributeName: key, primaryKey: primaryKey)
            let data = try transformer(for: attribute, entity: object.entity).transformedValue(value, at: place)
            return (attribute.columnName, data.databaseValue)
        }
        guard let relationship = object.entity.relationship(named: key), !relationship.isToMany else { return nil }
        switch object.values[key] {
        case let destination as ManagedObject:
            guard let destinationKey = self.primaryKey(of: destination) else { return (relationship.columnName, .null) }
            return (relationship.columnName, destinationKey.databaseValue)
        case let fault as FaultReference:
            return (relationship.columnName, fault.primaryKey.databaseValue)
        default:
            return (relationship.columnName, .null)
        }
    }

    private var persistedKeys: (EntityDescription) -> [String] {
        { entity in entity.attributes.filter { !$0.isTransient }.map(\.name) + entity.relationships.filter { !$0.isToMany }.map(\.name) }
    }

    private func insertRow(of object: ManagedObject, _ db: Database) throws {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.pendingPrimaryKey!
        var columns = ["Z_PK", "Z_ENT", "Z_OPT"]
        var arguments: [DatabaseValue] = [primaryKey.databaseValue, object.entity.entityNumber.databaseValue, 1.databaseValue]
        for key in persistedKeys(object.entity) {
            guard let (column, value) = try storedValue(of: object, key: key, store: store, primaryKey: primaryKey) else { continue }
            columns.append(column)
            arguments.append(value)
        }
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
        try db.execute(sql: "INSERT INTO \(store.qualified(root.tableName)) (\(columns.joined(separator: ", "))) VALUES (\(placeholders))",
                       arguments: StatementArguments(arguments))
    }

    /// Writes an updated object's changed columns if the row is still at the version this
    /// context read. Returns false when no column changed (only relationships stored elsewhere).
    private func updateRow(of object: ManagedObject, _ db: Database) throws -> Bool {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.objectID.primaryKey!
        var assignments: [String] = []
        var arguments: [DatabaseValue] = []
        for key in persistedKeys(object.entity) where object.changedKeys.contains(key) {
            guard let (column, value) = try storedValue(of: object, key: key, store: store, primaryKey: primaryKey) else { continue }
            assignments.append("\(column) = ?")
            arguments.append(value)
        }
        guard !assignments.isEmpty else { return false }
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
            object.committedValues = object.values.filter { key, _ in
                object.entity.attribute(named: key) != nil || object.entity.relationship(named: key)?.isToMany == false
            }
            object.changedKeys = []
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
