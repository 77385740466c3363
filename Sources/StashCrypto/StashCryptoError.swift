internal import COpenSSL

/// A failure in StashCrypto. Authentication failures are told apart from bad input and
/// from OpenSSL's own failures, whose text (drained from OpenSSL's error queue) is kept.
public struct StashCryptoError: Error, CustomStringConvertible, Equatable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The tag did not verify: wrong key, or data modified.
        public static let authenticationFailed = Code(rawValue: "authentication failed")
        /// Input of the wrong size or shape (key, nonce, truncated data).
        public static let invalidInput = Code(rawValue: "invalid input")
        /// A version this code does not know.
        public static let unsupportedVersion = Code(rawValue: "unsupported version")
        /// KDF parameters outside the accepted bounds.
        public static let parametersRejected = Code(rawValue: "parameters rejected")
        /// A key slot opened with the wrong master password.
        public static let wrongPassword = Code(rawValue: "wrong password")
        /// A key slot whose bytes were damaged or edited (its checksum does not match).
        public static let damagedKeySlot = Code(rawValue: "damaged key slot")
        /// OpenSSL reported a failure.
        public static let library = Code(rawValue: "OpenSSL failure")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// An error for a failed OpenSSL call, carrying and clearing OpenSSL's error queue.
    static func openSSL(_ function: String) -> StashCryptoError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let detail = reasons.isEmpty ? "no detail from OpenSSL" : reasons.joined(separator: "; ")
        return StashCryptoError(.library, "\(function) failed: \(detail)")
    }
}

/// Throws an OpenSSL error unless `result` is 1 (OpenSSL's success).
@inline(__always)
func check(_ result: Int32, _ function: String) throws {
    guard result == 1 else { throw StashCryptoError.openSSL(function) }
}
