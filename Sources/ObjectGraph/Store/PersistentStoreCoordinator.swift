import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GRDB
internal import CSQLiteSupport

/// Holds a model's persistent stores and the one SQLite connection they share, as
/// `NSPersistentStoreCoordinator`.
///
/// Every store is a schema of that connection: the first SQLite file is `main`, the
/// others are attached. The connection uses a rollback journal, so a transaction that
/// writes to several stores commits atomically across their files (SQLite's super-journal),
/// also when the process is killed mid-commit. A save locks and writes only the stores it
/// changes, so one changing a single store commits it alone. The super-journal records
/// absolute paths: an application whose store directory may move after a crash settles
/// interrupted commits before adding its stores (as MyStash's `Recovery` does).
///
/// A file in WAL mode (as Apple's Core Data writes them) is atomic on its own only: SQLite
/// commits each WAL file separately, so a crash mid-save could keep one store's half of the
/// save and lose the other's. While ``atomicSavesAcrossStores`` is on (the default), adding a
/// second store therefore switches every WAL file of the coordinator to a rollback journal,
/// and refuses the store (134080) when that cannot be done; a single store keeps its WAL.
///
/// For example:
///
/// ```swift
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notesURL)
/// try coordinator.addPersistentStore(type: .sqlite, configuration: "Passwords", at: passwordsURL)
/// let context = ManagedObjectContext(coordinator: coordinator)
/// ```
public final class PersistentStoreCoordinator {
    /// The model every store and context of this coordinator uses.
    public let managedObjectModel: ManagedObjectModel
    /// The stores added, in the order they were added.
    public private(set) var persistentStores: [PersistentStore] = []
    /// Transformers for Transformable attributes; falls back to ``ValueTransformerRegistry/shared``.
    public let valueTransformers = ValueTransformerRegistry()
    /// How long a write waits for another process's lock before failing as busy.
    public var busyTimeout: TimeInterval

    private var connection: DatabaseQueue?
    /// Held by the thread running a transaction (re-entered by work inside it).
    private let lock = NSRecursiveLock()
    /// The connection while a transaction runs, so work inside it does not reenter the queue.
    private var activeDatabase: Database?
    /// Whether the running transaction is ``performExclusively(_:)``'s, which writes join.
    private var activeIsExclusive = false
    private var storeByEntityName: [String: PersistentStore] = [:]
    /// Schemas attached so far; each new one gets a fresh alias, also after a store is removed.
    private var attachedSchemaCount = 0
    /// One a store with ``StoreOptions/postsRemoteChangeNotifications``; they stop with the coordinator.
    private var remoteChangeWatchers: [RemoteChangeWatcher] = []
    /// Every version of the model, searched for a store's version when a store is added with
    /// ``StoreOptions/migratesAutomatically``; by default the current model alone.
    public var modelVersions: ModelVersions
    /// Custom steps run by migrations, beside what is inferred.
    public var migrationSteps: [EntityMigrationStep] = []
    /// Xcode mapping models (`.xcmappingmodel`) that say how to migrate between two versions,
    /// used instead of inferring for the pairs of versions they cover.
    public var mappingModels: [MappingModel] = []
    /// Whether a migration may drop values, objects or links; when false, one that would is
    /// refused (134191) before anything is written, naming what it would drop.
    public var allowsLossyMigration = true
    /// Told of every row each save writes, inside the save's transaction.
    public weak var writeObserver: StoreWriteObserver?
    /// What each migration made while adding stores did, in order.
    public internal(set) var migrationReports: [MigrationReport] = []
    /// Makes a save across several stores all or nothing by switching their files out of WAL
    /// mode when a second store is added (see the type's discussion). Turned off, WAL files stay
    /// in WAL and such a save is atomic per store file only.
    public var atomicSavesAcrossStores = true
    /// Values that triggers of Core Data's derived attributes reported (see ``CoreDataTriggerFunctions``).
    let triggerReports = TriggerReports()
    /// How many reads ran, so tests can see that prefetched relationships need none.
    var readCount = 0

