import GRDB

/// How a context settles a conflict between its unsaved changes to an object and the
/// object's row as another context or process saved it meanwhile, as Core Data's merge policies.
///
/// The same policy applies when a save finds the row changed (optimistic locking) and when
/// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)`` or
/// ``ManagedObjectContext/mergeExternalChanges()`` bring in a newer row of an object with
/// unsaved changes. A row deleted meanwhile stays deleted under every policy but ``error``.
///
/// It also settles a new object that has a stored row's values for a uniqueness constraint:
/// under every policy but ``error`` the object takes that row's identity and their values are
/// settled as above, so the row is updated rather than a duplicate inserted.
public enum MergePolicy: Sendable {
    /// The save fails with a merge conflict (133020); merges leave changed objects as they are.
    case error
    /// Unsaved changes to the object are dropped; the stored row wins entirely.
    case rollback
    /// The object as it is in memory replaces the row entirely, every property written.
    case overwrite
    /// Property by property: the store's changes win where both changed the same property;
    /// the object's other changes are kept.
    case mergeByPropertyStoreTrump
    /// Property by property: the object's changes win; the store's changes to other
    /// properties are kept.
    case mergeByPropertyObjectTrump
}

extension ManagedObjectContext {
    /// Settles an object's unsaved changes against its newer stored row by ``mergePolicy``
    /// (not `.error`). Afterwards the object is at the row's version with the changes the
    /// policy keeps; it leaves the updated objects when none are left.
    func resolveConflict(_ object: ManagedObject, storedRow row: Row, root: EntityDescription,
                         store: PersistentStore) throws {
        let mine = object.values
        let committed = object.committedValues
        let loaded = object.loadedToMany
        let changed = object.changedKeys
        var kept = changed
        try load(row, into: object, root: root, store: store)
        switch mergePolicy {
        case .error, .rollback:
            kept = []
        case .mergeByPropertyObjectTrump:
            break
        case .mergeByPropertyStoreTrump:
            kept = kept.filter { key in
                object.entity.attribute(named: key) == nil && object.entity.relationship(named: key)?.isToMany != false
                    || Self.sameStoredValue(object.values[key], committed[key])
            }
        case .overwrite:
            // Every to-many it read, and the changes made to one it did not.
            kept = Set(object.entity.storedColumns.map(\.name) + object.entity.storedToOne.map(\.relationship.name))
                .union(loaded.union(changed).filter { object.entity.relationship(named: $0)?.isToMany == true })
        }
        let dropped = changed.subtracting(kept)
        object.values.merge(mine.filter { kept.contains($0) })
        object.loadedToMany.formUnion(loaded.intersection(kept))
        object.changedKeys = kept
        // The other sides of dropped relationship changes go back to what the store says.
        for key in dropped.union(loaded.subtracting(kept)) {
            guard let relationship = object.entity.relationship(named: key),
                  let inverseName = relationship.inverseName,
                  let destinationEntity = model.entity(named: relationship.destinationEntityName),
                  let inverse = destinationEntity.relationship(named: inverseName) else { continue }
            let members = mine[key] as? RelationshipMembers
            let before =
                members.map { $0.objects + $0.removed.values } ?? (mine[key] as? ManagedObject).map { [$0] } ?? []
            let after = relationship.isToMany ? [] : [object.toOneObject(relationship)].compactMap { $0 }
            for destination in before + after where destination.managedObjectContext === self {
                forgetChange(of: inverse, in: destination)
            }
        }
        refreshMembership(of: object)
    }

    /// Puts one relationship of an object back to its stored state (a to-many is re-read on access).
    private func forgetChange(of relationship: RelationshipDescription, in object: ManagedObject) {
        rememberBeforeSettling(object)
        if relationship.isToMany {
            object.loadedToMany.remove(relationship.name)
            object.values[relationship.name] = nil
        } else {
            object.values[relationship.name] = object.committedValues[relationship.name]
        }
        object.changedKeys.remove(relationship.name)
        refreshMembership(of: object)
    }

