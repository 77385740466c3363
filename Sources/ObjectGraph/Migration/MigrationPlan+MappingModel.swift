import Foundation

/// The pairings a mapping model states between two versions' entities and properties, in the
/// form ``MigrationPlan`` otherwise infers them.
struct StatedMapping {
    struct Properties {
        /// Destination attribute name → the source attribute its values come from.
        var attributes: [String: AttributeDescription] = [:]
        /// Destination relationship name → the source relationship its links come from.
        var relationships: [String: RelationshipDescription] = [:]
    }

    /// Destination entity name → the source entity its objects come from.
    var entities: [String: EntityDescription] = [:]
    /// Destination entity name → its property pairings.
    var properties: [String: Properties] = [:]

    /// Reads `model`; what it states that ObjectGraph cannot carry out goes to `refusals`.
    init(
        _ model: MappingModel, from sources: [EntityDescription], to destinations: [EntityDescription],
        steps: [EntityMigrationStep], sourceVersion: String, refusals: inout [String]
    ) {
        let place = "the mapping model '\(model.name)'"
        for mapping in model.entityMappings {
            let destination = destinations.first { $0.name == mapping.destinationEntity }
            let source = sources.first { $0.name == mapping.sourceEntity }
            // A mapping for entities another store (configuration) holds is not this store's.
            guard let destination else {
                if source != nil, mapping.destinationEntity != nil {
                    refusals.append(
                        "\(place) maps \(mapping.sourceEntity ?? "") to '\(mapping.destinationEntity ?? "")', "
                            + "which the destination version does not have")
                }
                continue
            }
            let covered = steps.contains { $0.covers(destination.name, from: sourceVersion) }
            if let code = mapping.needsCode, !covered {
                refusals.append(
                    "entity mapping '\(mapping.name)' of \(place) uses \(code), which is app code ObjectGraph "
                        + "cannot run")
            }
            guard let source else {
                if mapping.sourceEntity != nil {
                    refusals.append(
                        "\(place) maps from entity '\(mapping.sourceEntity ?? "")', which is not in the store")
                }
                continue
            }
            // Core Data would make one object per mapping; ObjectGraph carries each row once.
            if let other = entities.first(where: { $0.value === source })?.key {
                refusals.append(
                    "\(place) maps \(source.name) to both \(other) and \(destination.name), "
                        + "which needs an object made twice")
                continue
            }
            entities[destination.name] = source
            var pairs = Properties()
            pairs.attributes = Self.pairs(
                mapping.attributes, kind: "attribute", of: destination.name, in: place, covered: covered,
                destinationHas: { destination.attribute(named: $0) != nil },
                source: { source.attribute(named: $0).flatMap { $0.isTransient ? nil : $0 } },
                sourceName: source.name, refusals: &refusals)
            pairs.relationships = Self.pairs(
                mapping.relationships, kind: "relationship", of: destination.name, in: place, covered: covered,
                destinationHas: { destination.relationship(named: $0) != nil },
                source: { source.relationship(named: $0) }, sourceName: source.name, refusals: &refusals)
            properties[destination.name] = pairs
        }
    }

    /// Destination property name → the source property its mapping names; a mapping naming
    /// what does not exist, or stating what cannot be computed (unless a step covers the
    /// entity), goes to `refusals`.
    private static func pairs<Property>(
        _ mappings: [MappingModel.PropertyMapping], kind: String, of entity: String, in place: String,
        covered: Bool, destinationHas: (String) -> Bool, source: (String) -> Property?, sourceName: String,
        refusals: inout [String]
    ) -> [String: Property] {
        var pairs: [String: Property] = [:]
        for mapping in mappings {
            let subject = "\(entity).\(mapping.name) in \(place)"
            guard destinationHas(mapping.name) else {
                refusals.append("\(subject): the destination has no such \(kind)")
                continue
            }
            switch mapping.value {
            case .sameName:
                pairs[mapping.name] = source(mapping.name)
            case .sourceProperty(let key):
                guard let old = source(key) else {
                    refusals.append("\(subject): \(sourceName) has no stored \(kind) '\(key)'")
                    continue
                }
                pairs[mapping.name] = old
            case .nothing:
                continue
            case .unsupported(let what):
                if !covered { refusals.append("\(subject): \(what) is not something ObjectGraph can compute") }
            }
        }
        return pairs
    }
}
