import Foundation
import GRDB

// Result types beyond objects: object IDs and dictionaries (with aggregates and grouping),
// batched results, and relationship prefetching.
extension ManagedObjectContext {
    // MARK: - Object IDs

    /// The IDs of the objects a request describes, read without building the objects when
    /// the whole request runs in SQL, as Core Data's `managedObjectIDResultType`.
    public func fetchObjectIDs<T>(_ request: FetchRequest<T>) throws -> [ObjectID] {
        let plan = try plan(for: request)
        guard !plan.needsMemoryWindow else { return try fetch(request).map(\.objectID) }
        let sql = plan.sql(select: ["t0.Z_PK", "t0.Z_ENT"], window: true, request: request)
        return try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                try Row.fetchAll(db, sql: sql, arguments: StatementArguments(plan.arguments)).map { row in
                    try objectID(
                        primaryKey: Self.integer(row, 0, "Z_PK", root: plan.root, store: plan.store),
                        entityNumber: Int(clamping: Self.integer(row, 1, "Z_ENT", root: plan.root, store: plan.store)),
                        root: plan.root, store: plan.store)
                }
            }
        }
    }

    func objectID(primaryKey: Int64, entityNumber: Int, root: EntityDescription, store: PersistentStore) -> ObjectID {
        permanentID(of: entity(number: entityNumber, root: root), in: store, primaryKey: primaryKey)
    }

    /// The entity a row's `Z_ENT` names under `root`; `root` for a number that names none of its.
    func entity(number: Int, root: EntityDescription) -> EntityDescription {
        model.entity(number: number).flatMap { $0.rootEntity === root ? $0 : nil } ?? root
    }

    // MARK: - Dictionaries

    /// Dictionaries of the request's ``FetchRequest/dictionaryProperties``, grouped by
    /// ``FetchRequest/propertiesToGroupBy`` and made distinct by
    /// ``FetchRequest/returnsDistinctResults``, as Core Data's `dictionaryResultType`.
    ///
    /// Like Core Data's, these come from the stores: unsaved changes are not included. A
    /// result leaves out keys whose value is nil. Aggregates and grouping run in SQL; a
    /// plain property of a transformed attribute is read from its row and decoded there, never
    /// through an object (and sorted by in memory), unless the predicate needs the objects.
    ///
    /// ```swift
    /// var request = FetchRequest<ManagedObject>(entityName: "System")
    /// request.dictionaryProperties = [.keyPath("category.name", as: "category"), .aggregate(.count, of: "*", as: "n")]
    /// request.propertiesToGroupBy = ["category.name"]
    /// let rows = try context.fetchDictionaries(request)  // [["category": "Web", "n": 2], ...]
    /// ```
    ///
    /// - throws: ``ObjectGraphError`` for an unknown key path, or for an aggregate or
    ///   grouping over values that cannot be read in SQL (transformed or transient).
    public func fetchDictionaries<T>(_ request: FetchRequest<T>) throws -> [[String: Any]] {
        try fetchDictionaries(request) { $0.dictionary }
    }

    /// ``fetchDictionaries(_:)``, each result handed to `transform` as it is read and only what
    /// it returns kept: a list of many rows holds the lines it prints, not every dictionary.
    public func fetchDictionaries<T, Value>(
        _ request: FetchRequest<T>, _ transform: (FetchedValues) throws -> Value
    ) throws -> [Value] {
        var request = request
        request.includesPendingChanges = false
        var unsorted = request
        unsorted.sortDescriptors = []  // they may name result properties; ordered below
        let plan = try plan(for: unsorted)
        guard let entity = model.entity(named: request.entityName) else { return [] }
        let properties =
            request.dictionaryProperties.isEmpty
            ? entity.attributes.filter { !$0.isTransient }.map { FetchedProperty.keyPath($0.name) }
            : request.dictionaryProperties
        let aggregates = !request.propertiesToGroupBy.isEmpty || properties.contains { $0.function != nil }
        var compiler = PredicateSQLCompiler(model: model, store: plan.store)
        func expression(_ keyPath: String) throws -> (sql: String, type: AttributeType?)? {
            do {
                return try compiler.valueExpression(
                    keyPath.split(separator: ".").map(String.init)[...], entity: entity, alias: "t0")
            } catch PredicateSQLCompiler.CompileError.unknownKey(let key, let entityName) {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "keypath '\(key)' not found in entity \(entityName) (property '\(keyPath)')")
            }
        }
        var columns: [(sql: String, type: AttributeType?)] = []
        for property in properties {
            // An object's ID is no SQL expression: read with the rows below.
            if property.isObjectID {
                columns = []
                break
            }
            if property.function == .count, property.keyPath == "*" {
                columns.append(("COUNT(*)", .integer64))
                continue
            }
            guard let value = try expression(property.keyPath) else {
                columns = []
                break
            }
            columns.append(property.function.map { ($0.sql(value.sql), $0.resultType(of: value.type)) } ?? value)
        }
        var groups: [String] = []
        for keyPath in request.propertiesToGroupBy {
            guard let value = try expression(keyPath) else {
                groups = []
                columns = []
                break
            }
            groups.append(value.sql)
        }
        guard plan.residual == nil, columns.count == properties.count else {
            if aggregates {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "cannot aggregate or group \(request.entityName) in SQL: "
                        + "a property or the predicate names a transformed or transient attribute")
            }
            if !request.returnsDistinctResults,
               let rows = try dictionariesFromRows(
                request, plan: plan, entity: entity, properties: properties, compiler: &compiler, transform)
            {
                return rows
            }
            return try dictionariesInMemory(request, properties: properties).map(transform)
        }
        var sql =
            "SELECT \(request.returnsDistinctResults ? "DISTINCT " : "")"
            + columns.enumerated().map { "\($0.element.sql) AS c\($0.offset)" }.joined(separator: ", ")
            + " FROM \(plan.store.qualified(plan.root.tableName)) t0"
        if !plan.conditions.isEmpty { sql += " WHERE " + plan.conditions.joined(separator: " AND ") }
        if !groups.isEmpty { sql += " GROUP BY " + groups.joined(separator: ", ") }
        let order = request.sortDescriptors.map { descriptor -> String? in
            if let index = properties.firstIndex(where: { $0.name == descriptor.key }) {
                return
                    "\(descriptor.caseInsensitive ? "OG_FOLD(c\(index), 1)" : "c\(index)") "
                        + "\(descriptor.ascending ? "ASC" : "DESC")"
            }
            return compiler.orderTerm(descriptor, entity: entity, alias: "t0")
        }
        if !order.isEmpty {
            guard order.allSatisfy({ $0 != nil }) else {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "dictionary results of \(request.entityName) can only be sorted "
                        + "by their properties or plainly stored attributes")
            }
            sql += " ORDER BY " + order.compactMap { $0 }.joined(separator: ", ")
        }
        if request.fetchLimit > 0 || request.fetchOffset > 0 {
            sql += " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(request.fetchOffset)"
        }
        let finalSQL = sql
        let names = properties.map(\.name)
        return try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                try Row.fetchAll(db, sql: finalSQL, arguments: StatementArguments(plan.arguments)).map { row in
                    var result = FetchedValues(names: names)
                    for (index, property) in properties.enumerated() {
                        let value = row[index] as DatabaseValue
                        do {
                            result.values[index] = try StoredValues.value(value, type: columns[index].type ?? .binary)
                        } catch {
                            throw ObjectGraphError(
                                code: .undecodableValue,
                                message: "cannot read \(property.name) of \(request.entityName) "
                                    + "in store '\(plan.store.displayName)': \(error)")
                        }
                    }
                    return try transform(result)
                }
            }
        }
    }

    /// Dictionaries read row by row when SQL alone cannot answer only because a property is a
    /// transformed attribute (decoded at its place, as an object's would be) or an object's ID:
    /// sorted in memory when a sort key is transformed, and filtered in memory by what of the
    /// predicate SQL cannot evaluate when it reads only the properties. Nil when the request
    /// needs objects (a sort key neither a property nor ordered in SQL, a transformed key path,
    /// a predicate reading other key paths or counting a subquery).
    private func dictionariesFromRows<T, Value>(
        _ request: FetchRequest<T>, plan: FetchPlan, entity: EntityDescription, properties: [FetchedProperty],
        compiler: inout PredicateSQLCompiler, _ transform: (FetchedValues) throws -> Value
    ) throws -> [Value]? {
        var columns: [DictionaryColumn] = []
        for property in properties {
            if property.isObjectID {
                columns.append(.objectID)
            } else if let attribute = entity.attribute(named: property.keyPath), attribute.type == .transformable,
                      !attribute.isTransient
            {
                columns.append(.transformed(TransformedColumn(attribute)))
            } else if let value = try compiler.valueExpression(
                property.keyPath.split(separator: ".").map(String.init)[...], entity: entity, alias: "t0")
            {
                columns.append(.value(sql: value.sql, type: value.type))
            } else {
                return nil
            }
        }
        // What SQL cannot filter is evaluated on the properties read: it may read nothing else
        // (not SELF either, which is the object there, not its ID).
        let propertyAt = Dictionary(
            properties.indices.filter { properties[$0].function == nil && !properties[$0].isObjectID }
                .map { (properties[$0].keyPath, $0) }
        ) { first, _ in first }
        if let residual = plan.residual {
            guard let keyPaths = PredicateEvaluator.keyPaths(of: residual),
                  keyPaths.allSatisfy({ propertyAt[$0.joined(separator: ".")] != nil })
            else { return nil }
        }
        // Each sort key is a property's value, sorted in memory, or else ordered in SQL.
        let sortProperties = request.sortDescriptors.map { descriptor in
            properties.firstIndex { $0.name == descriptor.key || $0.keyPath == descriptor.key }
        }
        let sortsInMemory = sortProperties.contains { index in
            index.map { if case .value = columns[$0] { false } else { true } } ?? false
        }
        var sql = "SELECT t0.Z_PK, t0.Z_ENT"
        for (index, column) in columns.enumerated() {
            switch column {
            case .value(let expression, _): sql += ", \(expression) AS c\(index)"
            case .transformed(let column): sql += ", t0.\(column.columnName)"
            case .objectID: sql += ", NULL"
            }
        }
        sql += " FROM \(plan.store.qualified(plan.root.tableName)) t0"
        if !plan.conditions.isEmpty { sql += " WHERE " + plan.conditions.joined(separator: " AND ") }
        if sortsInMemory {
            guard sortProperties.allSatisfy({ $0 != nil }) else { return nil }
            sql += " ORDER BY t0.Z_PK"
        } else if !request.sortDescriptors.isEmpty {
            let terms = zip(request.sortDescriptors, sortProperties).map { descriptor, index in
                index.map {
                    "\(descriptor.caseInsensitive ? "OG_FOLD(c\($0), 1)" : "c\($0)") "
                        + (descriptor.ascending ? "ASC" : "DESC")
                } ?? compiler.orderTerm(descriptor, entity: entity, alias: "t0")
            }
            guard terms.allSatisfy({ $0 != nil }) else { return nil }
            sql += " ORDER BY " + terms.compactMap { $0 }.joined(separator: ", ")
        }
        let windowInMemory = sortsInMemory || plan.residual != nil
        if request.fetchLimit > 0 || request.fetchOffset > 0, !windowInMemory {
            sql += " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(request.fetchOffset)"
        }
        var values: [Value] = []
        var sortKeys = sortsInMemory ? SortKeys(request.sortDescriptors) : nil
        // Read once, not from the plan at every row (a copy of it each time).
        let (root, store, residual) = (plan.root, plan.store, plan.residual)
        // One result refilled for each row: a transform that keeps it keeps a copy.
        var result = FetchedValues(names: properties.map(\.name))
        try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                // A whole table's rows counted first (its smallest b-tree), so that the results
                // are not copied again at each doubling: a list reads them all.
                if plan.conditions.isEmpty, request.fetchLimit == 0,
                   let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(store.qualified(root.tableName))")
                {
                    values.reserveCapacity(count)
                    sortKeys?.reserveCapacity(count)
                }
                // The entity of the row before, found again only when a row is of another one.
                var (rowEntity, rowEntityNumber) = (root, Int?.none)
                try db.forEachRow(sql: sql, arguments: plan.arguments) { row in
                    let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
                    let entityNumber = Int(
                        clamping: try Self.integer(row, 1, "Z_ENT", root: root, store: store))
                    if entityNumber != rowEntityNumber {
                        (rowEntity, rowEntityNumber) = (self.entity(number: entityNumber, root: root), entityNumber)
                    }
                    let objectID = permanentID(of: rowEntity, in: store, primaryKey: primaryKey)
                    for (index, column) in columns.enumerated() {
                        let value: Any?
                        switch column {
                        case .objectID:
                            value = objectID
                        case .transformed(let column):
                            let transformer = try column.transformer ?? transformer(
                                named: column.transformerName, entity: rowEntity, key: column.name)
                            column.transformer = transformer
                            // Decoded in place: a list decodes thousands.
                            let place = ValuePlace(
                                attribute: column.attribute(of: rowEntity, in: store), primaryKey: primaryKey)
                            value = try decodedInPlace(row, at: index + 2, place: place, { transformer })
                            if value == nil {
                                // No blob: NULL, or a damaged row (which this throws for).
                                _ = try encodedValue(
                                    row.databaseValue(at: index + 2), attribute: column.name,
                                    column: column.columnName, entity: rowEntity, root: root,
                                    store: store, primaryKey: primaryKey)
                            }
                        case .value(_, let type):
                            do {
                                value = try StoredValues.value(row.databaseValue(at: index + 2), type: type ?? .binary)
                            } catch {
                                throw ObjectGraphError.undecodable(
                                    error, store: store, entity: rowEntity.name,
                                    attribute: properties[index].keyPath, primaryKey: primaryKey)
                            }
                        }
                        result.values[index] = value
                    }
                    if let residual, !PredicateEvaluator.evaluate(residual, reading: { path in
                        propertyAt[path.joined(separator: ".")].flatMap { result.values[$0] }
                    }) {
                        return
                    }
                    if sortsInMemory { for index in sortProperties { sortKeys?.append(result.values[index!]) } }
                    values.append(try transform(result))
                }
            }
        }
        if let sortKeys { Self.sort(&values, by: sortKeys) }
        guard windowInMemory, request.fetchOffset > 0 || request.fetchLimit > 0 else { return values }
        let kept = values.dropFirst(request.fetchOffset)
        return Array(request.fetchLimit > 0 ? kept.prefix(request.fetchLimit) : kept)
    }

    /// Where a dictionary result's value comes from when read row by row.
    private enum DictionaryColumn {
        case value(sql: String, type: AttributeType?)
        case transformed(TransformedColumn)
        case objectID
    }

    /// A transformed attribute read row by row: what each value needs, and its transformer,
    /// looked up at the first value (not copied or looked up again for each).
    private final class TransformedColumn {
        let name: String
        let columnName: String
        let transformerName: String?
        var transformer: ValueTransformer?
        /// The place of its values in the rows of `placeEntity`, made at the first of them.
        private var place: ValuePlace.Attribute?
        /// Compared by identity alone: the column lives for one fetch, while its model's entities
        /// live on. (A weak reference made every row's entity count its references the slow way.)
        private var placeEntity: ObjectIdentifier?

        /// Where its values live in the rows of `entity` (the same for all of a list's rows, but
        /// for subentities).
        func attribute(of entity: EntityDescription, in store: PersistentStore) -> ValuePlace.Attribute {
            if let place, placeEntity == ObjectIdentifier(entity), place.storeIdentifier == store.identifier {
                return place
            }
            let made = ValuePlace.Attribute(
                storeIdentifier: store.identifier, entityName: entity.name, attributeName: name)
            (place, placeEntity) = (made, ObjectIdentifier(entity))
            return made
        }

        init(_ attribute: AttributeDescription) {
            name = attribute.name
            columnName = attribute.columnName
            transformerName = attribute.valueTransformerName
        }
    }

    /// Results built from fetched objects, for properties SQL cannot read.
    private func dictionariesInMemory<T>(
        _ request: FetchRequest<T>, properties: [FetchedProperty]
    ) throws -> [FetchedValues] {
        var seen: Set<String> = []
        var results: [FetchedValues] = []
        let names = properties.map(\.name)
        for object in try fetch(request) {
            var result = FetchedValues(names: names)
            for (index, property) in properties.enumerated() {
                result.values[index] =
                    property.isObjectID ? object.objectID : object.value(forKeyPath: property.keyPath)
            }
            if request.returnsDistinctResults {
                let identity = result.values.map { "\($0.map { "\($0)" } ?? "\u{0}")" }.joined(separator: "\u{1}")
                guard seen.insert(identity).inserted else { continue }
            }
            results.append(result)
        }
        try throwDeferredError()
        return results
    }

    // MARK: - Batches

    /// The objects a request describes, read `fetchBatchSize` rows at a time as they are
    /// reached: only their primary keys are read up front, and objects of batches left
    /// behind are released unless something else holds them (an unsaved change, your own
    /// reference). Walking a large result so keeps memory flat.
    ///
    /// A request that must run partly in memory (a predicate or sort on a transformed
    /// attribute, unsaved changes to include) is read whole.
    public func fetchBatched<T>(_ request: FetchRequest<T>) throws -> BatchedFetchResults {
        let plan = try plan(for: request)
        let batchSize = request.fetchBatchSize > 0 ? min(request.fetchBatchSize, 10_000) : 200
        guard !plan.needsMemoryWindow else {
            return BatchedFetchResults(
                context: self, plan: plan, request: request, batchSize: batchSize, loaded: try fetch(request))
        }
        let sql = plan.sql(select: ["t0.Z_PK"], window: true, request: request)
        let keys = try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                try Int64.fetchAll(db, sql: sql, arguments: StatementArguments(plan.arguments))
            }
        }
        return BatchedFetchResults(context: self, plan: plan, request: request, batchSize: batchSize, keys: keys)
    }

    /// Reads the rows of `keys` (in that order) of a root entity's table.
    func objects(
        primaryKeys keys: [Int64], root: EntityDescription, store: PersistentStore,
        decoding: Set<String>?
    ) throws -> [ManagedObject] {
        var found: [Int64: ManagedObject] = [:]
        found.reserveCapacity(keys.count)
        for chunk in keys.chunked(500) {
            let sql =
                "SELECT \(root.selectColumns.map { "t0.\($0)" }.joined(separator: ", ")) FROM "
                    + "\(store.qualified(root.tableName)) t0 "
                + "WHERE t0.Z_PK IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))"
            try wrapStoreErrors(.objectNotFound, "cannot read \(root.name) rows") {
                try coordinator.read { db in
                    try db.forEachRow(sql: sql, arguments: chunk.map(\.databaseValue)) { row in
                        let object = try materialize(row, root: root, store: store, decoding: decoding)
                        found[row.int64(at: 0) ?? 0] = object
                    }
                }
            }
        }
        return keys.compactMap { found[$0] }
    }

    /// Registers fetched objects; one already registered is the same instance, set again.
    func register(_ objects: [ManagedObject], root: EntityDescription) {
        registered.reserveCapacity(registered.count + objects.count)
        for object in objects {
            guard let primaryKey = object.objectID.primaryKey else { continue }
            registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)] = object
        }
    }

    /// Lets go of registered objects nothing else holds and that have no unsaved change.
    func releaseUnreferencedObjects(_ keys: [ObjectKey]) {
        for key in keys {
            guard var object = registered.removeValue(forKey: key) else { continue }
            if !isKnownUniquelyReferenced(&object) || object.hasChanges { registered[key] = object }
        }
    }

    // MARK: - Prefetching

    /// Reads the destinations of relationship key paths (`"category"`, `"tags"`,
    /// `"category.systems"`) of `objects` in one query per step and relationship.
    public func prefetchRelationships(_ keyPaths: [String], of objects: [ManagedObject]) throws {
        for keyPath in keyPaths {
            var current = objects
            for key in keyPath.split(separator: ".").map(String.init) {
                current = try prefetch(key, of: current)
            }
        }
        try throwDeferredError()
    }

    /// Loads relationship `key` of every object that has it; returns the destinations.
    private func prefetch(_ key: String, of objects: [ManagedObject]) throws -> [ManagedObject] {
        var bySource: [Int64: ManagedObject] = [:]
        var relationship: RelationshipDescription?
        var sourceEntity: EntityDescription?
        var destinations: [ManagedObject] = []
        var faultKeys: [Int64] = []
        for object in objects {
            guard let found = object.entity.relationship(named: key) else {
                throw ObjectGraphError(
                    code: .objectNotFound, message: "relationship '\(key)' not found in entity \(object.entity.name)")
            }
            relationship = found
            sourceEntity = sourceEntity ?? object.entity
            if found.isToMany {
                if object.loadedToMany.contains(key) {
                    destinations += object.toManyObjects(found)
                } else if let primaryKey = object.objectID.primaryKey {
                    bySource[primaryKey] = object
                }
            } else if let fault = object.values[key] as? FaultReference {
                faultKeys.append(fault.primaryKey)
            } else if let destination = object.toOneObject(found) {
                destinations.append(destination)
            }
        }
        guard let relationship, let sourceEntity,
            let destination = model.entity(named: relationship.destinationEntityName)
        else {
            return destinations
        }
        let root = destination.rootEntity
        let store = try coordinator.store(for: root)
        if !relationship.isToMany {
            let loaded = try self.objects(primaryKeys: Array(Set(faultKeys)), root: root, store: store, decoding: nil)
            return destinations + loaded.filter { $0.entity.isKind(of: destination) }
        }
        guard !bySource.isEmpty else { return destinations }
        let columns = root.selectColumns.map { "t0.\($0)" }.joined(separator: ", ")
        let from: String
        // Each source's destinations arrive in their order when the relationship is ordered.
        var order = ""
        if SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: sourceEntity, in: model)
            order = join.destinationOrderColumn.map { " ORDER BY j.\($0), t0.Z_PK" } ?? ""
            from =
                "SELECT \(columns), j.\(join.sourceColumn) FROM \(store.qualified(root.tableName)) t0 "
                + "JOIN \(store.qualified(join.name)) j ON j.\(join.destinationColumn) = t0.Z_PK WHERE "
                    + "j.\(join.sourceColumn) IN "
        } else if let inverse = SQLiteSchema.inverse(of: relationship, in: model) {
            from =
                "SELECT \(columns), t0.\(inverse.columnName) FROM \(store.qualified(root.tableName)) t0 WHERE "
                    + "t0.\(inverse.columnName) IN "
            order = SQLiteSchema.orderColumnName(ofToOne: inverse, in: model)
                .map { " ORDER BY t0.\($0), t0.Z_PK" } ?? ""
        } else {
            return destinations
        }
        var found: [Int64: [ManagedObject]] = [:]
        for chunk in Array(bySource.keys).chunked(500) {
            let sql = from + "(\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))" + order
            try wrapStoreErrors(.objectNotFound, "cannot prefetch \(sourceEntity.name).\(key)") {
                try coordinator.read { db in
                    try db.forEachRow(sql: sql, arguments: chunk.map(\.databaseValue)) { row in
                        let object = try materialize(row, root: root, store: store)
                        guard object.entity.isKind(of: destination),
                              let source = row.int64(at: root.selectColumns.count) else { return }
                        found[source, default: []].append(object)
                    }
                }
            }
        }
        for (primaryKey, source) in bySource where !source.loadedToMany.contains(key) {
            destinations += source.installStored(found[primaryKey] ?? [], for: relationship).objects
        }
        return destinations
    }
}

