import Foundation
import GRDB

/// Every version of an Xcode model (`.xcdatamodeld`), oldest first, and the current one.
///
/// Versions are ordered by name with numbers compared as numbers, Xcode's own naming
/// (`Model`, `Model 2`, ..., `Model 10`); migration walks this order from a store's version
/// to the current one.
///
/// For example:
///
/// ```swift
/// let versions = try ModelVersions(contentsOf: URL(fileURLWithPath: "Model.xcdatamodeld"))
/// let coordinator = PersistentStoreCoordinator(modelVersions: versions)
/// var options = StoreOptions()
/// options.migratesAutomatically = true
/// options.infersMappingModel = true
/// try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
/// ```
public final class ModelVersions {
    /// Every version, oldest first.
    public var versions: [ManagedObjectModel] {
        do {
            return try allVersions()
        } catch {
            preconditionFailure("the model's older versions do not load: \(error)")
        }
    }
    /// The version `.xccurrentversion` names (the only one when there is one).
    public let current: ManagedObjectModel
    private let lock = NSLock()
    private var loaded: [ManagedObjectModel]?
    /// Parses the older versions, when they are left until a store needs them.
    private var loadOthers: (() throws -> [ManagedObjectModel])?

    /// Versions built in code; `current` must be one of `versions` or is added as the newest.
    public init(versions: [ManagedObjectModel], current: ManagedObjectModel) {
        let others = versions.filter { $0 !== current }
        self.loaded = Self.ordered(others + [current])
        self.current = current
    }

    private init(current: ManagedObjectModel, loadingOthers: @escaping () throws -> [ManagedObjectModel]) {
        self.current = current
        self.loadOthers = loadingOthers
    }

    /// Every version, oldest first, the older ones parsed now if they were left until needed.
    ///
    /// - throws: ``ModelError`` naming the version file at fault.
    func allVersions() throws -> [ManagedObjectModel] {
        try lock.withLock {
            if let loaded { return loaded }
            let models = Self.ordered(try loadOthers?() ?? [current])
            loaded = models
            loadOthers = nil
            return models
        }
    }

    /// Loads every `.xcdatamodel` inside an `.xcdatamodeld` folder, or every `.mom` of a
    /// compiled `.momd` (see ``init(compiledModelAt:)``).
    ///
    /// - throws: ``ModelError`` naming the version file at fault.
    public convenience init(contentsOf url: URL) throws {
        if url.pathExtension == "momd" {
            try self.init(compiledModelAt: url)
            return
        }
        var files: [String: Data] = [:]
        // What cannot be listed or read is absent, and the checks below name what is missing.
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        for name in names where name.hasSuffix(".xcdatamodel") {
            let path = "\(name)/contents"
            if let data = try? Data(contentsOf: url.appendingPathComponent(path)) { files[path] = data }
        }
        if let data = try? Data(contentsOf: url.appendingPathComponent(".xccurrentversion")) {
            files[".xccurrentversion"] = data
        }
        guard !files.isEmpty else {
            throw ModelError(
                file: url.lastPathComponent,
                reason: "no .xcdatamodel version inside (is this an .xcdatamodeld folder?)")
        }
        try self.init(xcdatamodeldFiles: files, modelName: url.lastPathComponent)
    }

    /// Loads every version of an `.xcdatamodeld` whose files are given in memory, keyed by
    /// their path inside the folder (`"Model 2.xcdatamodel/contents"`, `".xccurrentversion"`).
    /// A `contents` may be Xcode's XML or its compiled form (`XMLTreeElement.compiled()` of the
    /// XMLReading module), which reads without loading an XML parser: what a program that opens
    /// its stores at every start embeds, as `mystash` does.
    ///
    /// With `parsingOlderVersionsWhenNeeded`, only the current version is parsed now, the others
    /// when a store of an older version is opened (or ``versions`` is read): a program that
    /// opens stores of the current version, as most openings are, never parses them. Errors in
    /// an older version are then thrown by that opening. `deferringPatternChecks` is given to each
    /// version's model (see ``ManagedObjectModel``'s `init(entities:…)`).
    public convenience init(
        xcdatamodeldFiles files: [String: Data], modelName: String, parsingOlderVersionsWhenNeeded: Bool = false,
        deferringPatternChecks: Bool = false
    ) throws {
        var models: [ManagedObjectModel] = []
        let folders = Set(
            files.keys.compactMap { path -> String? in
                let folder = path.split(separator: "/").first.map(String.init)
                return folder?.hasSuffix(".xcdatamodel") == true ? folder : nil
            })
        func parse(_ folder: String) throws -> ManagedObjectModel {
            let fileName = "\(modelName)/\(folder)/contents"
            guard let xml = files["\(folder)/contents"] else {
                throw ModelError(file: fileName, reason: "file not found")
            }
            let parsed = try ModelXMLParser.parse(xml, file: fileName)
            let identifier = String(folder.dropLast(".xcdatamodel".count))
            return try ManagedObjectModel(
                entities: parsed.entities, configurations: parsed.configurations,
                versionIdentifier: identifier, file: fileName, deferringPatternChecks: deferringPatternChecks)
        }
        if parsingOlderVersionsWhenNeeded, let plistData = files[".xccurrentversion"],
           let plist = try? BinaryPropertyList.foundationPropertyList(from: plistData) as? [String: Any],
           let name = plist["_XCCurrentVersionName"] as? String {
            let folder = name.hasSuffix(".xcdatamodel") ? name : name + ".xcdatamodel"
            if folders.contains(folder) {
                let current = try parse(folder)
                self.init(current: current) {
                    try folders.sorted().filter { $0 != folder }.map(parse) + [current]
                }
                return
            }
        }
        for folder in folders.sorted() { models.append(try parse(folder)) }
        guard !models.isEmpty else { throw ModelError(file: modelName, reason: "no .xcdatamodel version inside") }
        var current = models.count == 1 ? models[0] : nil
        if let plistData = files[".xccurrentversion"] {
            let plist = try? BinaryPropertyList.foundationPropertyList(from: plistData) as? [String: Any]
            guard let name = plist?["_XCCurrentVersionName"] as? String else {
                throw ModelError(file: "\(modelName)/.xccurrentversion", reason: "no _XCCurrentVersionName key")
            }
            let identifier = name.hasSuffix(".xcdatamodel") ? String(name.dropLast(".xcdatamodel".count)) : name
            guard let named = models.first(where: { $0.versionIdentifier == identifier }) else {
                throw ModelError(
                    file: "\(modelName)/.xccurrentversion", reason: "names '\(name)', which is not in the folder")
            }
            current = named
        }
        guard let current else {
            throw ModelError(file: modelName, reason: "several versions and no .xccurrentversion to choose one")
        }
        self.init(versions: models, current: current)
    }

