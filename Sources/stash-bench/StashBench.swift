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
        subcommands: [Run.self, Child.self, KDF.self],
        defaultSubcommand: Run.self)

    /// This binary, for the child processes.
    static var executable: String { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path }
}

extension StashBench {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the cases and print a table (the default).")

        @Flag(help: "Small sizes and 3 repeats, for a smoke run.") var quick = false
        @Flag(help: "Print the results as JSON.") var json = false
        @Option(help: "Only the cases whose name starts with this, such as 'vault', 'browse' or 'objectgraph.fetch'.")
        var only: String?
        @Option(help: "Runs per case; the median is reported (default 5, 3 with --quick).") var repeats: Int?
        @Flag(help: "Leave out pass, gopass and keepassxc-cli.") var noPeers = false

        /// Every case name; the vault and browse cases share one prepared vault, so they run together.
        static let libraryCaseNames = [
            "objectgraph.insert50k", "objectgraph.fetch200k", "objectgraph.walk200k", "objectgraph.fetchPredicate",
            "objectgraph.update1k",
        ]
        static let vaultCaseNames = [
            "vault.import10k", "vault.list10k", "vault.show", "vault.search10k", "vault.unlock",
            "browse.firstPaint10k", "browse.keystroke10k", "browse.externalChange10k",
        ]

        func validate() throws {
            if let repeats, repeats < 1 { throw ValidationError("--repeats must be at least 1") }
            if let only, !(Self.libraryCaseNames + Self.vaultCaseNames).contains(where: { $0.hasPrefix(only) }) {
                throw ValidationError(
                    "--only '\(only)' matches no case; the cases are "
                        + (Self.libraryCaseNames + Self.vaultCaseNames).joined(separator: ", "))
            }
        }

        func run() throws {
            let repeats = repeats ?? (quick ? 3 : 5)
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("stash-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: work) }
            func selected(_ name: String) -> Bool { only.map { name.hasPrefix($0) } ?? true }

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
                var medians: [String: (seconds: Double, rssKiB: Int)] = [:]
                for implementation in LibraryCases.implementations {
                    let runs = try (0..<repeats).map { _ in
                        try Child.measure(name, implementation, work: work, size: size)
                    }
                    medians[implementation] = (median(runs.map(\.seconds)), runs.map(\.rssKiB).max() ?? 0)
                    log("\(name) \(implementation): \(format(median(runs.map(\.seconds)))) s")
                }
                guard let ours = medians["ours"] else { continue }
                for (baseline, label) in [("grdb", "GRDB records"), ("sqlite", "raw SQLite")] {
                    guard let base = medians[baseline] else { continue }
                    results.append(CaseResult(
                        name: name, ours_s: ours.seconds, ours_rss_mib: Double(ours.rssKiB) / 1024, baseline: label,
                        baseline_s: base.seconds, baseline_rss_mib: Double(base.rssKiB) / 1024,
                        ratio: ours.seconds / base.seconds))
                }
            }

            if Self.vaultCaseNames.contains(where: selected) {
                let mystash = URL(fileURLWithPath: StashBench.executable).deletingLastPathComponent()
                    .appendingPathComponent("mystash").path
                guard FileManager.default.isExecutableFile(atPath: mystash) else {
                    throw BenchError("mystash is not built beside stash-bench: swift build -c release")
                }
                let vaultWork = work.appendingPathComponent("vault-cases")
                try FileManager.default.createDirectory(at: vaultWork, withIntermediateDirectories: true)
                var bench = VaultBench(work: vaultWork, size: quick ? 500 : 10_000, repeats: repeats, mystash: mystash)
                var peers = Peers.detect(work: vaultWork, repeats: repeats)
                if noPeers {
                    peers.missing = peers.available.map { ($0.name, "left out by --no-peers") } + peers.missing
                    peers.available = []
                }
                try bench.run(peers: peers)
                results += bench.results.filter { selected($0.name) }
            }
            try report(results, repeats: repeats)
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
            let header = ["case", "ours s", "beyond KDF s", "session s", "ours MiB", "baseline", "baseline s",
                          "baseline MiB", "ratio"]
            let rows = results.map { r in
                [r.name, cell(r.ours_s), cell(r.ours_beyond_kdf_s), cell(r.ours_session_s), cell(r.ours_rss_mib, 0),
                 r.baseline + (r.note.map { " (\($0))" } ?? ""), cell(r.baseline_s), cell(r.baseline_rss_mib, 0),
                 r.ratio.map { String(format: "%.2fx", $0) } ?? "—"]
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

    /// One library case in this process, so that its peak memory is its own.
    struct Child: ParsableCommand {
        static let configuration = CommandConfiguration(shouldDisplay: false)

        @Argument var name: String
        @Argument var implementation: String
        @Argument var directory: String
        @Argument var size: Int
        @Argument var output: String

        func run() throws {
            let seconds = name == "prepare"
                ? try time { try LibraryCases.prepare(path: "\(directory)/fetch.sqlite", rows: size) }
                : try LibraryCases.run(name, implementation: implementation, directory: directory, size: size)
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
