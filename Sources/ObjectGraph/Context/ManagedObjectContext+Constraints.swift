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
    /// - throws: ``ObjectGraphError`` 133021 naming the object, the entity and the attributes.
    func checkUniquenessConstraints(
        inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], _ db: Database
    ) throws {
        let constrained = (inserted + updated).filter { !$0.entity.allUniquenessConstraints.isEmpty }
        guard !constrained.isEmpty else { return }
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
                for key in try Int64.fetchAll(db, sql: sql, arguments: StatementArguments(values)) {
                    guard !leaving.contains(ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: key)) else {
                        continue
                    }
                    throw constraintConflict(object, owner, constraint, with: "the stored \(root.name) row \(key)")
                }
            }
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

extension EntityDescription {
    /// This entity's uniqueness constraints and its ancestors', each with the entity declaring it.
    var allUniquenessConstraints: [(owner: EntityDescription, constraint: [String])] {
        (superentity?.allUniquenessConstraints ?? []) + uniquenessConstraints.map { (self, $0) }
    }
}
