import Foundation
import GRDB

extension ManagedObjectContext {
    /// Fetches the objects a request describes.
    ///
    /// The parts of the predicate and sort that concern plainly stored attributes run in
    /// SQL with bound parameters; parts on transformed or transient attributes run in
    /// memory on decoded values, never on the stored bytes. Unsaved inserted objects are
    /// included and deleted ones left out, unless `includesPendingChanges` is false.
    ///
    /// - throws: ``ObjectGraphError`` for an unknown entity or key, or a store error; a
    ///   transformer's error when a stored value cannot be decoded.
    public func fetch<T>(_ request: FetchRequest<T>) throws -> [T] {
        let plan = try plan(for: request)
        var objects: [ManagedObject] = []
        try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                let asFault = request.returnsObjectsAsFaults && plan.residual == nil && !plan.sortsInMemory
                    && plan.parentPending == nil
                let columns = asFault ? ["t0.Z_PK", "t0.Z_ENT", "t0.Z_OPT"] : plan.columns
                let sql = plan.sql(select: columns, window: !plan.needsMemoryWindow, request: request)
                // New objects are registered after the last row, in a registry grown once; only a
                // predicate evaluated in memory could look them up before.
                let defersRegistration = plan.residual == nil
                try db.forEachRow(sql: sql, arguments: plan.arguments) { row in
                    let object = try materialize(
                        row, root: plan.root, store: plan.store, decoding: request.propertiesToFetch,
                                                 registering: !defersRegistration, asFault: asFault)
                    if request.includesPendingChanges, deletedSet.contains(object) { return }
                    if !deletedInParent.isEmpty, deletedInParent.contains(
                        ObjectKey(rootEntityNumber: plan.root.entityNumber, primaryKey: object.registeredPrimaryKey)) {
                        return
                    }
                    if let residual = plan.residual, !PredicateEvaluator.evaluate(residual, on: object) { return }
                    objects.append(object)
                }
                if defersRegistration { register(objects, root: plan.root) }
            }
        }
        if let pending = plan.parentPending {
            objects = try applying(pending, to: objects, request: request, plan: plan)
        }
        if plan.includesInserted {
            objects += insertedSet.objects.filter { object in
                plan.entities.contains { $0 === object.entity }
                    && (request.predicate.map { $0.evaluate(with: object) } ?? true)
            }
        }
        if plan.sortsInMemory || plan.includesInserted || plan.parentPending != nil {
            objects = sorted(objects, by: request.sortDescriptors)
        }
        try throwDeferredError()
        if plan.needsMemoryWindow {
            objects = Array(objects.dropFirst(request.fetchOffset))
            if request.fetchLimit > 0 { objects = Array(objects.prefix(request.fetchLimit)) }
        }
        if !request.relationshipKeyPathsForPrefetching.isEmpty {
            try prefetchRelationships(request.relationshipKeyPathsForPrefetching, of: objects)
        }
        // Untyped requests get the array itself: `as? [T]` would copy it element by element.
        if T.self == ManagedObject.self { return unsafeBitCast(objects, to: [T].self) }
        return try objects.map { object in
            guard let typed = object as? T else {
                throw ObjectGraphError(
                    code: .objectNotFound,
                    message: "\(object.entity.name) objects are \(type(of: object)), not \(T.self)")
            }
            return typed
        }
    }

    /// The number of objects a request would fetch, counted in SQL when it can be.
    public func count<T>(for request: FetchRequest<T>) throws -> Int {
        let plan = try plan(for: request)
        guard plan.needsMemoryWindow else {
            return try wrapStoreErrors(.objectNotFound, "cannot count \(request.entityName)") {
                try coordinator.read { db in
                    try Int.fetchOne(
                        db, sql: plan.sql(select: ["COUNT(*)"], window: true, request: request, ordered: false),
                                     arguments: StatementArguments(plan.arguments)) ?? 0
                }
            }
        }
        return try fetch(request).count
    }

    struct FetchPlan {
        var root: EntityDescription
        var store: PersistentStore
        var entities: [EntityDescription]
        var columns: [String]
        var conditions: [String]
        var arguments: [DatabaseValue]
        var orderTerms: [String]
        var residual: Predicate.Node?
        var sortsInMemory: Bool
        var includesInserted: Bool
        var needsMemoryWindow: Bool
        /// The parent's unsaved state a child's fetch applies; nil when there is none.
        var parentPending: ParentPendingState?

        func sql(
            select: [String], window: Bool, request: FetchRequest<some ManagedObject>, ordered: Bool = true
        ) -> String {
            var sql = "SELECT \(select.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) t0"
            if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
            if ordered, !orderTerms.isEmpty, !sortsInMemory { sql += " ORDER BY " + orderTerms.joined(separator: ", ") }
            if window, select.first != "COUNT(*)", request.fetchLimit > 0 || request.fetchOffset > 0 {
                sql += " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(request.fetchOffset)"
            }
            if select.first == "COUNT(*)", request.fetchLimit > 0 || request.fetchOffset > 0 {
                sql = "SELECT COUNT(*) FROM (SELECT 1 FROM \(store.qualified(root.tableName)) t0"
                    + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
                    + " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(request.fetchOffset))"
            }
            return sql
        }
    }

    func plan<T>(for request: FetchRequest<T>) throws -> FetchPlan {
        processPendingChanges()
        guard let entity = model.entity(named: request.entityName) else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "the model has no entity named '\(request.entityName)'")
        }
        try request.predicate?.checkKeyPaths(against: entity)
        let root = entity.rootEntity
        let store = try coordinator.store(for: entity)
        let entities = request.includesSubentities ? entity.selfAndDescendants : [entity]
        var conditions: [String] = []
        if entities.count != root.selfAndDescendants.count {
            conditions.append("t0.Z_ENT IN (\(entities.map { String($0.entityNumber) }.joined(separator: ", ")))")
        }
        var compiler = PredicateSQLCompiler(model: model, store: store)
        var residual: [Predicate.Node] = []
        if let node = request.predicate?.root {
            let conjuncts: [Predicate.Node]
            if case .and(let parts) = node { conjuncts = parts } else { conjuncts = [node] }
            for conjunct in conjuncts {
                do {
                    if let sql = try compiler.compile(conjunct, entity: entity, alias: "t0") {
                        conditions.append("(\(sql))")
                    } else {
                        residual.append(conjunct)
                    }
                } catch PredicateSQLCompiler.CompileError.unknownKey(let key, let entityName) {
                    throw ObjectGraphError(
                        code: .objectNotFound,
                        message:
                            "keypath '\(key)' not found in entity \(entityName) (predicate "
                                + "'\(request.predicate!.format)')"
                    )
                }
            }
        }
        for descriptor in request.sortDescriptors where !entity.resolves(keyPath: descriptor.key) {
            throw ObjectGraphError(
                code: .objectNotFound, message: "sort key '\(descriptor.key)' not found in entity \(entity.name)")
        }
        let orderTerms = request.sortDescriptors.map { compiler.orderTerm($0, entity: entity, alias: "t0") }
        let sortsInMemory = orderTerms.contains { $0 == nil }
        let includesInserted =
            request.includesPendingChanges
            && insertedSet.objects.contains { object in entities.contains { $0 === object.entity } }
        let excludesDeleted = request.includesPendingChanges && !deletedSet.isEmpty
        let parentPending = parent.map { parent in parent.performAndWait { parent.pendingStateForChild() } }
            .flatMap { $0.isEmpty ? nil : $0 }
        return FetchPlan(
            root: root, store: store, entities: entities,
            columns: root.selectColumns.map { "t0.\($0)" }, conditions: conditions, arguments: compiler.arguments,
            orderTerms: orderTerms.compactMap { $0 },
            residual: residual.isEmpty ? nil : (residual.count == 1 ? residual[0] : .and(residual)),
            sortsInMemory: sortsInMemory, includesInserted: includesInserted,
            needsMemoryWindow: !residual.isEmpty || sortsInMemory || includesInserted || excludesDeleted
                || parentPending != nil,
            parentPending: parentPending)
    }

    func sorted(_ objects: [ManagedObject], by descriptors: [FetchSortDescriptor]) -> [ManagedObject] {
        guard !descriptors.isEmpty else { return objects }
        // Each key is read (and case-folded) once, not at every comparison.
        let paths = Self.sortKeyPaths(descriptors)
        var keys = SortKeys(descriptors)
        for object in objects { keys.append(of: object, at: paths) }
        var sorted = objects
        Self.sort(&sorted, by: keys)
        return sorted
    }

    /// The key paths `descriptors` sort by, split once for every object a sort reads.
    static func sortKeyPaths(_ descriptors: [FetchSortDescriptor]) -> [ArraySlice<String>] {
        descriptors.map { ManagedObject.steps(of: $0.key) }
    }

    /// Puts `values` in the order of their `keys`, ties kept in place: each value moved once,
    /// not copied, as a list sorts thousands of results. (Called unspecialized, a swap copied
    /// each value twice, with a retain and release per reference.)
    static func sort<Value>(_ values: inout [Value], by keys: SortKeys) {
        precondition(values.count == keys.count, "A key for each value")
        // Position i takes the value at order[i]: each cycle of the permutation is walked once,
        // its first value held aside while the others move up.
        let order = keys.order()
        var placed = [Bool](repeating: false, count: order.count)
        values.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            for start in order.indices where !placed[start] {
                placed[start] = true
                guard order[start] != start else { continue }
                let first = (base + start).move()
                var current = start
                while order[current] != start {
                    let next = order[current]
                    (base + current).moveInitialize(from: base + next, count: 1)
                    placed[next] = true
                    current = next
                }
                (base + current).initialize(to: first)
            }
        }
    }
}

