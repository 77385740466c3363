import Foundation
import GRDB
import GRDBSQLite
import ObjectGraph

/// GRDB's published performance workload: an entity with ten Integer 64 attributes.
enum ItemModel {
    static func make() throws -> ManagedObjectModel {
        let attributes = (0..<10).map {
            AttributeDescription(name: "i\($0)", type: .integer64, isOptional: false, isIndexed: $0 == 0)
        }
        return try ManagedObjectModel(entities: [EntityDescription(name: "Item", attributes: attributes)])
    }

    static func stack(at path: String, tracksHistory: Bool = false) throws
        -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try make())
        var options = StoreOptions()
        options.tracksPersistentHistory = tracksHistory
        try coordinator.addPersistentStore(type: .sqlite, at: URL(fileURLWithPath: path), options: options)
        return (coordinator, ManagedObjectContext(coordinator: coordinator))
    }

    /// The attribute names, made once as an app's typed accessors would.
    static let keys = (0..<10).map { "i\($0)" }

    /// The value of attribute `column` for row `row`: deterministic, spread out.
    static func value(_ row: Int, _ column: Int) -> Int { (row &* 7919 &+ column &* 104_729) % 1_000_003 }
}

/// A GRDB record over the same rows (the ZITEM table ObjectGraph writes).
struct ItemRecord: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ZITEM"
    var Z_PK: Int64?
    var Z_ENT: Int64
    var Z_OPT: Int64
    var ZI0, ZI1, ZI2, ZI3, ZI4, ZI5, ZI6, ZI7, ZI8, ZI9: Int64
}

/// A plain GRDB record for the insert case, as in GRDB's Tests/Performance.
struct PlainItem: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "items"
    var i0, i1, i2, i3, i4, i5, i6, i7, i8, i9: Int64
}

enum LibraryCases {
    static let implementations = ["ours", "grdb", "sqlite"]
    /// Cases also run with persistent history on ("history"), compared with ours without it.
    static let historyCases: Set<String> = ["objectgraph.insert50k", "objectgraph.update1k"]

    /// Writes `rows` Items with ObjectGraph into a new store, for the fetch cases.
    static func prepare(path: String, rows: Int) throws {
        try? FileManager.default.removeItem(atPath: path)
        let (_, context) = try ItemModel.stack(at: path)
        for row in 0..<rows {
            let item = context.insertNewObject(forEntityName: "Item")
            for column in 0..<10 { item[ItemModel.keys[column]] = ItemModel.value(row, column) }
        }
        try context.save()
    }

