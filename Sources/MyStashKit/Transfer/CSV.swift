/// RFC 4180 CSV: fields separated by commas, optionally quoted with `"` (doubled inside),
/// quoted fields may span lines.
enum CSV {
    static func parse(_ text: String) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var iterator = text.makeIterator()
        var pending: Character?
        func next() -> Character? {
            if let character = pending { pending = nil; return character }
            return iterator.next()
        }
        while let character = next() {
            if quoted {
                if character == "\"" {
                    if let following = next() {
                        if following == "\"" { field.append("\"") } else { quoted = false; pending = following }
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
                continue
            }
            switch character {
            case "\"" where field.isEmpty: quoted = true
            case ",": row.append(field); field = ""
            case "\n", "\r\n", "\r":
                row.append(field)
                rows.append(row)
                row = []
                field = ""
            default: field.append(character)
            }
        }
        if !field.isEmpty || !row.isEmpty {
            row.append(field)
            rows.append(row)
        }
        return rows.filter { $0 != [""] }
    }

    /// Whether `field` holds a control character other than a tab or a line end (C0, DEL, C1).
    /// Quoting keeps a field's commas and lines in it, but an ESC passes through untouched to
    /// the terminal or program that shows the file.
    static func hasControlCharacter(_ field: String) -> Bool {
        field.unicodeScalars.contains {
            ($0.value < 0x20 && !["\t", "\n", "\r"].contains($0)) || (0x7F...0x9F).contains($0.value)
        }
    }

    static func line(_ fields: [String]) -> String {
        fields.map { field in
            field.contains(where: { $0 == "," || $0 == "\"" || $0.isNewline })
                ? "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : field
        }.joined(separator: ",")
    }
}
