import Foundation
import GRDB

/// Runs one ``MigrationPlan`` on a store, inside the caller's transaction.
///
/// The store is rebuilt in place: every check that reads the old data runs first (so a
/// refusal writes nothing), then the old tables are renamed aside, the new model's tables are
/// created, rows and links are copied into them, and the old tables are dropped. The caller's
/// single transaction makes all of it one atomic commit: after a crash, the old store or the
/// new one, never a mix.
final class StoreMigration {
    let plan: MigrationPlan
    let db: Database
    let schema: String
    let storeIdentifier: String
    let transformers: ValueTransformerRegistry
    var report: MigrationReport

    private static let asidePrefix = "OGMIGRATING_"
    private var offsets: [String: Int64] = [:]
    private var entityOfRow: [String: [Int64: Int]] = [:]
    private var oldMaxKey: [String: Int64] = [:]
    private var links: [LinkKey: Set<Link>] = [:]
    private var oldTables: [String] = []
    private var nextKey: [String: Int64] = [:]

    struct LinkKey: Hashable { var entity: String; var relationship: String }
    struct Link: Hashable { var owner: Int64; var target: Int64 }

    init(
        plan: MigrationPlan, db: Database, schema: String, storeIdentifier: String,
        transformers: ValueTransformerRegistry, report: MigrationReport
    ) {
        self.plan = plan
        self.db = db
        self.schema = schema
        self.storeIdentifier = storeIdentifier
        self.transformers = transformers
        self.report = report
    }

    private func qualified(_ table: String) -> String { "\"\(schema)\".\(table)" }
    private func aside(_ table: String) -> String { qualified(Self.asidePrefix + table) }
    private var source: ManagedObjectModel { plan.source }
    private var destination: ManagedObjectModel { plan.destination }

    /// Runs the plan; returns the store's new metadata.
    func run(metadata: [String: Any], allowsLoss: Bool) throws -> [String: Any] {
        try readOldStore()
        try StoreShape(db, schema: schema).requireEveryTableRead(oldTables, storeName: report.storeName)
        try checkBeforeWriting()
        guard allowsLoss || report.dropped.isEmpty else {
            throw ObjectGraphError(
                code: .migrationWouldLoseData,
                message:
                    "migrating from model '\(source.versionIdentifier)' to '\(destination.versionIdentifier)' "
                    + "would drop " + report.dropped.joined(separator: "; "))
        }
        var newMetadata = metadata
        newMetadata.merge(
            PersistentStoreCoordinator.modelMetadata(of: destination, entities: plan.destinationEntities)
        ) { _, new in new }
        // Apple's digests summarise the hashes they were written with; Core Data rewrites them.
        if newMetadata[StoreMetadataKey.versionHashes] as? [String: Data]
            != metadata[StoreMetadataKey.versionHashes] as? [String: Data]
        {
            for key in StoreMetadataKey.versionHashDigests { newMetadata[key] = nil }
        }
        let plist = try PropertyListSerialization.data(fromPropertyList: newMetadata, format: .binary, options: 0)
        try ModelCache.replace(db, schema: schema, with: destination)
        if plan.keepsLayout {
            try db.execute(sql: "UPDATE \(qualified("Z_METADATA")) SET Z_PLIST = ?", arguments: [plist])
            return newMetadata
        }
        try setOldTablesAside()
        let store = PersistentStore(
            type: .sqlite, url: nil, configurationName: plan.configuration,
            entities: plan.destinationEntities, schemaName: schema)
        for statement in SQLiteSchema.createStatements(for: store, model: destination) {
            try db.execute(sql: statement)
        }
        try copyRows()
        try convertValues()
        try writeLinks()
        try carryOrders()
        try runCustomSteps()
        try fillEntityColumns()
        try writePrimaryKeys()
        try db.execute(sql: "INSERT INTO \(qualified("Z_METADATA")) SELECT * FROM \(aside("Z_METADATA"))")
        try db.execute(sql: "UPDATE \(qualified("Z_METADATA")) SET Z_PLIST = ?", arguments: [plist])
        for table in oldTables { try db.execute(sql: "DROP TABLE \(aside(table))") }
        return newMetadata
    }

    // MARK: - Reading the old store

