import Foundation

/// Evaluates predicates on objects in memory: for transformed attributes (decoded first),
/// unsaved objects, and to back the SQL functions so both paths agree.
enum PredicateEvaluator {
    static func evaluate(_ node: Predicate.Node, on object: ManagedObject) -> Bool {
        evaluate(node) { object.value(forKeyPath: $0) }
    }

    /// `node` over the values `read` gives for key paths (an object's, a dictionary result's).
    static func evaluate(_ node: Predicate.Node, reading read: (ArraySlice<String>) -> Any?) -> Bool {
        switch node {
        case .constant(let value): return value
        case .and(let nodes): return nodes.allSatisfy { evaluate($0, reading: read) }
        case .or(let nodes): return nodes.contains { evaluate($0, reading: read) }
        case .not(let inner): return !evaluate(inner, reading: read)
        case .comparison(let comparison): return evaluate(comparison, reading: read)
        }
    }

    /// The key paths `node` reads, nil when it counts a subquery's members (objects only).
    static func keyPaths(of node: Predicate.Node) -> [[String]]? {
        var paths: [[String]] = []
        func collectExpression(_ expression: Predicate.Expression) -> Bool {
            switch expression {
            case .keyPath(let path):
                paths.append(path)
                return true
            case .constant: return true
            case .list(let items): return items.allSatisfy(collectExpression)
            case .subqueryCount: return false
            }
        }
        func collectNode(_ node: Predicate.Node) -> Bool {
            switch node {
            case .constant: return true
            case .and(let nodes), .or(let nodes): return nodes.allSatisfy(collectNode)
            case .not(let inner): return collectNode(inner)
            case .comparison(let comparison):
                return collectExpression(comparison.left) && collectExpression(comparison.right)
            }
        }
        return collectNode(node) ? paths : nil
    }

    private static func value(_ expression: Predicate.Expression, reading read: (ArraySlice<String>) -> Any?) -> Any? {
        switch expression {
        case .keyPath(let path): return read(path[...])
        case .constant(let value): return value
        case .list(let items): return items.map { value($0, reading: read) }
        case .subqueryCount(let collection, let predicate):
            let found = read(collection[...])
            let members = found as? [ManagedObject] ?? (found as? ManagedObject).map { [$0] } ?? []
            return members.reduce(0) { $0 + (evaluate(predicate, on: $1) ? 1 : 0) }
        }
    }

    private static func evaluate(
        _ comparison: Predicate.Comparison, reading read: (ArraySlice<String>) -> Any?
    ) -> Bool {
        let left = value(comparison.left, reading: read)
        let right = value(comparison.right, reading: read)
        // A to-many key path yields an array: ANY unless ALL or NONE says otherwise.
        if case .keyPath = comparison.left, let many = left as? [Any],
            !isListOperator(comparison.op) || comparison.modifier != .direct
        {
            let test = { (item: Any) in compare(item, comparison.op, right, comparison.options) }
            switch comparison.modifier {
            case .direct, .any: return many.contains(where: test)
            case .all: return many.allSatisfy(test)
            case .none: return !many.contains(where: test)
            }
        }
        return compare(left, comparison.op, right, comparison.options)
    }

    private static func isListOperator(_ op: Predicate.Operator) -> Bool { op == .in || op == .contains }

