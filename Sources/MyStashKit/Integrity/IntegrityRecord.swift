import Foundation
import ObjectGraph
import StashCrypto

/// The keyed integrity record of a vault (FORMAT.md, "Integrity record"): ObjectGraph's row
/// authentication under keys derived from the data key, in MyStash's tables, with the name
/// index beside it. The record itself (tags, buckets, records, their upkeep in every save and
/// their verification) is ObjectGraph's ``RowAuthentication``; this holds the keys and policy.
final class IntegrityRecord {
    static let tables = RowAuthentication.Tables(
        tags: "MYSTASH_ROW_TAG", buckets: "MYSTASH_BUCKET", record: "MYSTASH_RECORD",
        bucketIndex: "MYSTASH_ROW_TAG_BUCKET")
    static let keyInfo = Array("MyStash integrity v1".utf8)
    static let nameKeyInfo = Array("MyStash name index v1".utf8)

    /// What the record's model names after the model version since it covers the stores'
    /// history too (FORMAT.md): a record without it was written before, and is checked as then.
    static let historyCoverage = " with history"

    /// The row authentication kept by every save and checked by every read: the stores'
    /// entities and their persistent history.
    let rows: RowAuthentication
    /// The entities alone, as a record written before the history was covered checks them.
    private let rowsBeforeHistory: RowAuthentication
    /// The model version the stores are at.
    let modelVersion: String
    /// The serialized key slot the data key came from: a record this key cannot verify while
    /// the stores hold another slot was written under a key changed since, not tampered with.
    var keySlot: Data
    private let authenticator: HMACRowAuthenticator
    private let nameIndexKey: HMAC.Key

    /// `stores`: the entities' tables; their history is added.
    init(dataKey: SecretBytes, keySlot: KeySlot, stores: [RowAuthentication.Store], modelVersion: String) throws {
        self.modelVersion = modelVersion
        self.keySlot = Data(keySlot.serialized)
        authenticator = HMACRowAuthenticator(
            key: try HMAC.Key(.sha256, bytes: try HKDF.sha256(key: dataKey, info: Self.keyInfo, length: 32).bytes))
        nameIndexKey = try HMAC.Key(
            .sha256, bytes: try HKDF.sha256(key: dataKey, info: Self.nameKeyInfo, length: 32).bytes)
        rows = RowAuthentication(
            authenticator: authenticator, stores: stores.map { $0.includingHistory() },
            model: modelVersion + Self.historyCoverage, tables: Self.tables, writer: "mystash")
        rowsBeforeHistory = RowAuthentication(
            authenticator: authenticator, stores: stores, model: modelVersion, tables: Self.tables, writer: "mystash")
        for authentication in [rows, rowsBeforeHistory] {
            authentication.recordDoesNotVerify = { [unowned self] transaction, store in
                if Vault.holdsAnotherKeySlot(store.identifier, than: self.keySlot, in: transaction) {
                    throw KeyChangedElsewhere()
                }
            }
        }
    }

    /// The stores with their entities' tables (the first layout's record covered these).
    var stores: [RowAuthentication.Store] { rowsBeforeHistory.stores }

    /// An HMAC under the record's key (to read the layout before buckets).
    func authenticationCode(of message: [UInt8]) throws -> [UInt8] {
        try authenticator.authenticationCode(of: message)
    }

    /// Creates the record from the rows as they are, the generations going on from a record of
    /// the layout before buckets if this key verifies one.
    func create(in transaction: StoreTransaction) throws {
        var generations: [String: Int64] = [:]
        for store in stores {
            generations[store.identifier] = try? FirstLayoutRecord.generation(of: store, record: self, in: transaction)
        }
        try rows.create(in: transaction, generations: generations)
    }

    /// Whether the record was computed under another model version (the layout before buckets
    /// included): a migration rewrote the rows, so their tags are renewed.
    func needsRenewal(in transaction: StoreTransaction) -> Bool {
        stores.contains { store in
            (try? FirstLayoutRecord.model(of: store, in: transaction)).flatMap { $0 }.map { $0 != modelVersion }
                ?? false
        } || stores.contains { store in
            // One written before the history was covered, under this model, is not renewed but
            // checked first (`Vault.coverHistory`); one that does not verify is left to verification.
            guard let recorded = (try? rows.recordedModel(of: store, in: transaction)).flatMap({ $0 }) else {
                return false
            }
            return recorded != rows.model && recorded != modelVersion
        }
    }

    /// Whether the stores' records were written, under this model version, before the history
    /// was covered: the vault is checked as they say, then their history added (`Vault.coverHistory`).
    func predatesHistory(in transaction: StoreTransaction) -> Bool {
        stores.allSatisfy { (try? rowsBeforeHistory.recordedModel(of: $0, in: transaction)) == modelVersion }
    }

    /// Every difference between the stores and their records; nil when there is none yet. A
    /// record of the layout before buckets (a vault not unlocked since the upgrade) is checked
    /// as that layout says, in full. `inFull` as ``RowAuthentication/verify(in:inFull:)`` takes it.
    func verify(in transaction: StoreTransaction, inFull: Set<String>? = nil) throws -> [IntegrityProblem]? {
        guard try !stores.contains(where: { try FirstLayoutRecord.model(of: $0, in: transaction) != nil }) else {
            return try FirstLayoutRecord.verify(self, ignoring: FirstLayoutRecord.columnsAddedSince, in: transaction)
        }
        return try (predatesHistory(in: transaction) ? rowsBeforeHistory : rows).verify(in: transaction, inFull: inFull)
    }

    // MARK: - Names

    /// The keyed index of a note's title or an entry's name: equal for names equal ignoring
    /// case, and nothing about the name without the data key.
    func nameKey(_ name: String, entity: String) throws -> Data {
        var message: [UInt8] = []
        RowAuthentication.appendField(&message, "name".utf8)
        RowAuthentication.appendField(&message, entity.utf8)
        RowAuthentication.appendField(&message, Self.foldedName(name).utf8)
        return Data(try nameIndexKey.authenticationCode(of: message))
    }

    /// The form names are compared in: `==[c]`'s case folding, canonically composed.
    static func foldedName(_ name: String) -> String {
        // As the predicate evaluator folds: lowercasing for ASCII, Foundation's folding otherwise.
        guard !name.utf8.allSatisfy({ $0 < 0x80 }) else { return name.lowercased() }
        return name.folding(options: .caseInsensitive, locale: nil).precomposedStringWithCanonicalMapping
    }
}

/// HMAC-SHA256 of rows under the integrity key.
final class HMACRowAuthenticator: RowAuthenticator {
    private let key: HMAC.Key

    init(key: HMAC.Key) { self.key = key }

    func authenticationCode(of message: [UInt8]) throws -> [UInt8] { try key.authenticationCode(of: message) }

    func authenticationCode(of message: UnsafeRawBufferPointer, into code: UnsafeMutableRawBufferPointer) throws {
        try key.authenticationCode(of: message, into: code)
    }
}

/// The stores hold a key slot other than the one this process unlocked, and a record its key
/// cannot verify: another process changed the vault's key (a rekey) since.
struct KeyChangedElsewhere: Error {}
