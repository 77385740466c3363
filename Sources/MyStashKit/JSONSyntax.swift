import Foundation

/// Finds where a JSON text (RFC 8259) first breaks the grammar, so an import can name the
/// line and column: Foundation's decoders say only that the data is not valid JSON.
///
/// It walks the bytes once with a stack of open containers, never recursing, so a file
/// nested a million deep is read like any other.
enum JSONSyntax {
    /// Where the text breaks, lines and columns counted from 1 (a column is a character),
    /// and what the grammar expected there.
    struct Problem: Equatable, CustomStringConvertible {
        var line: Int
        var column: Int
        var expected: String

        var description: String { "line \(line), column \(column): expected \(expected)" }
    }

    /// The first place `data` is not JSON; nil when it is.
    static func firstProblem(in data: Data) -> Problem? {
        let bytes = [UInt8](data)
        var index = 0
        var open: [UInt8] = []  // `{` or `[` of each container not closed yet
        enum Next { case value, valueOrClose, key, afterValue }
        var next = Next.value

        func problem(_ expected: String) -> Problem { position(of: index, in: bytes, expected: expected) }
        func skipSpace() { while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 } }
        func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        while true {
            skipSpace()
            switch next {
            case .valueOrClose where take(UInt8(ascii: "]")):
                open.removeLast()
                next = .afterValue
            case .value, .valueOrClose:
                guard index < bytes.count else { return problem("a value") }
                switch bytes[index] {
                case UInt8(ascii: "{"):
                    index += 1
                    skipSpace()
                    if take(UInt8(ascii: "}")) {
                        next = .afterValue
                    } else {
                        open.append(UInt8(ascii: "{"))
                        next = .key
                    }
                case UInt8(ascii: "["):
                    index += 1
                    open.append(UInt8(ascii: "["))
                    next = .valueOrClose
                case UInt8(ascii: "\""):
                    guard let end = stringEnd(bytes, from: index) else { return problem("a closed string") }
                    index = end
                    next = .afterValue
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    guard let end = numberEnd(bytes, from: index) else { return problem("a number") }
                    index = end
                    next = .afterValue
                default:
                    guard let word = ["true", "false", "null"].first(where: { bytes[index...].starts(with: $0.utf8) })
                    else { return problem("a value") }
                    index += word.utf8.count
                    next = .afterValue
                }
            case .key:
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    return problem("a name in quotes")
                }
                guard let end = stringEnd(bytes, from: index) else { return problem("a closed string") }
                index = end
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return problem("':'") }
                next = .value
            case .afterValue:
                guard let container = open.last else {
                    return index == bytes.count ? nil : problem("the end of the file")
                }
                let close = container == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if take(UInt8(ascii: ",")) {
                    next = container == UInt8(ascii: "{") ? .key : .value
                } else if take(close) {
                    open.removeLast()
                } else {
                    return problem("',' or '\(Character(Unicode.Scalar(close)))'")
                }
            }
        }
    }

    /// The index after the string starting at `start` (a quote), or nil when it is not one.
    private static func stringEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""): return index + 1
            case UInt8(ascii: "\\"):
                guard index + 1 < bytes.count else { return nil }
                if bytes[index + 1] == UInt8(ascii: "u") {
                    let hex = bytes[min(index + 2, bytes.count)..<min(index + 6, bytes.count)]
                    let isHex = hex.allSatisfy { Character(Unicode.Scalar($0)).isHexDigit }
                    guard hex.count == 4, isHex else { return nil }
                    index += 6
                } else {
                    guard "\"\\/bfnrt".utf8.contains(bytes[index + 1]) else { return nil }
                    index += 2
                }
            case 0..<0x20: return nil
            default: index += 1
            }
        }
        return nil
    }

    /// The index after the number starting at `start`, or nil when it is not one.
    private static func numberEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        func digits() -> Int {
            let first = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - first
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let leadingZero = index < bytes.count && bytes[index] == UInt8(ascii: "0")
        let whole = digits()
        guard whole > 0, !(leadingZero && whole > 1) else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, "eE".utf8.contains(bytes[index]) {
            index += 1
            if index < bytes.count, "+-".utf8.contains(bytes[index]) { index += 1 }
            guard digits() > 0 else { return nil }
        }
        return index
    }

    /// The line and column of byte `offset`, counting characters (not UTF-8 continuation bytes).
    private static func position(of offset: Int, in bytes: [UInt8], expected: String) -> Problem {
        var line = 1
        var column = 1
        for byte in bytes[..<min(offset, bytes.count)] {
            if byte == 0x0A {
                (line, column) = (line + 1, 1)
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return Problem(line: line, column: column, expected: expected)
    }
}
