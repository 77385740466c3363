import Foundation
import GRDB

/// A problem found by ``PersistentStoreCoordinator/checkIntegrity()``.
public struct IntegrityProblem: CustomStringConvertible, Codable, Equatable, Sendable {
    /// The store's file name.
    public var store: String
    /// The entity of the row or table concerned, if any.
    public var entity: String?
    /// The row concerned (`Z_PK`), if any.
    public var primaryKey: Int64?
    /// What is wrong, in words.
    public var message: String

    public init(store: String, entity: String? = nil, primaryKey: Int64? = nil, message: String) {
        self.store = store
        self.entity = entity
        self.primaryKey = primaryKey
        self.message = message
    }

    public var description: String {
        var place = store
        if let entity { place += ", \(entity)" }
        if let primaryKey { place += " row \(primaryKey)" }
        return "\(place): \(message)"
    }
}

extension PersistentStoreCoordinator {
    /// Checks every store without decoding values: SQLite's own integrity check, rows of
    /// unknown entities, to-one relationships pointing at missing rows, join-table rows
    /// pointing at missing rows, and primary keys beyond `Z_PRIMARYKEY`'s allocation.
    ///
    /// A store SQLite cannot read through (a damaged page, a missing table) is one problem
    /// naming what SQLite reported; the other stores are still checked.
    public func checkIntegrity() throws -> [IntegrityProblem] {
        // A read each, so damage in one store (which also fails its read's end) spares the others.
        try persistentStores.flatMap { store in
            let name = store.url?.lastPathComponent ?? "in-memory store"
            do {
                return try read { db in try integrityProblems(of: store, named: name, db) }
            } catch let error as DatabaseError
                where [.SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FORMAT].contains(error.resultCode.primaryResultCode)
            {
                return [IntegrityProblem(
                    store: name,
                    message: "SQLite cannot read it: \(error.message ?? "SQLite error") (the file is damaged)")]
            } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
                return [IntegrityProblem(
                    store: name, message: "SQLite cannot read it: \(error.message ?? "SQLite error") (its schema is "
                        + "not the model's)")]
            }
        }
    }

    private func integrityProblems(of store: PersistentStore, named name: String, _ db: Database) throws
        -> [IntegrityProblem]
    {
        var problems: [IntegrityProblem] = []
        for line in try String.fetchAll(db, sql: "PRAGMA \(store.schemaName).integrity_check")
        where line != "ok" {
            problems.append(IntegrityProblem(store: name, message: "SQLite: \(line)"))
        }
        problems += try StoreTransaction(db: db, coordinator: self).indexProblems(
            storeIdentifier: store.identifier, storeName: name)
        let hasHistory = try PersistentHistoryTables.exist(in: store, db)
        for root in store.rootEntities {
            let table = store.qualified(root.tableName)
            let numbers = root.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")
            if hasHistory {
                // A primary key is never handed out twice: a deletion of a row still here is not history.
                let deletedHere = "SELECT Z_PK, ZENTITYPK FROM \(store.qualified("ACHANGE")) WHERE ZCHANGETYPE = "
                    + "\(PersistentHistoryChange.ChangeType.delete.rawValue) AND ZENTITY IN (\(numbers)) "
                    + "AND ZENTITYPK IN (SELECT Z_PK FROM \(table))"
                for row in try Row.fetchAll(db, sql: deletedHere) {
                    problems.append(IntegrityProblem(store: name, entity: root.name, primaryKey: row[1],
                        message: "the history records its deletion (ACHANGE row \(row[0] as Int64)), but the store "
                            + "holds it"))
                }
            }
            for key in try Int64.fetchAll(
                db, sql: "SELECT Z_PK FROM \(table) WHERE Z_ENT NOT IN (\(numbers)) OR Z_ENT IS NULL")
            {
                problems.append(
                    IntegrityProblem(
                        store: name, entity: root.name, primaryKey: key,
                        message: "row of an unknown entity (Z_ENT)"))
            }
            let damagedVersion = "SELECT Z_PK FROM \(table) "
                + "WHERE typeof(Z_OPT) != 'integer' OR Z_OPT < 0 OR Z_OPT >= 9223372036854775807"
            for key in try Int64.fetchAll(db, sql: damagedVersion) {
                problems.append(IntegrityProblem(store: name, entity: root.name, primaryKey: key,
                                                 message: "its version (Z_OPT) is not a count of changes"))
            }
            for relationship in root.tableToOneRelationships {
                guard let destination = managedObjectModel.entity(named: relationship.destinationEntityName),
                      let destinationStore = persistentStore(for: destination) else { continue }
                let sql =
                    "SELECT Z_PK FROM \(table) WHERE \(relationship.columnName) IS NOT NULL AND "
                        + "\(relationship.columnName) NOT IN (SELECT Z_PK FROM "
                        + "\(destinationStore.qualified(destination.rootEntity.tableName)))"
                for key in try Int64.fetchAll(db, sql: sql) {
                    problems.append(IntegrityProblem(store: name, entity: root.name, primaryKey: key,
                            message:
                                "relationship '\(relationship.name)' points to a missing \(destination.name)"))
                }
            }
            let allocation = try DatabaseValue.fetchOne(
                db, sql: "SELECT Z_MAX FROM \(store.qualified("Z_PRIMARYKEY")) WHERE Z_ENT = ?",
                arguments: [root.entityNumber])
            // What allocates the next primary key: without it, or at its end, every insert fails.
            let allocated: Int64
            switch allocation?.storage {
            case .int64(let number)?:
                allocated = number
            case nil:
                problems.append(IntegrityProblem(store: name, entity: root.name,
                                                 message: "no row of Z_PRIMARYKEY allocates its primary keys"))
                continue
            default:
                problems.append(IntegrityProblem(store: name, entity: root.name,
                                                 message: "Z_PRIMARYKEY.Z_MAX is not a count of primary keys"))
                continue
            }
            // A context's objects keep new keys in 53 bits (`ManagedObject.largestRowNumber`).
            if allocated >= ManagedObject.largestRowNumber {
                problems.append(IntegrityProblem(store: name, entity: root.name,
                        message: "no primary key is left to allocate (Z_PRIMARYKEY.Z_MAX is at its largest)"))
            }
            let highest = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(table)") ?? 0
            if highest > allocated {
                problems.append(
                    IntegrityProblem(
                        store: name, entity: root.name,
                        message: "row \(highest) is beyond the allocated primary keys (\(allocated))"))
            }
        }
        for entity in store.entities {
            for relationship in entity.declaredRelationships
            where SQLiteSchema.usesJoinTable(relationship, in: managedObjectModel) {
                let join = SQLiteSchema.joinTable(for: relationship, of: entity, in: managedObjectModel)
                guard join.isOwner,
                    let destination = managedObjectModel.entity(named: relationship.destinationEntityName)
                else { continue }
                let sql =
                    "SELECT \(join.sourceColumn) FROM \(store.qualified(join.name)) WHERE \(join.sourceColumn) "
                        + "NOT IN (SELECT Z_PK FROM \(store.qualified(entity.rootEntity.tableName))) OR "
                        + "\(join.destinationColumn) NOT IN (SELECT Z_PK FROM "
                        + "\(store.qualified(destination.rootEntity.tableName)))"
                for key in try Int64.fetchAll(db, sql: sql) {
                    problems.append(IntegrityProblem(store: name, entity: entity.name, primaryKey: key,
                            message:
                                "relationship '\(relationship.name)' has a join row pointing to a missing "
                                    + "object"
                        ))
                }
            }
        }
        return problems
    }
}
