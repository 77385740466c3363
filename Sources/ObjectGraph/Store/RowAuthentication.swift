import Foundation
import GRDB

/// Computes a keyed MAC of a row's bytes for ``RowAuthentication``: HMAC-SHA256 under a key only
/// the application holds, so that nobody without it can make a row pass.
public protocol RowAuthenticator: AnyObject {
    /// A 32-byte MAC of `message`.
    func authenticationCode(of message: [UInt8]) throws -> [UInt8]
    /// The same MAC written into `code` (32 bytes): verifying a store makes one per row.
    func authenticationCode(of message: UnsafeRawBufferPointer, into code: UnsafeMutableRawBufferPointer) throws
}

extension RowAuthenticator {
    public func authenticationCode(of message: UnsafeRawBufferPointer, into code: UnsafeMutableRawBufferPointer)
        throws
    {
        let tag = try authenticationCode(of: Array(message))
        guard tag.count == code.count else {
            throw ObjectGraphError(
                code: .invalidRequest, message: "a row authenticator gave \(tag.count) bytes, not 32")
        }
        code.copyBytes(from: tag)
    }
}

/// Row authentication: a keyed tag per row of the stores' entity tables, over everything stored
/// in the row (version, relationships, values as stored), grouped in 4,096 buckets, each
/// holding the count and sum of its tags, sealed 64 buckets to a group; per store a record
/// authenticates every group's seal with the store's generation and the other store's. As the
/// coordinator's ``StoreWriteObserver`` it
/// checks each row a save is about to change and updates the tags, buckets and records in the
/// save's own transaction; ``verify(in:inFull:)`` checks every row (of the stores it names),
/// ``verify(rows:lookups:in:)`` only the buckets of what a read showed: O(buckets + rows per
/// bucket), not O(rows), where a bucket read costs its group (64 buckets) and the record's 64
/// seals. The application gives the ``RowAuthenticator`` (its key), the tables'
/// names and where each table's rows go (``Bucketing``).
public final class RowAuthentication: StoreWriteObserver {
    public static let bucketCount = 4096
    /// The version of the records written (FORMAT.md): 4 since the history may be covered.
    static let recordVersion = 4
    /// Buckets sealed together: a read checks the record's seals and the groups of the buckets
    /// it needs, not every bucket of the store.
    static let groupSize = 64
    static let groupCount = bucketCount / groupSize
    /// Every group, as a mask of ``Record/loadedGroups``.
    static let allGroups = UInt64.max

    /// The names of the tables the tags, buckets and records are kept in, beside the model's.
    public struct Tables: Sendable {
        public var tags: String
        public var buckets: String
        public var record: String
        public var bucketIndex: String

        public init(tags: String, buckets: String, record: String, bucketIndex: String) {
            self.tags = tags
            self.buckets = buckets
            self.record = record
            self.bucketIndex = bucketIndex
        }

        /// The statements creating the tables, each named through `qualified`.
        public func definitions(_ qualified: (String) throws -> String) rethrows -> [String] {
            [
                "CREATE TABLE IF NOT EXISTS \(try qualified(tags)) (ZTABLE TEXT NOT NULL, ZPK INTEGER NOT NULL, "
                    + "ZBUCKET INTEGER NOT NULL, ZTAG BLOB NOT NULL, PRIMARY KEY (ZTABLE, ZPK)) WITHOUT ROWID",
                "CREATE INDEX IF NOT EXISTS \(try qualified(bucketIndex)) ON \(tags) (ZBUCKET)",
                "CREATE TABLE IF NOT EXISTS \(try qualified(buckets)) (ZBUCKET INTEGER PRIMARY KEY, "
                    + "ZCOUNT INTEGER NOT NULL, ZSUM BLOB NOT NULL)",
                "CREATE TABLE IF NOT EXISTS \(try qualified(record)) (ZID INTEGER PRIMARY KEY CHECK (ZID = 1), "
                    + "ZMODEL TEXT, ZGENERATION INTEGER, ZPEERGENERATION INTEGER, ZROWCOUNT INTEGER, ZMAC BLOB)",
            ]
        }

        /// Whether the store holds a record (without needing the key).
        public func exist(inStore identifier: String, _ transaction: StoreTransaction) throws -> Bool {
            let master = try transaction.qualified("sqlite_master", storeIdentifier: identifier)
            return try transaction.rows(
                "SELECT 1 FROM \(master) WHERE type = 'table' AND name = ?", [.text(record)]).count == 1
        }
    }

    /// Which bucket a table's rows go to: one a read can name before it reads the row.
    public enum Bucketing: Sendable {
        /// By a keyed index of the row's name (`column`, a blob of at least 2 bytes): a lookup
        /// by name checks one bucket.
        case nameKey(column: String)
        /// With the rows of `table` that `column` points to (the parts of one object).
        case parent(column: String, table: String)
        /// All rows of the table in one bucket: small tables read whole.
        case wholeTable
    }

    /// One store: its identity, the name problems give it, and the tables covered.
    public struct Store: Sendable {
        public let identifier: String
        public let displayName: String
        /// Root entity table → entity name, such as `ZSYSTEM` → `System`.
        public let tables: [String: String]
        /// Tables not named here put each row in a bucket of its own table and primary key.
        public var bucketing: [String: Bucketing]

        public init(identifier: String, displayName: String, tables: [String: String],
                    bucketing: [String: Bucketing] = [:]) {
            self.identifier = identifier
            self.displayName = displayName
            self.tables = tables
            self.bucketing = bucketing
        }

        /// The tables of a store's persistent history (``PersistentHistoryTransaction``), by the
        /// names problems give them: what a reader of the history is told of what changed.
        public static let historyTables = [
            "ATRANSACTION": "HistoryTransaction", "ACHANGE": "HistoryChange", "ATRANSACTIONSTRING": "HistoryString",
        ]

        /// The store with its persistent history covered too, each history table in one bucket:
        /// a reader of the history checks every row of it (``historyLookups``), so that a row
        /// deleted there cannot keep a change from being seen. Saves tag the history they write.
        public func includingHistory() -> Store {
            var store = Store(
                identifier: identifier, displayName: displayName,
                tables: tables.merging(Self.historyTables) { own, _ in own }, bucketing: bucketing)
            for table in Self.historyTables.keys { store.bucketing[table] = .wholeTable }
            return store
        }

        /// The lookups that name every row of the store's history tables (each in one bucket):
        /// with the rows read there, ``RowAuthentication/verify(rows:lookups:in:)`` checks them all
        /// and finds any deleted, added or changed outside.
        public var historyLookups: [Lookup] {
            PersistentHistoryTables.entityNumbers.compactMap { table, entityNumber in
                guard tables[table] != nil else { return nil }
                return Lookup(
                    storeIdentifier: identifier, bucket: RowAuthentication.bucket(table: table, primaryKey: nil),
                    table: table, column: "Z_ENT", value: .integer(entityNumber))
            }
        }
    }

    /// A store's record as stored, with the seals it authenticates and the buckets read so far;
    /// by default, every bucket in memory, as a store's rows were just tagged.
    struct Record: Equatable {
        /// The model version the tags were computed under (a migration rewrites rows).
        var model: String
        var generation: Int64
        var peerGeneration: Int64 = 0
        var rowCount: Int64 = 0
        /// The buckets of the groups in `loadedGroups`, each group checked against its seal.
        var buckets = BucketTable()
        /// Each non-empty group's seal, by group number.
        var seals: [Int: GroupSeal] = [:]
        /// The groups whose buckets are in `buckets`: bit n for group n.
        var loadedGroups = RowAuthentication.allGroups
        /// False for a record of version 2 (its MAC over every bucket, read whole), which the next
        /// save seals in groups.
        var isSealedInGroups = true
    }

    /// A group's count of tags and its seal: the MAC of its non-empty buckets.
    struct GroupSeal: Equatable {
        var count: Int64
        var seal: [UInt8]
    }

    /// The tags of one bucket: how many, and their sum.
    struct Bucket: Equatable {
        var count: Int64 = 0
        var sum: [UInt8] = RowAuthentication.zeroSum
    }

