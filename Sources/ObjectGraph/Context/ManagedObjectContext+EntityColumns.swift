import Foundation
import GRDB

extension ManagedObjectContext {
    /// The `Z<n>_<REL>` entity columns of an object's to-one relationships into entity
    /// hierarchies, each with the destination's entity number (NULL without a destination),
    /// as Core Data writes them beside the destination's primary key.
    func entityColumnValues(
        of object: ManagedObject, _ db: Database, changedOnly: Bool = false
    ) throws -> [(column: String, value: DatabaseValue)] {
        let entity = object.entity
        var values: [(column: String, value: DatabaseValue)] = []
        for ((relationship, _), column) in zip(entity.storedToOne, entity.storedToOneEntityColumns) {
            guard let column, !changedOnly || object.changedKeys.contains(relationship.name) else { continue }
            values.append((column, try destinationEntityNumber(object.values[relationship.name], relationship, db)))
        }
        return values
    }

    private func destinationEntityNumber(
        _ value: Any?, _ relationship: RelationshipDescription, _ db: Database
    ) throws -> DatabaseValue {
        switch value {
        case let destination as ManagedObject:
            return destination.entity.entityNumber.databaseValue
        case let fault as FaultReference:
            // A destination not loaded: its number is in its row.
            guard let root = model.entity(named: relationship.destinationEntityName)?.rootEntity else { return .null }
            let store = try coordinator.store(for: root)
            let sql = "SELECT Z_ENT FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?"
            return try Int64.fetchOne(db, sql: sql, arguments: [fault.primaryKey])?.databaseValue ?? .null
        default:
            return .null
        }
    }
}
