import Foundation
import GRDB

/// A row of a store, named by its table and primary key.
public struct StoredRowKey: Hashable, Sendable {
    /// The store's identifier (its `Z_UUID`).
    public let storeIdentifier: String
    /// The root entity's table, such as `ZNOTE`.
    public let table: String
    /// The row's `Z_PK`.
    public let primaryKey: Int64

    /// A row of the store with `storeIdentifier`.
    public init(storeIdentifier: String, table: String, primaryKey: Int64) {
        self.storeIdentifier = storeIdentifier
        self.table = table
        self.primaryKey = primaryKey
    }
}

/// A SQLite value as stored, whatever the column was meant to hold.
public enum StoredCell: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob(data)
        }
    }

    var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let number): return number.databaseValue
        case .real(let number): return number.databaseValue
        case .text(let text): return text.databaseValue
        case .blob(let data): return data.databaseValue
        }
    }
}

/// SQL inside the transaction of a save, for a ``StoreWriteObserver``.
public struct StoreTransaction {
    let db: Database
    /// Each store's schema name on the connection, by store identifier.
    let schemaNames: [String: String]

    init(db: Database, coordinator: PersistentStoreCoordinator) {
        self.db = db
        schemaNames = coordinator.schemaNamesByStoreIdentifier
    }

    init(db: Database, schemaNames: [String: String]) {
        self.db = db
        self.schemaNames = schemaNames
    }

    /// `table` of the store with `storeIdentifier`, qualified for SQL in this transaction.
    public func qualified(_ table: String, storeIdentifier: String) throws -> String {
        guard let schemaName = schemaNames[storeIdentifier] else {
            throw ObjectGraphError(code: .objectNotFound, message: "no store with identifier \(storeIdentifier)")
        }
        return PersistentStore.qualified(table, schemaName: schemaName)
    }

    /// The metadata of the store with `storeIdentifier` as this transaction sees it (another
    /// process may have changed it since the coordinator read it).
    ///
    /// - throws: ``ObjectGraphError`` 134061 when `Z_METADATA` holds no readable property list.
    public func metadata(ofStore storeIdentifier: String) throws -> [String: Any] {
        let table = try qualified("Z_METADATA", storeIdentifier: storeIdentifier)
        guard let plist = try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM \(table)"),
              let metadata = BinaryPropertyList.metadata(from: plist)
        else {
            throw ObjectGraphError.damagedRow(
                storeName: storeIdentifier, entity: "Z_METADATA", primaryKey: nil,
                "Z_PLIST is not a readable property list")
        }
        return metadata
    }

    /// Runs one SQL statement, prepared once per connection: an observer runs the same few
    /// statements for every row a save writes, and compiling them each time was most of its cost.
    public func execute(_ sql: String, _ arguments: [StoredCell] = []) throws {
        try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(arguments.map(\.databaseValue)))
    }

    /// Every row `sql` selects, each as its cells in column order. Prepared once per connection
    /// too: all rows are read before anything else can run the same statement.
    public func rows(_ sql: String, _ arguments: [StoredCell] = []) throws -> [[StoredCell]] {
        var rows: [[StoredCell]] = []
        try forEachRow(try db.cachedStatement(sql: sql), arguments) { rows.append($0) }
        return rows
    }

    /// Calls `body` with each row `sql` selects, one at a time: a whole table is never held.
    public func forEachRow(_ sql: String, _ arguments: [StoredCell] = [], _ body: ([StoredCell]) throws -> Void) throws
    {
        // Not cached: `body` may run the same query while this one is still being stepped.
        try forEachRow(try db.makeStatement(sql: sql), arguments, body)
    }

    /// ``forEachRow(_:_:_:)`` for each of `argumentLists` in turn, the statement prepared once.
    func forEachRow(
        _ sql: String, eachOf argumentLists: [[StoredCell]], _ body: ([StoredCell]) throws -> Void
    ) throws {
        guard !argumentLists.isEmpty else { return }
        let statement = try db.makeStatement(sql: sql)
        for arguments in argumentLists { try forEachRow(statement, arguments, body) }
    }

    private func forEachRow(_ statement: Statement, _ arguments: [StoredCell], _ body: ([StoredCell]) throws -> Void)
        throws
    {
        let columns = statement.columnCount
        // Straight from SQLite's columns: decoding through `Row` was half the cost of verifying a vault.
        try db.forEachRow(of: statement, arguments: arguments.map(\.databaseValue)) { row in
            try body((0..<columns).map { row.storedCell(at: $0) })
        }
    }
}

/// Told of every row a save writes, inside its transaction: before (rows as they were) and
/// after (as they are, deleted rows gone), so it can keep derived data, such as an
/// integrity record, in step within the same commit. A thrown error rolls the save back.
public protocol StoreWriteObserver: AnyObject {
    /// Rows about to be updated or deleted, as they are before the save writes them.
    func rowsWillChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws
    /// Rows the save inserted, updated or deleted, as they are now (deleted ones gone).
    func rowsDidChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws
    /// Rows about to be inserted under keys just handed out (no row holds them yet).
    func rowsWillBeInserted(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws
}

extension StoreWriteObserver {
    /// By default, as rows about to change.
    public func rowsWillBeInserted(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        try rowsWillChange(rows, in: transaction)
    }
}

extension PersistentStoreCoordinator {
    /// Calls the observer, if any, with the rows of `objects`.
    func notifyRowsWillChange(_ keys: [StoredRowKey], _ db: Database) throws {
        guard let writeObserver, !keys.isEmpty else { return }
        try writeObserver.rowsWillChange(keys, in: StoreTransaction(db: db, coordinator: self))
    }

    func notifyRowsWillBeInserted(_ keys: [StoredRowKey], _ db: Database) throws {
        guard let writeObserver, !keys.isEmpty else { return }
        try writeObserver.rowsWillBeInserted(keys, in: StoreTransaction(db: db, coordinator: self))
    }

    /// Also for a save that changed metadata only: the observer may keep records of its own.
    func notifyRowsDidChange(_ keys: [StoredRowKey], _ db: Database) throws {
        guard let writeObserver else { return }
        try writeObserver.rowsDidChange(keys, in: StoreTransaction(db: db, coordinator: self))
    }

    /// Runs `body` in a write transaction that observers see as one (for changes made outside a save).
    public func performWrite(_ body: (StoreTransaction) throws -> Void) throws {
        try wrapStoreErrors(.saveFailed, "cannot write") {
            try write { db in try body(StoreTransaction(db: db, coordinator: self)) }
        }
    }

    /// Runs `body` in a read transaction, which holds every store's shared lock from its start
    /// (taken in the order a save commits the stores, so a read never waits on a save that waits on it).
    public func performRead<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        try wrapStoreErrors(.saveFailed, "cannot read") {
            try read { db in try body(StoreTransaction(db: db, coordinator: self)) }
        }
    }
}
