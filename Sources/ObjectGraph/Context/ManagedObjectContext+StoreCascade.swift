import Foundation
import GRDB

/// A cascade a save runs in SQL: the members of one deleted object's to-many, deleted by their
/// link to it under the save's write lock, with no object made for them. What made one object a
/// member was most of deleting a parent of 100,000 children.
struct StoreCascade {
    let owner: ManagedObject
    let relationship: RelationshipDescription
    let ownerKey: Int64
    let destination: EntityDescription
    let inverse: RelationshipDescription
    let store: PersistentStore

    /// A cascade by its owner and relationship: the save's other passes of the rules skip it.
    struct Key: Hashable {
        let owner: ObjectIdentifier
        let relationship: String
    }

    var key: Key { Key(owner: ObjectIdentifier(owner), relationship: relationship.name) }
}

/// The rows one store cascade deleted: their entity numbers and primary keys.
struct CascadedRows {
    let store: PersistentStore
    let destination: EntityDescription
    var entityNumbers: [Int] = []
    var primaryKeys: [Int64] = []
}

extension ManagedObjectContext {
    /// A cascade from `object` over `relationship` that the save can run in the store: when
    /// deleting a member needs nothing of it — no hook of a class of its own, no relationship but
    /// its link back with a rule or an inverse, no unique value in its hierarchy, no tombstone, no
    /// join row, no undo — and this context holds no object it could be (a member read, changed or
    /// linked here is deleted as an object, as before). Not with a write observer, which must see
    /// each row before it changes.
    /// `holding` remembers, by destination entity, whether this context holds an object of it.
    func storeCascade(of object: ManagedObject, _ relationship: RelationshipDescription,
                      holding: inout [ObjectIdentifier: Bool]) -> StoreCascade? {
        guard relationship.isToMany, coordinator.writeObserver == nil, undoManager == nil, parent == nil,
              !object.isPendingInsert, let ownerKey = object.objectID.primaryKey,
              !SQLiteSchema.usesJoinTable(relationship, in: model),
              let destination = model.entity(named: relationship.destinationEntityName),
              let inverse = SQLiteSchema.inverse(of: relationship, in: model), !inverse.isToMany,
              inverse.deleteRule != .deny, let store = try? coordinator.store(for: destination.rootEntity)
        else { return nil }
        // Nothing but the owner may reach a member (another object's rule, count or Deny would
        // validate it as staying), nor may a unique value of its hierarchy wait on its row going.
        guard destination.rootEntity.selfAndDescendants.allSatisfy({ $0.uniquenessConstraints.isEmpty })
        else { return nil }
        for kind in destination.selfAndDescendants {
            let reachedOtherwise = kind.relationships.contains {
                $0.name != inverse.name && ($0.deleteRule != .noAction || $0.inverseName != nil)
            }
            guard !reachedOtherwise, !kind.keepsTombstone, !kind.hasJoinTables,
                  kind.objectClass == ManagedObject.self else { return nil }
        }
        // The owner's row as it is now, as reading the relationship would (a refreshed fault keeps
        // the version it had); gone meanwhile, it is the object path's to settle.
        object.fireFaultForDeletion()
        guard !object.isFault, !object.loadedToMany.contains(relationship.name),
              object.values[relationship.name] == nil else { return nil }
        let holdsOne = holding[ObjectIdentifier(destination)] ?? {
            let isOne = { (held: ManagedObject) in held.entity.isKind(of: destination) }
            return registered.contains(where: isOne) || insertedSet.objects.contains(where: isOne)
        }()
        holding[ObjectIdentifier(destination)] = holdsOne
        guard !holdsOne else { return nil }
        return StoreCascade(owner: object, relationship: relationship, ownerKey: ownerKey, destination: destination,
                            inverse: inverse, store: store)
    }

    /// Deletes the members of each cascade whose owner is still deleted, as they are in the store
    /// now (under the write lock: none can join or change meanwhile). An owner whose row the merge
    /// policy kept loses its members all the same, as on the object path, where they are deleted
    /// objects of the save.
    func deleteMembers(of cascades: [StoreCascade], _ db: Database) throws -> [CascadedRows] {
        var deleted: [CascadedRows] = []
        for cascade in cascades where deletedSet.contains(cascade.owner) {
            let root = cascade.destination.rootEntity
            let kinds = cascade.destination.selfAndDescendants
            // A table of one entity needs no test of it: its keys are then read from the index alone.
            let onlyKind = root.selfAndDescendants.count == 1
            let members = "FROM \(cascade.store.qualified(root.tableName)) WHERE \(cascade.inverse.columnName) = ?"
                + (onlyKind ? "" : " AND Z_ENT IN (\(kinds.map { String($0.entityNumber) }.joined(separator: ", ")))")
            var rows = CascadedRows(store: cascade.store, destination: cascade.destination)
            try db.forEachRow(sql: "SELECT Z_PK\(onlyKind ? "" : ", Z_ENT") \(members)",
                              arguments: [cascade.ownerKey.databaseValue]) { row in
                guard let primaryKey = row.int64(at: 0) else { return }
                rows.primaryKeys.append(primaryKey)
                rows.entityNumbers.append(onlyKind ? root.entityNumber : Int(row.int64(at: 1) ?? 0))
            }
            try db.execute(sql: "DELETE \(members)", arguments: [cascade.ownerKey])
            deleted.append(rows)
        }
        return deleted
    }

    /// The objects this context came to hold for rows its store cascades deleted (a validation
    /// hook's fetch), forgotten as a merged deletion forgets them.
    func forgetObjects(of cascaded: [CascadedRows]) -> [ManagedObject] {
        var forgotten: [ManagedObject] = []
        for rows in cascaded {
            let root = rows.destination.rootEntity
            guard registered.contains(where: { $0.entity.isKind(of: rows.destination) }) else { continue }
            for primaryKey in rows.primaryKeys {
                guard let object = registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)]
                else { continue }
                forget(object)
                forgotten.append(object)
            }
        }
        return forgotten
    }

    /// The IDs of rows deleted by store cascades, for the save's notification.
    func objectIDs(of cascaded: [CascadedRows], into list: inout ObjectIDList) {
        for rows in cascaded {
            // Rows come in runs of one entity, most often all of one.
            var entityNumber = -1
            var scope: ObjectIDScope?
            for (position, primaryKey) in rows.primaryKeys.enumerated() {
                if rows.entityNumbers[position] != entityNumber || scope == nil {
                    entityNumber = rows.entityNumbers[position]
                    // One of the destination's kinds: the statement deleted no other.
                    let entity = model.entity(number: entityNumber) ?? rows.destination
                    scope = idScope(of: entity, storeIdentifier: rows.store.identifier, kind: .permanent)
                }
                list.append(scope: scope!, number: primaryKey)
            }
        }
    }
}