    public init(managedObjectModel: ManagedObjectModel, busyTimeout: TimeInterval = 10) {
        self.managedObjectModel = managedObjectModel
        self.busyTimeout = busyTimeout
        self.modelVersions = ModelVersions(versions: [], current: managedObjectModel)
    }

    /// A coordinator for the current version of `modelVersions`, able to migrate stores made with the others.
    public convenience init(modelVersions: ModelVersions, busyTimeout: TimeInterval = 10) {
        self.init(managedObjectModel: modelVersions.current, busyTimeout: busyTimeout)
        self.modelVersions = modelVersions
    }

    /// Opens (creating it if needed) a store holding the entities of `configuration`.
    ///
    /// - throws: ``ObjectGraphError`` with code 134100 when the store was made with a model
    ///   whose persisted shape differs (the message names the entities and properties),
    ///   134080 when the file cannot be opened or is not a store.
    @discardableResult
    public func addPersistentStore(type: StoreType, configuration: String? = nil, at url: URL? = nil,
                                   options: StoreOptions = StoreOptions()) throws -> PersistentStore {
        if let configuration, managedObjectModel.configurations[configuration] == nil {
            throw ObjectGraphError(
                code: .storeOpenFailed, message: "the model has no configuration named '\(configuration)'")
        }
        let entities = managedObjectModel.entities(forConfiguration: configuration)
        for entity in entities where storeByEntityName[entity.name] != nil {
            throw ObjectGraphError(
                code: .storeOpenFailed,
                message: "entity '\(entity.name)' is already in another store of this coordinator")
        }
        let path: String
        var atomicClass: AtomicStore.Type?
        switch type {
        case .sqlite:
            guard let url else {
                throw ObjectGraphError(code: .storeOpenFailed, message: "a SQLite store needs a file URL")
            }
            path = url.path
            try createFileIfNeeded(path, options: options)
        case .inMemory:
            path = ":memory:"
        default:
            atomicClass = try Self.atomicStoreClass(for: type, url: url, options: options)
            path = ":memory:"
        }
        let schemaName = connection == nil ? "main" : "store\(attachedSchemaCount + 1)"
        let store = PersistentStore(
            type: type, url: url, configurationName: configuration, entities: entities, schemaName: schemaName)
        let name = url?.lastPathComponent ?? "in-memory store"
        try wrapStoreErrors(.storeOpenFailed, "cannot open '\(name)'") {
            let isFirst = connection == nil
            do {
                store.openedFiles = try OpenFile.opened {
                    if let connection {
                        try connection.inDatabase { db in
                            try db.execute(sql: "ATTACH DATABASE ? AS \(schemaName)", arguments: [path])
                        }
                        attachedSchemaCount += 1
                    } else {
                        connection = try makeConnection(path: path)
                    }
                    try connection!.inDatabase { db in
                        try db.execute(sql: "PRAGMA \(schemaName).secure_delete = ON")
                        try self.leaveWriteAheadLogIfNeeded(adding: store, db: db)
                    }
                    // Locks only what it creates or migrates: opening an existing store writes nothing.
                    try write(stores: []) { db in
                        try self.prepare(store, name: name, options: options, db: db)
                        try self.prepareHistory(of: store, name: name, options: options, db: db)
                    }
                }
            } catch {
                // A refused store leaves the coordinator as it was, so another can be added.
                if isFirst {
                    connection = nil
                } else {
                    try? connection?.inDatabase { db in try db.execute(sql: "DETACH DATABASE \(schemaName)") }
                }
                throw error
            }
        }
        if let atomicClass, let url { try openAtomicStore(store, storeClass: atomicClass, url: url, options: options) }
        if options.postsRemoteChangeNotifications, type == .sqlite {
            try wrapStoreErrors(.storeOpenFailed, "cannot watch '\(name)' for other connections' commits") {
                remoteChangeWatchers.append(try RemoteChangeWatcher(
                    store: store, path: path, interval: options.remoteChangePollInterval, coordinator: self))
            }
        }
        persistentStores.append(store)
        for entity in entities { storeByEntityName[entity.name] = store }
        return store
    }

