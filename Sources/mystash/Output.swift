import Foundation
import MyStashKit
import TerminalUI
#if canImport(Glibc)
import Glibc
#endif

/// Data on stdout: JSON for pipes that ask for it, an aligned table for people.
enum Output {
    static func json<T: Encodable>(_ value: T) throws {
        write(try jsonEncoder().encode(value) + Data("\n".utf8))
    }

    /// An array as ``json(_:)`` prints it, written 500 elements at a time: the encoder would
    /// otherwise hold a tree of every element (75 MB for a list of 100,000 entries), and one
    /// call of it per element cost a twentieth of a list.
    static func json<T: Encodable>(_ values: [T]) throws {
        guard !values.isEmpty else { return write(try jsonEncoder().encode(values) + Data("\n".utf8)) }
        let encoder = jsonEncoder()
        write("[\n")
        for start in stride(from: 0, to: values.count, by: 500) {
            let end = min(start + 500, values.count)
            var pending = try JSONArrayChunk.elements(Array(values[start..<end]), encoder: encoder, depth: 0)
            pending.append(contentsOf: (end == values.count ? "\n]\n" : ",\n").utf8)
            pending.withUnsafeBytes(write)
        }
    }

    private static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    /// Writes a line of data; stored values in it are neutralised (``safe(_:keepingLines:)``).
    static func line(_ text: String) {
        write(safe(text, keepingLines: true) + "\n")
    }

    /// Writes text as it is (our own escape sequences, or a value a script asked for).
    static func write(_ text: String) {
        write(Data(text.utf8))
    }

    /// The status a command ends with when the reader of its output goes away: 0, unless what
    /// it was printing is a failure to report (`check`'s problems), which a pipe into `head`
    /// must not turn into success.
    nonisolated(unsafe) static var brokenPipeStatus: Int32 = 0

    /// Writes to stdout; when the reader has gone (`| head -1`), ends quietly with
    /// ``brokenPipeStatus``, whether SIGPIPE is ignored or not (main ignores it so this path is
    /// the only one).
    static func write(_ data: Data) {
        data.withUnsafeBytes(write)
    }

    static func write(_ buffer: UnsafeRawBufferPointer) {
        guard let error = writeAll(buffer, to: STDOUT_FILENO) else { return }
        if error == EPIPE { exit(brokenPipeStatus) }
        Terminal.printError("Error: could not write the output: \(String(cString: strerror(error)))")
        exit(74)
    }

    /// Writes all of `buffer` to `descriptor`; the `errno` of a write that failed, else nil.
    static func writeAll(_ buffer: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
        guard let base = buffer.baseAddress else { return nil }
        var offset = 0
        while offset < buffer.count {
            let written = Glibc.write(descriptor, base + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                // A descriptor another program left non-blocking: wait until it takes more.
                if errno == EAGAIN {
                    var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    if poll(&ready, 1, -1) >= 0 || errno == EINTR { continue }
                }
                return errno
            }
            offset += written
        }
        return nil
    }

