import Foundation
import StashCrypto

/// Bytes that do not follow SSH's encoding: what was expected where. Never holds key material.
struct SSHFormatError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) { self.description = description }
}

/// Reads SSH's wire encoding (RFC 4251, section 5) from bytes it does not own: every length is
/// checked against what is left, so a truncated or lying message is an error, never a read past
/// the end. Slices point into the same bytes: a secret read here is copied only into
/// ``SecretBytes``.
struct SSHReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Bytes already read, again.
    func bytes(in range: Range<Int>) -> UnsafeRawBufferPointer {
        precondition(range.upperBound <= offset, "only bytes already read")
        return UnsafeRawBufferPointer(rebasing: bytes[range])
    }

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    mutating func byte() throws -> UInt8 {
        guard remaining >= 1 else { throw SSHFormatError("it ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint32() throws -> UInt32 {
        guard remaining >= 4 else { throw SSHFormatError("it ends early") }
        defer { offset += 4 }
        return (0..<4).reduce(0) { $0 << 8 | UInt32(bytes[offset + $1]) }
    }

    /// `count` bytes as they are.
    mutating func raw(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw SSHFormatError("it ends early") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// A length-prefixed string of bytes.
    mutating func string() throws -> UnsafeRawBufferPointer {
        let length = try uint32()
        guard Int(length) <= remaining else {
            throw SSHFormatError("a length of \(length) bytes goes past its end (\(remaining) left)")
        }
        return try raw(Int(length))
    }

    /// A string that holds a name (a key type, a cipher): ASCII, or it is refused.
    mutating func name() throws -> String {
        let bytes = try string()
        guard bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw SSHFormatError("a name holds bytes other than printable ASCII")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A string of free text (a key comment); bytes that are not UTF-8 become U+FFFD.
    mutating func text() throws -> String { String(decoding: try string(), as: UTF8.self) }

    /// A non-negative mpint as its big-endian magnitude, leading zeros removed.
    mutating func positiveInteger() throws -> UnsafeRawBufferPointer {
        let bytes = try string()
        if let first = bytes.first, first & 0x80 != 0 { throw SSHFormatError("a number is negative") }
        let start = bytes.firstIndex { $0 != 0 } ?? bytes.count
        return UnsafeRawBufferPointer(rebasing: bytes[start...])
    }
}

/// Writes SSH's wire encoding.
struct SSHWriter {
    private(set) var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    mutating func raw<Bytes: Collection<UInt8>>(_ value: Bytes) { bytes += value }

    mutating func string<Bytes: Collection<UInt8>>(_ value: Bytes) {
        uint32(UInt32(value.count))
        bytes += value
    }

    mutating func string(_ value: String) { string(Array(value.utf8)) }

    /// A non-negative number from its big-endian magnitude: a zero byte first when the top bit
    /// is set, so it does not read as negative.
    mutating func positiveInteger<Bytes: Collection<UInt8>>(_ magnitude: Bytes) {
        let trimmed = magnitude.drop { $0 == 0 }
        if let first = trimmed.first, first & 0x80 != 0 {
            uint32(UInt32(trimmed.count + 1))
            bytes.append(0)
            bytes += trimmed
        } else {
            string(trimmed)
        }
    }
}
