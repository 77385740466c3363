import Foundation

/// One change a migration makes, in the model's words.
public struct MigrationChange: Sendable, Equatable, CustomStringConvertible {
    /// What changes.
    public enum Kind: Sendable, Equatable {
        case entityAdded
        case entityRemoved
        case entityRenamed(from: String)
        case parentChanged(from: String?, to: String?)
        case attributeAdded(defaultValue: String?)
        case attributeRemoved
        case attributeRenamed(from: String)
        case becameRequired(defaultValue: String?)
        case becameOptional
        case typeChanged(from: AttributeType, to: AttributeType)
        /// A transformed value is decoded at its old place and encoded at its new one.
        case reencoded(reason: String)
        case indexAdded
        case indexRemoved
        case relationshipAdded
        case relationshipRemoved
        case relationshipRenamed(from: String)
        case toOneBecameToMany
        case toManyBecameToOne
        case destinationChanged(from: String, to: String)
        /// A custom step registered for the entity runs for each of its objects.
        case customStep
    }

    /// The entity concerned (its name in the newer version).
    public var entity: String
    /// The property concerned, if the change is a property's.
    public var property: String?
    /// What changes.
    public var kind: Kind

    public var description: String {
        let place = property.map { "\(entity).\($0)" } ?? entity
        switch kind {
        case .entityAdded: return "add entity \(entity)"
        case .entityRemoved: return "remove entity \(entity) and its objects"
        case .entityRenamed(let old): return "rename entity \(old) to \(entity)"
        case .parentChanged(let old, let new):
            return "move entity \(entity) from parent \(old ?? "(none)") to \(new ?? "(none)")"
        case .attributeAdded(let value): return "add attribute \(place)" + (value.map { " (default \($0))" } ?? "")
        case .attributeRemoved: return "remove attribute \(place) and its values"
        case .attributeRenamed(let old): return "rename attribute \(entity).\(old) to \(property ?? "")"
        case .becameRequired(let value):
            return "make \(place) required"
                + (value.map { ", empty values become \($0)" } ?? " (every object must have a value)")
        case .becameOptional: return "make \(place) optional"
        case .typeChanged(let old, let new): return "change \(place) from \(old.rawValue) to \(new.rawValue)"
        case .reencoded(let reason): return "re-encode \(place) (\(reason))"
        case .indexAdded: return "index \(place)"
        case .indexRemoved: return "drop the index of \(place)"
        case .relationshipAdded: return "add relationship \(place)"
        case .relationshipRemoved: return "remove relationship \(place) and its links"
        case .relationshipRenamed(let old): return "rename relationship \(entity).\(old) to \(property ?? "")"
        case .toOneBecameToMany: return "make \(place) to-many"
        case .toManyBecameToOne: return "make \(place) to-one (each object must have at most one)"
        case .destinationChanged(let old, let new): return "point \(place) at \(new) instead of \(old)"
        case .customStep: return "run the custom step for \(entity)"
        }
    }
}

/// How one migration between two model versions maps the old store onto the new model,
/// inferred from the two models as Core Data's lightweight migration does: entities and
/// properties are matched by name or by renaming identifier (`elementID`).
///
/// For example:
///
/// ```swift
/// let plan = try MigrationPlan(from: versions.versions[0], to: versions.current)
/// plan.changes.forEach { print($0) }
/// ```
public struct MigrationPlan {
    /// How one destination attribute gets its values.
    enum AttributeSource {
        /// Copied by SQL, optionally filling NULLs with the destination's default.
        case column(AttributeDescription)
        /// Decoded and encoded row by row (transformers, or a transformable on one side).
        case converted(AttributeDescription)
        /// A new attribute: its default (or nothing).
        case none
    }

    struct EntityMapping {
        let destination: EntityDescription
        let source: EntityDescription
        /// Destination attribute name → where its values come from.
        let attributes: [String: AttributeSource]
        /// Destination relationship name → source relationship.
        let relationships: [String: RelationshipDescription]
        let customSteps: [EntityMigrationStep]
    }

    /// The older version, which the store fits.
    public let source: ManagedObjectModel
    /// The newer version.
    public let destination: ManagedObjectModel
    /// The configuration whose entities the store holds (all entities when nil).
    public let configuration: String?
    /// Every change, in words, in a stable order.
    public let changes: [MigrationChange]
    /// The Xcode mapping model the plan follows; nil when it was inferred.
    public let mappingModel: MappingModel?
    let mappings: [EntityMapping]
    let removedEntities: [EntityDescription]
    let sourceEntities: [EntityDescription]
    let destinationEntities: [EntityDescription]

