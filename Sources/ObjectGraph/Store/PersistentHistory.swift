import Foundation
import GRDB

/// Where a store's history stands: per store, the number of the last transaction seen, as
/// Core Data's `NSPersistentHistoryToken`. Tokens are values an application keeps (they are
/// `Codable`) to fetch what happened after them.
public struct PersistentHistoryToken: Hashable, Codable, Sendable, CustomStringConvertible {
    /// Store identifier → number of the last transaction of that store the token covers.
    public internal(set) var transactionNumbers: [String: Int64]

    public init() { transactionNumbers = [:] }

    init(_ numbers: [String: Int64]) { transactionNumbers = numbers }

    /// The token that covers this one and `other`.
    public func merged(with other: PersistentHistoryToken) -> PersistentHistoryToken {
        PersistentHistoryToken(transactionNumbers.merging(other.transactionNumbers, uniquingKeysWith: max))
    }

    public var description: String {
        transactionNumbers.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }
}

/// One save's changes to one store, as Core Data's `NSPersistentHistoryTransaction`.
public struct PersistentHistoryTransaction: @unchecked Sendable {
    /// The store the transaction was written to.
    public let storeIdentifier: String
    /// The transaction's number in its store: increasing, never reused (also after deletion).
    public let transactionNumber: Int64
    /// The token right after this transaction, covering every store's transactions before it
    /// in the fetch's order: fetching after it returns what came later.
    public internal(set) var token: PersistentHistoryToken
    /// When the save committed.
    public let timestamp: Date
    /// The saving context's ``ManagedObjectContext/transactionAuthor``.
    public let author: String?
    /// The saving context's ``ManagedObjectContext/name``.
    public let contextName: String?
    /// The saving process, as a decimal process ID.
    public let processID: String?
    /// What the save changed, one entry per object.
    public let changes: [PersistentHistoryChange]
}

/// One object inserted, updated or deleted by a transaction, as `NSPersistentHistoryChange`.
public struct PersistentHistoryChange: @unchecked Sendable {
    /// Whether the object was inserted, updated or deleted (Core Data's numbers).
    public enum ChangeType: Int, Sendable {
        case insert = 0, update = 1, delete = 2
    }

    /// Whether the object was inserted, updated or deleted.
    public let changeType: ChangeType
    /// The object changed.
    public let changedObjectID: ObjectID
    /// For an update: the properties it changed (attributes and relationships).
    public let updatedProperties: Set<String>?
    /// For a delete: the values of the attributes the model preserves after deletion
    /// (``AttributeDescription/preservesValueInHistoryOnDeletion``), as stored: a
    /// Transformable value keeps its encoded bytes, so an encrypted field stays encrypted.
    public let tombstone: [String: Any]?
}

/// The tables of a store's history, named and laid out as Core Data's: `ATRANSACTION` (one row
/// a save, strings interned in `ATRANSACTIONSTRING`), `ACHANGE` (one row a changed object, the
/// changed properties as a bitmask over the entity's properties in `ZCOLUMNS`). One departure:
/// tombstone values are one binary property list in `ZTOMBSTONE` rather than numbered columns.
enum PersistentHistoryTables {
    // Core Data's entity numbers for its history tables.
    static let changeEntity: Int64 = 16001
    static let transactionEntity: Int64 = 16002
    static let stringEntity: Int64 = 16003
    /// The columns of `ATRANSACTION` naming a row of `ATRANSACTIONSTRING`.
    static let stringColumns = ["ZAUTHORTS", "ZBUNDLEIDTS", "ZCONTEXTNAMETS", "ZPROCESSIDTS"]
    /// Each history table's entity number, which every row of it holds in `Z_ENT`.
    static let entityNumbers = [
        ("ATRANSACTION", transactionEntity), ("ACHANGE", changeEntity), ("ATRANSACTIONSTRING", stringEntity),
    ]

