import Foundation

/// A problem that stops a model from loading: it names the file, the entity and the
/// property at fault.
public struct ModelError: Error, CustomStringConvertible {
    /// The model file the problem is in, if known.
    public var file: String?
    /// The entity the problem is in, if any.
    public var entity: String?
    /// The attribute or relationship the problem is in, if any.
    public var property: String?
    /// What is wrong, in words.
    public var reason: String

    public init(file: String? = nil, entity: String? = nil, property: String? = nil, reason: String) {
        self.file = file
        self.entity = entity
        self.property = property
        self.reason = reason
    }

    public var description: String {
        var place: [String] = []
        if let file { place.append(file) }
        if let entity { place.append(property.map { "\(entity).\($0)" } ?? entity) }
        return place.isEmpty
            ? "invalid model: \(reason)" : "invalid model (\(place.joined(separator: ": "))): \(reason)"
    }
}

/// A managed object model, as `NSManagedObjectModel`: entities, and configurations that
/// split them between persistent stores.
///
/// Load one from Xcode's format, or build one in code:
///
/// ```swift
/// let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "Config/MyStash.xcdatamodeld"))
/// let note = model.entity(named: "Note")!
/// ```
public final class ManagedObjectModel {
    /// Every entity of the model, in entity-number order.
    public let entities: [EntityDescription]
    /// Configuration name → names of its member entities.
    public let configurations: [String: [String]]
    /// The version identifier of the model (the `.xcdatamodel` name without extension when loaded).
    public let versionIdentifier: String
    /// Entity name → the version hash Xcode's model compiler declared for this version (a
    /// `.momd`'s `VersionInfo.plist`), when the model came with one: what a store made with this
    /// version records, so that Apple's Core Data recognizes the store. Never computed here;
    /// compatibility is decided by the persisted shapes (``entityShapes``).
    public internal(set) var compiledVersionHashes: [String: Data]?
    /// The compiled model's keyed archive (its `.mom` file), which a store migrated to this
    /// version keeps as Core Data's model cache (`Z_MODELCACHE`).
    var compiledArchive: Data?
    private let entitiesByName: [String: EntityDescription]
    private var classesByEntityName: [String: ManagedObject.Type] = [:]

