import Foundation

/// A CSV export: its text, and what it could not carry (CSV has no column for it), in words.
public struct CSVExport {
    public var text: String
    /// Such as "3 custom fields of 2 entries"; empty when nothing was left out.
    public var leftOut: [String]
}

extension Vault.Transfer {
    static let csvHeader = ["kind", "name", "user", "password", "url", "notes", "category", "totp", "more_urls",
                            "favorite", "folder", "created", "updated"]

    /// Entries, notes and categories as CSV (plaintext): `kind,name,user,password,url,notes,category`,
    /// given to `output` a line at a time. Custom fields, history and more URLs are only in
    /// `mystash-json`; what was left out is returned, in words. The vault is read twice, a batch at
    /// a time: once to check every value, then to write, so memory does not grow with it and
    /// nothing is written when a value cannot be.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming every item and column holding a control
    ///   character (``CSV/hasControlCharacter(_:)``): CSV has no escape for one, so it would
    ///   reach whatever shows the file raw; `mystash-json` escapes it.
    public func exportCSV(progress: Progress? = nil, to output: ([UInt8]) throws -> Void) throws -> [String] {
        try vault.awaitVerification()
        var counter = try Vault.ExportProgress(vault: vault, progress: progress, passes: 2)
        var problems: [String] = []
        var leftOut = LeftOut()
        try forEachCSVBatch(&counter) { rows, entries in
            for entry in entries { leftOut.count(entry) }
            problems += rows.flatMap { row in
                let item = "\(row[0] == "password" ? "entry" : row[0]) '\(row[1])'"
                return zip(Self.csvHeader, row).dropFirst()
                    .filter { $0.0 != "more_urls" && CSV.hasControlCharacter($0.1) }
                    .map { "\(item): \($0.0)" }
            }
        }
        guard problems.isEmpty else { throw VaultError.unexportable(problems: problems) }
        try output(Array((CSV.line(Self.csvHeader) + "\n").utf8))
        try forEachCSVBatch(&counter) { rows, _ in
            try output(Array(rows.map { CSV.line($0) + "\n" }.joined().utf8))
        }
        return leftOut.words
    }

    /// ``exportCSV(progress:to:)`` whole in memory.
    public func exportCSV(progress: Progress? = nil) throws -> CSVExport {
        var text: [UInt8] = []
        let leftOut = try exportCSV(progress: progress) { text += $0 }
        return CSVExport(text: String(decoding: text, as: UTF8.self), leftOut: leftOut)
    }

    /// The CSV rows of the entries, then the notes, then the categories, a batch at a time,
    /// with each batch's entries.
    private func forEachCSVBatch(
        _ counter: inout Vault.ExportProgress, _ body: ([[String]], [ExportDocument.Entry]) throws -> Void
    ) throws {
        let dates = ExportDocument.Dates()
        func date(_ value: Date?) -> String { value.map { dates.text($0) } ?? "" }
        try vault.forEachExportedEntryBatch(&counter) { entries in
            try body(entries.map {
                ["password", $0.name, $0.userId ?? "", $0.password, $0.url ?? "", $0.notes ?? "", $0.category ?? "",
                 $0.totp ?? "", ($0.moreURLs ?? []).joined(separator: "\n"), $0.favorite == true ? "yes" : "", "",
                 date($0.createdAt), date($0.updatedAt)]
            }, entries)
        }
        try vault.forEachExportedNoteBatch(&counter) { notes in
            try body(notes.map {
                ["note", $0.title, "", "", "", $0.text ?? "", "", "", "", "", $0.folder ?? "", date($0.createdAt),
                 date($0.updatedAt)]
            }, [])
        }
        try body(try vault.exportedCategories().map {
            ["category", $0] + Array(repeating: "", count: Self.csvHeader.count - 2)
        }, [])
    }

    /// What has no column in CSV, counted: named, never dropped without a word.
    private struct LeftOut {
        private var counts: [(noun: String, total: Int, entries: Int)] = [
            ("custom field", 0, 0), ("earlier password", 0, 0), ("attachment", 0, 0),
        ]

        mutating func count(_ entry: ExportDocument.Entry) {
            for (index, held) in [entry.fields?.count, entry.history?.count, entry.attachments?.count].enumerated() {
                guard let held, held > 0 else { continue }
                counts[index].total += held
                counts[index].entries += 1
            }
        }

        var words: [String] {
            counts.filter { $0.total > 0 }.map {
                "\($0.total) \($0.noun)\($0.total == 1 ? "" : "s") of \($0.entries) "
                    + "entr\($0.entries == 1 ? "y" : "ies")"
            }
        }
    }
}
