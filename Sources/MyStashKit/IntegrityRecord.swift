import Foundation
import ObjectGraph
import StashCrypto

/// The keyed integrity record of a vault (FORMAT.md, "Integrity record"): a tag per row,
/// HMAC-SHA256 under a key derived from the data key over everything stored in the row
/// (version, relationships, ciphertexts, plain values), and per store a record holding the
/// count and sum of the tags, the store's generation and the other store's, itself
/// authenticated. Each save updates the tags of the rows it writes and both records, in
/// its own transaction: O(changed rows).
final class IntegrityRecord: StoreWriteObserver {
    static let tagTable = "MYSTASH_ROW_TAG"
    static let recordTable = "MYSTASH_RECORD"
    static let keyInfo = Array("MyStash integrity v1".utf8)

    /// One store of the vault: its identity, file name and the tables the record covers.
    struct Store {
        let identifier: String
        let fileName: String
        /// Root entity table → entity name, such as `ZSYSTEM` → `System`.
        let tables: [String: String]
    }

    /// A store's record as stored.
    struct Record: Equatable {
        /// The model version the tags were computed under (a migration rewrites rows).
        var model: String
        var generation: Int64
        var peerGeneration: Int64
        var rowCount: Int64
        var tagSum: [UInt8]
    }

    let stores: [Store]
    /// The current model's version identifier.
    let model: String
    /// The serialized key slot the data key came from: a record this key cannot verify while
    /// the stores hold another slot was written under a key changed since, not tampered with.
    var keySlot: Data
    /// The generation of each store the last save wrote: found on disk after the save failed,
    /// the save's commit took effect before the failure.
    private(set) var lastWrittenGenerations: [String: Int64] = [:]
    private let key: HMAC.Key

    init(dataKey: SecretBytes, keySlot: KeySlot, stores: [Store], model: String) throws {
        self.stores = stores
        self.model = model
        self.keySlot = Data(keySlot.serialized)
        key = try HMAC.Key(.sha256, bytes: try HKDF.sha256(key: dataKey, info: Self.keyInfo, length: 32).bytes)
    }

    private func store(_ identifier: String) -> Store? { stores.first { $0.identifier == identifier } }

    /// The statements creating the record's tables, each table named through `qualified`.
    static func tableDefinitions(_ qualified: (String) throws -> String) rethrows -> [String] {
        [
            "CREATE TABLE IF NOT EXISTS \(try qualified(tagTable)) (ZTABLE TEXT NOT NULL, ZPK INTEGER NOT NULL, "
                + "ZTAG BLOB NOT NULL, PRIMARY KEY (ZTABLE, ZPK)) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS \(try qualified(recordTable)) (ZID INTEGER PRIMARY KEY CHECK (ZID = 1), "
                + "ZMODEL TEXT, ZGENERATION INTEGER, ZPEERGENERATION INTEGER, ZROWCOUNT INTEGER, ZTAGSUM BLOB, "
                + "ZMAC BLOB)",
        ]
    }

    // MARK: - Tags

    /// The tag of a row: its store, table, and every column's name and stored value.
    func tag(store: Store, table: String, columns: [String], cells: [StoredCell]) throws -> [UInt8] {
        // Built in one buffer: this runs for every row each time a vault is verified.
        var message: [UInt8] = []
        message.reserveCapacity(64 + columns.count * 24 + cells.reduce(0) { $0 + Self.encodedSize($1) })
        Self.appendField(&message, "row".utf8)
        Self.appendField(&message, store.identifier.utf8)
        Self.appendField(&message, table.utf8)
        for (name, cell) in zip(columns, cells) {
            Self.appendField(&message, name.utf8)
            Self.append(cell, to: &message)
        }
        return try key.authenticationCode(of: message)
    }

    func mac(of record: Record, store: Store) throws -> [UInt8] {
        var message: [UInt8] = []
        Self.appendField(&message, "record".utf8)
        Self.appendField(&message, store.identifier.utf8)
        Self.appendField(&message, store.fileName.utf8)
        Self.appendField(&message, record.model.utf8)
        for number in [record.generation, record.peerGeneration, record.rowCount] { Self.append(number, to: &message) }
        Self.appendField(&message, record.tagSum)
        return try key.authenticationCode(of: message)
    }

    /// Its length as a big-endian 64-bit integer, then the bytes.
    static func appendField<Bytes: Collection<UInt8>>(_ message: inout [UInt8], _ bytes: Bytes) {
        append(Int64(bytes.count), to: &message)
        message.append(contentsOf: bytes)
    }