    /// Assembles a model, resolving inheritance and checking that it is consistent.
    ///
    /// With `deferringPatternChecks`, attributes' regular expressions are compiled when a
    /// validation first needs them, not now: for a model whose patterns are known good (an
    /// application's own, compiled by its tests), so that a program that only reads never pays
    /// for them. An invalid pattern then fails every validation of its attribute instead.
    ///
    /// - throws: ``ModelError`` naming the entity and property when a destination,
    ///   inverse or parent is missing, an entity belongs to no configuration, or (unless
    ///   deferred) a pattern does not compile.
    public init(entities: [EntityDescription], configurations: [String: [String]] = [:],
                versionIdentifier: String = "1", file: String? = nil, deferringPatternChecks: Bool = false) throws {
        var byName: [String: EntityDescription] = [:]
        for entity in entities {
            guard byName[entity.name] == nil else {
                throw ModelError(file: file, entity: entity.name, reason: "entity is declared twice")
            }
            byName[entity.name] = entity
        }
        self.entitiesByName = byName
        self.configurations = configurations
        self.versionIdentifier = versionIdentifier

        for entity in entities {
            if let parentName = entity.parentName {
                guard let parent = byName[parentName] else {
                    throw ModelError(
                        file: file, entity: entity.name, reason: "parent entity '\(parentName)' does not exist")
                }
                entity.superentity = parent
            }
            entity.subentities = []
        }
        for entity in entities { entity.superentity?.subentities.append(entity) }
        for entity in entities { entity.subentities.sort { $0.name < $1.name } }
        // Entity numbers: roots alphabetically, each followed depth first by its sub-entities.
        let roots = entities.filter { $0.superentity == nil }.sorted { $0.name < $1.name }
        guard roots.count > 0 || entities.isEmpty else {
            throw ModelError(file: file, reason: "entity inheritance forms a cycle")
        }
        var ordered: [EntityDescription] = []
        for root in roots { ordered.append(contentsOf: root.selfAndDescendants) }
        guard ordered.count == entities.count else {
            throw ModelError(file: file, reason: "entity inheritance forms a cycle")
        }
        for (index, entity) in ordered.enumerated() { entity.entityNumber = index + 1 }
        self.entities = ordered
        for entity in ordered { entity.modelReference = self }

        for root in roots { Self.numberSiblingColumns(root.selfAndDescendants) }
        for entity in ordered {
            entity.attributes = (entity.superentity?.attributes ?? []) + entity.declaredAttributes
            entity.relationships = (entity.superentity?.relationships ?? []) + entity.declaredRelationships
            entity.attributesByName = Dictionary(
                entity.attributes.map { ($0.name, $0) }, uniquingKeysWith: { _, new in new })
            entity.relationshipsByName = Dictionary(
                entity.relationships.map { ($0.name, $0) }, uniquingKeysWith: { _, new in new })
            for attribute in entity.declaredAttributes where entity.relationshipsByName[attribute.name] != nil {
                throw ModelError(
                    file: file, entity: entity.name, property: attribute.name,
                    reason: "an attribute and a relationship share this name")
            }
        }
        for root in roots {
            let family = root.selfAndDescendants
            root.tableAttributes = unique(
                family.flatMap(\.declaredAttributes).filter { !$0.isTransient }, by: \.columnName)
            root.tableToOneRelationships = unique(
                family.flatMap(\.declaredRelationships).filter { !$0.isToMany }, by: \.columnName)
            root.selectColumns =
                ["Z_PK", "Z_ENT", "Z_OPT"] + root.tableToOneRelationships.map(\.columnName)
                + root.tableAttributes.map(\.columnName)
            root.columnIndex = Dictionary(uniqueKeysWithValues: root.selectColumns.enumerated().map { ($1, $0) })
        }
        for entity in ordered {
            let root = entity.rootEntity
            entity.storedColumns = entity.attributes.filter { !$0.isTransient }.compactMap { attribute in
                root.columnIndex[attribute.columnName].map {
                    StoredColumn(
                        name: attribute.name, columnName: attribute.columnName, type: attribute.type, index: $0,
                        transformerName: attribute.valueTransformerName
                            ?? ValueTransformerRegistry.defaultTransformerName)
                }
            }
            entity.attributeNames = entity.attributes.map(\.name)
            entity.attributeTypeList = entity.attributes.map(\.type)
            entity.propertyLayout = PropertyLayout(
                keys: entity.attributeNames + entity.relationships.map(\.name),
                textKeys: Set(entity.attributes.filter { $0.type == .string }.map(\.name)))
            entity.emptyValues = PropertyValues(layout: entity.propertyLayout)
            entity.storedColumnSlots = entity.storedColumns.map { column in
                entity.attributeNames.firstIndex(of: column.name) ?? 0
            }
            entity.storedToOne = entity.relationships.filter { !$0.isToMany }.compactMap { relationship in
                root.columnIndex[relationship.columnName].map { (relationship, $0) }
            }
            entity.storedToOneSlots = entity.storedToOne.map {
                entity.propertyLayout.index(of: $0.relationship.name) ?? 0
            }
            entity.transientAttributes = entity.attributes.filter(\.isTransient)
            entity.keepsTombstone = entity.attributes.contains(where: \.preservesValueInHistoryOnDeletion)
            entity.attributeHasValueRules = entity.attributes.map {
                $0.minValueString != nil || $0.maxValueString != nil || $0.regularExpression != nil
                    || $0.type == .integer16 || $0.type == .integer32
            }
            entity.toManyRelationshipNames = entity.relationships.filter(\.isToMany).map(\.name)
        }
        try checkRelationships(file: file, patterns: !deferringPatternChecks)
        try checkConfigurations(file: file)
        for entity in ordered {
            entity.hasJoinTables = entity.relationships.contains { SQLiteSchema.usesJoinTable($0, in: self) }
            entity.hasOrderedRelationships = entity.relationships.contains(where: \.isOrdered)
        }
        for entity in ordered {
            entity.storedToOneEntityColumns = entity.storedToOne.map {
                SQLiteSchema.entityColumnName(of: $0.relationship, in: entity.rootEntity, model: self)
            }
        }
    }

    /// Sibling sub-entities share their root's table. When two of them declare a stored property
    /// of the same name, Core Data gives each later one (in entity order) a numbered column of
    /// its own: `ZNAME`, then `ZNAME1`, `ZNAME2`. A model without such siblings keeps `Z<NAME>`.
    private static func numberSiblingColumns(_ family: [EntityDescription]) {
        var declared: [String: Int] = [:]
        func column(for name: String) -> String {
            let base = "Z" + name.uppercased()
            let count = declared[base, default: 0]
            declared[base] = count + 1
            return count == 0 ? base : base + String(count)
        }
        for entity in family {
            for index in entity.declaredAttributes.indices where !entity.declaredAttributes[index].isTransient {
                entity.declaredAttributes[index].columnName = column(for: entity.declaredAttributes[index].name)
            }
            for index in entity.declaredRelationships.indices where !entity.declaredRelationships[index].isToMany {
                entity.declaredRelationships[index].columnName = column(for: entity.declaredRelationships[index].name)
            }
        }
    }

