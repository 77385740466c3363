internal import COpenSSL

/// HMAC (RFC 2104) through OpenSSL, for one-time passwords (RFC 4226, RFC 6238), HKDF and the
/// vault's integrity record.
public enum HMAC {
    /// The hash functions RFC 6238 names.
    public enum Algorithm: String, Sendable, CaseIterable {
        case sha1 = "SHA1", sha256 = "SHA256", sha512 = "SHA512"
    }

    /// The MAC of `message` under `key`.
    public static func authenticationCode(_ algorithm: Algorithm, key: [UInt8], message: [UInt8]) throws -> [UInt8] {
        try Key(algorithm, bytes: key).authenticationCode(of: message)
    }

    /// A key set up once for many messages: OpenSSL's one-shot `HMAC()` looks the algorithm
    /// up again at every call, which was most of the cost of checking 20,000 row tags.
    /// Not for concurrent use (one OpenSSL context).
    public final class Key {
        private let context: OpaquePointer
        private static let maximumSize = 64

        public init(_ algorithm: Algorithm, bytes: [UInt8]) throws {
            guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { throw StashCryptoError.openSSL("EVP_MAC_fetch") }
            defer { EVP_MAC_free(mac) }
            guard let context = EVP_MAC_CTX_new(mac) else { throw StashCryptoError.openSSL("EVP_MAC_CTX_new") }
            self.context = context
            // The parameter holds pointers to both strings: they must outlive EVP_MAC_init.
            let parameterName = Array("digest".utf8CString)
            var digest = Array(algorithm.rawValue.utf8CString)
            try parameterName.withUnsafeBufferPointer { name in
                try digest.withUnsafeMutableBufferPointer { value in
                    let parameters = [
                        OSSL_PARAM_construct_utf8_string(name.baseAddress, value.baseAddress, 0),
                        OSSL_PARAM_construct_end(),
                    ]
                    // Never a NULL key pointer, even for an empty key: NULL means "keep the key set before".
                    let keyBytes = bytes.isEmpty ? [0] : bytes
                    try check(EVP_MAC_init(context, keyBytes, bytes.count, parameters), "EVP_MAC_init")
                }
            }
        }

        deinit { EVP_MAC_CTX_free(context) }

        public func authenticationCode(of message: [UInt8]) throws -> [UInt8] {
            var output = [UInt8](repeating: 0, count: Self.maximumSize)
            let length = try message.withUnsafeBytes { message in
                try output.withUnsafeMutableBytes { try authenticationCode(of: message, into: $0) }
            }
            return Array(output.prefix(length))
        }

        /// Writes the MAC of `message` at the start of `code` (which must have room for it)
        /// and returns its length: no allocation, for callers that make many.
        @discardableResult
        public func authenticationCode(of message: UnsafeRawBufferPointer, into code: UnsafeMutableRawBufferPointer)
            throws -> Int
        {
            // A NULL key starts a new message under the key already set.
            try check(EVP_MAC_init(context, nil, 0, nil), "EVP_MAC_init")
            try check(
                EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count),
                "EVP_MAC_update")
            var length = 0
            try check(
                EVP_MAC_final(context, code.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, code.count),
                "EVP_MAC_final")
            return length
        }
    }
}
