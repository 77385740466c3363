import Foundation

/// Core Data's SQLite naming for one model.
enum SQLiteSchema {
    /// A to-many relationship that needs a join table (many-to-many, or to-many without inverse).
    static func usesJoinTable(_ relationship: RelationshipDescription, in model: ManagedObjectModel) -> Bool {
        guard relationship.isToMany else { return false }
        guard let inverse = inverse(of: relationship, in: model) else { return true }
        return inverse.isToMany
    }

    static func inverse(
        of relationship: RelationshipDescription, in model: ManagedObjectModel
    ) -> RelationshipDescription? {
        relationship.inverseName.flatMap {
            model.entity(named: relationship.destinationEntityName)?.relationship(named: $0)
        }
    }

    /// The entity declaring `relationship` (it may be inherited by `entity`).
    static func declaringEntity(
        of relationship: RelationshipDescription, from entity: EntityDescription
    ) -> EntityDescription {
        var current = entity
        while !current.declaredRelationships.contains(where: { $0.name == relationship.name }),
            let parent = current.superentity
        {
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
        /// The order of the destinations when the relationship is ordered, and of the sources
        /// when its inverse is: `Z_FOK_` + the column of the objects ordered (Photos' album
        /// table `Z_26ASSETS (Z_26ALBUMS, Z_3ASSETS, Z_FOK_3ASSETS)`).
        var destinationOrderColumn: String?
        var sourceOrderColumn: String?

        /// The order columns, owner's side first, as the table is created.
        var orderColumns: [String] {
            (isOwner ? [destinationOrderColumn, sourceOrderColumn] : [sourceOrderColumn, destinationOrderColumn])
                .compactMap { $0 }
        }
    }

    /// The column Core Data keeps the order of `column`'s objects in: `Z_FOK_` and the column's
    /// name without its `Z`/`Z_` (`ZPARENTLIST1` → `Z_FOK_PARENTLIST1`, `Z_3ASSETS` → `Z_FOK_3ASSETS`).
    static func orderColumn(of column: String) -> String {
        "Z_FOK_" + (column.hasPrefix("Z_") ? column.dropFirst(2) : column.dropFirst())
    }

    /// The order column beside a to-one relationship's key when its inverse is an ordered
    /// to-many: the to-one side's row keeps its place among its owner's destinations.
    static func orderColumnName(
        ofToOne relationship: RelationshipDescription, in model: ManagedObjectModel
    ) -> String? {
        guard !relationship.isToMany, let inverse = inverse(of: relationship, in: model), inverse.isToMany,
              inverse.isOrdered else { return nil }
        return orderColumn(of: relationship.columnName)
    }

    /// - note: the model checked every destination when it was assembled; a destination
    ///   that is missing anyway is named after the relationship's own entity so nothing traps.
    static func joinTable(
        for relationship: RelationshipDescription, of entity: EntityDescription, in model: ManagedObjectModel
    ) -> JoinTable {
        let source = declaringEntity(of: relationship, from: entity)
        let destination = model.entity(named: relationship.destinationEntityName) ?? source
        guard let inverse = inverse(of: relationship, in: model) else {
            let name = "Z_\(source.entityNumber)\(relationship.name.uppercased())"
            let destinationColumn = "Z_\(destination.entityNumber)\(relationship.name.uppercased())"
            return JoinTable(name: name, sourceColumn: "Z_\(source.entityNumber)\(source.name.uppercased())",
                destinationColumn: destinationColumn, isOwner: true,
                destinationOrderColumn: relationship.isOrdered ? orderColumn(of: destinationColumn) : nil)
        }
        let inverseSource = declaringEntity(of: inverse, from: destination)
        let isOwner = namesJoinTable(relationship, of: source, inverse: inverse, of: inverseSource)
        let (owner, ownerRelationship, other, otherRelationship) = isOwner
            ? (source, relationship, inverseSource, inverse) : (inverseSource, inverse, source, relationship)
        let name = "Z_\(owner.entityNumber)\(ownerRelationship.name.uppercased())"
        let ownerColumn = "Z_\(owner.entityNumber)\(otherRelationship.name.uppercased())"
        let otherColumn = "Z_\(other.entityNumber)\(ownerRelationship.name.uppercased())"
        let (sourceColumn, destinationColumn) = isOwner ? (ownerColumn, otherColumn) : (otherColumn, ownerColumn)
        return JoinTable(name: name, sourceColumn: sourceColumn, destinationColumn: destinationColumn, isOwner: isOwner,
                         destinationOrderColumn: relationship.isOrdered ? orderColumn(of: destinationColumn) : nil,
                         sourceOrderColumn: inverse.isOrdered ? orderColumn(of: sourceColumn) : nil)
    }

    /// Whether `relationship` (declared by `source`) rather than its many-to-many `inverse` names
    /// the join table `Z_<n><REL>`. Core Data picks the relationship whose uppercased name sorts
    /// last, whatever the entity numbers: `Z_2BLOCKING` for TodoItem's `blockedBy`/`blocking`
    /// (Fixtures/CoreData/easylife), `Z_1BOOKS` for Author.books/Book.authors, and in Photos'
    /// own store `Z_26ASSETS` for Album.assets although Asset is entity 3. Equal names (never
    /// seen in a store) fall back to the lower entity number.
    static func namesJoinTable(
        _ relationship: RelationshipDescription, of source: EntityDescription,
        inverse: RelationshipDescription, of inverseSource: EntityDescription
    ) -> Bool {
        let (mine, theirs) = (relationship.name.uppercased(), inverse.name.uppercased())
        guard mine == theirs else { return mine > theirs }
        return source.entityNumber <= inverseSource.entityNumber
    }

    /// Where an ordered to-many relationship keeps its order: the table (unqualified), the
    /// columns of the owner's and the member's keys, and the order column.
    struct OrderPlace {
        var table: String
        var owner: String
        var member: String
        var order: String
    }

    /// The place of `relationship`'s order, seen from `entity`; nil unless it is ordered.
    static func orderPlace(
        of relationship: RelationshipDescription, of entity: EntityDescription, in model: ManagedObjectModel
    ) -> OrderPlace? {
        guard relationship.isOrdered else { return nil }
        if usesJoinTable(relationship, in: model) {
            let join = joinTable(for: relationship, of: entity, in: model)
            return join.destinationOrderColumn.map {
                OrderPlace(table: join.name, owner: join.sourceColumn, member: join.destinationColumn, order: $0)
            }
        }
        guard let inverse = inverse(of: relationship, in: model),
              let order = orderColumnName(ofToOne: inverse, in: model),
              let destination = model.entity(named: relationship.destinationEntityName) else { return nil }
        return OrderPlace(table: destination.tableName, owner: inverse.columnName, member: "Z_PK", order: order)
    }

    /// The entity column Core Data adds beside a to-one relationship whose destination has
    /// sub-entities: `Z<n>_<REL>`, `n` the number of the entity declaring the relationship.
    /// It holds the destination's `Z_ENT`.
    static func entityColumnName(of relationship: RelationshipDescription, in root: EntityDescription,
                                 model: ManagedObjectModel) -> String? {
        guard !relationship.isToMany, let destination = model.entity(named: relationship.destinationEntityName),
              !destination.subentities.isEmpty else { return nil }
        let declaring =
            root.selfAndDescendants.first { entity in
                entity.declaredRelationships.contains { $0.name == relationship.name }
            } ?? root
        return "Z\(declaring.entityNumber)_\(relationship.name.uppercased())"
    }

    /// The columns of a root entity's table, in the order a new store creates them.
    static func columns(of root: EntityDescription, in model: ManagedObjectModel) -> [(name: String, type: String)] {
        var columns: [(name: String, type: String)] = [("Z_PK", "INTEGER"), ("Z_ENT", "INTEGER"), ("Z_OPT", "INTEGER")]
        for relationship in root.tableToOneRelationships {
            columns.append((relationship.columnName, "INTEGER"))
            if let entityColumn = entityColumnName(of: relationship, in: root, model: model) {
                columns.append((entityColumn, "INTEGER"))
            }
            if let orderColumn = orderColumnName(ofToOne: relationship, in: model) {
                columns.append((orderColumn, "INTEGER"))
            }
        }
        columns += root.tableAttributes.map { ($0.columnName, $0.type.columnType) }
        return columns
    }

    /// Which entity and property each column of a root entity's table stores, with a short
    /// description of the property's persisted shape.
    static func columnOwners(
        of root: EntityDescription, in model: ManagedObjectModel
    ) -> [String: (entity: String, property: String, shape: String)] {
        var owners: [String: (entity: String, property: String, shape: String)] = [:]
        for entity in root.selfAndDescendants.reversed() {
            for attribute in entity.declaredAttributes where !attribute.isTransient {
                owners[attribute.columnName] = (entity.name, attribute.name, "attribute \(attribute.type.rawValue)")
            }
            for relationship in entity.declaredRelationships where !relationship.isToMany {
                let shape = "to-one relationship to \(relationship.destinationEntityName)"
                owners[relationship.columnName] = (entity.name, relationship.name, shape)
                if let entityColumn = entityColumnName(of: relationship, in: root, model: model) {
                    owners[entityColumn] = (entity.name, relationship.name, shape + ", entity column")
                }
                if let orderColumn = orderColumnName(ofToOne: relationship, in: model) {
                    owners[orderColumn] = (entity.name, relationship.name, shape + ", order among its inverse's")
                }
            }
        }
        return owners
    }

    /// The property a column would store, by Core Data's naming (`ZFIRSTNAME` → `firstname`).
    static func propertyName(ofColumn column: String) -> String? {
        guard column.hasPrefix("Z"), !column.hasPrefix("Z_") else { return nil }
        return String(column.dropFirst()).lowercased()
    }

    /// Declared column types compare by SQLite affinity family, ignoring a length (`VARCHAR(255)`).
    static func sameColumnType(_ stored: String, _ wanted: String) -> Bool {
        func base(_ type: String) -> String {
            String(type.uppercased().prefix { $0 != "(" }).trimmingCharacters(in: .whitespaces)
        }
        return base(stored) == base(wanted)
    }

    /// The statements creating the tables and indexes of `store`.
    static func createStatements(for store: PersistentStore, model: ManagedObjectModel) -> [String] {
        var statements: [String] = []
        for root in store.rootEntities {
            var columns = columns(of: root, in: model).map { "\($0.name) \($0.type)" }
            columns[0] = "Z_PK INTEGER PRIMARY KEY"
            statements.append("CREATE TABLE \(store.qualified(root.tableName)) ( \(columns.joined(separator: ", ")) )")
            for relationship in root.tableToOneRelationships {
                statements.append(
                    "CREATE INDEX \(store.qualified("\(root.tableName)_\(relationship.columnName)_INDEX")) ON "
                        + "\(root.tableName) (\(relationship.columnName))"
                )
            }
            if !root.subentities.isEmpty {
                statements.append(
                    "CREATE INDEX \(store.qualified("\(root.tableName)_Z_ENT_INDEX")) ON \(root.tableName) (Z_ENT)")
            }
            // Named as Core Data names them: Z_<Entity>_UNIQUE_<attribute>_<attribute>.
            for entity in root.selfAndDescendants {
                for constraint in entity.uniquenessConstraints {
                    let name = "Z_\(entity.name)_UNIQUE_" + constraint.joined(separator: "_")
                    let columns = constraint.compactMap { entity.attribute(named: $0)?.columnName }
                        .map { "\($0) COLLATE BINARY ASC" }.joined(separator: ", ")
                    statements.append("CREATE UNIQUE INDEX \(store.qualified(name)) ON \(root.tableName) (\(columns))")
                }
            }
            for attribute in root.tableAttributes where attribute.isIndexed {
                statements.append(
                    "CREATE INDEX \(store.qualified("\(root.tableName)_\(attribute.columnName)_INDEX")) ON "
                        + "\(root.tableName) (\(attribute.columnName))"
                )
            }
        }
        var joinTables: Set<String> = []
        for entity in store.entities {
            for relationship in entity.declaredRelationships where usesJoinTable(relationship, in: model) {
                let join = joinTable(for: relationship, of: entity, in: model)
                guard join.isOwner, joinTables.insert(join.name).inserted else { continue }
                let (ownerColumn, otherColumn) = (join.sourceColumn, join.destinationColumn)
                let orderColumns = join.orderColumns.map { "\($0) INTEGER, " }.joined()
                statements.append(
                    "CREATE TABLE \(store.qualified(join.name)) ( \(ownerColumn) INTEGER, \(otherColumn) INTEGER, "
                        + "\(orderColumns)PRIMARY KEY (\(ownerColumn), \(otherColumn)) )"
                )
                statements.append(
                    "CREATE INDEX \(store.qualified("\(join.name)_\(otherColumn)_INDEX")) ON \(join.name) "
                        + "(\(otherColumn), \(ownerColumn))"
                )
            }
        }
        statements.append(
            "CREATE TABLE \(store.qualified("Z_PRIMARYKEY")) (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER "
                + "INTEGER, Z_MAX INTEGER)"
        )
        statements.append(
            "CREATE TABLE \(store.qualified("Z_METADATA")) (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), "
                + "Z_PLIST BLOB)"
        )
        return statements
    }
}
