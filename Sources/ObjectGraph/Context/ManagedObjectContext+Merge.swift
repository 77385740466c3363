import Foundation
import GRDB

extension PersistentStoreCoordinator {
    /// A cheap token that moves whenever another connection (another coordinator or another
    /// process) commits to one of the stores: SQLite's `PRAGMA data_version` per store.
    /// Commits made through this coordinator do not move it.
    ///
    /// See <https://sqlite.org/pragma.html#pragma_data_version>.
    public func externalChangeToken() throws -> [Int] {
        try wrapStoreErrors(.objectNotFound, "cannot read the stores' change counters") {
            try read { db in
                try persistentStores.map { store in
                    try Int.fetchOne(db, sql: "PRAGMA \"\(store.schemaName)\".data_version") ?? 0
                }
            }
        }
    }
}

/// What a merge changed in a context: the registered objects reloaded, made, or forgotten.
struct MergedChanges {
    var inserted: [ManagedObject] = []
    var updated: [ManagedObject] = []
    var deleted: [ManagedObject] = []
}

extension ManagedObjectContext {
    /// In ``objectsDidChangeNotification``: present when another process changed the stores,
    /// so any fetched result may be stale (objects it inserted are in no list).
    public static let invalidatedAllObjectsKey = "invalidatedAll"

    // MARK: - Changes saved by another context

    /// Brings the changes another context saved into this one, as Core Data's
    /// `mergeChanges(fromContextDidSave:)`: registered objects it updated are re-read,
    /// objects it deleted leave this context, objects it inserted are read in. Where this
    /// context has unsaved changes to such an object, ``mergePolicy`` settles them (with
    /// `.error` the object is left as it is, and its save will conflict). Posts ``objectsDidChangeNotification`` with
    /// what changed here, so fetched results controllers follow.
    ///
    /// The notification may come from a context on another queue: only its object IDs are read.
    ///
    /// - throws: a store error while reading the changed rows.
    public func mergeChanges(fromContextDidSave notification: Notification) throws {
        let info = notification.userInfo ?? [:]
        try mergeChanges(inserted: info[Self.insertedObjectIDsKey] as? ObjectIDList ?? [],
                         updated: info[Self.updatedObjectIDsKey] as? ObjectIDList ?? [],
                         deleted: info[Self.deletedObjectIDsKey] as? ObjectIDList ?? [])
    }

    /// Merges saved changes given by object ID (see ``mergeChanges(fromContextDidSave:)``).
    public func mergeChanges(inserted: some Sequence<ObjectID>, updated: some Sequence<ObjectID>,
                             deleted: some Sequence<ObjectID>) throws {
        var merged = MergedChanges()
        for objectID in deleted {
            guard let object = registeredObject(for: objectID),
                  !(object.hasChanges && mergePolicy == .error) else { continue }
            forget(object)
            merged.deleted.append(object)
        }
        let updatedObjects = updated.compactMap(registeredObject(for:))
        let result = try reloadRows(of: updatedObjects)
        merged.updated = result.reloaded
        merged.deleted += result.gone
        for objectID in inserted where registeredObject(for: objectID) == nil {
            guard let primaryKey = objectID.primaryKey, let entity = model.entity(named: objectID.entityName),
                  let object = try object(primaryKey: primaryKey, root: entity.rootEntity) else { continue }
            merged.inserted.append(object)
        }
        postMerged(merged)
    }

    // MARK: - Changes committed by another process

    /// Whether another connection committed since this context last merged (or first asked),
    /// without merging: one `PRAGMA data_version` per store.
    public func hasExternalChanges() throws -> Bool {
        let token = try coordinator.externalChangeToken()
        guard let known = knownExternalChangeToken else {
            knownExternalChangeToken = token
            return false
        }
        return token != known
    }

