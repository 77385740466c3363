import ArgumentParser
import Foundation
import ObjectGraph

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's type, UUID, entities with their row counts, and the model version it fits.")

    @OptionGroup var storeArgument: StoreArgument
    @Option(
        name: .long,
        help: ArgumentHelp("Also name the version of this .xcdatamodeld the store fits.", valueName: "model"),
        completion: .directory)
    var model: String?
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        try reportingErrors {
            try storeArgument.withPrivateCopy { copy in
                let summary = try StoreSummary(contentsOf: copy)
                var fitting: String?
                var cachedFit: String?
                if let model {
                    let versions = try ModelOption.versions(at: model)
                    if let version = try versions.sourceVersion(ofStoreAt: copy) {
                        fitting = version.versionIdentifier
                    } else if let cached = try versions.cachedModel(fittingStoreAt: copy) {
                        cachedFit = cached.versionIdentifier
                        fitting = "(none)"
                    } else {
                        fitting = "(none)"
                    }
                }
                json
                    ? say(try jsonText(infoJSON(summary, fitting: fitting, cachedFit: cachedFit)))
                    : printInfo(summary, fitting: fitting, cachedFit: cachedFit)
            }
        }
    }

    private func infoJSON(_ summary: StoreSummary, fitting: String?, cachedFit: String?) -> [String: Any] {
        var object: [String: Any] = [
            "store": storeArgument.store, "type": summary.storeType ?? NSNull(),
            "uuid": summary.identifier ?? NSNull(),
            "recordedVersions": summary.versionIdentifiers,
            "entities": summary.entities.map { entity -> [String: Any] in
                [
                    "name": entity.name, "number": entity.number, "parent": entity.parentName ?? NSNull(),
                    "rows": entity.rowCount ?? NSNull(),
                ]
            },
        ]
        if let fitting { object["modelVersion"] = fitting == "(none)" ? NSNull() : fitting }
        if let cachedFit { object["modelCacheVersion"] = cachedFit }
        return object
    }

    private func printInfo(_ summary: StoreSummary, fitting: String?, cachedFit: String?) {
        say("store: \(storeArgument.store)")
        say("type: \(summary.storeType ?? "(not recorded)")")
        say("uuid: \(summary.identifier ?? "(none)")")
        let recorded = summary.versionIdentifiers.filter { !$0.isEmpty }
        say("recorded versions: \(recorded.isEmpty ? "(none)" : recorded.joined(separator: ", "))")
        if let fitting { say("model version: \(fitting)") }
        if let cachedFit { say("model cache: fits (version '\(cachedFit)'); dump, check and migrate read it") }
        say("entities:")
        let width = summary.entities.map(\.name.count).max() ?? 0
        for entity in summary.entities {
            let name = entity.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let parent = entity.parentName.map { "  (sub-entity of \($0))" } ?? ""
            say("  \(name)  \(entity.rowCount.map(String.init) ?? "no table")\(parent)")
        }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print every object of a store with its attributes, and its relationships as primary keys.")

    @OptionGroup var modelOption: ModelOption
    @OptionGroup var storeArgument: StoreArgument
    @Option(
        name: .long,
        help: ArgumentHelp("Print only the objects of this entity (and its sub-entities).", valueName: "entity"))
    var entity: String?
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
    @Flag(name: .long, help: "Print dates as Core Data stores them: seconds since 2001-01-01 UTC.")
    var raw = false

    func run() throws {
        try reportingErrors {
            var problems: [String] = []
            try readingFittingStore(modelOption, storeArgument) { versions, model, coordinator in
                var entities = coordinator.persistentStores[0].entities.filter { !$0.isAbstract }
                if let entity {
                    guard let chosen = model.entity(named: entity) else {
                        throw ToolError(
                            .notFound, "the model '\(model.versionIdentifier)' has no entity '\(entity)'",
                            hint: "entities: " + model.entities.map(\.name).joined(separator: ", "))
                    }
                    entities = chosen.selfAndDescendants.filter { !$0.isAbstract }
                }
                StoredValueReader.registerRawTransformers(for: entities, in: coordinator)
                let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
                var objects: [[String: Any]] = []
                var unreadable: Set<String> = []
                for entity in entities {
                    for (primaryKey, read) in try Self.objects(of: entity, in: context) {
                        let object: ManagedObject
                        switch read {
                        case .success(let found): object = found
                        case .failure(let error):
                            let place = "\(entity.rootEntity.name) \(primaryKey)"
                            guard unreadable.insert(place).inserted else { continue }
                            let problem = (error as? ObjectGraphError)?.message ?? "\(error)"
                            problems.append(problem)
                            if json {
                                objects.append(["entity": entity.rootEntity.name, "primaryKey": primaryKey,
                                                "unreadable": problem])
                            } else {
                                say("\(place)\n  unreadable: \(problem)")
                            }
                            continue
                        }
                        let values = StoredValueReader.values(of: object, rawDates: raw, problems: &problems)
                        if json {
                            objects.append(["entity": entity.name, "primaryKey": primaryKey, "values": values])
                        } else {
                            say("\(entity.name) \(primaryKey)")
                            for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                                say("  \(key): \(StoredValueReader.text(value))")
                            }
                        }
                    }
                }
                if json { say(try jsonText(objects)) }
            }
            // Everything readable is printed first; then what was not, by exit status and on stderr.
            guard problems.isEmpty else {
                let what = problems.count == 1
                    ? "one value could not be read (a link to a missing row, or a cell that cannot be decoded)"
                    : "\(problems.count) values could not be read (links to missing rows, or cells that cannot be "
                        + "decoded)"
                throw ToolError(.invalidData, what, details: problems,
                                hint: "'objectgraph check' lists every problem of the store")
            }
        }
    }
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Migrate a store in place to the current version of its model.",
        discussion: """
            The store's version is found among the model's versions by what the store holds; the \
            migration from each version to the next is inferred (renames through the renaming \
            identifier, added and removed properties and entities, defaults for required \
            attributes) and all of it runs in one transaction: after a crash the store is the old \
            one or the new one. A change that cannot be inferred is refused before anything is \
            written, naming it. Where an Xcode mapping model (.xcmappingmodel) covers two versions, \
            it is followed instead. A migration that would drop values, objects or links runs \
            only with --allow-loss (a dry run says so).
            """)

    @OptionGroup var modelOption: ModelOption
    @OptionGroup var storeArgument: StoreArgument
    @Flag(name: .long, help: "Print the inferred steps and rehearse them on a copy, without changing the store.")
    var dryRun = false
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Record the version hashes this compiled model (.momd of the app) declares, so the app still "
                + "recognizes the store.", valueName: "momd"), completion: .directory)
    var compiledModel: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Migrate as this Xcode mapping model says (repeatable); those beside the model are found by "
                + "themselves.", valueName: "xcmappingmodel"), completion: .directory)
    var mappingModel: [String] = []
    @Flag(name: .long, help: "Migrate even when values, objects or links would be dropped (each is reported).")
    var allowLoss = false

    /// The mapping models given, and those in the folder of the model.
    func mappingModels() throws -> [MappingModel] {
        let folder = URL(fileURLWithPath: modelOption.model).deletingLastPathComponent()
        let beside = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
            .filter { $0.hasSuffix(".xcmappingmodel") }.sorted().map { folder.appendingPathComponent($0).path }
        return try (mappingModel + beside).map { path in
            guard FileManager.default.fileExists(atPath: path) else {
                throw ToolError(.notFound, "no mapping model at '\(path)'", hint: "give an .xcmappingmodel folder")
            }
            return try MappingModel(contentsOf: URL(fileURLWithPath: path))
        }
    }

    /// A coordinator for the migration, with the mapping models.
    func coordinator(_ versions: ModelVersions, _ mappings: [MappingModel], allowsLoss: Bool)
        -> PersistentStoreCoordinator
    {
        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        coordinator.mappingModels = mappings
        coordinator.allowsLossyMigration = allowsLoss
        return coordinator
    }

    func run() throws {
        try reportingErrors {
            let versions = try modelOption.versions()
            let mappings = try mappingModels()
            if let compiledModel {
                guard FileManager.default.fileExists(atPath: compiledModel) else {
                    throw ToolError(
                        .notFound, "no compiled model at '\(compiledModel)'",
                        hint: "give the .momd folder inside the app bundle")
                }
                try versions.adoptVersionHashes(ofCompiledModelAt: URL(fileURLWithPath: compiledModel))
            }
            // Planning and the rehearsal read a private copy: a store that needs nothing, or
            // only a dry run, is not touched, not even by SQLite's side files.
            let needed = try storeArgument.withPrivateCopy { copy -> Bool in
                let plans = try coordinator(versions, mappings, allowsLoss: true).migrationPlans(forStoreAt: copy)
                guard !plans.isEmpty else {
                    say("The store already fits '\(versions.current.versionIdentifier)'; nothing to migrate.")
                    return false
                }
                guard dryRun else { return true }
                for plan in plans {
                    say(
                        "\(plan.source.versionIdentifier) → \(plan.destination.versionIdentifier)"
                            + (plan.mappingModel.map { " (as the mapping model '\($0.name)' says)" } ?? "") + ":")
                    for change in plan.changes { say("  \(change)") }
                    if plan.changes.isEmpty { say("  (no change to the stored data)") }
                }
                // The rehearsal runs the checks that need the data, and counts.
                let rehearsal = coordinator(versions, mappings, allowsLoss: true)
                try migrate(copy, with: rehearsal)
                say("On a copy of the store, the migration would have:")
                let accounting = rehearsal.migrationReports.flatMap(\.accounting)
                for line in accounting.isEmpty ? ["nothing to carry over: the store is empty"] : accounting {
                    say("  \(line)")
                }
                if !allowLoss, rehearsal.migrationReports.contains(where: { !$0.dropped.isEmpty }) {
                    say("Migrating drops what is listed above: it needs --allow-loss.")
                }
                return false
            }
            guard needed else { return }
            let migrating = coordinator(versions, mappings, allowsLoss: allowLoss)
            try migrate(storeArgument.url, with: migrating)
            for report in migrating.migrationReports { say("\(report)") }
        }
    }
}

