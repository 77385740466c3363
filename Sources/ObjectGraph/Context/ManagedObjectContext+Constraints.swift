import Foundation
import GRDB

extension ManagedObjectContext {
    /// Checks the model's uniqueness constraints for the objects a save writes, inside the
    /// save's transaction, so no other process can slip a duplicate in between.
    ///
    /// An object conflicts with another object of the same save, or with a stored row of the
    /// constraint's entity (or a sub-entity) that this save neither deletes nor moves off those
    /// values. A constraint with a nil value is not checked, as SQLite's unique indexes allow
    /// several NULLs. No value is named in the error: constrained values may be secrets.
    ///
    /// When an inserted object has a stored row's values, ``mergePolicy`` decides, as Core Data's
    /// policies do for constraint conflicts: with `.error` the save fails; with any other policy
    /// the object takes the row's identity, so the row is updated instead of a duplicate inserted,
    /// and the policy settles their values as for a row changed meanwhile (object trump: the
    /// object's values win; overwrite: its attributes replace the row's, unset ones too; store
    /// trump: the stored values win, the object's kept where the row has none; rollback: the row).
    /// Conflicts between objects of the same save, with a row of another entity, with a row
    /// registered here with unsaved changes, or made by an update always fail.
    ///
    /// - returns: the inserted objects that took a stored row's identity (now updated objects).
    /// - throws: ``ObjectGraphError`` 133021 naming the object, the entity and the attributes.
    func checkUniquenessConstraints(
        inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], _ db: Database
    ) throws -> [ManagedObject] {
        let constrained = [inserted, updated].joined().filter { !$0.entity.allUniquenessConstraints.isEmpty }
        guard !constrained.isEmpty else { return [] }
        var adopted: [ManagedObject] = []
        // Rows whose stored constrained values this save removes or replaces (the new values of
        // the latter are checked as objects of this save).
        var leaving: Set<ObjectKey> = []
        let moving = updated.filter { object in
            object.entity.allUniquenessConstraints.contains { !object.changedKeys.isDisjoint(with: $0.constraint) }
        }
        for object in deleted + moving {
            guard let key = object.objectID.primaryKey else { continue }
            leaving.insert(ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: key))
        }
        var seen: [[DatabaseValue]: ManagedObject] = [:]
        for object in constrained {
            for (owner, constraint) in object.entity.allUniquenessConstraints {
                let isUpdate = object.objectID.primaryKey != nil
                if isUpdate, object.changedKeys.isDisjoint(with: constraint) { continue }
                let values = constraint.map { name in
                    StoredValues.databaseValue(
                        object.values[name], type: owner.attribute(named: name)?.type ?? .string)
                }
                guard !values.contains(where: \.isNull) else { continue }
                let identity = [owner.name.databaseValue] + values
                if let other = seen[identity] {
                    throw constraintConflict(
                        object, owner, constraint, with: "another \(other.entity.name) of this save")
                }
                seen[identity] = object
                let root = owner.rootEntity
                let store = try coordinator.store(for: root)
                let numbers = owner.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")
                let conditions = constraint.compactMap { owner.attribute(named: $0)?.columnName }
                    .map { "\($0) = ?" }.joined(separator: " AND ")
                let sql =
                    "SELECT Z_PK FROM \(store.qualified(root.tableName)) WHERE Z_ENT IN (\(numbers)) AND \(conditions)"
                for key in try Int64.fetchAll(try db.cachedStatement(sql: sql), arguments: StatementArguments(values)) {
                    guard key != object.objectID.primaryKey,
                          !leaving.contains(ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: key)) else {
                        continue
                    }
                    guard mergePolicy != .error, !isUpdate,
                          try adopt(key, root: root, store: store, by: object, db) else {
                        throw constraintConflict(object, owner, constraint, with: "the stored \(root.name) row \(key)")
                    }
                    adopted.append(object)
                }
            }
        }
        return adopted
    }

    /// Rows that move between unique values in one save (two swapping them, or a chain of
    /// renames) would meet one another's old values when written one at a time, though together
    /// they conflict with nothing: their changed constrained columns are set to NULL first, which
    /// a unique index lets any number of rows hold. A row changed meanwhile is settled by the
    /// merge policy first, as its update would be.
    func vacateUniqueValues(of updated: [ManagedObject], _ db: Database) throws {
        let moving = updated.filter { !changedConstrainedColumns(of: $0).isEmpty }
        guard moving.count > 1 else { return }
        for object in moving {
            guard let primaryKey = object.objectID.primaryKey else { continue }
            let root = object.entity.rootEntity
            let table = try coordinator.store(for: root).qualified(root.tableName)
            // Twice at most: the second time at the version the policy settled on.
            for _ in 0..<2 {
                let columns = changedConstrainedColumns(of: object)
                guard !columns.isEmpty else { break }
                let assignments = columns.map { "\($0) = NULL" }.joined(separator: ", ")
                try db.executeCached(sql: "UPDATE \(table) SET \(assignments) WHERE Z_PK = ? AND Z_OPT = ?",
                                     values: [primaryKey.databaseValue, object.version.databaseValue])
                guard db.changesCount == 0, try settleChangedRow(of: object, db) else { break }
            }
        }
    }

    /// The constrained columns whose value the object changes: a key changed back to its stored
    /// value, or an adopted row's (all its keys count as changed), moves nothing.
    private func changedConstrainedColumns(of object: ManagedObject) -> [String] {
        var columns: [String] = []
        for (owner, constraint) in object.entity.allUniquenessConstraints {
            for name in constraint where object.changedKeys.contains(name)
                && !Self.sameStoredValue(object.values[name], object.committedValues[name]) {
                guard let column = owner.attribute(named: name)?.columnName, !columns.contains(column) else { continue }
                columns.append(column)
            }
        }
        return columns
    }

    /// A row SQLite's unique index refuses although the check above passed it (a merge policy
    /// kept another row's value meanwhile) is the constraint conflict it is, not a store error;
    /// an index the model does not declare stays the store's error.
    func refusingDuplicates<T>(_ object: ManagedObject, _ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            // SQLite names the index's columns: "UNIQUE constraint failed: ZITEM.ZTITLE, ZITEM.ZKIND".
            let refused = Set((error.message ?? "").split(separator: ":").last?.split(separator: ",")
                .compactMap { $0.split(separator: ".").last.map { String($0).trimmingCharacters(in: .whitespaces) } }
                ?? [])
            let declared = object.entity.allUniquenessConstraints.first { owner, constraint in
                Set(constraint.compactMap { owner.attribute(named: $0)?.columnName }) == refused
            }
            guard let (owner, constraint) = declared else { throw error }
            throw constraintConflict(object, owner, constraint, with: "a stored row")
        }
    }

    /// Gives an inserted object the identity of the stored row it conflicts with, settling their
    /// values by the merge policy. Returns false when it cannot: the row is of another entity, or
    /// registered here with unsaved changes (two live objects cannot become one).
    private func adopt(
        _ primaryKey: Int64, root: EntityDescription, store: PersistentStore, by object: ManagedObject, _ db: Database
    ) throws -> Bool {
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName))"
            + " WHERE Z_PK = ?"
        guard let row = try Row.fetchOne(try db.cachedStatement(sql: sql), arguments: [primaryKey]),
              try Self.optionalInteger(row, 1, "Z_ENT", root: root, store: store) == Int64(object.entity.entityNumber)
        else { return false }
        let key = ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)
        if let registeredObject = registered[key] {
            guard !registeredObject.hasChanges else { return false }
            forget(registeredObject)
        }
        // A to-many of the new object adds what it gained to what the row lists (read on the next
        // access), whether or not it was read; one assigned whole is a value like any other.
        for name in object.entity.toManyRelationshipNames where object.loadedToMany.contains(name) {
            let members = object.values[name] as? RelationshipMembers
            guard members?.rewritesAll != true else { continue }
            object.values[name] = members.flatMap { $0.hasUnsavedChanges ? $0.unsavedChanges() : nil }
            object.loadedToMany.remove(name)
        }
        // Every value the new object holds counts as its change, to win or lose by the policy.
        let held = Set(object.values.map(\.key))
        object.changedKeys = held
        object.isPendingInsert = false
        insertedSet.remove(object)
        discardUnprocessed(object)
        object.assign(permanentID(of: object.entity, in: store, primaryKey: primaryKey), in: self)
        registered[key] = object
        try resolveConflict(object, storedRow: row, root: root, store: store)
        if mergePolicy == .overwrite {
            // The object's attributes replace the row's, also where the object has none.
            for column in object.entity.storedColumns where !held.contains(column.name) {
                object.values[column.name] = nil
            }
        }
        return true
    }

    private func constraintConflict(
        _ object: ManagedObject, _ owner: EntityDescription, _ constraint: [String], with other: String
    ) -> ObjectGraphError {
        let which =
            object.objectID.primaryKey.map { "\(object.entity.name) row \($0)" } ?? "a new \(object.entity.name)"
        return ObjectGraphError(
            code: .constraintConflict,
            message: "\(which) has the same \(constraint.joined(separator: ", ")) as \(other) "
                + "(uniqueness constraint of \(owner.name))",
            objects: [object])
    }
}

extension EntityDescription {
    /// This entity's uniqueness constraints and its ancestors', each with the entity declaring it.
    var allUniquenessConstraints: [(owner: EntityDescription, constraint: [String])] {
        (superentity?.allUniquenessConstraints ?? []) + uniquenessConstraints.map { (self, $0) }
    }
}
