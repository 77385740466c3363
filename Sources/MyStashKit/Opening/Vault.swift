import Foundation
import ObjectGraph
import StashCrypto
import StashPlatform
#if canImport(Glibc)
import Glibc
#endif

/// A MyStash vault: a directory holding `Notes.sqlite` and `Passwords.sqlite`, one store per
/// configuration of the model, with secret fields encrypted by the vault's data key.
///
/// ```swift
/// let vault = try Vault.open(at: URL(fileURLWithPath: "/home/ann/.local/share/mystash"))
/// try vault.unlock(password: .password("correct horse"))
/// let id = try vault.addNote(title: "Wi-Fi", text: "the code is on the router")
/// ```
public final class Vault {
    static let notesFileName = "Notes.sqlite"
    static let passwordsFileName = "Passwords.sqlite"
    static let keySlotKey = "MyStashKeySlot"
    static let vaultIdentifierKey = "MyStashVaultID"

    public let directory: URL
    let coordinator: PersistentStoreCoordinator
    let context: ManagedObjectContext
    let transformer = EncryptingTransformer()
    let notesStore: PersistentStore
    let passwordsStore: PersistentStore
    public internal(set) var keySlot: KeySlot
    /// The vault's identity, the same in both stores; names its keyring session.
    public let identifier: String
    /// Whether this process made sure the stores hold their unique indexes.
    var storeConstraintsEnsured = false
    /// Keeps the integrity record current; set once the data key is known.
    var integrityRecord: IntegrityRecord?
    /// A check on a second connection: of the stores a list reads (``Verification/concurrent``),
    /// or of the whole vault.
    var pendingVerification: PendingVerification?
    /// Inside ``Integrity/readWhileVerifying(_:)``: a list may check its stores concurrently.
    var readsWhileVerifying = false
    /// Inside ``readingInOneTransaction(_:)``, where nothing may write.
    var readsInOneTransaction = false
    /// Whether this process has seen the vault's integrity record (checked or made it).
    var integrityRecordSeen = false
    /// Unlocked with ``Verification/reads`` or ``Verification/concurrent``: each read checks the
    /// buckets of what it finds, until a read or change checks the whole vault.
    var verifiesEachRead = false
    /// Every note and entry has its name key (checked at the unlock): lookups by name use it.
    var namesAreIndexed = false
    /// The key slot this vault was unlocked from, saying the vault has an integrity record,
    /// to be written once the vault is known to hold one (see `bindIntegrityRecordToKeySlot`).
    var slotRequiringRecord: KeySlot?
    /// Each store's schema cookie when its schema was last checked.
    var checkedSchemaVersions: [String: Int64] = [:]
    /// The observations of items ``lock()`` ends.
    var observations: [WeakObservation] = []
    /// How the stores' schemas differ from the vault's (see ``open(at:refusingChangedSchema:)``).
    private(set) var schemaProblems: [CheckProblem] = []


    /// How long a read or save waits for another process's lock unless the caller says otherwise.
    public static let defaultLockTimeout: TimeInterval = 30
    /// The longest wait for another process's lock a caller may ask for: a day.
    public static let lockTimeoutRange: ClosedRange<TimeInterval> = 0...86_400

    /// Seconds to wait for another process's lock, from text a person gave.
    ///
    /// - throws: ``VaultError/settingOutOfRange(_:value:allowed:)`` for anything but a number of
    ///   seconds from 0 to a day (`inf`, `nan`, negatives, text).
    public static func lockTimeout(parsing text: String) throws -> TimeInterval {
        guard let seconds = TimeInterval(text.trimmingCharacters(in: .whitespaces)), seconds.isFinite,
              lockTimeoutRange.contains(seconds) else {
            throw VaultError.settingOutOfRange(
                .lockTimeout, value: "'\(text)'",
                allowed: Int(lockTimeoutRange.lowerBound)...Int(lockTimeoutRange.upperBound))
        }
        return seconds
    }


