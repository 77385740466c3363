import Foundation
import ObjectGraph
import StashCrypto

extension Vault {
    /// The stores as the integrity record covers them: every root entity's table.
    var integrityStores: [RowAuthentication.Store] {
        [(notesStore, Self.notesFileName, "Notes"), (passwordsStore, Self.passwordsFileName, "Passwords")].map {
            store, fileName, configuration in
            let roots = coordinator.managedObjectModel.entities(forConfiguration: configuration).filter {
                $0.superentity == nil
            }
            let tables = Dictionary(roots.map { ($0.tableName, $0.name) }) { first, _ in first }
            return RowAuthentication.Store(
                identifier: store.identifier, displayName: fileName, tables: tables,
                bucketing: Self.bucketing(of: roots, tables: Set(tables.keys)))
        }
    }

    /// Where each table's rows go in the record's buckets: notes and entries by their name
    /// key, what belongs to one entry (fields, history) with that entry's other parts,
    /// categories, seed lists and sync state each in one bucket.
    private static func bucketing(of roots: [EntityDescription], tables: Set<String>)
        -> [String: RowAuthentication.Bucketing]
    {
        var rules: [String: RowAuthentication.Bucketing] = [:]
        for entity in roots {
            if let nameKey = entity.attribute(named: Vault.nameKeyAttribute) {
                rules[entity.tableName] = .nameKey(column: nameKey.columnName)
            } else if [Category.entityName, SeedList.entityName, SyncStateRow.entityName].contains(entity.name) {
                rules[entity.tableName] = .wholeTable
            } else if let owner = entity.declaredRelationships.first(where: {
                !$0.isToMany && $0.destinationEntityName == PasswordEntry.entityName
            }) {
                // A to-one's column is its name as an attribute's would be (SQLiteSchema).
                rules[entity.tableName] = .parent(
                    column: "Z" + owner.name.uppercased(), table: "Z" + PasswordEntry.entityName.uppercased())
            }
        }
        return rules.filter { tables.contains($0.key) }
    }

    /// When an unlock checks the vault against its integrity record.
    public enum Verification: Sendable {
        /// Not at all: `check` lists the problems instead, and nothing is written.
        case skipped
        /// Before the unlock returns.
        case immediate
        /// As ``reads``, except that a list or search inside ``readWhileVerifying(_:)`` has the
        /// stores it reads checked in full (every row and index; of the other store, its record)
        /// on a second connection while it reads, and ``readWhileVerifying(_:)`` returns once that
        /// check passed. Every change checks the whole vault first. A vault whose names are not
        /// all indexed yet is checked whole on the second connection from the unlock on.
        case concurrent
        /// Only the records and their buckets' sums at the unlock; then each read checks the
        /// buckets of what it finds (``entry(_:reveal:)``, ``note(_:)``, ``fieldValue(_:of:)``):
        /// O(buckets + rows in them), whatever the size of the vault. Other reads and every
        /// change check the whole vault first, as ``immediate`` does.
        case reads
    }

    /// With the data key known: keeps the integrity record current from now on; unless
    /// `verification` is `.skipped`, checks the vault against it and then loads newer seed data.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming the store, entity and row of each change
    ///   made outside mystash.
    func didUnlock(_ verification: Verification) throws {
        guard let dataKey = transformer.dataKey else { return }
        let record = try Self.wrapErrors {
            try IntegrityRecord(
                dataKey: dataKey, keySlot: keySlot, stores: integrityStores,
                modelVersion: coordinator.managedObjectModel.versionIdentifier)
        }
        record.rows.schemaCheck = { [unowned self] in try recheckSchemaIfChanged($0) }
        integrityRecord = record
        coordinator.writeObserver = record.rows
        guard verification != .skipped else { return }
        // Notes the stores' change token (if none is known yet): what other processes commit
        // after this is checked again before it is followed.
        _ = try Self.wrapErrors { try context.hasExternalChanges() }
        try upgradeFirstLayoutRecord(record)
        try coverHistory(record)
        // Read first: a vault that needs nothing is never written by reading it. (A record of
        // the last release, its buckets not sealed in groups, is read whole until a save seals it.)
        if try Self.wrapErrors({ try coordinator.performRead { record.needsRenewal(in: $0) } }) {
            try Self.wrapErrors { try coordinator.performWrite { transaction in try record.create(in: transaction) } }
        }
        namesAreIndexed = try !hasUnindexedNames()
        if verification == .reads || verification == .concurrent, namesAreIndexed {
            // Each read checks both records with the buckets of what it shows; a list, the stores it reads.
            verifiesEachRead = true
            return
        }
        if verification == .concurrent, let pending = PendingVerification(vault: self, dataKey: dataKey, inFull: nil) {
            pendingVerification = pending
            return
        }
        try refuse(try integrityProblems())
        try seedAfterUnlocking()
    }

