import Foundation

/// How to order fetched objects: a key path (through to-one relationships), a direction,
/// and whether letter case matters.
public struct FetchSortDescriptor: Sendable {
    public var key: String
    public var ascending: Bool
    public var caseInsensitive: Bool

    public init(key: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }
}

/// What to fetch: an entity, a predicate, an order and a window, as `NSFetchRequest`.
///
/// ```swift
/// var request = FetchRequest<ManagedObject>(entityName: "System")
/// request.predicate = try Predicate(format: "category.name == %@", "Web Site")
/// request.sortDescriptors = [FetchSortDescriptor(key: "name")]
/// request.fetchLimit = 20
/// let systems = try context.fetch(request)
/// ```
public struct FetchRequest<Result: ManagedObject> {
    public var entityName: String
    public var predicate: Predicate?
    public var sortDescriptors: [FetchSortDescriptor] = []
    /// The most objects to return; 0 for no limit.
    public var fetchLimit = 0
    public var fetchOffset = 0
    public var includesSubentities = true
    /// Include objects inserted and exclude objects deleted in the context but not yet saved.
    public var includesPendingChanges = true
    /// The Transformable attributes to decode while fetching (nil: all of them), as Core
    /// Data's `propertiesToFetch`. The others stay encoded until first read, or until
    /// ``ManagedObjectContext/decodeValues(of:)`` decodes them and reports any failure.
    public var propertiesToFetch: Set<String>?
    /// Return objects not registered yet as faults (``ManagedObject/isFault``): only their
    /// identities are read, each object's row on first access, as Core Data's
    /// `returnsObjectsAsFaults`. False by default, unlike Core Data, which keeps fetched rows in
    /// a cache that makes firing a fault cheap: here each fault fired is one query. Ignored when
    /// part of the predicate or sort runs in memory (the values are read for it).
    public var returnsObjectsAsFaults = false
    /// The columns of ``ManagedObjectContext/fetchDictionaries(_:)``: attributes, key paths
    /// and aggregates, in order (empty: every stored attribute).
    public var dictionaryProperties: [FetchedProperty] = []
    /// Key paths that dictionary results are grouped by, as `propertiesToGroupBy`.
    public var propertiesToGroupBy: [String] = []
    /// Leave out duplicate dictionary results, as `returnsDistinctResults`.
    public var returnsDistinctResults = false
    /// Rows read per batch by ``ManagedObjectContext/fetchBatched(_:)``; 0 for its default.
    public var fetchBatchSize = 0
    /// Relationship key paths whose destinations are read with the fetched objects, a few
    /// queries in all instead of one per object, as `relationshipKeyPathsForPrefetching`.
    public var relationshipKeyPathsForPrefetching: [String] = []

    public init(entityName: String, predicate: Predicate? = nil, sortDescriptors: [FetchSortDescriptor] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }
}

extension FetchRequest where Result: ManagedEntity {
    public init(predicate: Predicate? = nil, sortDescriptors: [FetchSortDescriptor] = []) {
        self.init(entityName: Result.entityName, predicate: predicate, sortDescriptors: sortDescriptors)
    }
}