    /// Switches every WAL file of the coordinator to a rollback journal once it holds several
    /// SQLite stores, when ``atomicSavesAcrossStores`` asks for it.
    private func leaveWriteAheadLogIfNeeded(adding store: PersistentStore, db: Database) throws {
        let stores = (persistentStores + [store]).filter { $0.type == .sqlite }
        guard atomicSavesAcrossStores, stores.count > 1 else { return }
        for each in stores {
            let current = try String.fetchOne(db, sql: "PRAGMA \(each.schemaName).journal_mode")
            guard current?.lowercased() == "wal" else { continue }
            let mode = try? String.fetchOne(db, sql: "PRAGMA \(each.schemaName).journal_mode = DELETE")
            guard mode?.lowercased() == "delete" else {
                throw ObjectGraphError(
                    code: .storeOpenFailed,
                    message: "'\(each.displayName)' is in WAL mode and another connection has it open, so it cannot "
                        + "be switched to a rollback journal; a save across this coordinator's stores would be atomic "
                        + "per file only. Close the other users of the file, or turn off atomicSavesAcrossStores")
            }
        }
    }

    /// Turns on the store's history when the options ask for it, creating its tables the first time.
    private func prepareHistory(of store: PersistentStore, name: String, options: StoreOptions, db: Database) throws {
        guard options.tracksPersistentHistory else { return }
        guard store.type == .sqlite || store.type == .inMemory else {
            throw ObjectGraphError(code: .storeOpenFailed,
                                   message: "'\(name)': persistent history needs a SQLite or in-memory store")
        }
        if try !PersistentHistoryTables.exist(in: store, db) {
            for statement in PersistentHistoryTables.createStatements(for: store) { try db.execute(sql: statement) }
        }
        store.historyTablesReady()
    }