    static func compare(_ left: Any?, _ op: Predicate.Operator, _ right: Any?, _ options: Predicate.Options) -> Bool {
        switch op {
        case .equal: return equal(left, right, options)
        case .notEqual: return !equal(left, right, options)
        case .less: return order(left, right, options).map { $0 < 0 } ?? false
        case .lessOrEqual: return order(left, right, options).map { $0 <= 0 } ?? false
        case .greater: return order(left, right, options).map { $0 > 0 } ?? false
        case .greaterOrEqual: return order(left, right, options).map { $0 >= 0 } ?? false
        case .between:
            guard let bounds = right as? [Any?], bounds.count == 2 else { return false }
            return (order(left, bounds[0], options).map { $0 >= 0 } ?? false)
                && (order(left, bounds[1], options).map { $0 <= 0 } ?? false)
        case .in:
            if let list = right as? [Any?] { return list.contains { equal(left, $0, options) } }
            if let text = right as? String, let needle = left as? String {
                return stringTest(.contains, text, needle, options)
            }
            return false
        case .contains:
            if let list = left as? [Any?] { return list.contains { equal($0, right, options) } }
            guard let text = left as? String, let needle = right as? String else { return false }
            return stringTest(.contains, text, needle, options)
        case .beginsWith, .endsWith, .like, .matches:
            guard let text = left as? String, let pattern = right as? String else { return false }
            return stringTest(op, text, pattern, options)
        }
    }

    static func fold(_ text: String, _ options: Predicate.Options) -> String {
        guard !options.isEmpty else { return text }
        // ASCII has no diacritics, and its case folding is lowercasing: skip Foundation's
        // Unicode folding, by far the slowest step of searching large texts.
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            return options.contains(.caseInsensitive) ? text.lowercased() : text
        }
        var foldOptions: String.CompareOptions = []
        if options.contains(.caseInsensitive) { foldOptions.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { foldOptions.insert(.diacriticInsensitive) }
        return foldOptions.isEmpty ? text : text.folding(options: foldOptions, locale: nil)
    }

    /// The string operators, shared by the evaluator and the SQL function `OG_STRING_TEST`.
    static func stringTest(
        _ op: Predicate.Operator, _ text: String, _ pattern: String, _ options: Predicate.Options
    ) -> Bool {
        if op == .contains || op == .beginsWith || op == .endsWith,
            let result = asciiTest(op, text, pattern, ignoringCase: options.contains(.caseInsensitive))
        {
            return result
        }
        let text = fold(text, options)
        switch op {
        case .matches:
            return Validator.matchesWhole(text, options.isEmpty ? pattern : fold(pattern, options))
        case .like:
            return likeMatches(Array(text), Array(fold(pattern, options)))
        default:
            let pattern = fold(pattern, options)
            switch op {
            case .beginsWith: return text.hasPrefix(pattern)
            case .endsWith: return text.hasSuffix(pattern)
            case .contains: return pattern.isEmpty || text.contains(pattern)
            default: return equal(text, pattern, [])
            }
        }
    }

    /// CONTAINS, BEGINSWITH and ENDSWITH on ASCII text, compared byte by byte (folding case
    /// on the fly, no copies); nil when either string is not ASCII.
    private static func asciiTest(
        _ op: Predicate.Operator, _ text: String, _ pattern: String, ignoringCase: Bool
    ) -> Bool? {
        var text = text
        var pattern = pattern
        return text.withUTF8 { haystack -> Bool? in
            pattern.withUTF8 { needle -> Bool? in
                guard isASCII(haystack), isASCII(needle) else { return nil }
                guard needle.count <= haystack.count else { return false }
                guard let start = haystack.baseAddress, let first = needle.first else { return true }
                @inline(__always) func folded(_ byte: UInt8) -> UInt8 {
                    ignoringCase && byte >= 65 && byte <= 90 ? byte | 0x20 : byte
                }
                func matches(at offset: Int) -> Bool {
                    for index in 0..<needle.count where folded(haystack[offset + index]) != folded(needle[index]) {
                        return false
                    }
                    return true
                }
                switch op {
                case .beginsWith: return matches(at: 0)
                case .endsWith: return matches(at: haystack.count - needle.count)
                default:
                    // Candidates found with memchr, for the first byte in either case: a search
                    // reads every note's text, and most bytes are no candidate.
                    let lower = folded(first)
                    let upper = ignoringCase && lower >= 97 && lower <= 122 ? lower & ~0x20 : lower
                    let last = haystack.count - needle.count
                    // The next place at or after `offset` where `byte` may start a match.
                    func next(_ byte: UInt8, from offset: Int) -> Int? {
                        guard offset <= last else { return nil }
                        return memchr(start + offset, Int32(byte), last - offset + 1)
                            .map { UnsafeRawPointer($0) - UnsafeRawPointer(start) }
                    }
                    var nextLower = next(lower, from: 0)
                    var nextUpper = upper == lower ? nil : next(upper, from: 0)
                    while true {
                        let hit: Int
                        switch (nextLower, nextUpper) {
                        case (nil, nil): return false
                        case (let found?, nil), (nil, let found?): hit = found
                        case (let lowerHit?, let upperHit?): hit = min(lowerHit, upperHit)
                        }
                        if matches(at: hit) { return true }
                        if nextLower == hit { nextLower = next(lower, from: hit + 1) }
                        if nextUpper == hit { nextUpper = next(upper, from: hit + 1) }
                    }
                }
            }
        }
    }

