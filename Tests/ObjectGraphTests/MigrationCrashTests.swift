import Foundation
import XCTest
@testable import ObjectGraph

/// The models of the crash trials: version 2 renames an entity and a transformed attribute
/// (so values are re-encoded), adds a required attribute with a default, drops one, moves
/// two entities under a new parent and turns a to-one into a many-to-many.
enum CrashTrialModels {
    static func version1() throws -> ManagedObjectModel {
        try ManagedObjectModel(
            entities: [
                EntityDescription(
                    name: "Folder", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "cards", destination: "Card", inverse: "folder",
                            isToMany: true)
                    ]),
                EntityDescription(
                    name: "Card",
                    attributes: [
                        AttributeDescription(name: "title", type: .string),
                        AttributeDescription(
                            name: "secret", type: .transformable, valueTransformerName: PlaceBoundTransformer.name),
                        AttributeDescription(name: "legacy", type: .string),
                    ],
                    relationships: [RelationshipDescription(name: "folder", destination: "Folder", inverse: "cards")]),
                EntityDescription(
                    name: "Memo",
                    attributes: [
                        AttributeDescription(name: "title", type: .string),
                        AttributeDescription(name: "text", type: .string),
                    ]),
            ], versionIdentifier: "V1")
    }

    static func version2() throws -> ManagedObjectModel {
        try ManagedObjectModel(
            entities: [
                EntityDescription(
                    name: "Folder", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "cards", destination: "Login", inverse: "folders",
                            isToMany: true)
                    ]),
                EntityDescription(
                    name: "Item", isAbstract: true, attributes: [AttributeDescription(name: "title", type: .string)]),
                EntityDescription(
                    name: "Login", parent: "Item",
                    attributes: [
                        AttributeDescription(
                            name: "password", type: .transformable, valueTransformerName: PlaceBoundTransformer.name,
                            elementID: "secret"),
                        AttributeDescription(
                            name: "favourite", type: .boolean, isOptional: false, defaultValueString: "NO"),
                    ],
                    relationships: [
                        RelationshipDescription(
                            name: "folders", destination: "Folder", inverse: "cards",
                            isToMany: true, elementID: "folder")
                    ],
                    elementID: "Card"),
                EntityDescription(
                    name: "Memo", parent: "Item", attributes: [AttributeDescription(name: "text", type: .string)]),
            ], versionIdentifier: "V2")
    }

    static var versions: ModelVersions {
        get throws { ModelVersions(versions: [try version1()], current: try version2()) }
    }
}

/// What a crash trial's child migrates.
enum CrashTrialMode: String {
    /// One store of ``CrashTrialModels`` version 1 to version 2.
    case oneStore
    /// A wibosco store through the example's versions, with its custom step.
    case wibosco
    /// ``TwoStoreModels``' two stores in one transaction (`migrateStores`).
    case twoStores
}

/// The process a crash trial kills: it migrates the stores named by the environment.
final class MigrationChildEntry: MigrationTestCase {
    override func tearDownWithError() throws {}

    func testMigrationChildEntryPoint() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let paths = environment["OG_MIGRATE_STORES"],
            let mode = environment["OG_MIGRATE_MODE"].flatMap(CrashTrialMode.init)
        else {
            throw XCTSkip("helper for the migration crash trials; runs only as their child process")
        }
        let urls = paths.split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        directory = urls[0].deletingLastPathComponent()
        switch mode {
        case .oneStore:
            try openMigrating(urls[0], try CrashTrialModels.versions).0.close()
        case .wibosco:
            try openMigrating(
                urls[0], try MigrationTests.wiboscoVersions(), steps: [MigrationTests.sectionsFromContent]
            ).0.close()
        case .twoStores:
            let coordinator = PersistentStoreCoordinator(modelVersions: try TwoStoreModels.versions)
            coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
            try coordinator.migrateStores([("Notes", urls[0]), ("Passwords", urls[1])])
        }
        FileHandle.standardOutput.write(Data("MIGRATED\n".utf8))
    }
}

final class MigrationCrashTests: MigrationTestCase {
    /// Every table but `Z_METADATA` (its property list's key order varies) of every store,
    /// as `sqlite3 .dump` prints it.
    func dump(_ urls: [URL]) throws -> [String] {
        try urls.flatMap { url in
            let tables = try sqlite3(
                url, "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'Z_METADATA' ORDER BY name")
            return ["-- \(url.lastPathComponent)"] + (try tables.flatMap { try sqlite3(url, ".dump \($0)") })
        }
    }

