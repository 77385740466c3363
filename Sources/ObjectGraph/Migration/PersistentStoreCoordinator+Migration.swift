import Foundation
import GRDB

extension PersistentStoreCoordinator {
    /// Reads a store's metadata (`Z_METADATA`) without opening it, as Core Data's
    /// `metadataForPersistentStore(ofType:at:)`: for instance to read keys an application
    /// needs before it can add the store (a wrapped key for its transformers).
    ///
    /// - throws: ``ObjectGraphError`` 134080 when the file is not a SQLite database.
    /// - note: reading a store in WAL mode makes SQLite create its `-wal` and `-shm` files beside it.
    public static func metadataForPersistentStore(at url: URL) throws -> [String: Any] {
        try StoreMetadataReader.reading(url) { db in try StoreMetadataReader.metadata(db, schema: "main") }
    }

    /// The migrations, one per pair of consecutive versions, that would bring the store at
    /// `url` to the current model; empty when it already fits. Nothing is written.
    ///
    /// When no version fits but the store keeps its model (Core Data's `Z_MODELCACHE`) and that
    /// model fits the store, the one migration goes from that model to the current version.
    ///
    /// - throws: ``ObjectGraphError`` 134190 when no version fits the store or a change
    ///   cannot be inferred, naming it.
    /// - note: reading a store in WAL mode makes SQLite create its `-wal` and `-shm` files beside it.
    public func migrationPlans(forStoreAt url: URL, configuration: String? = nil) throws -> [MigrationPlan] {
        try StoreMetadataReader.reading(url) { db in
            let metadata = try StoreMetadataReader.metadata(db, schema: "main")
            return try migrationPlans(
                db, schema: "main", metadata: metadata, configuration: configuration,
                name: url.lastPathComponent)
        }
    }

    func migrationPlans(
        _ db: Database, schema: String, metadata: [String: Any], configuration: String?,
        name: String
    ) throws -> [MigrationPlan] {
        let current = modelVersions.current
        let recordedIdentifiers = metadata[StoreMetadataKey.versionIdentifiers] as? [String] ?? []
        if recordedIdentifiers.contains(current.versionIdentifier),
            let recorded = metadata[StoreMetadataKey.entityShapes] as? [String: [String: String]]
        {
            let names = Set(current.entities(forConfiguration: configuration).map(\.name))
            if recorded == current.entityShapes.filter({ names.contains($0.key) }) { return [] }
        }
        guard
            let source = try modelVersions.sourceVersion(
                db, schema: schema, metadata: metadata, configuration: configuration)
        else {
            // A version the bundle lacks: the model the store keeps, straight to the current one.
            if let cached = try modelVersions.cachedModel(
                db, schema: schema, storeName: name, configuration: configuration)
            {
                return [
                    try MigrationPlan(from: cached, to: current, configuration: configuration, steps: migrationSteps)
                ]
            }
            let known = modelVersions.versions.map { "'\($0.versionIdentifier)'" }.joined(separator: ", ")
            throw ObjectGraphError(
                code: .migrationCannotBeInferred,
                message: "the store '\(name)' fits none of the model's versions (\(known)), so it cannot be migrated")
        }
        guard source !== current else { return [] }
        let path = modelVersions.path(from: source)
        guard !path.isEmpty else {
            throw ObjectGraphError(
                code: .migrationCannotBeInferred,
                message:
                    "the store '\(name)' was made with model version '\(source.versionIdentifier)', "
                    + "which is newer than "
                    + "the current '\(current.versionIdentifier)'; migrations only go forward")
        }
        var plans: [MigrationPlan] = []
        var from = source
        var remaining = path[...]
        while !remaining.isEmpty {
            // A mapping model from this version goes as far as it says; else one inferred step.
            let stated = remaining.indices.reversed().lazy.compactMap { index in
                self.mappingModel(from: from, to: remaining[index]).map { (index, $0) }
            }.first
            let index = stated?.0 ?? remaining.startIndex
            plans.append(
                try MigrationPlan(
                    from: from, to: remaining[index], configuration: configuration, steps: migrationSteps,
                    mappingModel: stated?.1))
            from = remaining[index]
            remaining = remaining[(index + 1)...]
        }
        return plans
    }

    /// The mapping model from `source` to `destination`, if one was given.
    private func mappingModel(from source: ManagedObjectModel, to destination: ManagedObjectModel) -> MappingModel? {
        mappingModels.first {
            $0.sourceVersion == source.versionIdentifier && $0.destinationVersion == destination.versionIdentifier
        }
    }

