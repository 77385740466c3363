internal import COpenSSL

/// A private key that signs: Ed25519, ECDSA over the NIST curves, or RSA (PKCS #1 v1.5), built
/// from the raw numbers a key file holds (OpenSSH's format, an SSH agent's add request) and
/// checked against its public half before it is used.
///
/// ```swift
/// let key = try SigningKey.ed25519(seed: seed, publicKey: publicKey)
/// let signature = try key.sign(Array("message".utf8))
/// ```
public final class SigningKey: @unchecked Sendable {
    /// The NIST curves SSH uses, by their SSH names.
    public enum Curve: String, Sendable, CaseIterable {
        case p256 = "nistp256", p384 = "nistp384", p521 = "nistp521"

        /// OpenSSL's name of the curve.
        var groupName: String {
            switch self {
            case .p256: "prime256v1"
            case .p384: "secp384r1"
            case .p521: "secp521r1"
            }
        }

        /// The hash SSH signs with on this curve (RFC 5656, section 6.2.1).
        public var hash: Hash {
            switch self {
            case .p256: .sha256
            case .p384: .sha384
            case .p521: .sha512
            }
        }

        /// The size of one coordinate, in bytes.
        public var coordinateSize: Int {
            switch self {
            case .p256: 32
            case .p384: 48
            case .p521: 66
            }
        }
    }

    public enum Hash: Sendable {
        case sha1, sha256, sha384, sha512

        var function: OpaquePointer? {
            switch self {
            case .sha1: EVP_sha1()
            case .sha256: EVP_sha256()
            case .sha384: EVP_sha384()
            case .sha512: EVP_sha512()
            }
        }
    }

    public enum Signature: Equatable, Sendable {
        /// Ed25519's 64 bytes, or RSA's signature as long as the modulus.
        case bytes([UInt8])
        /// ECDSA's two numbers, big-endian without leading zeros.
        case ecdsa(r: [UInt8], s: [UInt8])
    }

    public enum Kind: Equatable, Sendable {
        case ed25519
        case ecdsa(Curve)
        case rsa(bits: Int)
    }

    public let kind: Kind
    private let key: OpaquePointer

    private init(kind: Kind, takingOwnership key: OpaquePointer) {
        self.kind = kind
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// An Ed25519 key from its 32-byte seed, which must give `publicKey`.
    ///
    /// - throws: ``StashCryptoError`` `.invalidInput` for sizes other than 32 or a seed whose
    ///   public key is not `publicKey`.
    public static func ed25519(seed: SecretBytes, publicKey: [UInt8]) throws -> SigningKey {
        guard seed.count == 32, publicKey.count == 32 else {
            throw StashCryptoError(.invalidInput, "an Ed25519 key has a 32-byte seed and a 32-byte public key")
        }
        let made = seed.withUnsafeBytes {
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.bindMemory(to: UInt8.self).baseAddress, 32)
        }
        guard let made else { throw StashCryptoError.openSSL("EVP_PKEY_new_raw_private_key") }
        let key = SigningKey(kind: .ed25519, takingOwnership: made)
        var derived = [UInt8](repeating: 0, count: 32)
        var length = 32
        try check(EVP_PKEY_get_raw_public_key(made, &derived, &length), "EVP_PKEY_get_raw_public_key")
        guard ConstantTime.equal(derived, publicKey) else {
            throw StashCryptoError(.invalidInput, "the Ed25519 private key does not match its public key")
        }
        return key
    }

    /// An ECDSA key from its private scalar and its public point (uncompressed, `04 || x || y`).
    ///
    /// - throws: ``StashCryptoError`` `.invalidInput` when the point is not on the curve or the
    ///   scalar does not give it.
    public static func ecdsa(curve: Curve, privateScalar: SecretBytes, publicPoint: [UInt8]) throws -> SigningKey {
        guard publicPoint.count == 1 + 2 * curve.coordinateSize, publicPoint.first == 4 else {
            throw StashCryptoError(.invalidInput, "the \(curve.rawValue) public key is not an uncompressed point")
        }
        let scalar = try BigNumber(secret: privateScalar)
        let made = try fromData(type: "EC") { builder in
            try builder.push("group", text: curve.groupName)
            try builder.push("pub", bytes: publicPoint)
            try builder.push("priv", number: scalar)
        }
        let key = SigningKey(kind: .ecdsa(curve), takingOwnership: made)
        try key.checkPair("ECDSA")
        return key
    }