/// The result of ``ManagedObjectContext/fetchBatched(_:)``: a random-access collection that
/// reads its objects a batch at a time, as Core Data's batched fetch results.
///
/// A batch that cannot be read (the store failed, or the row was deleted meanwhile) yields
/// objects without values, and the context's next fetch or save throws the error.
public final class BatchedFetchResults: RandomAccessCollection {
    /// The fetched objects.
    public typealias Element = ManagedObject
    private let context: ManagedObjectContext
    private let root: EntityDescription
    private let store: PersistentStore
    private let decoding: Set<String>?
    private let prefetching: [String]
    /// The rows' primary keys, in order; empty when the result was read whole.
    private let keys: [Int64]
    private let loaded: [ManagedObject]?
    /// How many rows each read brings in.
    public let batchSize: Int
    private var batchNumber = -1
    private var batch: [ManagedObject] = []

    init(
        context: ManagedObjectContext, plan: ManagedObjectContext.FetchPlan, request: FetchRequest<some ManagedObject>,
        batchSize: Int, keys: [Int64] = [], loaded: [ManagedObject]? = nil
    ) {
        self.context = context
        self.root = plan.root
        self.store = plan.store
        self.decoding = request.propertiesToFetch
        self.prefetching = request.relationshipKeyPathsForPrefetching
        self.batchSize = batchSize
        self.keys = keys
        self.loaded = loaded
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// The number of objects fetched.
    public var endIndex: Int { loaded?.count ?? keys.count }

    /// The object at `position`, reading its batch first if needed.
    public subscript(position: Int) -> ManagedObject {
        if let loaded { return loaded[position] }
        let number = position / batchSize
        if number != batchNumber { load(batch: number) }
        return batch[position - number * batchSize]
    }

    private func load(batch number: Int) {
        let left = batch.compactMap { object in
            object.objectID.primaryKey.map {
                ManagedObjectContext.ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: $0)
            }
        }
        batch = []
        context.releaseUnreferencedObjects(left)
        let wanted = Array(keys[(number * batchSize)..<Swift.min(keys.count, (number + 1) * batchSize)])
        var objects: [ManagedObject] = []
        do {
            objects = try context.objects(primaryKeys: wanted, root: root, store: store, decoding: decoding)
            if !prefetching.isEmpty { try context.prefetchRelationships(prefetching, of: objects) }
        } catch {
            if context.deferredError == nil { context.deferredError = error }
        }
        if objects.count != wanted.count {
            let byKey = Dictionary(
                objects.map { ($0.objectID.primaryKey ?? -1, $0) }, uniquingKeysWith: { first, _ in first })
            if context.deferredError == nil {
                context.deferredError = ObjectGraphError(
                    code: .objectNotFound,
                    message: "\(wanted.count - objects.count) \(root.name) row(s) of a batched fetch no longer exist")
            }
            objects = wanted.map { key in byKey[key] ?? placeholder(primaryKey: key) }
        }
        batch = objects
        batchNumber = number
    }

    /// An object without values standing for a row that could not be read.
    private func placeholder(primaryKey: Int64) -> ManagedObject {
        let object = context.model.objectClass(for: root).init(entity: root)
        object.objectID = ObjectID(
            entityName: root.name, storeIdentifier: store.identifier, primaryKey: primaryKey, temporaryNumber: nil)
        return object
    }
}

extension Array {
    /// The array cut into consecutive pieces of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
