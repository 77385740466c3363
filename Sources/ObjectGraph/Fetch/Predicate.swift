import Foundation

/// A filter for fetch requests in NSPredicate's format-string language.
///
/// Supported: `==` `!=` `<` `<=` `>` `>=` `BETWEEN` `BEGINSWITH` `ENDSWITH` `CONTAINS`
/// `LIKE` `MATCHES` `IN`, the options `[c]` `[d]` `[cd]`, `AND` `OR` `NOT` and parentheses,
/// key paths through to-one relationships, `ANY` `ALL` `NONE` over to-many ones, `@count`,
/// `nil`, `TRUE`/`FALSE`, `%@` (a value) and `%K` (a key path) arguments, and
/// `SUBQUERY(collection, $x, predicate).@count` over a to-many relationship (in SQL, a
/// correlated subquery on the destination's table), whose predicate's key paths start with `$x`.
///
/// ```swift
/// let predicate = try Predicate(format: "name BEGINSWITH[cd] %@ AND category.name == %@", "gm", "Web Site")
/// let busy = try Predicate(format: "SUBQUERY(items, $item, $item.rank > %@).@count >= 2", 5)
/// ```
public struct Predicate: CustomStringConvertible {
    indirect enum Node {
        case constant(Bool)
        case and([Node])
        case or([Node])
        case not(Node)
        case comparison(Comparison)
    }

    enum Modifier { case direct, any, all, none }

    enum Operator: String {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case between = "BETWEEN", beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS"
        case like = "LIKE", matches = "MATCHES", `in` = "IN"
    }

    struct Options: OptionSet {
        let rawValue: Int
        static let caseInsensitive = Options(rawValue: 1)
        static let diacriticInsensitive = Options(rawValue: 2)
    }

    indirect enum Expression {
        case keyPath([String])
        case constant(Any?)
        case list([Expression])
        /// `SUBQUERY(collection, $x, predicate).@count`: how many members of the to-many
        /// `collection` match `predicate`, whose key paths are relative to the member.
        case subqueryCount(collection: [String], predicate: Node)
    }

    struct Comparison {
        var modifier: Modifier
        var left: Expression
        var op: Operator
        var options: Options
        var right: Expression
    }

    let root: Node
    public let format: String

    init(root: Node, format: String) {
        self.root = root
        self.format = format
    }

    /// Parses a format string; `%@` and `%K` take their values from `arguments` in order.
    ///
    /// - throws: ``PredicateSyntaxError`` naming the position of the problem.
    public init(format: String, argumentArray arguments: [Any?]) throws {
        var parser = PredicateParser(format: format, arguments: arguments)
        self.root = try parser.parse()
        self.format = format
    }

    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    public static var alwaysTrue: Predicate { Predicate(root: .constant(true), format: "TRUEPREDICATE") }

    public static func and(_ predicates: [Predicate]) -> Predicate {
        Predicate(
            root: .and(predicates.map(\.root)), format: predicates.map { "(\($0.format))" }.joined(separator: " AND "))
    }

    public var description: String { format }

    /// Evaluates the predicate on an object in memory.
    public func evaluate(with object: ManagedObject) -> Bool { PredicateEvaluator.evaluate(root, on: object) }
}

/// A format string that could not be parsed; `position` counts characters from 1.
public struct PredicateSyntaxError: Error, CustomStringConvertible {
    public var format: String
    public var position: Int
    public var reason: String
    public var description: String { "invalid predicate at position \(position): \(reason) in '\(format)'" }
}

struct PredicateParser {
    enum Token: Equatable {
        case word(String)          // identifiers and keywords
        case string(String)
        case number(String)
        case symbol(String)        // operators and punctuation
        case options(String)       // [cd]
        case argument(String)      // %@ %K %d ...
        case end
    }

    private let format: String
    private var arguments: [Any?]
    private var tokens: [(Token, Int)] = []
    private var index = 0

    init(format: String, arguments: [Any?]) {
        self.format = format
        self.arguments = arguments
    }

    private func error(_ reason: String, at position: Int? = nil) -> PredicateSyntaxError {
        PredicateSyntaxError(
            format: format, position: position ?? tokens[min(index, tokens.count - 1)].1, reason: reason)
    }

    mutating func parse() throws -> Predicate.Node {
        try tokenize()
        let node = try parseOr()
        guard case .end = peek else { throw error("unexpected \(describe(peek))") }
        guard arguments.isEmpty else { throw error("\(arguments.count) argument(s) left unused", at: format.count + 1) }
        return node
    }

