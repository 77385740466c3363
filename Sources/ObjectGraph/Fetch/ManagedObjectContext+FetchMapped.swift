import Foundation
import GRDB

extension ManagedObjectContext {
    /// The objects a request describes, each turned into a value by `transform` as its batch
    /// of `batchSize` rows is read, the objects then let go (unless something else holds them):
    /// memory holds the values, never every object of a large result at once. The predicate
    /// and the sort are those of ``fetch(_:)``, parts on transformed attributes evaluated a
    /// batch at a time; sorting in memory keeps each value's sort keys until the end.
    ///
    /// For example, the names of every entry, with flat memory whatever their number:
    ///
    /// ```swift
    /// let names = try context.fetchMapped(FetchRequest<Entry>(sortDescriptors: [byName])) { $0.name }
    /// ```
    ///
    /// A context with unsaved changes, or a request whose limit or offset must be applied in
    /// memory, is fetched whole as ``fetch(_:)`` does, then transformed.
    ///
    /// - throws: as ``fetch(_:)``, and what `transform` throws.
    public func fetchMapped<T, Value>(
        _ request: FetchRequest<T>, batchSize: Int = 1000, _ transform: (T) throws -> Value
    ) throws -> [Value] {
        let plan = try plan(for: request)
        guard isStreamable(request, plan) else { return try fetch(request).map(transform) }
        var values: [Value] = []
        var sortKeys = plan.sortsInMemory ? SortKeys(request.sortDescriptors) : nil
        let sortPaths = Self.sortKeyPaths(request.sortDescriptors)
        try forEachBatch(request, plan: plan, batchSize: batchSize) { objects in
            for object in objects {
                sortKeys?.append(of: object, at: sortPaths)
                values.append(try transform(object))
            }
        }
        if let sortKeys { Self.sort(&values, by: sortKeys) }
        return values
    }

    /// The objects a request describes, given to `body` a batch of `batchSize` at a time in the
    /// request's order and let go after it (unless something else holds them): memory holds
    /// one batch, whatever the number of objects, for a writer that streams them out.
    ///
    /// A request sorted in memory (a sort key on a transformed attribute), a context with unsaved
    /// changes, or a limit or offset applied in memory is fetched whole as ``fetch(_:)`` does,
    /// then given a batch at a time.
    ///
    /// - throws: as ``fetch(_:)``, and what `body` throws.
    public func forEachBatch<T>(
        _ request: FetchRequest<T>, batchSize: Int = 1000, _ body: ([T]) throws -> Void
    ) throws {
        let plan = try plan(for: request)
        guard isStreamable(request, plan), !plan.sortsInMemory else {
            for batch in try fetch(request).chunked(Swift.max(1, batchSize)) { try body(Array(batch)) }
            return
        }
        try forEachBatch(request, plan: plan, batchSize: batchSize, body)
    }

    /// Whether the rows can be read a batch at a time: none of the result is only in memory.
    private func isStreamable<T>(_ request: FetchRequest<T>, _ plan: FetchPlan) -> Bool {
        let windowInMemory = plan.needsMemoryWindow && (request.fetchLimit > 0 || request.fetchOffset > 0)
        return !hasChanges && !windowInMemory && plan.parentPending == nil && parent == nil
    }

    /// Reads the keys the request selects, then the objects a batch at a time, in the SQL order.
    private func forEachBatch<T>(
        _ request: FetchRequest<T>, plan: FetchPlan, batchSize: Int, _ body: ([T]) throws -> Void
    ) throws {
        let sql = plan.sql(select: ["t0.Z_PK"], window: true, request: request)
        let keys = try wrapStoreErrors(.objectNotFound, "cannot fetch \(request.entityName)") {
            try coordinator.read { db in
                try Int64.fetchAll(db, sql: sql, arguments: StatementArguments(plan.arguments))
            }
        }
        for chunk in keys.chunked(Swift.max(1, batchSize)) {
            var objects = try self.objects(
                primaryKeys: Array(chunk), root: plan.root, store: plan.store, decoding: request.propertiesToFetch)
            if !request.relationshipKeyPathsForPrefetching.isEmpty {
                try prefetchRelationships(request.relationshipKeyPathsForPrefetching, of: objects)
            }
            var batch: [T] = []
            batch.reserveCapacity(objects.count)
            for object in objects {
                if let residual = plan.residual, !PredicateEvaluator.evaluate(residual, on: object) { continue }
                guard let typed = object as? T else {
                    throw ObjectGraphError(
                        code: .objectNotFound,
                        message: "\(object.entity.name) objects are \(type(of: object)), not \(T.self)")
                }
                batch.append(typed)
            }
            try body(batch)
            try throwDeferredError()
            // The batch's last references go first, so that nothing but the context holds its objects.
            batch = []
            objects = []
            let root = plan.root.entityNumber
            releaseUnreferencedObjects(chunk.map { ObjectKey(rootEntityNumber: root, primaryKey: $0) })
        }
    }
}
