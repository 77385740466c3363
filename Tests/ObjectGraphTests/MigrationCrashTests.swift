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

/// The process a crash trial kills: it migrates the store named by the environment.
final class MigrationChildEntry: MigrationTestCase {
    override func tearDownWithError() throws {}

    func testMigrationChildEntryPoint() throws {
        guard let path = ProcessInfo.processInfo.environment["OG_MIGRATE_STORE"] else {
            throw XCTSkip("helper for the migration crash trials; runs only as their child process")
        }
        let url = URL(fileURLWithPath: path)
        directory = url.deletingLastPathComponent()
        let (coordinator, _) =
            ProcessInfo.processInfo.environment["OG_MIGRATE_WIBOSCO"] != nil
            ? try openMigrating(url, try MigrationTests.wiboscoVersions(), steps: [MigrationTests.sectionsFromContent])
            : try openMigrating(url, try CrashTrialModels.versions)
        try coordinator.close()
        FileHandle.standardOutput.write(Data("MIGRATED\n".utf8))
    }
}

final class MigrationCrashTests: MigrationTestCase {
    /// Every table but `Z_METADATA` (its property list's key order varies), as `sqlite3 .dump` prints it.
    func dump(_ url: URL) throws -> [String] {
        let tables = try sqlite3(
            url, "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'Z_METADATA' ORDER BY name")
        return try tables.flatMap { try sqlite3(url, ".dump \($0)") }
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
        store: URL, syscall: String, when: Int?, wibosco: Bool = false
    ) throws -> (finished: Bool, trace: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        let traceFile = directory.appendingPathComponent("trace-\(UUID().uuidString).txt")
        var arguments = ["-f", "-qq", "-o", traceFile.path, "-e", "trace=\(syscall)"]
        if let when { arguments += ["-e", "inject=\(syscall):signal=KILL:when=\(when)"] }
        process.arguments =
            arguments + [testBinary.path, "ObjectGraphTests.MigrationChildEntry/testMigrationChildEntryPoint"]
        var environment = ProcessInfo.processInfo.environment
        environment["OG_MIGRATE_STORE"] = store.path
        environment["OG_MIGRATE_WIBOSCO"] = wibosco ? "1" : nil
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

    /// Migrates copies of `pristine` in a child killed at spread calls of writes, syncs and
    /// lock calls (some of which come after the commit); after each kill, the store must be
    /// exactly the old one or exactly the one a migration nobody killed makes.
    func killTrials(_ pristine: URL, writes: Int?, syncs: Int, locks: Int, wibosco: Bool = false) throws -> Trials {
        let oldDump = try dump(pristine)
        let store = directory.appendingPathComponent("store.sqlite")
        try? FileManager.default.removeItem(at: store)
        try FileManager.default.copyItem(at: pristine, to: store)
        let kinds = ["pwrite64", "fdatasync", "fcntl"]
        let full = try runChild(store: store, syscall: kinds.joined(separator: ","), when: nil, wibosco: wibosco)
        XCTAssertTrue(full.finished, "the migration did not finish when nothing killed it")
        let lines = full.trace.split(separator: "\n").filter { !$0.contains("resumed>") }
        var trials = Trials()
        trials.calls = Dictionary(
            uniqueKeysWithValues: kinds.map { kind in (kind, lines.filter { $0.contains(" \(kind)(") }.count) })
        trials.newDump = try dump(store)
        XCTAssertNotEqual(trials.newDump, oldDump)
        let points =
            spread(writes ?? trials.calls["pwrite64"] ?? 0, over: trials.calls["pwrite64"] ?? 0).map {
                ("pwrite64", $0)
            }
            + spread(syncs, over: trials.calls["fdatasync"] ?? 0).map { ("fdatasync", $0) }
            + spread(locks, over: trials.calls["fcntl"] ?? 0).map { ("fcntl", $0) }
        for (syscall, point) in points {
            try? FileManager.default.removeItem(at: store)
            try FileManager.default.copyItem(at: pristine, to: store)
            if !(try runChild(store: store, syscall: syscall, when: point, wibosco: wibosco)).finished {
                trials.kills += 1
            }
            // sqlite3 rolls back a hot journal left by the kill, as any reader would.
            let after = try dump(store)
            if after == oldDump {
                trials.old += 1
            } else if after == trials.newDump {
                trials.new += 1
            } else {
                XCTFail(
                    "killed at \(syscall) \(point) of \(trials.calls[syscall] ?? 0): neither the old nor the new store"
                )
            }
            XCTAssertEqual(try sqlite3(store, "PRAGMA integrity_check"), ["ok"], "\(syscall) \(point)")
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
            where name.hasPrefix("store.sqlite-") {
                try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            }
        }
        print(
            "migration kill trials: \(trials.kills) kills (calls \(trials.calls)); "
                + "old store after \(trials.old), new store after \(trials.new)")
        return trials
    }

    func testAMigrationKilledAtAnyWriteLeavesTheOldOrTheNewStoreNeverAMix() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed")
        }
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try makeTrialStore(pristine)
        // Every write's kill point when asked (a sweep), else a spread over them.
        let sweep = ProcessInfo.processInfo.environment["OG_MIGRATION_SWEEP"] != nil
        let trials = try killTrials(pristine, writes: sweep ? nil : 32, syncs: 6, locks: 12)
        XCTAssertGreaterThan(trials.calls["pwrite64"] ?? 0, 30)
        XCTAssertGreaterThanOrEqual(trials.kills, 30, "kills: \(trials.kills), old: \(trials.old), new: \(trials.new)")
        XCTAssertGreaterThan(trials.old, 0)
        XCTAssertGreaterThan(trials.new, 0)