    /// An RSA key from its numbers (big-endian bytes, as SSH's mpints hold them). `coefficient`
    /// is q⁻¹ mod p; the CRT exponents are computed.
    public static func rsa(
        modulus: [UInt8], publicExponent: [UInt8], privateExponent: SecretBytes, prime1: SecretBytes,
        prime2: SecretBytes, coefficient: SecretBytes
    ) throws -> SigningKey {
        let n = try BigNumber(public: modulus)
        let e = try BigNumber(public: publicExponent)
        let d = try BigNumber(secret: privateExponent)
        let p = try BigNumber(secret: prime1)
        let q = try BigNumber(secret: prime2)
        let qInverse = try BigNumber(secret: coefficient)
        let bits = Int(BN_num_bits(n.pointer))
        guard (1024...16384).contains(bits) else {
            throw StashCryptoError(.invalidInput, "an RSA modulus of \(bits) bits is outside 1024 to 16384")
        }
        let dP = try d.remainder(dividedBy: p.minusOne())
        let dQ = try d.remainder(dividedBy: q.minusOne())
        let made = try fromData(type: "RSA") { builder in
            for (name, number) in [("n", n), ("e", e), ("d", d), ("rsa-factor1", p), ("rsa-factor2", q),
                                   ("rsa-exponent1", dP), ("rsa-exponent2", dQ), ("rsa-coefficient1", qInverse)] {
                try builder.push(name, number: number)
            }
        }
        let key = SigningKey(kind: .rsa(bits: bits), takingOwnership: made)
        try key.checkPair("RSA")
        return key
    }

    /// Signs `message`: Ed25519 hashes it itself (`hash` is ignored), ECDSA uses its curve's hash,
    /// RSA the one given (SHA-1 for SSH's old `ssh-rsa`).
    public func sign(_ message: [UInt8], hash: Hash = .sha256) throws -> Signature {
        guard let context = EVP_MD_CTX_new() else { throw StashCryptoError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        let function: OpaquePointer? = switch kind {
        case .ed25519: nil
        case .ecdsa(let curve): curve.hash.function
        case .rsa: hash.function
        }
        try check(EVP_DigestSignInit(context, nil, function, nil, key), "EVP_DigestSignInit")
        var length = 0
        // OpenSSL wants an address even for an empty message.
        let input = message.isEmpty ? [0] : message
        try check(EVP_DigestSign(context, nil, &length, input, message.count), "EVP_DigestSign")
        var signature = [UInt8](repeating: 0, count: length)
        try check(EVP_DigestSign(context, &signature, &length, input, message.count), "EVP_DigestSign")
        signature.removeSubrange(length...)
        guard case .ecdsa = kind else { return .bytes(signature) }
        return try signature.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            guard let parsed = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
                throw StashCryptoError.openSSL("d2i_ECDSA_SIG")
            }
            defer { ECDSA_SIG_free(parsed) }
            var r: OpaquePointer?
            var s: OpaquePointer?
            ECDSA_SIG_get0(parsed, &r, &s)
            return .ecdsa(r: BigNumber.bytes(of: r), s: BigNumber.bytes(of: s))
        }
    }

    /// Builds a key from the OpenSSL parameters `push` adds.
    private static func fromData(type: String, _ push: (ParameterBuilder) throws -> Void) throws -> OpaquePointer {
        let builder = try ParameterBuilder()
        try push(builder)
        guard let parameters = OSSL_PARAM_BLD_to_param(builder.pointer) else {
            throw StashCryptoError.openSSL("OSSL_PARAM_BLD_to_param")
        }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw StashCryptoError.openSSL("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try check(EVP_PKEY_fromdata_init(context), "EVP_PKEY_fromdata_init")
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata(context, &key, MS_EVP_PKEY_KEYPAIR, parameters) == 1, let key else {
            ERR_clear_error()
            throw StashCryptoError(.invalidInput, "the \(type) key's numbers do not make a key")
        }
        return key
    }

    /// Refuses a private half that does not belong to the public one (a damaged or forged file).
    private func checkPair(_ name: String) throws {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            throw StashCryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_pairwise_check(context) == 1 else {
            ERR_clear_error()
            throw StashCryptoError(.invalidInput, "the \(name) private key does not match its public key")
        }
    }
}

/// OpenSSL's parameter builder, which keeps the addresses of the names and values it is given
/// until it builds: copies live here until then, never Swift's temporary C strings.
private final class ParameterBuilder {
    let pointer: OpaquePointer
    private var copies: [UnsafeMutableRawPointer] = []

