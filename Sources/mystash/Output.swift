import Foundation
import MyStashKit

/// Data on stdout: JSON for pipes that ask for it, an aligned table for people.
enum Output {
    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
    }

    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Columns padded to their widest cell; the header is bold on a terminal.
    static func table(_ header: [String], _ rows: [[String]], empty: String) {
        guard !rows.isEmpty else {
            Terminal.printError(empty)
            return
        }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func format(_ cells: [String]) -> String {
            zip(cells, widths).enumerated().map { index, pair in
                index == cells.count - 1 ? pair.0 : pair.0.padding(toLength: pair.1, withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        let top = format(header)
        line(Terminal.stdoutIsTerminal ? "\u{1B}[1m\(top)\u{1B}[0m" : top)
        rows.forEach { line(format($0)) }
    }

    static func date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: date)
    }

    /// A cell for a table: one line, at most `width` characters.
    static func cell(_ text: String?, width: Int = 40) -> String {
        let flat = (text ?? "").replacingOccurrences(of: "\n", with: " ")
        return flat.count > width ? String(flat.prefix(width - 1)) + "…" : flat
    }
}