    public let stores: [Store]
    /// The model version the tags are computed under.
    public let model: String
    public let tables: Tables
    /// The generation of each store the last save wrote: found on disk after the save failed,
    /// the save's commit took effect before the failure.
    public private(set) var lastWrittenGenerations: [String: Int64] = [:]
    /// Called when a record's MAC does not verify, before that is reported as tampering: the
    /// application may throw an error of its own (the key was changed by another process).
    public var recordDoesNotVerify: ((StoreTransaction, Store) throws -> Void)?
    /// Checks, inside each save, that the stores' schema is still the one verified (a trigger
    /// added meanwhile would change what the save wrote before its tags are computed).
    public var schemaCheck: ((StoreTransaction) throws -> Void)?
    /// The program whose saves keep the record, as problems name it ("changed outside …").
    public let writer: String
    private let authenticator: RowAuthenticator

    public init(
        authenticator: RowAuthenticator, stores: [Store], model: String, tables: Tables, writer: String = "ObjectGraph"
    ) {
        self.authenticator = authenticator
        self.stores = stores
        self.model = model
        self.tables = tables
        self.writer = writer
    }

    private func store(_ identifier: String) -> Store? { stores.first { $0.identifier == identifier } }

    /// Whether the row's table is one of its store's covered tables.
    private func covers(_ row: StoredRowKey) -> Bool { store(row.storeIdentifier)?.tables[row.table] != nil }

    // MARK: - Buckets

    /// The bucket a name key's rows are in.
    public static func bucket(ofNameKey key: Data) -> Int {
        key.withUnsafeBytes { bucket(ofNameKeyBytes: $0) }
    }

    static func bucket(ofNameKeyBytes key: UnsafeRawBufferPointer) -> Int {
        guard key.count >= 2 else { return 0 }
        return Int(key[0]) << 4 | Int(key[1]) >> 4
    }

    /// The bucket of a table's row (`primaryKey`), or of the whole table (nil).
    public static func bucket(table: String, primaryKey: Int64?) -> Int {
        bucket(afterTable: tableHash(table), primaryKey: primaryKey)
    }

    /// FNV-1a over a table's name: the bucket of a row is no secret, only the name keys are.
    private static func tableHash(_ table: String) -> UInt64 {
        table.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    /// ``bucket(table:primaryKey:)`` from the hash of the table's name.
    private static func bucket(afterTable tableHash: UInt64, primaryKey: Int64?) -> Int {
        var hash = tableHash
        func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        if let primaryKey {
            mix(0)
            withUnsafeBytes(of: primaryKey.bigEndian) { $0.forEach(mix) }
        }
        return Int(hash % UInt64(bucketCount))
    }

    /// The bucket a stored row belongs in, from its own values.
    func bucket(of table: String, primaryKey: Int64, columns: [String], cells: [StoredCell], store: Store) -> Int {
        TableBucketing(table, columns: columns, store: store).bucket(primaryKey: primaryKey) { cells[$0].withRaw($1) }
    }

    /// How the rows of one table, read with `columns`, are put in buckets (``Bucketing``),
    /// looked up once: checking a store buckets all its rows one after another.
    struct TableBucketing {
        private enum Rule {
            case nameKey(column: Int?)
            case parent(column: Int?, parentHash: UInt64)
            case wholeTable
            case ownRow
        }
        private let rule: Rule
        private let tableHash: UInt64

        init(_ table: String, columns: [String], store: Store) {
            tableHash = RowAuthentication.tableHash(table)
            switch store.bucketing[table] {
            case .nameKey(let column)?: rule = .nameKey(column: columns.firstIndex(of: column))
            case .parent(let column, let parent)?:
                rule = .parent(column: columns.firstIndex(of: column), parentHash: RowAuthentication.tableHash(parent))
            case .wholeTable?: rule = .wholeTable
            case nil: rule = .ownRow
            }
        }

        /// `cell` hands the value at a column index to the reader it is given.
        func bucket(primaryKey: Int64, cell: (Int, (RawCell) -> Int?) -> Int?) -> Int {
            switch rule {
            case .nameKey(let column?):
                let byName = cell(column) { value in
                    guard case .blob(let key) = value, key.count >= 2 else { return nil }
                    return RowAuthentication.bucket(ofNameKeyBytes: key)
                }
                if let byName { return byName }
            case .parent(let column?, let parentHash):
                let byParent = cell(column) { value in
                    guard case .integer(let parentKey) = value else { return nil }
                    return RowAuthentication.bucket(afterTable: parentHash, primaryKey: parentKey)
                }
                if let byParent { return byParent }
            case .wholeTable:
                return RowAuthentication.bucket(afterTable: tableHash, primaryKey: nil)
            case .nameKey(nil), .parent(nil, _), .ownRow:
                break
            }
            return RowAuthentication.bucket(afterTable: tableHash, primaryKey: primaryKey)
        }
    }

    // MARK: - Tags

    /// The tag of a row: its store, table, and every column's name and stored value.
    public func tag(store: Store, table: String, columns: [String], cells: [StoredCell]) throws -> [UInt8] {
        var tagger = tagger(store: store, table: table, columns: columns)
        var tag = [UInt8](repeating: 0, count: 32)
        try tag.withUnsafeMutableBytes { code in try tagger.tag(into: code) { cells[$0].withRaw($1) } }
        return tag
    }

    /// What tags many rows of `table`, read with `columns`.
    func tagger(store: Store, table: String, columns: [String]) -> RowTagger {
        RowTagger(authenticator: authenticator, store: store.identifier, table: table, columns: columns)
    }

    /// The record's MAC: its store, generations, count and every non-empty group's seal in order
    /// (version 3), or every non-empty bucket in order (`sealedInGroups` false: version 2).
    /// The record's MAC as `version` computes it: 4 (written), 3 (read: the same but for its
    /// label), 2 (read: every bucket, no seals).
    func mac(of record: Record, store: Store, version: Int = RowAuthentication.recordVersion) throws -> [UInt8] {
        var message: [UInt8] = []
        Self.appendField(&message, "record v\(version)".utf8)
        let sealedInGroups = version > 2
        Self.appendField(&message, store.identifier.utf8)
        Self.appendField(&message, store.displayName.utf8)
        Self.appendField(&message, record.model.utf8)
        for number in [record.generation, record.peerGeneration, record.rowCount] { Self.append(number, to: &message) }
        if sealedInGroups {
            for (group, seal) in record.seals.sorted(by: { $0.key < $1.key }) {
                Self.append(Int64(group), to: &message)
                Self.append(seal.count, to: &message)
                Self.appendField(&message, seal.seal)
            }
        } else {
            // Written in place: a version 2 record is read whole, thousands of buckets.
            record.buckets.appendCounted(to: &message)
        }
        return try authenticator.authenticationCode(of: message)
    }

    /// The seal of a group's buckets as `buckets` holds them; nil when none holds a tag.
    func seal(ofGroup group: Int, in buckets: BucketTable, store: Store) throws -> GroupSeal? {
        let range = group * Self.groupSize ..< (group + 1) * Self.groupSize
        // Wrapping: the counts are read from the store before the seal vouches for them, and the
        // seal covers each count, so a total that wrapped can never verify.
        let count = range.reduce(Int64(0)) { $0 &+ buckets.count(of: $1) }
        guard range.contains(where: { buckets.count(of: $0) != 0 }) else { return nil }
        var message: [UInt8] = []
        Self.appendField(&message, "bucket group v3".utf8)
        Self.appendField(&message, store.identifier.utf8)
        Self.append(Int64(group), to: &message)
        buckets.appendCounted(to: &message, in: range)
        return GroupSeal(count: count, seal: try authenticator.authenticationCode(of: message))
    }

    /// The mask of the groups holding `buckets` (buckets beyond the last, which no row can be
    /// in, belong to none).
    static func groups(of buckets: some Sequence<Int>) -> UInt64 {
        buckets.reduce(0) { mask, bucket in
            (0..<bucketCount).contains(bucket) ? mask | 1 << UInt64(bucket / groupSize) : mask
        }
    }

    /// Its length as a big-endian 64-bit integer, then the bytes.
    public static func appendField<Bytes: Collection<UInt8>>(_ message: inout [UInt8], _ bytes: Bytes) {
        append(Int64(bytes.count), to: &message)
        message.append(contentsOf: bytes)
    }

    public static func append(_ value: Int64, to message: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { message.append(contentsOf: $0) }
    }

    /// A type byte, then the value: the same bytes can never stand for two different cells.
    static func append(_ cell: StoredCell, to message: inout [UInt8]) {
        cell.withRaw { append($0, to: &message) }
    }

    static func append(_ cell: RawCell, to message: inout [UInt8]) {
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
            appendField(&message, text)
        case .blob(let data):
            message.append(4)
            appendField(&message, data)
        }
    }

