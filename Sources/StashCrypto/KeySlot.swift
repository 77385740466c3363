import Foundation

/// The vault's key slot (see FORMAT.md): scrypt parameters and salt, a slot identity, flags
/// (version 2), the data key wrapped by the key-encryption key derived from the master
/// password, and a checksum. The header, flags included, is the wrapping's associated data, so
/// no flag can be changed without the password.
///
/// ```swift
/// let (slot, dataKey) = try KeySlot.create(password: password, parameters: ScryptParameters(logN: 17))
/// let same = try KeySlot(serialized: slot.serialized).unlock(password: password)
/// ```
public struct KeySlot: Equatable, Sendable {
    /// The version written; version 1 (no flags) is still read.
    public static let version: UInt8 = 2
    static let magic = Array("MSKS".utf8)
    static let scryptIdentifier: UInt8 = 1
    static let recordRequiredFlag: UInt8 = 0x01

    public private(set) var version: UInt8
    public private(set) var parameters: ScryptParameters
    public private(set) var salt: [UInt8]
    /// A random identity, new each time the slot is written (a new master password).
    public private(set) var slotIdentifier: [UInt8]
    /// Version 2's flags byte; bit 0: the vault has an integrity record, so a vault without one
    /// was tampered with.
    private var flags: UInt8
    private var wrapped: AES256GCM.SealedBox
    /// SHA-256 of the body, computed (and its failure thrown) when the slot is made or read, so
    /// that ``serialized`` never writes a slot with a missing checksum.
    private var checksum: [UInt8] = []

    /// Whether the vault must hold an integrity record (version 2 slots say so, authenticated).
    public var requiresIntegrityRecord: Bool { flags & Self.recordRequiredFlag != 0 }

    static func headerSize(version: UInt8) -> Int { version == 1 ? 47 : 48 }

    static func size(version: UInt8) -> Int {
        headerSize(version: version) + AES256GCM.nonceSize + 32 + AES256GCM.tagSize + 32
    }

    /// Makes a new random data key and a slot wrapping it under `password`.
    public static func create(password: SecretBytes, parameters: ScryptParameters) throws -> (KeySlot, SecretBytes) {
        let dataKey = try SecretBytes.random(count: AES256GCM.keySize)
        return (try wrapping(dataKey, password: password, parameters: parameters), dataKey)
    }

    /// A new slot (new salt and identity) wrapping an existing data key under `password`; it
    /// says the vault holds an integrity record.
    public static func wrapping(
        _ dataKey: SecretBytes, password: SecretBytes, parameters: ScryptParameters
    ) throws -> KeySlot {
        try wrapping(dataKey, password: password, parameters: parameters, version: version)
    }

    /// As ``wrapping(_:password:parameters:)`` in format `version` (1 to make an older vault's slot).
    static func wrapping(
        _ dataKey: SecretBytes, password: SecretBytes, parameters: ScryptParameters, version: UInt8
    ) throws -> KeySlot {
        var slot = KeySlot(version: version, parameters: try parameters.checkedAgainstCaps(),
                           salt: try SecureRandom.bytes(count: 16), slotIdentifier: try SecureRandom.bytes(count: 16),
                           flags: version == 1 ? 0 : recordRequiredFlag,
                           wrapped: AES256GCM.SealedBox(nonce: [], ciphertext: [], tag: []))
        try slot.seal(dataKey, kek: try slot.keyEncryptionKey(password: password))
        return slot
    }

    private init(version: UInt8, parameters: ScryptParameters, salt: [UInt8], slotIdentifier: [UInt8], flags: UInt8,
                 wrapped: AES256GCM.SealedBox) {
        self.version = version
        self.parameters = parameters
        self.salt = salt
        self.slotIdentifier = slotIdentifier
        self.flags = flags
        self.wrapped = wrapped
    }

    private mutating func seal(_ dataKey: SecretBytes, kek: SecretBytes) throws {
        wrapped = try AES256GCM.seal(dataKey, key: kek, associatedData: wrappingAssociatedData)
        checksum = try SHA256Digest.hash(body)
    }