    /// Opens the stores; with `newSlot`, creates them for a new vault protected by that slot.
    private init(directory: URL, newSlot: KeySlot?, lockTimeout: TimeInterval) throws {
        let creating = newSlot != nil
        self.directory = directory
        coordinator = PersistentStoreCoordinator(modelVersions: try Resources.modelVersions(), busyTimeout: lockTimeout)
        coordinator.valueTransformers.register(transformer, forName: EncryptingTransformer.name)
        coordinator.valueTransformers.register(
            BinaryEncryptingTransformer(sharingKeyOf: transformer), forName: EncryptingTransformer.binaryName)
        var options = StoreOptions()
        options.mustExist = !creating
        // A store of an earlier model version is migrated in place, in the transaction that opens it.
        options.migratesAutomatically = true
        options.infersMappingModel = true
        // What changed since the last sync is read from the stores' history (Vault+Sync).
        options.tracksPersistentHistory = true
        do {
            notesStore = try coordinator.addPersistentStore(
                type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent(Self.notesFileName),
                options: options)
            passwordsStore = try coordinator.addPersistentStore(
                type: .sqlite, configuration: "Passwords", at: directory.appendingPathComponent(Self.passwordsFileName),
                options: options)
        } catch let error as ObjectGraphError where error.storeFailure == .missing {
            throw VaultError.vaultIncomplete(path: directory.path, reason: error.message)
        }
        // Ciphertexts are bound to their store's UUID: two stores must never share one.
        guard notesStore.identifier != passwordsStore.identifier else {
            throw VaultError.sameStoreIdentity(Self.notesFileName, Self.passwordsFileName)
        }
        transformer.storeNames = [
            notesStore.identifier: Self.notesFileName, passwordsStore.identifier: Self.passwordsFileName,
        ]
        context = ManagedObjectContext(coordinator: coordinator)
        // Both stores' metadata from one read: a key change committing meanwhile is seen in both or neither.
        if !creating { try coordinator.reloadMetadata() }
        keySlot = try newSlot ?? Self.readKeySlot(notesStore, passwordsStore)
        identifier =
            creating
            ? UUID().uuidString
            : (passwordsStore.metadata[Self.vaultIdentifierKey] as? String ?? passwordsStore.identifier)
        // History is what sync reads: a vault that never synced records none.
        let synced = !creating && ((try? context.count(for: FetchRequest<SyncStateRow>())) ?? 0) > 0
        if !synced {
            for store in [notesStore, passwordsStore] { store.setTracksHistory(false) }
        }
        transformer.keyChangedElsewhere = { [unowned self] in try keySlotChangedElsewhere() }
    }

    /// Whether the stores, as the read under way sees them, hold another key slot than the one
    /// this process unlocked with.
    func keySlotChangedElsewhere() throws -> Bool {
        let current = Data(keySlot.serialized)
        return try coordinator.performRead { transaction in
            [notesStore, passwordsStore].contains {
                Self.holdsAnotherKeySlot($0.identifier, than: current, in: transaction)
            }
        }
    }

    /// Whether a store, as `transaction` sees it, holds a key slot other than `slot` (one it
    /// cannot show, or none, is not another).
    static func holdsAnotherKeySlot(_ storeIdentifier: String, than slot: Data,
                                    in transaction: StoreTransaction) -> Bool {
        let stored = try? transaction.metadata(ofStore: storeIdentifier)[keySlotKey] as? Data
        return stored.map { $0 != slot } ?? false
    }

    /// The stores this open migrated to the current model version, each with the versions it
    /// went through (empty when both were current already).
    public var migrations: [(store: String, from: String, to: String)] {
        coordinator.migrationReports.compactMap { report in
            guard let first = report.hops.first, let last = report.hops.last else { return nil }
            return (report.storeName, first.from, last.to)
        }
    }

    private static func readKeySlot(_ notes: PersistentStore, _ passwords: PersistentStore) throws -> KeySlot {
        guard let a = notes.metadata[keySlotKey] as? Data, let b = passwords.metadata[keySlotKey] as? Data else {
            // Never advise removing the directory: the other store may hold intact data.
            let missing = [(notes, notesFileName), (passwords, passwordsFileName)]
                .filter { !($0.0.metadata[keySlotKey] is Data) }.map(\.1)
            guard missing.count == 1, let damaged = missing.first else {
                throw VaultError.keySlot(.missingInBoth)
            }
            throw VaultError.keySlot(
                .missing(in: damaged, intact: damaged == notesFileName ? passwordsFileName : notesFileName))
        }
        guard a == b else { throw VaultError.keySlot(.different) }
        return try KeySlot(serialized: Array(a))
    }

