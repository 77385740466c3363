/// Where a sync log file stands in its device's chain (SYNC.md, "Log file").
public struct SyncLogHeader: Equatable, Sendable {
    /// The writing device's random 16-byte identity.
    public var device: [UInt8]
    /// 1 for a device's first file, then one more for each.
    public var sequence: UInt64
    /// SHA-256 of the device's previous file, all bytes; 32 zero bytes before the first.
    public var previousHash: [UInt8]

    public init(device: [UInt8], sequence: UInt64, previousHash: [UInt8]) {
        self.device = device
        self.sequence = sequence
        self.previousHash = previousHash
    }

    static let size = 4 + 1 + 16 + 8 + 32

    var bytes: [UInt8] { SyncLogFile.magic + [SyncLogFile.version] + device + bigEndianBytes(sequence) + previousHash }
}

/// A sync log file, format version 1 (SYNC.md): `header || nonce (12) || ciphertext || tag (16)`,
/// AES-256-GCM under the log key with the header as associated data, so a file moved to another
/// device or place in the chain, or changed in any byte, does not open.
public enum SyncLogFile {
    static let magic = Array("MSSL".utf8)
    public static let version: UInt8 = 1

    public static func seal(_ payload: [UInt8], header: SyncLogHeader, logKey: SecretBytes) throws -> [UInt8] {
        guard header.device.count == 16, header.previousHash.count == 32 else {
            throw StashCryptoError(.invalidInput, "sync log header needs a 16-byte device and a 32-byte hash")
        }
        // Sealed into the file's own buffer: a box's ciphertext copied into the file held what a first
        // sync sends three times (tens of MB at 10,000 items, hundreds at 100,000).
        var file = header.bytes
        try payload.withUnsafeBytes {
            try AES256GCM.sealAppending($0, key: logKey, associatedData: header.bytes, to: &file)
        }
        return file
    }

    /// The header, read without the key: enough to check the file's place before opening it.
    ///
    /// - throws: ``StashCryptoError`` `.invalidInput` (not a log file, truncated), `.unsupportedVersion`.
    public static func header(of file: [UInt8]) throws -> SyncLogHeader {
        guard file.count >= SyncLogHeader.size + AES256GCM.nonceSize + AES256GCM.tagSize,
              Array(file.prefix(4)) == magic else {
            throw StashCryptoError(.invalidInput, "not a mystash sync log file, or truncated")
        }
        guard file[4] == version else {
            throw StashCryptoError(.unsupportedVersion, "sync log file has unknown format version \(file[4])")
        }
        return SyncLogHeader(device: Array(file[5..<21]), sequence: readBigEndian(file[21..<29], as: UInt64.self),
                             previousHash: Array(file[29..<61]))
    }

    /// - throws: as ``header(of:)``; `.authenticationFailed` for a file changed in any byte or
    ///   sealed under another key.
    public static func open(_ file: [UInt8], logKey: SecretBytes) throws -> (SyncLogHeader, [UInt8]) {
        let header = try header(of: file)
        let nonceEnd = SyncLogHeader.size + AES256GCM.nonceSize
        let box = AES256GCM.SealedBox(
            nonce: Array(file[SyncLogHeader.size..<nonceEnd]),
            ciphertext: Array(file[nonceEnd..<(file.count - AES256GCM.tagSize)]),
            tag: Array(file.suffix(AES256GCM.tagSize)))
        let plaintext = try AES256GCM.open(box, key: logKey, associatedData: header.bytes, lockingMemory: false)
        return (header, plaintext.bytes)
    }
}

/// The keys of sync (SYNC.md, "Keys"): a random sync key shared by every device of a vault,
/// wrapped under each data key the vault has had, so a rekey on one machine leaves the others
/// and later clones reading everything.
public enum SyncKey {
    static let wrapMagic = Array("MSSK".utf8)
    static let wrapVersion: UInt8 = 1
    public static let wrappedSize = 4 + 1 + AES256GCM.nonceSize + 32 + AES256GCM.tagSize

    /// The key that seals log files: `HKDF-SHA256(sync key, info "MyStash sync log v1")`.
    public static func logKey(syncKey: SecretBytes) throws -> SecretBytes {
        try HKDF.sha256(key: syncKey, info: Array("MyStash sync log v1".utf8), length: 32)
    }

    /// A value that tells whether two key slots wrap the same data key, without the key:
    /// `HKDF-SHA256(data key, info "MyStash sync data key check v1")`, 16 bytes.
    public static func dataKeyCheck(dataKey: SecretBytes) throws -> [UInt8] {
        try HKDF.sha256(key: dataKey, info: Array("MyStash sync data key check v1".utf8), length: 16).bytes
    }

    /// `"MSSK" || 0x01 || nonce || AES-256-GCM(key = HKDF(data key, "MyStash sync key wrap v1"), sync key) || tag`.
    public static func wrap(_ syncKey: SecretBytes, dataKey: SecretBytes) throws -> [UInt8] {
        let header = wrapMagic + [wrapVersion]
        let box = try AES256GCM.seal(syncKey, key: try wrappingKey(dataKey), associatedData: header)
        return header + box.nonce + box.ciphertext + box.tag
    }

    /// - throws: ``StashCryptoError`` `.invalidInput` for a file of another shape,
    ///   `.authenticationFailed` when it was wrapped under another data key (or changed).
    public static func unwrap(_ wrapped: [UInt8], dataKey: SecretBytes) throws -> SecretBytes {
        guard wrapped.count == wrappedSize, Array(wrapped.prefix(4)) == wrapMagic, wrapped[4] == wrapVersion else {
            throw StashCryptoError(.invalidInput, "not a wrapped mystash sync key")
        }
        let nonceEnd = 5 + AES256GCM.nonceSize
        let box = AES256GCM.SealedBox(
            nonce: Array(wrapped[5..<nonceEnd]), ciphertext: Array(wrapped[nonceEnd..<(nonceEnd + 32)]),
            tag: Array(wrapped.suffix(AES256GCM.tagSize)))
        return try AES256GCM.open(box, key: try wrappingKey(dataKey), associatedData: Array(wrapped.prefix(5)))
    }

    private static func wrappingKey(_ dataKey: SecretBytes) throws -> SecretBytes {
        try HKDF.sha256(key: dataKey, info: Array("MyStash sync key wrap v1".utf8), length: 32)
    }
}
