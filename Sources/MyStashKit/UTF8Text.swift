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
        throw VaultError(
            .invalidText,
            "\(place) is not UTF-8 text (an invalid byte at line \(position.line), byte \(position.byte)); "
                + "nothing was saved",
            hint: "convert it to UTF-8 first")
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