    private func makeTrialStore(_ url: URL) throws {
        let model = try CrashTrialModels.version1()
        try makeStore(model, name: url.lastPathComponent) { context in
            let folders = (0..<8).map { index -> ManagedObject in
                let folder = context.insertNewObject(forEntityName: "Folder")
                folder["name"] = "folder \(index)"
                return folder
            }
            for index in 0..<300 {
                let card = context.insertNewObject(forEntityName: "Card")
                card["title"] = "card \(index) " + String(repeating: "x", count: index % 50)
                card["secret"] = "secret \(index)"
                card["legacy"] = index % 3 == 0 ? nil : "legacy \(index)"
                card["folder"] = index % 5 == 0 ? nil : folders[index % folders.count]
                let memo = context.insertNewObject(forEntityName: "Memo")
                memo["title"] = "memo \(index)"
                memo["text"] = String(repeating: "memo text \(index) ", count: 20)
            }
        }
    }

    private var testBinary: URL { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath() }

    /// Runs the child under strace, killed with SIGKILL at the `when`-th call of `syscall`
    /// (never when nil); returns whether it finished the migration, and strace's output.
    func runChild(
        _ stores: [URL], mode: CrashTrialMode, syscall: String, when: Int?
    ) throws -> (finished: Bool, trace: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        let traceFile = directory.appendingPathComponent("trace-\(UUID().uuidString).txt")
        var arguments = ["-f", "-qq", "-o", traceFile.path, "-e", "trace=\(syscall)"]
        if let when { arguments += ["-e", "inject=\(syscall):signal=KILL:when=\(when)"] }
        process.arguments =
            arguments + [testBinary.path, "ObjectGraphTests.MigrationChildEntry/testMigrationChildEntryPoint"]
        var environment = ProcessInfo.processInfo.environment
        environment["OG_MIGRATE_STORES"] = stores.map(\.path).joined(separator: ":")
        environment["OG_MIGRATE_MODE"] = mode.rawValue
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let trace = (try? String(contentsOf: traceFile, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: traceFile)
        return (output.contains("MIGRATED"), trace)
    }

    /// Kill points spread over `count` calls, the first and the last included.
    func spread(_ trials: Int, over count: Int) -> [Int] {
        guard count > 0 else { return [] }
        return Set((0..<trials).map { 1 + $0 * (count - 1) / max(trials - 1, 1) } + [count]).sorted()
    }

    struct Trials {
        var calls: [String: Int] = [:]
        var newDump: [String] = []
        var kills = 0, old = 0, new = 0
    }

    /// The working stores a trial migrates, beside their pristine copies.
    func workingCopies(of pristines: [URL]) -> [URL] {
        pristines.map { directory.appendingPathComponent("work-" + $0.lastPathComponent) }
    }

    private func restore(_ pristines: [URL]) throws {
        let fileManager = FileManager.default
        for name in try fileManager.contentsOfDirectory(atPath: directory.path) where name.hasPrefix("work-") {
            try fileManager.removeItem(at: directory.appendingPathComponent(name))
        }
        for (pristine, work) in zip(pristines, workingCopies(of: pristines)) {
            try fileManager.copyItem(at: pristine, to: work)
        }
    }

    /// Migrates copies of `pristines` in a child killed at spread calls of writes, syncs and
    /// lock calls (some of which come after the commit); after each kill, the stores must be
    /// exactly the old ones or exactly what a migration nobody killed makes.
    func killTrials(_ pristines: [URL], mode: CrashTrialMode, writes: Int?, syncs: Int, locks: Int) throws -> Trials {
        let stores = workingCopies(of: pristines)
        try restore(pristines)
        let oldDump = try dump(stores)
        let kinds = ["pwrite64", "fdatasync", "fcntl"]
        let full = try runChild(stores, mode: mode, syscall: kinds.joined(separator: ","), when: nil)
        XCTAssertTrue(full.finished, "the migration did not finish when nothing killed it")
        let lines = full.trace.split(separator: "\n").filter { !$0.contains("resumed>") }
        var trials = Trials()
        trials.calls = Dictionary(
            uniqueKeysWithValues: kinds.map { kind in (kind, lines.filter { $0.contains(" \(kind)(") }.count) })
        trials.newDump = try dump(stores)
        XCTAssertNotEqual(trials.newDump, oldDump)
        let points =
            spread(writes ?? trials.calls["pwrite64"] ?? 0, over: trials.calls["pwrite64"] ?? 0).map {
                ("pwrite64", $0)
            }
            + spread(syncs, over: trials.calls["fdatasync"] ?? 0).map { ("fdatasync", $0) }
            + spread(locks, over: trials.calls["fcntl"] ?? 0).map { ("fcntl", $0) }
        for (syscall, point) in points {
            try restore(pristines)
            if !(try runChild(stores, mode: mode, syscall: syscall, when: point)).finished { trials.kills += 1 }
            // sqlite3 rolls back a hot journal left by the kill, as any reader would.
            let after = try dump(stores)
            if after == oldDump {
                trials.old += 1
            } else if after == trials.newDump {
                trials.new += 1
            } else {
                XCTFail(
                    "killed at \(syscall) \(point) of \(trials.calls[syscall] ?? 0): "
                        + "neither the old nor the new stores"
                )
            }
            for store in stores {
                XCTAssertEqual(try sqlite3(store, "PRAGMA integrity_check"), ["ok"], "\(syscall) \(point)")
            }
        }
        print(
            "migration kill trials (\(mode)): \(trials.kills) kills (calls \(trials.calls)); "
                + "old stores after \(trials.old), new stores after \(trials.new)")
        return trials
    }

    private var sweep: Bool { ProcessInfo.processInfo.environment["OG_MIGRATION_SWEEP"] != nil }

    private func requireStrace() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed")
        }
    }

    func testAMigrationKilledAtAnyWriteLeavesTheOldOrTheNewStoreNeverAMix() throws {
        try requireStrace()
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try makeTrialStore(pristine)
        // Every write's kill point when asked (a sweep), else a spread over them.
        let trials = try killTrials([pristine], mode: .oneStore, writes: sweep ? nil : 32, syncs: 6, locks: 12)
        XCTAssertGreaterThan(trials.calls["pwrite64"] ?? 0, 30)
        XCTAssertGreaterThanOrEqual(trials.kills, 30, "kills: \(trials.kills), old: \(trials.old), new: \(trials.new)")
        XCTAssertGreaterThan(trials.old, 0)
        XCTAssertGreaterThan(trials.new, 0)

        // After a kill the store still migrates, to the same new state.
        let store = workingCopies(of: [pristine])[0]
        try restore([pristine])
        _ = try runChild([store], mode: .oneStore, syscall: "pwrite64", when: (trials.calls["pwrite64"] ?? 0) / 2)
        XCTAssertEqual(try StoreShape(contentsOf: store).differences(from: try CrashTrialModels.version1()), [])
        let (coordinator, context) = try openMigrating(store, try CrashTrialModels.versions)
        XCTAssertEqual(try context.objects("Login").count, 300)
        try coordinator.close()
        XCTAssertEqual(try dump([store]), trials.newDump)
        XCTAssertEqual(try StoreShape(contentsOf: store).differences(from: try CrashTrialModels.version2()), [])
    }

    func testTheWiboscoChainOfThreeMigrationsIsOneTransactionUnderKills() throws {
        try requireStrace()
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try FileManager.default.copyItem(
            at: MigrationTests.wibosco.appendingPathComponent("CoreDataMigration_Example_1.sqlite"), to: pristine)
        let trials = try killTrials([pristine], mode: .wibosco, writes: sweep ? nil : 12, syncs: 2, locks: 4)
        XCTAssertGreaterThanOrEqual(trials.kills, 14)
        XCTAssertGreaterThan(trials.old, 0)
    }

    func testAStoreInWALModeMigratesAsOneTransactionUnderKills() throws {
        try requireStrace()
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try FileManager.default.copyItem(
            at: MigrationTests.wibosco.appendingPathComponent("CoreDataMigration_Example_2.sqlite"), to: pristine)
        XCTAssertEqual(try sqlite3(pristine, "PRAGMA journal_mode"), ["wal"])
        let trials = try killTrials([pristine], mode: .wibosco, writes: sweep ? nil : 12, syncs: 2, locks: 4)
        XCTAssertGreaterThanOrEqual(trials.kills, 14)
        XCTAssertGreaterThan(trials.old, 0)
    }

    func testTwoStoresMigratedTogetherAreBothOldOrBothNewUnderKills() throws {
        try requireStrace()
        let (notes, passwords) = try makeTwoStores(entries: 40)
        let pristines = [
            directory.appendingPathComponent("pristine-Notes.sqlite"),
            directory.appendingPathComponent("pristine-Passwords.sqlite"),
        ]
        try FileManager.default.moveItem(at: notes, to: pristines[0])
        try FileManager.default.moveItem(at: passwords, to: pristines[1])
        let trials = try killTrials(pristines, mode: .twoStores, writes: sweep ? nil : 12, syncs: 4, locks: 6)
        XCTAssertGreaterThanOrEqual(trials.kills, 14)
        XCTAssertGreaterThan(trials.old, 0)
        XCTAssertGreaterThan(trials.new, 0)
    }
}
