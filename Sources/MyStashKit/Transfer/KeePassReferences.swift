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
    nonisolated(unsafe) private static let pattern = /\{REF:([TUPAN])@([TUPANI]):([^}]*)\}/.ignoresCase()

    /// Resolves the references in every entry's fields from the entries of the same file;
    /// `identifiers` gives each entry's UUID (32 hex digits), nil for a file without them (a CSV
    /// export). A reference that names no entry, or that cannot be resolved, is kept and reported.
    static func resolve(in source: inout ImportSource, identifiers: [String?]) {
        let why = identifiers.contains { $0 != nil } ? "to no entry of the file"
            : "this export cannot resolve (it has no entry UUIDs: import KeePassXC's XML export)"
        let entries = source.document.passwords
        var byIdentifier: [String: Int] = [:]
        for (index, identifier) in identifiers.enumerated() {
            if let identifier { byIdentifier[identifier.uppercased()] = index }
        }
        func value(of index: Int, _ letter: Character, depth: Int) -> String? {
            guard let key = fields[letter], let text = entries[index][keyPath: key] else { return nil }
            return resolved(text, depth: depth + 1)
        }
        func target(_ searchIn: Character, _ text: String) -> Int? {
            if searchIn == "I" { return byIdentifier[text.replacingOccurrences(of: "-", with: "").uppercased()] }
            guard let key = fields[searchIn] else { return nil }
            return entries.indices.first { entries[$0][keyPath: key]?.localizedCaseInsensitiveContains(text) == true }
        }
        func resolved(_ text: String, depth: Int) -> String? {
            guard text.contains("{") else { return text }
            guard depth <= maximumDepth else { return nil }
            var result = ""
            var rest = text[...]
            while let match = rest.firstMatch(of: pattern) {
                result += rest[..<match.range.lowerBound]
                let wanted = Character(match.1.uppercased()), searchIn = Character(match.2.uppercased())
                guard let index = target(searchIn, String(match.3)),
                      let value = value(of: index, wanted, depth: depth) else { return nil }
                result += value
                rest = rest[match.range.upperBound...]
            }
            return result + rest
        }
        for index in entries.indices {
            var entry = source.document.passwords[index]
            let label = entry.name.isEmpty ? "#\(index + 1)" : entry.name
            func settle(_ text: String?, _ field: String) -> String? {
                guard let text, text.firstMatch(of: pattern) != nil else { return text }
                if let value = resolved(text, depth: 0) { return value }
                source.warnings.append(.init(kind: "entry", title: label, reason:
                    "its \(field) is a KeePass reference \(why) (\(text)); kept as written"))
                return text
            }
            entry.userId = settle(entry.userId, "user name")
            entry.password = settle(entry.password, "password") ?? ""
            entry.url = settle(entry.url, "URL")
            entry.notes = settle(entry.notes, "notes")
            entry.fields = entry.fields?.map { field in
                var field = field
                field.value = settle(field.value, "field '\(field.name)'")
                return field
            }
            source.document.passwords[index] = entry
        }
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