    /// Waits for the check an unlock with ``Verification/concurrent`` started, then loads
    /// newer seed data; returns at once when no check is running. Every change, import,
    /// export, rekey and password change calls it first.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming the store, entity and row of each change
    ///   made outside mystash (and again at every later call): what was read meanwhile must
    ///   not be shown.
    func awaitVerification() throws {
        try awaitPendingVerification()
        try verifyWholeVaultForRead()
    }

    /// Waits for the check running on the second connection, if any. One of the stores a list
    /// reads leaves the others to be checked as ``Verification/reads`` checks them.
    func awaitPendingVerification() throws {
        guard let pending = pendingVerification else { return }
        // What it ends in may seed, a write.
        if readsInOneTransaction { throw WritesAfterRead() }
        let problems: [CheckProblem]
        var checkedWhole = pending.checksWholeVault
        switch pending.outcome() {
        case .checked(let found): problems = self.problems(found: found)
        case .busy(let error): throw VaultError.wrapping(error)
        // The second connection can fail where this one succeeds (a crashed writer's journal,
        // which only a writable connection rolls back): then the check runs here.
        case .unread:
            problems = try integrityProblems()
            checkedWhole = true
        }
        try refuse(problems)
        pendingVerification = nil
        if checkedWhole {
            try seedAfterUnlocking()
        } else {
            verifiesEachRead = true
        }
    }

    /// A record with the layout from before buckets, written under the last release's model or
    /// this one, is checked in full as that layout says (the migration to this model only added
    /// columns), then rebuilt with buckets in one write. One under an older model is renewed,
    /// trusting the rows as migrated, as every model change was before.
    private func upgradeFirstLayoutRecord(_ record: IntegrityRecord) throws {
        let models = try Self.wrapErrors {
            try coordinator.performRead { transaction in
                try record.stores.compactMap { try FirstLayoutRecord.model(of: $0, in: transaction) }
            }
        }
        guard !models.isEmpty, models.allSatisfy([FirstLayoutRecord.lastModel, record.modelVersion].contains)
        else { return }
        var problems: [CheckProblem] = []
        try Self.wrapErrors {
            try coordinator.performWrite { transaction in
                problems = try FirstLayoutRecord.verify(
                    record, ignoring: FirstLayoutRecord.columnsAddedSince, in: transaction)
                if problems.isEmpty { try record.create(in: transaction) }
            }
        }
        try refuse(problems)
        integrityRecordSeen = true
    }