    /// Sum of 256-bit big-endian numbers, modulo 2^256; `negating` subtracts instead.
    public static func add(_ sum: [UInt8], _ tag: [UInt8], negating: Bool = false) -> [UInt8] {
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

    public static let zeroSum = [UInt8](repeating: 0, count: 32)

    // MARK: - Reading what is stored

    public func columns(of table: String, store: Store, in transaction: StoreTransaction) throws -> [String] {
        let info = try transaction.qualified("sqlite_master", storeIdentifier: store.identifier)
        let schema = String(info.dropLast("sqlite_master".count))
        return try transaction.rows("PRAGMA \(schema)table_info(\(table))").compactMap {
            if $0.count > 1, case .text(let name) = $0[1] { return name }
            return nil
        }
    }

    /// A row's tag and bucket.
    struct TaggedRow {
        var tag: [UInt8]
        var bucket: Int
    }

    /// The row's tag and bucket as it is stored now, or nil when the row does not exist.
    func current(_ row: StoredRowKey, store: Store, columns: [String], in transaction: StoreTransaction) throws
        -> TaggedRow?
    {
        let table = try transaction.qualified(row.table, storeIdentifier: store.identifier)
        guard
            let cells = try transaction.rows("SELECT * FROM \(table) WHERE Z_PK = ?", [.integer(row.primaryKey)]).first
        else { return nil }
        return TaggedRow(
            tag: try tag(store: store, table: row.table, columns: columns, cells: cells),
            bucket: bucket(of: row.table, primaryKey: row.primaryKey, columns: columns, cells: cells, store: store))
    }

    func recorded(_ row: StoredRowKey, in transaction: StoreTransaction) throws -> TaggedRow? {
        let tags = try transaction.qualified(tables.tags, storeIdentifier: row.storeIdentifier)
        guard
            let cells = try transaction.rows(
                "SELECT ZTAG, ZBUCKET FROM \(tags) WHERE ZTABLE = ? AND ZPK = ?",
                [.text(row.table), .integer(row.primaryKey)]
            ).first,
            case .blob(let data) = cells[0], case .integer(let bucket) = cells[1]
        else { return nil }
        guard data.count == 32 else {
            let store = store(row.storeIdentifier)
            throw RowAuthenticationFailure(
                store: store?.displayName ?? row.storeIdentifier, entity: store?.tables[row.table],
                primaryKey: row.primaryKey, message: "its tag in the table of row tags is damaged")
        }
        return TaggedRow(tag: Array(data), bucket: Int(bucket))
    }

    func hasRecord(_ store: Store, in transaction: StoreTransaction) throws -> Bool {
        try tables.exist(inStore: store.identifier, transaction)
    }

    /// Records verified, with the store's `data_version` and the connection's `total_changes()`
    /// then: while both stay the same, nobody wrote the store.
    private var verifiedRecords: [String: (version: [Int64], record: Record)] = [:]

    /// The store's record checked against its MAC, with the buckets of `groups` (a mask) read
    /// and checked against their seals: O(groups + 64 buckets per group), each part once until
    /// the store changes (SQLite's `data_version` tells other connections' commits,
    /// `total_changes()` this connection's writes).
    func record(of store: Store, loading groups: UInt64 = 0, in transaction: StoreTransaction) throws -> Record? {
        let schema = try transaction.qualified("sqlite_master", storeIdentifier: store.identifier)
            .dropLast("sqlite_master".count)
        let version = (try transaction.rows("PRAGMA \(schema)data_version").first ?? [])
            + (try transaction.rows("SELECT total_changes()").first ?? [])
        let numbers = version.compactMap { cell -> Int64? in
            if case .integer(let number) = cell { return number }
            return nil
        }
        let cached = numbers.count == 2 ? verifiedRecords[store.identifier].flatMap { $0.version == numbers ? $0 : nil }
            : nil
        guard var record = try cached?.record ?? readRecord(of: store, in: transaction) else { return nil }
        try load(groups, of: store, into: &record, in: transaction)
        if numbers.count == 2 { verifiedRecords[store.identifier] = (numbers, record) }
        return record
    }

    /// Reads the record and its seals and checks its MAC; the buckets are read by group, as
    /// reads need them. A record of version 2 (no seals, its MAC over every bucket) is read and
    /// checked whole.
    private func readRecord(of store: Store, in transaction: StoreTransaction) throws -> Record? {
        guard try hasRecord(store, in: transaction) else { return nil }
        let table = try transaction.qualified(tables.record, storeIdentifier: store.identifier)
        let damaged = RowAuthenticationFailure(store: store.displayName, message: "its integrity record is damaged")
        guard
            let cells = try transaction.rows(
                "SELECT ZMODEL, ZGENERATION, ZPEERGENERATION, ZROWCOUNT, ZMAC FROM \(table) WHERE ZID = 1"
            ).first,
            cells.count == 5, case .text(let model) = cells[0], case .integer(let generation) = cells[1],
            case .integer(let peer) = cells[2], case .integer(let count) = cells[3], case .blob(let mac) = cells[4]
        else { throw damaged }
        let buckets = try transaction.qualified(tables.buckets, storeIdentifier: store.identifier)
        var seals: [Int: GroupSeal] = [:]
        // Each group's seal is stored as bucket number bucketCount + group.
        try transaction.db.forEachRow(
            sql: "SELECT ZBUCKET, ZCOUNT, ZSUM FROM \(buckets) WHERE ZBUCKET >= \(Self.bucketCount)", arguments: []
        ) { row in
            guard let number = row.int64(at: 0), let group = Int(exactly: number - Int64(Self.bucketCount)),
                  (0..<Self.groupCount).contains(group), let count = row.int64(at: 1)
            else { throw damaged }
            try row.withCell(at: 2) { cell in
                guard case .blob(let seal) = cell, seal.count == 32 else { throw damaged }
                seals[group] = GroupSeal(count: count, seal: Array(seal))
            }
        }
        var record = Record(model: model, generation: generation, peerGeneration: peer, rowCount: count,
                            seals: seals, loadedGroups: 0)
        // Version 3 differs by its label alone: its next write makes it version 4, which a reader of
        // version 3 (the release before the history was covered) refuses instead of renewing.
        for version in [Self.recordVersion, 3]
        where Self.constantTimeEqual(try self.mac(of: record, store: store, version: version), Array(mac)) {
            return record
        }
        if seals.isEmpty {
            record.buckets = try readAllBuckets(of: store, in: transaction)
            if Self.constantTimeEqual(try self.mac(of: record, store: store, version: 2), Array(mac)) {
                record.loadedGroups = Self.allGroups
                record.isSealedInGroups = false
                return record
            }
        }
        try recordDoesNotVerify?(transaction, store)
        throw RowAuthenticationFailure(
            store: store.displayName,
            message: "its integrity record or its buckets were altered, or come from other stores")
    }

    /// Every bucket of a store, in place into flat arrays.
    private func readAllBuckets(of store: Store, in transaction: StoreTransaction) throws -> BucketTable {
        var buckets = BucketTable()
        try readBuckets(Int64(0)...Int64(Self.bucketCount - 1), of: store, into: &buckets, in: transaction)
        return buckets
    }

    private func readBuckets(
        _ numbers: ClosedRange<Int64>, of store: Store, into buckets: inout BucketTable,
        in transaction: StoreTransaction
    ) throws {
        let damaged = RowAuthenticationFailure(store: store.displayName, message: "its integrity record is damaged")
        try transaction.db.forEachRow(
            sql: "SELECT ZBUCKET, ZCOUNT, ZSUM FROM "
                + (try transaction.qualified(tables.buckets, storeIdentifier: store.identifier))
                + " WHERE ZBUCKET BETWEEN ? AND ?",
            arguments: [numbers.lowerBound.databaseValue, numbers.upperBound.databaseValue]
        ) { row in
            guard let number = row.int64(at: 0), let count = row.int64(at: 1) else { throw damaged }
            try row.withCell(at: 2) { cell in
                guard case .blob(let sum) = cell, sum.count == 32 else { throw damaged }
                buckets.set(Int(number), count: count, sum: sum)
            }
        }
    }

    /// Reads the buckets of the groups in `groups` that `record` does not hold yet, one query per
    /// run of neighbouring groups, and checks each group against its seal.
    private func load(_ groups: UInt64, of store: Store, into record: inout Record, in transaction: StoreTransaction)
        throws
    {
        let missing = groups & ~record.loadedGroups
        guard missing != 0 else { return }
        var group = 0
        while group < Self.groupCount {
            guard missing & 1 << UInt64(group) != 0 else {
                group += 1
                continue
            }
            var last = group
            while last + 1 < Self.groupCount, missing & 1 << UInt64(last + 1) != 0 { last += 1 }
            try readBuckets(Int64(group * Self.groupSize)...Int64((last + 1) * Self.groupSize - 1),
                            of: store, into: &record.buckets, in: transaction)
            group = last + 1
        }
        for group in 0..<Self.groupCount where missing & 1 << UInt64(group) != 0 {
            let found = try seal(ofGroup: group, in: record.buckets, store: store)
            let recorded = record.seals[group]
            guard found?.count == recorded?.count,
                  Self.constantTimeEqual(found?.seal ?? Self.zeroSum, recorded?.seal ?? Self.zeroSum)
            else {
                throw RowAuthenticationFailure(
                    store: store.displayName,
                    message: "its buckets were altered (group \(group) does not match its seal in the record)")
            }
        }
        record.loadedGroups |= missing
    }

    /// Writes the record, the buckets named in `changed` (all when nil) and the seals of their
    /// groups (all for a record of version 2, which this seals in groups). Every group written
    /// must be in memory.
    func write(_ record: Record, of store: Store, changed: Set<Int>?, in transaction: StoreTransaction) throws {
        // What was verified before may be rolled back with this transaction: read it again next time.
        verifiedRecords = [:]
        var record = record
        let buckets = try transaction.qualified(tables.buckets, storeIdentifier: store.identifier)
        let changedNumbers = (changed.map(Array.init) ?? record.buckets.numbers).filter { $0 < Self.bucketCount }
        for number in changedNumbers {
            let count = record.buckets.count(of: number)
            if count != 0 {
                try transaction.execute(
                    "INSERT OR REPLACE INTO \(buckets) (ZBUCKET, ZCOUNT, ZSUM) VALUES (?, ?, ?)",
                    [.integer(Int64(number)), .integer(count), .blob(Data(record.buckets.sum(of: number)))])
            } else {
                try transaction.execute("DELETE FROM \(buckets) WHERE ZBUCKET = ?", [.integer(Int64(number))])
            }
        }
        let groups = changed == nil || !record.isSealedInGroups ? Self.allGroups : Self.groups(of: changedNumbers)
        guard record.loadedGroups & groups == groups else {
            throw ObjectGraphError(code: .invalidRequest, message: "a group of buckets was written without being read")
        }
        for group in 0..<Self.groupCount where groups & 1 << UInt64(group) != 0 {
            let number = Int64(Self.bucketCount + group)
            record.seals[group] = try seal(ofGroup: group, in: record.buckets, store: store)
            if let seal = record.seals[group] {
                try transaction.execute(
                    "INSERT OR REPLACE INTO \(buckets) (ZBUCKET, ZCOUNT, ZSUM) VALUES (?, ?, ?)",
                    [.integer(number), .integer(seal.count), .blob(Data(seal.seal))])
            } else {
                try transaction.execute("DELETE FROM \(buckets) WHERE ZBUCKET = ?", [.integer(number)])
            }
        }
        let table = try transaction.qualified(tables.record, storeIdentifier: store.identifier)
        try transaction.execute(
            "INSERT OR REPLACE INTO \(table) (ZID, ZMODEL, ZGENERATION, ZPEERGENERATION, ZROWCOUNT, ZMAC) "
                + "VALUES (1, ?, ?, ?, ?, ?)",
            [
                .text(record.model), .integer(record.generation), .integer(record.peerGeneration),
                .integer(record.rowCount), .blob(Data(try mac(of: record, store: store))),
            ])
    }

    // MARK: - Keeping it current (StoreWriteObserver)

    /// A row about to be written must be as the record says: a row altered outside \(writer) is
    /// refused here, not laundered into a new tag.
    public func rowsWillChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        for (identifier, keys) in Dictionary(grouping: rows, by: \.storeIdentifier) {
            guard let store = store(identifier), try hasRecord(store, in: transaction) else { continue }
            // The record first: under a key another process replaced since, every tag differs.
            _ = try record(of: store, in: transaction)
            var columnsByTable: [String: [String]] = [:]
            for row in keys where store.tables[row.table] != nil {
                let columns = try columnsByTable[row.table] ?? columns(of: row.table, store: store, in: transaction)
                columnsByTable[row.table] = columns
                let current = try current(row, store: store, columns: columns, in: transaction)
                let recorded = try recorded(row, in: transaction)
                if let problem = mismatch(current: current, recorded: recorded) {
                    throw RowAuthenticationFailure(
                        store: store.displayName, entity: store.tables[row.table], primaryKey: row.primaryKey,
                        message: problem)
                }
            }
        }
    }

