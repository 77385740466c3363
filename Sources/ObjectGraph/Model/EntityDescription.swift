/// A description of an entity, as `NSEntityDescription`: its attributes, relationships,
/// place in an inheritance tree, and the number Core Data's SQLite layout gives it.
///
/// Build entities in code and hand them to
/// ``ManagedObjectModel/init(entities:configurations:versionIdentifier:file:deferringPatternChecks:)``,
/// or load them from an `.xcdatamodeld` folder.
///
/// For example:
///
/// ```swift
/// let note = EntityDescription(name: "Note", attributes: [
///     AttributeDescription(name: "title", type: .string, isOptional: false),
/// ])
/// ```
public final class EntityDescription: CustomStringConvertible {
    /// The entity's name, unique in its model.
    public let name: String
    /// The name of the entity it inherits from, if any.
    public let parentName: String?
    /// An abstract entity has no objects of its own, only of its sub-entities.
    public let isAbstract: Bool
    /// The attributes and relationships declared on this entity (not inherited).
    public internal(set) var declaredAttributes: [AttributeDescription]
    public internal(set) var declaredRelationships: [RelationshipDescription]
    /// The model's user info for the entity.
    public let userInfo: [String: String]
    /// The class Xcode names for its objects (kept, not used to make them).
    public let managedObjectClassName: String?
    /// The entity's renaming identifier (Xcode's `elementID`): its name in an older model version.
    public let elementID: String?
    /// Sets of attribute names whose values no two objects of this entity (and its
    /// sub-entities) may share, as Xcode's `<uniquenessConstraints>`; checked at save.
    public let uniquenessConstraints: [[String]]

    // Set once when the model is assembled.
    /// Its number in the store (`Z_ENT`), by Core Data's rule: sorted by name, parents first.
    public internal(set) var entityNumber: Int = 0
    /// The entity it inherits from.
    public internal(set) weak var superentity: EntityDescription?
    /// The entities that inherit from it directly.
    public internal(set) var subentities: [EntityDescription] = []
    /// Every attribute, inherited ones first.
    public internal(set) var attributes: [AttributeDescription] = []
    /// Every relationship, inherited ones first.
    public internal(set) var relationships: [RelationshipDescription] = []
    var attributesByName: [String: AttributeDescription] = [:]
    var relationshipsByName: [String: RelationshipDescription] = [:]
    /// Every attribute and to-one column of this entity and all its sub-entities: the root table's columns.
    var tableAttributes: [AttributeDescription] = []
    var tableToOneRelationships: [RelationshipDescription] = []
    /// Stored attributes (lean) and to-one relationships, with their column positions in the
    /// root table's `SELECT`: computed once, used for every row read or written.
    var storedColumns: [StoredColumn] = []
    /// Attribute names and types, for key-value access without hashing or copying descriptions.
    var attributeNames: [String] = []
    var attributeTypeList: [AttributeType] = []
    /// Where each property's value sits in its objects' values: attributes, then relationships.
    var propertyLayout = PropertyLayout.empty
    /// All-absent values in `propertyLayout`, shared by every new object and fault until its first
    /// write copies them: a fault costs no buffer of its own.
    var emptyValues = PropertyValues()
    /// For each of `storedColumns`, its position in `propertyLayout`.
    var storedColumnSlots: [Int] = []

    @inline(__always)
    func attributeType(of key: String) -> AttributeType? {
        attributeNames.firstIndex(of: key).map { attributeTypeList[$0] }
    }
    var storedToOne: [(relationship: RelationshipDescription, column: Int)] = []
    /// For each of `storedToOne`, its position in `propertyLayout`.
    var storedToOneSlots: [Int] = []
    /// Per `storedToOne` relationship: its `Z<n>_<REL>` entity column, when its destination has sub-entities.
    var storedToOneEntityColumns: [String?] = []
    var transientAttributes: [AttributeDescription] = []
    /// Whether a deletion's history keeps some of its attributes (a tombstone), read from its values.
    var keepsTombstone = false
    /// Per attribute (same order as `attributes`): whether validation has more to check than presence.
    var attributeHasValueRules: [Bool] = []
    var toManyRelationshipNames: [String] = []
    /// Whether any relationship of this entity is stored in a join table.
    var hasJoinTables = false
    /// True when a relationship of the entity keeps its destinations in an order.
    var hasOrderedRelationships = false
    var objectClass: ManagedObject.Type = ManagedObject.self
    /// The root table's columns in `SELECT` order, and each column's position.
    var selectColumns: [String] = []
    var columnIndex: [String: Int] = [:]

    public init(
        name: String, parent: String? = nil, isAbstract: Bool = false,
        attributes: [AttributeDescription] = [], relationships: [RelationshipDescription] = [],
        userInfo: [String: String] = [:], managedObjectClassName: String? = nil, elementID: String? = nil,
        uniquenessConstraints: [[String]] = []
    ) {
        self.elementID = elementID
        self.uniquenessConstraints = uniquenessConstraints
        self.name = name
        self.parentName = parent
        self.isAbstract = isAbstract
        self.declaredAttributes = attributes
        self.declaredRelationships = relationships
        self.userInfo = userInfo
        self.managedObjectClassName = managedObjectClassName
    }

    /// The root of this entity's inheritance tree: it owns the table.
    public var rootEntity: EntityDescription { superentity?.rootEntity ?? self }

    /// The table holding this entity's rows: `Z` + the uppercased root entity name.
    public var tableName: String { "Z" + rootEntity.name.uppercased() }

    /// This entity and all its sub-entities, depth first.
    public var selfAndDescendants: [EntityDescription] { [self] + subentities.flatMap(\.selfAndDescendants) }

    public func attribute(named name: String) -> AttributeDescription? { attributesByName[name] }
    public func relationship(named name: String) -> RelationshipDescription? { relationshipsByName[name] }

    /// The name shown to people for a property: `userInfo["displayName"]` of the property, else its name.
    public func displayName(forKey key: String) -> String {
        attributesByName[key]?.userInfo["displayName"] ?? relationshipsByName[key]?.userInfo["displayName"] ?? key
    }

    /// The name shown to people for this entity: `userInfo["displayName"]`, else its name.
    public var displayName: String { userInfo["displayName"] ?? name }

    /// The destination entity of one of this entity's relationships.
    weak var modelReference: ManagedObjectModel?

    func destination(of relationship: RelationshipDescription) -> EntityDescription? {
        modelReference?.entity(named: relationship.destinationEntityName)
    }

    public func isKind(of other: EntityDescription) -> Bool {
        self === other || (superentity?.isKind(of: other) ?? false)
    }

    public var description: String { "<Entity \(name) #\(entityNumber)>" }
}

/// One stored attribute of an entity, as reading and writing rows needs it.
struct StoredColumn {
    let name: String
    let columnName: String
    let type: AttributeType
    let index: Int
    let transformerName: String
}
