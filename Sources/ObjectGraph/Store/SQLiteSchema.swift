import Foundation

/// Core Data's SQLite naming for one model.
enum SQLiteSchema {
    /// A to-many relationship that needs a join table (many-to-many, or to-many without inverse).
    static func usesJoinTable(_ relationship: RelationshipDescription, in model: ManagedObjectModel) -> Bool {
        guard relationship.isToMany else { return false }
        guard let inverse = inverse(of: relationship, in: model) else { return true }
        return inverse.isToMany
    }

    static func inverse(of relationship: RelationshipDescription, in model: ManagedObjectModel) -> RelationshipDescription? {
        relationship.inverseName.flatMap { model.entity(named: relationship.destinationEntityName)?.relationship(named: $0) }
    }

    /// The entity declaring `relationship` (it may be inherited by `entity`).
    static func declaringEntity(of relationship: RelationshipDescription, from entity: EntityDescription) -> EntityDescription {
        var current = entity
        while !current.declaredRelationships.contains(where: { $0.name == relationship.name }), let parent = current.superentity {
            current = parent
        }
        return current
    }

    /// The join table of a many-to-many relationship, seen from `entity`'s side.
    struct JoinTable {
        var name: String
        /// Column holding the primary key of `entity`'s side, and of the destination side.
        var sourceColumn: String
        var destinationColumn: String
        /// True when `entity`'s side owns (names) the table.
        var isOwner: Bool
    }

    static func joinTable(for relationship: RelationshipDescription, of entity: EntityDescription, in model: ManagedObjectModel) -> JoinTable {
        let source = declaringEntity(of: relationship, from: entity)
        let destination = model.entity(named: relationship.destinationEntityName)!
        guard let inverse = inverse(of: relationship, in: model) else {
            let name = "Z_\(source.entityNumber)\(relationship.name.uppercased())"
            return JoinTable(name: name, sourceColumn: "Z_\(source.entityNumber)\(source.name.uppercased())",
                             destinationColumn: "Z_\(destination.entityNumber)\(relationship.name.uppercased())", isOwner: true)
        }
        let inverseSource = declaringEntity(of: inverse, from: destination)
        // Core Data names the table after the side with the lower entity number (then name).
        let isOwner = (source.entityNumber, relationship.name) <= (inverseSource.entityNumber, inverse.name)
        let (owner, ownerRelationship, other, otherRelationship) = isOwner
            ? (source, relationship, inverseSource, inverse) : (inverseSource, inverse, source, relationship)
        let name = "Z_\(owner.entityNumber)\(ownerRelationship.name.uppercased())"
        let ownerColumn = "Z_\(owner.entityNumber)\(otherRelationship.name.uppercased())"
        let otherColumn = "Z_\(other.entityNumber)\(ownerRelationship.name.uppercased())"
        return JoinTable(name: name, sourceColumn: isOwner ? ownerColumn : otherColumn,
                         destinationColumn: isOwner ? otherColumn : ownerColumn, isOwner: isOwner)
    }

    /// The statements creating the tables and indexes of `store`.
    static func createStatements(for store: PersistentStore, model: ManagedObjectModel) -> [String] {
        var statements: [String] = []
        for root in store.rootEntities {
            var columns = ["Z_PK INTEGER PRIMARY KEY", "Z_ENT INTEGER", "Z_OPT INTEGER"]
            columns += root.tableToOneRelationships.map { "\($0.columnName) INTEGER" }
            columns += root.tableAttributes.map { "\($0.columnName) \($0.type.columnType)" }
            statements.append("CREATE TABLE \(store.qualified(root.tableName)) ( \(columns.joined(separator: ", ")) )")
            for relationship in root.tableToOneRelationships {
                statements.append("CREATE INDEX \(store.qualified("\(root.tableName)_\(relationship.columnName)_INDEX")) ON \(root.tableName) (\(relationship.columnName))")
            }
            if !root.subentities.isEmpty {
                statements.append("CREATE INDEX \(store.qualified("\(root.tableName)_Z_ENT_INDEX")) ON \(root.tableName) (Z_ENT)")
            }
            for attribute in root.tableAttributes where attribute.isIndexed {
                statements.append("CREATE INDEX \(store.qualified("\(root.tableName)_\(attribute.columnName)_INDEX")) ON \(root.tableName) (\(attribute.columnName))")
            }
        }
        var joinTables: Set<String> = []
        for entity in store.entities {
            for relationship in entity.declaredRelationships where usesJoinTable(relationship, in: model) {
                let join = joinTable(for: relationship, of: entity, in: model)
                guard join.isOwner, joinTables.insert(join.name).inserted else { continue }
                let (ownerColumn, otherColumn) = (join.sourceColumn, join.destinationColumn)
                statements.append("CREATE TABLE \(store.qualified(join.name)) ( \(ownerColumn) INTEGER, \(otherColumn) INTEGER, PRIMARY KEY (\(ownerColumn), \(otherColumn)) )")
                statements.append("CREATE INDEX \(store.qualified("\(join.name)_\(otherColumn)_INDEX")) ON \(join.name) (\(otherColumn), \(ownerColumn))")
            }
        }
        statements.append("CREATE TABLE \(store.qualified("Z_PRIMARYKEY")) (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)")
        statements.append("CREATE TABLE \(store.qualified("Z_METADATA")) (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)")
        return statements
    }
}