    /// A new row's key must have no tag: one left there is a row deleted outside \(writer) whose
    /// key is being handed out again (the key counter was changed too), which the new row's tag
    /// would otherwise launder. One range of the tags a table, for keys handed out together.
    public func rowsWillBeInserted(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        let groups = Dictionary(grouping: rows) { StoredTable(storeIdentifier: $0.storeIdentifier, name: $0.table) }
        for (table, group) in groups {
            guard let store = store(table.storeIdentifier), store.tables[table.name] != nil,
                  try hasRecord(store, in: transaction)
            else { continue }
            let keys = Set(group.map(\.primaryKey))
            guard let low = keys.min(), let high = keys.max() else { continue }
            let tags = try transaction.qualified(tables.tags, storeIdentifier: store.identifier)
            var tagged: [Int64] = []
            if high - low <= Int64(2 * keys.count + 1_000) {
                try transaction.forEachRow(
                    "SELECT ZPK FROM \(tags) WHERE ZTABLE = ? AND ZPK BETWEEN ? AND ?",
                    [.text(table.name), .integer(low), .integer(high)]
                ) { cells in
                    if case .integer(let key) = cells.first, keys.contains(key) { tagged.append(key) }
                }
            } else {
                for key in keys.sorted()
                where try recorded(StoredRowKey(storeIdentifier: store.identifier, table: table.name, primaryKey: key),
                                   in: transaction) != nil {
                    tagged.append(key)
                }
            }
            if let key = tagged.min() {
                throw RowAuthenticationFailure(
                    store: store.displayName, entity: store.tables[table.name], primaryKey: key,
                    message: "the row was deleted outside \(writer)")
            }
        }
    }

