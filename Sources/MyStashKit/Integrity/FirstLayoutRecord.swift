import Foundation
import ObjectGraph
import StashCrypto

/// The integrity record as the first release with one wrote it (FORMAT.md, "Integrity record,
/// version 1"): the same row tags without buckets, and per store one sum of every tag. Read
/// only to check such a vault in full once before its record is rebuilt with buckets.
enum FirstLayoutRecord {
    /// Its tables, as the schema check expects them in a store that still has this layout.
    static let tableDefinitions = [
        "CREATE TABLE IF NOT EXISTS \(IntegrityRecord.tables.tags) (ZTABLE TEXT NOT NULL, ZPK INTEGER NOT NULL, "
            + "ZTAG BLOB NOT NULL, PRIMARY KEY (ZTABLE, ZPK)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS \(IntegrityRecord.tables.record) (ZID INTEGER PRIMARY KEY CHECK (ZID = 1), "
            + "ZMODEL TEXT, ZGENERATION INTEGER, ZPEERGENERATION INTEGER, ZROWCOUNT INTEGER, ZTAGSUM BLOB, "
            + "ZMAC BLOB)",
    ]

    /// The first layout's record of `store`: nil when it has the current layout or none.
    private struct Record {
        var model: String
        var generation: Int64
        var peerGeneration: Int64
        var rowCount: Int64
        var tagSum: [UInt8]
        var mac: [UInt8]
    }

    /// Whether the store's record has this layout.
    static func isLayout(of store: RowAuthentication.Store, _ transaction: StoreTransaction) throws -> Bool {
        let schema = try transaction.qualified("sqlite_master", storeIdentifier: store.identifier)
            .dropLast("sqlite_master".count)
        return try transaction.rows("PRAGMA \(schema)table_info(\(IntegrityRecord.tables.record))").contains {
            $0.count > 1 && $0[1] == .text("ZTAGSUM")
        }
    }

    private static func read(_ store: RowAuthentication.Store, in transaction: StoreTransaction) throws -> Record? {
        guard try IntegrityRecord.tables.exist(inStore: store.identifier, transaction),
              try isLayout(of: store, transaction) else { return nil }
        let table = try transaction.qualified(IntegrityRecord.tables.record, storeIdentifier: store.identifier)
        guard
            let cells = try transaction.rows(
                "SELECT ZMODEL, ZGENERATION, ZPEERGENERATION, ZROWCOUNT, ZTAGSUM, ZMAC FROM \(table) WHERE ZID = 1"
            ).first,
            cells.count == 6, case .text(let model) = cells[0], case .integer(let generation) = cells[1],
            case .integer(let peer) = cells[2], case .integer(let count) = cells[3], case .blob(let sum) = cells[4],
            sum.count == 32, case .blob(let mac) = cells[5]
        else { throw RowAuthenticationFailure(store: store.displayName, message: "its integrity record is damaged") }
        return Record(model: model, generation: generation, peerGeneration: peer, rowCount: count,
                      tagSum: Array(sum), mac: Array(mac))
    }

    /// The model version a first-layout record was computed under; nil for any other layout.
    static func model(of store: RowAuthentication.Store, in transaction: StoreTransaction) throws -> String? {
        try read(store, in: transaction)?.model
    }

    /// The generation of a first-layout record that `record`'s key verifies; nil for any other.
    static func generation(
        of store: RowAuthentication.Store, record: IntegrityRecord, in transaction: StoreTransaction
    ) throws -> Int64? {
        guard let stored = try read(store, in: transaction), try verifies(stored, store: store, record: record)
        else { return nil }
        return stored.generation
    }

    private static func verifies(_ stored: Record, store: RowAuthentication.Store, record: IntegrityRecord) throws
        -> Bool
    {
        var message: [UInt8] = []
        RowAuthentication.appendField(&message, "record".utf8)
        RowAuthentication.appendField(&message, store.identifier.utf8)
        RowAuthentication.appendField(&message, store.displayName.utf8)
        RowAuthentication.appendField(&message, stored.model.utf8)
        for number in [stored.generation, stored.peerGeneration, stored.rowCount] {
            RowAuthentication.append(number, to: &message)
        }
        RowAuthentication.appendField(&message, stored.tagSum)
        return ConstantTime.equal(try record.authenticationCode(of: message), stored.mac)
    }

