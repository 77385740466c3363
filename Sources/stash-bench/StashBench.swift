import ArgumentParser
import Foundation
import MyStashKit
import StashCrypto

/// ObjectGraph against GRDB and raw SQLite, the vault against pass, gopass and keepassxc-cli,
/// measured side by side in one run and reported as ratios.
///
/// Each library case runs in a child process (this binary's hidden `child` command), so its
/// peak RSS is its own; the reported time is the median of the runs.
@main
struct StashBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stash-bench",
        abstract: "Measure ObjectGraph and mystash against GRDB, SQLite, pass, gopass and keepassxc-cli.",
        subcommands: [Run.self, WriteData.self, Child.self, KDF.self],
        defaultSubcommand: Run.self)

    /// This binary, for the child processes.
    static var executable: String { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path }
}

extension StashBench {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the cases and print a table (the default).")

        @Flag(help: "Small sizes and 3 repeats, for a smoke run.") var quick = false
        @Flag(help: "Print the results as JSON.") var json = false
        @Option(help: ArgumentHelp("Only the cases whose name starts with one of these (comma-separated), such as "
                                    + "'vault', 'vault,browse' or 'objectgraph.fetch'.", valueName: "prefixes"),
                transform: { $0.split(separator: ",").map(String.init) })
        var only: [String]?
        @Option(help: "Runs per case; the median is reported (default 5, 3 with --quick).") var repeats: Int?
        @Flag(help: "Leave out pass, gopass and keepassxc-cli.") var noPeers = false
        @Option(help: "Comma-separated vault sizes (default 10000,100000; 500,5000 with --quick).",
                transform: { text in try text.split(separator: ",").map { part in
                    guard let size = Int(part), size >= 100 else {
                        throw ValidationError("'\(part)' is not a size of 100 or more")
                    }
                    return size
                } })
        var vaultSizes: [Int]?
        @Option(help: ArgumentHelp("Comma-separated transaction counts for sync.cloneHistory (default "
                                    + "10000,100000; 1000,10000 with --quick).", valueName: "counts"),
                transform: { text in try text.split(separator: ",").map { part in
                    guard let count = Int(part), count >= 100 else {
                        throw ValidationError("'\(part)' is not a transaction count of 100 or more")
                    }
                    return count
                } })
        var syncHistory: [Int]?

        static func sizeLabel(_ size: Int) -> String { size % 1000 == 0 ? "\(size / 1000)k" : "\(size)" }

        /// Every case name; the vault and browse cases share one prepared vault, so they run together.
        static let libraryCaseNames = [
            "objectgraph.insert50k", "objectgraph.fetch200k", "objectgraph.walk200k", "objectgraph.fetchPredicate",
            "objectgraph.update1k",
        ]
        static let vaultCaseNames = [
            "vault.import", "vault.importBitwarden", "vault.list", "vault.show", "vault.showField", "vault.search",
            "vault.check", "vault.unlock", "browse.firstPaint", "browse.keystroke", "browse.externalChange",
        ]

        static var allCaseNames: [String] {
            libraryCaseNames + RelationshipCases.names + vaultCaseNames + SyncBench.names
        }

        func validate() throws {
            if let repeats, repeats < 1 { throw ValidationError("--repeats must be at least 1") }
            for prefix in only ?? [] where !Self.allCaseNames.contains(where: { $0.hasPrefix(prefix) }) {
                throw ValidationError(
                    "--only '\(prefix)' matches no case; the cases are " + Self.allCaseNames.joined(separator: ", "))
            }
        }

