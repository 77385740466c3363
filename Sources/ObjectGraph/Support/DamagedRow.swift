import Foundation
import GRDB

extension ObjectGraphError {
    static func damagedRow(store: PersistentStore, root: EntityDescription, primaryKey: Int64?, _ problem: String)
        -> ObjectGraphError
    {
        damagedRow(
            storeName: store.url?.lastPathComponent ?? "in-memory store", entity: root.name, primaryKey: primaryKey,
            problem)
    }

    /// A damaged row named by the store's file name and the entity (or table) holding it.
    static func damagedRow(storeName: String, entity: String, primaryKey: Int64?, _ problem: String)
        -> ObjectGraphError
    {
        let row = primaryKey.map { " row \($0)" } ?? ""
        var error = ObjectGraphError(
            code: .damagedRow, message: "damaged row: \(storeName), \(entity)\(row): \(problem)")
        if primaryKey != nil { error.rowProblem = problem }
        return error
    }
}

extension DatabaseValue {
    /// What a stored value is, in SQLite's words, without showing it.
    var storageKind: String {
        switch storage {
        case .null: return "NULL"
        case .int64: return "an INTEGER"
        case .double: return "a REAL"
        case .string: return "TEXT"
        case .blob: return "a BLOB"
        }
    }
}
