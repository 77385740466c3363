internal import COpenSSL

/// scrypt's cost parameters (RFC 7914): N = 2^logN, block size r, parallelism p.
public struct ScryptParameters: Equatable, Sendable, CustomStringConvertible {
    public var logN: UInt8
    public var r: UInt32
    public var p: UInt32

    public init(logN: UInt8, r: UInt32 = 8, p: UInt32 = 1) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    /// Memory scrypt needs: 128 · N · r · p bytes.
    public var memoryBytes: UInt64 { 128 * (UInt64(1) << UInt64(logN)) * UInt64(r) * UInt64(p) }

    /// Upper bounds applied to parameters read from a vault, so that an edited file cannot
    /// make an unlock take minutes or exhaust memory: N ≤ 2^20, r ≤ 32, p ≤ 16, memory ≤ 1 GiB.
    public static let maximumLogN: UInt8 = 20
    public static let maximumR: UInt32 = 32
    public static let maximumP: UInt32 = 16
    public static let maximumMemory: UInt64 = 1 << 30

    /// Throws unless the parameters are within the caps (and sane: logN ≥ 1, r, p ≥ 1).
    public func checkedAgainstCaps() throws -> ScryptParameters {
        guard logN >= 1, logN <= Self.maximumLogN, r >= 1, r <= Self.maximumR, p >= 1, p <= Self.maximumP,
              memoryBytes <= Self.maximumMemory else {
            throw StashCryptoError(
                .parametersRejected,
                "scrypt parameters \(self) are outside the accepted bounds (N ≤ 2^\(Self.maximumLogN), r ≤ "
                    + "\(Self.maximumR), p ≤ \(Self.maximumP), memory ≤ 1 GiB)"
            )
        }
        return self
    }

    public var description: String { "N=2^\(logN) r=\(r) p=\(p)" }
}

/// The scrypt key-derivation function (RFC 7914), via `EVP_PBE_scrypt`.
public enum Scrypt {
    public static func deriveKey(
        password: some ContiguousBytesLike, salt: [UInt8], parameters: ScryptParameters, length: Int
    ) throws -> SecretBytes {
        try derive(password: password, salt: salt, parameters: parameters.checkedAgainstCaps(), length: length,
                   memoryLimit: parameters.memoryBytes + (1 << 20))
    }

    /// Derivation without the caps; `memoryLimit` is OpenSSL's `maxmem`.
    static func derive(
        password: some ContiguousBytesLike, salt: [UInt8], parameters: ScryptParameters, length: Int,
        memoryLimit: UInt64
    ) throws -> SecretBytes {
        let key = SecretBytes(count: length)
        try password.withBytes { passwordBytes in
            try key.withUnsafeMutableBytes { output in
                let result = EVP_PBE_scrypt(
                    passwordBytes.baseAddress?.assumingMemoryBound(to: CChar.self), passwordBytes.count,
                    salt, salt.count,
                    UInt64(1) << UInt64(parameters.logN), UInt64(parameters.r), UInt64(parameters.p),
                    memoryLimit,
                    output.bindMemory(to: UInt8.self).baseAddress, output.count)
                try check(result, "EVP_PBE_scrypt")
            }
        }
        return key
    }
}

/// SHA-256 through OpenSSL, for checksums.
public enum SHA256Digest {
    public static func hash(_ bytes: [UInt8]) throws -> [UInt8] {
        try digest(bytes, EVP_sha256(), length: 32)
    }
}

/// SHA-1 through OpenSSL, only to look passwords up in breach lists that are keyed by it
/// ("Pwned Passwords"); never to protect anything.
public enum SHA1Digest {
    public static func hash(_ bytes: [UInt8]) throws -> [UInt8] {
        try digest(bytes, EVP_sha1(), length: 20)
    }
}

private func digest(_ bytes: [UInt8], _ type: OpaquePointer?, length: Int) throws -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: length)
    var written: UInt32 = 0
    try check(EVP_Digest(bytes, bytes.count, &digest, &written, type, nil), "EVP_Digest")
    return digest
}
