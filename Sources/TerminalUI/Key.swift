/// A key press read from the terminal.
public enum Key: Equatable, Sendable {
    case character(Character)
    /// Ctrl with a letter, as a lowercase letter (Ctrl-C is `.control("c")`).
    case control(Character)
    /// Alt (Meta) with a character, sent by terminals as ESC followed by it.
    case alt(Character)
    case enter, tab, backTab, backspace, escape, delete
    case up, down, left, right, home, end, pageUp, pageDown
    case function(Int)
}

/// Turns the bytes a terminal sends into keys: UTF-8 characters, control keys, and the
/// CSI/SS3 sequences of xterm, the Linux console, tmux and screen. Feeds may split a
/// sequence anywhere; what is incomplete waits for the next feed.
public struct KeyDecoder {
    private var pending: [UInt8] = []

    public init() {}

    /// True when the bytes so far end in a lone ESC, which is the Escape key only if
    /// nothing follows soon; call ``flushEscape()`` after a short wait.
    public var hasPendingEscape: Bool { pending == [0x1B] }

    /// Decodes what can be decoded; an incomplete tail is kept.
    public mutating func feed(_ bytes: [UInt8]) -> [Key] {
        pending += bytes
        var keys: [Key] = []
        var index = 0
        while index < pending.count {
            guard let (key, length) = Self.decode(pending, at: index) else { break }
            if let key { keys.append(key) }
            index += length
        }
        pending.removeFirst(index)
        return keys
    }

    /// Reports a lone pending ESC as the Escape key.
    public mutating func flushEscape() -> [Key] {
        guard hasPendingEscape else { return [] }
        pending.removeAll()
        return [.escape]
    }

    /// The key at `index` and how many bytes it took; nil when more bytes are needed.
    /// A nil key with a length skips bytes that mean nothing to us.
    static func decode(_ bytes: [UInt8], at index: Int) -> (Key?, Int)? {
        let byte = bytes[index]
        switch byte {
        case 0x1B:
            return decodeEscape(bytes, at: index)
        case 0x0D, 0x0A: return (.enter, 1)
        case 0x09: return (.tab, 1)
        case 0x7F, 0x08: return (.backspace, 1)
        case 0x00: return (nil, 1)
        case 0x01...0x1A: return (.control(Character(Unicode.Scalar(byte + 0x60))), 1)
        case 0x1C...0x1F: return (nil, 1)
        case 0x20..<0x7F: return (.character(Character(Unicode.Scalar(byte))), 1)
        default:
            return decodeUTF8(bytes, at: index)
        }
    }

    private static func decodeUTF8(_ bytes: [UInt8], at index: Int) -> (Key?, Int)? {
        let byte = bytes[index]
        let length: Int
        switch byte {
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return (nil, 1)  // a stray continuation or invalid byte
        }
        guard index + length <= bytes.count else {
            // Wait for the rest unless what arrived already breaks the sequence.
            let arrived = bytes[(index + 1)...]
            return arrived.allSatisfy({ $0 & 0xC0 == 0x80 }) ? nil : (nil, 1)
        }
        let slice = Array(bytes[index..<(index + length)])
        guard slice.dropFirst().allSatisfy({ $0 & 0xC0 == 0x80 }),
              let text = String(validating: slice, as: UTF8.self), let character = text.first else {
            return (nil, 1)
        }
        return (.character(character), length)
    }

    private static func decodeEscape(_ bytes: [UInt8], at index: Int) -> (Key?, Int)? {
        guard index + 1 < bytes.count else { return nil }
        let next = bytes[index + 1]
        switch next {
        case UInt8(ascii: "["):
            return decodeCSI(bytes, at: index)
        case UInt8(ascii: "O"):
            guard index + 2 < bytes.count else { return nil }
            let keys: [UInt8: Key] = [0x41: .up, 0x42: .down, 0x43: .right, 0x44: .left, 0x48: .home, 0x46: .end,
                                      0x50: .function(1), 0x51: .function(2), 0x52: .function(3), 0x53: .function(4)]
            return (keys[bytes[index + 2]], 3)
        case 0x1B:
            return (.escape, 1)
        case 0x20..<0x7F:
            return (.alt(Character(Unicode.Scalar(next))), 2)
        case 0x7F:
            return (.alt("\u{7F}"), 2)
        default:
            return (.escape, 1)
        }
    }

    /// ESC [ parameters final: arrows, Home/End, Page Up/Down, Delete, Shift-Tab, F-keys.
    /// Modifiers (`1;5A`) are read past and ignored.
    private static func decodeCSI(_ bytes: [UInt8], at index: Int) -> (Key?, Int)? {
        var end = index + 2
        while end < bytes.count, (0x30...0x3F).contains(bytes[end]) || (0x20...0x2F).contains(bytes[end]) { end += 1 }
        guard end < bytes.count else { return end - index > 16 ? (nil, end - index) : nil }
        let final = bytes[end]
        let parameters = String(decoding: bytes[(index + 2)..<end], as: UTF8.self)
        let length = end - index + 1
        switch final {
        case UInt8(ascii: "A"): return (.up, length)
        case UInt8(ascii: "B"): return (.down, length)
        case UInt8(ascii: "C"): return (.right, length)
        case UInt8(ascii: "D"): return (.left, length)
        case UInt8(ascii: "H"): return (.home, length)
        case UInt8(ascii: "F"): return (.end, length)
        case UInt8(ascii: "Z"): return (.backTab, length)
        case UInt8(ascii: "~"):
            let first = parameters.split(separator: ";").first.flatMap { Int($0) }
            let keys: [Int: Key] = [1: .home, 7: .home, 4: .end, 8: .end, 3: .delete, 5: .pageUp, 6: .pageDown,
                                    11: .function(1), 12: .function(2), 13: .function(3), 14: .function(4),
                                    15: .function(5)]
            return (first.flatMap { keys[$0] }, length)
        default:
            return (nil, length)
        }
    }
}
