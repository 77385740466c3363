/// HKDF (RFC 5869) with SHA-256, on OpenSSL's HMAC: one secret key per purpose from the
/// vault's data key, so that no key serves two algorithms.
public enum HKDF {
    /// `length` bytes of key material for `info`, from `key` (and an optional `salt`).
    ///
    /// - throws: ``StashCryptoError`` when `length` exceeds 255 blocks or OpenSSL fails.
    public static func sha256(key: SecretBytes, salt: [UInt8] = [], info: [UInt8], length: Int) throws -> SecretBytes {
        guard length > 0, length <= 255 * 32 else { throw StashCryptoError.openSSL("HKDF length \(length)") }
        var pseudorandomKey = try key.withUnsafeBytes {
            try HMAC.authenticationCode(
                .sha256, key: salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt, message: Array($0))
        }
        var output: [UInt8] = []
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            block = try HMAC.authenticationCode(.sha256, key: pseudorandomKey, message: block + info + [counter])
            output += block
            counter &+= 1
        }
        defer {
            // The intermediate copies held key material.
            for index in output.indices { output[index] = 0 }
            for index in pseudorandomKey.indices { pseudorandomKey[index] = 0 }
            for index in block.indices { block[index] = 0 }
        }
        return SecretBytes(copying: output.prefix(length))
    }
}
