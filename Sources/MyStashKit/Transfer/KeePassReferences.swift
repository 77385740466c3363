import Foundation

/// KeePass field references, `{REF:<wanted>@<search in>:<text>}`: one entry's user or password
/// written as another's (`{REF:P@I:<uuid>}`, the password of the entry with that UUID). KeePassXC
/// shows the other entry's value; its exports keep the reference as written.
enum KeePassReferences {
    /// Wanted and searched fields by KeePass's letter; `I` (the entry's UUID) is searched only.
    nonisolated(unsafe) private static let fields: [Character: WritableKeyPath<ExportDocument.Entry, String?>] = [
        "T": \.title, "U": \.userId, "P": \.passwordText, "A": \.url, "N": \.notes,
    ]
    /// KeePassXC's own limit on references to references.
    private static let maximumDepth = 10
    /// A value references make longer than a password may be (a file can make one grow
    /// exponentially, each level repeating the next) is not resolved.
    private static let maximumLength = 10_000
    nonisolated(unsafe) private static let pattern = /\{REF:([TUPAN])@([TUPANI]):([^}]*)\}/.ignoresCase()

    /// Why a reference was not resolved.
    private enum Unresolved: Error {
        case noEntry, noIdentifiers, loop, tooDeep, tooLong

        var reason: String {
            switch self {
            case .noEntry: "to no entry of the file"
            case .noIdentifiers: "by UUID, which this export cannot resolve (it has no entry UUIDs: import "
                + "KeePassXC's XML export)"
            case .loop: "that leads back to itself"
            case .tooDeep: "nested deeper than KeePassXC's \(maximumDepth) levels"
            case .tooLong: "whose value would be longer than \(maximumLength) characters"
            }
        }
    }

    private struct Field: Hashable {
        let entry: Int
        let letter: Character
    }

    /// Resolves the references in every entry's fields from the entries of the same file, as
    /// KeePassXC does (a search by a field matches its whole value, the first such entry);
    /// `identifiers` gives each entry's UUID (32 hex digits), nil for a file without them (a CSV
    /// export). A reference that cannot be resolved is kept as written and reported.
    static func resolve(in source: inout ImportSource, identifiers: [String?]) {
        let entries = source.document.passwords
        var byIdentifier: [String: Int] = [:]
        for (index, identifier) in identifiers.enumerated() {
            guard let identifier = identifier?.uppercased(), byIdentifier[identifier] == nil else { continue }
            byIdentifier[identifier] = index
        }
        var byValue: [Character: [String: Int]] = [:]
        func target(_ searchIn: Character, _ text: String) throws -> Int {
            if searchIn == "I" {
                guard !byIdentifier.isEmpty else { throw Unresolved.noIdentifiers }
                guard let index = byIdentifier[text.replacingOccurrences(of: "-", with: "").uppercased()] else {
                    throw Unresolved.noEntry
                }
                return index
            }
            guard let key = fields[searchIn] else { throw Unresolved.noEntry }
            if byValue[searchIn] == nil {
                var table: [String: Int] = [:]
                for index in entries.indices.reversed() {
                    if let value = entries[index][keyPath: key] { table[value] = index }
                }
                byValue[searchIn] = table
            }
            guard let index = byValue[searchIn]?[text] else { throw Unresolved.noEntry }
            return index
        }
        // Each field resolved once: references repeating a reference cost its length, not its depth's power.
        var resolvedFields: [Field: Result<String, Unresolved>] = [:]
        var resolving: Set<Field> = []
        func value(of field: Field, depth: Int) throws -> String {
            if let known = resolvedFields[field] { return try known.get() }
            guard !resolving.contains(field) else { throw Unresolved.loop }
            guard depth <= maximumDepth else { throw Unresolved.tooDeep }
            resolving.insert(field)
            defer { resolving.remove(field) }
            let text = fields[field.letter].flatMap { entries[field.entry][keyPath: $0] } ?? ""
            let result = Result { try resolved(text, depth: depth + 1) }.mapError { $0 as? Unresolved ?? .noEntry }
            // Too deep from here is not too deep from the field itself: only that is not kept.
            if case .failure(.tooDeep) = result { return try result.get() }
            resolvedFields[field] = result
            return try result.get()
        }
        func resolved(_ text: String, depth: Int) throws -> String {
            guard text.contains("{") else { return text }
            var result = ""
            var rest = text[...]
            while let match = rest.firstMatch(of: pattern) {
                result += rest[..<match.range.lowerBound]
                let index = try target(Character(match.2.uppercased()), String(match.3))
                result += try value(of: Field(entry: index, letter: Character(match.1.uppercased())), depth: depth)
                guard result.utf8.count <= maximumLength else { throw Unresolved.tooLong }
                rest = rest[match.range.upperBound...]
            }
            return result + rest
        }
        for index in entries.indices {
            var entry = source.document.passwords[index]
            let label = entry.name.isEmpty ? "#\(index + 1)" : entry.name
            func settle(_ text: String?, _ letter: Character?, _ field: String) -> String? {
                guard let text, text.firstMatch(of: pattern) != nil else { return text }
                do {
                    let found = try letter.map { try value(of: Field(entry: index, letter: $0), depth: 0) }
                        ?? resolved(text, depth: 0)
                    return found.isEmpty ? nil : found
                } catch {
                    let reason = (error as? Unresolved ?? .noEntry).reason
                    source.warnings.append(.init(kind: "entry", title: label,
                        reason: "its \(field) is a KeePass reference \(reason) (\(shown(text))); kept as written"))
                    return text
                }
            }
            entry.userId = settle(entry.userId, "U", "user name")
            entry.password = settle(entry.password, "P", "password") ?? ""
            entry.url = settle(entry.url, "A", "URL")
            entry.notes = settle(entry.notes, "N", "notes")
            entry.fields = entry.fields?.map { field in
                var field = field
                field.value = settle(field.value, nil, "field '\(field.name)'")
                return field
            }
            source.document.passwords[index] = entry
        }
    }
}

extension KeePassReferences {
    /// The references in `text` as a report names them: never the rest of the field (a password
    /// may hold one beside text of its own), nor a password searched for (`@P:`).
    static func shown(_ text: String) -> String {
        text.matches(of: pattern).map { match in
            let searched = match.2.uppercased() == "P" ? "…" : String(match.3)
            return "{REF:\(match.1.uppercased())@\(match.2.uppercased()):\(searched)}"
        }.joined(separator: " ")
    }
}

private extension ExportDocument.Entry {
    /// The title and password as optional texts, as the other fields are.
    var title: String? {
        get { name.isEmpty ? nil : name }
        set { name = newValue ?? "" }
    }
    var passwordText: String? {
        get { password.isEmpty ? nil : password }
        set { password = newValue ?? "" }
    }
}
