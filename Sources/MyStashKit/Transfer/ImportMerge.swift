import Foundation

extension ImportReport {
    /// One value an import changed (or, in a dry run, would change) in an item already in the
    /// vault. Secrets (passwords, TOTP secrets, hidden fields, notes) are shown as
    /// ``masked`` on both sides, so a report never prints them.
    public struct Change: Codable, Equatable, Sendable {
        /// "password", "user", "URL", "more URLs", "category", "notes", "TOTP", "favorite",
        /// "history", "text" (of a note), or "field 'NAME'".
        public var field: String
        /// The value before; nil when there was none.
        public var old: String?
        /// The value after; nil when the import removes it (only ``ImportOptions/replace`` does).
        public var new: String?

        public init(field: String, old: String?, new: String?) {
            self.field = field
            self.old = old
            self.new = new
        }

        /// What the report shows of a secret.
        public static let masked = "********"
    }
}

/// How an import treats an item that is already in the vault.
public enum ImportMerge: Sendable {
    /// Values the source holds update the vault's; values the source lacks (an empty field, a
    /// custom field, a TOTP secret, a URL, a category it does not name) stay as they are.
    case keepingValues
    /// The source's item replaces the vault's: what the source lacks is removed. Earlier
    /// passwords are kept all the same, and nothing the source does not name is touched.
    case replacingValues
}

/// The merge of an import item into an entry the vault has: what the entry becomes, and every
/// value that changes.
struct EntryMerge {
    var result: ExportDocument.Entry
    var changes: [ImportReport.Change] = []

    init(vault old: ExportDocument.Entry, source new: ExportDocument.Entry, _ merge: ImportMerge) {
        let keep = merge == .keepingValues
        result = old
        func nonEmpty(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        /// The source's value when it has one (or always when replacing), else the vault's.
        func pick(_ field: String, _ path: WritableKeyPath<ExportDocument.Entry, String?>, secret: Bool = false,
                  same: (String, String) -> Bool = { $0 == $1 }) {
            let before = nonEmpty(old[keyPath: path])
            let offered = nonEmpty(new[keyPath: path])
            let after = keep ? offered ?? before : offered
            if let before, let after, same(before, after) { return }
            guard before != after else { return }
            result[keyPath: path] = after
            changes.append(Self.change(field, before, after, secret: secret))
        }
        // The name, user and URL matched the vault's ignoring case: the vault's spelling stays.
        if !keep || !new.password.isEmpty, new.password != old.password {
            result.password = new.password
            changes.append(Self.change("password", nonEmpty(old.password), nonEmpty(new.password), secret: true))
        }
        pick("notes", \.notes, secret: true)
        pick("category", \.category) { $0.lowercased() == $1.trimmingCharacters(in: .whitespaces).lowercased() }
        // The same secret and settings under another label (the CSV and XML exports of one
        // KeePassXC entry name it differently) is no change.
        pick("TOTP", \.totp, secret: true) { a, b in
            guard let a = try? TOTP(parsing: a), let b = try? TOTP(parsing: b) else { return a == b }
            return a == b
        }
        mergeURLs(old, new, keep: keep)
        let favorite = keep ? (new.favorite == true || old.favorite == true) : new.favorite == true
        if favorite != (old.favorite == true) {
            result.favorite = favorite ? true : nil
            changes.append(
                .init(field: "favorite", old: old.favorite == true ? "yes" : "no", new: favorite ? "yes" : "no"))
        }
        mergeFields(old.fields ?? [], new.fields ?? [], keep: keep)
        // Earlier passwords are only ever added (up to the history's limit): see Vault.mergeHistory.
        result.history = new.history
    }

    private mutating func mergeURLs(_ old: ExportDocument.Entry, _ new: ExportDocument.Entry, keep: Bool) {
        let before = old.moreURLs ?? []
        var after = keep ? before : []
        let primary = (old.url ?? "").lowercased()
        for url in new.moreURLs ?? [] where !after.contains(url) && url.lowercased() != primary { after.append(url) }
        guard after != before else { return }
        result.moreURLs = after.isEmpty ? nil : after
        func list(_ urls: [String]) -> String? { urls.isEmpty ? nil : urls.joined(separator: ", ") }
        changes.append(.init(field: "more URLs", old: list(before), new: list(after)))
    }

    /// Custom fields by name (ignoring case; the n-th of a repeated name matches the n-th):
    /// the source's update or join the vault's, which keep their order.
    private mutating func mergeFields(_ old: [FieldInfo], _ new: [FieldInfo], keep: Bool) {
        var remaining = new
        var merged: [FieldInfo] = []
        for field in old {
            guard let index = remaining.firstIndex(where: { $0.name.lowercased() == field.name.lowercased() }) else {
                if keep {
                    merged.append(field)
                } else {
                    changes.append(Self.change("field '\(field.name)'", field.value, nil, secret: field.hidden))
                }
                continue
            }
            let offered = remaining.remove(at: index)
            var updated = field
            if offered.value != field.value && (!keep || !(offered.value ?? "").isEmpty) {
                updated.value = offered.value
                changes.append(Self.change("field '\(field.name)'", field.value, offered.value,
                                           secret: field.hidden || offered.hidden))
            }
            updated.hidden = keep ? field.hidden || offered.hidden : offered.hidden
            merged.append(updated)
        }
        for field in remaining {
            merged.append(field)
            changes.append(Self.change("field '\(field.name)'", nil, field.value, secret: field.hidden))
        }
        if merged != old { result.fields = merged.isEmpty ? nil : merged }
    }

    static func change(_ field: String, _ old: String?, _ new: String?, secret: Bool) -> ImportReport.Change {
        func shown(_ value: String?) -> String? {
            guard let value, !value.isEmpty else { return nil }
            return secret ? ImportReport.Change.masked : value
        }
        return .init(field: field, old: shown(old), new: shown(new))
    }
}
