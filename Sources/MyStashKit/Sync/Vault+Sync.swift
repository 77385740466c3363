import Foundation
import ObjectGraph
import StashCrypto
#if canImport(Glibc)
import Glibc
#endif

/// How a synced attribute travels in a log file: as text, whatever its type.
enum SyncedFieldKind { case text, bool, date, category, fields }

extension Vault {
    /// The author of the saves sync makes: the next sync skips them in the history.
    static let syncAuthor = "mystash-sync"
    /// The author of a rekey's save: every value rewritten, none changed.
    static let rekeyAuthor = "mystash-rekey"
    /// The author of an undo's save: a deleted item back is the item as it was, not an edit.
    static let undoAuthor = "mystash-undo"
    /// The bare git cache of the remote, inside the vault directory.
    static let syncCacheName = "sync.git"

    /// What sync carries of each entity, field by field. Custom fields travel as one value;
    /// earlier passwords as a set (``SyncChange/history``).
    static let syncedFields: [String: [(key: String, kind: SyncedFieldKind)]] = [
        Category.entityName: fields(Category.self, [(.name, .text)]),
        PasswordEntry.entityName: fields(PasswordEntry.self, [
            (.name, .text), (.userId, .text), (.password, .text), (.url, .text), (.moreURLs, .text),
            (.totp, .text), (.notes, .text), (.favorite, .bool), (.category, .category), (.fields, .fields),
            (.createdAt, .date), (.updatedAt, .date),
        ]),
        Note.entityName: fields(Note.self, [
            (.title, .text), (.text, .text), (.folder, .text), (.createdAt, .date), (.updatedAt, .date),
        ]),
    ]

    private static func fields<Entity: EntityKeys>(_ entity: Entity.Type, _ list: [(Entity.Key, SyncedFieldKind)])
        -> [(key: String, kind: SyncedFieldKind)]
    {
        list.map { (key: $0.0.rawValue, kind: $0.1) }
    }

    /// Categories first: entries name them.
    static let syncedEntities = [Category.entityName, PasswordEntry.entityName, Note.entityName]

    static func syncNoun(_ entity: String) -> String {
        switch entity {
        case Note.entityName: return "note"
        case PasswordEntry.entityName: return "entry"
        default: return "category"
        }
    }

    /// The identity of a seeded category, the same on every machine.
    static func seedIdentity(of name: String) -> UUID {
        let digest = (try? SHA256Digest.hash(Array("mystash seed category \(name.lowercased())".utf8))) ?? []
        return derivedUUID(digest)
    }