    /// A record written before it covered the stores' history: the vault is checked in full as
    /// that record says, then the record is made again with the history's rows (trusted as they
    /// are: nothing vouched for them before) in the same write.
    private func coverHistory(_ record: IntegrityRecord) throws {
        guard try Self.wrapErrors({ try coordinator.performRead { record.predatesHistory(in: $0) } }) else { return }
        var problems: [CheckProblem] = []
        // The last release pruned all the history sync had read: a row at its token keeps the
        // numbering past it (see `pruneSyncedHistory`).
        // (A sync state that cannot be read is reported by the check below, not here.)
        let token = (try? loadSyncState())?.state.token
        do {
            try Self.wrapErrors {
                try coordinator.performWrite { transaction in
                    guard record.predatesHistory(in: transaction) else { return }
                    problems = self.problems(found: try Self.problems { try record.verify(in: transaction) })
                    guard problems.isEmpty else { return }
                    if let token { try coordinator.keepHistoryNumbered(after: token, in: transaction) }
                    try record.create(in: transaction)
                }
            }
        } catch let error as VaultError where error.isNotWritable {
            // A read-only mount or a full disk: read as that record says, covered at the next
            // opening that can write.
            problems = self.problems(found: try Self.problems {
                try coordinator.performRead { try record.verify(in: $0) }
            })
        }
        try refuse(problems)
    }

    /// What a read of one object shows beside it, vouched for with it: related objects, and the
    /// lookups that found them.
    struct ReadExtent {
        var objects: [ManagedObject] = []
        var lookups: [RowAuthentication.Lookup] = []
    }

    /// Checks what a read showed (`objects`) and the buckets its `lookups` looked in, when the
    /// vault was unlocked with ``Verification/reads``; nothing otherwise (the whole vault was or
    /// is being checked). On any difference the whole vault is checked, to name every one.
    func verifyRead(of objects: [ManagedObject], lookups: [RowAuthentication.Lookup] = []) throws {
        let stores = Set(objects.compactMap(\.objectID.storeIdentifier) + lookups.map(\.storeIdentifier))
        if let pending = pendingVerification, !pending.covers(stores) { try awaitPendingVerification() }
        guard verifiesEachRead, let integrityRecord else { return }
        let rows = objects.compactMap { object -> StoredRowKey? in
            guard let store = object.objectID.storeIdentifier, let key = object.objectID.primaryKey else { return nil }
            return StoredRowKey(storeIdentifier: store, table: object.entity.tableName, primaryKey: key)
        }
        let found = problems(found: try Self.problems {
            try coordinator.performRead { try integrityRecord.rows.verify(rows: rows, lookups: lookups, in: $0) }
        })
        guard !found.isEmpty else { return }
        let everything = try integrityProblems()
        try refuse(everything.isEmpty ? found : everything)
    }

    /// Before a read that the buckets of what it finds cannot vouch for (a list, a search, a
    /// lookup that found nothing by ID): the whole vault, once.
    func verifyWholeVaultForRead() throws {
        try verifyForRead(of: nil)
    }

    /// Before a list or search of `stores` (nil: all), which the buckets of what it finds cannot
    /// vouch for: inside ``Integrity/readWhileVerifying(_:)``, starts the check of those stores
    /// on a second connection; otherwise checks the whole vault now. Nothing when the vault is
    /// checked already (or being checked whole).
    func verifyForRead(of stores: [PersistentStore]?) throws {
        let wanted = stores.map { Set($0.map(\.identifier)) }
        if let pending = pendingVerification, !pending.covers(wanted) { try awaitPendingVerification() }
        guard verifiesEachRead else { return }
        if readsWhileVerifying, let dataKey = transformer.dataKey,
           let pending = PendingVerification(vault: self, dataKey: dataKey, inFull: wanted)
        {
            verifiesEachRead = false
            pendingVerification = pending
            return
        }
        // The check is followed by the seeding, a write.
        if readsInOneTransaction { throw WritesAfterRead() }
        try refuse(try integrityProblems())
        verifiesEachRead = false
        try seedAfterUnlocking()
    }

    /// Under ``Verification/reads``, for a caller about to read or change much: starts the check
    /// of the whole vault on a second connection (``awaitVerification()`` waits for it), so it
    /// runs while the caller waits on something else; nothing otherwise.
    func startWholeVaultCheck() {
        guard verifiesEachRead, let dataKey = transformer.dataKey,
              let pending = PendingVerification(vault: self, dataKey: dataKey, inFull: nil) else { return }
        verifiesEachRead = false
        pendingVerification = pending
    }