    static func append(_ value: Int64, to message: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { message.append(contentsOf: $0) }
    }

    /// A type byte, then the value: the same bytes can never stand for two different cells.
    static func append(_ cell: StoredCell, to message: inout [UInt8]) {
        switch cell {
        case .null: message.append(0)
        case .integer(let number):
            message.append(1)
            append(number, to: &message)
        case .real(let number):
            message.append(2)
            append(Int64(bitPattern: number.bitPattern), to: &message)
        case .text(let text):
            message.append(3)
            appendField(&message, text.utf8)
        case .blob(let data):
            message.append(4)
            appendField(&message, data)
        }
    }

    private static func encodedSize(_ cell: StoredCell) -> Int {
        switch cell {
        case .null: return 1
        case .integer, .real: return 9
        case .text(let text): return 9 + text.utf8.count
        case .blob(let data): return 9 + data.count
        }
    }

    /// Sum of 256-bit big-endian numbers, modulo 2^256; `negating` subtracts instead.
    static func add(_ sum: [UInt8], _ tag: [UInt8], negating: Bool = false) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: 32)
        var carry = negating ? 1 : 0
        for index in (0..<32).reversed() {
            let addend = Int(negating ? ~tag[index] : tag[index])
            let total = Int(sum[index]) + addend + carry
            result[index] = UInt8(total & 0xFF)
            carry = total >> 8
        }
        return result
    }

    static let zeroSum = [UInt8](repeating: 0, count: 32)

    // MARK: - Reading what is stored

    func columns(of table: String, store: Store, in transaction: StoreTransaction) throws -> [String] {
        let info = try transaction.qualified("sqlite_master", storeIdentifier: store.identifier)
        let schema = String(info.dropLast("sqlite_master".count))
        return try transaction.rows("PRAGMA \(schema)table_info(\(table))").compactMap {
            if $0.count > 1, case .text(let name) = $0[1] { return name }
            return nil
        }
    }

    /// The row's tag as it is stored now, or nil when the row does not exist.
    func currentTag(_ row: StoredRowKey, store: Store, columns: [String], in transaction: StoreTransaction) throws
        -> [UInt8]?
    {
        let table = try transaction.qualified(row.table, storeIdentifier: store.identifier)
        guard
            let cells = try transaction.rows("SELECT * FROM \(table) WHERE Z_PK = ?", [.integer(row.primaryKey)]).first
        else { return nil }
        return try tag(store: store, table: row.table, columns: columns, cells: cells)
    }

    func recordedTag(_ row: StoredRowKey, in transaction: StoreTransaction) throws -> [UInt8]? {
        let tags = try transaction.qualified(Self.tagTable, storeIdentifier: row.storeIdentifier)
        guard
            case .blob(let data)? = try transaction.rows(
                "SELECT ZTAG FROM \(tags) WHERE ZTABLE = ? AND ZPK = ?",
                [.text(row.table), .integer(row.primaryKey)]
            ).first?.first
        else { return nil }
        return Array(data)
    }

    func hasRecord(_ store: Store, in transaction: StoreTransaction) throws -> Bool {
        try Self.exists(in: store, transaction)
    }

    /// Whether the store holds a record (without needing the key).
    static func exists(in store: Store, _ transaction: StoreTransaction) throws -> Bool {
        let master = try transaction.qualified("sqlite_master", storeIdentifier: store.identifier)
        return try transaction.rows("SELECT 1 FROM \(master) WHERE type = 'table' AND name = ?", [.text(recordTable)])
            .count == 1
    }

    /// The store's record, checked against its MAC.
    func record(of store: Store, in transaction: StoreTransaction) throws -> Record? {
        guard try hasRecord(store, in: transaction) else { return nil }
        let table = try transaction.qualified(Self.recordTable, storeIdentifier: store.identifier)
        guard
            let cells = try transaction.rows(
                "SELECT ZMODEL, ZGENERATION, ZPEERGENERATION, ZROWCOUNT, ZTAGSUM, ZMAC FROM \(table) WHERE ZID = 1"
            ).first,
            cells.count == 6, case .text(let model) = cells[0], case .integer(let generation) = cells[1],
            case .integer(let peer) = cells[2],
            case .integer(let count) = cells[3], case .blob(let sum) = cells[4], sum.count == 32,
            case .blob(let mac) = cells[5]
        else {
            throw IntegrityFailure(store: store.fileName, message: "its integrity record is damaged")
        }
        let record = Record(
            model: model, generation: generation, peerGeneration: peer, rowCount: count, tagSum: Array(sum))
        guard ConstantTime.equal(try self.mac(of: record, store: store), Array(mac)) else {
            let storedSlot = try? transaction.metadata(ofStore: store.identifier)[Vault.keySlotKey] as? Data
            if let storedSlot, storedSlot != keySlot { throw KeyChangedElsewhere() }
            throw IntegrityFailure(
                store: store.fileName, message: "its integrity record was altered or comes from another vault")
        }
        return record
    }

    func write(_ record: Record, of store: Store, in transaction: StoreTransaction) throws {
        let table = try transaction.qualified(Self.recordTable, storeIdentifier: store.identifier)
        try transaction.execute(
            "INSERT OR REPLACE INTO \(table) (ZID, ZMODEL, ZGENERATION, ZPEERGENERATION, ZROWCOUNT, ZTAGSUM, ZMAC) "
                + "VALUES (1, ?, ?, ?, ?, ?, ?)",
            [
                .text(record.model), .integer(record.generation), .integer(record.peerGeneration),
                .integer(record.rowCount),
                .blob(Data(record.tagSum)), .blob(Data(try mac(of: record, store: store))),
            ])
    }

    // MARK: - Keeping it current (StoreWriteObserver)

    /// A row about to be written must be as the record says: a row altered outside mystash is
    /// refused here, not laundered into a new tag.
    func rowsWillChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        for (identifier, keys) in Dictionary(grouping: rows, by: \.storeIdentifier) {
            guard let store = store(identifier), try hasRecord(store, in: transaction) else { continue }
            // The record first: under a key another process replaced since, every tag differs.
            _ = try record(of: store, in: transaction)
            var columnsByTable: [String: [String]] = [:]
            for row in keys {
                let columns = try columnsByTable[row.table] ?? columns(of: row.table, store: store, in: transaction)
                columnsByTable[row.table] = columns
                let current = try currentTag(row, store: store, columns: columns, in: transaction)
                let recorded = try recordedTag(row, in: transaction)
                if let problem = Self.mismatch(current: current, recorded: recorded) {
                    throw IntegrityFailure(
                        store: store.fileName, entity: store.tables[row.table], primaryKey: row.primaryKey,
                        message: problem)
                }
            }
        }
    }

    /// Checks, inside each save, that the stores' schema is still the one verified (a trigger
    /// added meanwhile would change what the save wrote before its tags are computed).
    var schemaCheck: ((StoreTransaction) throws -> Void)?

    /// Replaces the tags of written rows, then moves both stores' records one generation on.
    func rowsDidChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        try schemaCheck?(transaction)
        var records: [String: Record] = [:]
        for store in stores {
            guard let record = try record(of: store, in: transaction) else { return }
            records[store.identifier] = record
        }
        if let problem = generationMismatch(records) { throw IntegrityFailure(problem) }
        // Row by row as given, not regrouped or deduplicated into copies of what may be 300,000
        // keys: a row given twice is harmless, as its second pass takes out the tag the first put in.
        var tagTables: [String: String] = [:]
        var columnsByTable: [StoredTable: [String]] = [:]
        for row in rows {
            guard let store = store(row.storeIdentifier), var record = records[row.storeIdentifier] else { continue }
            let tags = try tagTables[row.storeIdentifier]
                ?? transaction.qualified(Self.tagTable, storeIdentifier: row.storeIdentifier)
            tagTables[row.storeIdentifier] = tags
            let tableKey = StoredTable(storeIdentifier: row.storeIdentifier, name: row.table)
            let columns = try columnsByTable[tableKey] ?? columns(of: row.table, store: store, in: transaction)
            columnsByTable[tableKey] = columns
            if let old = try recordedTag(row, in: transaction) {
                record.tagSum = Self.add(record.tagSum, old, negating: true)
                record.rowCount -= 1
            }
            if let new = try currentTag(row, store: store, columns: columns, in: transaction) {
                try transaction.execute(
                    "INSERT OR REPLACE INTO \(tags) (ZTABLE, ZPK, ZTAG) VALUES (?, ?, ?)",
                    [.text(row.table), .integer(row.primaryKey), .blob(Data(new))])
                record.tagSum = Self.add(record.tagSum, new)
                record.rowCount += 1
            } else {
                try transaction.execute(
                    "DELETE FROM \(tags) WHERE ZTABLE = ? AND ZPK = ?", [.text(row.table), .integer(row.primaryKey)])
            }
            records[row.storeIdentifier] = record
        }
        try advanceGenerations(records, in: transaction)
    }

    /// A table of one of the stores.
    private struct StoredTable: Hashable {
        let storeIdentifier: String
        let name: String
    }

    /// Both stores one generation on, each naming the other's: an older copy of either no longer matches.
    private func advanceGenerations(_ records: [String: Record], in transaction: StoreTransaction) throws {
        var next = records
        for store in stores { next[store.identifier]?.generation += 1 }
        lastWrittenGenerations = next.mapValues(\.generation)
        for store in stores {
            guard let peer = stores.first(where: { $0.identifier != store.identifier }),
                var record = next[store.identifier]
            else { continue }
            record.peerGeneration = next[peer.identifier]?.generation ?? 0
            try write(record, of: store, in: transaction)
        }
    }

    /// Creates the record of every store from the rows as they are (a new vault, or one made
    /// before the record existed: its rows are trusted as they are now).
    func create(in transaction: StoreTransaction) throws {
        var records: [String: Record] = [:]
        for store in stores {
            let tags = try transaction.qualified(Self.tagTable, storeIdentifier: store.identifier)
            let definitions = try Self.tableDefinitions {
                try transaction.qualified($0, storeIdentifier: store.identifier)
            }
            for statement in definitions { try transaction.execute(statement) }
            try transaction.execute("DELETE FROM \(tags)")
            // Generations go on from the old record's, if any, so older copies stay older. One this
            // record's key cannot verify (after a rekey it is under the old key) restarts at 0, a
            // documented choice: copies from before carry a record under that other key and fail
            // verification anyway, and both stores restart together, so their generations agree.
            let previous = try? self.record(of: store, in: transaction)
            var record = Record(
                model: model, generation: previous?.generation ?? 0, peerGeneration: 0, rowCount: 0,
                tagSum: Self.zeroSum)
            for table in store.tables.keys.sorted() {
                let columns = try columns(of: table, store: store, in: transaction)
                for cells in try transaction.rows(
                    "SELECT * FROM \(try transaction.qualified(table, storeIdentifier: store.identifier))")
                {
                    guard case .integer(let primaryKey) = cells.first else { continue }
                    let tag = try tag(store: store, table: table, columns: columns, cells: cells)
                    try transaction.execute(
                        "INSERT INTO \(tags) (ZTABLE, ZPK, ZTAG) VALUES (?, ?, ?)",
                        [.text(table), .integer(primaryKey), .blob(Data(tag))])
                    record.tagSum = Self.add(record.tagSum, tag)
                    record.rowCount += 1
                }
            }
            records[store.identifier] = record
        }
        try advanceGenerations(records, in: transaction)
    }

    /// Whether the record was computed under another model version: a migration rewrote
    /// the rows, so their tags are renewed (trusting the rows as migrated). A record that
    /// cannot be read is left to verification, which reports it.
    func needsRenewal(in transaction: StoreTransaction) -> Bool {
        stores.contains { store in
            (try? record(of: store, in: transaction)).flatMap { $0 }.map { $0.model != model } ?? false
        }
    }

    /// Whether the stores hold the generations the last save wrote.
    func holdsLastWrittenGenerations(in transaction: StoreTransaction) throws -> Bool {
        guard !lastWrittenGenerations.isEmpty else { return false }
        return try stores.allSatisfy {
            try record(of: $0, in: transaction)?.generation == lastWrittenGenerations[$0.identifier]
        }
    }

    // MARK: - Verifying

    /// What differs between a row and its tag, in words; nil when they agree.
    static func mismatch(current: [UInt8]?, recorded: [UInt8]?) -> String? {
        switch (current, recorded) {
        case (nil, nil): return nil
        case (_?, nil): return "the row was added outside mystash"
        case (nil, _?): return "the row was deleted outside mystash"
        case (let current?, let recorded?):
            return ConstantTime.equal(current, recorded)
                ? nil
                : "the row was changed outside mystash "
                    + "(a value, its version or its relationships, or an older copy of it put back)"
        }
    }

    /// Every difference between the stores and their records; empty when the vault is as
    /// mystash last wrote it. Nil when the vault has no record yet.
    func verify(in transaction: StoreTransaction) throws -> [IntegrityProblem]? {
        var problems: [IntegrityProblem] = []
        var records: [String: Record] = [:]
        let withRecord = try stores.filter { try hasRecord($0, in: transaction) }
        guard !withRecord.isEmpty else { return nil }
        for store in stores {
            do {
                guard let record = try record(of: store, in: transaction) else {
                    problems.append(
                        IntegrityProblem(
                            store: store.fileName,
                            message: "its integrity record is missing, although the other store has one"))
                    continue
                }
                records[store.identifier] = record
                problems += try verifyRows(of: store, against: record, in: transaction)
                // Reads go through indexes the tags do not cover: each must hold exactly its table's rows.
                problems += try transaction.indexProblems(storeIdentifier: store.identifier, storeName: store.fileName)
            } catch let failure as IntegrityFailure {
                problems.append(failure.problem)
            }
        }
        if records.count == stores.count, let problem = generationMismatch(records) { problems.append(problem) }
        return problems
    }

    /// The store that is an older copy than the other store knows of, if any.
    func generationMismatch(_ records: [String: Record]) -> IntegrityProblem? {
        guard let first = stores.first, let second = stores.last, first.identifier != second.identifier,
            let a = records[first.identifier], let b = records[second.identifier],
            a.peerGeneration != b.generation || b.peerGeneration != a.generation
        else { return nil }
        // The store whose generation is behind what the other recorded is the older copy.
        let (older, generation, expected) =
            a.generation < b.peerGeneration
            ? (first, a.generation, b.peerGeneration)
            : b.generation < a.peerGeneration
                ? (second, b.generation, a.peerGeneration) : (first, a.generation, b.peerGeneration)
        return IntegrityProblem(
            store: older.fileName,
            message: "it is an older or foreign copy (generation \(generation), the other store expects \(expected))")
    }

    private func verifyRows(of store: Store, against record: Record, in transaction: StoreTransaction) throws
        -> [IntegrityProblem]
    {
        var problems: [IntegrityProblem] = []
        var recorded: [String: [Int64: [UInt8]]] = [:]
        var sum = Self.zeroSum
        var count: Int64 = 0
        try transaction.forEachRow(
            "SELECT ZTABLE, ZPK, ZTAG FROM "
                + (try transaction.qualified(Self.tagTable, storeIdentifier: store.identifier))
        ) { cells in
            guard cells.count == 3, case .text(let table) = cells[0], case .integer(let key) = cells[1],
                case .blob(let tag) = cells[2], tag.count == 32
            else {
                problems.append(
                    IntegrityProblem(store: store.fileName, message: "its table of row tags holds a damaged entry"))
                return
            }
            recorded[table, default: [:]][key] = Array(tag)
            sum = Self.add(sum, Array(tag))
            count += 1
        }
        if sum != record.tagSum || count != record.rowCount {
            problems.append(
                IntegrityProblem(
                    store: store.fileName,
                    message: "rows and their tags were removed or replaced together "
                        + "(\(count) tagged rows, the record counts \(record.rowCount))"))
        }
        for (table, entity) in store.tables.sorted(by: { $0.key < $1.key }) {
            let columns = try columns(of: table, store: store, in: transaction)
            var unseen = recorded[table] ?? [:]
            try transaction.forEachRow(
                "SELECT * FROM \(try transaction.qualified(table, storeIdentifier: store.identifier)) ORDER BY Z_PK"
            ) { cells in
                guard case .integer(let key) = cells.first else { return }
                let current = try tag(store: store, table: table, columns: columns, cells: cells)
                if let problem = Self.mismatch(current: current, recorded: unseen.removeValue(forKey: key)) {
                    problems.append(
                        IntegrityProblem(store: store.fileName, entity: entity, primaryKey: key, message: problem))
                }
            }
            for key in unseen.keys.sorted() {
                problems.append(
                    IntegrityProblem(
                        store: store.fileName, entity: entity, primaryKey: key,
                        message: "the row was deleted outside mystash"))
            }
        }
        return problems
    }
}

/// The stores hold a key slot other than the one this process unlocked, and a record its key
/// cannot verify: another process changed the vault's key (a rekey) since.
struct KeyChangedElsewhere: Error {}

/// Tampering found while writing: the save is refused and names the place.
struct IntegrityFailure: Error {
    var problem: IntegrityProblem

    init(store: String, entity: String? = nil, primaryKey: Int64? = nil, message: String) {
        problem = IntegrityProblem(store: store, entity: entity, primaryKey: primaryKey, message: message)
    }

    init(_ problem: IntegrityProblem) { self.problem = problem }
}
