import Foundation

/// The rule from the model that a value broke: the bound or pattern itself, so that a
/// message can be written without knowing the model.
public enum ValidationConstraint: Equatable, Sendable {
    case required
    case minimumLength(Int)
    case maximumLength(Int)
    case pattern(String)
    case minimum(Double)
    case maximum(Double)
    case earliest(Date)
    case latest(Date)
    case minimumCount(Int)
    case maximumCount(Int)
    /// The relationship whose delete rule is Deny.
    case deleteDenied(relationship: String)
    /// A rule from application code, with its own message.
    case custom(String)

    /// Why a String attribute holding a NUL character is refused (code 1550): the store would
    /// keep its text only up to it.
    public static let holdsNul = "can't hold a NUL character (the store would keep only the text before it)"
}

/// A validation failure found at save, with Core Data's code and meaning.
///
/// It carries the object, key, value and the model's constraint. A save that finds
/// several failures throws one error with code 1560 whose ``errors`` lists them all.
///
/// Its `description` never shows the value, which may be secret; see
/// ``ValidationMessages`` for messages meant for people.
public struct ValidationError: Error, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public var description: String { String(rawValue) }
    }

    /// What kind of rule failed (Core Data's validation codes).
    public var code: Code
    /// The object and its value belong to the object's context queue: read them there.
    public nonisolated(unsafe) var object: ManagedObject?
    /// The attribute or relationship that failed, if one did.
    public var key: String?
    /// The value that failed the rule.
    public nonisolated(unsafe) var value: Any?
    /// The rule and its bound, for a message that names them.
    public var constraint: ValidationConstraint?
    /// For code 1560, the failures it gathers.
    public var detailedErrors: [ValidationError]

    public init(code: Code, object: ManagedObject?, key: String?, value: Any?, constraint: ValidationConstraint?) {
        self.code = code
        self.object = object
        self.key = key
        self.value = value
        self.constraint = constraint
        self.detailedErrors = []
    }

    /// One error for a list of failures: the failure itself, or a 1560 gathering them.
    static func combining(_ errors: [ValidationError]) -> ValidationError {
        if errors.count == 1 { return errors[0] }
        var multiple = ValidationError(code: .multiple, object: nil, key: nil, value: nil, constraint: nil)
        multiple.detailedErrors = errors
        return multiple
    }

    /// Every single failure: this one, or those a 1560 gathers.
    public var errors: [ValidationError] { code == .multiple ? detailedErrors.flatMap(\.errors) : [self] }

    public var description: String {
        if code == .multiple {
            return "Multiple validation errors (1560): " + detailedErrors.map(\.description).joined(separator: "; ")
        }
        let place = [object?.entity.name, key].compactMap { $0 }.joined(separator: ".")
        let rule = constraint.map { " (\($0))" } ?? ""
        return "Validation error \(code.rawValue) on \(place.isEmpty ? "object" : place)\(rule)"
    }
}
