import Foundation
import GRDB

/// Compiles predicates to SQL over Core Data's layout, with every value bound as a
/// parameter. A part that touches a transformed or transient attribute is not compiled
/// (`nil`): the fetch evaluates it in memory after decoding.
struct PredicateSQLCompiler {
    let model: ManagedObjectModel
    let store: PersistentStore
    private(set) var arguments: [DatabaseValue] = []
    private var aliasCounter = 0

    init(model: ManagedObjectModel, store: PersistentStore) {
        self.model = model
        self.store = store
    }

    enum CompileError: Error { case unknownKey(String, entity: String) }

    /// SQL for `node` on rows of `entity` aliased `alias`, or nil if it must run in memory.
    mutating func compile(_ node: Predicate.Node, entity: EntityDescription, alias: String) throws -> String? {
        let saved = arguments
        let result = try compileNode(node, entity: entity, alias: alias)
        if result == nil { arguments = saved }
        return result
    }

    private mutating func compileNode(
        _ node: Predicate.Node, entity: EntityDescription, alias: String
    ) throws -> String? {
        switch node {
        case .constant(let value):
            return value ? "1" : "0"
        case .and(let nodes), .or(let nodes):
            var parts: [String] = []
            for inner in nodes {
                guard let sql = try compileNode(inner, entity: entity, alias: alias) else { return nil }
                parts.append("(\(sql))")
            }
            if case .and = node { return parts.joined(separator: " AND ") }
            return parts.joined(separator: " OR ")
        case .not(let inner):
            return try compileNode(inner, entity: entity, alias: alias).map { "NOT COALESCE((\($0)), 0)" }
        case .comparison(let comparison):
            if case .subqueryCount(let collection, let predicate) = comparison.left {
                guard let count = try subqueryCount(collection, predicate, entity: entity, alias: alias) else {
                    return nil
                }
                return leaf(count, comparison)
            }
            guard case .keyPath(let path) = comparison.left else { return nil }
            return try compilePath(
                path[...], comparison: comparison, entity: entity, alias: alias, modifier: comparison.modifier)
        }
    }

    private mutating func nextAlias() -> String {
        aliasCounter += 1
        return "t\(aliasCounter)"
    }

    private mutating func compilePath(
        _ path: ArraySlice<String>, comparison: Predicate.Comparison, entity: EntityDescription,
                                      alias: String, modifier: Predicate.Modifier) throws -> String? {
        let key = path.first!
        if path.count == 1 {
            if let attribute = entity.attribute(named: key) {
                guard !attribute.isTransient, attribute.type != .transformable else { return nil }
                return leaf("\(alias).\(attribute.columnName)", comparison)
            }
            guard let relationship = entity.relationship(named: key) else {
                throw CompileError.unknownKey(key, entity: entity.name)
            }
            // A to-one relationship compares by destination key (== object, == nil, IN objects).
            guard !relationship.isToMany, [.equal, .notEqual, .in].contains(comparison.op) else { return nil }
            return leaf("\(alias).\(relationship.columnName)", comparison)
        }
        guard let relationship = entity.relationship(named: key) else {
            throw CompileError.unknownKey(key, entity: entity.name)
        }
        guard let destination = model.entity(named: relationship.destinationEntityName),
              model.persistentStoreIsSame(destination, entity) else { return nil }
        let inner = nextAlias()
        let table = store.qualified(destination.rootEntity.tableName)
        if !relationship.isToMany {
            guard
                let sub = try compilePath(
                    path.dropFirst(), comparison: comparison, entity: destination, alias: inner, modifier: modifier)
            else { return nil }
            return "\(alias).\(relationship.columnName) IN (SELECT \(inner).Z_PK FROM \(table) \(inner) WHERE \(sub))"
        }
        guard let link = linkCondition(relationship, of: entity, sourceAlias: alias, destinationAlias: inner) else {
            return nil
        }
        if let function = path.dropFirst().first.flatMap(AggregateFunction.init(keyPathOperator:)) {
            guard let aggregate = try aggregateExpression(function, of: path.dropFirst(2), over: destination,
                                                          table: table, alias: inner, link: link) else { return nil }
            return leaf(aggregate.sql, comparison)
        }
        guard
            let sub = try compilePath(
                path.dropFirst(), comparison: comparison, entity: destination, alias: inner, modifier: .direct)
        else { return nil }
        switch modifier {
        case .direct, .any: return "EXISTS (SELECT 1 FROM \(table) \(inner) WHERE \(link) AND (\(sub)))"
        case .all: return "NOT EXISTS (SELECT 1 FROM \(table) \(inner) WHERE \(link) AND NOT COALESCE((\(sub)), 0))"
        case .none: return "NOT EXISTS (SELECT 1 FROM \(table) \(inner) WHERE \(link) AND (\(sub)))"
        }
    }