    /// The model version the last release wrote this layout under; its rows differ from the
    /// current model's only by the columns in ``columnsAddedSince``, NULL until a save.
    static let lastModel = "MyStash 3"
    static let columnsAddedSince: Set<String> = ["ZNAMEKEY"]

    /// Every difference between the stores and their first-layout records, as version 1
    /// checked them: each record's MAC, the generations, each store's tag sum and count, and
    /// every row against its tag, computed without the columns in `ignoring` that hold NULL
    /// (those a migration added since).
    static func verify(_ record: IntegrityRecord, ignoring: Set<String>, in transaction: StoreTransaction) throws
        -> [IntegrityProblem]
    {
        var problems: [IntegrityProblem] = []
        var generations: [String: (Int64, Int64)] = [:]
        for store in record.stores {
            guard let stored = try read(store, in: transaction) else {
                problems.append(IntegrityProblem(store: store.displayName, message: "its integrity record is missing, "
                    + "or has another layout than the other store's"))
                continue
            }
            guard try verifies(stored, store: store, record: record) else {
                problems.append(IntegrityProblem(
                    store: store.displayName, message: "its integrity record was altered or comes from another vault"))
                continue
            }
            generations[store.identifier] = (stored.generation, stored.peerGeneration)
            problems += try verifyRows(of: store, against: stored, record: record, ignoring: ignoring, in: transaction)
        }
        if let first = record.stores.first, let last = record.stores.last,
           let a = generations[first.identifier], let b = generations[last.identifier], a.1 != b.0 || b.1 != a.0 {
            problems.append(IntegrityProblem(store: first.displayName, message: "it is an older or foreign copy "
                + "(generation \(a.0), the other store expects \(b.1))"))
        }
        return problems
    }

    private static func verifyRows(
        of store: RowAuthentication.Store, against stored: Record, record: IntegrityRecord, ignoring: Set<String>,
        in transaction: StoreTransaction
    ) throws -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        var recorded: [String: [Int64: [UInt8]]] = [:]
        var sum = RowAuthentication.zeroSum
        var count: Int64 = 0
        let tags = try transaction.qualified(IntegrityRecord.tables.tags, storeIdentifier: store.identifier)
        try transaction.forEachRow("SELECT ZTABLE, ZPK, ZTAG FROM \(tags)") { cells in
            guard cells.count == 3, case .text(let table) = cells[0], case .integer(let key) = cells[1],
                case .blob(let tag) = cells[2], tag.count == 32
            else {
                problems.append(
                    IntegrityProblem(store: store.displayName, message: "its table of row tags holds a damaged entry"))
                return
            }
            recorded[table, default: [:]][key] = Array(tag)
            sum = RowAuthentication.add(sum, Array(tag))
            count += 1
        }
        if sum != stored.tagSum || count != stored.rowCount {
            problems.append(IntegrityProblem(
                store: store.displayName, message: "rows and their tags were removed or replaced together "
                    + "(\(count) tagged rows, the record counts \(stored.rowCount))"))
        }
        for (table, entity) in store.tables.sorted(by: { $0.key < $1.key }) {
            let columns = try record.rows.columns(of: table, store: store, in: transaction)
            var unseen = recorded[table] ?? [:]
            let qualified = try transaction.qualified(table, storeIdentifier: store.identifier)
            try transaction.forEachRow("SELECT * FROM \(qualified) ORDER BY Z_PK") { cells in
                guard case .integer(let key) = cells.first else { return }
                let kept = zip(columns, cells).filter { !(ignoring.contains($0.0) && $0.1 == .null) }
                let current = try record.rows.tag(
                    store: store, table: table, columns: kept.map(\.0), cells: kept.map(\.1))
                let problem = unseen.removeValue(forKey: key).map {
                    ConstantTime.equal(current, $0) ? nil : "the row was changed outside mystash "
                        + "(a value, its version or its relationships, or an older copy of it put back)"
                } ?? "the row was added outside mystash"
                if let problem {
                    problems.append(IntegrityProblem(store: store.displayName, entity: entity, primaryKey: key,
                                                     message: problem))
                }
            }
            for key in unseen.keys.sorted() {
                problems.append(IntegrityProblem(store: store.displayName, entity: entity, primaryKey: key,
                                                 message: "the row was deleted outside mystash"))
            }
        }
        return problems
    }
}