    private func tableExists(_ name: String) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT COUNT(*) > 0 FROM \(qualified("sqlite_master")) WHERE type = 'table' AND name = ?",
            arguments: [name]) ?? false
    }

    private var sourceRoots: [EntityDescription] {
        var seen: Set<String> = []
        return plan.sourceEntities.map(\.rootEntity).filter { seen.insert($0.name).inserted }
    }

    /// An integer the old store keeps (a key, an entity number), nil when NULL. A value of another
    /// kind is damage: refused naming store, entity, row and column, before anything is written.
    private func integer(_ value: DatabaseValue, _ column: String, of entity: String, row: Int64?) throws -> Int64? {
        switch value.storage {
        case .null: return nil
        case .int64(let integer): return integer
        case .double(let number) where Int64(exactly: number) != nil: return Int64(number)
        default:
            throw ObjectGraphError.damagedRow(
                storeName: report.storeName, entity: entity, primaryKey: row,
                "column \(column) holds \(value.storageKind) where an integer belongs")
        }
    }

    private func readOldStore() throws {
        for root in sourceRoots where try tableExists(root.tableName) {
            oldTables.append(root.tableName)
            var rows: [Int64: Int] = [:]
            var unknown = 0
            for row in try Row.fetchAll(db, sql: "SELECT Z_PK, Z_ENT FROM \(qualified(root.tableName))") {
                // A row with no key, or an entity number the old model lacks, belongs to no entity.
                let key = try integer(row[0], "Z_PK", of: root.name, row: nil)
                let number = try integer(row[1], "Z_ENT", of: root.name, row: key).flatMap(Int.init(exactly:))
                guard let key, let number, source.entity(number: number) != nil
                else {
                    unknown += 1
                    continue
                }
                rows[key] = number
            }
            entityOfRow[root.name] = rows
            if unknown > 0 {
                report.dropped.append("\(unknown) rows of \(root.tableName) (no entity of the model has their Z_ENT)")
            }
        }
        for entity in plan.sourceEntities {
            for relationship in entity.declaredRelationships where SQLiteSchema.usesJoinTable(relationship, in: source)
            {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: source)
                if join.isOwner, !oldTables.contains(join.name), try tableExists(join.name) {
                    oldTables.append(join.name)
                }
            }
        }
        oldTables += ["Z_PRIMARYKEY", "Z_METADATA"]
        for row in try Row.fetchAll(db, sql: "SELECT Z_NAME, Z_MAX FROM \(qualified("Z_PRIMARYKEY"))") {
            if let name = String.fromDatabaseValue(row[0]),
                let max = try integer(row[1], "Z_MAX", of: "Z_PRIMARYKEY (\(name))", row: nil)
            {
                oldMaxKey[name] = max
            }
        }
        // Rows of two old tables landing in one new table (an inheritance change) get disjoint keys.
        var feeds: [String: Set<String>] = [:]
        for mapping in plan.mappings {
            feeds[mapping.destination.rootEntity.name, default: []].insert(mapping.source.rootEntity.name)
        }
        var running: Int64 = 0
        let needsOffsets = feeds.values.contains { $0.count > 1 }
        for root in sourceRoots {
            offsets[root.name] = needsOffsets ? running : 0
            running += max(entityOfRow[root.name]?.keys.max() ?? 0, oldMaxKey[root.name] ?? 0)
        }
        for mapping in plan.mappings { try readLinks(of: mapping) }
        for mapping in plan.mappings {
            report.carried[mapping.destination.name, default: 0] += rowCount(of: mapping.source)
        }
        try reportDropped()
    }

    private func rowCount(of entity: EntityDescription) -> Int {
        entityOfRow[entity.rootEntity.name]?.values.filter { $0 == entity.entityNumber }.count ?? 0
    }

    private func reportDropped() throws {
        for mapping in plan.mappings { try reportDroppedLinks(of: mapping) }
        for entity in plan.removedEntities {
            let count = rowCount(of: entity)
            if count > 0 { report.dropped.append("\(count) \(entity.name) (entity removed from the model)") }
        }
        for mapping in plan.mappings {
            let kept = Set(
                mapping.attributes.values.compactMap { source -> String? in
                    switch source {
                    case .column(let attribute), .converted(let attribute): return attribute.name
                    case .none: return nil
                    }
                })
            for attribute in mapping.source.attributes where !attribute.isTransient && !kept.contains(attribute.name) {
                let count =
                    try Int.fetchOne(
                        db,
                        sql: """
                            SELECT COUNT(*) FROM \(qualified(mapping.source.tableName))
                            WHERE Z_ENT = ? AND \(attribute.columnName) IS NOT NULL
                            """, arguments: [mapping.source.entityNumber]) ?? 0
                if count > 0 {
                    report.dropped.append(
                        "\(count) values of \(mapping.source.name).\(attribute.name) (attribute removed from the"
                            + " model)"
                    )
                }
            }
        }
    }

    /// Counts the links of the relationships the mapping leaves behind, each pair once: on its
    /// to-one side, or in its join table by the side that names it.
    private func reportDroppedLinks(of mapping: MigrationPlan.EntityMapping) throws {
        let kept = Set(mapping.relationships.values.map(\.name))
        let owners = mapping.source
        for relationship in owners.relationships where !kept.contains(relationship.name) {
            let count: Int
            if !relationship.isToMany {
                guard try tableExists(owners.tableName) else { continue }
                count =
                    try Int.fetchOne(
                        db,
                        sql: "SELECT COUNT(*) FROM \(qualified(owners.tableName)) WHERE Z_ENT = ? AND "
                            + "\(relationship.columnName) IS NOT NULL", arguments: [owners.entityNumber]) ?? 0
            } else if SQLiteSchema.usesJoinTable(relationship, in: source) {
                let join = SQLiteSchema.joinTable(for: relationship, of: owners, in: source)
                guard join.isOwner, try tableExists(join.name) else { continue }
                count =
                    try Int.fetchOne(
                        db,
                        sql: """
                            SELECT COUNT(*) FROM \(qualified(join.name)) j
                            JOIN \(qualified(owners.tableName)) o ON o.Z_PK = j.\(join.sourceColumn) WHERE o.Z_ENT = ?
                            """, arguments: [owners.entityNumber]) ?? 0
            } else {
                continue
            }
            if count > 0 {
                report.dropped.append(
                    "\(count) links of \(owners.name).\(relationship.name) "
                        + "(no relationship of the new model takes them)")
            }
        }
    }

    /// The canonical key of a relationship pair: the side with the smaller (entity, name).
    private func linkKey(
        _ relationship: RelationshipDescription, of entity: EntityDescription
    ) -> (LinkKey, isCanonical: Bool) {
        let declaring = SQLiteSchema.declaringEntity(of: relationship, from: entity)
        let own = LinkKey(entity: declaring.name, relationship: relationship.name)
        guard let inverse = SQLiteSchema.inverse(of: relationship, in: destination),
            let target = destination.entity(named: relationship.destinationEntityName)
        else { return (own, true) }
        let other = LinkKey(
            entity: SQLiteSchema.declaringEntity(of: inverse, from: target).name, relationship: inverse.name)
        return (own.entity, own.relationship) <= (other.entity, other.relationship) ? (own, true) : (other, false)
    }

    private func readLinks(of mapping: MigrationPlan.EntityMapping) throws {
        let owners = mapping.source
        let ownerTable = qualified(owners.tableName)
        for relationship in mapping.destination.relationships {
            guard let old = mapping.relationships[relationship.name],
                let oldTarget = source.entity(named: old.destinationEntityName),
                let newTarget = destination.entity(named: relationship.destinationEntityName)
            else { continue }
            let pairs: [Row]
            // Where a damaged pair is, for the error: the table's entity (or join table) and its columns.
            var place = (entity: owners.name, columns: ["Z_PK", old.columnName])
            if !old.isToMany {
                pairs = try Row.fetchAll(
                    db,
                    sql:
                        "SELECT Z_PK, \(old.columnName) FROM \(ownerTable)"
                        + " WHERE Z_ENT = ? AND \(old.columnName) IS NOT NULL",
                    arguments: [owners.entityNumber])
            } else if SQLiteSchema.usesJoinTable(old, in: source) {
                let join = SQLiteSchema.joinTable(for: old, of: owners, in: source)
                place = (join.name, [join.sourceColumn, join.destinationColumn])
                pairs = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT j.\(join.sourceColumn), j.\(join.destinationColumn) FROM \(qualified(join.name)) j
                        JOIN \(ownerTable) o ON o.Z_PK = j.\(join.sourceColumn) WHERE o.Z_ENT = ?
                        """, arguments: [owners.entityNumber])
            } else if let inverse = SQLiteSchema.inverse(of: old, in: source) {
                place = (oldTarget.name, [inverse.columnName, "Z_PK"])
                pairs = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT t.\(inverse.columnName), t.Z_PK FROM \(qualified(oldTarget.tableName)) t
                        JOIN \(ownerTable) o ON o.Z_PK = t.\(inverse.columnName) WHERE o.Z_ENT = ?
                        """, arguments: [owners.entityNumber])
            } else {
                continue
            }
            let (key, isCanonical) = linkKey(relationship, of: mapping.destination)
            let ownerOffset = offsets[owners.rootEntity.name] ?? 0
            let targetRoot = oldTarget.rootEntity.name
            var dropped = 0
            for pair in pairs {
                // The target must still exist, as an entity the new relationship may point to.
                let owner = try integer(pair[0], place.columns[0], of: place.entity, row: nil)
                let target = try integer(pair[1], place.columns[1], of: place.entity, row: owner)
                guard let owner, let target,
                    let number = entityOfRow[targetRoot]?[target], let oldEntity = source.entity(number: number),
                    let targetMapping = plan.mappings.first(where: { $0.source === oldEntity }),
                    targetMapping.destination.isKind(of: newTarget)
                else {
                    dropped += 1
                    continue
                }
                let link = Link(owner: owner + ownerOffset, target: target + (offsets[targetRoot] ?? 0))
                links[key, default: []].insert(isCanonical ? link : Link(owner: link.target, target: link.owner))
            }
            if dropped > 0 {
                report.dropped.append(
                    "\(dropped) links of \(owners.name).\(old.name) (their destination is gone or no longer fits)")
            }
        }
    }

    // MARK: - Checks before anything is written

    private func checkBeforeWriting() throws {
        var refusals: [String] = []
        for (key, pairs) in sortedLinks {
            guard let entity = destination.entity(named: key.entity),
                let relationship = entity.relationship(named: key.relationship)
            else { continue }
            if !relationship.isToMany, let owner = duplicated(pairs.map(\.owner)) {
                refusals.append("\(entity.name).\(relationship.name) is to-one but object \(owner) has several")
            }
            if let inverse = SQLiteSchema.inverse(of: relationship, in: destination), !inverse.isToMany,
                let target = duplicated(pairs.map(\.target))
            {
                refusals.append(
                    "\(relationship.destinationEntityName).\(inverse.name) is to-one but object \(target) has several")
            }
        }
        for mapping in plan.mappings where mapping.customSteps.isEmpty {
            let entity = mapping.destination
            for attribute in entity.attributes
            where !attribute.isTransient && !attribute.isOptional && attribute.defaultValue == nil {
                let missing: Int
                switch mapping.attributes[attribute.name] {
                case .column(let old)?, .converted(let old)?:
                    missing =
                        try Int.fetchOne(
                            db,
                            sql: """
                                SELECT COUNT(*) FROM \(qualified(mapping.source.tableName))
                                WHERE Z_ENT = ? AND \(old.columnName) IS NULL
                                """, arguments: [mapping.source.entityNumber]) ?? 0
                default:
                    missing = rowCount(of: mapping.source)
                }
                if missing > 0 {
                    refusals.append(
                        "\(entity.name).\(attribute.name) is required and has no default value, "
                            + "but \(missing) objects would have none")
                }
            }
            refusals += try missingRequiredLinks(mapping)
        }
        guard refusals.isEmpty else {
            throw ObjectGraphError(
                code: .migrationCannotBeInferred,
                message:
                    "cannot migrate from model '\(source.versionIdentifier)' to '\(destination.versionIdentifier)': "
                    + refusals.joined(separator: "; ")
                    + "; register a custom migration step for the entity, or change the model")
        }
    }

    /// A to-one relationship that is new or newly required must point somewhere for every object.
    private func missingRequiredLinks(_ mapping: MigrationPlan.EntityMapping) throws -> [String] {
        let offset = offsets[mapping.source.rootEntity.name] ?? 0
        let objects = (entityOfRow[mapping.source.rootEntity.name] ?? [:])
            .filter { $0.value == mapping.source.entityNumber }.keys.map { $0 + offset }
        var refusals: [String] = []
        for relationship in mapping.destination.relationships where !relationship.isToMany && !relationship.isOptional
        {
            if let old = mapping.relationships[relationship.name], !old.isOptional { continue }
            let (key, isCanonical) = linkKey(relationship, of: mapping.destination)
            let linked = Set((links[key] ?? []).map { isCanonical ? $0.owner : $0.target })
            let missing = objects.filter { !linked.contains($0) }.count
            if missing > 0 {
                refusals.append(
                    "\(mapping.destination.name).\(relationship.name) is required, "
                        + "but \(missing) objects would point nowhere")
            }
        }
        return refusals
    }

    private func duplicated(_ keys: [Int64]) -> Int64? {
        var seen: Set<Int64> = []
        return keys.sorted().first { !seen.insert($0).inserted }
    }

    // MARK: - Writing the new store

    private func setOldTablesAside() throws {
        let placeholders = oldTables.map { _ in "?" }.joined(separator: ", ")
        let dependents = try Row.fetchAll(
            db,
            sql: """
                SELECT type, name FROM \(qualified("sqlite_master"))
                WHERE type IN ('index', 'trigger') AND sql IS NOT NULL AND tbl_name IN (\(placeholders))
                """, arguments: StatementArguments(oldTables))
        for row in dependents {
            let (type, name): (String, String) = (row[0], row[1])
            // GRDB reads text up to a NUL, so every name read here can be quoted.
            guard let quoted = SchemaObject.quoted(name) else { continue }
            try db.execute(sql: "DROP \(type == "index" ? "INDEX" : "TRIGGER") \(qualified(quoted))")
        }
        for table in oldTables {
            try db.execute(sql: "ALTER TABLE \(qualified(table)) RENAME TO \(Self.asidePrefix + table)")
        }
    }

    private func copyRows() throws {
        for mapping in plan.mappings {
            let entity = mapping.destination
            var columns = ["Z_PK", "Z_ENT", "Z_OPT"]
            var expressions = [
                "Z_PK + \(offsets[mapping.source.rootEntity.name] ?? 0)", "\(entity.entityNumber)", "Z_OPT",
            ]
            var arguments: [DatabaseValueConvertible?] = []
            for attribute in entity.attributes where !attribute.isTransient {
                let fill = attribute.defaultValue.map { StoredValues.databaseValue($0, type: attribute.type) }
                switch mapping.attributes[attribute.name] {
                case .column(let old)?:
                    columns.append(attribute.columnName)
                    if let fill, !attribute.isOptional {
                        expressions.append("COALESCE(\(old.columnName), ?)")
                        arguments.append(fill)
                    } else {
                        expressions.append(old.columnName)
                    }
                case .none?, nil:
                    guard let fill else { continue }
                    columns.append(attribute.columnName)
                    expressions.append("?")
                    arguments.append(fill)
                case .converted?:
                    continue
                }
            }
            try db.execute(
                sql: """
                    INSERT INTO \(qualified(entity.tableName)) (\(columns.joined(separator: ", ")))
                    SELECT \(expressions.joined(separator: ", ")) FROM \(aside(mapping.source.tableName))
                    WHERE Z_ENT = ?
                    """, arguments: StatementArguments(arguments + [mapping.source.entityNumber]))
        }
    }

    private func transformer(for attribute: AttributeDescription, entity: String) throws -> ValueTransformer {
        let name = attribute.valueTransformerName ?? ValueTransformerRegistry.defaultTransformerName
        guard let transformer = transformers.transformer(named: name) else {
            throw ObjectGraphError(
                code: .migrationFailed,
                message: "no value transformer named '\(name)' is registered (for \(entity).\(attribute.name))")
        }
        return transformer
    }

    /// Decodes a stored value of `attribute` at its place.
    func decode(
        _ value: DatabaseValue, _ attribute: AttributeDescription, entity: String, primaryKey: Int64
    ) throws -> Any? {
        guard attribute.type == .transformable else {
            do {
                return try StoredValues.value(value, type: attribute.type)
            } catch {
                throw ObjectGraphError(
                    code: .migrationFailed,
                    message: "cannot read \(entity).\(attribute.name) of object \(primaryKey) "
                        + "(store \(storeIdentifier)): \(error)", underlyingError: error)
            }
        }
        guard case .blob(let data) = value.storage else { return nil }
        let place = ValuePlace(
            storeIdentifier: storeIdentifier, entityName: entity, attributeName: attribute.name, primaryKey: primaryKey
        )
        do {
            return try transformer(for: attribute, entity: entity).reverseTransformedValue(data, at: place)
        } catch let error as ObjectGraphError where error.code == .migrationFailed {
            throw error
        } catch {
            throw ObjectGraphError(
                code: .migrationFailed,
                message: "cannot decode \(entity).\(attribute.name) of object \(primaryKey) "
                    + "(store \(storeIdentifier)): \(error)", underlyingError: error)
        }
    }

    /// Encodes a value of `attribute` for its place.
    func encode(
        _ value: Any?, _ attribute: AttributeDescription, entity: String, primaryKey: Int64
    ) throws -> DatabaseValue {
        guard let value, !(value is NSNull) else { return .null }
        if attribute.type == .transformable {
            let place = ValuePlace(
                storeIdentifier: storeIdentifier, entityName: entity, attributeName: attribute.name,
                primaryKey: primaryKey)
            do {
                return try transformer(for: attribute, entity: entity).transformedValue(value, at: place).databaseValue
            } catch let error as ObjectGraphError where error.code == .migrationFailed {
                throw error
            } catch {
                throw ObjectGraphError(
                    code: .migrationFailed,
                    message: "cannot encode \(entity).\(attribute.name) of object \(primaryKey): \(error)",
                    underlyingError: error)
            }
        }
        let stored = StoredValues.databaseValue(value, type: attribute.type)
        guard !stored.isNull else {
            throw ObjectGraphError(
                code: .migrationFailed,
                message:
                    "\(entity).\(attribute.name) of object \(primaryKey): a \(type(of: value)) value cannot be"
                    + " stored as \(attribute.type.rawValue)"
            )
        }
        return stored
    }

    private func convertValues() throws {
        for mapping in plan.mappings {
            let entity = mapping.destination
            let offset = offsets[mapping.source.rootEntity.name] ?? 0
            for attribute in entity.attributes where !attribute.isTransient {
                guard case .converted(let old)? = mapping.attributes[attribute.name] else { continue }
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT Z_PK, \(old.columnName) FROM \(aside(mapping.source.tableName))
                        WHERE Z_ENT = ? AND \(old.columnName) IS NOT NULL
                        """, arguments: [mapping.source.entityNumber])
                for row in rows {
                    guard let oldKey = try integer(row[0], "Z_PK", of: mapping.source.name, row: nil) else { continue }
                    let value = try decode(row[1], old, entity: mapping.source.name, primaryKey: oldKey)
                    let stored = try encode(value, attribute, entity: entity.name, primaryKey: oldKey + offset)
                    try db.execute(
                        sql: "UPDATE \(qualified(entity.tableName)) SET \(attribute.columnName) = ? WHERE Z_PK = ?",
                        arguments: [stored, oldKey + offset])
                }
                if !attribute.isOptional, let fill = attribute.defaultValue {
                    try db.execute(
                        sql:
                            "UPDATE \(qualified(entity.tableName)) SET \(attribute.columnName) = ?"
                            + " WHERE Z_ENT = ? AND \(attribute.columnName) IS NULL",
                        arguments: [StoredValues.databaseValue(fill, type: attribute.type), entity.entityNumber])
                }
            }
        }
    }

    /// Links sorted, so that a migration writes the same rows in the same order every time.
    private var sortedLinks: [(key: LinkKey, pairs: [Link])] {
        links.sorted { ($0.key.entity, $0.key.relationship) < ($1.key.entity, $1.key.relationship) }
            .map { ($0.key, $0.value.sorted { ($0.owner, $0.target) < ($1.owner, $1.target) }) }
    }

    private func writeLinks() throws {
        for (key, pairs) in sortedLinks {
            guard let entity = destination.entity(named: key.entity),
                let relationship = entity.relationship(named: key.relationship),
                let target = destination.entity(named: relationship.destinationEntityName)
            else { continue }
            let inverse = SQLiteSchema.inverse(of: relationship, in: destination)
            if SQLiteSchema.usesJoinTable(relationship, in: destination) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: destination)
                for link in pairs {
                    try db.execute(
                        sql:
                            "INSERT OR IGNORE INTO \(qualified(join.name)) (\(join.sourceColumn),"
                            + " \(join.destinationColumn)) VALUES (?, ?)",
                        arguments: [link.owner, link.target])
                }
                continue
            }
            for link in pairs {
                if !relationship.isToMany {
                    try db.execute(
                        sql: "UPDATE \(qualified(entity.tableName)) SET \(relationship.columnName) = ? WHERE Z_PK = ?",
                        arguments: [link.target, link.owner])
                }
                if let inverse, !inverse.isToMany {
                    try db.execute(
                        sql: "UPDATE \(qualified(target.tableName)) SET \(inverse.columnName) = ? WHERE Z_PK = ?",
                        arguments: [link.owner, link.target])
                }
            }
        }
    }

    /// Carries the order of each ordered relationship that was ordered in the old version too
    /// (its `Z_FOK_` values, read from the old tables set aside); one that becomes ordered
    /// starts in key order.
    private func carryOrders() throws {
        for mapping in plan.mappings {
            for relationship in mapping.destination.declaredRelationships where relationship.isOrdered {
                guard let old = mapping.relationships[relationship.name], old.isOrdered,
                      let oldTarget = source.entity(named: old.destinationEntityName),
                      let (oldPlace, newPlace) = orderPlaces(of: old, relationship, mapping)
                else { continue }
                let ownerOffset = offsets[mapping.source.rootEntity.name] ?? 0
                let memberOffset = offsets[oldTarget.rootEntity.name] ?? 0
                let rows = try Row.fetchAll(
                    db,
                    sql: "SELECT j.\(oldPlace.owner), j.\(oldPlace.member), j.\(oldPlace.order) "
                        + "FROM \(oldPlace.table) j "
                        + "JOIN \(aside(mapping.source.tableName)) o ON o.Z_PK = j.\(oldPlace.owner) "
                        + "WHERE o.Z_ENT = ? AND j.\(oldPlace.order) IS NOT NULL",
                    arguments: [mapping.source.entityNumber])
                let update = "UPDATE \(newPlace.table) SET \(newPlace.order) = ? WHERE \(newPlace.owner) = ? "
                    + "AND \(newPlace.member) = ?"
                for row in rows {
                    let place = "\(mapping.source.name).\(old.name)"
                    guard let owner = try integer(row[0], oldPlace.owner, of: place, row: nil),
                          let member = try integer(row[1], oldPlace.member, of: place, row: owner),
                          let order = try integer(row[2], oldPlace.order, of: place, row: owner) else { continue }
                    try db.execute(sql: update, arguments: [order, owner + ownerOffset, member + memberOffset])
                }
            }
        }
    }

    /// Where an ordered relationship keeps its order in the old tables (set aside) and in the
    /// new ones; nil when the two versions store it differently (a join table in one, a key in
    /// the other) or the old table was not read.
    private func orderPlaces(
        of old: RelationshipDescription, _ new: RelationshipDescription, _ mapping: MigrationPlan.EntityMapping
    ) -> (old: SQLiteSchema.OrderPlace, new: SQLiteSchema.OrderPlace)? {
        guard SQLiteSchema.usesJoinTable(old, in: source) == SQLiteSchema.usesJoinTable(new, in: destination),
              var oldPlace = SQLiteSchema.orderPlace(of: old, of: mapping.source, in: source),
              var newPlace = SQLiteSchema.orderPlace(of: new, of: mapping.destination, in: destination),
              oldTables.contains(oldPlace.table) else { return nil }
        oldPlace.table = aside(oldPlace.table)
        newPlace.table = qualified(newPlace.table)
        return (oldPlace, newPlace)
    }

    /// Sets the `Z<n>_<REL>` entity columns from the rows their relationships point to.
    private func fillEntityColumns() throws {
        var seen: Set<String> = []
        for root in plan.destinationEntities.map(\.rootEntity) where seen.insert(root.name).inserted {
            for relationship in root.tableToOneRelationships {
                guard let column = SQLiteSchema.entityColumnName(of: relationship, in: root, model: destination),
                    let target = destination.entity(named: relationship.destinationEntityName)
                else { continue }
                try db.execute(
                    sql: """
                        UPDATE \(qualified(root.tableName)) SET \(column) =
                        (SELECT t.Z_ENT FROM \(qualified(target.tableName)) t
                        WHERE t.Z_PK = \(qualified(root.tableName)).\(relationship.columnName))
                        """)
            }
        }
    }

    private func writePrimaryKeys() throws {
        for entity in plan.destinationEntities {
            var max: Int64 = 0
            if entity.superentity == nil {
                max = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(qualified(entity.tableName))") ?? 0
                for mapping in plan.mappings where mapping.destination.rootEntity === entity {
                    let root = mapping.source.rootEntity.name
                    max = Swift.max(max, (oldMaxKey[root] ?? 0) + (offsets[root] ?? 0))
                }
            }
            try db.execute(
                sql: "INSERT INTO \(qualified("Z_PRIMARYKEY")) (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, ?)",
                arguments: [entity.entityNumber, entity.name, entity.superentity?.entityNumber ?? 0, max])
        }
    }

    // MARK: - Custom steps

    private func runCustomSteps() throws {
        let writer = MigrationWriter { [unowned self] entityName, values in try self.insert(entityName, values) }
        for mapping in plan.mappings where !mapping.customSteps.isEmpty {
            let entity = mapping.destination
            let offset = offsets[mapping.source.rootEntity.name] ?? 0
            let keys = try Int64.fetchAll(
                db, sql: "SELECT Z_PK FROM \(qualified(entity.tableName)) WHERE Z_ENT = ? ORDER BY Z_PK",
                arguments: [entity.entityNumber])
            for key in keys {
                let object = MigratingObject(
                    entityName: entity.name, primaryKey: key, sourceEntityName: mapping.source.name,
                    sourceValues: try sourceValues(of: mapping.source, primaryKey: key - offset),
                    values: try values(of: entity, table: qualified(entity.tableName), primaryKey: key))
                for step in mapping.customSteps { try step.body(object, writer) }
                for name in object.changedKeys.sorted() {
                    try write(object.values[name], forKey: name, of: entity, primaryKey: key)
                }
            }
            for attribute in entity.attributes where !attribute.isTransient && !attribute.isOptional {
                let missing =
                    try Int.fetchOne(
                        db,
                        sql:
                            "SELECT COUNT(*) FROM \(qualified(entity.tableName))"
                            + " WHERE Z_ENT = ? AND \(attribute.columnName) IS NULL",
                        arguments: [entity.entityNumber]) ?? 0
                if missing > 0 {
                    throw ObjectGraphError(
                        code: .migrationFailed,
                        message:
                            "\(entity.name).\(attribute.name) is required, but the custom step left \(missing)"
                            + " objects without a value"
                    )
                }
            }
        }
    }

    /// The attributes (decoded) and to-one relationships (primary keys) of one row.
    private func values(of entity: EntityDescription, table: String, primaryKey: Int64) throws -> [String: Any] {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(table) WHERE Z_PK = ?", arguments: [primaryKey])
        else { return [:] }
        var values: [String: Any] = [:]
        for attribute in entity.attributes where !attribute.isTransient {
            guard let stored = row[attribute.columnName] as DatabaseValue? else { continue }
            if let value = try decode(stored, attribute, entity: entity.name, primaryKey: primaryKey) {
                values[attribute.name] = value
            }
        }
        for relationship in entity.relationships where !relationship.isToMany {
            guard let stored = row[relationship.columnName] as DatabaseValue? else { continue }
            if let key = try integer(stored, relationship.columnName, of: entity.name, row: primaryKey) {
                values[relationship.name] = key
            }
        }
        return values
    }

    /// An object's values in the old store, relationships given as the keys their objects
    /// have in the migrated store: to-one as one key, to-many as a sorted array of keys.
    private func sourceValues(of entity: EntityDescription, primaryKey: Int64) throws -> [String: Any] {
        var values = try self.values(of: entity, table: aside(entity.tableName), primaryKey: primaryKey)
        for relationship in entity.relationships {
            guard let target = source.entity(named: relationship.destinationEntityName) else { continue }
            let offset = offsets[target.rootEntity.name] ?? 0
            if !relationship.isToMany {
                if let key = values[relationship.name] as? Int64 { values[relationship.name] = key + offset }
                continue
            }
            var keys: [Int64] = []
            if SQLiteSchema.usesJoinTable(relationship, in: source) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: source)
                keys = try Int64.fetchAll(
                    db,
                    sql: """
                        SELECT \(join.destinationColumn) FROM \(aside(join.name)) WHERE \(join.sourceColumn) = ?
                        """, arguments: [primaryKey])
            } else if let inverse = SQLiteSchema.inverse(of: relationship, in: source) {
                keys = try Int64.fetchAll(
                    db, sql: "SELECT Z_PK FROM \(aside(target.tableName)) WHERE \(inverse.columnName) = ?",
                    arguments: [primaryKey])
            }
            values[relationship.name] = keys.map { $0 + offset }.sorted()
        }
        return values
    }

    private func write(_ value: Any?, forKey key: String, of entity: EntityDescription, primaryKey: Int64) throws {
        let stored: DatabaseValue
        let column: String
        if let attribute = entity.attribute(named: key), !attribute.isTransient {
            stored = try encode(value, attribute, entity: entity.name, primaryKey: primaryKey)
            column = attribute.columnName
        } else if let relationship = entity.relationship(named: key), !relationship.isToMany {
            guard value == nil || value is Int64 || value is Int else {
                throw ObjectGraphError(
                    code: .migrationFailed,
                    message: "\(entity.name).\(key) takes a primary key (Int64) in a migration step")
            }
            stored = (value as? Int64)?.databaseValue ?? (value as? Int)?.databaseValue ?? .null
            column = relationship.columnName
        } else {
            throw ObjectGraphError(
                code: .migrationFailed,
                message:
                    "a migration step sets '\(key)', which is no stored attribute or to-one relationship of"
                    + " \(entity.name)"
            )
        }
        try db.execute(
            sql: "UPDATE \(qualified(entity.tableName)) SET \(column) = ? WHERE Z_PK = ?",
            arguments: [stored, primaryKey])
    }

    private func insert(_ entityName: String, _ values: [String: Any]) throws -> Int64 {
        guard let entity = plan.destinationEntities.first(where: { $0.name == entityName }), !entity.isAbstract else {
            throw ObjectGraphError(
                code: .migrationFailed,
                message: "a migration step inserts '\(entityName)', which is no concrete entity of this store")
        }
        let root = entity.rootEntity
        var key = nextKey[root.name] ?? 0
        if key == 0 {
            let used = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(qualified(root.tableName))") ?? 0
            let reserved =
                plan.mappings.filter { $0.destination.rootEntity === root }
                .map { (oldMaxKey[$0.source.rootEntity.name] ?? 0) + (offsets[$0.source.rootEntity.name] ?? 0) }.max()
                ?? 0
            key = Swift.max(used, reserved) + 1
        }
        nextKey[root.name] = key + 1
        try db.execute(
            sql: "INSERT INTO \(qualified(root.tableName)) (Z_PK, Z_ENT, Z_OPT) VALUES (?, ?, 1)",
            arguments: [key, entity.entityNumber])
        var all = values
        for attribute in entity.attributes where !attribute.isTransient && all[attribute.name] == nil {
            if let value = attribute.defaultValue { all[attribute.name] = value }
        }
        for (name, value) in all.sorted(by: { $0.key < $1.key }) {
            try write(value, forKey: name, of: entity, primaryKey: key)
        }
        report.inserted[entityName, default: 0] += 1
        return key
    }
}
