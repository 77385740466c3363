import Foundation
internal import COpenSSL

/// Where an encrypted field lives; bound into its associated data so that a ciphertext
/// moved to another store, entity, attribute or row fails to open.
public struct FieldContext: Equatable, Sendable, CustomStringConvertible {
    public var storeIdentifier: String
    public var entity: String
    public var attribute: String
    public var primaryKey: Int64

    public init(storeIdentifier: String, entity: String, attribute: String, primaryKey: Int64) {
        self.storeIdentifier = storeIdentifier
        self.entity = entity
        self.attribute = attribute
        self.primaryKey = primaryKey
    }

    public var description: String { "\(entity).\(attribute) row \(primaryKey) of store \(storeIdentifier)" }

    /// `"mystash/field/v1" 0x00 lp(store) lp(entity) lp(attribute) i64be(primaryKey)`; see FORMAT.md.
    var associatedData: [UInt8] {
        var data = FieldPlace(storeIdentifier: storeIdentifier, entity: entity, attribute: attribute).prefix
        appendBigEndian(UInt64(bitPattern: primaryKey), to: &data)
        return data
    }
}

/// A ``FieldContext`` but the row: its associated data but the primary key, which ends it.
/// The same for every field of one attribute, so made once for the thousands a list opens.
public struct FieldPlace: Sendable {
    let prefix: [UInt8]

    public init(storeIdentifier: String, entity: String, attribute: String) {
        // One buffer, appended in place, with room for the primary key.
        let label = "mystash/field/v1".utf8
        var data: [UInt8] = []
        data.reserveCapacity(label.count + 1 + 12 + storeIdentifier.utf8.count + entity.utf8.count
            + attribute.utf8.count + 8)
        data.append(contentsOf: label)
        data.append(0)
        func append(_ part: String) {
            appendBigEndian(UInt32(part.utf8.count), to: &data)
            data.append(contentsOf: part.utf8)
        }
        append(storeIdentifier)
        append(entity)
        append(attribute)
        prefix = data
    }
}

/// An encrypted field value, format version 1 (see FORMAT.md):
/// `0x01 || nonce (12) || ciphertext || tag (16)`, AES-256-GCM with the field's context as
/// associated data.
///
/// ```swift
/// let sealed = try FieldEnvelope.seal("hunter2", key: dataKey, context: context)
/// let value = try FieldEnvelope.open(sealed, key: dataKey, context: context)
/// ```
public enum FieldEnvelope {
    public static let version: UInt8 = 1
    static let overhead = 1 + AES256GCM.nonceSize + AES256GCM.tagSize

    public static func seal(
        _ plaintext: String, key: SecretBytes, context: FieldContext, nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        // The value is an ordinary string already; the copy is cleared, not locked.
        try seal(bytes: SecretBytes(copying: Array(plaintext.utf8), lockingMemory: false), key: key, context: context,
                 nonce: nonce)
    }

    /// Seals bytes that are not text (an attachment's chunk): the same format, the plaintext
    /// being the bytes themselves.
    public static func seal(
        bytes plaintext: some ContiguousBytesLike, key: SecretBytes, context: FieldContext, nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        let box = try AES256GCM.seal(plaintext, key: key, nonce: nonce, associatedData: context.associatedData)
        return [version] + box.nonce + box.ciphertext + box.tag
    }

    /// - throws: ``StashCryptoError`` `.invalidInput` (truncated), `.unsupportedVersion`,
    ///   or `.authenticationFailed` (modified, moved, or sealed under another key).
    public static func open(_ envelope: [UInt8], key: SecretBytes, context: FieldContext) throws -> String {
        try open(envelope, with: try AES256GCM.KeyedContext(forDecryptingWith: key), context: context)
    }

    /// Opens an envelope sealed by ``seal(bytes:key:context:nonce:)``.
    ///
    /// - throws: as ``open(_:key:context:)``, except that any bytes are accepted.
    public static func openBytes(_ envelope: [UInt8], key: SecretBytes, context: FieldContext) throws -> SecretBytes {
        try openBytes(envelope, with: try AES256GCM.KeyedContext(forDecryptingWith: key), context: context)
    }

    /// ``open(_:key:context:)`` with the key set up once for many fields.
    public static func open(_ envelope: [UInt8], with key: AES256GCM.KeyedContext, context: FieldContext) throws
        -> String
    {
        try envelope.withUnsafeBytes { try open($0, with: key, context: context) }
    }