    /// Runs one case with one implementation and returns the seconds of the measured work.
    static func run(_ name: String, implementation: String, directory: String, size: Int) throws -> Double {
        switch (name, implementation) {
        case ("objectgraph.insert50k", "ours"), ("objectgraph.insert50k", "history"):
            let (_, context) = try ItemModel.stack(
                at: "\(directory)/insert-\(implementation)-\(UUID().uuidString).sqlite",
                tracksHistory: implementation == "history")
            return try time {
                for row in 0..<size {
                    let item = context.insertNewObject(forEntityName: "Item")
                    for column in 0..<10 { item[ItemModel.keys[column]] = ItemModel.value(row, column) }
                }
                try context.save()
            }
        case ("objectgraph.insert50k", "grdb"):
            let queue = try DatabaseQueue(path: "\(directory)/insert-grdb-\(UUID().uuidString).sqlite")
            try queue.write { db in
                try db.execute(
                    sql:
                        "CREATE TABLE items (i0 INT, i1 INT, i2 INT, i3 INT, i4 INT, i5 INT, i6 INT, i7 INT, i8 INT, "
                            + "i9 INT)"
                )
            }
            return try time {
                try queue.inTransaction { db in
                    for row in 0..<size {
                        let v = { (column: Int) in Int64(ItemModel.value(row, column)) }
                        try PlainItem(
                            i0: v(0), i1: v(1), i2: v(2), i3: v(3), i4: v(4), i5: v(5), i6: v(6), i7: v(7), i8: v(8),
                            i9: v(9)
                        ).insert(db)
                    }
                    return .commit
                }
            }
        case ("objectgraph.insert50k", "sqlite"):
            let db = try RawSQLite(path: "\(directory)/insert-raw-\(UUID().uuidString).sqlite")
            try db.exec(
                "CREATE TABLE items (i0 INT, i1 INT, i2 INT, i3 INT, i4 INT, i5 INT, i6 INT, i7 INT, i8 INT, i9 INT)")
            return try time {
                try db.exec("BEGIN")
                let statement = try db.prepare("INSERT INTO items VALUES (?,?,?,?,?,?,?,?,?,?)")
                for row in 0..<size {
                    for column in 0..<10 {
                        sqlite3_bind_int64(statement, Int32(column + 1), Int64(ItemModel.value(row, column)))
                    }
                    guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("insert failed") }
                    sqlite3_reset(statement)
                }
                sqlite3_finalize(statement)
                try db.exec("COMMIT")
            }

        case ("objectgraph.fetch200k", "ours"):
            let (_, context) = try ItemModel.stack(at: "\(directory)/fetch.sqlite")
            var sum = 0
            let seconds = try time {
                for item in try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")) {
                    for column in 0..<10 { sum &+= item[ItemModel.keys[column]] as! Int }
                }
            }
            try check(sum, rows: size)
            return seconds
        case ("objectgraph.fetch200k", "grdb"):
            let queue = try DatabaseQueue(path: "\(directory)/fetch.sqlite")
            var sum: Int64 = 0
            let seconds = try time {
                for item in try queue.read({ try ItemRecord.fetchAll($0) }) {
                    sum &+=
                        item.ZI0 &+ item.ZI1 &+ item.ZI2 &+ item.ZI3 &+ item.ZI4 &+ item.ZI5 &+ item.ZI6 &+ item.ZI7
                        &+ item.ZI8 &+ item.ZI9
                }
            }
            try check(Int(sum), rows: size)
            return seconds
        case ("objectgraph.fetch200k", "sqlite"):
            let db = try RawSQLite(path: "\(directory)/fetch.sqlite")
            var sum: Int64 = 0
            let seconds = try time {
                let statement = try db.prepare("SELECT ZI0, ZI1, ZI2, ZI3, ZI4, ZI5, ZI6, ZI7, ZI8, ZI9 FROM ZITEM")
                while sqlite3_step(statement) == SQLITE_ROW {
                    for column in 0..<10 { sum &+= sqlite3_column_int64(statement, Int32(column)) }
                }
                sqlite3_finalize(statement)
            }
            try check(Int(sum), rows: size)
            return seconds

        // Walking every row in batches: memory should stay flat, as with a GRDB cursor.
        case ("objectgraph.walk200k", "ours"):
            let (_, context) = try ItemModel.stack(at: "\(directory)/fetch.sqlite")
            var sum = 0
            let seconds = try time {
                var request = FetchRequest<ManagedObject>(entityName: "Item")
                request.fetchBatchSize = 1000
                for item in try context.fetchBatched(request) {
                    for column in 0..<10 { sum &+= item[ItemModel.keys[column]] as! Int }
                }
            }
            try check(sum, rows: size)
            return seconds
        case ("objectgraph.walk200k", "grdb"):
            let queue = try DatabaseQueue(path: "\(directory)/fetch.sqlite")
            var sum: Int64 = 0
            let seconds = try time {
                try queue.read { db in
                    let cursor = try ItemRecord.fetchCursor(db)
                    while let item = try cursor.next() {
                        sum &+=
                            item.ZI0 &+ item.ZI1 &+ item.ZI2 &+ item.ZI3 &+ item.ZI4 &+ item.ZI5 &+ item.ZI6 &+ item.ZI7
                            &+ item.ZI8 &+ item.ZI9
                    }
                }
            }
            try check(Int(sum), rows: size)
            return seconds
        case ("objectgraph.walk200k", "sqlite"):
            return try run("objectgraph.fetch200k", implementation: "sqlite", directory: directory, size: size)

