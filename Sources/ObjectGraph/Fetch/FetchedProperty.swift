import Foundation

/// An aggregate over many values: `@sum`, `@avg`, `@min`, `@max`, `@count` in key paths and
/// predicates, and the functions of ``FetchedProperty`` (Core Data's `sum:`, `average:`, ...).
public enum AggregateFunction: String, Sendable, CaseIterable {
    case sum, average, min, max, count

    /// The function a key-path operator names (`@sum`, `@avg`, ...), or nil.
    init?(keyPathOperator: String) {
        switch keyPathOperator {
        case "@sum": self = .sum
        case "@avg": self = .average
        case "@min": self = .min
        case "@max": self = .max
        case "@count": self = .count
        default: return nil
        }
    }

    var sqlName: String {
        switch self {
        case .sum: return "SUM"
        case .average: return "AVG"
        case .min: return "MIN"
        case .max: return "MAX"
        case .count: return "COUNT"
        }
    }

    /// The SQL of this aggregate over `expression` (`*` for a count of rows). A sum of
    /// nothing is 0, as in Core Data; an average, minimum or maximum of nothing is nil.
    func sql(_ expression: String) -> String {
        self == .sum ? "COALESCE(SUM(\(expression)), 0)" : "\(sqlName)(\(expression))"
    }

    /// The type of the aggregate of values of type `type`.
    func resultType(of type: AttributeType?) -> AttributeType? {
        switch self {
        case .count: return .integer64
        case .average: return .double
        case .sum: return type.map { $0.isInteger ? .integer64 : $0 }
        case .min, .max: return type
        }
    }

    /// The aggregate of values in memory (nils left out), agreeing with the SQL above.
    func apply(to values: [Any]) -> Any? {
        if self == .count { return values.count }
        let numbers = values.compactMap(Self.number)
        switch self {
        case .sum:
            if !values.isEmpty, values.allSatisfy({ $0 is Int }) { return values.reduce(0) { $0 &+ ($1 as! Int) } }
            return numbers.reduce(0, +)
        case .average:
            return numbers.isEmpty ? nil : numbers.reduce(0, +) / Double(numbers.count)
        case .min, .max:
            let ordered = values.sorted { PredicateEvaluator.order($0, $1, []) ?? 0 < 0 }
            return self == .min ? ordered.first : ordered.last
        case .count:
            return values.count
        }
    }

    private static func number(_ value: Any) -> Double? {
        switch value {
        case let value as Int: return Double(value)
        case let value as Double: return value
        case let value as Float: return Double(value)
        case let value as Decimal: return NSDecimalNumber(decimal: value).doubleValue
        default: return nil
        }
    }
}

/// One column of dictionary results: an attribute or key path (through to-one
/// relationships, or ending in a to-many aggregate such as `systems.@count`), or an
/// aggregate over the fetched rows, as Core Data's `NSExpressionDescription`.
///
/// ```swift
/// request.dictionaryProperties = [.keyPath("category.name", as: "category"),
///                                 .aggregate(.sum, of: "rank", as: "total")]
/// request.propertiesToGroupBy = ["category.name"]
/// ```
public struct FetchedProperty: Sendable {
    /// The key of this column in each result dictionary.
    public var name: String
    /// The attribute or key path read (`*` with ``AggregateFunction/count`` for rows).
    public var keyPath: String
    /// The aggregate over the rows (of a group), or nil for the value itself.
    public var function: AggregateFunction?

    /// The value of a key path, under its own name unless `name` is given.
    public static func keyPath(_ keyPath: String, as name: String? = nil) -> FetchedProperty {
        FetchedProperty(name: name ?? keyPath, keyPath: keyPath, function: nil)
    }

    /// The ``ObjectID`` of each result's object, as an `NSExpressionDescription` of the
    /// evaluated object (`SELF`) with `objectIDAttributeType`.
    public static func objectID(as name: String = "objectID") -> FetchedProperty {
        FetchedProperty(name: name, keyPath: "SELF", function: nil)
    }

    var isObjectID: Bool { keyPath == "SELF" && function == nil }

    /// An aggregate over the fetched rows; `count` with key path `"*"` counts rows.
    public static func aggregate(_ function: AggregateFunction, of keyPath: String, as name: String) -> FetchedProperty
    {
        FetchedProperty(name: name, keyPath: keyPath, function: function)
    }
}

/// One dictionary result as a fetch hands it to a transform: the values of the request's
/// properties by name, as Core Data's dictionary results share one table of keys. No
/// dictionary is made for a row (a list reads 100,000); ``dictionary`` makes one.
public struct FetchedValues {
    /// The properties' names, in the request's order.
    public let names: [String]
    /// Each property's value in the order of ``names``; nil where the row has none.
    public internal(set) var values: [Any?]

    init(names: [String]) {
        self.names = names
        values = Array(repeating: nil, count: names.count)
    }

    /// The value of the property named `name`; nil when the row has none, or there is no such
    /// property. Of a name given twice, the later value that is not nil, as in ``dictionary``.
    public subscript(name: String) -> Any? {
        // A scan: a few names, most short enough to compare as one word.
        for index in names.indices.reversed() where names[index] == name {
            if let value = values[index] { return value }
        }
        return nil
    }

    /// The values as a dictionary, leaving out the properties without one.
    public var dictionary: [String: Any] {
        var result = [String: Any](minimumCapacity: names.count)
        for (name, value) in zip(names, values) {
            if let value { result[name] = value }
        }
        return result
    }
}
