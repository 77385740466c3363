internal import COpenSSL

/// bcrypt_pbkdf, the key derivation of OpenSSH's encrypted private keys (OpenBSD's
/// `libutil/bcrypt_pbkdf.c`): PBKDF2's structure with a bcrypt-style Blowfish hash as its
/// pseudorandom function, and output bytes spread across the blocks so that all of them cost
/// the full rounds. OpenSSL has no bcrypt, so the expensive key schedule is done here over
/// OpenSSL's Blowfish block function.
///
/// ```swift
/// let keyAndIV = try BcryptPBKDF.derive(password: passphrase, salt: salt, rounds: 16, count: 48)
/// ```
public enum BcryptPBKDF {
    /// More rounds than this are refused before any work: a key file states its own rounds, and
    /// one from an attacker must not keep the process busy for hours. ssh-keygen writes 16; 200
    /// took 3.1 s in a debug build here (ssh-keygen itself 1.4 s), so 2,000 about half a minute.
    public static let maximumRounds = 2_000
    /// The longest output: 32 bytes times the 32-way spread of the reference implementation.
    public static let maximumCount = 1_024

    /// `count` bytes derived from `password` and `salt` with `rounds` rounds.
    ///
    /// - throws: ``StashCryptoError`` `.parametersRejected` for rounds or a count out of range,
    ///   `.invalidInput` for an empty salt.
    public static func derive(password: SecretBytes, salt: [UInt8], rounds: Int, count: Int) throws -> SecretBytes {
        guard (1...maximumRounds).contains(rounds) else {
            throw StashCryptoError(
                .parametersRejected, "bcrypt_pbkdf rounds must be 1 to \(maximumRounds), not \(rounds)")
        }
        guard (1...maximumCount).contains(count) else {
            throw StashCryptoError(.parametersRejected, "bcrypt_pbkdf output must be 1 to \(maximumCount) bytes")
        }
        guard !salt.isEmpty else { throw StashCryptoError(.invalidInput, "bcrypt_pbkdf needs a salt") }
        let stride = (count + 31) / 32
        var amount = (count + stride - 1) / stride
        let passwordHash = try password.withUnsafeBytes { try sha512($0) }
        let blowfish = EksBlowfish()
        let key = SecretBytes(count: count)
        // Scratch for one block: the salted counter's hash, this round's hash, and their sum.
        let saltHash = SecretBytes(count: 64, lockingMemory: false)
        let hashed = SecretBytes(count: 32, lockingMemory: false)
        let output = SecretBytes(count: 32, lockingMemory: false)
        var remaining = count
        var blockNumber: UInt32 = 1
        while remaining > 0 {
            let countedSalt = salt + withUnsafeBytes(of: blockNumber.bigEndian) { Array($0) }
            try countedSalt.withUnsafeBytes { bytes in
                try saltHash.withUnsafeMutableBytes { try sha512(bytes, into: $0) }
            }
            try passwordHash.withUnsafeBytes { password in
                try saltHash.withUnsafeMutableBytes { salted in
                    try hashed.withUnsafeMutableBytes { round in
                        try output.withUnsafeMutableBytes { sum in
                            blowfish.hash(password: password, salt: UnsafeRawBufferPointer(salted), into: round)
                            sum.copyMemory(from: UnsafeRawBufferPointer(round))
                            for _ in 1..<rounds {
                                try sha512(UnsafeRawBufferPointer(round), into: salted)
                                blowfish.hash(password: password, salt: UnsafeRawBufferPointer(salted), into: round)
                                for index in 0..<32 { sum[index] ^= round[index] }
                            }
                        }
                    }
                }
            }
            amount = min(amount, remaining)
            var taken = 0
            key.withUnsafeMutableBytes { key in
                output.withUnsafeBytes { output in
                    while taken < amount {
                        let destination = taken * stride + Int(blockNumber - 1)
                        if destination >= count { break }
                        key[destination] = output[taken]
                        taken += 1
                    }
                }
            }
            remaining -= taken
            blockNumber += 1
        }
        return key
    }

    private static func sha512(_ bytes: UnsafeRawBufferPointer) throws -> SecretBytes {
        let digest = SecretBytes(count: 64)
        try digest.withUnsafeMutableBytes { try sha512(bytes, into: $0) }
        return digest
    }