    static func createStatements(for store: PersistentStore) -> [String] {
        [
            // AUTOINCREMENT: a transaction number is never reused once its history is deleted.
            "CREATE TABLE IF NOT EXISTS \(store.qualified("ATRANSACTION")) (Z_PK INTEGER PRIMARY KEY AUTOINCREMENT, "
                + "Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER, ZBUNDLEIDTS INTEGER, ZCONTEXTNAMETS INTEGER, "
                + "ZPROCESSIDTS INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR, ZBUNDLEID VARCHAR, ZCONTEXTNAME VARCHAR, "
                + "ZPROCESSID VARCHAR, ZQUERYGEN BLOB)",
            "CREATE TABLE IF NOT EXISTS \(store.qualified("ACHANGE")) (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, "
                + "Z_OPT INTEGER, ZCHANGETYPE INTEGER, ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, "
                + "ZCOLUMNS BLOB, ZTOMBSTONE BLOB)",
            "CREATE INDEX IF NOT EXISTS \(store.qualified("ACHANGE_ZTRANSACTIONID")) ON ACHANGE (ZTRANSACTIONID)",
            "CREATE TABLE IF NOT EXISTS \(store.qualified("ATRANSACTIONSTRING")) (Z_PK INTEGER PRIMARY KEY, "
                + "Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR NOT NULL UNIQUE)",
        ]
    }

    static func exist(in store: PersistentStore, _ db: Database) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT COUNT(*) > 0 FROM \(store.qualified("sqlite_master")) WHERE type = 'table' "
                + "AND name = 'ATRANSACTION'") ?? false
    }

    /// The number of the store's last transaction, 0 before the first.
    static func lastTransactionNumber(of store: PersistentStore, _ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(store.qualified("ATRANSACTION"))")
            ?? Int64.fetchOne(
                db, sql: "SELECT seq FROM \(store.qualified("sqlite_sequence")) WHERE name = 'ATRANSACTION'")
            ?? 0
    }

    /// The bitmask of `keys` over the entity's properties (attributes, then relationships).
    static func columnMask(_ keys: Set<String>, of entity: EntityDescription) -> Data {
        let names = entity.propertyLayout.keys
        var bytes = [UInt8](repeating: 0, count: (names.count + 7) / 8)
        for (index, name) in names.enumerated() where keys.contains(name) { bytes[index / 8] |= 1 << (index % 8) }
        return Data(bytes)
    }

    static func properties(inMask mask: Data, of entity: EntityDescription) -> Set<String> {
        let names = entity.propertyLayout.keys
        let bytes = [UInt8](mask)
        return Set(
            names.indices.filter { $0 / 8 < bytes.count && bytes[$0 / 8] & (1 << ($0 % 8)) != 0 }.map { names[$0] })
    }
}

extension PersistentStoreCoordinator {
    /// Posted when another connection (another process, or another coordinator) commits to a
    /// store whose ``StoreOptions/postsRemoteChangeNotifications`` is on, as Core Data's
    /// `NSPersistentStoreRemoteChange`. The object is the coordinator; `userInfo` holds the store's
    /// identifier (``remoteChangeStoreIdentifierKey``) and, with history tracking on, the
    /// history token after the commit (``remoteChangeHistoryTokenKey``). Posted on the
    /// coordinator's notification queue, never on the caller's thread.
    public static let remoteChangeNotification = Notification.Name("ObjectGraphPersistentStoreRemoteChange")
    public static let remoteChangeStoreIdentifierKey = "storeUUID"
    public static let remoteChangeHistoryTokenKey = "historyToken"

    /// The token of the stores' history as it stands now (every store tracking history, or
    /// those given), as Core Data's `currentPersistentHistoryToken(fromStores:)`.
    public func currentPersistentHistoryToken(fromStores stores: [PersistentStore]? = nil) throws
        -> PersistentHistoryToken {
        let tracking = (stores ?? persistentStores).filter(\.tracksHistory)
        return try read { db in
            PersistentHistoryToken(Dictionary(uniqueKeysWithValues: try tracking.map {
                ($0.identifier, try PersistentHistoryTables.lastTransactionNumber(of: $0, db))
            }))
        }
    }
}