        func run() throws {
            let repeats = repeats ?? (quick ? 3 : 5)
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("stash-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: work) }
            func selected(_ name: String) -> Bool { only?.contains { name.hasPrefix($0) } ?? true }

            var results: [CaseResult] = []
            let insertSize = quick ? 5_000 : 50_000
            let fetchSize = quick ? 20_000 : 200_000
            let libraryCases = Self.libraryCaseNames.filter(selected).map {
                ($0, $0.hasSuffix("insert50k") ? insertSize : fetchSize)
            }
            if !libraryCases.isEmpty {
                log("preparing \(fetchSize) rows with ObjectGraph")
                _ = try Child.measure("prepare", "ours", work: work, size: fetchSize)
            }
            for (name, size) in libraryCases {
                let history = LibraryCases.historyCases.contains(name)
                results += try measureLibraryCase(
                    name, size: size, implementations: LibraryCases.implementations + (history ? ["history"] : []),
                    repeats: repeats, work: work)
            }

            let relationshipCases = RelationshipCases.names.filter(selected)
            if !relationshipCases.isEmpty {
                // Two sizes ten times apart: the slope says how each cost grows.
                let sizes = quick ? [1_000, 10_000] : [10_000, 100_000]
                var smaller: [String: Double] = [:]
                for size in sizes {
                    log("preparing a family of \(size) children with ObjectGraph and GRDB")
                    _ = try Child.measure("prepare-relationships", "ours", work: work, size: size)
                    for name in relationshipCases {
                        var rows = try measureLibraryCase(name, size: size, implementations: ["ours", "grdb"],
                                                          repeats: repeats, work: work)
                        for index in rows.indices {
                            rows[index].name = "\(name) \(Self.sizeLabel(size))"
                            rows[index].slope = smaller[name].map { rows[index].ours_s / $0 }
                        }
                        smaller[name] = rows.first?.ours_s
                        results += rows
                    }
                }
            }

            if Self.vaultCaseNames.contains(where: selected) {
                let mystash = URL(fileURLWithPath: StashBench.executable).deletingLastPathComponent()
                    .appendingPathComponent("mystash").path
                guard FileManager.default.isExecutableFile(atPath: mystash) else {
                    throw BenchError("mystash is not built beside stash-bench: swift build -c release")
                }
                // Realistic vaults at two sizes; the peers take hours at the larger one, so only the smaller.
                var smaller: [String: Double] = [:]
                for (index, size) in (vaultSizes ?? (quick ? [500, 5_000] : [10_000, 100_000])).enumerated() {
                    let vaultWork = work.appendingPathComponent("vault-cases-\(size)")
                    try FileManager.default.createDirectory(at: vaultWork, withIntermediateDirectories: true)
                    var bench = VaultBench(work: vaultWork, size: size, repeats: repeats, mystash: mystash)
                    var peers = Peers.detect(work: vaultWork, repeats: repeats)
                    if noPeers || index > 0 {
                        let reason = noPeers ? "left out by --no-peers" : "measured at the smaller size only"
                        peers.missing = peers.available.map { ($0.name, reason) } + peers.missing
                        peers.available = []
                    }
                    try bench.run(peers: peers)
                    for var row in bench.results where selected(row.name) {
                        let key = "\(row.name)/\(row.baseline)"
                        row.slope = smaller[key].map { row.ours_s / $0 }
                        smaller[key] = row.ours_s
                        row.name += " \(Self.sizeLabel(size))"
                        results.append(row)
                    }
                }
                try? FileManager.default.removeItem(at: work.appendingPathComponent("vault-cases"))
            }

            if SyncBench.names.contains(where: selected) {
                let mystash = URL(fileURLWithPath: StashBench.executable).deletingLastPathComponent()
                    .appendingPathComponent("mystash").path
                var smaller: [String: Double] = [:]
                for size in vaultSizes ?? (quick ? [500, 5_000] : [10_000, 100_000]) {
                    let syncWork = work.appendingPathComponent("sync-cases-\(size)")
                    try FileManager.default.createDirectory(at: syncWork, withIntermediateDirectories: true)
                    var bench = SyncBench(work: syncWork, size: size, repeats: repeats, mystash: mystash,
                                          histories: syncHistory ?? (quick ? [1_000, 10_000] : [10_000, 100_000]))
                    try bench.run(selected: selected)
                    for var row in bench.results {
                        if !row.name.hasPrefix("sync.cloneHistory") {
                            row.slope = smaller[row.name].map { row.ours_s / $0 }
                            smaller[row.name] = row.ours_s
                        }
                        row.name += " \(Self.sizeLabel(size))"
                        results.append(row)
                    }
                    try? FileManager.default.removeItem(at: syncWork)
                }
            }
            try report(results, repeats: repeats)
        }

        /// Runs one library case with each implementation and compares ours with each other one.
        private func measureLibraryCase(_ name: String, size: Int, implementations: [String], repeats: Int,
                                        work: URL) throws -> [CaseResult] {
            var medians: [String: (seconds: Double, rssKiB: Int)] = [:]
            for implementation in implementations {
                let runs = try (0..<repeats).map { _ in try Child.measure(name, implementation, work: work, size: size)
                }
                medians[implementation] = (median(runs.map(\.seconds)), runs.map(\.rssKiB).max() ?? 0)
                log("\(name) \(implementation) \(size): \(format(median(runs.map(\.seconds)))) s")
            }
            guard let ours = medians["ours"] else { return [] }
            // Persistent history on, against the same case with it off.
            let history = medians["history"].map { history in
                CaseResult(
                    name: "\(name) history", ours_s: history.seconds, ours_rss_mib: Double(history.rssKiB) / 1024,
                    baseline: "ObjectGraph, history off", baseline_s: ours.seconds,
                    baseline_rss_mib: Double(ours.rssKiB) / 1024, ratio: history.seconds / ours.seconds)
            }
            return [("grdb", "GRDB records"), ("sqlite", "raw SQLite")].compactMap { baseline, label in
                guard let base = medians[baseline] else { return nil }
                return CaseResult(
                    name: name, ours_s: ours.seconds, ours_rss_mib: Double(ours.rssKiB) / 1024, baseline: label,
                    baseline_s: base.seconds, baseline_rss_mib: Double(base.rssKiB) / 1024,
                    ratio: ours.seconds / base.seconds)
            } + (history.map { [$0] } ?? [])
        }

        private func report(_ results: [CaseResult], repeats: Int) throws {
            var uname = utsname()
            _ = Glibc.uname(&uname)
            let machine = withUnsafeBytes(of: uname.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let info = ProcessInfo.processInfo
            let machineDescription =
                "\(machine), \(info.activeProcessorCount) cores, \(info.physicalMemory >> 30) GiB, "
                + "\(quick ? "quick" : "full") sizes, median of \(repeats)"
            if json {
                struct Report: Codable {
                    var machine: String
                    var cases: [CaseResult]
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data = try encoder.encode(Report(machine: machineDescription, cases: results))
                FileHandle.standardOutput.write(data + Data("\n".utf8))
                return
            }
            func cell(_ value: Double?, _ digits: Int = 3) -> String {
                value.map { String(format: "%.\(digits)f", $0) } ?? "—"
            }
            let header = ["case", "ours s", "beyond KDF s", "session s", "ours MiB", "session MiB", "baseline",
                          "baseline s", "baseline MiB", "ratio", "memory ratio", "slope"]
            let rows = results.map { r in
                [r.name, cell(r.ours_s), cell(r.ours_beyond_kdf_s), cell(r.ours_session_s), cell(r.ours_rss_mib, 0),
                 cell(r.ours_session_rss_mib, 0),
                 r.baseline + (r.note.map { " (\($0))" } ?? ""), cell(r.baseline_s), cell(r.baseline_rss_mib, 0),
                 r.ratio.map { String(format: "%.2fx", $0) } ?? "—",
                 r.baseline_rss_mib.map { String(format: "%.2fx", r.ours_rss_mib / $0) } ?? "—",
                 r.slope.map { String(format: "%.1fx", $0) } ?? "—"]
            }
            let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
            print("machine: \(machineDescription)")
            for row in [header] + rows {
                print(
                    zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(
                        separator: "  "))
            }
        }
    }

    /// Writes the realistic vault the vault cases import, to reproduce or profile one outside a run.
    struct WriteData: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "data", abstract: "Write the realistic vault data of one size as an export file.")

        @Option(help: "How many entries and notes.") var size = 10_000
        @Option(help: "The export format: mystash-json or bitwarden-json.") var format = "mystash-json"
        @Argument(help: "The file to write.") var output: String

        func validate() throws {
            guard ["mystash-json", "bitwarden-json"].contains(format) else {
                throw ValidationError("--format must be mystash-json or bitwarden-json, not '\(format)'")
            }
            guard size > 0 else { throw ValidationError("--size must be at least 1") }
        }

        func run() throws {
            let data = RealisticData(size: size, searchWord: VaultBench.searchWord)
            try (format == "mystash-json" ? data.mystashJSON() : data.bitwardenJSON())
                .write(to: URL(fileURLWithPath: output))
        }
    }