    /// Infers the plan.
    ///
    /// - throws: ``ObjectGraphError`` 134190 naming every change that cannot be inferred and
    ///   that no custom step in `steps` covers.
    ///
    /// With a `mappingModel` (an Xcode mapping model between the two versions), entities and
    /// properties are paired as it says instead of inferred; what it states that needs app code
    /// is refused, unless a step in `steps` covers the entity.
    public init(
        from source: ManagedObjectModel, to destination: ManagedObjectModel, configuration: String? = nil,
        steps: [EntityMigrationStep] = [], mappingModel: MappingModel? = nil
    ) throws {
        self.source = source
        self.destination = destination
        self.configuration = configuration
        self.mappingModel = mappingModel
        sourceEntities = source.entities(forConfiguration: configuration)
        destinationEntities = destination.entities(forConfiguration: configuration)
        var refusals: [String] = []
        var stated: StatedMapping?
        if let mappingModel {
            stated = StatedMapping(
                mappingModel, from: sourceEntities, to: destinationEntities, steps: steps,
                sourceVersion: source.versionIdentifier, refusals: &refusals)
        }
        let pairs = stated?.entities ?? matchByRenamingIdentifier(
            destinationEntities, sourceEntities, name: \.name, elementID: \.elementID)
        var changes: [MigrationChange] = []
        var mappings: [EntityMapping] = []
        for entity in destinationEntities {
            guard let old = pairs[entity.name] else {
                changes.append(MigrationChange(entity: entity.name, kind: .entityAdded))
                continue
            }
            let entitySteps = steps.filter { $0.covers(entity.name, from: source.versionIdentifier) }
            let mapping = Self.map(
                entity, from: old, sourceOf: { pairs[$0]?.name }, steps: entitySteps,
                stated: stated?.properties[entity.name], changes: &changes, refusals: &refusals)
            mappings.append(mapping)
        }
        let mapped = Set(mappings.map { ObjectIdentifier($0.source) })
        removedEntities = sourceEntities.filter { !mapped.contains(ObjectIdentifier($0)) }
        for entity in removedEntities { changes.append(MigrationChange(entity: entity.name, kind: .entityRemoved)) }
        guard refusals.isEmpty else {
            throw ObjectGraphError(
                code: .migrationCannotBeInferred,
                message:
                    (mappingModel == nil ? "cannot infer a migration" : "cannot migrate")
                    + " from model '\(source.versionIdentifier)' to '\(destination.versionIdentifier)': "
                    + refusals.joined(separator: "; ")
                    + "; register a custom migration step for the entity, or change the model")
        }
        self.changes = changes
        self.mappings = mappings
    }

    /// `sourceOf` names the old entity a new entity (by name) is migrated from.
    private static func map(
        _ entity: EntityDescription, from old: EntityDescription, sourceOf: (String) -> String?,
        steps: [EntityMigrationStep], stated: StatedMapping.Properties?, changes: inout [MigrationChange],
        refusals: inout [String]
    ) -> EntityMapping {
        let name = entity.name
        if old.name != name { changes.append(MigrationChange(entity: name, kind: .entityRenamed(from: old.name))) }
        let parentMoved: Bool
        switch (entity.superentity, old.superentity) {
        case (nil, nil): parentMoved = false
        case let (newParent?, oldParent?): parentMoved = sourceOf(newParent.name) != oldParent.name
        default: parentMoved = true
        }
        if parentMoved {
            changes.append(
                MigrationChange(
                    entity: name,
                    kind: .parentChanged(
                        from: old.superentity?.name,
                        to: entity.superentity?.name)))
        }
        // Only the properties an entity declares are described, so an inherited one is told once.
        let declared = Set(entity.declaredAttributes.map(\.name) + entity.declaredRelationships.map(\.name))
        func note(_ property: String, _ kind: MigrationChange.Kind) {
            if declared.contains(property) {
                changes.append(MigrationChange(entity: name, property: property, kind: kind))
            }
        }
        let newAttributes = entity.attributes.filter { !$0.isTransient }
        let oldAttributes = old.attributes.filter { !$0.isTransient }
        let attributePairs = stated?.attributes ?? matchByRenamingIdentifier(
            newAttributes, oldAttributes, name: \.name, elementID: \.elementID)
        var attributes: [String: AttributeSource] = [:]
        for attribute in newAttributes {
            guard let previous = attributePairs[attribute.name] else {
                attributes[attribute.name] = AttributeSource.none
                note(attribute.name, .attributeAdded(defaultValue: attribute.defaultValueString))
                continue
            }
            if previous.name != attribute.name { note(attribute.name, .attributeRenamed(from: previous.name)) }
            if previous.isOptional && !attribute.isOptional {
                note(attribute.name, .becameRequired(defaultValue: attribute.defaultValueString))
            } else if !previous.isOptional && attribute.isOptional {
                note(attribute.name, .becameOptional)
            }
            if previous.isIndexed != attribute.isIndexed {
                note(attribute.name, attribute.isIndexed ? .indexAdded : .indexRemoved)
            }
            if previous.type != attribute.type {
                note(attribute.name, .typeChanged(from: previous.type, to: attribute.type))
            }
            switch conversion(
                from: previous, to: attribute, placeMoved: previous.name != attribute.name || old.name != name)
            {
            case .copy:
                attributes[attribute.name] = .column(previous)
            case .convert(let reason):
                attributes[attribute.name] = .converted(previous)
                if let reason { note(attribute.name, .reencoded(reason: reason)) }
            case .impossible:
                attributes[attribute.name] = AttributeSource.none
                if steps.isEmpty {
                    refusals.append(
                        "\(name).\(attribute.name) changes from \(previous.type.rawValue) "
                            + "to \(attribute.type.rawValue)"
                    )
                }
            }
        }
        for attribute in oldAttributes where !attributePairs.values.contains(where: { $0.name == attribute.name }) {
            if old.declaredAttributes.contains(where: { $0.name == attribute.name }) {
                changes.append(MigrationChange(entity: name, property: attribute.name, kind: .attributeRemoved))
            }
        }
        let relationshipPairs = stated?.relationships ?? matchByRenamingIdentifier(
            entity.relationships, old.relationships, name: \.name, elementID: \.elementID)
        for relationship in entity.relationships {
            guard let previous = relationshipPairs[relationship.name] else {
                note(relationship.name, .relationshipAdded)
                continue
            }
            if previous.name != relationship.name {
                note(relationship.name, .relationshipRenamed(from: previous.name))
            }
            if previous.isToMany != relationship.isToMany {
                note(relationship.name, relationship.isToMany ? .toOneBecameToMany : .toManyBecameToOne)
            }
            if sourceOf(relationship.destinationEntityName) != previous.destinationEntityName {
                note(
                    relationship.name,
                    .destinationChanged(from: previous.destinationEntityName, to: relationship.destinationEntityName))
            }
        }
        for relationship in old.declaredRelationships
        where !relationshipPairs.values.contains(where: { $0.name == relationship.name }) {
            changes.append(MigrationChange(entity: name, property: relationship.name, kind: .relationshipRemoved))
        }
        if !steps.isEmpty { changes.append(MigrationChange(entity: name, kind: .customStep)) }
        return EntityMapping(
            destination: entity, source: old, attributes: attributes,
            relationships: relationshipPairs, customSteps: steps)
    }

