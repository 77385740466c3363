import Foundation
import GRDB

extension ObjectGraphError.Code {
    /// A row's bookkeeping columns (`Z_ENT`, `Z_OPT`, a to-one key) hold what no store
    /// writes: the store was damaged or edited by hand.
    public static let damagedRow = ObjectGraphError.Code(rawValue: 134061)
}

/// The bookkeeping columns of a fetched row, read without trusting the file: a value of
/// the wrong type is an error naming the store, table, row and column, never a trap.
struct StoredRowHeader {
    let primaryKey: Int64
    let entityNumber: Int
    let version: Int64

    /// Reads `Z_PK`, `Z_ENT`, `Z_OPT` from the first three columns of `row`.
    init(_ row: Row, root: EntityDescription, store: PersistentStore) throws {
        guard case .int64(let primaryKey) = (row[0] as DatabaseValue).storage else {
            throw Self.damaged(store: store, root: root, primaryKey: nil, column: "Z_PK", row[0])
        }
        guard case .int64(let entityNumber) = (row[1] as DatabaseValue).storage,
            let number = Int(exactly: entityNumber)
        else {
            throw Self.damaged(store: store, root: root, primaryKey: primaryKey, column: "Z_ENT", row[1])
        }
        guard case .int64(let version) = (row[2] as DatabaseValue).storage else {
            throw Self.damaged(store: store, root: root, primaryKey: primaryKey, column: "Z_OPT", row[2])
        }
        self.primaryKey = primaryKey
        self.entityNumber = number
        self.version = version
    }

    /// A to-one relationship's stored key: nil when NULL, an error when not an integer.
    static func destinationKey(
        _ row: Row, at index: Int, column: String, root: EntityDescription, store: PersistentStore,
        primaryKey: Int64
    ) throws -> Int64? {
        switch (row[index] as DatabaseValue).storage {
        case .null: return nil
        case .int64(let key): return key
        default: throw damaged(store: store, root: root, primaryKey: primaryKey, column: column, row[index])
        }
    }

    static func damaged(
        store: PersistentStore, root: EntityDescription, primaryKey: Int64?, column: String,
        _ value: DatabaseValue
    ) -> ObjectGraphError {
        damaged(
            store: store, root: root, primaryKey: primaryKey,
            "column \(column) holds \(kind(of: value)) instead of an integer")
    }

    /// What a stored value is, in SQLite's words, without showing it.
    static func kind(of value: DatabaseValue) -> String {
        switch value.storage {
        case .null: return "NULL"
        case .int64: return "an INTEGER"
        case .double: return "a REAL"
        case .string: return "TEXT"
        case .blob: return "a BLOB"
        }
    }

    static func damaged(store: PersistentStore, root: EntityDescription, primaryKey: Int64?, _ problem: String)
        -> ObjectGraphError
    {
        let name = store.url?.lastPathComponent ?? "in-memory store"
        let row = primaryKey.map { " row \($0)" } ?? ""
        return ObjectGraphError(code: .damagedRow, message: "damaged row: \(name), \(root.name)\(row): \(problem)")
    }
}
