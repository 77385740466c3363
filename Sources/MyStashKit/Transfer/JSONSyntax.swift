import Foundation

/// Where a JSON text stops being JSON (RFC 8259), for the message that refuses it: `JSONDecoder`
/// says only "The given data was not valid JSON.", with no place, and reads a string's escapes
/// only when it decodes that string, so a reader that skips a bad value would not see them.
enum JSONSyntax {
    /// "not JSON at line 3, column 7: expected ',' or '}'", or nil when `data` is JSON.
    /// One pass over the bytes, nothing built.
    static func error(in data: Data) -> String? {
        data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let error = firstError(in: bytes) else { return nil }
            let place = position(of: error.offset, in: bytes)
            return "not JSON at line \(place.line), column \(place.column): expected \(error.expected)"
        }
    }

    // MARK: - Members, each decoded alone

    /// The members of the root object of a text ``error(in:)`` passed: each name with the range
    /// of `data` its value takes, so that each can be decoded alone. `JSONDecoder` maps all the
    /// text it is given before it decodes any of it, a map twice the size of the text. Nil when
    /// the root is not an object.
    static func rootMembers(of data: Data) -> [(name: String, value: Range<Data.Index>)]? {
        data.withUnsafeBytes { raw in
            var scanner = Scanner(bytes: raw.bindMemory(to: UInt8.self))
            if scanner.bytes.starts(with: [0xEF, 0xBB, 0xBF]) { scanner.position = 3 }
            scanner.skipWhitespace()
            guard scanner.peek() == UInt8(ascii: "{") else { return nil }
            scanner.position += 1
            var members: [(name: String, value: Range<Data.Index>)] = []
            while true {
                scanner.skipWhitespace()
                guard scanner.peek() == UInt8(ascii: "\"") else { return members }  // the closing brace
                let nameStart = scanner.position
                _ = scanner.string()
                let quoted = data[data.startIndex + nameStart..<data.startIndex + scanner.position]
                // Names with escapes are rare: the decoder reads those.
                let name =
                    quoted.contains(UInt8(ascii: "\\"))
                    ? (try? JSONDecoder().decode(String.self, from: quoted)) ?? ""
                    : String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self)
                scanner.skipWhitespace()
                scanner.position += 1  // the colon
                scanner.skipWhitespace()
                let valueStart = scanner.position
                scanner.skipValue()
                members.append((name, data.startIndex + valueStart..<data.startIndex + scanner.position))
                scanner.skipWhitespace()
                if scanner.peek() == UInt8(ascii: ",") { scanner.position += 1 }
            }
        }
    }

    /// The ranges of `data` the elements of the array at `range` take, or nil when no array is there.
    static func elements(ofArrayAt range: Range<Data.Index>, in data: Data) -> [Range<Data.Index>]? {
        data[range].withUnsafeBytes { raw in
            var scanner = Scanner(bytes: raw.bindMemory(to: UInt8.self))
            guard scanner.peek() == UInt8(ascii: "[") else { return nil }
            scanner.position += 1
            var elements: [Range<Data.Index>] = []
            while true {
                scanner.skipWhitespace()
                guard let byte = scanner.peek(), byte != UInt8(ascii: "]") else { return elements }
                let start = scanner.position
                scanner.skipValue()
                elements.append(range.lowerBound + start..<range.lowerBound + scanner.position)
                scanner.skipWhitespace()
                if scanner.peek() == UInt8(ascii: ",") { scanner.position += 1 }
            }
        }
    }

    /// The byte offset of the first syntax error and what was expected there; nil for valid JSON.
    static func firstError(in bytes: UnsafeBufferPointer<UInt8>) -> (offset: Int, expected: String)? {
        enum Expecting { case value, key, afterValue }
        var scanner = Scanner(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { scanner.position = 3 }  // a byte order mark
        var open: [UInt8] = []  // "{" and "[" not closed yet; a stack, so no depth recurses
        var expecting = Expecting.value
        while true {
            scanner.skipWhitespace()
            switch expecting {
            case .value:
                guard let byte = scanner.peek() else { return (scanner.position, "a value") }
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    scanner.position += 1
                    scanner.skipWhitespace()
                    let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                    if scanner.peek() == close {
                        scanner.position += 1
                        expecting = .afterValue
                    } else {
                        open.append(byte)
                        expecting = byte == UInt8(ascii: "{") ? .key : .value
                    }
                    continue
                case UInt8(ascii: "\""):
                    if let problem = scanner.string() { return problem }
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    if let problem = scanner.number() { return problem }
                default:
                    guard scanner.literal("true") || scanner.literal("false") || scanner.literal("null") else {
                        return (scanner.position, "a value")
                    }
                }
                expecting = .afterValue
            case .key:
                guard scanner.peek() == UInt8(ascii: "\"") else { return (scanner.position, "a quoted name") }
                if let problem = scanner.string() { return problem }
                scanner.skipWhitespace()
                guard scanner.peek() == UInt8(ascii: ":") else { return (scanner.position, "':'") }
                scanner.position += 1
                expecting = .value
            case .afterValue:
                guard let innermost = open.last else {
                    return scanner.peek() == nil ? nil : (scanner.position, "the end of the text")
                }
                let isObject = innermost == UInt8(ascii: "{")
                let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                switch scanner.peek() {
                case UInt8(ascii: ","):
                    scanner.position += 1
                    expecting = isObject ? .key : .value
                case close:
                    scanner.position += 1
                    open.removeLast()
                default:
                    return (scanner.position, isObject ? "',' or '}'" : "',' or ']'")
                }
            }
        }
    }

    /// Line and column (in characters) of a byte offset, both from 1.
    static func position(of offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (line: Int, column: Int) {
        var (line, column) = (1, 1)
        for byte in bytes[..<min(offset, bytes.count)] {
            if byte == UInt8(ascii: "\n") {
                (line, column) = (line + 1, 1)
            } else if byte & 0xC0 != 0x80 {  // not a continuation byte: a new character
                column += 1
            }
        }
        return (line, column)
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipWhitespace() {
            while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
        }

        /// Past the value that starts here, in a text known to be JSON.
        mutating func skipValue() {
            var depth = 0
            repeat {
                skipWhitespace()
                guard let byte = peek() else { return }
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    position += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    position += 1
                case UInt8(ascii: "\""):
                    _ = string()
                case UInt8(ascii: ","), UInt8(ascii: ":"):
                    position += 1
                default:  // a number, true, false or null
                    while let byte = peek(), !Self.endsScalar(byte) { position += 1 }
                }
            } while depth > 0
        }

        private static func isEscape(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"), UInt8(ascii: "u"):
                return true
            default: return false
            }
        }

        private static func endsScalar(_ byte: UInt8) -> Bool {
            switch byte {
            case 0x20, 0x0A, 0x0D, 0x09, UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"): return true
            default: return false
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let length = word.utf8CodeUnitCount
            guard position + length <= bytes.count else { return false }
            for index in 0..<length where bytes[position + index] != word.utf8Start[index] { return false }
            position += length
            return true
        }

        /// A string from its opening quote; nil when well-formed.
        mutating func string() -> (offset: Int, expected: String)? {
            position += 1
            while let byte = peek() {
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    return nil
                case UInt8(ascii: "\\"):
                    position += 1
                    guard let escaped = peek(), Self.isEscape(escaped) else {
                        return (position, "an escape such as \\n or \\u0041")
                    }
                    position += 1
                    if escaped == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            guard let digit = peek(), digit.isHexDigit else { return (position, "a hex digit") }
                            position += 1
                        }
                    }
                case 0..<0x20:
                    return (position, "'\"' or text without control characters (escape them)")
                default:
                    position += 1
                }
            }
            return (position, "'\"' closing the string")
        }

        /// A number; nil when well-formed.
        mutating func number() -> (offset: Int, expected: String)? {
            if peek() == UInt8(ascii: "-") { position += 1 }
            if peek() == UInt8(ascii: "0") {
                position += 1
            } else if !digits() {
                return (position, "a digit")
            }
            if peek() == UInt8(ascii: ".") {
                position += 1
                guard digits() else { return (position, "a digit") }
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                position += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
                guard digits() else { return (position, "a digit") }
            }
            return nil
        }

        private mutating func digits() -> Bool {
            let start = position
            while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
            return position > start
        }
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
