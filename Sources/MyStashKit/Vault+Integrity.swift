import Foundation
import ObjectGraph
import StashCrypto

extension Vault {
    /// The stores as the integrity record covers them: every root entity's table.
    var integrityStores: [IntegrityRecord.Store] {
        [(notesStore, Self.notesFileName, "Notes"), (passwordsStore, Self.passwordsFileName, "Passwords")].map {
            store, fileName, configuration in
            let roots = coordinator.managedObjectModel.entities(forConfiguration: configuration).filter {
                $0.superentity == nil
            }
            return IntegrityRecord.Store(
                identifier: store.identifier, fileName: fileName,
                tables: Dictionary(roots.map { ($0.tableName, $0.name) }) { first, _ in first })
        }
    }

    /// With the data key known: keeps the integrity record current from now on; with
    /// `verifying`, checks the vault against it and then loads newer seed data (without it,
    /// for `check`, which lists problems instead, nothing is written).
    ///
    /// - throws: ``VaultError`` `.invalidData` naming the store, entity and row of each change
    ///   made outside mystash.
    func didUnlock(verifying: Bool) throws {
        guard let dataKey = transformer.dataKey else { return }
        let record = try Self.wrapErrors {
            try IntegrityRecord(
                dataKey: dataKey, stores: integrityStores, model: coordinator.managedObjectModel.versionIdentifier)
        }
        integrity = record
        coordinator.writeObserver = record
        guard verifying else { return }
        // Read first: a vault that needs nothing is never written by reading it.
        if try Self.wrapErrors({ try coordinator.performRead { record.needsRenewal(in: $0) } }) {
            try Self.wrapErrors { try coordinator.performWrite { transaction in try record.create(in: transaction) } }
        }
        let problems = try integrityProblems()
        if let first = problems.first {
            throw VaultError(
                .invalidData, "the vault was changed outside mystash: \(first)",
                details: problems.dropFirst().map(\.description),
                hint: "restore the vault from a backup; 'mystash check' lists every problem")
        }
        do {
            try seed()
        } catch let error as VaultError where error.kind == .permission || error.kind == .cannotCreate {
            // A vault that cannot be written (read-only, disk full) is still read; a later open seeds it.
        }
    }

    /// Differences between the stores and their integrity records; empty for a vault made
    /// before the record existed (it gets one at its next change).
    func integrityProblems() throws -> [CheckProblem] {
        guard let integrity else { return [] }
        do {
            return try coordinator.performRead { try integrity.verify(in: $0) } ?? []
        } catch let failure as IntegrityFailure {
            return [failure.problem]
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Gives a vault made before the integrity record existed its record, trusting its rows
    /// as they are; refuses to write a vault that has one without the key to keep it current.
    func ensureIntegrityRecord() throws {
        guard let integrity else {
            let hasRecord = try Self.wrapErrors {
                try coordinator.performRead { transaction in
                    try integrityStores.contains { try IntegrityRecord.exists(in: $0, transaction) }
                }
            }
            if hasRecord {
                throw VaultError(
                    .wrongPassword, "the vault is locked; changing it needs the master password",
                    hint: "give the master password (prompt, MYSTASH_PASSWORD) or run 'mystash unlock'")
            }
            return
        }
        let stores = integrityStores
        try Self.wrapErrors {
            guard
                try !coordinator.performRead({ transaction in
                    try stores.allSatisfy { try IntegrityRecord.exists(in: $0, transaction) }
                })
            else { return }
            try coordinator.performWrite { transaction in
                guard try !stores.allSatisfy({ try IntegrityRecord.exists(in: $0, transaction) }) else { return }
                try integrity.create(in: transaction)
            }
        }
    }
}