    /// Replaces the tags of written rows and updates their buckets, then moves both stores'
    /// records one generation on.
    public func rowsDidChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        // Rows of tables not covered only (a history the application leaves out) change no record.
        if !rows.isEmpty, !rows.contains(where: covers) { return }
        try schemaCheck?(transaction)
        var records: [String: Record] = [:]
        for store in stores {
            guard let record = try record(of: store, in: transaction) else { return }
            records[store.identifier] = record
        }
        if let problem = generationMismatch(records) { throw RowAuthenticationFailure(problem) }
        // Row by row as given, not regrouped or deduplicated into copies of what may be 300,000
        // keys: a row given twice is harmless, as its second pass takes out the tag the first put in.
        var tagTables: [String: String] = [:]
        var columnsByTable: [StoredTable: [String]] = [:]
        var changedBuckets: [String: Set<Int>] = [:]
        for row in rows {
            // Changed in place: a copy of a record holds every bucket, and this runs for every row.
            guard let store = store(row.storeIdentifier), store.tables[row.table] != nil,
                  records[row.storeIdentifier] != nil
            else { continue }
            let tags = try tagTables[row.storeIdentifier]
                ?? transaction.qualified(tables.tags, storeIdentifier: row.storeIdentifier)
            tagTables[row.storeIdentifier] = tags
            let tableKey = StoredTable(storeIdentifier: row.storeIdentifier, name: row.table)
            let columns = try columnsByTable[tableKey] ?? columns(of: row.table, store: store, in: transaction)
            columnsByTable[tableKey] = columns
            if let old = try recorded(row, in: transaction) {
                try load(Self.groups(of: [old.bucket]), of: store, into: &records[store.identifier]!, in: transaction)
                records[row.storeIdentifier]?.remove(old)
                changedBuckets[store.identifier, default: []].insert(old.bucket)
            }
            if let new = try current(row, store: store, columns: columns, in: transaction) {
                try transaction.execute(
                    "INSERT OR REPLACE INTO \(tags) (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES (?, ?, ?, ?)",
                    [.text(row.table), .integer(row.primaryKey), .integer(Int64(new.bucket)), .blob(Data(new.tag))])
                try load(Self.groups(of: [new.bucket]), of: store, into: &records[store.identifier]!, in: transaction)
                records[row.storeIdentifier]?.add(new)
                changedBuckets[store.identifier, default: []].insert(new.bucket)
            } else {
                try transaction.execute(
                    "DELETE FROM \(tags) WHERE ZTABLE = ? AND ZPK = ?", [.text(row.table), .integer(row.primaryKey)])
            }
        }
        try advanceGenerations(records, changedBuckets: changedBuckets, in: transaction)
    }

    /// A table of one of the stores.
    private struct StoredTable: Hashable {
        let storeIdentifier: String
        let name: String
    }

    /// Both stores one generation on, each naming the other's: an older copy of either no longer
    /// matches. Writes the buckets in `changedBuckets` (every bucket of a store not in it).
    private func advanceGenerations(
        _ records: [String: Record], changedBuckets: [String: Set<Int>]?, in transaction: StoreTransaction
    ) throws {
        var next = records
        for store in stores { next[store.identifier]?.generation += 1 }
        lastWrittenGenerations = next.mapValues(\.generation)
        for store in stores {
            guard let peer = stores.first(where: { $0.identifier != store.identifier }),
                var record = next[store.identifier]
            else { continue }
            record.peerGeneration = next[peer.identifier]?.generation ?? 0
            try write(
                record, of: store, changed: changedBuckets.map { $0[store.identifier] ?? [] }, in: transaction)
        }
    }

    /// Creates the record of every store from the rows as they are (new stores, stores without
    /// a record yet, or a record of another layout the application verified first): the rows
    /// are trusted as they are now. Generations go on from the current record's, or from
    /// `generations` (by store identifier) when there is none this key verifies.
    public func create(in transaction: StoreTransaction, generations: [String: Int64] = [:]) throws {
        var records: [String: Record] = [:]
        for store in stores {
            // Generations go on from the old record's, if any, so older copies stay older. One this
            // record's key cannot verify (after a rekey it is under the old key) restarts at 0, a
            // documented choice: copies from before carry a record under that other key and fail
            // verification anyway, and both stores restart together, so their generations agree.
            let previous = (try? self.record(of: store, in: transaction))?.generation ?? generations[store.identifier]
            for table in [tables.tags, tables.buckets, tables.record] {
                try transaction.execute(
                    "DROP TABLE IF EXISTS \(try transaction.qualified(table, storeIdentifier: store.identifier))")
            }
            let definitions = try tables.definitions {
                try transaction.qualified($0, storeIdentifier: store.identifier)
            }
            for statement in definitions { try transaction.execute(statement) }
            let tags = try transaction.qualified(tables.tags, storeIdentifier: store.identifier)
            var record = Record(model: model, generation: previous ?? 0)
            for table in store.tables.keys.sorted() {
                let columns = try columns(of: table, store: store, in: transaction)
                for cells in try transaction.rows(
                    "SELECT * FROM \(try transaction.qualified(table, storeIdentifier: store.identifier))")
                {
                    guard case .integer(let primaryKey) = cells.first else { continue }
                    let row = TaggedRow(
                        tag: try tag(store: store, table: table, columns: columns, cells: cells),
                        bucket: bucket(of: table, primaryKey: primaryKey, columns: columns, cells: cells, store: store))
                    try transaction.execute(
                        "INSERT INTO \(tags) (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES (?, ?, ?, ?)",
                        [.text(table), .integer(primaryKey), .integer(Int64(row.bucket)), .blob(Data(row.tag))])
                    record.add(row)
                }
            }
            records[store.identifier] = record
        }
        try advanceGenerations(records, changedBuckets: nil, in: transaction)
    }

    /// Whether the record was computed under another model version (a migration rewrote the
    /// rows, so their tags are renewed, trusting the rows as migrated). A record that cannot be
    /// read is left to verification, which reports it.
    public func needsRenewal(in transaction: StoreTransaction) -> Bool {
        stores.contains { store in
            (try? record(of: store, in: transaction)).flatMap { $0 }.map { $0.model != model } ?? false
        }
    }

    /// The model version the store's record was computed under, its MAC verified; nil when the
    /// store has no record.
    ///
    /// - throws: ``RowAuthenticationFailure`` when the record does not verify.
    public func recordedModel(of store: Store, in transaction: StoreTransaction) throws -> String? {
        try record(of: store, in: transaction)?.model
    }

    /// Whether the stores hold the generations the last save wrote.
    public func holdsLastWrittenGenerations(in transaction: StoreTransaction) throws -> Bool {
        guard !lastWrittenGenerations.isEmpty else { return false }
        return try stores.allSatisfy {
            try record(of: $0, in: transaction)?.generation == lastWrittenGenerations[$0.identifier]
        }
    }

    // MARK: - Verifying

    /// What differs between a row and its tag, in words; nil when they agree.
    func mismatch(current: TaggedRow?, recorded: TaggedRow?) -> String? {
        switch (current, recorded) {
        case (nil, nil): return nil
        case (_?, nil): return "the row was added outside \(writer)"
        case (nil, _?): return "the row was deleted outside \(writer)"
        case (let current?, let recorded?):
            guard Self.constantTimeEqual(current.tag, recorded.tag) else {
                return "the row was changed outside \(writer) "
                    + "(a value, its version or its relationships, or an older copy of it put back)"
            }
            return current.bucket == recorded.bucket ? nil : "its tag was moved to another bucket outside \(writer)"
        }
    }

    /// Every difference between the stores and their records; empty when they are as this
    /// coordinator's saves last wrote them. Nil when no store has a record yet. O(rows).
    ///
    /// - parameter inFull: the identifiers of the stores whose every row and index is checked
    ///   (all when nil); of the others, only the records (their MACs and generations): what a
    ///   read of those stores alone needs, O(rows of those stores + buckets).
    public func verify(in transaction: StoreTransaction, inFull: Set<String>? = nil) throws -> [IntegrityProblem]? {
        let wholeStore = { (store: Store) in inFull?.contains(store.identifier) ?? true }
        return try verifyRecords(in: transaction, loading: { wholeStore($0) ? Self.allGroups : 0 }) { store, record in
            guard wholeStore(store) else { return [] }
            // Reads go through indexes the tags do not cover: each must hold exactly its table's rows,
            // compared with the rows the tags are checked on as they stream by.
            var audit = try transaction.indexAudit(storeIdentifier: store.identifier, storeName: store.displayName)
            let problems = try verifyEveryRow(of: store, against: record, auditing: &audit, in: transaction)
            return try problems + transaction.indexProblems(of: audit)
        }
    }

    /// Where a read looked and what it looked for: the rows of `table` in `bucket` whose
    /// `column` holds `value` (an entry's name key, the entry its fields belong to).
    public struct Lookup: Hashable, Sendable {
        public let storeIdentifier: String
        public let bucket: Int
        public let table: String
        public let column: String
        public let value: StoredCell

        public init(storeIdentifier: String, bucket: Int, table: String, column: String, value: StoredCell) {
            self.storeIdentifier = storeIdentifier
            self.bucket = bucket
            self.table = table
            self.column = column
            self.value = value
        }
    }

    /// The differences that concern what a read showed: `rows` (each checked with every row of
    /// its bucket), and every bucket a lookup looked in, whose rows matching the lookup must all
    /// be among `rows` (so a damaged index or a deleted row cannot hide one); with both records
    /// and every bucket's count and sum. O(buckets + rows in the buckets checked).
    public func verify(rows: [StoredRowKey], lookups: [Lookup], in transaction: StoreTransaction) throws
        -> [IntegrityProblem]?
    {
        var wanted: [String: Set<Int>] = [:]
        for lookup in lookups { wanted[lookup.storeIdentifier, default: []].insert(lookup.bucket) }
        var columnsByTable: [StoredTable: [String]] = [:]
        var shown: [String: Set<StoredRowKey>] = [:]
        for row in rows {
            guard let store = store(row.storeIdentifier) else { continue }
            let tableKey = StoredTable(storeIdentifier: row.storeIdentifier, name: row.table)
            let columns = try columnsByTable[tableKey] ?? columns(of: row.table, store: store, in: transaction)
            columnsByTable[tableKey] = columns
            guard let current = try current(row, store: store, columns: columns, in: transaction) else { continue }
            wanted[store.identifier, default: []].insert(current.bucket)
            shown[store.identifier, default: []].insert(row)
        }
        return try verifyRecords(
            in: transaction, loading: { Self.groups(of: wanted[$0.identifier] ?? []) }
        ) { store, record in
            let checked = try verifyBuckets(
                wanted[store.identifier] ?? [], of: store, against: record,
                lookups: lookups.filter { $0.storeIdentifier == store.identifier }, in: transaction)
            var problems = checked.problems
            let shownHere = shown[store.identifier] ?? []
            // A row shown must be one its bucket's tags account for, not one added beside them.
            for row in shownHere.subtracting(checked.tagged) {
                problems.append(IntegrityProblem(
                    store: store.displayName, entity: store.tables[row.table], primaryKey: row.primaryKey,
                    message: "the row was added outside \(writer)"))
            }
            for row in checked.matched.subtracting(shownHere) {
                problems.append(IntegrityProblem(
                    store: store.displayName, entity: store.tables[row.table], primaryKey: row.primaryKey,
                    message: "the row was left out of a read (a table or index was changed outside \(writer))"))
            }
            return problems
        }
    }

    /// Both records, their generations, and what `check` finds in each store with a record, given
    /// the record with the groups `loading` names for the store read and checked against their seals.
    private func verifyRecords(
        in transaction: StoreTransaction, loading: (Store) -> UInt64,
        _ check: (Store, Record) throws -> [IntegrityProblem]
    ) throws -> [IntegrityProblem]? {
        var problems: [IntegrityProblem] = []
        var records: [String: Record] = [:]
        let withRecord = try stores.filter { try hasRecord($0, in: transaction) }
        guard !withRecord.isEmpty else { return nil }
        for store in stores {
            do {
                guard var record = try record(of: store, in: transaction) else {
                    problems.append(
                        IntegrityProblem(
                            store: store.displayName,
                            message: "its integrity record is missing, although the other store has one"))
                    continue
                }
                records[store.identifier] = record
                try load(loading(store), of: store, into: &record, in: transaction)
                // Kept with the record just verified: later reads of these groups read nothing again.
                verifiedRecords[store.identifier]?.record = record
                problems += try check(store, record)
            } catch let failure as RowAuthenticationFailure {
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
            store: older.displayName,
            message: "it is an older or foreign copy (generation \(generation), the other store expects \(expected))")
    }

    /// What checking buckets found, the rows their tags account for, and those a lookup matches.
    private struct BucketCheck {
        var problems: [IntegrityProblem] = []
        var tagged: Set<StoredRowKey> = []
        var matched: Set<StoredRowKey> = []
    }

    /// Checks the buckets `numbers`: their tags add up to what the record says, and each tag has
    /// its row, unchanged and in that bucket.
    private func verifyBuckets(
        _ numbers: Set<Int>, of store: Store, against record: Record, lookups: [Lookup] = [],
        in transaction: StoreTransaction
    ) throws -> BucketCheck {
        var check = BucketCheck()
        var recorded: [String: [Int64: TaggedRow]] = [:]
        var found = BucketTable()
        let tags = try transaction.qualified(tables.tags, storeIdentifier: store.identifier)
        let tagged: ([StoredCell]) throws -> Void = { cells in
            guard cells.count == 4, case .text(let table) = cells[0], case .integer(let key) = cells[1],
                case .integer(let bucket) = cells[2], case .blob(let tag) = cells[3], tag.count == 32
            else {
                check.problems.append(
                    IntegrityProblem(store: store.displayName, message: "its table of row tags holds a damaged entry"))
                return
            }
            let row = TaggedRow(tag: Array(tag), bucket: Int(bucket))
            recorded[table, default: [:]][key] = row
            found.add(row)
        }
        try transaction.forEachRow(
            "SELECT ZTABLE, ZPK, ZBUCKET, ZTAG FROM \(tags) WHERE ZBUCKET = ?",
            eachOf: numbers.sorted().map { [.integer(Int64($0))] }, tagged)
        check.problems += bucketProblems(found, numbers: numbers, of: store, against: record)
        // Only the tables with tagged rows in these buckets: a row without a tag is caught where it is read.
        for (table, entity) in store.tables.sorted(by: { $0.key < $1.key }) where recorded[table] != nil {
            let columns = try columns(of: table, store: store, in: transaction)
            var unseen = recorded[table] ?? [:]
            let qualified = try transaction.qualified(table, storeIdentifier: store.identifier)
            let compare: ([StoredCell]) throws -> Void = { cells in
                guard case .integer(let key) = cells.first else { return }
                let current = TaggedRow(
                    tag: try self.tag(store: store, table: table, columns: columns, cells: cells),
                    bucket: self.bucket(of: table, primaryKey: key, columns: columns, cells: cells, store: store))
                let recordedRow = unseen.removeValue(forKey: key)
                let row = StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: key)
                if recordedRow != nil { check.tagged.insert(row) }
                let matches = lookups.contains {
                    $0.table == table && $0.bucket == current.bucket
                        && columns.firstIndex(of: $0.column).map { cells[$0] } == $0.value
                }
                if matches { check.matched.insert(row) }
                if let problem = self.mismatch(current: current, recorded: recordedRow) {
                    check.problems.append(
                        IntegrityProblem(store: store.displayName, entity: entity, primaryKey: key, message: problem))
                }
            }
            try transaction.forEachRow("SELECT * FROM \(qualified) WHERE Z_PK = ?",
                                       eachOf: (recorded[table] ?? [:]).keys.sorted().map { [.integer($0)] }, compare)
            for key in unseen.keys.sorted() {
                check.problems.append(
                    IntegrityProblem(
                        store: store.displayName, entity: entity, primaryKey: key,
                        message: "the row was deleted outside \(writer)"))
            }
        }
        return check
    }

    /// Buckets whose tags (`found`) do not add up to what the record says, among `numbers`
    /// (every bucket when nil, and then the count of every tag too).
    private func bucketProblems(_ found: BucketTable, numbers: Set<Int>?, of store: Store, against record: Record)
        -> [IntegrityProblem]
    {
        var problems: [IntegrityProblem] = []
        for number in (numbers ?? Set(record.buckets.numbers)).union(found.numbers).sorted()
        where !found.agrees(with: record.buckets, on: number) {
            problems.append(
                IntegrityProblem(
                    store: store.displayName,
                    message: "rows and their tags were removed or replaced together (bucket \(number): "
                        + "\(found.count(of: number)) tagged rows, the record counts "
                        + "\(record.buckets.count(of: number)))"))
        }
        if numbers == nil, found.total != record.rowCount {
            problems.append(
                IntegrityProblem(store: store.displayName, message: "its buckets do not add up to its record's count"))
        }
        return problems
    }

    /// Every bucket and every row of the store, in memory that does not grow with it: each
    /// table's rows and tags are walked side by side in primary-key order, a page of tags at a
    /// time, and the tags summed by bucket as they go by (read once: a pass of their own was a
    /// tenth of a list's check); tags of no table are looked for only when the count says so.
    /// The rows of each table with indexes in `audit` are added to it on the way.
    private func verifyEveryRow(
        of store: Store, against record: Record, auditing audit: inout IndexAudit, in transaction: StoreTransaction
    ) throws -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        // Rows numbered below the buckets are read by no check of a bucket or a seal.
        let buckets = try transaction.qualified(tables.buckets, storeIdentifier: store.identifier)
        if case .integer(let strays)? = try transaction.rows("SELECT COUNT(*) FROM \(buckets) WHERE ZBUCKET < 0")
            .first?.first, strays > 0
        {
            let rows = strays == 1 ? "a row" : "\(strays) rows"
            problems.append(IntegrityProblem(
                store: store.displayName, message: "its table of buckets holds \(rows) numbered below 0"))
        }
        let tags = try transaction.qualified(tables.tags, storeIdentifier: store.identifier)
        // The tags are summed by bucket as each table's pages of them go by.
        let tally = TagTally(damaged: IntegrityProblem(
            store: store.displayName, message: "its table of row tags holds a damaged entry"))
        var tag = [UInt8](repeating: 0, count: 32)
        for (table, entity) in store.tables.sorted(by: { $0.key < $1.key }) {
            let columns = try columns(of: table, store: store, in: transaction)
            var tagger = tagger(store: store, table: table, columns: columns)
            let bucketing = TableBucketing(table, columns: columns, store: store)
            var page = TagPage(table: table, tags: tags, tally: tally)
            func problem(_ key: Int64, _ message: String) -> IntegrityProblem {
                IntegrityProblem(store: store.displayName, entity: entity, primaryKey: key, message: message)
            }
            let deleted = "the row was deleted outside \(writer)"
            // Read in place: this reads every row of the store.
            let qualified = try transaction.qualified(table, storeIdentifier: store.identifier)
            var digests = audit.digests(of: table, columns: columns + ["rowid"])
            let selected = digests == nil ? "*" : "*, rowid"
            try transaction.db.forEachRow(
                sql: "SELECT \(selected) FROM \(qualified) NOT INDEXED ORDER BY Z_PK", arguments: []
            ) { row in
                digests?.add(row)
                guard let key = row.int64(at: 0) else { return }
                // Tags before this row name rows that are gone.
                while let next = try page.peek(in: transaction), next < key {
                    problems.append(problem(next, deleted))
                    page.advance()
                }
                try tag.withUnsafeMutableBytes { code in try tagger.tag(into: code) { row.withCell(at: $0, $1) } }
                let current = TaggedRow(
                    tag: tag, bucket: bucketing.bucket(primaryKey: key) { row.withCell(at: $0, $1) })
                guard try page.peek(in: transaction) == key else {
                    if let message = self.mismatch(current: current, recorded: nil) {
                        problems.append(problem(key, message))
                    }
                    return
                }
                // Compared in place; the recorded row is copied out only to name a difference.
                if !page.holds(current), let message = self.mismatch(current: current, recorded: page.row) {
                    problems.append(problem(key, message))
                }
                page.advance()
            }
            while let next = try page.peek(in: transaction) {
                problems.append(problem(next, deleted))
                page.advance()
            }
            if let digests { audit.record(digests) }
        }
        // Tags the pages did not read (of a table the store does not have, say): the whole tag
        // table is read on its own, only then, and its sums and problems replace the pages'.
        if case .integer(let count)? = try transaction.rows("SELECT COUNT(*) FROM \(tags) NOT INDEXED").first?.first,
           count != tally.read
        {
            try tallyEveryTag(of: store, into: tally, in: transaction)
        }
        return problems + tally.problems + bucketProblems(tally.sums, numbers: nil, of: store, against: record)
    }

    /// Sums every tag of the store by bucket into a fresh tally, naming each damaged one and each
    /// of a table the store does not cover.
    private func tallyEveryTag(of store: Store, into tally: TagTally, in transaction: StoreTransaction) throws {
        (tally.sums, tally.problems, tally.read) = (BucketTable(), [], 0)
        let uncovered = IntegrityProblem(
            store: store.displayName, message: "its table of row tags names a table it does not cover")
        let covered = store.tables.keys.map { Array($0.utf8) }
        let tags = try transaction.qualified(tables.tags, storeIdentifier: store.identifier)
        let sql = "SELECT ZTABLE, ZPK, ZBUCKET, ZTAG FROM \(tags) NOT INDEXED"
        try transaction.db.forEachRow(sql: sql, arguments: []) { row in
            tally.read += 1
            let problem: IntegrityProblem? = row.withCell(at: 0) { table in
                guard case .text(let table) = table, row.int64(at: 1) != nil, let bucket = row.int64(at: 2) else {
                    return tally.damaged
                }
                return row.withCell(at: 3) { tag in
                    guard case .blob(let tag) = tag, tag.count == 32 else { return tally.damaged }
                    tally.sums.add(tag, to: Int(bucket))
                    return covered.contains { $0.elementsEqual(table) } ? nil : uncovered
                }
            }
            if let problem { tally.problems.append(problem) }
        }
    }

    /// The tags read so far, of every table: their sums by bucket, how many entries (damaged
    /// ones too), and a problem for each damaged one.
    private final class TagTally {
        var sums = BucketTable()
        var read = 0
        var problems: [IntegrityProblem] = []
        let damaged: IntegrityProblem
        init(damaged: IntegrityProblem) { self.damaged = damaged }
    }

    /// The tags of one table in primary-key order, read a page at a time, in place, each added
    /// to the tally.
    private struct TagPage {
        static let size = 4096
        let table: String
        let tags: String
        private var keys: [Int64] = []
        private var buckets: [Int] = []
        /// 32 bytes a key.
        private var tagBytes: [UInt8] = []
        private var index = 0
        /// The key the last page ended at; nil before the first, which has no lower bound (a key
        /// may be any value: the smallest integer, a real below it).
        private var after: DatabaseValue?
        private var exhausted = false

        let tally: TagTally

        init(table: String, tags: String, tally: TagTally) {
            self.table = table
            self.tags = tags
            self.tally = tally
        }

        /// The next tagged key, nil when there is none.
        mutating func peek(in transaction: StoreTransaction) throws -> Int64? {
            if index == keys.count, !exhausted { try load(transaction) }
            return index < keys.count ? keys[index] : nil
        }

        /// The tag and bucket of the key ``peek(in:)`` gave.
        var row: TaggedRow {
            TaggedRow(tag: Array(tagBytes[index * 32 ..< index * 32 + 32]), bucket: buckets[index])
        }

        /// Whether the key ``peek(in:)`` gave was recorded with `current`'s tag and bucket.
        func holds(_ current: TaggedRow) -> Bool {
            RowAuthentication.constantTimeEqual(current.tag, tagBytes[index * 32 ..< index * 32 + 32])
                && buckets[index] == current.bucket
        }

        mutating func advance() { index += 1 }

        private mutating func load(_ transaction: StoreTransaction) throws {
            keys.removeAll(keepingCapacity: true)
            buckets.removeAll(keepingCapacity: true)
            tagBytes.removeAll(keepingCapacity: true)
            index = 0
            // Pages of damaged entries only are passed over.
            while keys.isEmpty, !exhausted {
                var read = 0
                let lowerBound = after == nil ? "" : " AND ZPK > ?"
                try transaction.db.forEachRow(
                    sql: "SELECT ZPK, ZBUCKET, ZTAG FROM \(tags) WHERE ZTABLE = ?\(lowerBound) "
                        + "ORDER BY ZPK LIMIT \(Self.size)",
                    arguments: [table.databaseValue] + (after.map { [$0] } ?? [])
                ) { row in
                    read += 1
                    // Whatever its type (text sorts after every number), so the next page starts after it.
                    after = row.databaseValue(at: 0)
                    // A key that is no integer names no row: a damaged entry, not counted (counted in
                    // its bucket, a row's own tag given such a key let the row be deleted unseen).
                    let isTag = row.withCell(at: 2) { tag in
                        guard let key = row.int64(at: 0), let bucket = row.int64(at: 1), case .blob(let tag) = tag,
                              tag.count == 32
                        else { return false }
                        tally.sums.add(tag, to: Int(bucket))
                        tagBytes.append(contentsOf: tag)
                        keys.append(key)
                        buckets.append(Int(bucket))
                        return true
                    }
                    if !isTag { tally.problems.append(tally.damaged) }
                }
                tally.read += read
                exhausted = read < Self.size
            }
        }
    }
}