    init() throws {
        guard let made = OSSL_PARAM_BLD_new() else { throw StashCryptoError.openSSL("OSSL_PARAM_BLD_new") }
        pointer = made
    }

    deinit {
        OSSL_PARAM_BLD_free(pointer)
        copies.forEach { free($0) }
    }

    private func kept(_ text: String) -> UnsafeMutablePointer<CChar> {
        let copy = strdup(text)!
        copies.append(UnsafeMutableRawPointer(copy))
        return copy
    }

    func push(_ name: String, text: String) throws {
        try check(OSSL_PARAM_BLD_push_utf8_string(pointer, kept(name), kept(text), 0), "OSSL_PARAM_BLD_push")
    }

    func push(_ name: String, bytes: [UInt8]) throws {
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        copy.copyMemory(from: bytes, byteCount: bytes.count)
        copies.append(copy)
        try check(OSSL_PARAM_BLD_push_octet_string(pointer, kept(name), copy, bytes.count), "OSSL_PARAM_BLD_push")
    }

    /// The number must outlive the builder's use (its caller holds it).
    func push(_ name: String, number: BigNumber) throws {
        try check(OSSL_PARAM_BLD_push_BN(pointer, kept(name), number.pointer), "OSSL_PARAM_BLD_push_BN")
    }
}

/// An OpenSSL BIGNUM, cleared when freed.
private final class BigNumber {
    let pointer: OpaquePointer

    private init(_ pointer: OpaquePointer) { self.pointer = pointer }

    convenience init(public bytes: [UInt8]) throws {
        guard let made = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw StashCryptoError.openSSL("BN_bin2bn") }
        self.init(made)
    }

    convenience init(secret: SecretBytes) throws {
        guard let made = BN_secure_new() else { throw StashCryptoError.openSSL("BN_secure_new") }
        self.init(made)
        let converted = secret.withUnsafeBytes {
            BN_bin2bn($0.bindMemory(to: UInt8.self).baseAddress, Int32($0.count), made)
        }
        guard converted != nil else { throw StashCryptoError.openSSL("BN_bin2bn") }
    }

    deinit { BN_clear_free(pointer) }

    func minusOne() throws -> BigNumber {
        guard let copy = BN_dup(pointer) else { throw StashCryptoError.openSSL("BN_dup") }
        let result = BigNumber(copy)
        try check(BN_sub_word(copy, 1), "BN_sub_word")
        return result
    }

    func remainder(dividedBy divisor: BigNumber) throws -> BigNumber {
        guard let made = BN_secure_new(), let context = BN_CTX_secure_new() else {
            throw StashCryptoError.openSSL("BN_secure_new")
        }
        defer { BN_CTX_free(context) }
        let result = BigNumber(made)
        try check(BN_div(nil, made, pointer, divisor.pointer, context), "BN_div")
        return result
    }

    static func bytes(of number: OpaquePointer?) -> [UInt8] {
        guard let number else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(number) + 7) / 8))
        _ = BN_bn2bin(number, &bytes)
        return bytes
    }
}

/// AES-256 in counter mode, which OpenSSH encrypts private key files with by default.
public enum AES256CTR {
    /// Decrypts (or encrypts: the same in counter mode) `data` under a 32-byte key and a 16-byte
    /// initial counter.
    public static func apply(key: SecretBytes, counter: [UInt8], to data: [UInt8]) throws -> SecretBytes {
        guard key.count == 32, counter.count == 16 else {
            throw StashCryptoError(.invalidInput, "AES-256-CTR needs a 32-byte key and a 16-byte counter")
        }
        let context = try CipherContext()
        let output = SecretBytes(count: data.count)
        guard !data.isEmpty else { return output }
        try key.withUnsafeBytes { keyBytes in
            try output.withUnsafeMutableBytes { out in
                try check(
                    EVP_EncryptInit_ex(context.pointer, EVP_aes_256_ctr(), nil,
                                       keyBytes.bindMemory(to: UInt8.self).baseAddress, counter),
                    "EVP_EncryptInit_ex")
                var written: Int32 = 0
                try check(
                    EVP_EncryptUpdate(context.pointer, out.bindMemory(to: UInt8.self).baseAddress, &written, data,
                                      Int32(data.count)),
                    "EVP_EncryptUpdate")
            }
        }
        return output
    }
}