    /// Migrates several stores of this model in one transaction, before they are added: after
    /// a crash, or when any of them cannot be migrated, every store is as it was; otherwise
    /// every store is migrated. Use it for stores that belong together (MyStash's two stores),
    /// where adding them one by one would migrate each in a transaction of its own.
    ///
    /// Every store must be in rollback-journal mode for the commit to be atomic across files
    /// (SQLite's super-journal); in WAL mode each file commits on its own.
    ///
    /// - returns: what each migrated store went through (stores that already fit are left out).
    /// - throws: ``ObjectGraphError`` 134190 before anything is written when a migration
    ///   cannot be inferred, 134110 when a value cannot be carried over (nothing is changed),
    ///   134080 when a store does not exist or is not a store.
    @discardableResult
    public func migrateStores(_ stores: [(configuration: String?, url: URL)]) throws -> [MigrationReport] {
        guard let first = stores.first else { return [] }
        for store in stores where !FileManager.default.fileExists(atPath: store.url.path) {
            throw ObjectGraphError.missingStore(store.url.path)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in SQLFunctions.register(in: db) }
        return try wrapStoreErrors(.storeOpenFailed, "cannot migrate '\(first.url.lastPathComponent)'") {
            let queue = try DatabaseQueue(path: first.url.path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.inDatabase { db in
                let schemas = stores.indices.map { $0 == 0 ? "main" : "migrating\($0)" }
                for (index, store) in stores.enumerated().dropFirst() {
                    try db.execute(sql: "ATTACH DATABASE ? AS \(schemas[index])", arguments: [store.url.path])
                }
                var reports: [MigrationReport] = []
                try db.inTransaction(.immediate) {
                    // Every store's plans first: a refusal comes before anything is written.
                    var work:
                        [(
                            schema: String, name: String, identifier: String, metadata: [String: Any],
                            plans: [MigrationPlan]
                        )] = []
                    for (index, store) in stores.enumerated() {
                        let name = store.url.lastPathComponent
                        let metadata = try StoreMetadataReader.metadata(db, schema: schemas[index])
                        guard !metadata.isEmpty,
                            let identifier = try String.fetchOne(
                                db, sql: "SELECT Z_UUID FROM \"\(schemas[index])\".Z_METADATA")
                        else {
                            throw ObjectGraphError(
                                code: .storeOpenFailed, message: "'\(name)' is not a store (no Z_METADATA)")
                        }
                        let plans = try migrationPlans(
                            db, schema: schemas[index], metadata: metadata,
                            configuration: store.configuration, name: name)
                        work.append((schemas[index], name, identifier, metadata, plans))
                    }
                    for store in work where !store.plans.isEmpty {
                        reports.append(
                            try run(
                                store.plans, db: db, schema: store.schema, name: store.name,
                                identifier: store.identifier, metadata: store.metadata
                            ).report)
                    }
                    return .commit
                }
                migrationReports += reports
                return reports
            }
        }
    }

    /// Runs `plans` one after the other on the store attached as `schema`.
    private func run(
        _ plans: [MigrationPlan], db: Database, schema: String, name: String, identifier: String,
        metadata: [String: Any]
    ) throws -> (report: MigrationReport, metadata: [String: Any]) {
        var report = MigrationReport(storeName: name)
        var metadata = metadata
        for plan in plans {
            report.hops.append(
                MigrationReport.Hop(
                    from: plan.source.versionIdentifier, to: plan.destination.versionIdentifier,
                    changes: plan.changes))
            // Counts describe the last hop: what the store holds once migrated.
            report.carried = [:]
            let migration = StoreMigration(
                plan: plan, db: db, schema: schema, storeIdentifier: identifier,
                transformers: valueTransformers, report: report)
            metadata = try migration.run(metadata: metadata, allowsLoss: allowsLossyMigration)
            report = migration.report
        }
        return (report, metadata)
    }

    /// Runs every migration the store needs, inside the transaction adding it.
    func migrateIfNeeded(_ store: PersistentStore, name: String, options: StoreOptions, db: Database) throws {
        guard store.type == .sqlite else { return }
        let plans = try migrationPlans(
            db, schema: store.schemaName, metadata: store.metadata,
            configuration: store.configurationName, name: name)
        guard !plans.isEmpty else { return }
        guard options.infersMappingModel else {
            throw ObjectGraphError(
                code: .migrationCannotBeInferred,
                message:
                    "the store '\(name)' needs a migration from model '\(plans[0].source.versionIdentifier)', "
                    + "but inferring it was not allowed (infersMappingModel)")
        }
        let (report, metadata) = try run(
            plans, db: db, schema: store.schemaName, name: name,
            identifier: store.identifier, metadata: store.metadata)
        store.metadata = metadata
        migrationReports.append(report)
    }
}