/// Tags the rows of one table: the fixed part of each message (store, table, column names) is
/// encoded once, values go into one buffer kept from row to row, and the MAC is written in
/// place, so a whole store's rows are tagged without an allocation per row.
struct RowTagger {
    private let authenticator: RowAuthenticator
    private let head: [UInt8]
    private let columnFields: [[UInt8]]
    private var message: [UInt8] = []

    init(authenticator: RowAuthenticator, store: String, table: String, columns: [String]) {
        self.authenticator = authenticator
        var head: [UInt8] = []
        for part in ["row", store, table] { RowAuthentication.appendField(&head, part.utf8) }
        self.head = head
        columnFields = columns.map { name in
            var field: [UInt8] = []
            RowAuthentication.appendField(&field, name.utf8)
            return field
        }
    }

    /// Writes into `code` (32 bytes) the tag of the row whose values `withCell` hands over by
    /// column index: the store, table, then each column's name and value.
    mutating func tag(into code: UnsafeMutableRawBufferPointer, withCell: (Int, (RawCell) -> Void) -> Void) throws {
        var message = self.message
        self.message = []
        defer { self.message = message }
        message.removeAll(keepingCapacity: true)
        message.append(contentsOf: head)
        for (index, field) in columnFields.enumerated() {
            message.append(contentsOf: field)
            withCell(index) { RowAuthentication.append($0, to: &message) }
        }
        try message.withUnsafeBytes { try authenticator.authenticationCode(of: $0, into: code) }
    }
}

