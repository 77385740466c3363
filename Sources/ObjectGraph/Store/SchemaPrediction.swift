import Foundation

extension SchemaObject {
    /// What SQLite keeps in `sqlite_master` for `required` then `optional` statements, foreseen
    /// from their text without running them: a table or an index is kept as "CREATE", its kind
    /// and the statement from the object's own name on (a schema qualifier, `IF NOT EXISTS` and
    /// a final semicolon dropped), with an automatic index, of no text, for each `UNIQUE` and each
    /// primary key that is not the rowid. Nil when a statement has another shape (a view, a
    /// trigger, a literal, a comment): only SQLite can then say.
    ///
    /// A wrong foresight costs time, not safety: the caller accepts a store only when its
    /// definitions equal these word for word, and otherwise asks SQLite by running the statements.
    static func predictedDefinitions(required: [String], optional: [String])
        -> (required: Set<String>, definitions: [String: Definition])?
    {
        var definitions: [String: Definition] = [:]
        var requiredNames: Set<String> = []
        var seen: Set<String> = []
        for (index, statement) in (required + optional).enumerated() {
            guard let objects = predictedObjects(of: statement) else { return nil }
            for (name, definition) in objects {
                // Names are case-insensitive, and a second statement for one name is IF NOT EXISTS's affair.
                guard seen.insert(name.lowercased()).inserted else { return nil }
                definitions[name] = definition
                if index < required.count { requiredNames.insert(name) }
            }
        }
        // An index is foreseen only on a table foreseen with it, spelled alike.
        guard definitions.values.allSatisfy({ $0.type != "index" || definitions[$0.table]?.type == "table" })
        else { return nil }
        return (requiredNames, definitions)
    }

    private static func predictedObjects(of statement: String) -> [(String, Definition)]? {
        guard var tokens = SQLToken.split(statement) else { return nil }
        while tokens.last?.text == ";" { tokens.removeLast() }
        guard tokens.count > 3, tokens.allSatisfy({ $0.text != ";" }), tokens[0].is("CREATE") else { return nil }
        var position = 1
        let kind: String
        if tokens[1].is("TABLE") {
            kind = "TABLE"
        } else if tokens[1].is("INDEX") {
            kind = "INDEX"
        } else if tokens[1].is("UNIQUE"), tokens[2].is("INDEX") {
            kind = "UNIQUE INDEX"
            position = 2
        } else {
            return nil
        }
        position += 1
        if tokens.count > position + 3, tokens[position].is("IF"), tokens[position + 1].is("NOT"),
           tokens[position + 2].is("EXISTS") {
            position += 3
        }
        if tokens.count > position + 2, tokens[position + 1].text == "." { position += 2 }
        guard position + 1 < tokens.count, let name = tokens[position].name else { return nil }
        let text = statement[tokens[position].start..<tokens[tokens.count - 1].end]
        let sql = "CREATE \(kind) \(text)"
        let rest = tokens[(position + 1)...]
        guard kind == "TABLE" else {
            guard rest.count > 2, rest.first!.is("ON"), let table = rest.dropFirst().first!.name,
                  rest.dropFirst(2).first!.text == "("
            else { return nil }
            return [(name, Definition(type: "index", table: table, sql: sql))]
        }
        guard rest.first!.text == "(", let automatic = automaticIndexCount(Array(rest)) else { return nil }
        var objects = [(name, Definition(type: "table", table: name, sql: sql))]
        for number in stride(from: 1, through: automatic, by: 1) {
            objects.append(("sqlite_autoindex_\(name)_\(number)", Definition(type: "index", table: name, sql: nil)))
        }
        return objects
    }

    /// The indexes SQLite makes for a table's constraints: one per `UNIQUE`, and one for a
    /// primary key other than `INTEGER PRIMARY KEY` in a rowid table. Nil for the shapes where
    /// SQLite's rules are subtler (`DESC` after the key, `AS SELECT`).
    private static func automaticIndexCount(_ tokens: [SQLToken]) -> Int? {
        let withoutRowID = tokens.count > 2 && tokens[tokens.count - 2].is("WITHOUT")
            && tokens[tokens.count - 1].is("ROWID")
        var count = 0
        for (index, token) in tokens.enumerated() {
            if token.is("UNIQUE") { count += 1 }
            if token.is("AS") || token.is("SELECT") { return nil }
            guard token.is("PRIMARY"), index + 1 < tokens.count, tokens[index + 1].is("KEY") else { continue }
            let next = index + 2 < tokens.count ? tokens[index + 2] : nil
            if next?.is("DESC") == true { return nil }
            // Only "<name> INTEGER PRIMARY KEY" is foreseen as the rowid: any other shape is
            // counted as an index, and too many makes the store go to SQLite's comparison,
            // where too few would let a store without one pass.
            let isRowID = index > 2 && tokens[index - 1].is("INTEGER") && tokens[index - 2].name != nil
                && ["(", ","].contains(tokens[index - 3].text) && next?.text != "("
            if !isRowID && !withoutRowID { count += 1 }
        }
        return count
    }
}

/// A word, a quoted name or a sign of an SQL statement, where it lies in the statement.
private struct SQLToken {
    let text: Substring
    var start: String.Index { text.startIndex }
    var end: String.Index { text.endIndex }

    /// Whether it is `keyword` (given in capitals), in any case.
    func `is`(_ keyword: StaticString) -> Bool {
        let word = UnsafeBufferPointer(start: keyword.utf8Start, count: keyword.utf8CodeUnitCount)
        return text.utf8.count == word.count && zip(text.utf8, word).allSatisfy { $0 & 0xDF == $1 }
    }

    /// The name a word or a double-quoted token stands for; nil for a sign.
    var name: String? {
        if text.utf8.first == UInt8(ascii: "\"") {
            return text.dropFirst().dropLast().replacingOccurrences(of: "\"\"", with: "\"")
        }
        return text.utf8.first.map(SQLToken.startsName) == true ? String(text) : nil
    }

    private static func startsName(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") || byte == UInt8(ascii: "_")
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        startsName(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "$")
    }

    /// The tokens of `statement`; nil when it holds a literal, a comment, a bracketed name or a
    /// character beyond ASCII, which a prediction does not read.
    static func split(_ statement: String) -> [SQLToken]? {
        let bytes = statement.utf8
        var tokens: [SQLToken] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            var end = bytes.index(after: index)
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                index = end
                continue
            case UInt8(ascii: "\""):
                while true {
                    guard let close = bytes[end...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
                    end = bytes.index(after: close)
                    guard end < bytes.endIndex, bytes[end] == UInt8(ascii: "\"") else { break }
                    end = bytes.index(after: end)
                }
            case _ where isWordByte(byte):
                end = bytes[index...].firstIndex { !isWordByte($0) } ?? bytes.endIndex
            case UInt8(ascii: "'"), UInt8(ascii: "`"), UInt8(ascii: "["), UInt8(ascii: "-"), UInt8(ascii: "/"),
                 0x80...:
                return nil
            default:
                break
            }
            tokens.append(SQLToken(text: statement[index..<end]))
            index = end
        }
        return tokens
    }
}
