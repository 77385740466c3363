import Foundation
import MyStashKit
import StashCrypto

// stash-bench: ObjectGraph against GRDB and raw SQLite, the vault against pass, gopass and
// keepassxc-cli, measured side by side in one run and reported as ratios.
//
//   stash-bench [--quick] [--json] [--only PREFIX] [--repeats N]
//
// Each library case runs in a child process (this binary with --child), so its peak RSS
// is its own; the reported time is the median of the runs.

let arguments = CommandLine.arguments
let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path

if arguments.count >= 7, arguments[1] == "--child" {
    let (name, implementation, directory, size, output) = (arguments[2], arguments[3], arguments[4], Int(arguments[5])!, arguments[6])
    do {
        let seconds = name == "prepare"
            ? try time { try LibraryCases.prepare(path: "\(directory)/fetch.sqlite", rows: size) }
            : try LibraryCases.run(name, implementation: implementation, directory: directory, size: size)
        try String(seconds).write(toFile: output, atomically: true, encoding: .utf8)
        exit(0)
    } catch {
        log("\(name) \(implementation): \(error)")
        exit(1)
    }
}

if arguments.count >= 5, arguments[1] == "--kdf" {
    let vault = try Vault.open(at: URL(fileURLWithPath: arguments[2]))
    let seconds = try time { _ = try vault.keySlot.unlock(password: .password(arguments[3])) }
    try String(seconds).write(toFile: arguments[4], atomically: true, encoding: .utf8)
    exit(0)
}

let quick = arguments.contains("--quick")
let asJSON = arguments.contains("--json")
let only = arguments.firstIndex(of: "--only").map { arguments[$0 + 1] }
let repeats = arguments.firstIndex(of: "--repeats").flatMap { Int(arguments[$0 + 1]) } ?? (quick ? 3 : 5)
let work = FileManager.default.temporaryDirectory.appendingPathComponent("stash-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: work) }

func selected(_ name: String) -> Bool { only.map { name.hasPrefix($0) } ?? true }

/// Runs a library case in a child process: its seconds (measured inside) and peak RSS.
func child(_ name: String, _ implementation: String, size: Int) throws -> Measurement {
    let output = work.appendingPathComponent("child-output").path
    let (measurement, status, stderr) = try runTimed(executable, ["--child", name, implementation, work.path, String(size), output], environment: ProcessInfo.processInfo.environment)
    guard status == 0, let seconds = Double(try String(contentsOfFile: output, encoding: .utf8)) else {
        throw BenchError("\(name) \(implementation) failed: \(stderr)")
    }
    return Measurement(seconds: seconds, rssKiB: measurement.rssKiB)
}

var results: [CaseResult] = []
let insertSize = quick ? 5_000 : 50_000
let fetchSize = quick ? 20_000 : 200_000
let libraryCases = [("objectgraph.insert50k", insertSize), ("objectgraph.fetch200k", fetchSize), ("objectgraph.walk200k", fetchSize),
                    ("objectgraph.fetchPredicate", fetchSize), ("objectgraph.update1k", fetchSize)].filter { selected($0.0) }
if !libraryCases.isEmpty {
    log("preparing \(fetchSize) rows with ObjectGraph")
    _ = try child("prepare", "ours", size: fetchSize)
}
for (name, size) in libraryCases {
    var medians: [String: (Double, Int)] = [:]
    for implementation in LibraryCases.implementations {
        let runs = try (0..<repeats).map { _ in try child(name, implementation, size: size) }
        medians[implementation] = (median(runs.map(\.seconds)), runs.map(\.rssKiB).max() ?? 0)
        log("\(name) \(implementation): \(format(medians[implementation]!.0)) s")
    }
    let ours = medians["ours"]!
    for baseline in ["grdb", "sqlite"] {
        let base = medians[baseline]!
        results.append(CaseResult(name: name, ours_s: ours.0, ours_rss_mib: Double(ours.1) / 1024, baseline: baseline == "grdb" ? "GRDB records" : "raw SQLite",
                                  baseline_s: base.0, baseline_rss_mib: Double(base.1) / 1024, ratio: ours.0 / base.0))
    }
}

if selected("vault") {
    let mystash = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("mystash").path
    guard FileManager.default.isExecutableFile(atPath: mystash) else {
        log("mystash is not built beside stash-bench: swift build -c release")
        exit(1)
    }
    let vaultWork = work.appendingPathComponent("vault-cases")
    try FileManager.default.createDirectory(at: vaultWork, withIntermediateDirectories: true)
    var bench = VaultBench(work: vaultWork, size: quick ? 500 : 10_000, repeats: repeats, mystash: mystash)
    var peers = Peers.detect(work: vaultWork, repeats: repeats)
    if arguments.contains("--no-peers") {
        peers.missing = peers.available.map { ($0.name, "left out by --no-peers") } + peers.missing
        peers.available = []
    }
    try bench.run(peers: peers)
    results += bench.results
}

// MARK: - Report

var uname = utsname()
_ = Glibc.uname(&uname)
let machine = withUnsafeBytes(of: uname.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
let machineDescription = "\(machine), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB, \(quick ? "quick" : "full") sizes, median of \(repeats)"

if asJSON {
    struct Report: Codable {
        var machine: String
        var cases: [CaseResult]
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    FileHandle.standardOutput.write(try encoder.encode(Report(machine: machineDescription, cases: results)) + Data("\n".utf8))
} else {
    func cell(_ value: Double?, _ digits: Int = 3) -> String { value.map { String(format: "%.\(digits)f", $0) } ?? "—" }
    let header = ["case", "ours s", "beyond KDF s", "session s", "ours MiB", "baseline", "baseline s", "baseline MiB", "ratio"]
    let rows = results.map { r in
        [r.name, cell(r.ours_s), cell(r.ours_beyond_kdf_s), cell(r.ours_session_s), cell(r.ours_rss_mib, 0), r.baseline + (r.note.map { " (\($0))" } ?? ""),
         cell(r.baseline_s), cell(r.baseline_rss_mib, 0), r.ratio.map { String(format: "%.2fx", $0) } ?? "—"]
    }
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    print("machine: \(machineDescription)")
    for row in [header] + rows { print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")) }
}