    /// Whether every byte is below 0x80, tested a word at a time.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let start = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(start)
        let words = bytes.count / 8
        var high: UInt64 = 0
        for word in 0..<words { high |= raw.loadUnaligned(fromByteOffset: word * 8, as: UInt64.self) }
        for index in (words * 8)..<bytes.count { high |= UInt64(bytes[index]) }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// LIKE with `*` (any run) and `?` (one character); `\` escapes.
    private static func likeMatches(_ text: [Character], _ pattern: [Character]) -> Bool {
        var memo: [Int: Bool] = [:]
        func match(_ t: Int, _ p: Int) -> Bool {
            let key = t * (pattern.count + 1) + p
            if let known = memo[key] { return known }
            let result: Bool
            if p == pattern.count {
                result = t == text.count
            } else if pattern[p] == "*" {
                result = match(t, p + 1) || (t < text.count && match(t + 1, p))
            } else if pattern[p] == "\\", p + 1 < pattern.count {
                result = t < text.count && text[t] == pattern[p + 1] && match(t + 1, p + 2)
            } else {
                result = t < text.count && (pattern[p] == "?" || pattern[p] == text[t]) && match(t + 1, p + 1)
            }
            memo[key] = result
            return result
        }
        return match(0, 0)
    }

    static func equal(_ left: Any?, _ right: Any?, _ options: Predicate.Options) -> Bool {
        switch (left, right) {
        case (nil, nil): return true
        case (nil, _), (_, nil): return false
        case (let l as String, let r as String): return fold(l, options) == fold(r, options)
        case (let l as ManagedObject, let r as ManagedObject): return l === r
        case (let l as Date, let r as Date): return l == r
        case (let l as UUID, let r as UUID): return l == r
        case (let l as Data, let r as Data): return l == r
        case (let l as URL, let r as URL): return l == r
        case (let l as URL, let r as String): return l.absoluteString == r
        default:
            if let l = doubleValue(left), let r = doubleValue(right) { return l == r }
            return false
        }
    }

    /// -1, 0 or 1, or nil when the values cannot be ordered. Strings order by UTF-8 bytes,
    /// as SQLite's BINARY collation does.
    static func order(_ left: Any?, _ right: Any?, _ options: Predicate.Options) -> Int? {
        switch (left, right) {
        case (let l as String, let r as String):
            // Byte order, as SQLite's BINARY collation; compared in place, as a sort calls this
            // n log n times.
            var (a, b) = (fold(l, options).utf8.makeIterator(), fold(r, options).utf8.makeIterator())
            while true {
                switch (a.next(), b.next()) {
                case (nil, nil): return 0
                case (nil, _): return -1
                case (_, nil): return 1
                case (let x?, let y?) where x != y: return x < y ? -1 : 1
                default: continue
                }
            }
        case (let l as Date, let r as Date):
            return l == r ? 0 : (l < r ? -1 : 1)
        default:
            guard let l = doubleValue(left), let r = doubleValue(right) else { return nil }
            return l == r ? 0 : (l < r ? -1 : 1)
        }
    }
}
