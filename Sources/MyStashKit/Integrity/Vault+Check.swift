import Foundation
import ObjectGraph
import StashCrypto

/// A problem a check of the vault found, by store, entity and row.
public typealias CheckProblem = IntegrityProblem

extension Vault {

    /// What is wrong with a row that cannot be read, without the place the check names itself.
    private static func rowProblem(_ error: Error) -> String {
        let error = VaultError.wrapping(error)
        return error.rowProblem ?? error.message
    }
}

extension Vault {
    /// What an open vault can say of changes made outside it, as in `vault.integrity.check()`.
    public struct Integrity {
        let vault: Vault
    }

    public var integrity: Integrity { Integrity(vault: self) }
}

extension Vault.Integrity {
    /// Decrypts every field, verifies every relationship and both stores' metadata.
    public func check(progress: Progress? = nil) throws -> [CheckProblem] {
        var problems = Recovery.leftovers(in: vault.directory).map {
            CheckProblem(store: $0.fileName, message: $0.reason)
        }
        guard vault.schemaProblems.isEmpty else {
            // Rows read through a changed schema prove nothing, and a missing table fails every read.
            return problems + vault.schemaProblems + [
                CheckProblem(store: "vault", message: "rows were not checked: the schema must be restored first")
            ]
        }
        for store in [vault.notesStore, vault.passwordsStore] {
            let name = store.url?.lastPathComponent ?? "store"
            if (store.metadata[Vault.keySlotKey] as? Data).map({ Array($0) }) != vault.keySlot.serialized {
                problems.append(CheckProblem(store: name, message: "its key slot differs from the one in use"))
            }
            if store.metadata[Vault.vaultIdentifierKey] as? String != vault.identifier {
                problems.append(CheckProblem(store: name, message: "its vault identity differs from the other store's"))
            }
        }
        problems += try Vault.wrapErrors { try vault.coordinator.checkIntegrity() }
        // A sub-check that cannot run (a damaged file) is reported, never counted as passed; the others still run.
        func gather(_ what: String, store: String, entity: String? = nil, _ check: () throws -> [CheckProblem]) throws {
            do {
                problems += try check()
            } catch let error as VaultError where error.kind == .invalidData {
                problems.append(CheckProblem(store: store, entity: entity,
                                             message: "\(what) could not be checked: \(error.message)"))
            }
        }
        try gather("category names", store: Vault.passwordsFileName, entity: Category.entityName) {
            try vault.duplicateCategoryNames()
        }
        try gather("the integrity record", store: "vault") { try vault.integrityProblems() }
        let entities = [
            (Note.entityName, Vault.notesFileName), (PasswordEntry.entityName, Vault.passwordsFileName),
            (Category.entityName, Vault.passwordsFileName), (Attachment.entityName, Vault.passwordsFileName),
            (AttachmentChunk.entityName, Vault.passwordsFileName),
        ]
        var keys: [[Int64]] = []
        try gather("rows", store: "vault") {
            keys = try Vault.wrapErrors { try entities.map { try vault.context.primaryKeys(forEntityName: $0.0) } }
            return []
        }
        let total = keys.map(\.count).reduce(0, +)
        var done = 0
        for ((entity, store), rows) in zip(entities, keys) {
            // A thousand rows to a read transaction, not one each: each takes both stores' locks.
            for start in stride(from: 0, to: rows.count, by: 1_000) {
                try gather("rows", store: store, entity: entity) {
                    try Vault.wrapErrors {
                        try vault.coordinator.performRead { _ in
                            try readRows(rows[start..<min(start + 1_000, rows.count)], of: entity, in: store) {
                                done += 1
                                progress?.report(done, of: total)
                            }
                        }
                    }
                }
                // Other rows leave it a thousand at a time.
                vault.context.reset()
            }
        }
        // SQLite's check and the integrity record's both name a lying index.
        var seen: Set<String> = []
        return problems.filter { seen.insert($0.description).inserted }
    }

    /// Decrypts each row as an object, naming those that do not read; a key changed by another
    /// process meanwhile (between two batches) is thrown, to be retried, not reported as damage.
    private func readRows(_ rows: ArraySlice<Int64>, of entity: String, in store: String,
                          readOne: () -> Void) throws -> [CheckProblem] {
        var problems: [CheckProblem] = []
        for row in rows {
            do {
                _ = try vault.context.existingObject(entityName: entity, primaryKey: row)
            } catch {
                let wrapped = VaultError.wrapping(error)
                guard wrapped.kind != .busy else { throw wrapped }
                problems.append(CheckProblem(store: store, entity: entity, primaryKey: row,
                                             message: Vault.rowProblem(wrapped)))
            }
            // Memory stays flat: a chunk (up to 1 MiB) leaves it once decrypted.
            if entity == AttachmentChunk.entityName { vault.context.reset() }
            readOne()
        }
        return problems
    }
}