    /// Reads a serialized slot, checking its checksum, version and the KDF caps.
    ///
    /// - throws: `.damagedKeySlot` when the bytes do not hold an intact slot,
    ///   `.unsupportedVersion`, or `.parametersRejected` when the KDF cost exceeds the caps.
    public init(serialized bytes: [UInt8]) throws {
        guard bytes.count >= 5, Array(bytes[0..<4]) == Self.magic else {
            throw StashCryptoError(.damagedKeySlot, "the key slot is damaged (wrong size or marker)")
        }
        let version = bytes[4]
        guard version == 1 || version == Self.version else {
            throw StashCryptoError(.unsupportedVersion, "the key slot has unknown format version \(version)")
        }
        let size = Self.size(version: version)
        guard bytes.count == size else {
            throw StashCryptoError(.damagedKeySlot, "the key slot is damaged (wrong size or marker)")
        }
        let body = Array(bytes[0..<(size - 32)])
        guard ConstantTime.equal(try SHA256Digest.hash(body), Array(bytes.suffix(32))) else {
            throw StashCryptoError(.damagedKeySlot, "the key slot is damaged (checksum mismatch)")
        }
        guard bytes[5] == Self.scryptIdentifier else {
            throw StashCryptoError(.unsupportedVersion, "the key slot names an unknown KDF (\(bytes[5]))")
        }
        let parameters = ScryptParameters(
            logN: bytes[6], r: readBigEndian(bytes[7..<11], as: UInt32.self),
            p: readBigEndian(bytes[11..<15], as: UInt32.self))
        var offset = Self.headerSize(version: version)
        func take(_ count: Int) -> [UInt8] {
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
        self.init(
            version: version, parameters: try parameters.checkedAgainstCaps(), salt: Array(bytes[15..<31]),
            slotIdentifier: Array(bytes[31..<47]), flags: version == 1 ? 0 : bytes[47],
            wrapped: AES256GCM.SealedBox(nonce: take(12), ciphertext: take(32), tag: take(16)))
        checksum = Array(bytes.suffix(32))
    }

    private var header: [UInt8] {
        Self.magic + [version, Self.scryptIdentifier, parameters.logN] + bigEndianBytes(parameters.r)
            + bigEndianBytes(parameters.p) + salt + slotIdentifier + (version == 1 ? [] : [flags])
    }

    private var wrappingAssociatedData: [UInt8] { Array("mystash/keyslot/v\(version)".utf8) + header }

    private var body: [UInt8] { header + wrapped.nonce + wrapped.ciphertext + wrapped.tag }

    public var serialized: [UInt8] { body + checksum }

    private func keyEncryptionKey(password: SecretBytes) throws -> SecretBytes {
        try Scrypt.deriveKey(password: password, salt: salt, parameters: parameters, length: AES256GCM.keySize)
    }

    /// Unwraps the data key with `password` and, for a slot that does not yet say the vault
    /// holds an integrity record, makes the same slot (same password, salt and identity, so
    /// sessions stay valid) that says so, from the one key derivation.
    ///
    /// - throws: `.wrongPassword` when the password does not open the slot.
    public func unlockRequiringIntegrityRecord(password: SecretBytes) throws
        -> (dataKey: SecretBytes, requiring: KeySlot?)
    {
        let kek = try keyEncryptionKey(password: password)
        let dataKey = try open(with: kek)
        guard !requiresIntegrityRecord else { return (dataKey, nil) }
        var requiring = self
        requiring.version = Self.version
        requiring.flags |= Self.recordRequiredFlag
        try requiring.seal(dataKey, kek: kek)
        return (dataKey, requiring)
    }

    private func open(with kek: SecretBytes) throws -> SecretBytes {
        do {
            return try AES256GCM.open(wrapped, key: kek, associatedData: wrappingAssociatedData)
        } catch let error as StashCryptoError where error.code == .authenticationFailed {
            throw StashCryptoError(.wrongPassword, "wrong master password")
        }
    }

    /// Derives the key-encryption key from `password` and unwraps the data key.
    ///
    /// - throws: `.wrongPassword` when the password does not open the slot.
    public func unlock(password: SecretBytes) throws -> SecretBytes {
        try open(with: try keyEncryptionKey(password: password))
    }
}

extension SecretBytes {
    /// A password as bytes: its UTF-8 encoding after Unicode NFC normalization, so the same
    /// password typed on any system derives the same key.
    public static func password(_ text: String) -> SecretBytes {
        SecretBytes(copying: text.precomposedStringWithCanonicalMapping.utf8)
    }
}
