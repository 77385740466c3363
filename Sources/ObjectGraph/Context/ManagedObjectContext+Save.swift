import Foundation
import GRDB

extension ManagedObjectContext {
    /// Writes every change to the stores in one transaction, all or nothing.
    ///
    /// Delete rules are applied first (a cascade over a to-many nothing here has read may run in
    /// SQL, its members announced by ID only: see "Contexts" in the documentation), then every
    /// inserted and updated object is validated;
    /// if anything fails, nothing is written and the context keeps its changes, to be fixed
    /// and saved again, or rolled back. A row that another context or process changed
    /// since this one read it is not overwritten blindly: ``mergePolicy`` decides, and by
    /// default the save fails with a merge conflict. What a policy settles is the context's
    /// only once the save commits: a deletion it keeps (rollback, store trump) stays a deletion
    /// until then, and then the object is announced as undeleted, with its row and links as
    /// they are stored (a Nullify rule's unlinking of the other ends is not written).
    ///
    /// Rows are written deletions first, then updates, then insertions; rows that trade unique
    /// values among themselves (a swap, a chain of renames) are saved as one change.
    ///
    /// - throws: ``ValidationError`` (1560 gathering several), ``ObjectGraphError`` 133020
    ///   on a merge conflict, 133021 on a uniqueness conflict, or a store error (busy, disk
    ///   full, read-only).
    public func save() throws {
        defer { storeCascadeKeys = [] }
        // Delete rules run first, so their changes join the same event (and undo group).
        var storeCascades = propagateDeletes(cascadingInStore: true)
        processPendingChanges()
        let deletions = deletedSet.count
        // Each set in turn: one array of them all was a copy of every new object.
        for object in [insertedSet.objects, updatedSet.objects, deletedSet.objects].joined() { object.willSave() }
        // What the hooks changed or deleted joins this save: a deleted object a hook linked to
        // applies its rules again, over what it holds now.
        let relinked = deletedObjectsLinked(by: [unprocessedInserted.objects, unprocessedUpdated.objects].joined())
        if deletedSet.count != deletions || !relinked.isEmpty {
            propagateDeletes(of: deletedSet.objects.filter { !$0.isPreparedForDeletion } + relinked)
        }
        // A hook may have read or linked what a store cascade was to delete: those go as objects.
        var holding: [ObjectIdentifier: Bool] = [:]
        let cascadingAsObjects = storeCascades.filter {
            storeCascade(of: $0.owner, $0.relationship, holding: &holding) == nil
        }
        if !cascadingAsObjects.isEmpty {
            let owners = Set(cascadingAsObjects.map { ObjectIdentifier($0.owner) })
            storeCascades.removeAll { owners.contains(ObjectIdentifier($0.owner)) }
            storeCascadeKeys = Set(storeCascades.map(\.key))
            propagateDeletes(of: cascadingAsObjects.map(\.owner))
        }
        processPendingChanges()
        try throwDeferredError()
        let metadataPending = coordinator.persistentStores.contains { $0.metadataNeedsSaving }
        guard hasChanges || metadataPending else { return }

        // Validated once before taking the write lock, to fail early, and again under it (below),
        // against the stores as they are when the rows are written.
        try validateChanges()

        var inserted = insertedSet.objects
        var updated = updatedSet.objects.filter { !deletedSet.contains($0) }
        let deleted = deletedSet.objects
        if let parent {
            try push(to: parent, inserted: inserted, updated: updated, deleted: deleted)
            return
        }
        // Many-to-many rows are rewritten from the changed objects.
        let joinChanges = inserted.filter(\.entity.hasJoinTables)
            + updated.filter { $0.entity.hasJoinTables && !$0.changedKeys.isEmpty }
        var rowsUpdated: Set<ObjectIdentifier> = []
        var cascaded: [CascadedRows] = []
        // Deletions the merge policy kept (rows changed meanwhile) with their rows, applied once committed.
        var kept: [ObjectIdentifier: Row] = [:]
        _ = coordinator.triggerReports.take()
        settledInSave = []
        defer { (settledInSave, rememberedInSave) = (nil, []) }
        do {
            try wrapStoreErrors(.saveFailed, "cannot save") {
                // An observer may write to any store: then every store is locked up front, in order.
                let locked = coordinator.writeObserver == nil
                    ? try storesWritten([inserted, updated, deleted].joined(), cascades: storeCascades) : nil
                try coordinator.write(stores: locked) { db in
                    try validateChanges()
                    // Deletes first: a row going frees its unique values for the rows written after it.
                    let deletedKeys = try rowKeys(of: deleted)
                    try coordinator.notifyRowsWillChange(deletedKeys, db)
                    kept = try deleteRows(of: deleted, db)
                    let going = kept.isEmpty ? deleted : deleted.filter { kept[ObjectIdentifier($0)] == nil }
                    takeBackUnlinking(byKept: deleted.filter { kept[ObjectIdentifier($0)] != nil })
                    // A kept owner's members go as they do on the object path, where they are deleted objects.
                    cascaded = try deleteMembers(of: storeCascades, db)
                    let adopted = try checkUniquenessConstraints(
                        inserted: inserted, updated: updated, deleted: going, db)
                    let adoptedIDs = Set(adopted.map(ObjectIdentifier.init))
                    if !adopted.isEmpty {
                        // Inserted objects that took a stored row's identity update that row.
                        inserted.removeAll { adoptedIDs.contains(ObjectIdentifier($0)) }
                        updated += adopted.filter { updatedSet.contains($0) }
                    }
                    try assignPrimaryKeys(inserted, db)
                    let updatedKeys = try rowKeys(of: updated)
                    try coordinator.notifyRowsWillChange(updatedKeys, db)
                    // A new row's key handed out again (its row and the key counter changed outside)
                    // must find no tag left behind, or the new row would launder the deletion.
                    try coordinator.notifyRowsWillBeInserted(try rowKeys(of: inserted), db)
                    try vacateUniqueValues(of: updated, readInThisSave: adoptedIDs, db)
                    // Updates before inserts: rows moving off unique values free them for new rows.
                    for object in updated where try refusingDuplicates(object, { try updateRow(of: object, db) }) {
                        rowsUpdated.insert(ObjectIdentifier(object))
                    }
                    for object in inserted { try refusingDuplicates(object) { try insertRow(of: object, db) } }
                    for object in joinChanges { try writeJoinRows(of: object, db) }
                    for object in [inserted, updated].joined() where object.entity.hasOrderedRelationships {
                        try writeOrder(of: object, db)
                    }
                    try enforceDeleteRules(of: going, keeping: Set(deleted.compactMap { object in
                        kept[ObjectIdentifier(object)] == nil ? nil : object.objectID.primaryKey.map {
                            ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: $0)
                        }
                    }), db)
                    try verifyDestinations(of: inserted, db)
                    try verifyDestinations(of: updated, db)
                    try recordHistory(inserted: inserted, updated: updated.filter { updatedSet.contains($0) },
                                      deleted: going, cascaded: cascaded, db)
                    try coordinator.notifyRowsDidChange(
                        try rowKeys(of: inserted, then: updatedKeys + deletedKeys), db)
                    // A kept row as this save leaves it (another deletion's rule may have changed it).
                    for object in deleted where kept[ObjectIdentifier(object)] != nil {
                        if let row = try currentRow(of: object, db).0 { kept[ObjectIdentifier(object)] = row }
                    }
                    try coordinator.writePendingMetadata(db)
                }
            }
        } catch {
            for object in inserted { object.pendingPrimaryKey = nil }
            for settled in (settledInSave ?? []).reversed() { settled.restore(in: self) }
            throw error
        }
        let keptObjects = kept.isEmpty ? [] : deleted.filter { kept[ObjectIdentifier($0)] != nil }
        // In one pass each: a save may keep thousands.
        deletedSet.remove(keptObjects)
        unprocessedDeleted.remove(keptObjects)
        coordinator.metadataWasSaved()
        // A policy may have kept a row another context deleted, or dropped one it deleted.
        // An object whose only change a kept deletion took back was not written.
        didCommit(inserted: inserted,
                  updated: updated.filter { $0.managedObjectContext === self && updatedSet.contains($0) },
                  deleted: deleted.filter { deletedSet.contains($0) }, cascaded: cascaded, rowsUpdated: rowsUpdated)
        for object in keptObjects { restoreKeptDeletion(object, row: kept[ObjectIdentifier(object)]!) }
        // Announced as an undeletion is: their deletion was.
        if !keptObjects.isEmpty { processPendingChanges() }
        applyTriggerReports(coordinator.triggerReports.take())
    }

    /// The stores a save changes (those of its objects, of its store cascades' members and those
    /// with pending metadata), in the coordinator's order, so that concurrent saves lock them in
    /// the same order.
    private func storesWritten(_ objects: some Sequence<ManagedObject>, cascades: [StoreCascade]) throws
        -> [PersistentStore] {
        var written = Set(coordinator.persistentStores.filter(\.metadataNeedsSaving).map(ObjectIdentifier.init))
        written.formUnion(cascades.map { ObjectIdentifier($0.store) })
        // Looked up once a run of one root: a cascade saves 100,000 children in a row.
        var lastRoot: EntityDescription?
        for object in objects {
            let root = object.entity.rootEntity
            guard root !== lastRoot else { continue }
            lastRoot = root
            written.insert(ObjectIdentifier(try coordinator.store(for: root)))
        }
        return coordinator.persistentStores.filter { written.contains(ObjectIdentifier($0)) }
    }

    // MARK: - Delete rules

    /// Applies Cascade and Nullify rules to the objects marked deleted (and those they
    /// cascade to). Deny is checked by validation. With `cascadingInStore` (a save's), cascades
    /// that can run in SQL are returned to the save instead (``storeCascade(of:_:)``).
    @discardableResult
    func propagateDeletes(of objects: [ManagedObject]? = nil, cascadingInStore: Bool = false) -> [StoreCascade] {
        var storeCascades: [StoreCascade] = []
        var holding: [ObjectIdentifier: Bool] = [:]
        var queue = objects ?? deletedSet.objects
        var index = 0
        while index < queue.count {
            let object = queue[index]
            index += 1
            if !object.isPreparedForDeletion {
                object.isPreparedForDeletion = true
                // Its history's tombstone is read from its values, while its row is still there.
                if object.entity.keepsTombstone { object.fireFaultForDeletion() }
                object.prepareForDeletion()
            }
            // By position: a relationship's description is copied (its strings retained) at each read.
            let relationships = object.entity.relationships
            for position in relationships.indices {
                switch relationships[position].deleteRule {
                case .cascade:
                    let relationship = relationships[position]
                    let key = StoreCascade.Key(owner: ObjectIdentifier(object), relationship: relationship.name)
                    guard !storeCascadeKeys.contains(key) else { continue }
                    if cascadingInStore, let cascade = storeCascade(of: object, relationship, holding: &holding) {
                        storeCascades.append(cascade)
                        storeCascadeKeys.insert(key)
                        continue
                    }
                    let destinations = memberFaults(of: object, relationship) ?? destinations(of: object, relationship)
                    for destination in destinations
                    where !deletedSet.contains(destination) && destination.managedObjectContext === self {
                        markDeleted(destination)
                        // A saved object is deleted; a new one left the context and has no rules to apply.
                        if deletedSet.contains(destination) { queue.append(destination) }
                    }
                case .nullify:
                    // Most often the other end is going too (a cascade's children and their parent).
                    let relationship = relationships[position]
                    if relationship.isToMany {
                        let staying = object.toManyObjects(relationship).filter { !deletedSet.contains($0) }
                        guard !staying.isEmpty, let inverse = SQLiteSchema.inverse(of: relationship, in: model)
                        else { continue }
                        for destination in staying { destination.primitiveUnlink(inverse, from: object) }
                    } else if let destination = object.toOneObjectUnchanged(relationship),
                              !deletedSet.contains(destination),
                              let inverse = SQLiteSchema.inverse(of: relationship, in: model) {
                        destination.primitiveUnlink(inverse, from: object)
                    }
                case .deny, .noAction:
                    break
                }
            }
        }
        return storeCascades
    }

    /// The deleted objects that `objects` were linked to by a relationship they changed (all of
    /// a new object's): deleted objects are registered, so nothing is read to find them.
    private func deletedObjectsLinked(by objects: some Sequence<ManagedObject>) -> [ManagedObject] {
        var linked: [ManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        for object in objects where !object.isFault {
            let isNew = insertedSet.contains(object)
            for relationship in object.entity.relationships
            where isNew || object.changedKeys.contains(relationship.name) {
                let held: [ManagedObject]
                if relationship.isToMany {
                    // An unread one holds the members that joined it here.
                    held = object.loadedToMany.contains(relationship.name)
                        ? object.toManyObjects(relationship)
                        : (object.values[relationship.name] as? RelationshipMembers)?.added ?? []
                } else {
                    held = heldDestination(of: object, relationship, in: object.values).map { [$0] } ?? []
                }
                for destination in held
                where deletedSet.contains(destination) && seen.insert(ObjectIdentifier(destination)).inserted {
                    linked.append(destination)
                }
            }
        }
        return linked
    }

    /// A to-one's destination in `values` (the object's current or committed ones) when this
    /// context holds it, found without reading a row.
    func heldDestination(of object: ManagedObject, _ relationship: RelationshipDescription,
                         in values: PropertyValues) -> ManagedObject? {
        guard let index = values.layout.index(of: relationship.name) else { return nil }
        switch values.slot(index) {
        case .object(let destination):
            return destination
        case .fault(let primaryKey):
            return object.entity.destination(of: relationship)
                .flatMap { registeredDestination(primaryKey: primaryKey, of: $0) }
        default:
            return nil
        }
    }

    func destinations(of object: ManagedObject, _ relationship: RelationshipDescription) -> [ManagedObject] {
        relationship.isToMany
            ? object.toManyObjects(relationship) : object.toOneObjectUnchanged(relationship).map { [$0] } ?? []
    }

    /// The members of an unread to-many that a cascade deletes, read as faults when deleting them
    /// needs nothing of their rows: each knows only its to-one back to `object`, which is all their
    /// delete rules read. Nil (read them whole) when undo must put them back with their values,
    /// when another rule or a history tombstone reads their values, or when the relationship
    /// changed since the last save.
    func memberFaults(of object: ManagedObject, _ relationship: RelationshipDescription) -> [ManagedObject]? {
        guard relationship.isToMany, undoManager == nil, parent == nil, !object.isPendingInsert,
              let primaryKey = object.objectID.primaryKey, !SQLiteSchema.usesJoinTable(relationship, in: model),
              let destination = model.entity(named: relationship.destinationEntityName),
              let inverse = SQLiteSchema.inverse(of: relationship, in: model), !inverse.isToMany
        else { return nil }
        let kinds = destination.selfAndDescendants
        for kind in kinds {
            let readsValues = kind.relationships.contains { $0.name != inverse.name && $0.deleteRule != .noAction }
                || kind.keepsTombstone
            if readsValues { return nil }
        }
        // Read as reading the relationship would: the deleted object's row as it is now.
        object.fireFaultForDeletion()
        // Its row deleted meanwhile: nothing of it to cascade to here (rows still naming it are the
        // save's to refuse), and reading its relationship would keep an error for the save.
        guard !object.isFault else { return [] }
        guard !object.loadedToMany.contains(relationship.name), object.values[relationship.name] == nil else {
            return nil
        }
        var knownValues: [ObjectIdentifier: PropertyValues] = [:]
        for kind in kinds {
            guard let slot = kind.propertyLayout.index(of: inverse.name) else { return nil }
            var values = kind.emptyValues
            values.setSlot(slot, .object(object))
            knownValues[ObjectIdentifier(kind)] = values
        }
        return object.deferringErrors {
            let root = destination.rootEntity
            let store = try coordinator.store(for: root)
            let sql = membersSQL(columns: "t0.Z_PK, t0.Z_ENT, t0.Z_OPT", root: root, store: store, inverse: inverse)
            var faults: [ManagedObject] = []
            try wrapStoreErrors(.objectNotFound, "cannot read \(object.entity.name).\(relationship.name)") {
                try coordinator.read { db in
                    try db.forEachRow(sql: sql, arguments: [primaryKey.databaseValue]) { row in
                        let member = try materialize(row, root: root, store: store, asFault: true)
                        guard member.entity.isKind(of: destination) else { return }
                        // One registered before is brought up to the row as a read would: a fault
                        // (a batch update's, a refresh's) may keep the version it had when read.
                        let version = try Self.rowVersion(row, root: root, store: store)
                        if member.isFault {
                            member.version = version
                            // Values shared by every fault until one is read; a read replaces them.
                            if let known = knownValues[ObjectIdentifier(member.entity)] { member.values = known }
                        } else if !member.hasChanges, member.version != version {
                            try refresh(member, mergeChanges: false)
                        }
                        faults.append(member)
                    }
                }
            }
            // Read, as the relationship would have been: a second pass of the rules (the save's)
            // deletes these, not rows another process linked meanwhile (the save refuses those).
            object.installStored(faults, for: relationship, distinct: true)
            return faults
        }
    }

    // MARK: - Writing rows

    private func assignPrimaryKeys(_ objects: [ManagedObject], _ db: Database) throws {
        // Counted per root, then numbered in one pass: no regrouped copy of what may be many objects.
        var counts: [Int: (root: EntityDescription, count: Int)] = [:]
        for object in objects {
            // Given by obtainPermanentIDs(for:) already.
            if let key = object.objectID.primaryKey {
                object.pendingPrimaryKey = key
                continue
            }
            let root = object.entity.rootEntity
            counts[root.entityNumber, default: (root, 0)].count += 1
        }
        var next: [Int: Int64] = [:]
        for (number, group) in counts.sorted(by: { $0.key < $1.key }) {
            let first = try coordinator.allocatePrimaryKeys(db, root: group.root, count: group.count)
            // An object keeps a new row's key in 53 bits (`ManagedObject.largestRowNumber`).
            guard first <= ManagedObject.largestRowNumber - Int64(group.count - 1) else {
                throw ObjectGraphError.damagedRow(
                    store: try coordinator.store(for: group.root), root: group.root, primaryKey: nil,
                    "no primary key is left to allocate (Z_PRIMARYKEY.Z_MAX reached 2^52 - 1)")
            }
            next[number] = first
        }
        for object in objects where object.objectID.primaryKey == nil {
            let number = object.entity.rootEntity.entityNumber
            guard let key = next[number] else { continue }
            object.pendingPrimaryKey = key
            next[number] = key + 1
        }
    }

    func primaryKey(of object: ManagedObject) -> Int64? { object.objectID.primaryKey ?? object.pendingPrimaryKey }

    /// The rows of `objects`, then `more`, for a ``StoreWriteObserver``: made at their size, as a
    /// list grown row by row and then joined to another was three copies of 300,000 keys at once.
    private func rowKeys(of objects: [ManagedObject], then more: [StoredRowKey] = []) throws -> [StoredRowKey] {
        guard coordinator.writeObserver != nil else { return [] }
        var keys: [StoredRowKey] = []
        keys.reserveCapacity(objects.count + more.count)
        for object in objects {
            let root = object.entity.rootEntity
            guard let key = primaryKey(of: object) else { continue }
            let store = try coordinator.store(for: root)
            keys.append(StoredRowKey(storeIdentifier: store.identifier, table: root.tableName, primaryKey: key))
        }
        keys += more
        return keys
    }

    /// The stored value of an attribute: encoded by its transformer when Transformable.
    func storedValue(of object: ManagedObject, _ column: StoredColumn, slot: Int, store: PersistentStore,
                             primaryKey: Int64) throws -> DatabaseValue {
        let values = object.values
        if values.layout === object.entity.propertyLayout {
            switch (values.slot(slot), column.type) {
            case (.absent, _): return .null
            case (.int(let number), .integer16), (.int(let number), .integer32), (.int(let number), .integer64):
                return number.databaseValue
            case (.double(let number), .double): return number.databaseValue
            default: break
            }
        }
        guard column.type == .transformable else {
            return StoredValues.databaseValue(values[column.name], type: column.type)
        }
        guard let value = values[column.name] else { return .null }
        if let encoded = value as? EncodedValue { return encoded.data.databaseValue }
        let place = ValuePlace(
            storeIdentifier: store.identifier, entityName: object.entity.name, attributeName: column.name,
            primaryKey: primaryKey)
        return try transformer(named: column.transformerName, entity: object.entity, key: column.name).transformedValue(
            value, at: place
        ).databaseValue
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
        for (position, column) in entity.storedColumns.enumerated() {
            arguments.append(
                try storedValue(
                    of: object, column, slot: entity.storedColumnSlots[position], store: store, primaryKey: primaryKey))
        }
        for (relationship, _) in entity.storedToOne { arguments.append(storedValue(of: object, relationship)) }
        arguments += try entityColumnValues(of: object, db).map(\.value)
        let sql = insertSQL[entity.name] ?? {
            let columns = ["Z_PK", "Z_ENT", "Z_OPT"] + entity.storedColumns.map(\.columnName)
                + entity.storedToOne.map(\.relationship.columnName) + entity.storedToOneEntityColumns.compactMap { $0 }
                let sql =
                    "INSERT INTO \(store.qualified(entity.rootEntity.tableName)) (\(columns.joined(separator: ", "))) "
                        + "VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
            insertSQL[entity.name] = sql
            return sql
        }()
        try db.executeCached(sql: sql, values: arguments)
    }

    /// Writes an updated object's changed columns if the row is still at the version this
    /// context read. Returns false when no column changed (only relationships stored elsewhere).
    private func updateRow(of object: ManagedObject, _ db: Database) throws -> Bool {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.objectID.primaryKey!
        var assignments: [String] = []
        var arguments: [DatabaseValue] = []
        for (position, column) in object.entity.storedColumns.enumerated()
        where object.changedKeys.contains(column.name) {
            assignments.append("\(column.columnName) = ?")
            arguments.append(
                try storedValue(
                    of: object, column, slot: object.entity.storedColumnSlots[position], store: store,
                    primaryKey: primaryKey))
        }
        for (relationship, _) in object.entity.storedToOne where object.changedKeys.contains(relationship.name) {
            assignments.append("\(relationship.columnName) = ?")
            arguments.append(storedValue(of: object, relationship))
        }
        for (column, value) in try entityColumnValues(of: object, db, changedOnly: true) {
            assignments.append("\(column) = ?")
            arguments.append(value)
        }
        guard !assignments.isEmpty else { return false }
        guard object.version < ManagedObject.largestRowNumber else {
            throw ObjectGraphError.damagedRow(store: store, root: root, primaryKey: primaryKey,
                                          "its version (Z_OPT) cannot grow any further")
        }
        arguments += [(object.version + 1).databaseValue, primaryKey.databaseValue, object.version.databaseValue]
        try db.executeCached(
            sql:
                "UPDATE \(store.qualified(root.tableName)) SET \(assignments.joined(separator: ", ")), Z_OPT = ? WHERE "
                    + "Z_PK = ? AND Z_OPT = ?",
                             values: arguments)
        guard db.changesCount == 0 else { return true }
        // At the row's version now, so the retry writes what the policy kept.
        return try settleChangedRow(of: object, db) ? try updateRow(of: object, db) : false
    }

    /// An updated object whose row changed or went since it was read, settled by the merge
    /// policy: true when it still has changes to write, at the row's version now.
    func settleChangedRow(of object: ManagedObject, _ db: Database) throws -> Bool {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        guard mergePolicy != .error else { throw conflict(object, db, store: store) }
        let (row, _, _) = try currentRow(of: object, db)
        rememberBeforeSettling(object)
        guard let row else {
            forget(object)
            return false
        }
        try resolveConflict(object, storedRow: row, root: root, store: store)
        return updatedSet.contains(object)
    }

    /// Deletes the rows of `objects` 500 a statement where each is as its object last saw it;
    /// a row changed or gone meanwhile goes through ``deleteRow(of:_:)`` and its merge policy.
    /// Returns the rows the policy kept, by their objects. (A cascade deletes rows by the hundred
    /// thousand: a statement a row was most of its save.)
    private func deleteRows(of objects: [ManagedObject], _ db: Database) throws -> [ObjectIdentifier: Row] {
        var kept: [ObjectIdentifier: Row] = [:]
        var entities: [EntityDescription] = []
        var objectsOf: [ObjectIdentifier: [ManagedObject]] = [:]
        for object in objects {
            let entity = ObjectIdentifier(object.entity)
            if objectsOf[entity] == nil { entities.append(object.entity) }
            objectsOf[entity, default: []].append(object)
        }
        for entity in entities {
            let root = entity.rootEntity
            let store = try coordinator.store(for: root)
            let table = store.qualified(root.tableName)
            let joins = entity.relationships.filter { SQLiteSchema.usesJoinTable($0, in: model) }
                .map { SQLiteSchema.joinTable(for: $0, of: entity, in: model) }
                .map { "\(store.qualified($0.name)) WHERE \($0.sourceColumn)" }
            // Always 500 parameters (NULLs match nothing): one cached statement of each, whatever the count.
            let inChunk = "IN (\(placeholders(500)))"
            let padded = { (keys: [DatabaseValue]) in
                keys + repeatElement(DatabaseValue.null, count: 500 - keys.count)
            }
            for chunk in (objectsOf[ObjectIdentifier(entity)] ?? []).chunked(500) {
                let keys = padded(chunk.map { $0.objectID.primaryKey!.databaseValue })
                var versions: [Int64: Int64] = [:]
                let select = "SELECT Z_PK, Z_OPT FROM \(table) WHERE Z_PK \(inChunk)"
                try db.forEachRow(sql: select, arguments: keys) { row in
                    guard let key = row.int64(at: 0), let version = row.int64(at: 1) else { return }
                    versions[key] = Self.keptVersion(version)
                }
                var unchanged: [DatabaseValue] = []
                for object in chunk {
                    let key = object.objectID.primaryKey!
                    if versions[key] == object.version {
                        unchanged.append(key.databaseValue)
                    } else if let row = try deleteRow(of: object, db) {
                        kept[ObjectIdentifier(object)] = row
                    }
                }
                guard !unchanged.isEmpty else { continue }
                try db.executeCached(sql: "DELETE FROM \(table) WHERE Z_PK \(inChunk)", values: padded(unchanged))
                for join in joins {
                    try db.executeCached(sql: "DELETE FROM \(join) \(inChunk)", values: padded(unchanged))
                }
            }
        }
        return kept
    }

    /// Deletes an object's row; returns the row when the merge policy keeps it, changed
    /// meanwhile (rollback, store trump), and nil when it is deleted.
    private func deleteRow(of object: ManagedObject, _ db: Database) throws -> Row? {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let primaryKey = object.objectID.primaryKey!
        // Cached: a cascade deletes rows by the hundred thousand.
        try db.executeCached(sql: "DELETE FROM \(store.qualified(root.tableName)) WHERE Z_PK = ? AND Z_OPT = ?",
                             values: [primaryKey.databaseValue, object.version.databaseValue])
        if db.changesCount == 0 {
            guard mergePolicy != .error else { throw conflict(object, db, store: store) }
            let (row, _, _) = try currentRow(of: object, db)
            // The object takes the row once the save has committed: should it fail, the context
            // keeps the deletion as it was.
            if let row, mergePolicy == .rollback || mergePolicy == .mergeByPropertyStoreTrump { return row }
            try db.execute(sql: "DELETE FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?",
                           arguments: [primaryKey])
        }
        for relationship in object.entity.relationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            try db.executeCached(sql: "DELETE FROM \(store.qualified(join.name)) WHERE \(join.sourceColumn) = ?",
                                 values: [primaryKey.databaseValue])
        }
        return nil
    }

    /// A deletion the merge policy kept, once committed: the object is no longer deleted, holds
    /// its row as the save left it, and is announced again as an undeleted object is (inserted).
    private func restoreKeptDeletion(_ object: ManagedObject, row: Row) {
        object.isPreparedForDeletion = false
        unprocessedInserted.insert(object)
        let root = object.entity.rootEntity
        guard let store = try? coordinator.store(for: root) else { return turnIntoFault(object) }
        do {
            try load(row, into: object, root: root, store: store)
        } catch {
            // A value that does not decode fails where it is read, as any fault's, at this version.
            turnIntoFault(object)
            if let version = try? Self.rowVersion(row, root: root, store: store) { object.version = version }
        }
    }

    /// Writes what changed in an object's many-to-many relationships since the last save: the
    /// rows of the members that joined or left, or every member's after a whole replacement.
    private func writeJoinRows(of object: ManagedObject, _ db: Database) throws {
        guard let primaryKey = primaryKey(of: object) else { return }
        for relationship in object.entity.relationships where SQLiteSchema.usesJoinTable(relationship, in: model) {
            guard let members = object.values[relationship.name] as? RelationshipMembers,
                  members.hasUnsavedChanges || (object.isInserted && members.count > 0) else { continue }
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            let table = try coordinator.store(for: object.entity.rootEntity).qualified(join.name)
            let insertSQL =
                "INSERT OR IGNORE INTO \(table) (\(join.sourceColumn), \(join.destinationColumn)) VALUES (?, ?)"
            let joined: [ManagedObject]
            if members.rewritesAll || object.isInserted {
                try db.execute(sql: "DELETE FROM \(table) WHERE \(join.sourceColumn) = ?", arguments: [primaryKey])
                joined = members.objects
            } else {
                for member in members.removed.values {
                    guard let destinationKey = self.primaryKey(of: member) else { continue }
                    try db.executeCached(
                        sql: "DELETE FROM \(table) WHERE \(join.sourceColumn) = ? AND \(join.destinationColumn) = ?",
                        values: [primaryKey.databaseValue, destinationKey.databaseValue])
                }
                joined = members.added
            }
            for destination in joined where !deletedSet.contains(destination) {
                guard let destinationKey = self.primaryKey(of: destination) else { continue }
                try db.executeCached(sql: insertSQL, values: [primaryKey.databaseValue, destinationKey.databaseValue])
            }
        }
    }

    /// Writes the order of an object's ordered to-many relationships that changed, as Core
    /// Data keeps it: each member's `Z_FOK_` value is its position (1, 2, ...). When only the
    /// changes were read, the members the store held keep their order and the new ones follow.
    private func writeOrder(of object: ManagedObject, _ db: Database) throws {
        guard let primaryKey = primaryKey(of: object) else { return }
        for relationship in object.entity.relationships where relationship.isOrdered {
            guard let members = object.values[relationship.name] as? RelationshipMembers,
                  members.hasUnsavedChanges || (object.isInserted && members.count > 0) else { continue }
            guard let place = SQLiteSchema.orderPlace(of: relationship, of: object.entity, in: model),
                  let destination = model.entity(named: relationship.destinationEntityName) else { continue }
            let store = try coordinator.store(for: SQLiteSchema.usesJoinTable(relationship, in: model)
                ? object.entity.rootEntity : destination.rootEntity)
            let (table, ownerColumn, memberColumn, orderColumn) =
                (store.qualified(place.table), place.owner, place.member, place.order)
            let stored = try Int64.fetchAll(
                db, sql: "SELECT \(memberColumn) FROM \(table) WHERE \(ownerColumn) = ? ORDER BY \(orderColumn), "
                    + "\(memberColumn)", arguments: [primaryKey])
            let listed: [Int64]
            if members.isComplete {
                listed = members.objects.compactMap { self.primaryKey(of: $0) }
            } else {
                let joined = members.unsavedChanges().objects.compactMap { self.primaryKey(of: $0) }
                let joinedSet = Set(joined)
                listed = stored.filter { !joinedSet.contains($0) } + joined
            }
            // Only what the store links now: a member deleted in this save has no row left.
            let linked = Set(stored)
            let update = "UPDATE \(table) SET \(orderColumn) = ? WHERE \(ownerColumn) = ? AND \(memberColumn) = ?"
            for (position, key) in listed.filter(linked.contains).enumerated() {
                try db.executeCached(
                    sql: update,
                    values: [Int64(position + 1).databaseValue, primaryKey.databaseValue, key.databaseValue])
            }
        }
    }

    private func conflict(_ object: ManagedObject, _ db: Database, store: PersistentStore) -> ObjectGraphError {
        let root = object.entity.rootEntity
        let what: String
        do {
            let current = try Int64.fetchOne(
                db, sql: "SELECT Z_OPT FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?",
                arguments: [object.objectID.primaryKey!])
            what = current.map { "was changed by someone else (version \(object.version) read, now \($0))" }
                ?? "was deleted by someone else"
        } catch {
            // The conflict stands; only which kind it is could not be read.
            what = "was changed or deleted by someone else"
        }
        return ObjectGraphError(code: .mergeConflict,
            message:
                "merge conflict: \(object.entity.name) row \(object.objectID.primaryKey!) \(what) since it was read; "
                    + "nothing was saved",
                                objects: [object])
    }

    // MARK: - After commit

    private func didCommit(
        inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], cascaded: [CascadedRows],
        rowsUpdated: Set<ObjectIdentifier>
    ) {
        for object in inserted {
            let primaryKey = object.pendingPrimaryKey!
            object.pendingPrimaryKey = nil
            let store = coordinator.persistentStore(for: object.entity.rootEntity)?.identifier
            object.objectID = objectID(of: object.entity, storeIdentifier: store, kind: .permanent, number: primaryKey)
            object.version = 1
        }
        // At once: a bulk insert's runs of consecutive keys are kept as they are, or else the
        // table grows once (doubling step by step held the old and the new table at once).
        registered.register(saved: inserted)
        for object in updated where rowsUpdated.contains(ObjectIdentifier(object)) { object.version += 1 }
        finishSave(inserted: inserted, updated: updated, deleted: deleted, cascaded: cascaded,
                   forgotten: forgetObjects(of: cascaded))
    }

    /// Marks what a save wrote (to the stores or into the parent) as committed, forgets the
    /// deleted objects and announces the save: rows deleted by store cascades by their IDs only.
    func finishSave(inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject],
                    cascaded: [CascadedRows] = [], forgotten: [ManagedObject] = []) {
        for object in [inserted, updated].joined() {
            var committed = object.values
            for name in object.entity.toManyRelationshipNames {
                committed[name] = nil
                // Written now: members read keep no change list; a fault's changes are in the store.
                guard let members = object.values[name] as? RelationshipMembers else { continue }
                if members.isComplete { members.forgetChanges() } else { object.values[name] = nil }
            }
            object.committedValues = committed
            object.changedKeys = []
            object.isPendingInsert = false
        }
        if deleted.count >= 64, deleted.count >= registered.count / 4 {
            // The objects forgotten are exactly the deleted set's now.
            registered.removeAll { deletedSet.contains($0) }
        } else {
            for object in deleted {
                guard let primaryKey = object.objectID.primaryKey else { continue }
                let root = object.entity.rootEntity
                registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)] = nil
            }
        }
        // A parent's unsaved insert, deleted here and saved into the parent, is gone from both.
        for object in deleted where !parentInserted.isEmpty && object.objectID.isTemporaryID
            && parentInserted[object.objectID] === object {
            parentInserted[object.objectID] = nil
        }
        var sharedScopes: [ObjectIdentifier: ObjectIDScope] = [:]
        for object in deleted { object.leaveContext(sharedScopes: &sharedScopes) }
        insertedSet.removeAll()
        updatedSet.removeAll()
        deletedSet.removeAll()
        // Undo history stays: undoing a saved change makes the unsaved change that reverses it.
        saveGeneration += 1
        var deletedIDs = ObjectIDList(deleted.lazy.map(\.objectID))
        objectIDs(of: cascaded, into: &deletedIDs)
        notificationCenter.post(name: Self.didSaveNotification, object: self, userInfo: [
            Self.insertedObjectsKey: inserted,
            Self.updatedObjectsKey: updated,
            Self.deletedObjectsKey: forgotten.isEmpty ? deleted : deleted + forgotten,
            Self.insertedObjectIDsKey: ObjectIDList(inserted.lazy.map(\.objectID)),
            Self.updatedObjectIDsKey: ObjectIDList(updated.lazy.map(\.objectID)),
            Self.deletedObjectIDsKey: deletedIDs,
        ])
    }
}

