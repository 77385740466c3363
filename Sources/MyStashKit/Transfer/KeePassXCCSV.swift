import Foundation

/// KeePassXC's CSV export (`keepassxc-cli export -f csv`).
extension KeePassXCReader {
    static func readCSV(_ data: Data) throws -> ImportSource {
        var source = ImportSource()
        var text = String(decoding: data, as: UTF8.self)
        if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        // A file re-saved on Windows ends its lines, also those inside quoted notes, with CRLF.
        text = text.replacingOccurrences(of: "\r\n", with: "\n")
        let rows = CSV.parse(text)
        guard let header = rows.first?.map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }),
            let title = header.firstIndex(of: "title"), let password = header.firstIndex(of: "password")
        else {
            throw source.invalid(.keepassxcCSV, "expected a header with \"Title\" and \"Password\" columns")
        }
        func column(_ name: String) -> Int? { header.firstIndex(of: name) }
        let columns = (
            group: column("group"), user: column("username"), url: column("url"), notes: column("notes"),
            totp: column("totp"), modified: column("last modified"), created: column("created")
        )
        let dates = ExportDocument.Dates()
        for (number, row) in rows.dropFirst().enumerated() {
            func value(_ index: Int?) -> String? {
                index.flatMap { $0 < row.count ? row[$0] : nil }.flatMap { $0.isEmpty ? nil : $0 }
            }
            let name = value(title) ?? ""
            if row.count < header.count {
                // A row cut short or hand-edited: what it lacks is read as empty, and said.
                source.warnings.append(.init(kind: "entry", title: name.isEmpty ? "row \(number + 2)" : name,
                    reason: "row \(number + 2) has \(row.count) of the header's \(header.count) columns; "
                        + "the missing ones were read as empty"))
            }
            let path = value(columns.group).map(groupPath) ?? (category: nil, inRecycleBin: false)
            if path.inRecycleBin {
                source.skipped.append(
                    .init(kind: "entry", title: name.isEmpty ? "row \(number + 2)" : name, reason: "in the recycle bin")
                )
                continue
            }
            var entry = ExportDocument.Entry(
                name: name, userId: value(columns.user), password: value(password) ?? "",
                url: value(columns.url), notes: value(columns.notes), category: path.category,
                createdAt: value(columns.created).flatMap(dates.date),
                updatedAt: value(columns.modified).flatMap(dates.date))
            addTOTP(value(columns.totp), to: &entry, source: &source)
            source.document.passwords.append(entry)
        }
        KeePassReferences.resolve(
            in: &source, identifiers: [String?](repeating: nil, count: source.document.passwords.count))
        return source
    }
}
