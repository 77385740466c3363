import Foundation

extension Predicate {
    /// Checks every key path of the predicate against `entity` before anything is evaluated,
    /// so a wrong key is an error rather than a trap deep in an in-memory comparison.
    ///
    /// A key path may pass through a to-many relationship only under `ANY`, `ALL` or `NONE`,
    /// before a collection operator (`@count`, `@sum`...), at its end (comparing the
    /// collection), or on the right of `IN`.
    ///
    /// - throws: ``ObjectGraphError`` 133000 for a key the entity does not have;
    ///   ``PredicateSyntaxError`` for a to-many key where a to-one is needed.
    func checkKeyPaths(against entity: EntityDescription) throws {
        try check(root, entity)
    }

    private func check(_ node: Node, _ entity: EntityDescription) throws {
        switch node {
        case .constant:
            return
        case .and(let parts), .or(let parts):
            for part in parts { try check(part, entity) }
        case .not(let inner):
            try check(inner, entity)
        case .comparison(let comparison):
            try check(comparison.left, entity, allowsToMany: comparison.modifier != .direct)
            try check(comparison.right, entity, allowsToMany: comparison.op == .in)
        }
    }

    private func check(_ expression: Expression, _ entity: EntityDescription, allowsToMany: Bool) throws {
        switch expression {
        case .constant:
            return
        case .list(let items):
            for item in items { try check(item, entity, allowsToMany: allowsToMany) }
        case .keyPath(let keys):
            try check(keyPath: keys, entity, allowsToMany: allowsToMany)
        case .subqueryCount(let collection, let predicate):
            try check(keyPath: collection, entity, allowsToMany: true)
            var destination: EntityDescription? = entity
            var endsToMany = false
            for key in collection {
                let relationship = destination?.relationship(named: key)
                endsToMany = relationship?.isToMany ?? false
                destination = relationship.flatMap { destination?.destination(of: $0) }
            }
            guard let destination, endsToMany else {
                throw PredicateSyntaxError(
                    format: format, position: 0,
                    reason: "SUBQUERY needs a to-many relationship, not '\(collection.joined(separator: "."))'")
            }
            try check(predicate, destination)
        }
    }

    private func check(keyPath keys: [String], _ entity: EntityDescription, allowsToMany: Bool) throws {
        let path = keys.joined(separator: ".")
        let position = format.range(of: path).map { format.distance(from: format.startIndex, to: $0.lowerBound) + 1 }
        var current: EntityDescription? = entity
        var passedToMany = false
        for (index, key) in keys.enumerated() {
            if index == 0, key == "SELF" || key == "self" { continue }
            guard let here = current else {
                if key == "@count" { continue }
                throw unknown(path, entity, position)
            }
            // A collection operator (@count, @sum, @avg, @min, @max) after a to-many key.
            if key.hasPrefix("@"), passedToMany {
                if key == "@count" { current = nil }
                continue
            }
            if here.attribute(named: key) != nil {
                current = nil
            } else if let relationship = here.relationship(named: key) {
                let isLast = index == keys.count - 1
                if relationship.isToMany, !isLast, !keys[index + 1].hasPrefix("@"), !allowsToMany || passedToMany {
                    throw PredicateSyntaxError(
                        format: format, position: position ?? 0,
                        reason: "to-many key '\(key)' not allowed here (use ANY, ALL or NONE, or @count)")
                }
                passedToMany = passedToMany || relationship.isToMany
                current = here.destination(of: relationship)
                if current == nil { throw unknown(path, entity, position) }
            } else {
                throw unknown(path, entity, position)
            }
        }
    }

    private func unknown(_ path: String, _ entity: EntityDescription, _ position: Int?) -> ObjectGraphError {
        ObjectGraphError(
            code: .objectNotFound,
            message: "keypath '\(path)' not found in entity \(entity.name) (predicate '\(format)'"
                + (position.map { " at position \($0))" } ?? ")"))
    }
}