        case ("objectgraph.fetchPredicate", "ours"):
            let (_, context) = try ItemModel.stack(at: "\(directory)/fetch.sqlite")
            var count = 0
            let seconds = try time {
                var request = FetchRequest<ManagedObject>(
                    entityName: "Item", predicate: try Predicate(format: "i1 < %@ AND i2 > %@", 500_000, 250_000))
                request.sortDescriptors = [FetchSortDescriptor(key: "i0")]
                count = try context.fetch(request).count
            }
            try checkCount(count, directory: directory)
            return seconds
        case ("objectgraph.fetchPredicate", "grdb"):
            let queue = try DatabaseQueue(path: "\(directory)/fetch.sqlite")
            var count = 0
            let seconds = try time {
                count = try queue.read { db in
                    try ItemRecord.filter(Column("ZI1") < 500_000 && Column("ZI2") > 250_000).order(Column("ZI0"))
                        .fetchAll(db).count
                }
            }
            try checkCount(count, directory: directory)
            return seconds
        case ("objectgraph.fetchPredicate", "sqlite"):
            let db = try RawSQLite(path: "\(directory)/fetch.sqlite")
            var count = 0
            let seconds = try time {
                let statement = try db.prepare(
                    "SELECT Z_PK, Z_ENT, Z_OPT, ZI0, ZI1, ZI2, ZI3, ZI4, ZI5, ZI6, ZI7, ZI8, ZI9 FROM ZITEM WHERE ZI1 "
                        + "< ? AND ZI2 > ? ORDER BY ZI0"
                )
                sqlite3_bind_int64(statement, 1, 500_000)
                sqlite3_bind_int64(statement, 2, 250_000)
                while sqlite3_step(statement) == SQLITE_ROW { count += 1 }
                sqlite3_finalize(statement)
            }
            try checkCount(count, directory: directory)
            return seconds

        case ("objectgraph.update1k", _):
            let path = "\(directory)/update-\(implementation)-\(UUID().uuidString).sqlite"
            try FileManager.default.copyItem(atPath: "\(directory)/fetch.sqlite", toPath: path)
            defer { try? FileManager.default.removeItem(atPath: path) }
            switch implementation {
            case "ours", "history":
                let (_, context) = try ItemModel.stack(at: path, tracksHistory: implementation == "history")
                return try time {
                    var request = FetchRequest<ManagedObject>(
                        entityName: "Item", predicate: try Predicate(format: "i0 < %@", 1_000_003 / (size / 1000)))
                    request.fetchLimit = 1000
                    for item in try context.fetch(request) { item["i1"] = (item["i1"] as! Int) + 1 }
                    try context.save()
                }
            case "grdb":
                let queue = try DatabaseQueue(path: path)
                return try time {
                    try queue.inTransaction { db in
                        for var item in try ItemRecord.filter(Column("ZI0") < 1_000_003 / (size / 1000)).limit(1000)
                            .fetchAll(db)
                        {
                            item.ZI1 += 1
                            item.Z_OPT += 1
                            try item.update(db)
                        }
                        return .commit
                    }
                }
            default:
                let db = try RawSQLite(path: path)
                return try time {
                    try db.exec("BEGIN")
                    try db.exec(
                        "UPDATE ZITEM SET ZI1 = ZI1 + 1, Z_OPT = Z_OPT + 1 WHERE Z_PK IN (SELECT Z_PK FROM ZITEM WHERE "
                            + "ZI0 < \(1_000_003 / (size / 1000)) LIMIT 1000)"
                    )
                    try db.exec("COMMIT")
                }
            }
        default:
            throw BenchError("unknown case \(name) / \(implementation)")
        }
    }

    /// Every implementation must have read the same data.
    private static func check(_ sum: Int, rows: Int) throws {
        var expected = 0
        for row in 0..<rows { for column in 0..<10 { expected &+= ItemModel.value(row, column) } }
        guard sum == expected else { throw BenchError("read the wrong data (sum \(sum), expected \(expected))") }
    }

    private static func checkCount(_ count: Int, directory: String) throws {
        guard count > 0 else { throw BenchError("the predicate matched nothing") }
        let marker = "\(directory)/predicate-count"
        if let previous = try? String(contentsOfFile: marker, encoding: .utf8), Int(previous) != count {
            throw BenchError("the predicate matched \(count) rows here and \(previous) elsewhere")
        }
        try String(count).write(toFile: marker, atomically: true, encoding: .utf8)
    }
}

/// The SQLite C API, as the floor every library is compared with.
final class RawSQLite {
    let handle: OpaquePointer

    init(path: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle
        else {
            throw BenchError("cannot open \(path)")
        }
        self.handle = handle
    }

    deinit { sqlite3_close(handle) }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else {
            throw BenchError(String(cString: sqlite3_errmsg(handle)))
        }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchError(String(cString: sqlite3_errmsg(handle)))
        }
        return statement
    }
}