extension ManagedObjectContext {
    /// Gives inserted objects their permanent IDs now, before they are saved, as Core Data's
    /// `obtainPermanentIDs(for:)`: their primary keys are taken from the store's allocation
    /// (`Z_PRIMARYKEY`), so IDs passed to other contexts or kept by the application stay valid
    /// after the save. Objects that have one already are left alone. Keys taken by a save that
    /// then fails or is rolled back stay unused, as in Core Data.
    ///
    /// - throws: the store's error; nothing changes then.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        let waiting = objects.filter { $0.managedObjectContext === self && $0.objectID.isTemporaryID }
        precondition(waiting.allSatisfy(insertedSet.contains), "Only inserted objects have temporary IDs")
        guard !waiting.isEmpty else { return }
        let roots = Dictionary(grouping: waiting) { ObjectIdentifier($0.entity.rootEntity) }
        var assigned: [(ManagedObject, ObjectID)] = []
        try wrapStoreErrors(.saveFailed, "cannot obtain permanent IDs") {
            try coordinator.write(stores: nil) { db in
                for group in roots.values {
                    let root = group[0].entity.rootEntity
                    let store = try coordinator.store(for: root)
                    var key = try coordinator.allocatePrimaryKeys(db, root: root, count: group.count)
                    for object in group {
                        assigned.append((object, permanentID(of: object.entity, in: store, primaryKey: key)))
                        key += 1
                    }
                }
            }
        }
        for (object, objectID) in assigned { object.objectID = objectID }
    }
}