    /// Runs a read of a few rows (a look-up and what it shows, with their check) in one
    /// transaction: what is shown and what is checked are one state of the stores, and the locks
    /// are taken once. A step that would write (a whole check, then the seeding) runs the read
    /// again as separate reads instead, as does a read while a check runs on the second connection.
    func readingInOneTransaction<T>(_ read: () throws -> T) throws -> T {
        guard pendingVerification == nil, !readsWhileVerifying, !readsInOneTransaction else { return try read() }
        do {
            readsInOneTransaction = true
            defer { readsInOneTransaction = false }
            return try coordinator.performRead { _ in try read() }
        } catch is WritesAfterRead {
            return try read()
        }
    }

    /// Thrown inside ``readingInOneTransaction(_:)`` by a step that would write.
    private struct WritesAfterRead: Error {}

    /// Throws when the check found changes made outside mystash.
    func refuse(_ problems: [CheckProblem]) throws {
        guard !problems.isEmpty else { return }
        throw VaultError.changedOutside(problems)
    }

    private func seedAfterUnlocking() throws {
        do {
            try seed()
            try indexUnindexedNames()
            try bindIntegrityRecordToKeySlot()
        } catch let error as VaultError where error.kind == .permission || error.kind == .cannotCreate {
            // A vault that cannot be written (read-only, disk full) is still read; a later open seeds it.
        }
    }

    /// Once a vault with an integrity record passed its check, writes the key slot that says
    /// it has one (made when the master password unlocked it): removing the record is then
    /// tampering, not a vault from before the record.
    func bindIntegrityRecordToKeySlot() throws {
        guard let slot = slotRequiringRecord, integrityRecordSeen else { return }
        slotRequiringRecord = nil
        do {
            try changingKey {
                for store in [notesStore, passwordsStore] {
                    coordinator.setMetadata(Data(slot.serialized), forKey: Self.keySlotKey, in: store)
                }
                try coordinator.saveMetadata()
            }
        } catch let error as VaultError where error.kind == .busy {
            return  // Another process changed the slot meanwhile; a later unlock binds the record.
        }
        keySlot = slot
        integrityRecord?.keySlot = Data(slot.serialized)
    }

    /// Differences between the stores and their integrity records; empty for a vault made
    /// before the record existed (it gets one at its next change).
    func integrityProblems() throws -> [CheckProblem] {
        guard let integrityRecord else { return [] }
        return problems(found: try Self.problems {
            try coordinator.performRead { try integrityRecord.verify(in: $0) }
        })
    }

    /// What a check found (nil: no store has a record), once this process has seen a record:
    /// a record it has seen cannot go missing, that is no vault from before the record.
    func problems(found: [CheckProblem]?) -> [CheckProblem] {
        guard let found else {
            guard integrityRecordSeen || keySlot.requiresIntegrityRecord else { return [] }
            return integrityStores.map {
                CheckProblem(store: $0.displayName, message: "its integrity record was removed outside mystash")
            }
        }
        integrityRecordSeen = true
        return found
    }