    private func checkRelationships(file: String?, patterns: Bool) throws {
        for entity in entities {
            for relationship in entity.declaredRelationships {
                guard let destination = entitiesByName[relationship.destinationEntityName] else {
                    throw ModelError(file: file, entity: entity.name, property: relationship.name,
                        reason: "destination entity '\(relationship.destinationEntityName)' does not exist")
                }
                if let inverseName = relationship.inverseName {
                    guard let inverse = destination.relationshipsByName[inverseName] else {
                        throw ModelError(file: file, entity: entity.name, property: relationship.name,
                            reason: "inverse relationship '\(destination.name).\(inverseName)' does not exist")
                    }
                    guard let back = entitiesByName[inverse.destinationEntityName] else {
                        throw ModelError(
                            file: file, entity: destination.name, property: inverse.name,
                            reason: "destination entity '\(inverse.destinationEntityName)' does not exist")
                    }
                    guard entity.isKind(of: back) || back.isKind(of: entity) else {
                        throw ModelError(file: file, entity: entity.name, property: relationship.name,
                            reason:
                                "inverse '\(destination.name).\(inverseName)' points to "
                                    + "'\(inverse.destinationEntityName)', not back to '\(entity.name)'"
                        )
                    }
                }
            }
            for name in entity.uniquenessConstraints.joined() {
                guard let attribute = entity.attributesByName[name],
                      !attribute.isTransient, attribute.type != .transformable else {
                    throw ModelError(
                        file: file, entity: entity.name, property: name,
                        reason: "a uniqueness constraint names no stored, untransformed attribute '\(name)'")
                }
            }
            for attribute in entity.declaredAttributes {
                if attribute.type == .transformable, attribute.valueTransformerName?.isEmpty == true {
                    throw ModelError(
                        file: file, entity: entity.name, property: attribute.name,
                        reason: "empty value transformer name")
                }
                // Compiled once a process: every version repeats the same few patterns, each costly to ICU.
                if patterns, let pattern = attribute.regularExpression, Validator.cachedExpression(pattern) == nil {
                    throw ModelError(
                        file: file, entity: entity.name, property: attribute.name,
                        reason: "invalid regular expression '\(pattern)'")
                }
            }
        }
    }

    private func checkConfigurations(file: String?) throws {
        guard !configurations.isEmpty else { return }
        var configured: Set<String> = []
        for (configuration, members) in configurations.sorted(by: { $0.key < $1.key }) {
            for member in members {
                guard entitiesByName[member] != nil else {
                    throw ModelError(
                        file: file, entity: member,
                        reason: "configuration '\(configuration)' lists an entity that does not exist")
                }
                configured.insert(member)
            }
        }
        for entity in entities where !configured.contains(entity.name) {
            throw ModelError(
                file: file, entity: entity.name,
                reason: "entity is in no configuration, but the model uses configurations")
        }
    }

    public func entity(named name: String) -> EntityDescription? { entitiesByName[name] }

    /// The entities of a configuration (all entities for nil or an unknown-less model).
    public func entities(forConfiguration name: String?) -> [EntityDescription] {
        guard let name, let members = configurations[name] else { return entities }
        let set = Set(members)
        return entities.filter { set.contains($0.name) }
    }

    // MARK: - Classes for typed access

    /// Makes instances of `type` represent `entityName` in every context using this model.
    public func setClass(_ type: ManagedObject.Type, forEntityName entityName: String) {
        guard let entity = entitiesByName[entityName] else {
            preconditionFailure("No entity named '\(entityName)' in the model")
        }
        classesByEntityName[entityName] = type
        // Sub-entities without a class of their own inherit this one.
        for descendant in entity.selfAndDescendants
        where descendant === entity || classesByEntityName[descendant.name] == nil {
            descendant.objectClass = type
        }
    }

    func objectClass(for entity: EntityDescription) -> ManagedObject.Type { entity.objectClass }

    /// Entities by their number, for reading `Z_ENT`.
    func entity(number: Int) -> EntityDescription? {
        number >= 1 && number <= entities.count ? entities[number - 1] : nil
    }

    // MARK: - Version hashes

    /// Per entity, the persisted shape of each property: what a store's layout depends on.
    /// Validation rules, defaults and user info are left out on purpose.
    public var entityShapes: [String: [String: String]] {
        var shapes: [String: [String: String]] = [:]
        for entity in entities {
            var shape: [String: String] = [
                "(entity)": "parent=\(entity.parentName ?? "-") abstract=\(entity.isAbstract)"
            ]
            for attribute in entity.attributes where !attribute.isTransient {
                shape[attribute.name] =
                    "attribute \(attribute.type.rawValue)" + (attribute.valueTransformerName.map { " via \($0)" } ?? "")
            }
            for relationship in entity.relationships {
                shape[relationship.name] =
                    "relationship to \(relationship.destinationEntityName) "
                        + "\(relationship.isToMany ? "to-many" : "to-one") inverse \(relationship.inverseName ?? "-")"
                        + (relationship.isOrdered ? " ordered" : "")
            }
            shapes[entity.name] = shape
        }
        return shapes
    }

    /// The version hashes a store made with this model records: Apple's when the compiled model
    /// declared them, else ``entityVersionHashesByName``.
    var recordedVersionHashes: [String: Data] { compiledVersionHashes ?? entityVersionHashesByName }

    /// Entity name → SHA-256 of its persisted shape, as `NSManagedObjectModel.entityVersionHashesByName`.
    public var entityVersionHashesByName: [String: Data] {
        entityShapes.mapValues { shape in
            let canonical = shape.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
            return SHA256.hash(Data(canonical.utf8))
        }
    }
}

private func unique<T>(_ items: [T], by key: KeyPath<T, String>) -> [T] {
    var seen: Set<String> = []
    return items.filter { seen.insert($0[keyPath: key]).inserted }
}