    // MARK: - Creating and opening

    /// Creates a vault: the directory (0700), both stores (0600), the key slot and the seed data.
    /// The vault is built in a directory beside `directory` and renamed into place, so a crash
    /// leaves either no vault or a complete one.
    ///
    /// - throws: ``VaultError/vaultExists(path:)`` when a vault already exists there.
    public static func create(at directory: URL, password: SecretBytes, parameters: ScryptParameters) throws -> Vault {
        let (slot, dataKey) = try wrapErrors { try KeySlot.create(password: password, parameters: parameters) }
        return try create(at: directory, slot: slot, dataKey: dataKey)
    }

    /// Creates a vault protected by an existing key slot, whose data key the caller unwrapped
    /// (a clone of a vault kept on another machine), as ``create(at:password:parameters:)`` does.
    static func create(at directory: URL, slot: KeySlot, dataKey: SecretBytes) throws -> Vault {
        let fileManager = FileManager.default
        for name in [notesFileName, passwordsFileName]
        where fileManager.fileExists(atPath: directory.appendingPathComponent(name).path) {
            throw VaultError.vaultExists(path: directory.path)
        }
        let parent = directory.deletingLastPathComponent()
        let aside = try makeBuildDirectory(for: directory, kind: "init")
        defer { try? fileManager.removeItem(at: aside) }
        do {
            let vault = try wrapErrors { try Vault(directory: aside, newSlot: slot, lockTimeout: defaultLockTimeout) }

            vault.transformer.dataKey = dataKey
            for store in [vault.notesStore, vault.passwordsStore] {
                vault.coordinator.setMetadata(Data(slot.serialized), forKey: keySlotKey, in: store)
                vault.coordinator.setMetadata(vault.identifier, forKey: vaultIdentifierKey, in: store)
            }
            try vault.didUnlock(.skipped)
            try wrapErrors {
                try vault.ensureStoreConstraints()
                try vault.insertMissingSeeds()
                try vault.context.save()
                try vault.coordinator.close()
            }
        } catch {
            throw VaultError.wrapping(error)
        }
        // rename(2) replaces only an empty directory, so an existing vault is never overwritten.
        if fileManager.fileExists(atPath: directory.path) { try checkPermissions(directory) }
        guard fsyncPath(aside.path), rename(aside.path, directory.path) == 0 else {
            throw VaultError.cannotCreate(path: directory.path, reason: String(cString: strerror(errno)))
        }
        _ = fsyncPath(parent.path)
        let vault = try open(at: directory)
        vault.transformer.dataKey = dataKey
        try vault.didUnlock(.skipped)
        return vault
    }

    /// A new, empty directory (0700) beside `directory` where a vault is built before it is
    /// renamed into place, after removing those of `kind` whose process died.
    static func makeBuildDirectory(for directory: URL, kind: String) throws -> URL {
        let parent = directory.deletingLastPathComponent()
        // A parent that cannot be made fails the mkdir below, with its reason.
        try? FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        removeAbandonedBuilds(beside: directory, kind: kind)
        let aside = parent.appendingPathComponent(".\(directory.lastPathComponent).\(kind)-\(getpid())")
        try? FileManager.default.removeItem(at: aside)
        guard mkdir(aside.path, 0o700) == 0 else {
            throw VaultError.cannotCreate(path: aside.path, reason: String(cString: strerror(errno)))
        }
        return aside
    }