/// A private key in one of the PEM forms OpenSSL reads (PKCS #1 `RSA PRIVATE KEY`, SEC 1
/// `EC PRIVATE KEY`, PKCS #8 `PRIVATE KEY` and `ENCRYPTED PRIVATE KEY`), taken apart into the
/// numbers SSH encodes.
public enum PEMPrivateKey {
    public enum Numbers {
        case ed25519(seed: SecretBytes, publicKey: [UInt8])
        case ecdsa(curve: SigningKey.Curve, scalar: SecretBytes, point: [UInt8])
        case rsa(modulus: [UInt8], publicExponent: [UInt8], privateExponent: SecretBytes, prime1: SecretBytes,
                 prime2: SecretBytes, coefficient: SecretBytes)
    }

    /// Reads `text`; `passphrase` is called only when the PEM says it is encrypted.
    ///
    /// - throws: ``StashCryptoError`` `.wrongPassword` when an encrypted key does not open
    ///   with the passphrase, `.invalidInput` when the text is no key OpenSSL reads or one of
    ///   another kind (DSA, Ed448, an unnamed curve).
    public static func read(_ text: String, passphrase: () throws -> SecretBytes) throws -> Numbers {
        let encrypted = text.contains("ENCRYPTED")
        let secret = encrypted ? try passphrase() : SecretBytes(count: 0)
        // OpenSSL takes a NUL-terminated passphrase when no callback is given.
        let terminated = SecretBytes(count: secret.count + 1)
        terminated.withUnsafeMutableBytes { out in secret.withUnsafeBytes { out.copyMemory(from: $0) } }
        let bytes = Array(text.utf8)
        guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else { throw StashCryptoError.openSSL("BIO_new") }
        defer { BIO_free(bio) }
        let read = terminated.withUnsafeMutableBytes { PEM_read_bio_PrivateKey(bio, nil, nil, $0.baseAddress) }
        guard let key = read else {
            ERR_clear_error()
            throw encrypted
                ? StashCryptoError(.wrongPassword, "the passphrase does not open the PEM key")
                : StashCryptoError(.invalidInput, "the PEM text is not a private key OpenSSL reads")
        }
        defer { EVP_PKEY_free(key) }
        switch String(cString: EVP_PKEY_get0_type_name(key)) {
        case "ED25519":
            let seed = SecretBytes(count: 32)
            var length = 32
            try seed.withUnsafeMutableBytes {
                try check(EVP_PKEY_get_raw_private_key(key, $0.bindMemory(to: UInt8.self).baseAddress, &length),
                          "EVP_PKEY_get_raw_private_key")
            }
            var publicKey = [UInt8](repeating: 0, count: 32)
            try check(EVP_PKEY_get_raw_public_key(key, &publicKey, &length), "EVP_PKEY_get_raw_public_key")
            return .ed25519(seed: seed, publicKey: publicKey)
        case "EC":
            var group = [CChar](repeating: 0, count: 64)
            try check(EVP_PKEY_get_utf8_string_param(key, "group", &group, group.count, nil), "EVP_PKEY_get_param")
            let name = String(cString: group)
            guard let curve = SigningKey.Curve.allCases.first(where: { $0.groupName == name }) else {
                throw StashCryptoError(.invalidInput, "the EC curve '\(name)' is not one SSH uses")
            }
            var point = [UInt8](repeating: 0, count: 1 + 2 * curve.coordinateSize)
            var length = 0
            try check(EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", &point, point.count, &length),
                      "EVP_PKEY_get_param")
            return .ecdsa(curve: curve, scalar: try secretNumber(key, "priv"), point: Array(point.prefix(length)))
        case "RSA":
            return .rsa(
                modulus: try secretNumber(key, "n").bytes, publicExponent: try secretNumber(key, "e").bytes,
                privateExponent: try secretNumber(key, "d"), prime1: try secretNumber(key, "rsa-factor1"),
                prime2: try secretNumber(key, "rsa-factor2"), coefficient: try secretNumber(key, "rsa-coefficient1"))
        case let other:
            throw StashCryptoError(.invalidInput, "a \(other) key is not one SSH agents serve here")
        }
    }

    /// A number of the key as big-endian bytes, kept as secret bytes.
    private static func secretNumber(_ key: OpaquePointer, _ name: String) throws -> SecretBytes {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else {
            throw StashCryptoError.openSSL("EVP_PKEY_get_bn_param(\(name))")
        }
        defer { BN_clear_free(number) }
        let bytes = SecretBytes(count: Int((BN_num_bits(number) + 7) / 8))
        _ = bytes.withUnsafeMutableBytes { BN_bn2bin(number, $0.bindMemory(to: UInt8.self).baseAddress) }
        return bytes
    }
}