    // MARK: Tokens

    private mutating func tokenize() throws {
        let characters = Array(format)
        var i = 0
        while i < characters.count {
            let c = characters[i]
            let start = i + 1
            if c.isWhitespace { i += 1; continue }
            if c == "'" || c == "\"" {
                var text = ""
                i += 1
                while i < characters.count, characters[i] != c {
                    if characters[i] == "\\", i + 1 < characters.count { i += 1 }
                    text.append(characters[i])
                    i += 1
                }
                guard i < characters.count else {
                    throw PredicateSyntaxError(format: format, position: start, reason: "unterminated string")
                }
                i += 1
                tokens.append((.string(text), start))
            } else if c.isNumber || (c == "-" && i + 1 < characters.count && characters[i + 1].isNumber && !lastIsValue)
            {
                var text = String(c)
                i += 1
                while i < characters.count, characters[i].isNumber || characters[i] == "." || characters[i] == "e" {
                    text.append(characters[i]); i += 1
                }
                tokens.append((.number(text), start))
            } else if c.isLetter || c == "_" || c == "@" || c == "$" || c == "#" {
                var text = String(c)
                i += 1
                while i < characters.count, characters[i].isLetter || characters[i].isNumber || characters[i] == "_" {
                    text.append(characters[i]); i += 1
                }
                tokens.append((.word(text), start))
            } else if c == "%" {
                guard i + 1 < characters.count else {
                    throw PredicateSyntaxError(format: format, position: start, reason: "'%' at the end")
                }
                var spec = String(characters[i + 1])
                i += 2
                if spec == "l", i < characters.count { spec.append(characters[i]); i += 1 }
                guard ["@", "K", "d", "i", "f", "ld", "li", "lf", "s"].contains(spec) else {
                    throw PredicateSyntaxError(
                        format: format, position: start, reason: "unknown format specifier '%\(spec)'")
                }
                tokens.append((.argument(spec), start))
            } else if c == "[" {
                var text = ""
                i += 1
                while i < characters.count, characters[i] != "]" { text.append(characters[i]); i += 1 }
                guard i < characters.count, Set(text.lowercased()).isSubset(of: ["c", "d", "n"]) else {
                    throw PredicateSyntaxError(
                        format: format, position: start, reason: "bad comparison options '[\(text)'")
                }
                i += 1
                tokens.append((.options(text.lowercased()), start))
            } else {
                let two = i + 1 < characters.count ? String([c, characters[i + 1]]) : ""
                if ["==", "!=", "<=", ">=", "=<", "=>", "<>", "&&", "||"].contains(two) {
                    tokens.append((.symbol(two), start))
                    i += 2
                } else if "=<>!(){},.".contains(c) {
                    tokens.append((.symbol(String(c)), start))
                    i += 1
                } else {
                    throw PredicateSyntaxError(format: format, position: start, reason: "unexpected character '\(c)'")
                }
            }
        }
        tokens.append((.end, characters.count + 1))
    }

    private var lastIsValue: Bool {
        guard let last = tokens.last?.0 else { return false }
        switch last {
        case .word, .string, .number, .argument: return true
        case .symbol(let s): return s == ")" || s == "}"
        default: return false
        }
    }

    private var peek: Token { tokens[index].0 }
    private mutating func advance() -> Token { defer { index += 1 }; return tokens[index].0 }

    private func isKeyword(_ token: Token, _ words: String...) -> Bool {
        if case .word(let w) = token { return words.contains(w.uppercased()) }
        return false
    }

    private func describe(_ token: Token) -> String {
        switch token {
        case .word(let w): return "'\(w)'"
        case .string(let s): return "string \"\(s)\""
        case .number(let n): return "number \(n)"
        case .symbol(let s): return "'\(s)'"
        case .options(let o): return "'[\(o)]'"
        case .argument(let a): return "'%\(a)'"
        case .end: return "end of predicate"
        }
    }

    // MARK: Grammar

    private mutating func parseOr() throws -> Predicate.Node {
        var terms = [try parseAnd()]
        while isKeyword(peek, "OR") || peek == .symbol("||") { _ = advance(); terms.append(try parseAnd()) }
        return terms.count == 1 ? terms[0] : .or(terms)
    }

