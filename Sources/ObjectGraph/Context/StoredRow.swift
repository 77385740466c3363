import Foundation
import GRDB
import GRDBSQLite

/// A row of a root entity's table being read: a GRDB row, or the current row of a statement
/// stepped directly when a fetch reads many rows.
protocol StoredRow {
    /// The integer at `index`, or nil when it is NULL or of another storage class.
    func int64(at index: Int) -> Int64?
    func databaseValue(at index: Int) -> DatabaseValue
    /// The value of an integer, real or string attribute read without building a
    /// `DatabaseValue`, or nil to take the general path.
    func plainSlot(at index: Int, type: AttributeType) -> PropertySlot?
    /// `body` of the bytes of a blob, in place where the row allows; nil when the value is of
    /// another storage class.
    func withBlob<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result?
}

extension Row: StoredRow {
    func int64(at index: Int) -> Int64? {
        if case .int64(let integer) = (self[index] as DatabaseValue).storage { return integer }
        return nil
    }
    func databaseValue(at index: Int) -> DatabaseValue { self[index] }
    func plainSlot(at index: Int, type: AttributeType) -> PropertySlot? { nil }
    func withBlob<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result? {
        guard case .blob(let data) = (self[index] as DatabaseValue).storage else { return nil }
        return try data.withUnsafeBytes(body)
    }
}

/// The current row of a prepared statement, read in place.
struct StatementRow: StoredRow {
    let handle: SQLiteStatement

    func int64(at index: Int) -> Int64? {
        sqlite3_column_type(handle, CInt(index)) == SQLITE_INTEGER ? sqlite3_column_int64(handle, CInt(index)) : nil
    }

    func databaseValue(at index: Int) -> DatabaseValue { DatabaseValue(sqliteStatement: handle, index: CInt(index)) }

    /// The bytes of a blob, or nil when the value is of another storage class.
    func blob(at index: Int) -> [UInt8]? {
        guard sqlite3_column_type(handle, CInt(index)) == SQLITE_BLOB else { return nil }
        let count = Int(sqlite3_column_bytes(handle, CInt(index)))
        guard count > 0, let bytes = sqlite3_column_blob(handle, CInt(index)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func withBlob<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result? {
        guard sqlite3_column_type(handle, CInt(index)) == SQLITE_BLOB else { return nil }
        let count = Int(sqlite3_column_bytes(handle, CInt(index)))
        return try body(UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, CInt(index)), count: count))
    }

    func plainSlot(at index: Int, type: AttributeType) -> PropertySlot? {
        switch (sqlite3_column_type(handle, CInt(index)), type) {
        case (SQLITE_NULL, _): return .absent
        case (SQLITE_INTEGER, .integer16), (SQLITE_INTEGER, .integer32), (SQLITE_INTEGER, .integer64):
            return .int(Int(sqlite3_column_int64(handle, CInt(index))))
        case (SQLITE_FLOAT, .double): return .double(sqlite3_column_double(handle, CInt(index)))
        case (SQLITE_TEXT, .string):
            // As GRDB reads text into a `DatabaseValue`, which the general path goes through.
            return sqlite3_column_text(handle, CInt(index)).map { .text(String(cString: $0)) }
        default: return nil
        }
    }
}

/// A stored value read in place from the current row of a statement, valid until the next
/// step: what ``StoredCell`` holds, without copying text or bytes.
enum RawCell {
    case null
    case integer(Int64)
    case real(Double)
    case text(UnsafeRawBufferPointer)
    case blob(UnsafeRawBufferPointer)
}