extension PersistentStoreCoordinator {
    /// Gives each store that tracks history and holds no transaction up to `token` an empty one
    /// numbered as `token` says, in `transaction`: SQLite numbers new transactions past the
    /// largest it holds, so with that row under an integrity record the key counter cannot be put
    /// back to number them at or below the token (as ``ManagedObjectContext/deleteHistory(before:keepingNewestUpTo:)``
    /// keeps one when it prunes). For a history pruned before it kept one.
    public func keepHistoryNumbered(after token: PersistentHistoryToken, in transaction: StoreTransaction) throws {
        for store in persistentStores where store.tracksHistory {
            guard let number = token.transactionNumbers[store.identifier], number > 0 else { continue }
            let table = try transaction.qualified("ATRANSACTION", storeIdentifier: store.identifier)
            guard try transaction.rows("SELECT 1 FROM \(table) WHERE Z_PK <= ? LIMIT 1", [.integer(number)]).isEmpty
            else { continue }
            try transaction.execute(
                "INSERT INTO \(table) (Z_PK, Z_ENT, Z_OPT, ZTIMESTAMP) "
                    + "VALUES (?, \(PersistentHistoryTables.transactionEntity), 1, ?)",
                [.integer(number), .real(Date().timeIntervalSinceReferenceDate)])
        }
    }
}

extension ManagedObjectContext {
    // MARK: - Persistent history

    /// The transactions committed after `token` (all of them without one) to the stores that
    /// track history, oldest first, each with its changes, as Core Data's
    /// `NSPersistentHistoryChangeRequest.fetchHistory(after:)`.
    ///
    /// - throws: the store's error.
    public func fetchHistory(after token: PersistentHistoryToken?) throws -> [PersistentHistoryTransaction] {
        let stores = coordinator.persistentStores.filter(\.tracksHistory)
        return try wrapStoreErrors(.objectNotFound, "cannot read the stores' history") {
            try coordinator.read { db in
                let byStore = try stores.map {
                    try history(of: $0, after: token?.transactionNumbers[$0.identifier] ?? 0, db)
                }
                return Self.interleaved(byStore, after: token ?? PersistentHistoryToken())
            }
        }
    }

    /// Each store's transactions in their numbers' order, interleaved by time (a clock set back
    /// never reorders one store's), each token covering everything up to its transaction in
    /// every store, so a client may keep the last one it handled.
    static func interleaved(_ byStore: [[PersistentHistoryTransaction]], after token: PersistentHistoryToken)
        -> [PersistentHistoryTransaction] {
        var next = byStore.map { _ in 0 }
        var running = token
        var result: [PersistentHistoryTransaction] = []
        while let store = byStore.indices.filter({ next[$0] < byStore[$0].count })
            .min(by: { byStore[$0][next[$0]].timestamp < byStore[$1][next[$1]].timestamp }) {
            var transaction = byStore[store][next[store]]
            next[store] += 1
            running.transactionNumbers[transaction.storeIdentifier] = transaction.transactionNumber
            transaction.token = running
            result.append(transaction)
        }
        return result
    }

