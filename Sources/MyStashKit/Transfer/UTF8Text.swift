import Foundation

/// Text that comes from outside the vault: an import file, standard input, a decrypted pass
/// file, what an editor saved. Invalid UTF-8 is refused, naming where it is: decoded leniently,
/// each bad sequence would silently become U+FFFD, and a password would change without a word.
public enum UTF8Text {
    /// The bytes as text, or a ``VaultError`` of kind ``VaultError/Kind/invalidText`` naming
    /// `place` ("the file", "standard input") and the line and byte of the first invalid sequence.
    ///
    /// - Parameter replacingInvalid: accept the bytes anyway, each invalid sequence becoming U+FFFD.
    public static func decode<Bytes: Collection<UInt8>>(
        _ bytes: Bytes, place: String, replacingInvalid: Bool = false
    ) throws -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        if replacingInvalid { return String(decoding: bytes, as: UTF8.self) }
        let position = firstInvalidSequence(in: bytes)
        throw VaultError.notATextFile(place: place, line: position.line, byte: position.byte)

    }

    /// Whether `bytes` are UTF-8, checked a slice at a time: a 150 MB import file is not copied
    /// into a `String` (and back) just to learn that it is text.
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let sliceSize = 1 << 16
        var start = 0
        while start < bytes.count {
            var end = min(start + sliceSize, bytes.count)
            // Each slice ends before a byte that starts a character, so none is cut in two
            // (a run of continuation bytes that long is invalid either way).
            var backedUp = 0
            while end < bytes.count, bytes[end] & 0xC0 == 0x80, backedUp < 3 {
                end -= 1
                backedUp += 1
            }
            guard String(validating: bytes[start..<end], as: UTF8.self) != nil else { return false }
            start = end
        }
        return true
    }

    /// Where the first invalid sequence starts: its line and its byte in that line, from 1.
    static func firstInvalidSequence<Bytes: Collection<UInt8>>(in bytes: Bytes) -> (line: Int, byte: Int) {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var (line, byte) = (1, 1)
        while case .valid(let scalar) = parser.parseScalar(from: &iterator) {
            if scalar.count == 1 && scalar.first == UInt8(ascii: "\n") {
                (line, byte) = (line + 1, 1)
            } else {
                byte += scalar.count
            }
        }
        return (line, byte)
    }
}
