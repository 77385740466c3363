import Foundation
import ObjectGraph
import StashCrypto
#if canImport(Glibc)
import Glibc
#endif

/// A MyStash vault: a directory holding `Notes.sqlite` and `Passwords.sqlite`, one store per
/// configuration of the model, with secret fields encrypted by the vault's data key.
///
/// ```swift
/// let vault = try Vault.open(at: Vault.defaultDirectory())
/// try vault.unlock(password: .password("correct horse"))
/// let id = try vault.addNote(title: "Wi-Fi", text: "the code is on the router")
/// ```
public final class Vault {
    public static let notesFileName = "Notes.sqlite"
    public static let passwordsFileName = "Passwords.sqlite"
    static let keySlotKey = "MyStashKeySlot"
    static let vaultIdentifierKey = "MyStashVaultID"

    public let directory: URL
    public let coordinator: PersistentStoreCoordinator
    public let context: ManagedObjectContext
    let transformer = EncryptingTransformer()
    let notesStore: PersistentStore
    let passwordsStore: PersistentStore
    public internal(set) var keySlot: KeySlot
    /// The vault's identity, the same in both stores; names its keyring session.
    public let identifier: String
    /// Whether this process made sure the stores hold their unique indexes.
    var storeConstraintsEnsured = false
    /// Keeps the integrity record current; set once the data key is known.
    var integrity: IntegrityRecord?
    /// A check of the vault started by an unlock with ``Verification/concurrent``.
    var pendingVerification: PendingVerification?
    /// Whether this process has seen the vault's integrity record (checked or made it).
    var integrityRecordSeen = false