    /// Checks whether another connection (another process, or a context on another
    /// coordinator) committed to the stores since the last check, and if so re-reads every
    /// registered object without unsaved changes whose row moved on (by its version), forgets
    /// those whose rows are gone, and posts ``objectsDidChangeNotification`` (fetched results
    /// controllers then re-fetch).
    ///
    /// The check is one `PRAGMA data_version` per store: cheap enough to poll.
    ///
    /// - returns: true when another connection had committed.
    @discardableResult
    public func mergeExternalChanges() throws -> Bool {
        let token = try coordinator.externalChangeToken()
        guard let known = knownExternalChangeToken else {
            knownExternalChangeToken = token
            return false
        }
        guard token != known else { return false }
        knownExternalChangeToken = token
        let result = try reloadRows(of: Array(registered.values))
        postMerged(MergedChanges(updated: result.reloaded, deleted: result.gone), invalidatesAll: true)
        return true
    }

    /// Waits until another connection commits to the stores (polling
    /// ``PersistentStoreCoordinator/externalChangeToken()``), then merges as
    /// ``mergeExternalChanges()`` does.
    ///
    /// - returns: false when `timeout` passed with no outside commit.
    public func waitForExternalChanges(timeout: TimeInterval, pollInterval: TimeInterval = 0.02) throws -> Bool {
        if knownExternalChangeToken == nil { knownExternalChangeToken = try coordinator.externalChangeToken() }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if try mergeExternalChanges() { return true }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            Thread.sleep(forTimeInterval: min(pollInterval, left))
        }
    }

    // MARK: - Plumbing

    func registeredObject(for objectID: ObjectID) -> ManagedObject? {
        guard let primaryKey = objectID.primaryKey, let entity = model.entity(named: objectID.entityName) else {
            return insertedSet.objects.first { $0.objectID == objectID }
        }
        return registered[ObjectKey(rootEntityNumber: entity.rootEntity.entityNumber, primaryKey: primaryKey)]
    }

    /// Drops a saved object from the context, changes and all (its row is gone).
    func forget(_ object: ManagedObject) {
        if let primaryKey = object.objectID.primaryKey {
            let key = ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: primaryKey)
            registered[key] = nil
        }
        updatedSet.remove(object)
        deletedSet.remove(object)
        discardUnprocessed(object)
        object.managedObjectContext = nil
    }

    /// Re-reads the rows of saved objects in bulk. An object whose row moved on takes the
    /// stored values, with its own unsaved changes kept on top; objects whose rows are gone
    /// are forgotten.
    func reloadRows(of objects: [ManagedObject]) throws -> (reloaded: [ManagedObject], gone: [ManagedObject]) {
        var byRoot: [ObjectIdentifier: (root: EntityDescription, objects: [Int64: ManagedObject])] = [:]
        for object in objects {
            guard let primaryKey = object.objectID.primaryKey, object.managedObjectContext === self else { continue }
            let root = object.entity.rootEntity
            byRoot[ObjectIdentifier(root), default: (root, [:])].objects[primaryKey] = object
        }
        var reloaded: [ManagedObject] = []
        var gone: [ManagedObject] = []
        for (root, group) in byRoot.values {
            let store = try coordinator.store(for: root)
            let table = store.qualified(root.tableName)
            func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }
            // Versions first, read in place: only the rows that moved on are read whole and decoded
            // (a merge after another process's save re-read all 100,000 rows a browser holds).
            var seen: Set<Int64> = []
            var moved: [Int64] = []
            let keys = Array(group.keys)
            for start in stride(from: 0, to: keys.count, by: 500) {
                let chunk = Array(keys[start..<min(start + 500, keys.count)])
                try wrapStoreErrors(.objectNotFound, "cannot re-read \(root.name) rows") {
                    try coordinator.read { db in
                        try db.forEachRow(
                            sql: "SELECT Z_PK, Z_OPT FROM \(table) WHERE Z_PK IN (\(placeholders(chunk.count)))",
                            arguments: chunk.map(\.databaseValue)
                        ) { row in
                            let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
                            seen.insert(primaryKey)
                            let version = Self.keptVersion(try Self.integer(row, 1, "Z_OPT", root: root, store: store))
                            if let object = group[primaryKey], object.version != version { moved.append(primaryKey) }
                        }
                    }
                }
            }
            for start in stride(from: 0, to: moved.count, by: 500) {
                let chunk = moved[start..<min(start + 500, moved.count)]
                let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(table)"
                    + " WHERE Z_PK IN (\(placeholders(chunk.count)))"
                let rows = try wrapStoreErrors(.objectNotFound, "cannot re-read \(root.name) rows") {
                    try coordinator.read { db in
                        try Row.fetchAll(db, sql: sql, arguments: StatementArguments(Array(chunk)))
                    }
                }
                // A row deleted between the two reads is gone, as if the first had missed it.
                seen.subtract(chunk)
                for row in rows {
                    let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
                    seen.insert(primaryKey)
                    let version = try Self.rowVersion(row, root: root, store: store)
                    guard let object = group[primaryKey], object.version != version else { continue }
                    if object.changedKeys.isEmpty && !deletedSet.contains(object) {
                        try load(row, into: object, root: root, store: store)
                    } else {
                        // Unsaved changes meet a newer row: the merge policy decides (or the save will).
                        guard mergePolicy != .error, !deletedSet.contains(object) else { continue }
                        try resolveConflict(object, storedRow: row, root: root, store: store)
                    }
                    reloaded.append(object)
                }
            }
            for (primaryKey, object) in group where !seen.contains(primaryKey) {
                if object.hasChanges && mergePolicy == .error { continue }
                forget(object)
                gone.append(object)
            }
        }
        return (reloaded, gone)
    }

    private func postMerged(_ merged: MergedChanges, invalidatesAll: Bool = false) {
        let isEmpty = merged.inserted.isEmpty && merged.updated.isEmpty && merged.deleted.isEmpty
        guard invalidatesAll || !isEmpty else { return }
        // Inverse to-many arrays may now miss or hold objects whose to-one moved: re-read on access.
        for object in registered.values where !object.hasChanges { object.forgetLoadedMembers() }
        // Pending local changes go out first, in their own notification.
        processPendingChanges()
        var userInfo: [String: Any] = [
            Self.insertedObjectsKey: merged.inserted,
            Self.updatedObjectsKey: merged.updated,
            Self.deletedObjectsKey: merged.deleted,
        ]
        if invalidatesAll { userInfo[Self.invalidatedAllObjectsKey] = true }
        notificationCenter.post(name: Self.objectsDidChangeNotification, object: self, userInfo: userInfo)
    }
}