    /// `SUBQUERY(rel, $x, p).@count` as a correlated subquery on the destination's table (the
    /// link goes through the join table of a many-to-many); nil when `p` must run in memory or
    /// the collection is not one to-many step in this store.
    private mutating func subqueryCount(
        _ collection: [String], _ predicate: Predicate.Node, entity: EntityDescription, alias: String
    ) throws -> String? {
        guard let key = collection.first, collection.count == 1 else { return nil }
        guard let relationship = entity.relationship(named: key) else {
            throw CompileError.unknownKey(key, entity: entity.name)
        }
        guard relationship.isToMany, let destination = model.entity(named: relationship.destinationEntityName),
              model.persistentStoreIsSame(destination, entity) else { return nil }
        let inner = nextAlias()
        guard let link = linkCondition(relationship, of: entity, sourceAlias: alias, destinationAlias: inner),
              let condition = try compileNode(predicate, entity: destination, alias: inner) else { return nil }
        var sql = "(SELECT COUNT(*) FROM \(store.qualified(destination.rootEntity.tableName)) \(inner) WHERE \(link)"
        if destination.selfAndDescendants.count != destination.rootEntity.selfAndDescendants.count {
            let numbers = destination.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")
            sql += " AND \(inner).Z_ENT IN (\(numbers))"
        }
        return sql + " AND (\(condition)))"
    }

    /// `(SELECT SUM(t1.ZAMOUNT) FROM ... WHERE link)` for `@sum.amount` after a to-many step.
    private func aggregateExpression(
        _ function: AggregateFunction, of rest: ArraySlice<String>, over destination: EntityDescription,
        table: String, alias: String, link: String
    ) throws -> (sql: String, type: AttributeType?)? {
        if function == .count, rest.isEmpty {
            return ("(SELECT COUNT(*) FROM \(table) \(alias) WHERE \(link))", .integer64)
        }
        guard rest.count == 1, let key = rest.first else { return nil }
        guard let attribute = destination.attribute(named: key) else {
            throw CompileError.unknownKey(key, entity: destination.name)
        }
        guard !attribute.isTransient, attribute.type != .transformable else { return nil }
        let sql = function.sql("\(alias).\(attribute.columnName)")
        return ("(SELECT \(sql) FROM \(table) \(alias) WHERE \(link))", function.resultType(of: attribute.type))
    }

    /// SQL for the value of a key path on rows of `entity` aliased `alias`: an attribute,
    /// through to-one relationships, or a to-many aggregate (`systems.@count`); nil when it
    /// must be computed in memory (transformed, transient, across stores).
    mutating func valueExpression(_ path: ArraySlice<String>, entity: EntityDescription,
                                  alias: String) throws -> (sql: String, type: AttributeType?)? {
        guard let key = path.first else { return nil }
        if path.count == 1, let attribute = entity.attribute(named: key) {
            guard !attribute.isTransient, attribute.type != .transformable else { return nil }
            return ("\(alias).\(attribute.columnName)", attribute.type)
        }
        guard let relationship = entity.relationship(named: key) else {
            throw CompileError.unknownKey(key, entity: entity.name)
        }
        guard path.count > 1, let destination = model.entity(named: relationship.destinationEntityName),
              model.persistentStoreIsSame(destination, entity) else { return nil }
        let inner = nextAlias()
        let table = store.qualified(destination.rootEntity.tableName)
        if relationship.isToMany {
            guard let function = AggregateFunction(keyPathOperator: path[path.index(after: path.startIndex)]),
                let link = linkCondition(relationship, of: entity, sourceAlias: alias, destinationAlias: inner)
            else { return nil }
            return try aggregateExpression(
                function, of: path.dropFirst(2), over: destination, table: table, alias: inner, link: link)
        }
        guard let sub = try valueExpression(path.dropFirst(), entity: destination, alias: inner) else { return nil }
        return (
            "(SELECT \(sub.sql) FROM \(table) \(inner) WHERE \(inner).Z_PK = \(alias).\(relationship.columnName))",
            sub.type
        )
    }