    /// ``open(_:with:context:)`` of an envelope read in place.
    public static func open(
        _ envelope: UnsafeRawBufferPointer, with key: AES256GCM.KeyedContext, context: FieldContext
    ) throws -> String {
        try open(
            envelope, with: key,
            place: FieldPlace(storeIdentifier: context.storeIdentifier, entity: context.entity,
                              attribute: context.attribute),
            primaryKey: context.primaryKey)
    }

    /// ``open(_:with:context:)`` of an envelope read in place, in the row `primaryKey` of
    /// `place`: the associated data and the plaintext are in buffers of the call's own (on the
    /// stack when small), the plaintext wiped once the text is made.
    public static func open(
        _ envelope: UnsafeRawBufferPointer, with key: AES256GCM.KeyedContext, place: FieldPlace, primaryKey: Int64
    ) throws -> String {
        let parts = try split(envelope)
        let prefix = place.prefix
        return try withUnsafeTemporaryAllocation(byteCount: prefix.count + 8, alignment: 8) { associatedData in
            prefix.withUnsafeBytes { associatedData.copyMemory(from: $0) }
            withUnsafeBytes(of: UInt64(bitPattern: primaryKey).bigEndian) {
                UnsafeMutableRawBufferPointer(rebasing: associatedData[prefix.count...]).copyMemory(from: $0)
            }
            return try withUnsafeTemporaryAllocation(
                byteCount: max(parts.ciphertext.count, 1), alignment: 16
            ) { buffer in
                defer { OPENSSL_cleanse(buffer.baseAddress, buffer.count) }
                let plaintext = UnsafeMutableRawBufferPointer(rebasing: buffer[..<parts.ciphertext.count])
                try AES256GCM.decrypt(
                    nonce: parts.nonce, ciphertext: parts.ciphertext, tag: parts.tag, with: key,
                    associatedData: UnsafeRawBufferPointer(associatedData), into: plaintext)
                let bytes = UnsafeRawBufferPointer(plaintext).bindMemory(to: UInt8.self)
                // ASCII is valid UTF-8 as it is, and `decoding` takes it in far quicker than `validating`.
                if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw StashCryptoError(.invalidInput, "encrypted field does not hold UTF-8 text")
                }
                return text
            }
        }
    }

    /// An envelope's nonce, ciphertext and tag, in place.
    private static func split(_ envelope: UnsafeRawBufferPointer) throws -> (
        nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer
    ) {
        guard envelope.count >= overhead else {
            throw StashCryptoError(
                .invalidInput, "encrypted field is truncated (\(envelope.count) bytes, at least \(overhead) expected)")
        }
        guard envelope[0] == version else {
            throw StashCryptoError(.unsupportedVersion, "encrypted field has unknown format version \(envelope[0])")
        }
        let nonceEnd = 1 + AES256GCM.nonceSize
        let tagStart = envelope.count - AES256GCM.tagSize
        return (UnsafeRawBufferPointer(rebasing: envelope[1..<nonceEnd]),
                UnsafeRawBufferPointer(rebasing: envelope[nonceEnd..<tagStart]),
                UnsafeRawBufferPointer(rebasing: envelope[tagStart...]))
    }

    /// ``openBytes(_:key:context:)`` with the key set up once for many fields.
    public static func openBytes(_ envelope: [UInt8], with key: AES256GCM.KeyedContext, context: FieldContext)
        throws -> SecretBytes
    {
        try envelope.withUnsafeBytes { try openBytes($0, with: key, context: context) }
    }

    private static func openBytes(
        _ envelope: UnsafeRawBufferPointer, with key: AES256GCM.KeyedContext, context: FieldContext
    ) throws -> SecretBytes {
        let parts = try split(envelope)
        let plaintext = SecretBytes(count: parts.ciphertext.count, lockingMemory: false)
        try plaintext.withUnsafeMutableBytes { output in
            try context.associatedData.withUnsafeBytes { associatedData in
                try AES256GCM.decrypt(
                    nonce: parts.nonce, ciphertext: parts.ciphertext, tag: parts.tag, with: key,
                    associatedData: associatedData, into: output)
            }
        }
        return plaintext
    }

}

func bigEndianBytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}

func appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
}

func readBigEndian<T: FixedWidthInteger>(_ bytes: ArraySlice<UInt8>, as type: T.Type) -> T {
    bytes.reduce(T.zero) { $0 << 8 | T($1) }
}
