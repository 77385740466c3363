internal import COpenSSL

/// HMAC (RFC 2104) through OpenSSL, for one-time passwords (RFC 4226, RFC 6238).
public enum HMAC {
    /// The hash functions RFC 6238 names.
    public enum Algorithm: String, Sendable, CaseIterable {
        case sha1 = "SHA1", sha256 = "SHA256", sha512 = "SHA512"
    }

    /// The MAC of `message` under `key`.
    public static func authenticationCode(_ algorithm: Algorithm, key: [UInt8], message: [UInt8]) throws -> [UInt8] {
        let digest: OpaquePointer?
        switch algorithm {
        case .sha1: digest = EVP_sha1()
        case .sha256: digest = EVP_sha256()
        case .sha512: digest = EVP_sha512()
        }
        var output = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        let result = key.withUnsafeBufferPointer { keyBuffer in
            COpenSSL.HMAC(digest, keyBuffer.baseAddress, Int32(keyBuffer.count), message, message.count, &output, &length)
        }
        guard result != nil else { throw StashCryptoError.openSSL("HMAC") }
        return Array(output.prefix(Int(length)))
    }
}
