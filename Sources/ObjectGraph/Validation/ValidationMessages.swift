import Foundation

/// Turns validation failures into sentences for people, from the model's own rules.
///
/// Field names come from the property's `userInfo["displayName"]` (else its name), or
/// from a caller's naming function (a CLI may prefer its option names). Bounds and
/// patterns come from the error's constraint; a pattern made of one character class is
/// described in words ("can contain only letters and numbers"), any other pattern by the
/// attribute's `userInfo["patternDescription"]`. Values are never included.
///
/// For example:
///
/// ```swift
/// do { try context.save() } catch let error as ValidationError {
///     for line in ValidationMessages.messages(for: error) { print(line) }
///     // userId must be at least 3 characters
///     // userId can contain only letters and numbers
/// }
/// ```
public enum ValidationMessages {
    public typealias FieldNamer = (_ entity: EntityDescription, _ key: String) -> String

    public static func messages(for error: ValidationError, fieldName: FieldNamer? = nil) -> [String] {
        error.errors.map { message(for: $0, fieldName: fieldName) }
    }

    public static func message(for error: ValidationError, fieldName: FieldNamer? = nil) -> String {
        guard let entity = error.object?.entity, let key = error.key else { return "\(error)" }
        let field = fieldName?(entity, key) ?? entity.displayName(forKey: key)
        switch error.constraint {
        case .required?:
            return "\(field) is required"
        case .minimumLength(let n)?:
            return "\(field) must be at least \(n) character\(n == 1 ? "" : "s")"
        case .maximumLength(let n)?:
            return "\(field) can't be longer than \(n) character\(n == 1 ? "" : "s")"
        case .pattern(let pattern)?:
            if let described = entity.attribute(named: key)?.userInfo["patternDescription"] {
                return "\(field) must \(described)"
            }
            return describe(pattern: pattern).map { "\(field) \($0)" }
                ?? "\(field) does not match the pattern \(pattern)"
        case .minimum(let n)?:
            return "\(field) must be at least \(format(n))"
        case .maximum(let n)?:
            return "\(field) can't be more than \(format(n))"
        case .earliest(let date)?:
            return "\(field) can't be before \(ISO8601DateFormatter().string(from: date))"
        case .latest(let date)?:
            return "\(field) can't be after \(ISO8601DateFormatter().string(from: date))"
        case .minimumCount(let n)?:
            return "\(field) must have at least \(n) item\(n == 1 ? "" : "s")"
        case .maximumCount(let n)?:
            return "\(field) can't have more than \(n) item\(n == 1 ? "" : "s")"
        case .deleteDenied?:
            return "\(entity.displayName) can't be deleted while it has \(field)"
        case .custom(let text)?:
            return "\(field) \(text)"
        case nil:
            return "\(field) is not valid"
        }
    }

    private static func format(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }

    /// Describes a pattern made of one character class repeated (`[A-Za-z0-9]*`,
    /// `^[^\s\p{Cc}]+$`) in words; nil for any other pattern.
    static func describe(pattern: String) -> String? {
        var body = Substring(pattern)
        if body.hasPrefix("^") { body = body.dropFirst() }
        if body.hasSuffix("$") && !body.hasSuffix("\\$") { body = body.dropLast() }
        guard body.hasPrefix("[") else { return nil }
        // Strip the quantifier: *, +, or {m,n}.
        if body.hasSuffix("*") || body.hasSuffix("+") {
            body = body.dropLast()
        } else if body.hasSuffix("}"), let open = body.lastIndex(of: "{") {
            body = body[..<open]
        } else {
            return nil
        }
        guard body.hasSuffix("]") else { return nil }
        var inner = body.dropFirst().dropLast()
        let negated = inner.hasPrefix("^")
        if negated { inner = inner.dropFirst() }
        guard let kinds = characterKinds(String(inner)), !kinds.isEmpty else { return nil }
        return negated
            ? "can't contain \(list(kinds, conjunction: "or"))" : "can contain only \(list(kinds, conjunction: "and"))"
    }

    private static func characterKinds(_ set: String) -> [String]? {
        var kinds: [String] = []
        func add(_ kind: String) { if !kinds.contains(kind) { kinds.append(kind) } }
        let named: [(String, String)] = [
            ("a-z", "letters"), ("A-Z", "letters"), ("0-9", "numbers"), ("\\p{L}", "letters"),
            ("\\p{Letter}", "letters"),
            ("\\p{N}", "numbers"), ("\\p{Nd}", "numbers"), ("\\d", "numbers"), ("\\w", "letters, numbers, underscores"),
            ("\\s", "whitespace"), ("\\p{Cc}", "control characters"), ("\\p{C}", "control characters"),
            ("[:cntrl:]", "control characters"), ("\\-", "hyphens"), ("\\.", "periods"), ("\\_", "underscores"),
        ]
        let literal: [Character: String] = [" ": "spaces", "-": "hyphens", "_": "underscores", ".": "periods",
                                              "@": "@ signs", "'": "apostrophes", "+": "plus signs", ",": "commas"]
        var rest = Substring(set)
        outer: while !rest.isEmpty {
            for (token, kind) in named where rest.hasPrefix(token) {
                kind.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.forEach(add)
                rest = rest.dropFirst(token.count)
                continue outer
            }
            guard let kind = literal[rest.first!] else { return nil }
            add(kind)
            rest = rest.dropFirst()
        }
        return kinds
    }

    private static func list(_ items: [String], conjunction: String) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " \(conjunction) " + items.last!
    }
}