    private func createFileIfNeeded(_ path: String, options: StoreOptions) throws {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        guard !options.mustExist else {
            throw ObjectGraphError.missingStore(path)
        }
        // Created with its final permissions from the start, never chmod-ed afterwards.
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, options.fileMode)
        guard descriptor >= 0 else {
            throw ObjectGraphError(
                code: .storeOpenFailed, message: "cannot create store '\(path)': \(String(cString: strerror(errno)))")
        }
        Glibc.close(descriptor)
    }

    private func makeConnection(path: String) throws -> DatabaseQueue {
        // Done when the program loaded; called here too so that the linker keeps it.
        _ = og_sqlite_memory_statistics_off()
        var configuration = Configuration()
        let reports = triggerReports
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            SQLFunctions.register(in: db)
            CoreDataTriggerFunctions.register(in: db, reports: reports)
        }
        return path == ":memory:"
            ? try DatabaseQueue(configuration: configuration)
            : try DatabaseQueue(path: path, configuration: configuration)
    }

    private func prepare(_ store: PersistentStore, name: String, options: StoreOptions, db: Database) throws {
        let hasMetadata =
            try Bool.fetchOne(
                db, sql: "SELECT COUNT(*) > 0 FROM \(store.qualified("sqlite_master")) WHERE name = 'Z_METADATA'")
            ?? false
        if !hasMetadata {
            let tableCount = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(store.qualified("sqlite_master"))") ?? 0
            guard tableCount == 0 else {
                throw ObjectGraphError(
                    code: .storeOpenFailed,
                    message: "'\(name)' is a SQLite database but not a store (no Z_METADATA table)")
            }
            for statement in SQLiteSchema.createStatements(for: store, model: managedObjectModel) {
                try db.execute(sql: statement)
            }
            for entity in store.entities {
                try db.execute(
                    sql:
                        "INSERT INTO \(store.qualified("Z_PRIMARYKEY")) (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, "
                            + "?, 0)",
                               arguments: [entity.entityNumber, entity.name, entity.superentity?.entityNumber ?? 0])
            }
            store.identifier = UUID().uuidString
            store.metadata = [
                StoreMetadataKey.storeType: "SQLite",
                StoreMetadataKey.storeUUID: store.identifier,
                StoreMetadataKey.versionHashesVersion: 3,
            ]
            store.metadata.merge(modelMetadata(for: store)) { _, new in new }
            try db.execute(
                sql: "INSERT INTO \(store.qualified("Z_METADATA")) (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)",
                           arguments: [store.identifier, try plistData(store.metadata)])
            return
        }
        guard let row = try Row.fetchOne(db, sql: "SELECT Z_UUID, Z_PLIST FROM \(store.qualified("Z_METADATA"))"),
              let identifier = String.fromDatabaseValue(row["Z_UUID"]),
              let plist = Data.fromDatabaseValue(row["Z_PLIST"]),
              let metadata = BinaryPropertyList.metadata(from: plist) else {
            throw ObjectGraphError(code: .storeOpenFailed, message: "'\(name)' has damaged metadata (Z_METADATA)")
        }
        store.identifier = identifier
        store.metadata = metadata
        guard !options.ignoresVersioning else { return }
        if options.migratesAutomatically { try migrateIfNeeded(store, name: name, options: options, db: db) }
        if metadata[StoreMetadataKey.entityShapes] == nil {
            try checkStructuralCompatibility(of: store, name: name, db: db)
        } else {
            try checkCompatibility(of: store, name: name)
        }
    }

    /// A store without ObjectGraph's shape metadata (one written by Apple's Core Data) is
    /// checked by what it holds: see ``StoreShape`` for the rule.
    private func checkStructuralCompatibility(of store: PersistentStore, name: String, db: Database) throws {
        let differences = try StoreShape(db, schema: store.schemaName).differences(
            from: managedObjectModel, entities: store.entities)
        guard !differences.isEmpty else { return }
        throw ObjectGraphError(code: .incompatibleVersionHash,
            message: "the store '\(name)' does not fit the model '\(managedObjectModel.versionIdentifier)': "
                                   + differences.map(\.description).joined(separator: "; "))
    }

    private func modelMetadata(for store: PersistentStore) -> [String: Any] {
        Self.modelMetadata(of: managedObjectModel, entities: store.entities)
    }

    /// The metadata keys describing `model` for a store holding `entities`.
    static func modelMetadata(of model: ManagedObjectModel, entities: [EntityDescription]) -> [String: Any] {
        let names = Set(entities.map(\.name))
        return [
            StoreMetadataKey.versionHashes: model.recordedVersionHashes.filter { names.contains($0.key) },
            StoreMetadataKey.versionIdentifiers: [model.versionIdentifier],
            StoreMetadataKey.entityShapes: model.entityShapes.filter { names.contains($0.key) },
        ]
    }

    /// Compares the persisted shapes the store recorded with the model's: never the version
    /// hashes, which may be Apple's (see ``ManagedObjectModel/compiledVersionHashes``).
    func checkCompatibility(of store: PersistentStore, name: String) throws {
        let names = Set(store.entities.map(\.name))
        let recorded = store.metadata[StoreMetadataKey.entityShapes] as? [String: [String: String]] ?? [:]
        let current = managedObjectModel.entityShapes.filter { names.contains($0.key) }
        guard recorded != current else { return }
        var differences: [String] = []
        for entity in Set(recorded.keys).union(current.keys).sorted() where recorded[entity] != current[entity] {
            guard let old = recorded[entity] else {
                differences.append("entity \(entity) is new in the model"); continue
            }
            guard let new = current[entity] else {
                differences.append("entity \(entity) is in the store but not in the model"); continue
            }
            for property in Set(old.keys).union(new.keys).sorted() where old[property] != new[property] {
                switch (old[property], new[property]) {
                case (nil, let added?): differences.append("\(entity).\(property) added (\(added))")
                case (let removed?, nil): differences.append("\(entity).\(property) removed (was \(removed))")
                case (let before?, let after?):
                    differences.append("\(entity).\(property) changed from \(before) to \(after)")
                default: break
                }
            }
        }
        throw ObjectGraphError(code: .incompatibleVersionHash,
            message: "the store '\(name)' was made with an incompatible model: \(differences.joined(separator: "; "))")
    }

    /// Takes a store out of the coordinator's maps (its schema stays attached).
    func unregister(_ store: PersistentStore) {
        persistentStores.removeAll { $0 === store }
        // A store that left stops being watched (and its file no longer held open for it).
        remoteChangeWatchers.removeAll { $0.store === store }
        for entity in store.entities where storeByEntityName[entity.name] === store {
            storeByEntityName[entity.name] = nil
        }
    }

    /// Puts a store back into the coordinator's maps.
    func register(_ store: PersistentStore) {
        persistentStores.append(store)
        for entity in store.entities { storeByEntityName[entity.name] = store }
    }

    /// Detaches a removed store's schema; the first store's (`main`) stays open until ``close()``.
    func detach(_ store: PersistentStore) throws {
        guard store.schemaName != "main", let connection else { return }
        try connection.inDatabase { db in try db.execute(sql: "DETACH DATABASE \(store.schemaName)") }
    }

    /// Closes the connection; the coordinator cannot be used afterwards.
    public func close() throws {
        remoteChangeWatchers = []
        try connection?.close()
        connection = nil
    }

    // MARK: - Metadata

    /// Sets metadata keys of a store (property-list values); they are written by the next
    /// save, or by ``saveMetadata()``, in the same transaction as the objects.
    public func setMetadata(_ value: Any?, forKey key: String, in store: PersistentStore) {
        store.metadata[key] = value
        store.metadataNeedsSaving = true
    }

    /// Writes the pending metadata of every store in one transaction, atomic across stores.
    public func saveMetadata() throws {
        try wrapStoreErrors(.saveFailed, "cannot save store metadata") {
            try write(stores: persistentStores.filter(\.metadataNeedsSaving)) { db in try self.writePendingMetadata(db)
            }
        }
    }

    func writePendingMetadata(_ db: Database) throws {
        for store in persistentStores where store.metadataNeedsSaving {
            try db.execute(
                sql: "UPDATE \(store.qualified("Z_METADATA")) SET Z_PLIST = ?",
                arguments: [try plistData(store.metadata)])
        }
    }

    func metadataWasSaved() {
        for store in persistentStores { store.metadataNeedsSaving = false }
    }

    /// Re-reads every store's metadata from disk (another process may have changed it).
    ///
    /// - throws: ``ObjectGraphError`` 134061 when a store's `Z_METADATA` holds no readable
    ///   property list: keeping the old metadata would trust what the file no longer says.
    ///   Other failures to read (busy past ``busyTimeout``, damaged) are ``ObjectGraphError`` too.
    public func reloadMetadata() throws {
        try wrapStoreErrors(.storeOpenFailed, "cannot read the stores' metadata") {
            try read { db in
                for store in persistentStores {
                    let table = store.qualified("Z_METADATA")
                    guard let plist = try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM \(table)"),
                          let metadata = BinaryPropertyList.metadata(from: plist)
                    else {
                        throw ObjectGraphError.damagedRow(
                            storeName: store.displayName, entity: "Z_METADATA", primaryKey: nil,
                            "Z_PLIST is not a readable property list")
                    }
                    store.metadata = metadata
                }
            }
        }
    }

    private func plistData(_ metadata: [String: Any]) throws -> Data {
        try PropertyListSerialization.data(fromPropertyList: metadata, format: .binary, options: 0)
    }

    // MARK: - Access

    public func persistentStore(for entity: EntityDescription) -> PersistentStore? { storeByEntityName[entity.name] }

    func store(for entity: EntityDescription) throws -> PersistentStore {
        guard let store = storeByEntityName[entity.name] else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "no store of this coordinator holds entity '\(entity.name)'")
        }
        return store
    }

    /// Runs `body` in a read transaction (or inside the transaction already running).
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        // Contexts on several queues share the connection: one transaction at a time.
        lock.lock()
        defer { lock.unlock() }
        readCount += 1
        if let activeDatabase { return try body(activeDatabase) }
        guard let connection else { preconditionFailure("The coordinator has no open store") }
        return try connection.inDatabase { db in
            activeDatabase = db
            defer { activeDatabase = nil }
            var result: T?
            try db.inTransaction(.deferred) {
                try db.takeReadLocks(schemasInCommitOrder)
                result = try body(db)
                return .commit
            }
            return result!
        }
    }

    /// The stores' schema names in the order a save commits them: `main`, then the attached ones
    /// in the order they were attached.
    var schemasInCommitOrder: [String] {
        let names = persistentStores.map(\.schemaName)
        return names.filter { $0 == "main" } + names.filter { $0 != "main" }
    }

    /// Runs `body` in a write transaction holding the write lock of `stores` (every store
    /// when nil; others are locked when first written) from its start: it commits entirely
    /// or not at all.
    ///
    /// A transaction locking one store commits that store alone, with its own rollback journal;
    /// only one locking several goes through SQLite's super-journal.
    func write<T>(stores: [PersistentStore]? = nil, _ body: (Database) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if activeIsExclusive, let activeDatabase {
            // Inside an exclusive transaction: a savepoint, so a failed save undoes only itself.
            var result: T?
            try activeDatabase.inSavepoint {
                result = try body(activeDatabase)
                return .commit
            }
            return result!
        }
        precondition(activeDatabase == nil, "Write transactions do not nest")
        guard let connection else { preconditionFailure("The coordinator has no open store") }
        return try connection.inDatabase { db in
            activeDatabase = db
            defer { activeDatabase = nil }
            var result: T?
            try db.inTransaction(stores == nil ? .immediate : .deferred) {
                for store in stores ?? [] {
                    // Takes this store's write lock now without changing a row.
                    try db.execute(sql: "DELETE FROM \(store.qualified("Z_PRIMARYKEY")) WHERE 0")
                }
                let changes = db.totalChangesCount
                result = try body(db)
                // Atomic stores write their files before the commit, so a failed write saves nothing.
                if db.totalChangesCount != changes { try saveAtomicStores(db) }
                return .commit
            }
            return result!
        }
    }

    /// Runs `body` holding the write lock of every store from its start: no other connection or
    /// process writes until it returns, so what `body` reads stays true while it writes, as for
    /// a change of the key that encrypts every row. Reads, saves and ``performWrite(_:)`` inside
    /// join its transaction (each save in a savepoint of its own); it commits when `body`
    /// returns and rolls back, with every save made inside, when `body` throws. A context that
    /// saved inside a call that then failed is ahead of the stores: reset it.
    ///
    /// - throws: what `body` throws, or ``ObjectGraphError`` when the stores cannot be locked
    ///   (busy past ``busyTimeout``, read-only) or the commit fails.
    public func performExclusively<T>(_ body: () throws -> T) throws -> T {
        try wrapStoreErrors(.saveFailed, "cannot lock the stores") {
            lock.lock()
            defer { lock.unlock() }
            precondition(activeDatabase == nil, "An exclusive transaction cannot begin inside another transaction")
            return try write { _ in
                activeIsExclusive = true
                defer { activeIsExclusive = false }
                return try body()
            }
        }
    }

    /// Takes primary keys for `count` new rows of `root`'s table from `Z_PRIMARYKEY`.
    func allocatePrimaryKeys(_ db: Database, root: EntityDescription, count: Int) throws -> Int64 {
        let store = try store(for: root)
        let table = store.qualified("Z_PRIMARYKEY")
        // Never below the highest key in use: a damaged Z_MAX must not make a new row collide with an old one.
        let allocated = try DatabaseValue.fetchOne(db, sql: "SELECT Z_MAX FROM \(table) WHERE Z_ENT = ?",
                                                   arguments: [root.entityNumber])
        guard let allocated else {
            throw ObjectGraphError.damagedRow(store: store, root: root, primaryKey: nil,
                                          "Z_PRIMARYKEY has no row for entity number \(root.entityNumber)")
        }
        let highest = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(store.qualified(root.tableName))") ?? 0
        let first = max(Int64.fromDatabaseValue(allocated) ?? 0, highest, 0).addingReportingOverflow(1)
        let last = first.partialValue.addingReportingOverflow(Int64(count) - 1)
        guard !first.overflow, !last.overflow, last.partialValue < Int64.max else {
            throw ObjectGraphError.damagedRow(store: store, root: root, primaryKey: nil,
                                          "no primary key is left to allocate (Z_PRIMARYKEY.Z_MAX)")
        }
        try db.execute(sql: "UPDATE \(table) SET Z_MAX = ? WHERE Z_ENT = ?",
                       arguments: [last.partialValue, root.entityNumber])
        return first.partialValue
    }
}
