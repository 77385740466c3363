import ArgumentParser
import Foundation
import ObjectGraph

#if canImport(Glibc)
    import Glibc
#endif

@main
struct ObjectGraphTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "objectgraph",
        abstract: "Read, check and migrate SQLite stores of Core Data and ObjectGraph.",
        discussion: """
            Works on a store file (.sqlite) written by Apple's Core Data or by ObjectGraph, with \
            the Xcode model that describes it (.xcdatamodeld, every version, or one .xcdatamodel). \
            info, dump and check read a private copy of the store and never write to it; migrate \
            changes the store in place, in one transaction.

            Exit status: 0 ok, 1 unexpected, 64 usage, 65 invalid data (the store does not fit \
            the model, cannot be migrated, or check found problems; nothing was changed), \
            66 not found, 73 cannot create a working copy, 75 busy (retry). See objectgraph(1).
            """,
        version: "1.0.0",
        subcommands: [Info.self, Dump.self, Migrate.self, Check.self]
    )
}

/// The store argument every command takes.
struct StoreArgument: ParsableArguments {
    @Argument(help: ArgumentHelp("The store file (SQLite).", valueName: "store"), completion: .file())
    var store: String

    var url: URL { URL(fileURLWithPath: store) }
}

/// The model option.
struct ModelOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Read the model from this .xcdatamodeld (or .xcdatamodel, or compiled .momd) folder.",
            valueName: "model"), completion: .directory)
    var model: String

    /// Every version of the model (one when a single .xcdatamodel is given).
    func versions() throws -> ModelVersions { try Self.versions(at: model) }

    static func versions(at model: String) throws -> ModelVersions {
        let url = URL(fileURLWithPath: model)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ToolError(
                .notFound, "no model folder at '\(model)'", hint: "give the .xcdatamodeld folder of the app")
        }
        if url.pathExtension == "xcdatamodel" {
            let single = try ManagedObjectModel(contentsOf: url)
            return ModelVersions(versions: [], current: single)
        }
        return try ModelVersions(contentsOf: url)
    }
}

/// A failure the tool reports with its exit code.
struct ToolError: Error {
    enum Kind: Int32 {
        case invalidData = 65, notFound = 66, cannotCreate = 73, busy = 75
    }

    var kind: Kind
    var message: String
    var details: [String] = []
    var hint: String?

    init(_ kind: Kind, _ message: String, details: [String] = [], hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.details = details
        self.hint = hint
    }

    /// The library's errors, with the exit code and the next step they call for.
    init(_ error: Error) {
        switch error {
        case let error as ToolError:
            self = error
        case let error as ModelError:
            self.init(.invalidData, "\(error)", hint: "fix the model file named above")
        case let error as ObjectGraphError where error.storeFailure == .busy:
            self.init(.busy, error.message, hint: "another process is using the store; try again when it is done")
        case let error as ObjectGraphError:
            switch error.code {
            case .incompatibleVersionHash:
                self.init(
                    .invalidData, error.message,
                    hint: "give the model the store was made with, or run 'objectgraph migrate'")
            case .migrationCannotBeInferred, .migrationFailed:
                self.init(.invalidData, error.message, hint: "the store was left as it was")
            case .migrationWouldLoseData:
                self.init(
                    .invalidData, error.message,
                    hint: "the store was left as it was; run again with --allow-loss to migrate anyway")
            default:
                self.init(.invalidData, error.message)
            }
        default:
            self.init(.invalidData, "\(error)")
        }
    }
}

/// Runs a command body, printing a failure as `Error: ...` and `hint: ...` on stderr and
/// exiting with its code.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch let error as CleanExit {
        throw error
    } catch {
        let failure = ToolError(error)
        var lines = ["Error: \(failure.message)"] + failure.details.map { "  \($0)" }
        if let hint = failure.hint { lines.append("hint: \(hint)") }
        writeError(lines.joined(separator: "\n") + "\n")
        throw ExitCode(failure.kind.rawValue)
    }
}