    private func refreshMembership(of object: ManagedObject) {
        guard !insertedSet.contains(object), !deletedSet.contains(object) else { return }
        if object.changedKeys.isEmpty {
            updatedSet.remove(object)
        } else {
            updatedSet.insert(object)
        }
        unprocessedUpdated.insert(object)
    }

    /// Whether two values of a stored property are the same: to-one destinations by
    /// primary key, encoded values by their bytes, others by equality.
    static func sameStoredValue(_ left: Any?, _ right: Any?) -> Bool {
        func identity(_ value: Any?) -> AnyHashable? {
            switch value {
            case nil: return nil
            case let fault as FaultReference: return fault.primaryKey
            case let object as ManagedObject:
                return object.objectID.primaryKey.map { AnyHashable($0) } ?? AnyHashable(ObjectIdentifier(object))
            case let encoded as EncodedValue: return encoded.data
            case let hashable as AnyHashable: return hashable
            default: return "\(value!)"
            }
        }
        return identity(left) == identity(right)
    }

    /// The stored row of an object now, inside the current transaction.
    func currentRow(of object: ManagedObject, _ db: Database) throws -> (Row?, EntityDescription, PersistentStore) {
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName))"
            + " WHERE Z_PK = ?"
        let row = try Row.fetchOne(try db.cachedStatement(sql: sql), arguments: [object.objectID.primaryKey])
        return (row, root, store)
    }
}

extension ManagedObjectContext {
    /// What kept deletions' Nullify rules did to the objects at their other ends, taken back
    /// before those are written where nothing else changed it since: a to-one the rule cleared
    /// names the kept row again, and a to-many it left is read again from the store (with its
    /// other changes). A row that stays keeps its links, and no row is written for them. Put
    /// back as the policy's other changes are, should the save fail.
    func takeBackUnlinking(byKept objects: [ManagedObject]) {
        for object in objects {
            for relationship in object.entity.relationships where relationship.deleteRule == .nullify {
                guard let inverse = SQLiteSchema.inverse(of: relationship, in: model) else { continue }
                // Where it points now and where its row points: it may have moved before its deletion.
                var ends = destinations(of: object, relationship)
                if !relationship.isToMany,
                   let stored = heldDestination(of: object, relationship, in: object.committedValues) {
                    ends.append(stored)
                }
                for end in ends where end.managedObjectContext === self && !deletedSet.contains(end) {
                    takeBackUnlink(of: object, from: end, inverse)
                }
            }
        }
    }

    private func takeBackUnlink(of object: ManagedObject, from end: ManagedObject, _ inverse: RelationshipDescription) {
        if inverse.isToMany {
            guard let members = end.values[inverse.name] as? RelationshipMembers else { return }
            // A relationship the app replaced whole is the app's, written as it was given: its join
            // rows, or its order. An unordered one-to-many writes nothing of its own: each member's
            // row names its owner, the kept row too, so it is read again, whether the replacement
            // or the rule took the kept object out (a replacement records no removal).
            if members.rewritesAll {
                guard !inverse.isOrdered, !SQLiteSchema.usesJoinTable(inverse, in: model) else { return }
            } else {
                guard members.removed[ObjectIdentifier(object)] != nil else { return }
            }
            rememberBeforeSettling(end)
            // Read again when next used, in the store's order, with the changes made to it here
            // (changed in place once it is so: one parent may give back thousands).
            let pending = members.isComplete ? members.unsavedChanges() : members
            pending.forgetRemoval(of: object)
            end.values[inverse.name] = pending.hasUnsavedChanges ? pending : nil
            end.loadedToMany.remove(inverse.name)
            if !pending.hasUnsavedChanges { end.changedKeys.remove(inverse.name) }
        } else {
            // Cleared by the rule, not set elsewhere since. (A new object has no stored value to
            // tell the rule's clearing from the app's, so it stays as it is.)
            guard end.values[inverse.name] == nil,
                  Self.sameStoredValue(end.committedValues[inverse.name], object) else { return }
            rememberBeforeSettling(end)
            end.values[inverse.name] = end.committedValues[inverse.name]
            end.changedKeys.remove(inverse.name)
        }
        refreshMembership(of: end)
    }
}

