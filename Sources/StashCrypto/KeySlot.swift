import Foundation

/// The vault's key slot, format version 1 (see FORMAT.md): scrypt parameters and salt, a
/// slot identity, the data key wrapped by the key-encryption key derived from the master
/// password, and a checksum.
///
/// ```swift
/// let (slot, dataKey) = try KeySlot.create(password: password, parameters: ScryptParameters(logN: 17))
/// let same = try KeySlot(serialized: slot.serialized).unlock(password: password)
/// ```
public struct KeySlot: Equatable, Sendable {
    public static let version: UInt8 = 1
    static let magic = Array("MSKS".utf8)
    static let scryptIdentifier: UInt8 = 1
    static let headerSize = 47
    static let size = headerSize + AES256GCM.nonceSize + 32 + AES256GCM.tagSize + 32

    public private(set) var parameters: ScryptParameters
    public private(set) var salt: [UInt8]
    /// A random identity, new each time the slot is written (a new master password).
    public private(set) var slotIdentifier: [UInt8]
    private var wrapped: AES256GCM.SealedBox
    /// SHA-256 of the body, computed (and its failure thrown) when the slot is made or read, so
    /// that ``serialized`` never writes a slot with a missing checksum.
    private var checksum: [UInt8] = []

    /// Makes a new random data key and a slot wrapping it under `password`.
    public static func create(password: SecretBytes, parameters: ScryptParameters) throws -> (KeySlot, SecretBytes) {
        let dataKey = try SecretBytes.random(count: AES256GCM.keySize)
        return (try wrapping(dataKey, password: password, parameters: parameters), dataKey)
    }

    /// A new slot (new salt and identity) wrapping an existing data key under `password`.
    public static func wrapping(
        _ dataKey: SecretBytes, password: SecretBytes, parameters: ScryptParameters
    ) throws -> KeySlot {
        var slot = KeySlot(parameters: try parameters.checkedAgainstCaps(), salt: try SecureRandom.bytes(count: 16),
                           slotIdentifier: try SecureRandom.bytes(count: 16),
                           wrapped: AES256GCM.SealedBox(nonce: [], ciphertext: [], tag: []))
        let kek = try slot.keyEncryptionKey(password: password)
        slot.wrapped = try AES256GCM.seal(dataKey, key: kek, associatedData: slot.wrappingAssociatedData)
        slot.checksum = try SHA256Digest.hash(slot.body)
        return slot
    }

    private init(parameters: ScryptParameters, salt: [UInt8], slotIdentifier: [UInt8], wrapped: AES256GCM.SealedBox) {
        self.parameters = parameters
        self.salt = salt
        self.slotIdentifier = slotIdentifier
        self.wrapped = wrapped
    }

    /// Reads a serialized slot, checking its checksum, version and the KDF caps.
    ///
    /// - throws: `.damagedKeySlot` when the bytes do not hold an intact slot,
    ///   `.unsupportedVersion`, or `.parametersRejected` when the KDF cost exceeds the caps.
    public init(serialized bytes: [UInt8]) throws {
        guard bytes.count == Self.size, Array(bytes[0..<4]) == Self.magic else {
            throw StashCryptoError(.damagedKeySlot, "the key slot is damaged (wrong size or marker)")
        }
        let body = Array(bytes[0..<(Self.size - 32)])
        guard ConstantTime.equal(try SHA256Digest.hash(body), Array(bytes.suffix(32))) else {
            throw StashCryptoError(.damagedKeySlot, "the key slot is damaged (checksum mismatch)")
        }
        guard bytes[4] == Self.version else {
            throw StashCryptoError(.unsupportedVersion, "the key slot has unknown format version \(bytes[4])")
        }
        guard bytes[5] == Self.scryptIdentifier else {
            throw StashCryptoError(.unsupportedVersion, "the key slot names an unknown KDF (\(bytes[5]))")
        }
        let parameters = ScryptParameters(
            logN: bytes[6], r: readBigEndian(bytes[7..<11], as: UInt32.self),
            p: readBigEndian(bytes[11..<15], as: UInt32.self))
        var offset = Self.headerSize
        func take(_ count: Int) -> [UInt8] {
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
        self.init(
            parameters: try parameters.checkedAgainstCaps(), salt: Array(bytes[15..<31]),
            slotIdentifier: Array(bytes[31..<47]),
                  wrapped: AES256GCM.SealedBox(nonce: take(12), ciphertext: take(32), tag: take(16)))
        checksum = Array(bytes.suffix(32))
    }

    private var header: [UInt8] {
        Self.magic + [Self.version, Self.scryptIdentifier, parameters.logN] + bigEndianBytes(parameters.r)
            + bigEndianBytes(parameters.p) + salt + slotIdentifier
    }

    private var wrappingAssociatedData: [UInt8] { Array("mystash/keyslot/v1".utf8) + header }

    private var body: [UInt8] { header + wrapped.nonce + wrapped.ciphertext + wrapped.tag }

    public var serialized: [UInt8] { body + checksum }

    private func keyEncryptionKey(password: SecretBytes) throws -> SecretBytes {
        try Scrypt.deriveKey(password: password, salt: salt, parameters: parameters, length: AES256GCM.keySize)
    }

    /// Derives the key-encryption key from `password` and unwraps the data key.
    ///
    /// - throws: `.wrongPassword` when the password does not open the slot.
    public func unlock(password: SecretBytes) throws -> SecretBytes {
        let kek = try keyEncryptionKey(password: password)
        do {
            return try AES256GCM.open(wrapped, key: kek, associatedData: wrappingAssociatedData)
        } catch let error as StashCryptoError where error.code == .authenticationFailed {
            throw StashCryptoError(.wrongPassword, "wrong master password")
        }
    }
}

extension SecretBytes {
    /// A password as bytes: its UTF-8 encoding after Unicode NFC normalization, so the same
    /// password typed on any system derives the same key.
    public static func password(_ text: String) -> SecretBytes {
        SecretBytes(copying: text.precomposedStringWithCanonicalMapping.utf8)
    }
}
