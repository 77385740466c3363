import Foundation

/// The type of an attribute, spelled as in Xcode's model files (`attributeType="Integer 32"`).
public enum AttributeType: String, Sendable, CaseIterable {
    case integer16 = "Integer 16"
    case integer32 = "Integer 32"
    case integer64 = "Integer 64"
    case decimal = "Decimal"
    case double = "Double"
    case float = "Float"
    case string = "String"
    case boolean = "Boolean"
    case date = "Date"
    case binary = "Binary"
    case uuid = "UUID"
    case uri = "URI"
    case transformable = "Transformable"

    /// The SQLite column type Core Data uses for this attribute type.
    var columnType: String {
        switch self {
        case .integer16, .integer32, .integer64, .boolean: return "INTEGER"
        case .decimal: return "DECIMAL"
        case .double, .float: return "FLOAT"
        case .string, .uri: return "VARCHAR"
        case .date: return "TIMESTAMP"
        case .binary, .uuid, .transformable: return "BLOB"
        }
    }

    var isInteger: Bool { self == .integer16 || self == .integer32 || self == .integer64 }
    var isNumeric: Bool { isInteger || self == .decimal || self == .double || self == .float }

    /// The range an integer attribute of this width can hold.
    var integerRange: ClosedRange<Int>? {
        switch self {
        case .integer16: return Int(Int16.min)...Int(Int16.max)
        case .integer32: return Int(Int32.min)...Int(Int32.max)
        case .integer64: return Int.min...Int.max
        default: return nil
        }
    }
}

/// A description of one attribute of an entity, as `NSAttributeDescription`.
///
/// Validation bounds are kept as the model states them (`minValueString`,
/// `maxValueString`, `regularExpressionString`): for strings the bounds are lengths,
/// for numbers values, for dates seconds since 2001-01-01.
///
/// For example:
///
/// ```swift
/// let userId = AttributeDescription(name: "userId", type: .string, isOptional: false,
///                                   minValueString: "3", maxValueString: "10",
///                                   regularExpression: "[A-Za-z0-9]*")
/// ```
public struct AttributeDescription: Sendable {
    /// The attribute's name; its column is `Z` and the name in capitals.
    public var name: String {
        didSet { columnName = "Z" + name.uppercased() }
    }
    /// What the attribute holds, and so how it is stored.
    public var type: AttributeType
    /// Whether an object may be saved without a value (validated at save).
    public var isOptional: Bool
    /// Kept in memory only, never stored.
    public var isTransient: Bool
    /// Whether the store keeps an index on the column (Xcode's "Indexed").
    public var isIndexed: Bool
    /// The value a new object starts with, as Xcode writes it.
    public var defaultValueString: String?
    /// The smallest value (number, date) or length (string, binary) allowed.
    public var minValueString: String?
    /// The largest value (number, date) or length (string, binary) allowed.
    public var maxValueString: String?
    /// A pattern every string value must match as a whole.
    public var regularExpression: String?
    /// The transformer that turns a transformable value into stored bytes.
    public var valueTransformerName: String?
    /// The model's user info for the attribute.
    public var userInfo: [String: String]
    /// The attribute's renaming identifier: its name in an older model version.
    public var elementID: String?
    /// Keeps the value in the history's tombstone when the object is deleted, as Core Data's
    /// `preservesValueInHistoryOnDeletion` (model XML `preserveAfterDeletion="YES"`).
    public var preservesValueInHistoryOnDeletion = false

    public init(
        name: String, type: AttributeType, isOptional: Bool = true, isTransient: Bool = false,
        isIndexed: Bool = false, defaultValueString: String? = nil,
        minValueString: String? = nil, maxValueString: String? = nil,
        regularExpression: String? = nil, valueTransformerName: String? = nil,
        userInfo: [String: String] = [:], elementID: String? = nil
    ) {
        self.name = name
        self.columnName = "Z" + name.uppercased()
        self.type = type
        self.isOptional = isOptional
        self.isTransient = isTransient
        self.isIndexed = isIndexed
        self.defaultValueString = defaultValueString
        self.minValueString = minValueString
        self.maxValueString = maxValueString
        self.regularExpression = regularExpression
        self.valueTransformerName = valueTransformerName
        self.userInfo = userInfo
        self.elementID = elementID
    }

    /// The column holding this attribute: `Z` + the uppercased name (kept, not recomputed: it is on every row's path),
    /// and a number after it when a sibling sub-entity stores a property of the same name first (`ZNAME1`).
    public internal(set) var columnName: String

    /// True when the model marks the attribute secret (`userInfo` key `secret` = YES):
    /// its values never appear in error descriptions or messages.
    public var isSecret: Bool { isTruthy(userInfo["secret"]) }

    /// The default value converted to the attribute's type, or nil.
    public var defaultValue: Any? {
        guard let text = defaultValueString else { return nil }
        return AttributeDescription.parse(text, as: type)
    }

    /// Parses a model string (default value, bound) into a value of `type`.
    static func parse(_ text: String, as type: AttributeType) -> Any? {
        switch type {
        case .integer16, .integer32, .integer64: return Int(text) ?? Double(text).map { Int($0) }
        case .decimal: return Decimal(string: text)
        case .double: return Double(text)
        case .float: return Float(text)
        case .string: return text
        case .boolean: return isTruthy(text)
        case .date: return Double(text).map { Date(timeIntervalSinceReferenceDate: $0) }
        case .uuid: return UUID(uuidString: text)
        case .uri: return URL(string: text)
        case .binary, .transformable: return nil
        }
    }
}

func isTruthy(_ text: String?) -> Bool {
    guard let text = text?.lowercased() else { return false }
    return text == "yes" || text == "true" || text == "1"
}