/// An object as it was before a save's merge policy settled it (or the other side of one of its
/// relationships), or a new object before it took a stored row's identity: put back when the
/// save fails, so that nothing of a failed save stays.
struct SettledObject {
    let object: ManagedObject
    private let values: PropertyValues
    private let committedValues: PropertyValues
    private let loadedToMany: Set<String>
    private let changedKeys: Set<String>
    /// An adopted object's own.
    private let objectID: ObjectID
    private let version: Int64
    private let isFault: Bool
    private let memberships: ObjectSet.Membership
    private let isRegistered: Bool
    private let isPendingInsert: Bool

    init(_ object: ManagedObject) {
        self.object = object
        var values = object.values
        // A to-many's members change in place: the snapshot keeps its own.
        for name in object.entity.toManyRelationshipNames {
            if let members = values[name] as? RelationshipMembers { values[name] = members.copy() }
        }
        self.values = values
        (committedValues, loadedToMany, changedKeys) = (object.committedValues, object.loadedToMany, object.changedKeys)
        (version, isFault, memberships) = (object.version, object.isFault, object.memberships)
        isRegistered = object.managedObjectContext != nil
        (objectID, isPendingInsert) = (object.objectID, object.isPendingInsert)
    }

    func restore(in context: ManagedObjectContext) {
        (object.values, object.committedValues, object.loadedToMany, object.changedKeys) =
            (values, committedValues, loadedToMany, changedKeys)
        (object.version, object.isFault) = (version, isFault)
        // A new object that took a stored row's identity (its own ID may be permanent already,
        // given by obtainPermanentIDs) gives the row its ID back.
        if isPendingInsert, object.objectID != objectID {
            if let adopted = object.objectID.primaryKey {
                let key = ManagedObjectContext.ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber,
                                                         primaryKey: adopted)
                if context.registered[key] === object { context.registered[key] = nil }
            }
            object.assign(objectID, in: context)
        }
        object.isPendingInsert = isPendingInsert
        // A row gone meanwhile made the policy forget the object.
        if isRegistered, object.managedObjectContext == nil, let primaryKey = object.objectID.primaryKey {
            object.managedObjectContext = context
            context.registered[ManagedObjectContext.ObjectKey(
                rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: primaryKey)] = object
        }
        for (membership, set) in [(ObjectSet.Membership.inserted, \ManagedObjectContext.insertedSet),
                                  (.updated, \.updatedSet), (.deleted, \.deletedSet),
                                  (.unprocessedInserted, \.unprocessedInserted),
                                  (.unprocessedUpdated, \.unprocessedUpdated),
                                  (.unprocessedDeleted, \.unprocessedDeleted)] {
            if memberships.contains(membership) {
                context[keyPath: set].insert(object)
            } else {
                context[keyPath: set].remove(object)
            }
        }
    }
}

extension ManagedObjectContext {
    /// Keeps an object's state before the save under way settles it; nothing outside a save.
    func rememberBeforeSettling(_ object: ManagedObject) {
        guard settledInSave != nil, rememberedInSave.insert(ObjectIdentifier(object)).inserted else { return }
        settledInSave!.append(SettledObject(object))
    }

    /// Keeps a new object's state before it takes a stored row's identity. Without a set of
    /// the remembered beside: an upsert adopts every object once, and one remembered before or
    /// after too is restored in order.
    func rememberBeforeAdopting(_ object: ManagedObject) {
        settledInSave?.append(SettledObject(object))
    }
}