/// The count and sum of tags of each bucket, in flat arrays: every opening reads a record's
/// thousands of buckets, and a whole store's tags are summed into one as they stream by.
struct BucketTable: Equatable {
    private var counts = [Int64](repeating: 0, count: RowAuthentication.bucketCount)
    /// Each sum as four 64-bit words, the most significant first.
    private var words = [UInt64](repeating: 0, count: RowAuthentication.bucketCount * 4)
    /// Buckets no row can be in (a changed tag table), kept to be reported.
    private var strays: [Int: RowAuthentication.Bucket] = [:]

    /// Adds a 32-byte tag (a big-endian number) to `bucket`, or takes it out, modulo 2^256.
    mutating func add(_ tag: UnsafeRawBufferPointer, to bucket: Int, negating: Bool = false) {
        guard counts.indices.contains(bucket) else {
            return strays[bucket, default: .init()].add(Array(tag), negating: negating)
        }
        counts[bucket] += negating ? -1 : 1
        var carry = false
        for word in (0..<4).reversed() {
            let operand = UInt64(bigEndian: tag.loadUnaligned(fromByteOffset: word * 8, as: UInt64.self))
            let current = words[bucket * 4 + word]
            let (partial, first) = negating
                ? current.subtractingReportingOverflow(operand) : current.addingReportingOverflow(operand)
            let (total, second) = negating
                ? partial.subtractingReportingOverflow(carry ? 1 : 0) : partial.addingReportingOverflow(carry ? 1 : 0)
            words[bucket * 4 + word] = total
            carry = first || second
        }
    }