extension StatementRow {
    var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The value at `index`, in place. Text is whole, every byte past a NUL too (GRDB reads it
    /// up to its first NUL, so a tag over that would not see what follows); text that is not
    /// UTF-8 is repaired, as ``StoredCell`` holds it.
    func withCell<Result>(at index: Int, _ body: (RawCell) throws -> Result) rethrows -> Result {
        let column = CInt(index)
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return try body(.integer(sqlite3_column_int64(handle, column)))
        case SQLITE_FLOAT: return try body(.real(sqlite3_column_double(handle, column)))
        case SQLITE_TEXT:
            // The text first, then its length: SQLite's order for a count that matches.
            let start = sqlite3_column_text(handle, column)
            let text = UnsafeRawBufferPointer(start: start, count: Int(sqlite3_column_bytes(handle, column)))
            if text.allSatisfy({ $0 < 0x80 }) { return try body(.text(text)) }
            var repaired = String(decoding: text, as: UTF8.self)
            return try repaired.withUTF8 { try body(.text(UnsafeRawBufferPointer($0))) }
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            return try body(.blob(UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, column), count: count)))
        default: return try body(.null)
        }
    }

    /// The value at `index` as a ``StoredCell`` (copied), text read as ``withCell(at:_:)`` reads it.
    func storedCell(at index: Int) -> StoredCell {
        withCell(at: index) { cell in
            switch cell {
            case .null: .null
            case .integer(let number): .integer(number)
            case .real(let number): .real(number)
            case .text(let bytes): .text(String(decoding: bytes, as: UTF8.self))
            case .blob(let bytes): .blob(Data(bytes))
            }
        }
    }
}

extension StoredCell {
    /// The cell in place, as a statement's row would hand it over.
    func withRaw<Result>(_ body: (RawCell) throws -> Result) rethrows -> Result {
        switch self {
        case .null: return try body(.null)
        case .integer(let number): return try body(.integer(number))
        case .real(let number): return try body(.real(number))
        case .text(let text):
            var text = text
            return try text.withUTF8 { try body(.text(UnsafeRawBufferPointer($0))) }
        case .blob(let data): return try data.withUnsafeBytes { try body(.blob($0)) }
        }
    }
}

extension Database {
    /// Runs a query through a cached statement and hands each row to `body` in place,
    /// without copying it.
    func forEachRow(sql: String, arguments: [DatabaseValue], _ body: (StatementRow) throws -> Void) throws {
        try forEachRow(of: try cachedStatement(sql: sql), arguments: arguments, body)
    }

    /// ``forEachRow(sql:arguments:_:)`` with a statement of the caller's.
    func forEachRow(of statement: Statement, arguments: [DatabaseValue], _ body: (StatementRow) throws -> Void) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        defer { sqlite3_reset(handle) }
        bind(arguments, to: handle)
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqliteConnection)),
                    sql: statement.sql)
            }
            try body(StatementRow(handle: handle))
        }
    }
}

// SQLite's SQLITE_TRANSIENT: it copies bound text and blobs before the call returns.
private let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

extension Database {
    /// Runs an insert, update or delete through a cached statement, binding `values` directly.
    func executeCached(sql: String, values: [DatabaseValue]) throws {
        let handle = try cachedStatement(sql: sql).sqliteStatement
        defer { sqlite3_reset(handle) }
        sqlite3_reset(handle)
        bind(values, to: handle)
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE || code == SQLITE_ROW else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqliteConnection)),
                sql: sql)
        }
    }
}

/// Binds `values` to a statement's parameters in order, without GRDB's generic
/// `StatementArguments` (a metadata lookup per value).
private func bind(_ values: [DatabaseValue], to handle: SQLiteStatement) {
    // A parameter left over from the statement's last use reads as NULL, never as that value.
    sqlite3_clear_bindings(handle)
    for (offset, value) in values.enumerated() {
        let index = CInt(offset + 1)
        switch value.storage {
        case .null: sqlite3_bind_null(handle, index)
        case .int64(let number): sqlite3_bind_int64(handle, index, number)
        case .double(let number): sqlite3_bind_double(handle, index, number)
        case .string(let text):
            // By its length: text may hold a NUL, which would end it as a C string.
            var text = text
            text.withUTF8 { bytes in
                guard let start = bytes.baseAddress, !bytes.isEmpty else {
                    _ = sqlite3_bind_text(handle, index, "", 0, transient)
                    return
                }
                start.withMemoryRebound(to: CChar.self, capacity: bytes.count) { characters in
                    _ = sqlite3_bind_text(handle, index, characters, CInt(bytes.count), transient)
                }
            }
        case .blob(let data):
            data.withUnsafeBytes { bytes in
                _ = sqlite3_bind_blob(handle, index, bytes.baseAddress, CInt(bytes.count), transient)
            }
        }
    }
}
