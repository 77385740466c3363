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
            entities[destination.name] = source
            var pairs = Properties()
            for property in mapping.attributes {
                let where_ = "\(destination.name).\(property.name) in \(place)"
                guard destination.attribute(named: property.name) != nil else {
                    refusals.append("\(where_): the destination has no such attribute")
                    continue
                }
                switch property.value {
                case .sameName:
                    if let old = source.attribute(named: property.name), !old.isTransient {
                        pairs.attributes[property.name] = old
                    }
                case .sourceProperty(let key):
                    guard let old = source.attribute(named: key), !old.isTransient else {
                        refusals.append("\(where_): \(source.name) has no stored attribute '\(key)'")
                        continue
                    }
                    pairs.attributes[property.name] = old
                case .nothing:
                    continue
                case .unsupported(let what):
                    if !covered { refusals.append("\(where_): \(what) is not a value ObjectGraph can compute") }
                }
            }
            for property in mapping.relationships {
                let where_ = "\(destination.name).\(property.name) in \(place)"
                guard destination.relationship(named: property.name) != nil else {
                    refusals.append("\(where_): the destination has no such relationship")
                    continue
                }
                switch property.value {
                case .sameName:
                    if let old = source.relationship(named: property.name) { pairs.relationships[property.name] = old }
                case .sourceProperty(let key):
                    guard let old = source.relationship(named: key) else {
                        refusals.append("\(where_): \(source.name) has no relationship '\(key)'")
                        continue
                    }
                    pairs.relationships[property.name] = old
                case .nothing:
                    continue
                case .unsupported(let what):
                    if !covered { refusals.append("\(where_): \(what) is not a link ObjectGraph can compute") }
                }
            }
            properties[destination.name] = pairs
        }
    }
}