/// The sort keys of a fetch's results, row after row, each cast once into what it compares as
/// when it is added (text case-folded where its descriptor asks it, and copied into one
/// buffer): no row keeps an array of keys, and the n log n comparisons touch no reference count.
struct SortKeys {
    let descriptors: [FetchSortDescriptor]
    private var values: [SortValue] = []
    private var text: [UInt8] = []

    init(_ descriptors: [FetchSortDescriptor]) {
        precondition(!descriptors.isEmpty, "Something to sort by")
        self.descriptors = descriptors
    }

    /// The rows whose keys are all in.
    var count: Int { values.count / descriptors.count }

    mutating func reserveCapacity(_ rows: Int) { values.reserveCapacity(rows * descriptors.count) }

    /// Adds the next key of the current row: the rows' keys go in one after another, in the
    /// order of the descriptors.
    mutating func append(_ value: Any?) {
        let descriptor = descriptors[values.count % descriptors.count]
        if descriptor.caseInsensitive, let text = value as? String {
            values.append(SortValue(PredicateEvaluator.fold(text, .caseInsensitive), text: &self.text))
        } else {
            values.append(SortValue(value, text: &text))
        }
    }

    /// Adds the keys of `object`, read at `paths` (``ManagedObjectContext/sortKeyPaths(_:)``).
    mutating func append(of object: ManagedObject, at paths: [ArraySlice<String>]) {
        for path in paths { append(object.value(forKeyPath: path)) }
    }