    /// True when the store's tables stay exactly as they are: nothing changes but the
    /// recorded version (every entity keeps its name and number).
    var keepsLayout: Bool {
        changes.isEmpty && removedEntities.isEmpty && mappings.count == destinationEntities.count
            && mappings.allSatisfy { mapping in
                mapping.source.name == mapping.destination.name
                    && mapping.source.entityNumber == mapping.destination.entityNumber
                    && mapping.customSteps.isEmpty
            }
    }

    enum Conversion { case copy, convert(reason: String?), impossible }

    /// How values of `old` become values of `new`: SQL copies what SQLite stores the same way.
    static func conversion(
        from old: AttributeDescription, to new: AttributeDescription, placeMoved: Bool
    ) -> Conversion {
        let transformers = (
            old.valueTransformerName ?? ValueTransformerRegistry.defaultTransformerName,
            new.valueTransformerName ?? ValueTransformerRegistry.defaultTransformerName
        )
        switch (old.type, new.type) {
        case (.transformable, .transformable):
            if transformers.0 != transformers.1 {
                return .convert(reason: "transformer \(transformers.0) → \(transformers.1)")
            }
            return placeMoved ? .convert(reason: "its place moved, and a transformer may bind values to it") : .copy
        case (.transformable, _): return .convert(reason: "decoded from \(transformers.0)")
        case (_, .transformable): return .convert(reason: "encoded with \(transformers.1)")
        case let (from, to) where from == to: return .copy
        case let (from, to) where from.isInteger && to.isInteger:
            return (to.integerRange?.count ?? 0) >= (from.integerRange?.count ?? 0) ? .copy : .impossible
        case let (from, to) where (from.isInteger || from == .boolean) && (to.isNumeric || to == .boolean):
            return .copy
        case (.float, .double), (.double, .float), (.float, .decimal), (.double, .decimal): return .copy
        case (.string, .uri), (.uri, .string): return .copy
        default: return .impossible
        }
    }
}

/// Pairs each new item with an old one: first by renaming identifier (the new item's
/// `elementID` naming the old item's name or identifier), then by equal names.
func matchByRenamingIdentifier<T>(
    _ new: [T], _ old: [T], name: (T) -> String, elementID: (T) -> String?
) -> [String: T] {
    var pairs: [String: T] = [:]
    var claimed: Set<String> = []
    for item in new {
        guard let identifier = elementID(item),
            let match = old.first(where: {
                (name($0) == identifier || elementID($0) == identifier) && !claimed.contains(name($0))
            })
        else { continue }
        pairs[name(item)] = match
        claimed.insert(name(match))
    }
    for item in new where pairs[name(item)] == nil {
        guard let match = old.first(where: { name($0) == name(item) }), !claimed.contains(name(match)) else {
            continue
        }
        pairs[name(item)] = match
        claimed.insert(name(match))
    }
    return pairs
}
