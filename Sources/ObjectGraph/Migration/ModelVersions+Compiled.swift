import Foundation

/// What a compiled model's `VersionInfo.plist` declares: the current version's name, and for
/// each version (a `.mom` file's name) Apple's version hash of each entity.
struct CompiledModelInfo {
    static let fileName = "VersionInfo.plist"
    let currentVersion: String
    let hashes: [String: [String: Data]]

    init(momd url: URL) throws {
        let file = "\(url.lastPathComponent)/\(Self.fileName)"
        guard let data = try? Data(contentsOf: url.appendingPathComponent(Self.fileName)) else {
            throw ModelError(file: file, reason: "file not found (is this a compiled .momd folder?)")
        }
        let plist = try? BinaryPropertyList.foundationPropertyList(from: data) as? [String: Any]
        guard let current = plist?["NSManagedObjectModel_CurrentVersionName"] as? String,
            let versions = plist?["NSManagedObjectModel_VersionHashes"] as? [String: Any]
        else {
            throw ModelError(
                file: file,
                reason: "no NSManagedObjectModel_CurrentVersionName or NSManagedObjectModel_VersionHashes key")
        }
        var hashes: [String: [String: Data]] = [:]
        for (version, entities) in versions {
            guard let entities = entities as? [String: Any],
                case let typed = entities.compactMapValues({ $0 as? Data }), typed.count == entities.count
            else {
                throw ModelError(file: file, reason: "the version hashes of '\(version)' are not entity → data")
            }
            hashes[version] = typed
        }
        currentVersion = current
        self.hashes = hashes
    }
}

extension ModelVersions {
    /// Loads every version of a compiled model: a `.momd` folder as Xcode builds it into an app,
    /// with one `.mom` file per version and a `VersionInfo.plist` naming the current version and
    /// Apple's version hashes. Each version keeps those hashes
    /// (``ManagedObjectModel/compiledVersionHashes``), so a store migrated or created with it
    /// records what Apple's Core Data expects of that version.
    ///
    /// - throws: ``ModelError`` naming the file at fault.
    public convenience init(compiledModelAt url: URL) throws {
        let info = try CompiledModelInfo(momd: url)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        var models: [ManagedObjectModel] = []
        for name in names.sorted() where name.hasSuffix(".mom") {
            let file = "\(url.lastPathComponent)/\(name)"
            guard let data = try? Data(contentsOf: url.appendingPathComponent(name)) else {
                throw ModelError(file: file, reason: "cannot be read")
            }
            let identifier = String(name.dropLast(".mom".count))
            let model = try ManagedObjectModel(keyedArchive: data, versionIdentifier: identifier, file: file)
            model.compiledVersionHashes = info.hashes[identifier]
            model.compiledArchive = data
            models.append(model)
        }
        guard let current = models.first(where: { $0.versionIdentifier == info.currentVersion }) else {
            throw ModelError(
                file: "\(url.lastPathComponent)/\(CompiledModelInfo.fileName)",
                reason: "names the current version '\(info.currentVersion)', which has no .mom file beside it")
        }
        self.init(versions: models, current: current)
    }

    /// Takes the version hashes a compiled model (`.momd`) declares for the versions it shares
    /// with these (same names), for models loaded from an `.xcdatamodeld`: stores then record
    /// Apple's hashes, as the app built from that `.momd` expects.
    ///
    /// - throws: ``ModelError`` when a version's `.mom` has another persisted shape than the
    ///   version of the same name here (the hashes would then describe another model), or when
    ///   the `.momd` declares none of these versions.
    public func adoptVersionHashes(ofCompiledModelAt url: URL) throws {
        let compiled = try ModelVersions(compiledModelAt: url)
        var adopted = 0
        for model in versions {
            guard let twin = compiled.version(named: model.versionIdentifier),
                let hashes = twin.compiledVersionHashes
            else { continue }
            guard twin.entityShapes == model.entityShapes else {
                throw ModelError(
                    file: "\(url.lastPathComponent)/\(model.versionIdentifier).mom",
                    reason: "version '\(model.versionIdentifier)' differs from the model's version of that name")
            }
            model.compiledVersionHashes = hashes
            model.compiledArchive = twin.compiledArchive
            adopted += 1
        }
        guard adopted > 0 else {
            throw ModelError(
                file: url.lastPathComponent,
                reason: "declares none of the versions "
                    + versions.map { "'\($0.versionIdentifier)'" }.joined(separator: ", "))
        }
    }
}