    private mutating func parseAnd() throws -> Predicate.Node {
        var terms = [try parseNot()]
        while isKeyword(peek, "AND") || peek == .symbol("&&") { _ = advance(); terms.append(try parseNot()) }
        return terms.count == 1 ? terms[0] : .and(terms)
    }

    private mutating func parseNot() throws -> Predicate.Node {
        if isKeyword(peek, "NOT") || peek == .symbol("!") {
            _ = advance()
            return .not(try parseNot())
        }
        return try parsePrimary()
    }

    private mutating func parsePrimary() throws -> Predicate.Node {
        if peek == .symbol("(") {
            // A parenthesis opens a sub-predicate, unless it wraps an expression of a comparison.
            let saved = index
            _ = advance()
            if let node = try? parseOr(), peek == .symbol(")") {
                _ = advance()
                return node
            }
            index = saved
        }
        if isKeyword(peek, "TRUEPREDICATE") { _ = advance(); return .constant(true) }
        if isKeyword(peek, "FALSEPREDICATE") { _ = advance(); return .constant(false) }
        return .comparison(try parseComparison())
    }

    private mutating func parseComparison() throws -> Predicate.Comparison {
        var modifier = Predicate.Modifier.direct
        if isKeyword(peek, "ANY", "SOME") { _ = advance(); modifier = .any }
        else if isKeyword(peek, "ALL") { _ = advance(); modifier = .all }
        else if isKeyword(peek, "NONE") { _ = advance(); modifier = .none }
        let left = try parseExpression()
        let opPosition = tokens[index].1
        var negate = false
        if isKeyword(peek, "NOT") { _ = advance(); negate = true }
        let op: Predicate.Operator
        switch advance() {
        case .symbol("=="), .symbol("="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="), .symbol("=<"): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="), .symbol("=>"): op = .greaterOrEqual
        case .word(let w):
            guard let named = Predicate.Operator(rawValue: w.uppercased()), named.rawValue.first!.isLetter else {
                throw PredicateSyntaxError(
                    format: format, position: opPosition, reason: "expected a comparison operator, found '\(w)'")
            }
            op = named
        case let other:
            index -= 1
            throw PredicateSyntaxError(
                format: format, position: tokens[index].1,
                reason: "expected a comparison operator, found \(describe(other))")
        }
        var options: Predicate.Options = []
        if case .options(let text) = peek {
            _ = advance()
            if text.contains("c") { options.insert(.caseInsensitive) }
            if text.contains("d") { options.insert(.diacriticInsensitive) }
        }
        let right = try parseExpression()
        if op == .between {
            guard case .list(let bounds) = right, bounds.count == 2 else {
                throw PredicateSyntaxError(
                    format: format, position: opPosition, reason: "BETWEEN needs two bounds, as {low, high}")
            }
        }
        let comparison = Predicate.Comparison(modifier: modifier, left: left, op: op, options: options, right: right)
        guard negate else { return comparison }
        // "a NOT IN b" and friends: the parser wraps these via a NONE-like flag is not in NSPredicate; keep it simple.
        throw PredicateSyntaxError(
            format: format, position: opPosition, reason: "write NOT before the comparison: NOT (a \(op.rawValue) b)")
    }

