import Foundation
import GRDB

/// One object as the built-in atomic formats write it: entity, identity, attribute values
/// as plain property-list values, and relationships as lists of identities.
struct AtomicRecord {
    var entityName: String
    /// `<Entity>/p<primary key>`, as the last part of the object's URI.
    var identity: String
    /// Integer, real, text or bytes, by attribute name (nil values absent).
    var attributes: [String: DatabaseValue]
    /// Identities of the destinations, by relationship name (to-one: at most one).
    var relationships: [String: [String]]
}

extension AtomicStore {
    static func identity(of objectID: ObjectID) -> String { "\(objectID.entityName)/p\(objectID.primaryKey ?? 0)" }

    /// The records of every cache node, for writing.
    func records() -> [AtomicRecord] {
        cacheNodes().compactMap { node in
            guard let entity = model.entity(named: node.objectID.entityName) else { return nil }
            var record = AtomicRecord(
                entityName: entity.name, identity: Self.identity(of: node.objectID), attributes: [:],
                relationships: [:])
            for attribute in entity.attributes where !attribute.isTransient {
                let value = StoredValues.databaseValue(node.propertyCache[attribute.name], type: attribute.type)
                if !value.isNull { record.attributes[attribute.name] = value }
            }
            for relationship in entity.relationships {
                switch node.propertyCache[relationship.name] {
                case let destination as AtomicStoreCacheNode:
                    record.relationships[relationship.name] = [Self.identity(of: destination.objectID)]
                case let destinations as [AtomicStoreCacheNode]:
                    record.relationships[relationship.name] = destinations.map { Self.identity(of: $0.objectID) }
                default: break
                }
            }
            return record
        }
    }

    /// Turns records read from a file into cache nodes and adds them.
    ///
    /// - throws: an error naming the object when an entity, identity or reference is unknown.
    func addCacheNodes(from records: [AtomicRecord]) throws {
        var byIdentity: [String: AtomicStoreCacheNode] = [:]
        var nodes: [(AtomicStoreCacheNode, EntityDescription, AtomicRecord)] = []
        for record in records {
            guard let entity = entity(named: record.entityName) else {
                throw damaged("unknown entity '\(record.entityName)'")
            }
            let prefix = "\(entity.name)/p"
            guard record.identity.hasPrefix(prefix), let key = Int64(record.identity.dropFirst(prefix.count)), key > 0,
                byIdentity[record.identity] == nil
            else {
                throw damaged("object identity '\(record.identity)' is malformed or repeated")
            }
            let node = AtomicStoreCacheNode(objectID: objectID(for: entity, referenceObject: AnyHashable(key)))
            for (name, stored) in record.attributes {
                guard let attribute = entity.attribute(named: name), !attribute.isTransient else {
                    throw damaged("\(entity.name) has no stored attribute '\(name)'")
                }
                do {
                    node.propertyCache[name] = try StoredValues.value(stored, type: attribute.type)
                } catch {
                    throw damaged("\(entity.name).\(name) of '\(record.identity)': \(error)")
                }
            }
            byIdentity[record.identity] = node
            nodes.append((node, entity, record))
        }
        for (node, entity, record) in nodes {
            for (name, identities) in record.relationships {
                guard let relationship = entity.relationship(named: name) else {
                    throw damaged("\(entity.name) has no relationship '\(name)'")
                }
                let destinations = try identities.map { identity -> AtomicStoreCacheNode in
                    guard let destination = byIdentity[identity] else {
                        throw damaged("\(record.identity).\(name) points at '\(identity)', which is not in the file")
                    }
                    return destination
                }
                if relationship.isToMany {
                    node.propertyCache[name] = destinations
                } else if destinations.count > 1 {
                    throw damaged("\(record.identity).\(name) is to-one but lists \(destinations.count) objects")
                } else if let destination = destinations.first {
                    node.propertyCache[name] = destination
                }
            }
        }
        addCacheNodes(nodes.map(\.0))
    }
}