    /// The positions of the rows in the order the descriptors give, ties kept in place.
    func order() -> [Int] {
        let width = descriptors.count
        let ascending = descriptors.map(\.ascending)
        return values.withUnsafeBufferPointer { values in
            text.withUnsafeBufferPointer { text in
                (0..<count).sorted { left, right in
                    for index in 0..<width {
                        let comparison = SortValue.compare(
                            values[left * width + index], values[right * width + index], text: text)
                        if comparison != 0 { return ascending[index] ? comparison < 0 : comparison > 0 }
                    }
                    return left < right
                }
            }
        }
    }
}

/// A sort key as the one kind of value it compares as: nil first, text in byte order (as
/// SQLite's BINARY collation), dates, then numbers; values of different kinds sort alike, as
/// ``PredicateEvaluator`` orders them.
enum SortValue {
    case absent
    /// Where its UTF-8 bytes are in the sort's text buffer.
    case text(Range<Int>)
    case date(Date)
    case number(Double)
    case incomparable

    /// `value` as it compares; text is appended to `buffer`.
    init(_ value: Any?, text buffer: inout [UInt8]) {
        switch value {
        case nil: self = .absent
        case let text as String:
            let start = buffer.count
            buffer.append(contentsOf: text.utf8)
            self = .text(start..<buffer.count)
        case let date as Date: self = .date(date)
        default: self = doubleValue(value).map(SortValue.number) ?? .incomparable
        }
    }

    /// -1, 0 or 1; `text` is the buffer the values' text is in.
    static func compare(_ left: SortValue, _ right: SortValue, text: UnsafeBufferPointer<UInt8>) -> Int {
        switch (left, right) {
        case (.absent, .absent): return 0
        case (.absent, _): return -1
        case (_, .absent): return 1
        case (.text(let left), .text(let right)):
            let common = min(left.count, right.count)
            if common > 0, let base = text.baseAddress,
               case let order = memcmp(base + left.lowerBound, base + right.lowerBound, common), order != 0
            {
                return order < 0 ? -1 : 1
            }
            return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
        case (.date(let left), .date(let right)): return left == right ? 0 : (left < right ? -1 : 1)
        case (.number(let left), .number(let right)): return left == right ? 0 : (left < right ? -1 : 1)
        default: return 0
        }
    }
}

extension EntityDescription {
    /// True when every step of a dotted key path names a property (through relationships).
    func resolves(keyPath: String) -> Bool {
        var current: EntityDescription? = self
        for key in keyPath.split(separator: ".").map(String.init) {
            guard let entity = current else { return key == "@count" }
            if entity.attribute(named: key) != nil {
                current = nil
            } else if let relationship = entity.relationship(named: key) {
                current = entity.destination(of: relationship)
            } else {
                return false
            }
        }
        return true
    }
}
