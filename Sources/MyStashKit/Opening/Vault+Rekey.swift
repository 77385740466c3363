import Foundation
import ObjectGraph
import StashCrypto
import StashPlatform

extension Vault {
    /// Re-encrypts every encrypted field under a new data key, wrapped by a new key slot for
    /// `newPassword`, in one transaction across both stores: afterwards the old data key (in a
    /// session, or copied out of the keyring) decrypts nothing. Unlocked sessions are revoked.
    ///
    /// - throws: ``VaultError``; on failure nothing is changed and the old key stays in use.
    public func rekey(to newPassword: SecretBytes, parameters: ScryptParameters) throws {
        try awaitVerification()
        guard let oldKey = transformer.dataKey else { throw VaultError.locked }
        let (slot, newKey) = try Self.wrapErrors { try KeySlot.create(password: newPassword, parameters: parameters) }
        guard let integrityRecord else { throw VaultError.locked }
        do {
            try changingKey {
                // Read under the lock, from the stores as they are now: rows other processes
                // committed since this vault was unlocked are checked and re-encrypted too.
                context.reset()
                let found = try Self.problems { try coordinator.performRead { try integrityRecord.verify(in: $0) } }
                try refuse(problems(found: found))
                try reencryptEveryValue(under: newKey, slot: slot)
            }
        } catch {
            context.reset()
            transformer.dataKey = oldKey
            coordinator.writeObserver = integrityRecord.rows
            self.integrityRecord = integrityRecord
            throw VaultError.wrapping(error)
        }
        keySlot = slot
        KeyringSession.revoke(vaultIdentifier: identifier)
    }
}

extension Vault {
    /// Decrypts every encrypted value under the current key, then saves them all under `newKey`
    /// with `slot`, the integrity record rebuilt under the new key in the same save.
    private func reencryptEveryValue(under newKey: SecretBytes, slot: KeySlot) throws {
        // Every value is decrypted under the old key before any is encrypted under the new one.
        var plaintexts: [(ManagedObject, String, Any)] = []
        for entity in coordinator.managedObjectModel.entities where !entity.isAbstract {
            let encrypted = entity.declaredAttributes.filter {
                EncryptingTransformer.names.contains($0.valueTransformerName ?? "")
            }
            guard !encrypted.isEmpty else { continue }
            for primaryKey in try context.primaryKeys(forEntityName: entity.name) {
                guard let object = try context.existingObject(entityName: entity.name, primaryKey: primaryKey)
                else { continue }
                for attribute in encrypted {
                    guard let value = object.value(forKey: attribute.name) else { continue }
                    plaintexts.append((object, attribute.name, value))
                }
            }
        }
        // The integrity record's key comes from the data key: the same save rebuilds it under the new one.
        let newRecord = try IntegrityRecord(
            dataKey: newKey, keySlot: slot, stores: integrityStores,
            modelVersion: coordinator.managedObjectModel.versionIdentifier)
        let rebuilding = RebuildingIntegrityRecord(record: newRecord)
        coordinator.writeObserver = rebuilding
        transformer.dataKey = newKey
        for (object, key, value) in plaintexts { object.setValue(value, forKey: key) }
        // Name keys come from the data key too.
        try updateNameKeys(using: newRecord, all: true)
        for store in [notesStore, passwordsStore] {
            coordinator.setMetadata(Data(slot.serialized), forKey: Self.keySlotKey, in: store)
        }
        // Same values under a new key: nothing for sync to send.
        context.transactionAuthor = Self.rekeyAuthor
        defer { context.transactionAuthor = nil }
        try withExtendedLifetime(rebuilding) { try context.save() }
        integrityRecord = newRecord
        coordinator.writeObserver = newRecord.rows
    }
}

/// Writes a whole new integrity record at the end of a save (a rekey rewrites every row anyway).
private final class RebuildingIntegrityRecord: StoreWriteObserver {
    let record: IntegrityRecord

    init(record: IntegrityRecord) { self.record = record }

    func rowsWillChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {}

    func rowsDidChange(_ rows: [StoredRowKey], in transaction: StoreTransaction) throws {
        try record.create(in: transaction)
    }
}