    /// Deletes the transactions up to and including `token` (all of them without one), as
    /// `NSPersistentHistoryChangeRequest.deleteHistory(before:)`; returns how many it deleted.
    /// Later transactions keep their numbers, so tokens stay valid. Names (authors, context
    /// names, process IDs) that only deleted transactions used are deleted with them. A write
    /// observer is told of every row deleted, as of a save's deletions.
    ///
    /// - parameter kept: keep each store's newest transaction up to this token (without its
    ///   changes), if any. SQLite numbers a new transaction past the largest it holds, whatever
    ///   its key counter says: with the kept row under an integrity record (``RowAuthentication``),
    ///   the counter cannot be put back to number new transactions at or below a token read
    ///   already, where a reader after that token would never see them.
    /// - throws: the store's error.
    @discardableResult
    public func deleteHistory(
        before token: PersistentHistoryToken?, keepingNewestUpTo kept: PersistentHistoryToken? = nil
    ) throws -> Int {
        let stores = coordinator.persistentStores.filter(\.tracksHistory)
        return try wrapStoreErrors(.saveFailed, "cannot delete the stores' history") {
            var deleted = 0
            try coordinator.write(stores: stores) { db in
                var rows: [StoredRowKey] = []
                for store in stores {
                    let limit = token.map { $0.transactionNumbers[store.identifier] ?? 0 } ?? Int64.max
                    let newest = try kept.flatMap { kept in
                        try Int64.fetchOne(
                            db, sql: "SELECT MAX(Z_PK) FROM \(store.qualified("ATRANSACTION")) WHERE Z_PK <= ?",
                            arguments: [min(limit, kept.transactionNumbers[store.identifier] ?? 0)])
                    }
                    // The names only deleted transactions use go too: one is interned per saving
                    // process, and a history kept since the last sync should not keep them all.
                    let kept = PersistentHistoryTables.stringColumns.map {
                        "SELECT \($0) FROM \(store.qualified("ATRANSACTION")) WHERE (Z_PK > ? OR Z_PK = ?) "
                            + "AND \($0) IS NOT NULL"
                    }.joined(separator: " UNION ")
                    let keptRow = newest ?? 0
                    let selections = [
                        ("ACHANGE", "WHERE ZTRANSACTIONID <= ?", [limit]),
                        ("ATRANSACTION", "WHERE Z_PK <= ? AND Z_PK != ?", [limit, keptRow]),
                        ("ATRANSACTIONSTRING", "WHERE Z_PK NOT IN (\(kept))",
                         Array(repeating: [limit, keptRow], count: PersistentHistoryTables.stringColumns.count)
                            .flatMap { $0 }),
                    ]
                    for (table, condition, arguments) in selections {
                        let keys = try Int64.fetchAll(
                            db, sql: "SELECT Z_PK FROM \(store.qualified(table)) \(condition)",
                            arguments: StatementArguments(arguments))
                        rows += keys.map {
                            StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: $0)
                        }
                    }
                }
                // As a save's deletions: each row must be as its tag says, then the tags go with them.
                try coordinator.notifyRowsWillChange(rows, db)
                for row in rows {
                    guard let store = stores.first(where: { $0.identifier == row.storeIdentifier }) else { continue }
                    try db.executeCached(sql: "DELETE FROM \(store.qualified(row.table)) WHERE Z_PK = ?",
                                         values: [row.primaryKey.databaseValue])
                    if row.table == "ATRANSACTION" { deleted += 1 }
                }
                if !rows.isEmpty { try coordinator.notifyRowsDidChange(rows, db) }
            }
            return deleted
        }
    }

    private func history(of store: PersistentStore, after number: Int64, _ db: Database) throws
        -> [PersistentHistoryTransaction] {
        let strings = try Dictionary(uniqueKeysWithValues: Row.fetchAll(
            db, sql: "SELECT Z_PK, ZNAME FROM \(store.qualified("ATRANSACTIONSTRING"))"
        ).map { (row: Row) -> (Int64, String) in (row[0], row[1]) })
        var changesByTransaction: [Int64: [PersistentHistoryChange]] = [:]
        let entities = Dictionary(store.entities.map { (Int64($0.entityNumber), $0) }) { first, _ in first }
        try db.forEachRow(
            sql: "SELECT ZTRANSACTIONID, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZCOLUMNS, ZTOMBSTONE FROM "
                + "\(store.qualified("ACHANGE")) WHERE ZTRANSACTIONID > ? ORDER BY Z_PK",
            arguments: [number.databaseValue]
        ) { row in
            guard let transaction = row.int64(at: 0), let typeNumber = row.int64(at: 1),
                  let type = PersistentHistoryChange.ChangeType(rawValue: Int(typeNumber)),
                  let entityNumber = row.int64(at: 2), let entity = entities[entityNumber],
                  let primaryKey = row.int64(at: 3)
            else {
                throw ObjectGraphError(code: .undecodableValue,
                                       message: "\(store.displayName): a row of its history (ACHANGE) is damaged")
            }
            let objectID = objectID(of: entity, storeIdentifier: store.identifier, kind: .permanent, number: primaryKey)
            let tombstone = try Data.fromDatabaseValue(row.databaseValue(at: 5)).map { data -> [String: Any] in
                guard
                    let values = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
                      let typed = Self.typedTombstone(values, of: entity)
                else {
                    throw ObjectGraphError(code: .undecodableValue,
                                           message: "\(store.displayName): a tombstone of its history is damaged")
                }
                return typed
            }
            changesByTransaction[transaction, default: []].append(PersistentHistoryChange(
                changeType: type, changedObjectID: objectID,
                updatedProperties: type == .update
                    ? PersistentHistoryTables.properties(
                        inMask: Data.fromDatabaseValue(row.databaseValue(at: 4)) ?? Data(), of: entity) : nil,
                tombstone: tombstone))
        }
        return try Row.fetchAll(
            db, sql: "SELECT Z_PK, ZTIMESTAMP, ZAUTHORTS, ZCONTEXTNAMETS, ZPROCESSIDTS FROM "
                + "\(store.qualified("ATRANSACTION")) WHERE Z_PK > ? ORDER BY Z_PK", arguments: [number]
        ).map { row in
            let number: Int64 = row[0]
            return PersistentHistoryTransaction(
                storeIdentifier: store.identifier, transactionNumber: number,
                token: PersistentHistoryToken([store.identifier: number]),
                timestamp: Date(timeIntervalSinceReferenceDate: row[1] ?? 0),
                author: (row[2] as Int64?).flatMap { strings[$0] },
                contextName: (row[3] as Int64?).flatMap { strings[$0] },
                processID: (row[4] as Int64?).flatMap { strings[$0] },
                changes: changesByTransaction[number] ?? [])
        }
    }

    /// One change row of the history: what happened to which row.
    struct HistoryRow {
        var type: PersistentHistoryChange.ChangeType
        var entityNumber: Int
        var primaryKey: Int64
        /// The changed attributes' mask (updates), else NULL.
        var columns: DatabaseValue = .null
        /// The preserved attributes (deletes), else NULL.
        var tombstone: DatabaseValue = .null
    }

    /// Records this save in the history of each store that tracks it: one transaction a store,
    /// one change an object. Runs inside the save's transaction, so history and rows commit together.
    func recordHistory(inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject],
                       cascaded: [CascadedRows] = [], _ db: Database) throws {
        guard coordinator.persistentStores.contains(where: \.tracksHistory) else { return }
        var rowsByStore: [ObjectIdentifier: [HistoryRow]] = [:]
        for (type, objects) in [(PersistentHistoryChange.ChangeType.insert, inserted), (.update, updated),
                                (.delete, deleted)] {
            for object in objects {
                let store = try coordinator.store(for: object.entity.rootEntity)
                guard store.tracksHistory, let primaryKey = primaryKey(of: object) else { continue }
                var row = HistoryRow(type: type, entityNumber: object.entity.entityNumber, primaryKey: primaryKey)
                if type == .update {
                    row.columns = PersistentHistoryTables.columnMask(object.changedKeys, of: object.entity)
                        .databaseValue
                } else if type == .delete {
                    row.tombstone = try tombstoneValues(of: object, store: store, primaryKey: primaryKey)
                }
                rowsByStore[ObjectIdentifier(store), default: []].append(row)
            }
        }
        // Rows a store cascade deleted keep no tombstone (``storeCascade(of:_:)``).
        for rows in cascaded where rows.store.tracksHistory {
            for (entityNumber, primaryKey) in zip(rows.entityNumbers, rows.primaryKeys) {
                rowsByStore[ObjectIdentifier(rows.store), default: []].append(
                    HistoryRow(type: .delete, entityNumber: entityNumber, primaryKey: primaryKey))
            }
        }
        for store in coordinator.persistentStores {
            try writeHistory(rowsByStore[ObjectIdentifier(store)] ?? [], store: store, db)
        }
    }

    /// Writes one transaction of `rows` to the history of `store`, if it tracks history and
    /// there is a change.
    func writeHistory(_ rows: [HistoryRow], store: PersistentStore, _ db: Database) throws {
        guard store.tracksHistory, !rows.isEmpty else { return }
        // The rows written, for the write observer: history an integrity record covers is tagged
        // too. Told in parts, so an import's history is not held twice more in keys.
        var written: [StoredRowKey] = []
        func tellObserver() throws {
            // A key handed out again (a row deleted outside, and its key counter) must find no tag left.
            try coordinator.notifyRowsWillBeInserted(written, db)
            try coordinator.notifyRowsDidChange(written, db)
            written.removeAll(keepingCapacity: true)
        }
        func wrote(_ table: String) {
            written.append(
                StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: db.lastInsertedRowID))
        }
        let intern = { (text: String?) throws -> Int64? in
            guard let text else { return nil }
            try db.executeCached(
                sql: "INSERT OR IGNORE INTO \(store.qualified("ATRANSACTIONSTRING")) (Z_ENT, Z_OPT, ZNAME) "
                    + "VALUES (\(PersistentHistoryTables.stringEntity), 1, ?)", values: [text.databaseValue])
            if db.changesCount > 0 { wrote("ATRANSACTIONSTRING") }
            return try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT Z_PK FROM \(store.qualified("ATRANSACTIONSTRING")) WHERE ZNAME = ?"),
                arguments: [text])
        }
        try db.executeCached(
            sql: "INSERT INTO \(store.qualified("ATRANSACTION")) (Z_ENT, Z_OPT, ZAUTHORTS, ZCONTEXTNAMETS, "
                + "ZPROCESSIDTS, ZTIMESTAMP) VALUES (\(PersistentHistoryTables.transactionEntity), 1, ?, ?, ?, ?)",
            values: [try intern(transactionAuthor).databaseValue, try intern(name).databaseValue,
                     try intern(String(getpid())).databaseValue,
                     Date().timeIntervalSinceReferenceDate.databaseValue])
        let transaction = db.lastInsertedRowID
        wrote("ATRANSACTION")
        let insertChange = "INSERT INTO \(store.qualified("ACHANGE")) (Z_ENT, Z_OPT, ZCHANGETYPE, ZENTITY, "
            + "ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS, ZTOMBSTONE) "
            + "VALUES (\(PersistentHistoryTables.changeEntity), 1, ?, ?, ?, ?, ?, ?)"
        for row in rows {
            try db.executeCached(sql: insertChange, values: [
                row.type.rawValue.databaseValue, row.entityNumber.databaseValue, row.primaryKey.databaseValue,
                transaction.databaseValue, row.columns, row.tombstone,
            ])
            wrote("ACHANGE")
            if written.count == Self.historyRowsToldAtOnce { try tellObserver() }
        }
        if !written.isEmpty { try tellObserver() }
    }

    /// How many history rows a write observer is told of at once.
    static let historyRowsToldAtOnce = 10_000

    /// Tombstone values as the attributes' types read them (a Transformable one stays encoded);
    /// nil when one cannot be read.
    private static func typedTombstone(_ values: [String: Any], of entity: EntityDescription) -> [String: Any]? {
        var typed: [String: Any] = [:]
        for (key, value) in values {
            guard let attribute = entity.attribute(named: key) else { return nil }
            let stored: DatabaseValue
            switch value {
            case let data as Data: stored = data.databaseValue
            case let text as String: stored = text.databaseValue
            case let number as Int64: stored = number.databaseValue
            case let number as Int: stored = number.databaseValue
            case let number as Double: stored = number.databaseValue
            default: return nil
            }
            if attribute.type == .transformable {
                typed[key] = value
            } else {
                guard let decoded = try? StoredValues.value(stored, type: attribute.type) else { return nil }
                typed[key] = decoded
            }
        }
        return typed
    }

    /// The preserved attributes of a deleted object, as stored, in a binary property list.
    private func tombstoneValues(of object: ManagedObject, store: PersistentStore, primaryKey: Int64) throws
        -> DatabaseValue {
        var stored: [(String, DatabaseValue)] = []
        for (position, column) in object.entity.storedColumns.enumerated()
        where object.entity.attribute(named: column.name)?.preservesValueInHistoryOnDeletion == true {
            let slot = object.entity.storedColumnSlots[position]
            stored.append(
                (column.name, try storedValue(of: object, column, slot: slot, store: store, primaryKey: primaryKey)))
        }
        return try Self.tombstone(stored)
    }

    /// Attributes' stored values (by name) as a tombstone: a binary property list without the
    /// NULL ones; NULL when none is left.
    static func tombstone(_ stored: [(String, DatabaseValue)]) throws -> DatabaseValue {
        var values: [String: Any] = [:]
        for (name, value) in stored {
            switch value.storage {
            case .null: continue
            case .int64(let number): values[name] = number
            case .double(let number): values[name] = number
            case .string(let text): values[name] = text
            case .blob(let data): values[name] = data
            }
        }
        guard !values.isEmpty else { return .null }
        return try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0).databaseValue
    }
}

