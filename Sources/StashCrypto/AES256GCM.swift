internal import COpenSSL

/// AES-256-GCM authenticated encryption through OpenSSL's EVP interface.
///
/// ```swift
/// let key = try SecretBytes.random(count: AES256GCM.keySize)
/// let box = try AES256GCM.seal(Array("hello".utf8), key: key, associatedData: Array("context".utf8))
/// let plaintext = try AES256GCM.open(box, key: key, associatedData: Array("context".utf8))
/// ```
public enum AES256GCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16

    /// A nonce, a ciphertext and its tag.
    public struct SealedBox: Equatable, Sendable {
        public var nonce: [UInt8]
        public var ciphertext: [UInt8]
        public var tag: [UInt8]

        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }
    }

    /// Encrypts and authenticates `plaintext`, and authenticates `associatedData`.
    ///
    /// - parameter nonce: 12 bytes, unique per key; a random one when nil (the normal case).
    public static func seal(
        _ plaintext: some ContiguousBytesLike, key: SecretBytes, nonce: [UInt8]? = nil, associatedData: [UInt8] = []
    ) throws -> SealedBox {
        let nonce = try nonce ?? SecureRandom.bytes(count: nonceSize)
        var ciphertext: [UInt8] = []
        var tag = [UInt8](repeating: 0, count: tagSize)
        try plaintext.withBytes { input in
            ciphertext = [UInt8](repeating: 0, count: input.count)
            try ciphertext.withUnsafeMutableBytes { output in
                try tag.withUnsafeMutableBytes { tag in
                    try seal(input, key: key, nonce: nonce, associatedData: associatedData, into: output, tag: tag)
                }
            }
        }
        return SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// Appends a random nonce, the ciphertext of `plaintext` and its tag to `output`: a large
    /// plaintext (a first sync's log file) is sealed without a copy of its ciphertext.
    static func sealAppending(
        _ plaintext: UnsafeRawBufferPointer, key: SecretBytes, associatedData: [UInt8], to output: inout [UInt8]
    ) throws {
        let nonce = try SecureRandom.bytes(count: nonceSize)
        let start = output.count + nonceSize
        output.reserveCapacity(start + plaintext.count + tagSize)
        output += nonce
        output += repeatElement(0, count: plaintext.count + tagSize)
        try output.withUnsafeMutableBytes { buffer in
            try seal(plaintext, key: key, nonce: nonce, associatedData: associatedData,
                     into: UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + plaintext.count)]),
                     tag: UnsafeMutableRawBufferPointer(rebasing: buffer[(start + plaintext.count)...]))
        }
    }

    /// Encrypts `plaintext` into `output` (as long) and writes the tag into `tag` (16 bytes).
    private static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SecretBytes, nonce: [UInt8], associatedData: [UInt8],
        into output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer
    ) throws {
        try checkSizes(key: key.count, nonce: nonce.count, tag: tag.count)
        precondition(output.count == plaintext.count, "GCM's output is as long as its input")
        let context = try CipherContext()
        try key.withUnsafeBytes { keyBytes in
            try check(EVP_EncryptInit_ex(context.pointer, aes256GCM, nil, nil, nil), "EVP_EncryptInit_ex")
            try check(
                EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil),
                "EVP_CTRL_GCM_SET_IVLEN")
            try check(
                EVP_EncryptInit_ex(context.pointer, nil, nil, keyBytes.bindMemory(to: UInt8.self).baseAddress, nonce),
                "EVP_EncryptInit_ex")
        }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            try check(
                EVP_EncryptUpdate(context.pointer, nil, &length, associatedData, Int32(associatedData.count)),
                "EVP_EncryptUpdate(aad)")
        }
        let out = output.bindMemory(to: UInt8.self).baseAddress
        var written: Int32 = 0
        if plaintext.count > 0 {
            guard let count = Int32(exactly: plaintext.count) else {
                throw StashCryptoError(.invalidInput, "a plaintext of 2 GiB or more cannot be sealed at once")
            }
            try check(
                EVP_EncryptUpdate(context.pointer, out, &written, plaintext.bindMemory(to: UInt8.self).baseAddress,
                                  count), "EVP_EncryptUpdate")
        }
        // GCM writes nothing more at the end; a byte of room for a pointer past an empty output.
        var final: Int32 = 0
        var spare: UInt8 = 0
        try withUnsafeMutablePointer(to: &spare) { spare in
            try check(EVP_EncryptFinal_ex(context.pointer, out.map { $0 + Int(written) } ?? spare, &final),
                      "EVP_EncryptFinal_ex")
        }
        try check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), tag.baseAddress),
            "EVP_CTRL_GCM_GET_TAG")
    }

    /// Verifies and decrypts a box.
    ///
    /// - throws: ``StashCryptoError`` `.authenticationFailed` when the key is wrong or any
    ///   byte of the box or the associated data changed.
    public static func open(_ box: SealedBox, key: SecretBytes, associatedData: [UInt8] = []) throws -> SecretBytes {
        try open(box, key: key, associatedData: associatedData, lockingMemory: true)
    }

    static func open(
        _ box: SealedBox, key: SecretBytes, associatedData: [UInt8], lockingMemory: Bool
    ) throws -> SecretBytes {
        try decrypt(box, with: try KeyedContext(forDecryptingWith: key), associatedData: associatedData,
                    lockingMemory: lockingMemory)
    }

    /// A cipher context with its key set up: many boxes under one key are opened without
    /// setting the key (and its schedule) up again for each. Not for concurrent use.
    public final class KeyedContext {
        let context: CipherContext

        public init(forDecryptingWith key: SecretBytes) throws {
            try checkSizes(key: key.count, nonce: nil, tag: nil)
            context = try CipherContext()
            try key.withUnsafeBytes { keyBytes in
                try check(EVP_DecryptInit_ex(context.pointer, aes256GCM, nil, nil, nil), "EVP_DecryptInit_ex")
                try check(
                    EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceSize), nil),
                    "EVP_CTRL_GCM_SET_IVLEN")
                try check(
                    EVP_DecryptInit_ex(context.pointer, nil, nil, keyBytes.bindMemory(to: UInt8.self).baseAddress, nil),
                    "EVP_DecryptInit_ex")
            }
        }
    }

    /// Verifies and decrypts a box with a keyed context.
    static func decrypt(
        _ box: SealedBox, with keyed: KeyedContext, associatedData: [UInt8], lockingMemory: Bool
    ) throws -> SecretBytes {
        // GCM's output is exactly as long as its input.
        let plaintext = SecretBytes(count: box.ciphertext.count, lockingMemory: lockingMemory)
        try box.nonce.withUnsafeBytes { nonce in
            try box.ciphertext.withUnsafeBytes { ciphertext in
                try box.tag.withUnsafeBytes { tag in
                    try plaintext.withUnsafeMutableBytes { output in
                        try associatedData.withUnsafeBytes { associatedData in
                            try decrypt(nonce: nonce, ciphertext: ciphertext, tag: tag, with: keyed,
                                        associatedData: associatedData, into: output)
                        }
                    }
                }
            }
        }
        return plaintext
    }

    /// Verifies and decrypts a box given in place, into `output` (as long as the ciphertext).
    static func decrypt(
        nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        with keyed: KeyedContext, associatedData: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkSizes(key: nil, nonce: nonce.count, tag: tag.count)
        precondition(output.count == ciphertext.count, "GCM's output is as long as its input")
        let context = keyed.context
        let out = output.bindMemory(to: UInt8.self).baseAddress
        // A new nonce on the key already set: the context starts a new message.
        try check(
            EVP_DecryptInit_ex(context.pointer, nil, nil, nil, nonce.bindMemory(to: UInt8.self).baseAddress),
            "EVP_DecryptInit_ex")
        var written: Int32 = 0
        if !associatedData.isEmpty {
            try check(
                EVP_DecryptUpdate(
                    context.pointer, nil, &written, associatedData.bindMemory(to: UInt8.self).baseAddress,
                    Int32(associatedData.count)),
                "EVP_DecryptUpdate(aad)")
        }
        written = 0
        if !ciphertext.isEmpty {
            try check(
                EVP_DecryptUpdate(
                    context.pointer, out, &written, ciphertext.bindMemory(to: UInt8.self).baseAddress,
                    Int32(ciphertext.count)),
                "EVP_DecryptUpdate")
        }
        // OpenSSL takes the expected tag through a non-const pointer, and only reads it.
        try check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tag.count), UnsafeMutableRawPointer(
                mutating: tag.baseAddress)),
            "EVP_CTRL_GCM_SET_TAG")
        var final: Int32 = 0
        // GCM writes nothing at the end; an empty output still needs somewhere to point.
        var scratch: UInt8 = 0
        let finished = withUnsafeMutablePointer(to: &scratch) { scratch in
            EVP_DecryptFinal_ex(context.pointer, out.map { $0 + Int(written) } ?? scratch, &final)
        }
        guard finished == 1 else {
            ERR_clear_error()
            throw StashCryptoError(.authenticationFailed, "authentication failed: wrong key or modified data")
        }
        guard Int(written + final) == output.count else {
            throw StashCryptoError(.library, "AES-256-GCM returned \(written + final) bytes for \(output.count)")
        }
    }

    /// Each of the key, nonce and tag sizes that is given is right.
    private static func checkSizes(key: Int?, nonce: Int?, tag: Int?) throws {
        if let key, key != keySize {
            throw StashCryptoError(.invalidInput, "AES-256-GCM needs a 32-byte key, not \(key) bytes")
        }
        if let nonce, nonce != nonceSize {
            throw StashCryptoError(.invalidInput, "AES-256-GCM needs a 12-byte nonce, not \(nonce) bytes")
        }
        if let tag, tag != tagSize {
            throw StashCryptoError(.invalidInput, "AES-256-GCM needs a 16-byte tag, not \(tag) bytes")
        }
    }
}

/// The cipher, fetched once: `EVP_aes_256_gcm()` makes OpenSSL 3 look its implementation up
/// again at every init (a cost per decrypted field). Fetched ciphers may be shared by threads.
nonisolated(unsafe) private let aes256GCM: OpaquePointer? =
    EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? EVP_aes_256_gcm()

/// Owns an `EVP_CIPHER_CTX` and frees it.
final class CipherContext {
    let pointer: OpaquePointer

    init() throws {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw StashCryptoError.openSSL("EVP_CIPHER_CTX_new") }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}

/// Byte containers accepted as plaintext: arrays and secret bytes.
public protocol ContiguousBytesLike {
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytesLike where Element == UInt8 {
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try withUnsafeBytes(body) }
}

extension SecretBytes: ContiguousBytesLike {
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try withUnsafeBytes(body) }
}
