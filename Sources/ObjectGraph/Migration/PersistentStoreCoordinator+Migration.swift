import Foundation
import GRDB

extension PersistentStoreCoordinator {
    /// Reads a store's metadata (`Z_METADATA`) without opening it, as Core Data's
    /// `metadataForPersistentStore(ofType:at:)`: for instance to read keys an application
    /// needs before it can add the store (a wrapped key for its transformers).
    ///
    /// - throws: ``ObjectGraphError`` 134080 when the file is not a SQLite database.
    public static func metadataForPersistentStore(at url: URL) throws -> [String: Any] {
        try StoreMetadataReader.reading(url) { db in try StoreMetadataReader.metadata(db, schema: "main") }
    }

    /// The migrations, one per pair of consecutive versions, that would bring the store at
    /// `url` to the current model; empty when it already fits. Nothing is written.
    ///
    /// - throws: ``ObjectGraphError`` 134190 when no version fits the store or a change
    ///   cannot be inferred, naming it.
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
            let recorded = metadata[StoreMetadataKey.versionHashes] as? [String: Data]
        {
            let names = Set(current.entities(forConfiguration: configuration).map(\.name))
            if recorded == current.entityVersionHashesByName.filter({ names.contains($0.key) }) { return [] }
        }
        guard
            let source = try modelVersions.sourceVersion(
                db, schema: schema, metadata: metadata, configuration: configuration)
        else {
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
        for version in path {
            plans.append(
                try MigrationPlan(from: from, to: version, configuration: configuration, steps: migrationSteps))
            from = version
        }
        return plans
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
        var report = MigrationReport(storeName: name)
        var metadata = store.metadata
        for plan in plans {
            report.hops.append(
                MigrationReport.Hop(
                    from: plan.source.versionIdentifier, to: plan.destination.versionIdentifier,
                    changes: plan.changes))
            // Counts describe the last hop: what the store holds once migrated.
            report.carried = [:]
            let migration = StoreMigration(
                plan: plan, db: db, schema: store.schemaName, storeIdentifier: store.identifier,
                transformers: valueTransformers, report: report)
            metadata = try migration.run(metadata: metadata)
            report = migration.report
        }
        store.metadata = metadata
        migrationReports.append(report)
    }
}