    /// The version named `identifier`, if any.
    public func version(named identifier: String) -> ManagedObjectModel? {
        versions.first { $0.versionIdentifier == identifier }
    }

    /// The versions from `source` (excluded) up to the current one (included), in order.
    func path(from source: ManagedObjectModel) -> [ManagedObjectModel] {
        guard let start = versions.firstIndex(where: { $0 === source }),
            let end = versions.firstIndex(where: { $0 === current }), start < end
        else { return [] }
        return Array(versions[(start + 1)...end])
    }

    private static func ordered(_ models: [ManagedObjectModel]) -> [ManagedObjectModel] {
        models.sorted {
            $0.versionIdentifier.compare($1.versionIdentifier, options: [.numeric, .caseInsensitive])
                == .orderedAscending
        }
    }

    // MARK: - Finding a store's version

    /// The version a store was made with, found by what the store holds (never by Apple's
    /// version hashes): for a store ObjectGraph wrote, the recorded persisted shape of each
    /// entity; for any other store, its tables and columns (see ``StoreShape``). Among several
    /// versions that fit, the one the store's metadata names wins.
    ///
    /// - returns: nil when no version fits.
    /// - throws: ``ObjectGraphError`` 134100 when several fit and the metadata names none.
    /// - note: reading a store in WAL mode makes SQLite create its `-wal` and `-shm` files beside it.
    public func sourceVersion(ofStoreAt url: URL, configuration: String? = nil) throws -> ManagedObjectModel? {
        try StoreMetadataReader.reading(url) { db in
            let metadata = try StoreMetadataReader.metadata(db, schema: "main")
            return try sourceVersion(db, schema: "main", metadata: metadata, configuration: configuration)
        }
    }

    func sourceVersion(
        _ db: Database, schema: String, metadata: [String: Any],
        configuration: String?
    ) throws -> ManagedObjectModel? {
        let recordedNames = Set(metadata[StoreMetadataKey.versionIdentifiers] as? [String] ?? [])
        let fitting: [ManagedObjectModel]
        if let recorded = metadata[StoreMetadataKey.entityShapes] as? [String: [String: String]] {
            fitting = try allVersions().filter { model in
                let names = Set(model.entities(forConfiguration: configuration).map(\.name))
                return model.entityShapes.filter { names.contains($0.key) } == recorded
            }
        } else {
            let shape = try StoreShape(db, schema: schema)
            fitting = try allVersions().filter { shape.differences(from: $0, configuration: configuration).isEmpty }
        }
        return try StoreShape.versionThatMade(among: fitting, recorded: recordedNames)
    }
}

/// Reads `Z_METADATA` without opening the store through a coordinator.
enum StoreMetadataReader {
    /// Runs `body` in a read transaction of a read-only connection to the store at `url`.
    static func reading<T>(_ url: URL, _ body: (Database) throws -> T) throws -> T {
        var readOnly = Configuration()
        readOnly.readonly = true
        return try wrapStoreErrors(.storeOpenFailed, "cannot read '\(url.lastPathComponent)'") {
            let queue = try DatabaseQueue(path: url.path, configuration: readOnly)
            defer { try? queue.close() }
            return try queue.read(body)
        }
    }

    static func metadata(_ db: Database, schema: String) throws -> [String: Any] {
        let quoted = "\"\(schema)\""
        let hasTable =
            try Bool.fetchOne(db, sql: "SELECT COUNT(*) > 0 FROM \(quoted).sqlite_master WHERE name = 'Z_METADATA'")
            ?? false
        // No readable metadata means no recorded versions: no model then fits, which is reported.
        guard hasTable, let plist = try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM \(quoted).Z_METADATA"),
            let metadata = BinaryPropertyList.metadata(from: plist)
        else {
            return [:]
        }
        return metadata
    }
}