/// Adds the store at `url` to `coordinator`, migrating it, and closes it.
private func migrate(_ url: URL, with coordinator: PersistentStoreCoordinator) throws {
    var options = StoreOptions()
    options.mustExist = true
    options.migratesAutomatically = true
    options.infersMappingModel = true
    try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
    try coordinator.close()
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check that a store fits its model, that SQLite finds it sound, and that every value and link reads back.")

    @OptionGroup var modelOption: ModelOption
    @OptionGroup var storeArgument: StoreArgument

    func run() throws {
        try reportingErrors {
            try readingFittingStore(modelOption, storeArgument) { versions, model, coordinator in
                var problems = try coordinator.checkIntegrity().map(\.description)
                let entities = coordinator.persistentStores[0].entities.filter { !$0.isAbstract }
                let missing = StoredValueReader.registerRawTransformers(for: entities, in: coordinator)
                let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
                var count = 0
                for entity in entities {
                    var request = FetchRequest<ManagedObject>(entityName: entity.name)
                    request.includesSubentities = false
                    request.propertiesToFetch = []
                    do {
                        for object in try context.fetch(request) {
                            count += 1
                            do {
                                try context.decodeValues(of: object)
                                for relationship in entity.relationships { _ = object[relationship.name] }
                            } catch {
                                problems.append("\(entity.name) \(object.objectID.primaryKey ?? 0): \(error)")
                            }
                        }
                    } catch {
                        problems.append("\(entity.name): \(error)")
                    }
                }
                guard problems.isEmpty else {
                    throw ToolError(
                        .invalidData, "\(problems.count) problems in '\(storeArgument.store)':", details: problems)
                }
                say(
                    "ok: \(count) objects of model version '\(model.versionIdentifier)' read back"
                        + (missing.isEmpty
                            ? ""
                            : "; values of transformers \(missing.joined(separator: ", ")) "
                                + "not decoded (not available here)")
                )
                if model !== versions.current {
                    say(
                        "note: the current version is '\(versions.current.versionIdentifier)'; "
                            + "'objectgraph migrate' would bring the store to it"
                    )
                }
            }
        }
    }
}

extension Dump {
    /// The objects of exactly `entity`, by primary key: in one fetch, or, when a row cannot be
    /// read, row by row, so that it is reported in its place and the others still printed.
    static func objects(of entity: EntityDescription, in context: ManagedObjectContext) throws
        -> [(Int64, Result<ManagedObject, Error>)]
    {
        var request = FetchRequest<ManagedObject>(entityName: entity.name)
        request.includesSubentities = false
        if let fetched = try? context.fetch(request) {
            return fetched.compactMap { object in object.objectID.primaryKey.map { ($0, .success(object)) } }
                .sorted { $0.0 < $1.0 }
        }
        return try context.primaryKeys(forEntityName: entity.name).compactMap { primaryKey in
            do {
                guard let read = try context.existingObject(entityName: entity.name, primaryKey: primaryKey),
                      read.entity === entity else { return nil }
                return (primaryKey, .success(read))
            } catch {
                return (primaryKey, .failure(error))
            }
        }
    }
}

