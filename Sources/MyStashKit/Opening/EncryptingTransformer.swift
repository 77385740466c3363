import Foundation
import ObjectGraph
import StashCrypto

/// Encrypts string attributes with the vault's data key, binding each ciphertext to its
/// store, entity, attribute and row (FORMAT.md, "Encrypted field").
final class EncryptingTransformer: ValueTransformer {
    static let name = "MyStashEncryptedString"
    /// Bytes that need not be text (attachment chunks), under the same key and format.
    static let binaryName = "MyStashEncryptedData"
    static let names: Set = [name, binaryName]

    var dataKey: SecretBytes? {
        didSet { openingLock.withLock { openingKey = nil } }
    }
    /// Store UUID → file name, to name places in errors.
    var storeNames: [String: String] = [:]
    /// Whether the stores, as the read under way sees them, hold another key slot than the
    /// one the data key came from: a field that does not open is then under a key changed
    /// since (a rekey by another process), not tampered with.
    var keyChangedElsewhere: (() throws -> Bool)?
    /// The data key set up for opening fields, made at the first one: a list opens thousands.
    private var openingKey: AES256GCM.KeyedContext?
    private let openingLock = NSLock()
    /// The attributes opened lately, each with its associated data made once: a list opens a
    /// few attributes thousands of times. Used under `openingLock`.
    private var recentPlaces: [(attribute: ValuePlace.Attribute, place: FieldPlace)] = []

    func key() throws -> SecretBytes {
        guard let dataKey else {
            throw VaultError.locked
        }
        return dataKey
    }

    /// Opens a field's envelope with the data key, set up once (one context, so one field at a time).
    func openField<T>(_ open: (AES256GCM.KeyedContext) throws -> T) throws -> T {
        try openingLock.withLock {
            let context = try openingKey ?? AES256GCM.KeyedContext(forDecryptingWith: key())
            openingKey = context
            return try open(context)
        }
    }

    /// `place` but its row, from the recent ones when it is one; called under `openingLock`.
    private func fieldPlace(_ place: ValuePlace) -> FieldPlace {
        // The same attribute object first: a list's places share one.
        if let recent = recentPlaces.first(where: { $0.attribute === place.attribute }) ?? recentPlaces.first(where: {
            ($0.attribute.attributeName, $0.attribute.entityName, $0.attribute.storeIdentifier)
                == (place.attributeName, place.entityName, place.storeIdentifier)
        }) {
            return recent.place
        }
        let made = FieldPlace(
            storeIdentifier: place.storeIdentifier, entity: place.entityName, attribute: place.attributeName)
        if recentPlaces.count == 16 { recentPlaces.removeFirst() }
        recentPlaces.append((place.attribute, made))
        return made
    }

    func context(_ place: ValuePlace) -> FieldContext {
        FieldContext(
            storeIdentifier: place.storeIdentifier, entity: place.entityName, attribute: place.attributeName,
            primaryKey: place.primaryKey)
    }

    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        guard let text = value as? String else {
            preconditionFailure("\(place.entityName).\(place.attributeName) holds text only")
        }
        return Data(try FieldEnvelope.seal(text, key: key(), context: context(place)))
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        try data.withUnsafeBytes { try reverseTransformedValue(bytes: $0, at: place) }
    }

    func reverseTransformedValue(bytes: UnsafeRawBufferPointer, at place: ValuePlace) throws -> Any {
        try opening(at: place) {
            // Opened in place: a list opens thousands of these.
            try openField { key in
                try FieldEnvelope.open(bytes, with: key, place: fieldPlace(place), primaryKey: place.primaryKey)
            }
        }
    }

    /// What `open` returns; a ciphertext that does not open is reported as tampering at its place.
    func opening(at place: ValuePlace, _ open: () throws -> Any) throws -> Any {
        do {
            return try open()
        } catch let error as StashCryptoError {
            if error.code == .authenticationFailed, (try? keyChangedElsewhere?()) == true {
                throw VaultError.keyChangedElsewhere
            }
            let store = storeNames[place.storeIdentifier] ?? "store \(place.storeIdentifier)"
            let what =
                error.code == .authenticationFailed ? "was modified or moved from another row or field" : error.message
            let problem = "field \(place.attributeName) \(what)"
            throw VaultError.damagedRow(
                "tampered or damaged data: \(store), \(place.entityName) row \(place.primaryKey), \(problem)",
                rowProblem: problem)

        }
    }
}

/// The binary twin of ``EncryptingTransformer``: the key and the format are the vault's, the
/// value `Data` instead of text. Shares the string transformer's key, so locking one locks both.
final class BinaryEncryptingTransformer: ValueTransformer {
    let text: EncryptingTransformer

    init(sharingKeyOf text: EncryptingTransformer) { self.text = text }

    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        guard let bytes = value as? Data else {
            preconditionFailure("\(place.entityName).\(place.attributeName) holds bytes only")
        }
        return Data(try FieldEnvelope.seal(bytes: Array(bytes), key: text.key(), context: text.context(place)))
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        try text.opening(at: place) {
            try text.openField { key in
                let bytes = try FieldEnvelope.openBytes(Array(data), with: key, context: text.context(place))
                return bytes.withUnsafeBytes { Data($0) }
            }
        }
    }
}
