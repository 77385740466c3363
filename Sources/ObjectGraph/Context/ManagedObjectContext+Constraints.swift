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
        var seen = ConstrainedValuesSeen()
        var heldKeys: [HeldKeysShape: Set<String>] = [:]
        for object in constrained {
            for (position, (owner, constraint)) in object.entity.allUniquenessConstraints.enumerated() {
                // A new object may have a permanent ID already (obtainPermanentIDs): still an insert.
                let isUpdate = !insertedSet.contains(object)
                if isUpdate, object.changedKeys.isDisjoint(with: constraint) { continue }
                let values = Self.constrainedValues(of: object, owner, constraint)
                guard !values.contains(where: \.isNull) else { continue }
                if let other = seen.insert(object, owner: owner, constraint: constraint, position: position,
                                           values: values) {
                    throw constraintConflict(
                        object, owner, constraint, with: "another \(other.entity.name) of this save")
                }
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
                          try adopt(key, root: root, store: store, by: object, heldKeys: &heldKeys, db) else {
                        throw constraintConflict(object, owner, constraint, with: "the stored \(root.name) row \(key)")
                    }
                    adopted.append(object)
                    // The row moves off the stored values the policy left changed (vacated first,
                    // below): other objects of this save may take them (the new ones are checked
                    // as the object's).
                    if !changedConstrainedColumns(of: object, isRowCurrent: true).isEmpty {
                        leaving.insert(ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: key))
                    }
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
    /// `readInThisSave`: objects whose rows this save's transaction read (adopted by a new
    /// object): their committed values are the row's, so a value equal to one stays in place.
    func vacateUniqueValues(
        of updated: [ManagedObject], readInThisSave: Set<ObjectIdentifier>, _ db: Database
    ) throws {
        func vacated(_ object: ManagedObject) -> [String] {
            changedConstrainedColumns(of: object, isRowCurrent: readInThisSave.contains(ObjectIdentifier(object)))
        }
        let moving = updated.filter { !vacated($0).isEmpty }
        guard moving.count > 1 else { return }
        for object in moving {
            guard let primaryKey = object.objectID.primaryKey else { continue }
            let root = object.entity.rootEntity
            let table = try coordinator.store(for: root).qualified(root.tableName)
            // Twice at most: the second time at the version the policy settled on.
            for _ in 0..<2 {
                let columns = vacated(object)
                guard !columns.isEmpty else { break }
                let assignments = columns.map { "\($0) = NULL" }.joined(separator: ", ")
                try db.executeCached(sql: "UPDATE \(table) SET \(assignments) WHERE Z_PK = ? AND Z_OPT = ?",
                                     values: [primaryKey.databaseValue, object.version.databaseValue])
                guard db.changesCount == 0, try settleChangedRow(of: object, db) else { break }
            }
        }
    }

    /// The constrained columns whose value the object changes. One changed back to the value it
    /// read is vacated too, unless the row was read in this transaction: the row may hold another
    /// value by now, written by another process.
    private func changedConstrainedColumns(of object: ManagedObject, isRowCurrent: Bool) -> [String] {
        var columns: [String] = []
        for (owner, constraint) in object.entity.allUniquenessConstraints {
            for name in constraint where object.changedKeys.contains(name) {
                if isRowCurrent, Self.sameStoredValue(object.values[name], object.committedValues[name]) { continue }
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
    /// `heldKeys`: the sets of keys objects of this save hold, one per shape, shared by the
    /// objects that hold the same keys (a set each took a fifth of an upsert's memory).
    private func adopt(
        _ primaryKey: Int64, root: EntityDescription, store: PersistentStore, by object: ManagedObject,
        heldKeys: inout [HeldKeysShape: Set<String>], _ db: Database
    ) throws -> Bool {
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName))"
            + " WHERE Z_PK = ?"
        guard let row = try Row.fetchOne(try db.cachedStatement(sql: sql), arguments: [primaryKey]),
              try Self.optionalInteger(row, 1, "Z_ENT", root: root, store: store) == Int64(object.entity.entityNumber)
        else { return false }
        let key = ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)
        let tookARegisteredObjectsRow = registered[key] != nil
        if let registeredObject = registered[key] {
            guard !registeredObject.hasChanges else { return false }
            rememberBeforeSettling(registeredObject)
            forget(registeredObject)
        }
        // A failed save gives it back its new identity and its own values.
        rememberBeforeAdopting(object)
        // A to-many of the new object adds what it gained to what the row lists (read on the next
        // access), whether or not it was read; one assigned whole is a value like any other.
        for name in object.entity.toManyRelationshipNames where object.loadedToMany.contains(name) {
            let members = object.values[name] as? RelationshipMembers
            guard members?.rewritesAll != true else { continue }
            object.values[name] = members.flatMap { $0.hasUnsavedChanges ? $0.unsavedChanges() : nil }
            object.loadedToMany.remove(name)
        }
        // Every value the new object holds counts as its change, to win or lose by the policy.
        let shape = HeldKeysShape(object.values)
        let held = shape.map { shape in heldKeys[shape, default: Set(object.values.map(\.key))] }
            ?? Set(object.values.map(\.key))
        if let shape { heldKeys[shape] = held }
        object.changedKeys = held
        object.isPendingInsert = false
        insertedSet.remove(object)
        discardUnprocessed(object)
        object.assign(permanentID(of: object.entity, in: store, primaryKey: primaryKey), in: self)
        registered[key] = object
        try resolveConflict(object, storedRow: row, root: root, store: store)
        if tookARegisteredObjectsRow { rereadOwnersToMany(of: object) }
        if mergePolicy == .overwrite {
            // The object's attributes replace the row's, also where the object has none.
            for column in object.entity.storedColumns where !held.contains(column.name) {
                object.values[column.name] = nil
            }
        }
        return true
    }

    /// The object registered for the row `former` stood for, when `former` left this context
    /// because a new object took its row: to-ones still naming it find that one.
    func objectThatTookTheRow(of former: ManagedObject) -> ManagedObject? {
        guard let primaryKey = former.objectID.primaryKey else { return nil }
        let key = ObjectKey(rootEntityNumber: former.entity.rootEntity.entityNumber, primaryKey: primaryKey)
        guard let object = registered[key], object !== former, object.entity.isKind(of: former.entity.rootEntity)
        else { return nil }
        return object
    }

    /// The loaded to-manys of the row's stored owners listed the object the row was taken from:
    /// each is read again on its next use, its unsaved changes kept, and then lists the object
    /// that took the row where the row says so.
    private func rereadOwnersToMany(of object: ManagedObject) {
        for relationship in object.entity.relationships where !relationship.isToMany {
            guard let inverseName = relationship.inverseName,
                  let inverse = model.entity(named: relationship.destinationEntityName)?
                    .relationship(named: inverseName),
                  inverse.isToMany,
                  let owner = heldDestination(of: object, relationship, in: object.committedValues),
                  owner.managedObjectContext === self, owner.loadedToMany.contains(inverse.name),
                  let members = owner.values[inverse.name] as? RelationshipMembers
            else { continue }
            // One the app replaced whole is written as it was given (as a merge policy leaves it).
            if members.rewritesAll, inverse.isOrdered || SQLiteSchema.usesJoinTable(inverse, in: model) { continue }
            rememberBeforeSettling(owner)
            let pending = members.isComplete ? members.unsavedChanges() : members
            owner.values[inverse.name] = pending.hasUnsavedChanges ? pending : nil
            owner.loadedToMany.remove(inverse.name)
            if !pending.hasUnsavedChanges { owner.changedKeys.remove(inverse.name) }
        }
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

/// The values of one uniqueness constraint met so far in a save, by a hash of the constraint and
/// the values: a word each, where an array of the values per object took a tenth of an upsert's
/// memory. A hash met again is compared by value; values that share a hash and differ are kept
/// whole beside.
struct ConstrainedValuesSeen {
    private struct Identity: Hashable {
        let owner: ObjectIdentifier
        let position: Int
        let values: [DatabaseValue]
    }
    private var byHash: [Int: ManagedObject] = [:]
    private var sharingAHash: [Identity: ManagedObject] = [:]
    /// Applied to each hash: a test makes them all one, so every value meets another's hash.
    private let narrowing: (Int) -> Int

    init(narrowingHashes narrowing: @escaping (Int) -> Int = { $0 }) { self.narrowing = narrowing }

    /// Records `object`'s `values` of its `position`th constraint; the object of this save that
    /// holds them already, if one does.
    mutating func insert(_ object: ManagedObject, owner: EntityDescription, constraint: [String], position: Int,
                         values: [DatabaseValue]) -> ManagedObject? {
        let identity = Identity(owner: ObjectIdentifier(owner), position: position, values: values)
        let hash = narrowing(identity.hashValue)
        guard let first = byHash[hash] else {
            byHash[hash] = object
            return nil
        }
        // The first may have met this hash with another of its constraints: another object with
        // these values of this constraint is a repeat, whichever.
        if first !== object, first.entity.isKind(of: owner),
           ManagedObjectContext.constrainedValues(of: first, owner, constraint) == values {
            return first
        }
        if let other = sharingAHash[identity] { return other }
        sharingAHash[identity] = object
        return nil
    }
}

/// Which properties of a layout hold a value, a bit each: objects of one shape share one set of
/// their keys.
struct HeldKeysShape: Hashable {
    let layout: ObjectIdentifier
    let present: UInt64

    /// Nil past 64 properties.
    init?(_ values: PropertyValues) {
        let layout = values.layout
        guard layout.count <= 64 else { return nil }
        var present: UInt64 = 0
        for index in 0..<layout.count where !values.slot(index).isAbsent { present |= 1 << UInt64(index) }
        (self.layout, self.present) = (ObjectIdentifier(layout), present)
    }
}

extension ManagedObjectContext {
    /// An object's values of a constraint as they are stored.
    static func constrainedValues(of object: ManagedObject, _ owner: EntityDescription, _ constraint: [String])
        -> [DatabaseValue] {
        constraint.map { name in
            StoredValues.databaseValue(object.values[name], type: owner.attribute(named: name)?.type ?? .string)
        }
    }
}

extension EntityDescription {
    /// This entity's uniqueness constraints and its ancestors', each with the entity declaring it.
    var allUniquenessConstraints: [(owner: EntityDescription, constraint: [String])] {
        (superentity?.allUniquenessConstraints ?? []) + uniquenessConstraints.map { (self, $0) }
    }
}