        // After a kill the store still migrates, to the same new state.
        let store = directory.appendingPathComponent("store.sqlite")
        try? FileManager.default.removeItem(at: store)
        try FileManager.default.copyItem(at: pristine, to: store)
        _ = try runChild(store: store, syscall: "pwrite64", when: (trials.calls["pwrite64"] ?? 0) / 2)
        XCTAssertEqual(try StoreShape(contentsOf: store).differences(from: try CrashTrialModels.version1()), [])
        let (coordinator, context) = try openMigrating(store, try CrashTrialModels.versions)
        XCTAssertEqual(try context.objects("Login").count, 300)
        try coordinator.close()
        XCTAssertEqual(try dump(store), trials.newDump)
        XCTAssertEqual(try StoreShape(contentsOf: store).differences(from: try CrashTrialModels.version2()), [])
    }

    func testTheWiboscoChainOfThreeMigrationsIsOneTransactionUnderKills() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed")
        }
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try FileManager.default.copyItem(
            at: MigrationTests.wibosco.appendingPathComponent("CoreDataMigration_Example_1.sqlite"), to: pristine)
        let sweep = ProcessInfo.processInfo.environment["OG_MIGRATION_SWEEP"] != nil
        let trials = try killTrials(pristine, writes: sweep ? nil : 12, syncs: 2, locks: 4, wibosco: true)
        XCTAssertGreaterThanOrEqual(trials.kills, 14)
        XCTAssertGreaterThan(trials.old, 0)
    }

    func testAStoreInWALModeMigratesAsOneTransactionUnderKills() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed")
        }
        let pristine = directory.appendingPathComponent("pristine.sqlite")
        try FileManager.default.copyItem(
            at: MigrationTests.wibosco.appendingPathComponent("CoreDataMigration_Example_2.sqlite"), to: pristine)
        XCTAssertEqual(try sqlite3(pristine, "PRAGMA journal_mode"), ["wal"])
        let sweep = ProcessInfo.processInfo.environment["OG_MIGRATION_SWEEP"] != nil
        let trials = try killTrials(pristine, writes: sweep ? nil : 12, syncs: 2, locks: 4, wibosco: true)
        XCTAssertGreaterThanOrEqual(trials.kills, 14)
        XCTAssertGreaterThan(trials.old, 0)
    }
}