// MARK: - Merging automatically

extension ManagedObjectContext {
    /// Merges the saves of other contexts into this one as they happen, as Core Data's
    /// `automaticallyMergesChangesFromParent`: for a context on the coordinator, the saves of
    /// the coordinator's other such contexts (siblings); for a child, its parent's saves.
    ///
    /// Each save is merged on this context's queue, after the save returns (as
    /// ``mergeChanges(fromContextDidSave:)`` would), with this context's ``mergePolicy`` for
    /// objects it changed too; a store error while merging is thrown by its next fetch or save.
    public var automaticallyMergesChangesFromParent: Bool {
        get { mergeObserver != nil }
        set {
            guard newValue != (mergeObserver != nil) else { return }
            if let mergeObserver {
                notificationCenter.removeObserver(mergeObserver)
                self.mergeObserver = nil
                return
            }
            nonisolated(unsafe) weak let context = self
            mergeObserver = notificationCenter.addObserver(
                forName: Self.didSaveNotification, object: nil, queue: nil
            ) { notification in
                guard let context, let saver = notification.object as? ManagedObjectContext, saver !== context,
                      context.parent.map({ $0 === saver })
                        ?? (saver.parent == nil && saver.coordinator === context.coordinator)
                else { return }
                // Only IDs cross to this context's queue.
                let info = notification.userInfo ?? [:]
                let ids = [Self.insertedObjectIDsKey, Self.updatedObjectIDsKey, Self.deletedObjectIDsKey].map {
                    info[$0] as? ObjectIDList ?? []
                }
                context.perform {
                    do {
                        try context.mergeChanges(inserted: ids[0], updated: ids[1], deleted: ids[2])
                    } catch {
                        if context.deferredError == nil { context.deferredError = error }
                    }
                }
            }
        }
    }
}