    /// The condition tying destination rows to a source row of a to-many relationship.
    private func linkCondition(
        _ relationship: RelationshipDescription, of entity: EntityDescription, sourceAlias: String,
        destinationAlias: String
    ) -> String? {
        if SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: model)
            return
                "\(destinationAlias).Z_PK IN (SELECT \(join.destinationColumn) FROM \(store.qualified(join.name)) "
                    + "WHERE \(join.sourceColumn) = \(sourceAlias).Z_PK)"
        }
        guard let inverse = SQLiteSchema.inverse(of: relationship, in: model) else { return nil }
        return "\(destinationAlias).\(inverse.columnName) = \(sourceAlias).Z_PK"
    }

    private mutating func bind(_ value: Any?) -> String {
        arguments.append(StoredValues.databaseValue(ofConstant: value))
        return "?"
    }

    /// A comparison of a column expression with constants.
    private mutating func leaf(_ column: String, _ comparison: Predicate.Comparison) -> String? {
        guard case let right = comparison.right, !isKeyPath(right) else { return nil }
        let options = comparison.options
        let folded = { (expression: String) in
            options.isEmpty ? expression : "OG_FOLD(\(expression), \(options.rawValue))"
        }
        func constant(_ expression: Predicate.Expression) -> Any?? {
            if case .constant(let value) = expression { return .some(value) }
            return nil
        }
        switch comparison.op {
        case .equal, .notEqual:
            guard let value = constant(right) else { return nil }
            let negated = comparison.op == .notEqual
            if value == nil { return "\(column) IS \(negated ? "NOT " : "")NULL" }
            return "\(folded(column)) \(negated ? "IS NOT" : "=") \(folded(bind(value)))"
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            guard let value = constant(right), value != nil else { return nil }
            return "\(folded(column)) \(comparison.op.rawValue) \(folded(bind(value)))"
        case .between:
            guard case .list(let bounds) = right, bounds.count == 2,
                  let low = constant(bounds[0]), let high = constant(bounds[1]) else { return nil }
            return "\(folded(column)) BETWEEN \(folded(bind(low))) AND \(folded(bind(high)))"
        case .in:
            guard case .list(let items) = right else { return nil }
            var placeholders: [String] = []
            for item in items {
                guard let value = constant(item) else { return nil }
                placeholders.append(folded(bind(value)))
            }
            return placeholders.isEmpty ? "0" : "\(folded(column)) IN (\(placeholders.joined(separator: ", ")))"
        case .beginsWith, .endsWith, .contains, .like, .matches:
            guard let value = constant(right), let text = value as? String else { return nil }
            return
                "COALESCE(OG_STRING_TEST('\(comparison.op.rawValue)', \(column), \(bind(text)), \(options.rawValue)), "
                    + "0)"
        }
    }

    private func isKeyPath(_ expression: Predicate.Expression) -> Bool {
        if case .keyPath = expression { return true }
        return false
    }

    /// SQL for sorting by a key path through to-one relationships, or nil (in memory).
    func orderTerm(_ descriptor: FetchSortDescriptor, entity: EntityDescription, alias: String) -> String? {
        var current = entity
        var expression = alias
        let path = descriptor.key.split(separator: ".").map(String.init)
        var subqueries: [(table: String, alias: String, column: String)] = []
        for (offset, key) in path.enumerated() {
            if offset == path.count - 1 {
                guard let attribute = current.attribute(named: key), !attribute.isTransient,
                    attribute.type != .transformable
                else { return nil }
                var column = "\(expression).\(attribute.columnName)"
                for sub in subqueries.reversed() {
                    column = "(SELECT \(column) FROM \(sub.table) \(sub.alias) WHERE \(sub.alias).Z_PK = \(sub.column))"
                }
                if descriptor.caseInsensitive { column = "OG_FOLD(\(column), 1)" }
                return "\(column) \(descriptor.ascending ? "ASC" : "DESC")"
            }
            guard let relationship = current.relationship(named: key), !relationship.isToMany,
                  let destination = model.entity(named: relationship.destinationEntityName) else { return nil }
            let inner = "s\(offset)"
            subqueries.append(
                (store.qualified(destination.rootEntity.tableName), inner, "\(expression).\(relationship.columnName)"))
            expression = inner
            current = destination
        }
        return nil
    }
}

extension ManagedObjectModel {
    /// Relationships are followed in SQL only within one store.
    func persistentStoreIsSame(_ a: EntityDescription, _ b: EntityDescription) -> Bool {
        guard !configurations.isEmpty else { return true }
        return configurations.values.contains { $0.contains(a.name) && $0.contains(b.name) }
    }
}