    /// `$XDG_DATA_HOME/mystash`, else `~/.local/share/mystash`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg).appendingPathComponent("mystash")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/share/mystash")
    }

    /// The longest wait for another process's lock that `MYSTASH_BUSY_TIMEOUT` may ask for: a day.
    static let maximumBusyTimeout: TimeInterval = 86_400

    /// Seconds to wait for another process's lock: `MYSTASH_BUSY_TIMEOUT`, else 30.
    ///
    /// - throws: ``VaultError`` `.usage` for anything but a number of seconds from 0 to a day
    ///   (`inf`, `nan`, negatives, text).
    static func busyTimeout(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> TimeInterval {
        guard let text = environment["MYSTASH_BUSY_TIMEOUT"] else { return 30 }
        guard let seconds = TimeInterval(text.trimmingCharacters(in: .whitespaces)), seconds.isFinite,
              (0...maximumBusyTimeout).contains(seconds) else {
            throw VaultError(.usage,
                             "MYSTASH_BUSY_TIMEOUT must be a number of seconds from 0 to \(Int(maximumBusyTimeout)), "
                                + "not '\(text)'",
                             hint: "unset it to wait 30 seconds")
        }
        return seconds
    }

    /// Opens the stores; with `newSlot`, creates them for a new vault protected by that slot.
    private init(directory: URL, newSlot: KeySlot?) throws {
        let creating = newSlot != nil
        self.directory = directory
        coordinator = PersistentStoreCoordinator(
            modelVersions: try Resources.modelVersions(), busyTimeout: try Self.busyTimeout())
        coordinator.valueTransformers.register(transformer, forName: EncryptingTransformer.name)
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
            throw VaultError(
                .notFound, "the vault at '\(directory.path)' is incomplete: \(error.message)",
                hint: "restore the missing file from a backup")
        }
        // Ciphertexts are bound to their store's UUID: two stores must never share one.
        guard notesStore.identifier != passwordsStore.identifier else {
            throw VaultError(.invalidData,
                             "\(Self.notesFileName) and \(Self.passwordsFileName) carry the same store UUID "
                                + "(Z_METADATA.Z_UUID): "
                             + "one of them was altered or replaced", hint: "restore the vault from a backup")
        }
        transformer.storeNames = [
            notesStore.identifier: Self.notesFileName, passwordsStore.identifier: Self.passwordsFileName,
        ]
        context = ManagedObjectContext(coordinator: coordinator)
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
                throw VaultError(.invalidData,
                                 "neither store of the vault holds a key slot "
                                    + "(it was damaged, or not completely created)",
                                 hint: "restore the vault from a backup, "
                                    + "or move the directory aside and run 'mystash init'")
            }
            let intact = damaged == notesFileName ? passwordsFileName : notesFileName
            throw VaultError(.invalidData,
                             "\(damaged) has no key slot: it is damaged or was replaced; \(intact) is intact",
                             hint: "restore \(damaged) from a backup and keep \(intact)")
        }
        guard a == b else {
            throw VaultError(
                .invalidData, "the two stores of the vault hold different key slots",
                hint: "restore the vault from a backup")
        }
        return try KeySlot(serialized: Array(a))
    }

    // MARK: - Creating and opening

    /// Creates a vault: the directory (0700), both stores (0600), the key slot and the seed data.
    /// The vault is built in a directory beside `directory` and renamed into place, so a crash
    /// leaves either no vault or a complete one.
    ///
    /// - throws: ``VaultError`` `.cannotCreate` (exit 73) when a vault already exists there.
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
            throw VaultError(
                .cannotCreate, "a vault already exists at '\(directory.path)'",
                hint: "use it, or choose another directory with --vault")
        }
        let parent = directory.deletingLastPathComponent()
        // A parent that cannot be made fails the mkdir below, with its reason.
        try? fileManager.createDirectory(at: parent, withIntermediateDirectories: true)
        removeAbandonedBuilds(beside: directory, kind: "init")
        let aside = parent.appendingPathComponent(".\(directory.lastPathComponent).init-\(getpid())")
        try? fileManager.removeItem(at: aside)
        guard mkdir(aside.path, 0o700) == 0 else {
            throw VaultError(.cannotCreate, "cannot create '\(aside.path)': \(String(cString: strerror(errno)))")
        }
        defer { try? fileManager.removeItem(at: aside) }
        do {
            let vault = try wrapErrors { try Vault(directory: aside, newSlot: slot) }
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
            throw VaultError(.cannotCreate, "cannot create '\(directory.path)': \(String(cString: strerror(errno)))",
                             hint: "choose an empty or new directory with --vault")
        }
        _ = fsyncPath(parent.path)
        let vault = try open(at: directory)
        vault.transformer.dataKey = dataKey
        try vault.didUnlock(.skipped)
        return vault
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
    public static func open(at directory: URL) throws -> Vault {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue,
              FileManager.default.fileExists(atPath: directory.appendingPathComponent(passwordsFileName).path) else {
            throw VaultError(
                .notFound, "there is no vault at '\(directory.path)'",
                hint: "create one with 'mystash init', or name another with --vault or MYSTASH_VAULT")
        }
        try checkPermissions(directory)
        Recovery.recover(in: directory)
        return try wrapErrors { try Vault(directory: directory, newSlot: nil) }
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
                throw VaultError(
                    .permission, "'\(path)' belongs to another user",
                    hint: "a vault must belong to the user who opens it")
            }
            let mode = info.st_mode & 0o777
            if mode & 0o077 != 0 {
                let wanted = index == 0 ? "700" : "600"
                throw VaultError(
                    .permission, "'\(path)' can be read or written by other users (mode \(String(mode, radix: 8)))",
                                 hint: "run: chmod \(wanted) '\(path)'")
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
            try context.save()
            return result
        } catch {
            context.rollback()
            throw VaultError.wrapping(error)
        }
    }

    // MARK: - Keys

    public var isUnlocked: Bool { transformer.dataKey != nil }

    /// Derives the key-encryption key from the master password and unwraps the data key,
    /// then checks the vault against its integrity record as `verification` says.
    ///
    /// - throws: ``VaultError`` `.wrongPassword` (exit 77); `.invalidData` (65) naming each
    ///   row changed outside mystash.
    public func unlock(password: SecretBytes, verification: Verification = .immediate) throws {
        transformer.dataKey = try Self.wrapErrors { try keySlot.unlock(password: password) }
        try didUnlock(verification)
    }

    /// Uses a data key from an unlocked session, if it belongs to the vault's current key
    /// slot; a stale session (the master password changed since) is revoked.
    ///
    /// - throws: as ``unlock(password:verification:)``, once the key is accepted.
    @discardableResult
    public func unlock(session: KeyringSession.Contents, verification: Verification = .immediate) throws -> Bool {
        guard session.slotIdentifier == keySlot.slotIdentifier else {
            KeyringSession.revoke(vaultIdentifier: identifier)
            return false
        }
        transformer.dataKey = session.dataKey
        try didUnlock(verification)
        return true
    }

    /// The data key with the slot it came from, to keep in an unlocked session.
    public func sessionContents() throws -> KeyringSession.Contents {
        guard let dataKey = transformer.dataKey else { throw VaultError(.wrongPassword, "the vault is locked") }
        return KeyringSession.Contents(slotIdentifier: keySlot.slotIdentifier, dataKey: dataKey)
    }

    /// Re-wraps the data key under a new master password, in both stores in one
    /// transaction; no field is re-encrypted. Unlocked sessions of the old slot become stale.
    public func changePassword(to newPassword: SecretBytes, parameters: ScryptParameters) throws {
        try awaitVerification()
        guard let dataKey = transformer.dataKey else { throw VaultError(.wrongPassword, "the vault is locked") }
        let slot = try Self.wrapErrors { try KeySlot.wrapping(dataKey, password: newPassword, parameters: parameters) }
        for store in [notesStore, passwordsStore] {
            coordinator.setMetadata(Data(slot.serialized), forKey: Self.keySlotKey, in: store)
        }
        try Self.wrapErrors { try coordinator.saveMetadata() }
        keySlot = slot
        KeyringSession.revoke(vaultIdentifier: identifier)
    }
}