    /// One library case in this process, so that its peak memory is its own.
    struct Child: ParsableCommand {
        static let configuration = CommandConfiguration(shouldDisplay: false)

        @Argument var name: String
        @Argument var implementation: String
        @Argument var directory: String
        @Argument var size: Int
        @Argument var output: String

        func run() throws {
            let seconds: Double
            switch name {
            case "prepare":
                seconds = try time { try LibraryCases.prepare(path: "\(directory)/fetch.sqlite", rows: size) }
            case "prepare-relationships":
                seconds = try time { try RelationshipCases.prepare(directory: directory, size: size) }
            case _ where name.hasPrefix("relationship."):
                seconds = try RelationshipCases.run(
                    name, implementation: implementation, directory: directory, size: size)
            default:
                seconds = try LibraryCases.run(name, implementation: implementation, directory: directory, size: size)
            }
            try String(seconds).write(toFile: output, atomically: true, encoding: .utf8)
        }

        /// Runs a case in a child process: its seconds (measured inside) and peak RSS.
        static func measure(_ name: String, _ implementation: String, work: URL, size: Int) throws -> Measurement {
            let output = work.appendingPathComponent("child-output").path
            let (measurement, status, stderr) = try runTimed(
                StashBench.executable, ["child", name, implementation, work.path, String(size), output],
                environment: ProcessInfo.processInfo.environment)
            guard status == 0, let seconds = Double(try String(contentsOfFile: output, encoding: .utf8)) else {
                throw BenchError("\(name) \(implementation) failed: \(stderr)")
            }
            return Measurement(seconds: seconds, rssKiB: measurement.rssKiB)
        }
    }

    /// Unlocks a vault's key slot (scrypt and unwrap, nothing else); the password comes from
    /// MYSTASH_PASSWORD, never argv.
    struct KDF: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "kdf", shouldDisplay: false)

        @Argument var vault: String
        @Argument var output: String

        func run() throws {
            guard let password = ProcessInfo.processInfo.environment["MYSTASH_PASSWORD"] else {
                throw ValidationError("MYSTASH_PASSWORD is not set")
            }
            let vault = try Vault.open(at: URL(fileURLWithPath: vault))
            let seconds = try time { _ = try vault.keySlot.unlock(password: .password(password)) }
            try String(seconds).write(toFile: output, atomically: true, encoding: .utf8)
        }
    }
}