    mutating func add(_ row: RowAuthentication.TaggedRow, negating: Bool = false) {
        row.tag.withUnsafeBytes { add($0, to: row.bucket, negating: negating) }
    }

    /// Sets a bucket as a record stores it: a number below the bucket count and a 32-byte sum.
    mutating func set(_ bucket: Int, count: Int64, sum: UnsafeRawBufferPointer) {
        counts[bucket] = count
        for word in 0..<4 {
            words[bucket * 4 + word] = UInt64(bigEndian: sum.loadUnaligned(fromByteOffset: word * 8, as: UInt64.self))
        }
    }

    func count(of bucket: Int) -> Int64 {
        counts.indices.contains(bucket) ? counts[bucket] : strays[bucket]?.count ?? 0
    }

    /// The sum of `bucket` as 32 big-endian bytes.
    func sum(of bucket: Int) -> [UInt8] {
        guard counts.indices.contains(bucket) else { return strays[bucket]?.sum ?? RowAuthentication.zeroSum }
        var sum: [UInt8] = []
        sum.reserveCapacity(32)
        for word in 0..<4 { withUnsafeBytes(of: words[bucket * 4 + word].bigEndian) { sum.append(contentsOf: $0) } }
        return sum
    }

    /// Whether both hold the same count and sum in `bucket`.
    func agrees(with other: BucketTable, on bucket: Int) -> Bool {
        guard counts.indices.contains(bucket) else {
            return (strays[bucket] ?? .init()) == (other.strays[bucket] ?? .init())
        }
        return counts[bucket] == other.counts[bucket]
            && words[bucket * 4 ..< bucket * 4 + 4] == other.words[bucket * 4 ..< bucket * 4 + 4]
    }

    /// The buckets holding a count or a sum, in order.
    var numbers: [Int] {
        counts.indices.filter { bucket in
            counts[bucket] != 0 || words[bucket * 4 ..< bucket * 4 + 4].contains { $0 != 0 }
        } + strays.keys.sorted()
    }

    /// The count of every tag.
    var total: Int64 { counts.reduce(0, +) + strays.values.reduce(0) { $0 + $1.count } }

    /// Writes, for each bucket of `range` (every bucket below the bucket count when nil) whose
    /// count is not zero, in order, its number, count, sum's length and sum, each number a
    /// big-endian 64-bit integer.
    func appendCounted(to message: inout [UInt8], in range: Range<Int>? = nil) {
        let range = range ?? counts.indices
        var countedBuckets = 0
        for bucket in range where counts[bucket] != 0 { countedBuckets += 1 }
        var offset = message.count
        // Zeroed in one go (appending a repeated element went byte by byte), then written over.
        message += [UInt8](repeating: 0, count: countedBuckets * 56)
        message.withUnsafeMutableBytes { bytes in
            for bucket in range where counts[bucket] != 0 {
                bytes.storeBytes(of: Int64(bucket).bigEndian, toByteOffset: offset, as: Int64.self)
                bytes.storeBytes(of: counts[bucket].bigEndian, toByteOffset: offset + 8, as: Int64.self)
                bytes.storeBytes(of: Int64(32).bigEndian, toByteOffset: offset + 16, as: Int64.self)
                for word in 0..<4 {
                    bytes.storeBytes(
                        of: words[bucket * 4 + word].bigEndian, toByteOffset: offset + 24 + word * 8, as: UInt64.self)
                }
                offset += 56
            }
        }
    }
}

extension RowAuthentication.Record {
    mutating func add(_ row: RowAuthentication.TaggedRow) {
        buckets.add(row)
        rowCount += 1
    }

    mutating func remove(_ row: RowAuthentication.TaggedRow) {
        buckets.add(row, negating: true)
        rowCount -= 1
    }
}

extension RowAuthentication.Bucket {
    mutating func add(_ tag: [UInt8], negating: Bool = false) {
        sum = RowAuthentication.add(sum, tag, negating: negating)
        count += negating ? -1 : 1
    }
}

/// A row or record found changed while writing or verifying: the save is refused and the
/// problem names the place.
public struct RowAuthenticationFailure: Error {
    public var problem: IntegrityProblem

    public init(store: String, entity: String? = nil, primaryKey: Int64? = nil, message: String) {
        problem = IntegrityProblem(store: store, entity: entity, primaryKey: primaryKey, message: message)
    }

    public init(_ problem: IntegrityProblem) { self.problem = problem }
}

extension RowAuthentication {
    /// Compares two MACs in time that depends only on their length.
    static func constantTimeEqual<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
