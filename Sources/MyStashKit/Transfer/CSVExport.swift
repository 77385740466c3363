import Foundation

/// A CSV export: its text, and what it could not carry (CSV has no column for it), in words.
public struct CSVExport {
    public var text: String
    /// Such as "3 custom fields of 2 entries"; empty when nothing was left out.
    public var leftOut: [String]
}

extension Vault.Transfer {
    /// Entries, notes and categories as CSV (plaintext): `kind,name,user,password,url,notes,category`.
    /// Custom fields, history and more URLs are only in `mystash-json`.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming every item and column holding a control
    ///   character (``CSV/hasControlCharacter(_:)``): CSV has no escape for one, so it would
    ///   reach whatever shows the file raw; `mystash-json` escapes it.
    public func exportCSV(progress: Progress? = nil) throws -> CSVExport {
        try vault.awaitVerification()
        let document = try vault.exportDocument(progress: progress)
        let dates = ExportDocument.Dates()
        func date(_ value: Date?) -> String { value.map { dates.text($0) } ?? "" }
        let header = ["kind", "name", "user", "password", "url", "notes", "category", "totp", "more_urls", "favorite",
                      "folder", "created", "updated"]
        var rows: [[String]] = document.passwords.map {
            ["password", $0.name, $0.userId ?? "", $0.password, $0.url ?? "", $0.notes ?? "", $0.category ?? "",
             $0.totp ?? "", ($0.moreURLs ?? []).joined(separator: "\n"), $0.favorite == true ? "yes" : "", "",
             date($0.createdAt), date($0.updatedAt)]
        }
        rows += document.notes.map {
            ["note", $0.title, "", "", "", $0.text ?? "", "", "", "", "", $0.folder ?? "", date($0.createdAt),
             date($0.updatedAt)]
        }
        rows += document.categories.map { ["category", $0] + Array(repeating: "", count: header.count - 2) }
        let problems = rows.flatMap { row in
            let item = "\(row[0] == "password" ? "entry" : row[0]) '\(row[1])'"
            return zip(header, row).dropFirst().filter { $0.0 != "more_urls" && CSV.hasControlCharacter($0.1) }
                .map { "\(item): \($0.0)" }
        }
        guard problems.isEmpty else {
            throw VaultError.unexportable(problems: problems)
        }
        // What has no column: named, never dropped without a word.
        func leftOut(_ noun: String, _ count: (ExportDocument.Entry) -> Int) -> String? {
            let holding = document.passwords.map(count).filter { $0 > 0 }
            guard !holding.isEmpty else { return nil }
            let total = holding.reduce(0, +)
            return "\(total) \(noun)\(total == 1 ? "" : "s") of \(holding.count) "
                + "entr\(holding.count == 1 ? "y" : "ies")"
        }
        let leftOut = [
            leftOut("custom field") { $0.fields?.count ?? 0 },
            leftOut("earlier password") { $0.history?.count ?? 0 },
            leftOut("attachment") { $0.attachments?.count ?? 0 },
        ].compactMap { $0 }
        return CSVExport(text: ([header] + rows).map(CSV.line).joined(separator: "\n") + "\n", leftOut: leftOut)
    }
}