    private mutating func parseExpression() throws -> Predicate.Expression {
        let position = tokens[index].1
        switch advance() {
        case .string(let s): return .constant(s)
        case .number(let n):
            if let integer = Int(n) { return .constant(integer) }
            guard let double = Double(n) else {
                throw PredicateSyntaxError(format: format, position: position, reason: "bad number '\(n)'")
            }
            return .constant(double)
        case .argument(let spec):
            guard !arguments.isEmpty else {
                throw PredicateSyntaxError(format: format, position: position, reason: "no argument for '%\(spec)'")
            }
            let value = arguments.removeFirst()
            if spec == "K" {
                guard let keyPath = value as? String, !keyPath.isEmpty else {
                    throw PredicateSyntaxError(format: format, position: position, reason: "%K needs a key path string")
                }
                return .keyPath(keyPath.split(separator: ".").map(String.init))
            }
            if let array = value as? [Any?] { return .list(array.map { .constant($0) }) }
            if let set = value as? Set<AnyHashable> { return .list(set.map { .constant($0) }) }
            return .constant(value)
        case .symbol("{"):
            var items: [Predicate.Expression] = []
            if peek != .symbol("}") {
                repeat {
                    items.append(try parseExpression())
                } while peek == .symbol(",")
                    && {
                        _ = advance(); return true
                    }()
            }
            guard advance() == .symbol("}") else {
                throw PredicateSyntaxError(format: format, position: tokens[index - 1].1, reason: "expected '}'")
            }
            return .list(items)
        case .symbol("("):
            let inner = try parseExpression()
            guard advance() == .symbol(")") else {
                throw PredicateSyntaxError(format: format, position: tokens[index - 1].1, reason: "expected ')'")
            }
            return inner
        case .word(let w):
            switch w.uppercased() {
            case "NIL", "NULL": return .constant(nil)
            case "TRUE", "YES": return .constant(true)
            case "FALSE", "NO": return .constant(false)
            case "AND", "OR", "NOT", "BETWEEN", "CONTAINS", "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES", "IN", "ANY",
                "ALL", "NONE", "SOME":
                throw PredicateSyntaxError(
                    format: format, position: position, reason: "expected a value or key path, found '\(w)'")
            case "SUBQUERY" where peek == .symbol("("):
                return try parseSubquery(at: position)
            default:
                var path = [w]
                while peek == .symbol(".") {
                    _ = advance()
                    guard case .word(let next) = advance() else {
                        throw PredicateSyntaxError(
                            format: format, position: tokens[index - 1].1, reason: "expected a key after '.'")
                    }
                    path.append(next)
                }
                return .keyPath(path)
            }
        case let other:
            throw PredicateSyntaxError(
                format: format, position: position, reason: "expected a value or key path, found \(describe(other))")
        }
    }

    /// `SUBQUERY(collection, $x, predicate).@count`, after the word SUBQUERY.
    private mutating func parseSubquery(at position: Int) throws -> Predicate.Expression {
        func expect(_ symbol: String, _ what: String) throws {
            guard advance() == .symbol(symbol) else {
                throw PredicateSyntaxError(format: format, position: tokens[index - 1].1, reason: "expected \(what)")
            }
        }
        try expect("(", "'(' after SUBQUERY")
        guard case .keyPath(let collection) = try parseExpression() else {
            throw PredicateSyntaxError(
                format: format, position: position, reason: "SUBQUERY's first argument must be a key path")
        }
        try expect(",", "',' after SUBQUERY's collection")
        guard case .word(let variable) = advance(), variable.hasPrefix("$"), variable.count > 1 else {
            throw PredicateSyntaxError(
                format: format, position: tokens[index - 1].1, reason: "expected a variable such as $x in SUBQUERY")
        }
        try expect(",", "',' after SUBQUERY's variable")
        let predicate = try relative(to: variable, try parseOr(), at: position)
        try expect(")", "')' closing SUBQUERY")
        guard advance() == .symbol("."), case .word(let function) = advance(), function.lowercased() == "@count"
        else {
            throw PredicateSyntaxError(
                format: format, position: tokens[index - 1].1, reason: "SUBQUERY(...) must be followed by .@count")
        }
        return .subqueryCount(collection: collection, predicate: predicate)
    }

    /// A subquery's predicate with `$x.` taken off its key paths; a key path not starting with
    /// the variable is refused (it would name the outer object, which is not supported).
    private func relative(to variable: String, _ node: Predicate.Node, at position: Int) throws -> Predicate.Node {
        func strip(_ expression: Predicate.Expression) throws -> Predicate.Expression {
            switch expression {
            case .constant: return expression
            case .list(let items): return .list(try items.map(strip))
            case .keyPath(let path):
                guard path.first == variable else {
                    throw PredicateSyntaxError(
                        format: format, position: position,
                        reason: "key path '\(path.joined(separator: "."))' in SUBQUERY must start with \(variable)")
                }
                return .keyPath(path.count == 1 ? ["SELF"] : Array(path.dropFirst()))
            case .subqueryCount(let collection, let inner):
                guard case .keyPath(let stripped) = try strip(.keyPath(collection)) else { return expression }
                return .subqueryCount(collection: stripped, predicate: inner)
            }
        }
        switch node {
        case .constant: return node
        case .and(let parts): return .and(try parts.map { try relative(to: variable, $0, at: position) })
        case .or(let parts): return .or(try parts.map { try relative(to: variable, $0, at: position) })
        case .not(let inner): return .not(try relative(to: variable, inner, at: position))
        case .comparison(var comparison):
            comparison.left = try strip(comparison.left)
            comparison.right = try strip(comparison.right)
            return .comparison(comparison)
        }
    }
}
