import Foundation
import MyStashKit
import StashCrypto

/// The vault cases: the `mystash` binary on a generated vault of notes and password
/// entries, side by side with pass, gopass and keepassxc-cli on the same data where installed.
struct VaultBench {
    let work: URL
    let size: Int
    var repeats: Int
    let mystash: String
    let password = "bench-master-password"
    var results: [CaseResult] = []

    var home: URL { work.appendingPathComponent("home") }
    var vault: URL { work.appendingPathComponent("vault") }
    var dataFile: URL { work.appendingPathComponent("data.json") }
    static let searchWord = "zebra"
    var searchWord: String { Self.searchWord }

    var environment: [String: String] {
        ["HOME": home.path, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MYSTASH_VAULT": vault.path,
         "MYSTASH_PASSWORD": password, "MYSTASH_NEW_PASSWORD": password]
    }

    var bitwardenFile: URL { work.appendingPathComponent("bitwarden.json") }

    /// The realistic vault of `size` entries and notes, as a mystash export and a Bitwarden one.
    func writeData() throws -> RealisticData {
        let data = RealisticData(size: size, searchWord: searchWord)
        try data.mystashJSON().write(to: dataFile)
        try data.bitwardenJSON().write(to: bitwardenFile)
        return data
    }

    func mystashRun(
        _ arguments: [String], environment overrides: [String: String] = [:], removing: [String] = []
    ) throws -> Measurement {
        var env = environment.merging(overrides) { _, new in new }
        removing.forEach { env[$0] = nil }
        let (measurement, status, stderr) = try runTimed(mystash, arguments, environment: env)
        guard status == 0 else {
            throw BenchError("mystash \(arguments.joined(separator: " ")) failed (\(status)): \(stderr)")
        }
        return measurement
    }

    /// Unlocks the vault's key slot (scrypt and unwrap, nothing else) in a child process.
    func kdfChild() throws -> Measurement {
        let output = work.appendingPathComponent("kdf-output").path
        let (measurement, status, stderr) = try runTimed(
            StashBench.executable, ["kdf", vault.path, output], environment: environment)
        guard status == 0, let seconds = Double(try String(contentsOfFile: output, encoding: .utf8)) else {
            throw BenchError("KDF child failed: \(stderr)")
        }
        return Measurement(seconds: seconds, rssKiB: measurement.rssKiB)
    }

    func repeated(_ body: () throws -> Measurement) throws -> (seconds: Double, rssKiB: Int) {
        var runs: [Measurement] = []
        for _ in 0..<repeats { runs.append(try body()) }
        return (median(runs.map(\.seconds)), runs.map(\.rssKiB).max() ?? 0)
    }

    /// Runs every vault case; peers (pass, gopass, keepassxc-cli) only when given, as they
    /// take hours to import 100,000 items.
    mutating func run(peers: Peers) throws {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let data = try writeData()
        let peerData: BenchData = (
            notes: data.notes.map { ($0.title, $0.text) },
            entries: data.entries.map { (name: $0.name, user: $0.user, password: $0.password, url: $0.url) })
        log("vault: \(size) notes and \(size) entries generated")

        // The KDF alone, at the cost users get by default (calibrated here).
        _ = try mystashRun(["init"])
        let kdfRuns = try (0..<repeats).map { _ in try kdfChild() }
        let kdf = median(kdfRuns.map(\.seconds))
        log("vault: the KDF alone takes \(format(kdf)) s, \(kdfRuns.map(\.rssKiB).max()! / 1024) MiB")

        // Imports into a fresh vault each time; the large ones once.
        func importRuns(_ file: URL, _ format: String) throws -> (seconds: Double, rssKiB: Int) {
            var bench = self
            bench.repeats = size > 20_000 ? 1 : repeats
            return try bench.repeated {
                let fresh = work.appendingPathComponent("import-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: fresh) }
                _ = try mystashRun(["init", "--vault", fresh.path])
                return try mystashRun(["import", file.path, "--format", format, "--vault", fresh.path])
            }
        }
        let imported = try importRuns(dataFile, "mystash-json")
        log("vault: import \(format(imported.seconds)) s")
        results += peers.compare("vault.import", ours: imported, kdf: kdf, session: nil) { try $0.importData(peerData) }
        let bitwarden = try importRuns(bitwardenFile, "bitwarden-json")
        results += peers.compare("vault.importBitwarden", ours: bitwarden, kdf: kdf, session: nil) { _ in nil }
        _ = try mystashRun(["import", dataFile.path, "--format", "mystash-json"])

        let name = "site-\(size / 2)"
        let commands: [(name: String, arguments: [String])] = [
            ("vault.list", ["password", "list", "--json"]),
            ("vault.show", ["password", "show", name, "--reveal"]),
            ("vault.showField", ["password", "show", name, "--field", "password"]),
            ("vault.search", ["note", "search", searchWord, "--json"]),
            // Decrypts every field of every row: its memory must not grow with the vault.
            ("vault.check", ["check"]),
        ]
        let withPassword = try commands.map { command in try repeated { try mystashRun(command.arguments) } }
        var sessions: [String: (seconds: Double, rssKiB: Int)] = [:]
        if (try? mystashRun(["unlock", "--timeout", "30m"])) != nil {
            for command in commands {
                sessions[command.name] = try repeated {
                    try mystashRun(command.arguments, removing: ["MYSTASH_PASSWORD"])
                }
            }
            if let list = sessions["vault.list"] {
                var browseEnvironment = environment.merging(["TERM": "xterm-256color"]) { $1 }
                browseEnvironment["MYSTASH_PASSWORD"] = nil
                results.append(contentsOf: browseResults(try browseTimings(environment: browseEnvironment), list: list))
            }
            _ = try? mystashRun(["lock"])
        } else {
            log("vault: no kernel keyring here; session cases skipped")
        }
        let word = searchWord
        let peerOperations: [String: (Peer) throws -> Measurement?] = [
            "vault.list": { try $0.list() }, "vault.show": { try $0.show(name: name) },
            "vault.search": { try $0.search(word) },
        ]
        for (command, ours) in zip(commands, withPassword) {
            results += peers.compare(command.name, ours: ours, kdf: kdf, session: sessions[command.name]) { peer in
                try peerOperations[command.name]?(peer)
            }
        }
        results += peers.compare("vault.unlock", ours: (kdf, kdfRuns.map(\.rssKiB).max()!), kdf: kdf, session: nil) {
            try $0.unlock()
        }
    }
}

func log(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

func format(_ seconds: Double) -> String { String(format: "%.4f", seconds) }