    private static func sha512(_ bytes: UnsafeRawBufferPointer, into digest: UnsafeMutableRawBufferPointer) throws {
        var length: UInt32 = 0
        // OpenSSL wants an address even for no bytes.
        let input = bytes.baseAddress ?? UnsafeRawPointer(digest.baseAddress!)
        try check(
            EVP_Digest(input, bytes.count, digest.baseAddress!.assumingMemoryBound(to: UInt8.self), &length,
                       EVP_sha512(), nil),
            "EVP_Digest")
    }
}

/// Blowfish with bcrypt's expensive key schedule (Provos and Mazières's "eksblowfish"), in the
/// variant bcrypt_pbkdf uses: 64 rounds of expansion, then 64 encryptions of a fixed text.
private final class EksBlowfish {
    /// The P-array and the S-boxes, 18 + 1024 words in one block as OpenSSL lays them out.
    private let state = UnsafeMutablePointer<BF_KEY>.allocate(capacity: 1)
    private let block = UnsafeMutablePointer<UInt32>.allocate(capacity: 2)
    private static let stateWords = 18 + 4 * 256
    /// "OxychromaticBlowfishSwatDynamite", the text bcrypt_pbkdf's hash encrypts.
    private static let magic = Array("OxychromaticBlowfishSwatDynamite".utf8)

    init() {
        precondition(MemoryLayout<BF_KEY>.size == Self.stateWords * 4, "unexpected BF_KEY layout")
    }

    deinit {
        OPENSSL_cleanse(state, MemoryLayout<BF_KEY>.size)
        OPENSSL_cleanse(block, 8)
        state.deallocate()
        block.deallocate()
    }

    private var words: UnsafeMutablePointer<UInt32> {
        UnsafeMutableRawPointer(state).assumingMemoryBound(to: UInt32.self)
    }

    /// bcrypt_hash: 32 bytes from the two 64-byte SHA-512 hashes.
    func hash(
        password: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        blowfishInitialState.withUnsafeBufferPointer { words.update(from: $0.baseAddress!, count: Self.stateWords) }
        expand(key: password, data: salt)
        for _ in 0..<64 {
            expand(key: salt, data: nil)
            expand(key: password, data: nil)
        }
        var text = [UInt32](repeating: 0, count: 8)
        Self.magic.withUnsafeBytes { magic in
            var index = 0
            for word in 0..<8 { text[word] = Self.nextWord(magic, &index) }
        }
        for _ in 0..<64 {
            for pair in stride(from: 0, to: 8, by: 2) {
                block[0] = text[pair]
                block[1] = text[pair + 1]
                ms_blowfish_encrypt(block, state)
                text[pair] = block[0]
                text[pair + 1] = block[1]
            }
        }
        for (index, word) in text.enumerated() {
            for byte in 0..<4 { output[4 * index + byte] = UInt8(truncatingIfNeeded: word >> (8 * byte)) }
        }
    }

    /// Blowfish_expandstate (with `data`) or Blowfish_expand0state (without): mixes the key
    /// into the P-array, then replaces every P and S word by successive encryptions.
    private func expand(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer?) {
        var keyIndex = 0
        for index in 0..<18 { words[index] ^= Self.nextWord(key, &keyIndex) }
        var dataIndex = 0
        block[0] = 0
        block[1] = 0
        for index in stride(from: 0, to: Self.stateWords, by: 2) {
            if let data {
                block[0] ^= Self.nextWord(data, &dataIndex)
                block[1] ^= Self.nextWord(data, &dataIndex)
            }
            ms_blowfish_encrypt(block, state)
            words[index] = block[0]
            words[index + 1] = block[1]
        }
    }

    /// The next four bytes as a big-endian word, wrapping around at the end (Blowfish_stream2word).
    private static func nextWord(_ bytes: UnsafeRawBufferPointer, _ index: inout Int) -> UInt32 {
        var word: UInt32 = 0
        for _ in 0..<4 {
            if index >= bytes.count { index = 0 }
            word = word << 8 | UInt32(bytes[index])
            index += 1
        }
        return word
    }
}