    /// `text` with control characters and bidirectional overrides shown as `\x1B`-style
    /// escapes, so a stored value cannot drive the terminal; newlines and tabs stay when
    /// `keepingLines`.
    static func safe(_ text: String, keepingLines: Bool = false) -> String {
        // Printable ASCII, nearly every cell of a list, holds nothing to neutralise.
        if TextWidth.isPrintableASCII(text) { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            let value = scalar.value
            let isControl = value < 0x20 || (0x7F...0x9F).contains(value)
            let isOverride = (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            if keepingLines && (scalar == "\n" || scalar == "\t") {
                result.unicodeScalars.append(scalar)
            } else if isControl {
                result += String(format: "\\x%02X", value)
            } else if isOverride {
                result += String(format: "\\u%04X", value)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A size as people read it: `512 bytes`, `1.5 KiB`, `200.0 MiB`.
    static func byteCount(_ bytes: Int64) -> String {
        guard bytes >= 1024 else { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
        var value = Double(bytes) / 1024
        for unit in ["KiB", "MiB", "GiB"] {
            if value < 1024 || unit == "GiB" { return String(format: "%.1f", value) + " " + unit }
            value /= 1024
        }
        return "\(bytes) bytes"
    }

    /// Columns padded to their widest cell, measured in terminal columns (a CJK character or
    /// an emoji takes two); the header is bold on a terminal.
    static func table(_ header: [String], _ rows: [[String]], empty: String) {
        formattedTable(header, rows, empty: empty).write()
    }

    /// A table as ``table(_:_:empty:)`` prints it, made before it may be printed: a list
    /// formats it while the vault is still being checked, and writes it once the check passed.
    struct FormattedTable {
        fileprivate let bytes: [UInt8]?
        fileprivate let empty: String

        func write() {
            guard let bytes else { return Terminal.printError(empty) }
            bytes.withUnsafeBytes(Output.write)
        }
    }

    static func formattedTable(_ header: [String], _ rows: [[String]], empty: String) -> FormattedTable {
        guard !rows.isEmpty else { return FormattedTable(bytes: nil, empty: empty) }
        let widths = columnWidths(header, rows)
        let top = line(header, widths)
        var output = Array((Terminal.stdoutIsTerminal ? "\u{1B}[1m\(top)\u{1B}[0m\n" : top + "\n").utf8)
        // Exact for printable ASCII: every cell but the last padded to its column and two spaces.
        output.reserveCapacity(output.count + rows.count * (widths.reduce(0, +) + 2 * widths.count + 1))
        for row in rows {
            appendLine(row, widths, measuring: measured, to: &output)
            output.append(UInt8(ascii: "\n"))
        }
        return FormattedTable(bytes: output, empty: empty)
    }

    /// The header and rows as lines, columns padded to their widest cell, stored values
    /// neutralised (``safe(_:keepingLines:)``).
    static func aligned(_ header: [String], _ rows: [[String]]) -> [String] {
        let widths = columnWidths(header, rows)
        return [line(header, widths)] + rows.map { line($0, widths, measuring: measured) }
    }

    /// A stored value as a cell prints it (``safe(_:keepingLines:)``), and the terminal columns
    /// it takes. Printable ASCII, nearly every cell, is its own safe text, a column a byte:
    /// measured again where it is printed rather than kept (a list of 100,000 entries has half
    /// a million cells).
    private static func measured(_ cell: String) -> (text: String, width: Int) {
        if TextWidth.isPrintableASCII(cell) { return (cell, cell.utf8.count) }
        let text = safe(cell)
        return (text, TextWidth.columns(of: text))
    }

    /// Each column's widest cell, made safe, in terminal columns.
    private static func columnWidths(_ header: [String], _ rows: [[String]]) -> [Int] {
        var widths = header.map { TextWidth.columns(of: safe($0)) }
        for cells in rows {
            for (column, cell) in cells.prefix(widths.count).enumerated() {
                widths[column] = max(widths[column], measured(cell).width)
            }
        }
        return widths
    }

    /// One row, each cell as `measuring` makes it, all but the last padded to its column's width
    /// and two spaces; no spaces after the last cell that is not empty.
    private static func appendLine(
        _ cells: [String], _ widths: [Int],
        measuring: (String) -> (text: String, width: Int) = { ($0, TextWidth.columns(of: $0)) },
        to output: inout [UInt8]
    ) {
        let count = min(cells.count, widths.count)
        var padding = 0
        for (column, cell) in cells.prefix(count).enumerated() {
            var (text, width) = measuring(cell)
            if !text.isEmpty {
                output += repeatElement(UInt8(ascii: " "), count: padding)
                padding = 0
                // From the contiguous bytes: appending the UTF-8 view went byte by byte.
                text.withUTF8 { output.append(contentsOf: $0) }
            }
            padding += max(0, widths[column] + 2 - width)
        }
    }

    private static func line(
        _ cells: [String], _ widths: [Int],
        measuring: (String) -> (text: String, width: Int) = { ($0, TextWidth.columns(of: $0)) }
    ) -> String {
        var bytes: [UInt8] = []
        appendLine(cells, widths, measuring: measuring, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` (printable: see ``safe(_:keepingLines:)``) with spaces after it up to `width`
    /// terminal columns.
    static func padded(_ text: String, to width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - TextWidth.columns(of: text)))
    }

    /// `yyyy-MM-dd HH:mm` in local time, from the C library: a DateFormatter loads ICU's
    /// calendar and zone data, a few milliseconds of every `show` for one date.
    static func date(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "?" }
        func two(_ number: Int32) -> String { number < 10 ? "0\(number)" : "\(number)" }
        let year = Int(parts.tm_year) + 1900
        let yearText = String(repeating: "0", count: max(0, 4 - String(abs(year)).count)) + String(abs(year))
        return (year < 0 ? "-" : "") + yearText + "-" + two(parts.tm_mon + 1) + "-" + two(parts.tm_mday)
            + " " + two(parts.tm_hour) + ":" + two(parts.tm_min)
    }

    /// A cell for a table: one line, at most `width` terminal columns.
    static func cell(_ text: String?, width: Int = 40) -> String {
        // Looked for byte-wise: `contains` of a Character breaks the text into graphemes.
        var text = text ?? ""
        let hasNewline = text.withUTF8 { $0.contains(UInt8(ascii: "\n")) }
        let flat = hasNewline ? text.replacingOccurrences(of: "\n", with: " ") : text
        guard TextWidth.columns(of: flat) > width else { return flat }
        var cut = ""
        var used = 0
        for character in flat {
            used += TextWidth.columns(of: character)
            if used > width - 1 { break }
            cut.append(character)
        }
        return cut + "…"
    }
}