extension StoreArgument {
    /// Fails with "not found" unless the store file exists.
    func requireStore() throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
        else {
            throw ToolError(.notFound, "no store file at '\(store)'")
        }
    }

    /// Runs `body` on a private copy of the store (with its WAL), so reading never changes
    /// the original, not even by SQLite's side files or a checkpoint.
    func withPrivateCopy<T>(_ body: (URL) throws -> T) throws -> T {
        try requireStore()
        let fileManager = FileManager.default
        let folder = fileManager.temporaryDirectory.appendingPathComponent("objectgraph-\(UUID().uuidString)")
        do {
            try fileManager.createDirectory(
                at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for suffix in ["", "-wal"] where fileManager.fileExists(atPath: url.path + suffix) {
                try fileManager.copyItem(
                    atPath: url.path + suffix,
                    toPath: folder.appendingPathComponent(url.lastPathComponent + suffix).path)
            }
        } catch {
            try? fileManager.removeItem(at: folder)
            throw ToolError(
                .cannotCreate,
                "cannot make a working copy of '\(store)' in \(fileManager.temporaryDirectory.path): "
                    + "\(error.localizedDescription)", hint: "set TMPDIR to a writable folder with room for the store")
        }
        defer { try? fileManager.removeItem(at: folder) }
        return try body(folder.appendingPathComponent(url.lastPathComponent))
    }
}

/// Opens `url` with the version of `versions` the store fits; the coordinator can read every value.
func openFitting(
    _ url: URL, versions: ModelVersions, name: String
) throws -> (ManagedObjectModel, PersistentStoreCoordinator) {
    guard let version = try versions.sourceVersion(ofStoreAt: url) else {
        // Named against the version it comes closest to, which is the likeliest to have made it.
        let shape = try StoreShape(contentsOf: url)
        let (closest, differences) = versions.versions.reversed()
            .map { ($0, shape.differences(from: $0).map(\.description)) }
            .min { $0.1.count < $1.1.count } ?? (versions.current, [])
        throw ToolError(
            .invalidData,
            "the store '\(name)' fits none of the model's versions ("
                + versions.versions.map { "'\($0.versionIdentifier)'" }.joined(separator: ", ")
                + "); against the closest, '\(closest.versionIdentifier)':", details: differences,
            hint: "give the model the store was made with")
    }
    let coordinator = PersistentStoreCoordinator(managedObjectModel: version)
    var options = StoreOptions()
    options.mustExist = true
    try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
    return (version, coordinator)
}

/// Opens `url` as ``openFitting(_:versions:name:)`` does, or, when no version fits, with the
/// model the store keeps (Core Data's `Z_MODELCACHE`) if that fits, saying so on stderr.
func openFittingOrCached(
    _ url: URL, versions: ModelVersions, name: String
) throws -> (ManagedObjectModel, PersistentStoreCoordinator) {
    guard try versions.sourceVersion(ofStoreAt: url) == nil, let cached = try versions.cachedModel(fittingStoreAt: url)
    else {
        return try openFitting(url, versions: versions, name: name)
    }
    note(
        "the store '\(name)' fits none of the model's versions; it is read with the model it keeps "
            + "(Z_MODELCACHE, version '\(cached.versionIdentifier)')")
    let coordinator = PersistentStoreCoordinator(managedObjectModel: cached)
    var options = StoreOptions()
    options.mustExist = true
    try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
    return (cached, coordinator)
}

/// Runs `body` on a private copy of the store, opened with the version of the model it fits.
func readingFittingStore(
    _ modelOption: ModelOption, _ storeArgument: StoreArgument,
    _ body: (ModelVersions, ManagedObjectModel, PersistentStoreCoordinator) throws -> Void
) throws {
    let versions = try modelOption.versions()
    try storeArgument.withPrivateCopy { copy in
        let (model, coordinator) = try openFittingOrCached(copy, versions: versions, name: storeArgument.store)
        defer { try? coordinator.close() }
        try body(versions, model, coordinator)
    }
}

/// Writes a note to standard error, out of the way of the data on standard output.
func note(_ text: String) {
    writeError("note: " + text + "\n")
}

/// Writes to standard error: when nothing reads it any more the text is dropped, where
/// Foundation's `FileHandle` would stop the process.
func writeError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

/// Writes a line to standard output.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// JSON text of a value made of dictionaries, arrays, strings, numbers, booleans and nulls.
func jsonText(_ value: Any) throws -> String {
    let data = try JSONSerialization.data(
        withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    return String(decoding: data, as: UTF8.self)
}