    /// What `verification` found, nil when no store has a record; tampering that stops it
    /// midway is one problem, other errors are thrown.
    static func problems(_ verification: () throws -> [CheckProblem]?) throws -> [CheckProblem]? {
        do {
            return try verification()
        } catch let failure as RowAuthenticationFailure {
            return [failure.problem]
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Gives a vault made before the integrity record existed its record, trusting its rows
    /// as they are; refuses to write a vault that has one without the key to keep it current.
    func ensureIntegrityRecord() throws {
        guard let integrityRecord else {
            let hasRecord = try Self.wrapErrors {
                try coordinator.performRead { transaction in
                    try integrityStores.contains {
                        try IntegrityRecord.tables.exist(inStore: $0.identifier, transaction)
                    }
                }
            }
            if hasRecord {
                throw VaultError.locked

            }
            return
        }
        let stores = integrityStores
        try Self.wrapErrors {
            guard
                try !coordinator.performRead({ transaction in
                    try stores.allSatisfy { try IntegrityRecord.tables.exist(inStore: $0.identifier, transaction) }
                })
            else { return }
            try coordinator.performWrite { transaction in
                let all = try stores.allSatisfy {
                    try IntegrityRecord.tables.exist(inStore: $0.identifier, transaction)
                }
                guard !all else { return }
                try integrityRecord.create(in: transaction)
            }
            integrityRecordSeen = true
        }
        try bindIntegrityRecordToKeySlot()
    }
}

/// A check of the vault against its integrity record, running on a second connection and
/// another thread with its own copy of the record's key (an HMAC key is for one thread).
final class PendingVerification: @unchecked Sendable {
    /// What the second connection made of the vault.
    enum Outcome {
        /// What the check found; nil when no store has a record.
        case checked([CheckProblem]?)
        /// Another process held the vault past the busy timeout: waiting again here would
        /// only double the wait.
        case busy(Error)
        /// It could not read the vault; the check runs on the vault's own connection.
        case unread
    }

    // Written by the checking thread before `done` is signalled, read after waiting for it.
    private var result: Outcome = .unread
    private let done = DispatchSemaphore(value: 0)
    private var waited = false
    /// Every store in full, not only those a list reads.
    let checksWholeVault: Bool
    /// The stores checked in full; nil for all.
    private let inFull: Set<String>?

    /// Whether the check vouches for every row of `stores` (nil: of every store).
    func covers(_ stores: Set<String>?) -> Bool {
        guard let inFull else { return true }
        return stores.map { $0.isSubset(of: inFull) } ?? checksWholeVault
    }

    /// Starts the check, of the stores `inFull` names in full (all when nil) and the others'
    /// records; nil when no second connection or record can be made: the caller then checks
    /// on its own connection, where the same failure is thrown, never skipped.
    init?(vault: Vault, dataKey: SecretBytes, inFull: Set<String>?) {
        let stores = vault.integrityStores
        checksWholeVault = inFull.map { scope in stores.allSatisfy { scope.contains($0.identifier) } } ?? true
        self.inFull = inFull
        guard let reader = try? vault.coordinator.makeReader(),
              let record = try? IntegrityRecord(
                dataKey: dataKey, keySlot: vault.keySlot, stores: stores,
                modelVersion: vault.coordinator.managedObjectModel.versionIdentifier)
        else { return nil }
        let check = UncheckedBox((reader, record))
        Thread.detachNewThread { [self] in
            let (reader, record) = check.value
            do {
                result = .checked(try Vault.problems {
                    try reader.performRead { try record.verify(in: $0, inFull: inFull) }
                })
            } catch let error as VaultError where error.kind == .busy {
                result = .busy(error)
            } catch {
                result = .unread
            }
            done.signal()
        }
    }

    /// The outcome, once the check has ended.
    func outcome() -> Outcome {
        if !waited {
            done.wait()
            waited = true
        }
        return result
    }
}

/// Hands values that are not `Sendable` to one other thread, which alone uses them from then on.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension Vault.Integrity {
    /// Runs `read`, a list or search, while the stores it reads are checked on a second
    /// connection (``Verification/concurrent``), and returns what it read once that check has
    /// passed: the same result as reading after an ``Verification/immediate`` unlock. A read
    /// that started no such check has the whole vault checked before its result is returned.
    /// When `read` fails, the check's verdict comes first (a damaged row may be the tampering
    /// it names); then the whole vault is checked and `read` runs again, after the newer seed
    /// data the check loads.
    public func readWhileVerifying<T>(_ read: () throws -> T) throws -> T {
        let result: T
        do {
            vault.readsWhileVerifying = true
            defer { vault.readsWhileVerifying = false }
            result = try read()
        } catch {
            try vault.awaitVerification()
            return try read()
        }
        if vault.pendingVerification != nil {
            try vault.awaitPendingVerification()
        } else {
            // What the read showed without starting a check of its stores, the whole vault vouches for.
            try vault.verifyWholeVaultForRead()
        }
        return result
    }
}