/// Watches one store file for commits made through other connections and announces them with
/// ``PersistentStoreCoordinator/remoteChangeNotification``. SQLite tells a connection that the
/// file changed (`PRAGMA data_version`), not who changed it: this coordinator's own commits are
/// announced too, as Core Data's are; the transactions' author tells them apart.
final class RemoteChangeWatcher: @unchecked Sendable {
    /// The store watched (held weakly: the coordinator holds its stores).
    private(set) weak var store: PersistentStore?
    private let timer: DispatchSourceTimer
    // Touched only on the timer's queue.
    private let connection: DatabaseQueue
    private var lastVersion: Int64?

    init(store: PersistentStore, path: String, interval: TimeInterval, coordinator: PersistentStoreCoordinator) throws {
        var configuration = Configuration()
        configuration.readonly = true
        connection = try DatabaseQueue(path: path, configuration: configuration)
        self.store = store
        let identifier = store.identifier
        let tracksHistory = store.tracksHistory
        // Read now: a commit made before the first tick is announced too.
        lastVersion = try connection.inDatabase { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") }
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "ObjectGraph.RemoteChangeWatcher"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self, weak coordinator] in
            guard let self, let coordinator else { return }
            // A busy or vanished file is tried again at the next tick.
            guard let (version, token) = try? self.connection.inDatabase({ db -> (Int64, Int64?) in
                let version = try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0
                let last = tracksHistory ? try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM ATRANSACTION") : nil
                return (version, last)
            }) else { return }
            defer { self.lastVersion = version }
            guard let previous = self.lastVersion, previous != version else { return }
            var userInfo: [String: Any] = [PersistentStoreCoordinator.remoteChangeStoreIdentifierKey: identifier]
            if let token {
                userInfo[PersistentStoreCoordinator.remoteChangeHistoryTokenKey] =
                    PersistentHistoryToken([identifier: token])
            }
            NotificationCenter.default.post(
                name: PersistentStoreCoordinator.remoteChangeNotification, object: coordinator, userInfo: userInfo)
        }
        timer.resume()
    }

    deinit { timer.cancel() }
}
