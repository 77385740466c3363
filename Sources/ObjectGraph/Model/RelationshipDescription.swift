/// What happens to the destination objects when the source object is deleted.
public enum DeleteRule: String, Sendable {
    case nullify = "Nullify"
    case cascade = "Cascade"
    case deny = "Deny"
    case noAction = "No Action"
}

/// A description of one relationship of an entity, as `NSRelationshipDescription`.
///
/// For example:
///
/// ```swift
/// let systems = RelationshipDescription(name: "systems", destination: "System",
///                                       inverse: "category", isToMany: true, deleteRule: .deny)
/// ```
public struct RelationshipDescription: Sendable {
    /// The relationship's name; a to-one's column is `Z` and the name in capitals.
    public var name: String {
        didSet { columnName = "Z" + name.uppercased() }
    }
    /// The entity at the other end.
    public var destinationEntityName: String
    /// The relationship on the destination that points back, kept in step by contexts.
    public var inverseName: String?
    /// Whether it holds a set of objects rather than one.
    public var isToMany: Bool
    /// What deleting the source does to the destinations.
    public var deleteRule: DeleteRule
    /// Whether an object may be saved with no destination.
    public var isOptional: Bool
    /// Minimum and maximum number of destination objects (0 = no bound), as Xcode writes them.
    public var minCount: Int
    public var maxCount: Int
    /// The model's user info for the relationship.
    public var userInfo: [String: String]
    /// The relationship's renaming identifier: its name in an older model version.
    public var elementID: String?
    /// Whether a to-many relationship keeps its destinations in an order (`NSOrderedSet`); the
    /// store keeps it in a `Z_FOK_` column. Meaningless for a to-one.
    public var isOrdered: Bool

    public init(
        name: String, destination: String, inverse: String? = nil, isToMany: Bool = false,
        deleteRule: DeleteRule = .nullify, isOptional: Bool = true, minCount: Int = 0,
        maxCount: Int = 0, userInfo: [String: String] = [:], elementID: String? = nil, isOrdered: Bool = false
    ) {
        self.isOrdered = isToMany && isOrdered
        self.name = name
        self.columnName = "Z" + name.uppercased()
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = isToMany
        self.deleteRule = deleteRule
        self.isOptional = isOptional
        self.minCount = minCount
        self.maxCount = isToMany ? maxCount : 1
        self.userInfo = userInfo
        self.elementID = elementID
    }

    /// The foreign-key column of a to-one relationship: `Z` + the uppercased name, numbered as an
    /// attribute's is when a sibling sub-entity stores a property of the same name first.
    public internal(set) var columnName: String
}