    /// Removes vaults that `create` (kind `init`) or `clone` was building when its process died
    /// (the process is gone).
    static func removeAbandonedBuilds(beside directory: URL, kind: String) {
        let parent = directory.deletingLastPathComponent()
        let prefix = ".\(directory.lastPathComponent).\(kind)-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? []
        where name.hasPrefix(prefix) {
            guard let pid = Int32(name.dropFirst(prefix.count)), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: parent.appendingPathComponent(name))
        }
    }

    static func fsyncPath(_ path: String) -> Bool {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return fsync(descriptor) == 0
    }

    /// Opens an existing vault (still locked), after checking its permissions. Seed data
    /// newer than the vault's is loaded once it is unlocked.
    ///
    /// Each store's schema must be the one mystash creates (tables, columns, indexes, no
    /// trigger or view): one changed outside mystash could alter what is written or read, so
    /// it is refused, unless `refusingChangedSchema` is false (to check the vault), when
    /// ``check(progress:)`` reports the differences.
    ///
    /// - Parameter lockTimeout: how long a read or save waits for another process's lock.
    /// - throws: ``VaultError/noVault(path:)``, `.notOwned`, `.openToOthers`, `.schemaChanged`
    ///   naming each change to the schema.
    public static func open(at directory: URL, lockTimeout: TimeInterval = defaultLockTimeout,
                            refusingChangedSchema: Bool = true) throws -> Vault {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue,
              FileManager.default.fileExists(atPath: directory.appendingPathComponent(passwordsFileName).path) else {
            throw VaultError.noVault(path: directory.path)
        }
        try checkPermissions(directory)
        Recovery.recover(in: directory)
        let vault = try wrapErrors { try Vault(directory: directory, newSlot: nil, lockTimeout: lockTimeout) }
        // Read before the check: a change between the two makes the first save check again.
        vault.checkedSchemaVersions = try wrapErrors { try vault.coordinator.performRead(vault.schemaVersions) }
        vault.schemaProblems = try wrapErrors { try vault.coordinator.schemaProblems(extraObjects: vault.ownSchema()) }
        if refusingChangedSchema, !vault.schemaProblems.isEmpty {
            throw VaultError.schemaChanged(vault.schemaProblems)
        }
        return vault
    }

    func schemaVersions(_ transaction: StoreTransaction) throws -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: try [notesStore, passwordsStore].map {
            ($0.identifier, try transaction.schemaVersion(ofStore: $0.identifier))
        })
    }

    /// Inside a save: when a store's schema changed since it was checked (mystash's own index
    /// or record tables, or anything else), checks it again before the save's tags are computed.
    func recheckSchemaIfChanged(_ transaction: StoreTransaction) throws {
        let versions = try schemaVersions(transaction)
        guard versions != checkedSchemaVersions else { return }
        if let problem = try coordinator.schemaProblems(extraObjects: ownSchema()).first {
            throw RowAuthenticationFailure(problem)
        }
        checkedSchemaVersions = versions
    }

    /// The tables and indexes the vault adds to each store beside the model's.
    func ownSchema() throws -> [String: [String]] {
        let categoryNames = try coordinator.uniqueIndexStatement(
            on: Category.entityName, attribute: Category.Key.name.rawValue, caseInsensitive: true)
        var objects: [String: [String]] = [:]
        for store in integrityStores {
            let firstLayout = try coordinator.performRead { try FirstLayoutRecord.isLayout(of: store, $0) }
            objects[store.identifier] =
                firstLayout ? FirstLayoutRecord.tableDefinitions : IntegrityRecord.tables.definitions { $0 }
        }
        objects[categoryNames.storeIdentifier, default: []].append(categoryNames.statement)
        return objects
    }

    /// Refuses a vault that other users could read or write, as ssh refuses such keys.
    static func checkPermissions(_ directory: URL) throws {
        var paths = [directory.path]
        for name in [notesFileName, passwordsFileName] {
            for suffix in ["", "-journal"] { paths.append(directory.appendingPathComponent(name + suffix).path) }
        }
        for (index, path) in paths.enumerated() {
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            if info.st_uid != geteuid() {
                throw VaultError.notOwned(path: path)
            }
            let mode = info.st_mode & 0o777
            if mode & 0o077 != 0 {
                let wanted = index == 0 ? "700" : "600"
                throw VaultError.openToOthers(path: path, mode: UInt16(mode), wanted: wanted)
            }
        }
    }

    static func wrapErrors<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw VaultError.wrapping(error) }
    }

    /// Runs a change and saves it; on failure the context is rolled back so nothing lingers.
    func change<T>(_ body: () throws -> T) throws -> T {
        // Nothing is written to a vault before it passed its check.
        try awaitVerification()
        do {
            try ensureStoreConstraints()
            let result = try body()
            try saveChanges()
            return result
        } catch {
            context.rollback()
            throw VaultError.wrapping(error)
        }
    }

    /// Saves the context. A save whose commit took effect before the disk reported an error
    /// (syncing the directory after the commit) is reported as saved but not synced, never as
    /// a change that was not made.
    func saveChanges() throws {
        do {
            try updateNameKeys()
            try context.save()
        } catch let error as ObjectGraphError where error.storeFailure == .ioError {
            guard let integrityRecord,
                  (try? coordinator.performRead({ try integrityRecord.rows.holdsLastWrittenGenerations(in: $0) }))
                    == true
            else { throw error }
            throw VaultError.savedButNotSynced(error.message)
        }
    }

    // MARK: - Keys

    var isUnlocked: Bool { transformer.dataKey != nil }

    /// Derives the key-encryption key from the master password and unwraps the data key,
    /// then checks the vault against its integrity record as `verification` says.
    ///
    /// - throws: ``VaultError`` `.wrongPassword` (exit 77); `.invalidData` (65) naming each
    ///   row changed outside mystash.
    public func unlock(password: SecretBytes, verification: Verification = .immediate) throws {
        try reloadKeySlot()
        let (dataKey, requiring) = try Self.wrapErrors {
            try keySlot.unlockRequiringIntegrityRecord(password: password)
        }
        transformer.dataKey = dataKey
        slotRequiringRecord = requiring
        try didUnlock(verification)
    }

    /// Uses a data key from an unlocked session, if it belongs to the vault's current key
    /// slot; a stale session (the master password changed since) is revoked.
    ///
    /// - throws: as ``unlock(password:verification:)``, once the key is accepted.
    @discardableResult
    public func unlock(session: KeyringSession.Contents, verification: Verification = .immediate) throws -> Bool {
        try reloadKeySlot()
        guard session.slotIdentifier == keySlot.slotIdentifier else {
            KeyringSession.revoke(vaultIdentifier: identifier)
            return false
        }
        transformer.dataKey = session.dataKey
        try didUnlock(verification)
        return true
    }

    /// The key slot as the stores hold it now: a vault open for long (browse) is unlocked again
    /// with the master password of now, after another process changed it.
    private func reloadKeySlot() throws {
        try Self.wrapErrors { try coordinator.reloadMetadata() }
        keySlot = try Self.readKeySlot(notesStore, passwordsStore)
    }

    /// The data key with the slot it came from, to keep in an unlocked session.
    public func sessionContents() throws -> KeyringSession.Contents {
        guard let dataKey = transformer.dataKey else { throw VaultError.locked }
        return KeyringSession.Contents(slotIdentifier: keySlot.slotIdentifier, dataKey: dataKey)
    }

    /// Re-wraps the data key under a new master password, in both stores in one
    /// transaction; no field is re-encrypted. Unlocked sessions of the old slot become stale.
    ///
    /// - throws: ``VaultError`` `.busy` when another process changed the master password or the
    ///   key since this vault was unlocked: nothing is changed, and the other change stands.
    public func changePassword(to newPassword: SecretBytes, parameters: ScryptParameters) throws {
        try awaitVerification()
        guard let dataKey = transformer.dataKey else { throw VaultError.locked }
        let slot = try Self.wrapErrors { try KeySlot.wrapping(dataKey, password: newPassword, parameters: parameters) }
        // The new slot says the vault has an integrity record: it must have one first.
        try ensureIntegrityRecord()
        try changingKey {
            for store in [notesStore, passwordsStore] {
                coordinator.setMetadata(Data(slot.serialized), forKey: Self.keySlotKey, in: store)
            }
            try coordinator.saveMetadata()
        }
        keySlot = slot
        integrityRecord?.keySlot = Data(slot.serialized)
        KeyringSession.revoke(vaultIdentifier: identifier)
    }

    /// Runs a change of the key slot holding every store's write lock, once the slot on disk is
    /// known to be still the one this vault was unlocked with: two key changes never both
    /// succeed, and no other writer commits between what the change reads and what it writes.
    func changingKey(_ body: () throws -> Void) throws {
        do {
            try coordinator.performExclusively {
                try coordinator.reloadMetadata()
                guard try Self.readKeySlot(notesStore, passwordsStore) == keySlot else {
                    throw VaultError.passwordChangedElsewhere
                }
                try body()
            }
        } catch {
            // The metadata set for the new slot must not linger; what the stores hold is read again.
            try? coordinator.reloadMetadata()
            throw VaultError.wrapping(error)
        }
    }
}