    /// A UUID (version 8, RFC 9562) from the first 16 bytes of a digest.
    static func derivedUUID(_ digest: [UInt8]) -> UUID {
        var bytes = Array(digest.prefix(16)) + [UInt8](repeating: 0, count: max(0, 16 - digest.count))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                           bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    // MARK: - Values

    static func syncIdentity(of object: ManagedObject) -> String? {
        (object as? any SyncedEntity)?.syncIdentity?.uuidString
    }

    func syncValue(of object: ManagedObject, _ key: String, _ kind: SyncedFieldKind) throws -> String? {
        switch kind {
        case .text: return object[key] as? String
        case .bool: return (object[key] as? Bool).map { $0 ? "1" : "0" }
        case .date: return (object[key] as? Date).map { String($0.timeIntervalSinceReferenceDate) }
        case .category: return (object[key] as? ManagedObject).flatMap(Self.syncIdentity)
        case .fields:
            guard let entry = object as? PasswordEntry else { return nil }
            let fields = entry.fields.map { FieldInfo(name: $0.name, value: $0.value, hidden: $0.isHidden) }
            guard !fields.isEmpty else { return nil }
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return String(decoding: try encoder.encode(fields), as: UTF8.self)
        }
    }

    func setSyncValue(_ value: String?, of object: ManagedObject, _ key: String, _ kind: SyncedFieldKind,
                      index: SyncIndex) throws {
        switch kind {
        case .text: object[key] = value
        case .bool: object[key] = value == "1"
        case .date:
            let seconds = value.flatMap(Double.init).flatMap { $0.isFinite ? $0 : nil }
            object[key] = seconds.map { Date(timeIntervalSinceReferenceDate: $0) }
        case .category: object[key] = value.flatMap { index.objects[$0] as? Category }
        case .fields:
            guard let entry = object as? PasswordEntry else { return }
            var changes = EntryChanges()
            changes.fields = try value.map { try JSONDecoder().decode([FieldInfo].self, from: Data($0.utf8)) } ?? []
            try apply(changes, category: nil, to: entry)
        }
    }

    func historyInfo(of entry: PasswordEntry) -> [HistoryInfo] {
        entry.history.map { HistoryInfo(password: $0.password, replacedAt: $0.replacedAt) }
    }

    /// The note, entry or category name a report shows.
    func displayName(_ object: ManagedObject) -> String {
        (object as? any NamedEntity)?.itemName ?? ""
    }

    // MARK: - State

    /// The sync bookkeeping row and what it holds; nil before the first sync.
    /// The remote this vault syncs with (a password in its URL left out); nil when it never synced.
    public func syncRemote() throws -> String? {
        try Self.wrapErrors { try loadSyncState()?.state.remote.map(withoutURLPasswords) }
    }

    func loadSyncState() throws -> (row: SyncStateRow, state: SyncState, key: SecretBytes)? {
        guard let row = try context.fetch(FetchRequest<SyncStateRow>()).first else { return nil }
        try context.decodeValues(of: row)
        guard let data = row.state, let state = try? SyncState(stored: data),
              let encoded = row.key, let key = Data(base64Encoded: encoded), key.count == 32 else {
            throw Self.damagedSyncState()
        }
        return (row, state, SecretBytes(copying: key))
    }

    static func damagedSyncState() -> VaultError {
        VaultError.syncStateDamaged

    }

    func storeSyncState(_ state: SyncState, key: SecretBytes, in row: SyncStateRow?) throws {
        let row = row ?? context.insert(SyncStateRow.self)
        let encoded = try state.stored()
        // Unchanged, it is not written: a sync with nothing to do writes nothing.
        if row.state != encoded { row.state = encoded }
        let key = key.withUnsafeBytes { Data($0).base64EncodedString() }
        if row.key != key { row.key = key }
    }

    /// Saves what a sync changed, authored so that the next sync does not send it again.
    func saveSyncChanges() throws {
        context.transactionAuthor = Self.syncAuthor
        defer { context.transactionAuthor = nil }
        do {
            try updateNameKeys()
            try context.save()
        } catch {
            context.rollback()
            throw VaultError.wrapping(error)
        }
    }

    /// Whether anything was saved since sync last read the history (`token`).
    func hasUnsyncedHistory(after token: PersistentHistoryToken?) throws -> Bool {
        try verifyHistoryForRead()
        return try Self.wrapErrors { try !context.fetchHistory(after: token).isEmpty }
    }

    /// Before the history is read to find what to send: every row of it, as the integrity
    /// record covers it (each history table one bucket; sync prunes what it sent, so this is
    /// what changed since), so a row deleted or changed there cannot keep a change from being sent.
    func verifyHistoryForRead() throws {
        try awaitPendingVerification()
        guard verifiesEachRead, let integrityRecord else { return }
        // A record written before the history was covered (on a vault that could not be written
        // at its opening) vouches for none of it: the whole vault is checked before anything is sent.
        if try Self.wrapErrors({ try coordinator.performRead { integrityRecord.predatesHistory(in: $0) } }) { return }
        let authentication = integrityRecord.rows
        let found = problems(found: try Self.problems {
            try coordinator.performRead { transaction in
                var rows: [StoredRowKey] = []
                for store in authentication.stores {
                    for table in RowAuthentication.Store.historyTables.keys.sorted() {
                        let qualified = try transaction.qualified(table, storeIdentifier: store.identifier)
                        try transaction.forEachRow("SELECT Z_PK FROM \(qualified)") { cells in
                            guard case .integer(let key) = cells.first else { return }
                            rows.append(StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: key))
                        }
                    }
                }
                return try authentication.verify(
                    rows: rows, lookups: authentication.stores.flatMap(\.historyLookups), in: transaction)
            }
        })
        guard !found.isEmpty else { return }
        let everything = try integrityProblems()
        try refuse(everything.isEmpty ? found : everything)
    }

    /// Drops the history sync has read (up to `token`) and the saves of sync itself right
    /// after it, so the next sync neither reads them nor records a new token for them. A save
    /// by another process that came in between stays.
    func pruneSyncedHistory(upTo token: PersistentHistoryToken?) {
        guard let token else { return }
        var last = token
        for transaction in (try? context.fetchHistory(after: token)) ?? [] {
            guard transaction.author == Self.syncAuthor else { break }
            last = transaction.token
        }
        // The newest transaction read stays (without its changes), tagged: the history's key
        // counter put back cannot number new saves at or below the token, out of sync's sight.
        _ = try? context.deleteHistory(before: last, keepingNewestUpTo: token)
    }
}

/// The vault's notes, entries and categories by sync identity.
final class SyncIndex {
    var objects: [String: ManagedObject] = [:]

    init() {}

    init(context: ManagedObjectContext) throws {
        for entity in Vault.syncedEntities {
            var request = FetchRequest<ManagedObject>(entityName: entity)
            request.propertiesToFetch = [SyncKeys.uuid]
            for object in try context.fetch(request) {
                if let id = Vault.syncIdentity(of: object) { objects[id] = object }
            }
        }
    }
}

func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func hexBytes(_ text: String) -> [UInt8]? {
    guard text.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
        bytes.append(byte)
        index = next
    }
    return bytes
}

/// This machine's host name, the default device name.
func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count) == 0 else { return "this machine" }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.isEmpty ? "this machine" : name
}
