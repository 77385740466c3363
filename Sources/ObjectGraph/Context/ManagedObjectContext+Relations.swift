import Foundation
import GRDB

/// Relationships checked inside a save's write transaction, against the store as it is
/// then: another process may have deleted a destination, or linked a row to an object this
/// save deletes, after this context read them.
extension ManagedObjectContext {
    /// Every to-one destination this save writes must still exist.
    ///
    /// - throws: ``ObjectGraphError`` 133020 (merge conflict) naming the missing destination.
    func verifyDestinations(of objects: [ManagedObject], _ db: Database) throws {
        // Each destination once per save, and none this save inserts: a thousand children of
        // one new parent check nothing, of one stored parent one row.
        var verified: Set<ObjectKey> = []
        for object in objects {
            for (relationship, _) in object.entity.storedToOne
            where insertedSet.contains(object) || object.changedKeys.contains(relationship.name) {
                if let destination = object.values[relationship.name] as? ManagedObject,
                   insertedSet.contains(destination) {
                    continue
                }
                guard case .int64(let key) = storedValue(of: object, relationship).storage,
                    let destination = model.entity(named: relationship.destinationEntityName)?.rootEntity,
                    verified.insert(ObjectKey(rootEntityNumber: destination.entityNumber, primaryKey: key)).inserted
                else { continue }
                let table = try coordinator.store(for: destination).qualified(destination.tableName)
                let statement = try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM \(table) WHERE Z_PK = ?)")
                guard try Bool.fetchOne(statement, arguments: [key]) == true else {
                    let name =
                        object.objectID.primaryKey.map { "\(object.entity.name) row \($0)" }
                        ?? "the new \(object.entity.name)"
                    throw ObjectGraphError(
                        code: .mergeConflict,
                        message:
                            "merge conflict: \(name) refers through '\(relationship.name)' "
                                + "to \(destination.name) row \(key), "
                            + "which was deleted by someone else since it was read; nothing was saved",
                        objects: [object])
                }
            }
        }
    }

    /// Applies the delete rules of deleted objects to rows this context did not know of:
    /// rows that still point at a deleted object after this save's own changes.
    ///
    /// - throws: ``ValidationError`` 1600 for Deny; a merge conflict for Cascade (the rows
    ///   to cascade to were not seen); Nullify clears the references.
    func enforceDeleteRules(of deleted: [ManagedObject], keeping kept: Set<ObjectKey> = [], _ db: Database) throws {
        var denied: [ValidationError] = []
        // Worked out once an entity: a cascade deletes 100,000 objects of one.
        var rulesOf: [ObjectIdentifier: [EnforcedRule]] = [:]
        for object in deleted {
            guard let primaryKey = object.objectID.primaryKey else { continue }
            let entity = object.entity
            let rules = rulesOf[ObjectIdentifier(entity)] ?? enforcedRules(of: entity)
            rulesOf[ObjectIdentifier(entity)] = rules
            for (relationship, destination, inverse) in rules {
                let root = destination.rootEntity
                let store = try coordinator.store(for: root)
                let table = store.qualified(root.tableName)
                let numbers = destination.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")
                let referring = "FROM \(table) WHERE \(inverse.columnName) = ? AND Z_ENT IN (\(numbers))"
                let keys = try Int64.fetchAll(db, sql: "SELECT Z_PK \(referring)", arguments: [primaryKey])
                guard !keys.isEmpty else { continue }
                var unlinked = keys
                switch relationship.deleteRule {
                case .deny:
                    denied.append(
                        ValidationError(
                            code: .relationshipDeniedDelete, object: object, key: relationship.name, value: nil,
                            constraint: .deleteDenied(relationship: relationship.name)))
                    continue
                case .nullify:
                    break
                case .cascade:
                    // A member the merge policy kept stays, without its owner; any other was linked meanwhile.
                    unlinked = keys.filter {
                        kept.contains(ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: $0))
                    }
                    if let linked = keys.first(where: { !unlinked.contains($0) }) {
                        throw ObjectGraphError(
                            code: .mergeConflict,
                            message:
                                "merge conflict: \(destination.name) row \(linked) was linked to "
                                    + "\(object.entity.name) row \(primaryKey) "
                                + "by someone else since it was read; nothing was saved",
                            objects: [object])
                    }
                case .noAction:
                    continue
                }
                let changed = unlinked.map {
                    StoredRowKey(storeIdentifier: store.identifier, table: root.tableName, primaryKey: $0)
                }
                try coordinator.notifyRowsWillChange(changed, db)
                let unlink = "UPDATE \(table) SET \(inverse.columnName) = NULL, "
                    + "Z_OPT = CASE WHEN Z_OPT < 9223372036854775807 THEN Z_OPT + 1 ELSE Z_OPT END WHERE Z_PK IN "
                if unlinked.count == keys.count {
                    // Every row that refers to it: one statement, however many.
                    try db.execute(sql: unlink + "(SELECT Z_PK \(referring))", arguments: [primaryKey])
                } else {
                    for chunk in unlinked.chunked(500) {
                        try db.execute(
                            sql: unlink + "(\(placeholders(chunk.count)))", arguments: StatementArguments(chunk))
                    }
                }
                try coordinator.notifyRowsDidChange(changed, db)
            }
        }
        if !denied.isEmpty { throw ValidationError.combining(denied) }
    }

    /// A relationship whose rule a deleted object's rows must follow in SQL, with the entity at its
    /// other end and the inverse to-one stored there.
    private typealias EnforcedRule = (
        relationship: RelationshipDescription, destination: EntityDescription, inverse: RelationshipDescription)

    private func enforcedRules(of entity: EntityDescription) -> [EnforcedRule] {
        entity.relationships.compactMap { relationship in
            guard relationship.deleteRule != .noAction, let inverseName = relationship.inverseName,
                  let destination = model.entity(named: relationship.destinationEntityName),
                  let inverse = destination.relationship(named: inverseName), !inverse.isToMany,
                  destination.rootEntity.tableToOneRelationships.contains(where: { $0.name == inverse.name })
            else { return nil }
            return (relationship, destination, inverse)
        }
    }
}
