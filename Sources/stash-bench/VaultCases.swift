import Foundation
import MyStashKit
import StashCrypto

/// The vault cases: the `mystash` binary on a generated vault of notes and password
/// entries, side by side with pass, gopass and keepassxc-cli on the same data where installed.
struct VaultBench {
    let work: URL
    let size: Int
    let repeats: Int
    let mystash: String
    let password = "bench-master-password"
    var results: [CaseResult] = []

    var home: URL { work.appendingPathComponent("home") }
    var vault: URL { work.appendingPathComponent("vault") }
    var dataFile: URL { work.appendingPathComponent("data.json") }
    var searchWord: String { "zebra" }

    var environment: [String: String] {
        ["HOME": home.path, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MYSTASH_VAULT": vault.path,
         "MYSTASH_PASSWORD": password, "MYSTASH_NEW_PASSWORD": password]
    }

    /// `size` notes of about 1 KB and `size` entries; one note in 100 holds the search word.
    func generateData() throws -> (
        notes: [(String, String)], entries: [(name: String, user: String, password: String, url: String)]
    ) {
        let words = PasswordGenerator.words.filter { $0 != searchWord }
        var generator = SystemRandomNumberGenerator()
        func text(_ length: Int) -> String {
            var result = ""
            while result.count < length { result += words.randomElement(using: &generator)! + " " }
            return result
        }
        let notes = (0..<size).map { index in
            ("Note \(index) \(text(20))", (index % 100 == 0 ? searchWord + " " : "") + text(1000))
        }
        let entries = (0..<size).map { index in
            (
                name: "site-\(index)", user: "user\(index)@example.com",
                password: "pw-\(index)-\(text(8).replacingOccurrences(of: " ", with: "-"))",
                url: "https://site\(index).example.com/login"
            )
        }
        return (notes, entries)
    }

    func writeMyStashJSON(
        _ data: (notes: [(String, String)], entries: [(name: String, user: String, password: String, url: String)])
    ) throws {
        let document: [String: Any] = [
            "format": "mystash-json", "version": 1, "categories": [],
            "notes": data.notes.map { ["title": $0.0, "text": $0.1] },
            "passwords": data.entries.map {
                ["name": $0.name, "userId": $0.user, "password": $0.password, "url": $0.url]
            }
        ]
        try JSONSerialization.data(withJSONObject: document).write(to: dataFile)
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

    mutating func run(peers: Peers) throws {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let data = try generateData()
        try writeMyStashJSON(data)
        log("vault: \(size) notes and \(size) entries generated")

        // The KDF alone, at the cost users get by default (calibrated here).
        _ = try mystashRun(["init"])
        let kdfRuns = try (0..<repeats).map { _ in try kdfChild() }
        let kdf = median(kdfRuns.map(\.seconds))
        log("vault: the KDF alone takes \(format(kdf)) s, \(kdfRuns.map(\.rssKiB).max()! / 1024) MiB")

        // Import into a fresh vault each time.
        let importRuns = try repeated {
            let fresh = work.appendingPathComponent("import-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: fresh) }
            _ = try mystashRun(["init", "--vault", fresh.path])
            return try mystashRun(["import", dataFile.path, "--format", "mystash-json", "--vault", fresh.path])
        }
        _ = try mystashRun(["import", dataFile.path, "--format", "mystash-json"])
        results.append(
            contentsOf: peers.compare("vault.import10k", ours: importRuns, kdf: kdf, session: nil) {
                try $0.importData(data)
            })

        let list = try repeated { try mystashRun(["password", "list", "--json"]) }
        let show = try repeated { try mystashRun(["password", "show", "site-\(size / 2)", "--reveal"]) }
        let search = try repeated { try mystashRun(["note", "search", searchWord, "--json"]) }
        var sessions: [String: (seconds: Double, rssKiB: Int)] = [:]
        if (try? mystashRun(["unlock", "--timeout", "30m"])) != nil {
            sessions["list"] = try repeated {
                try mystashRun(["password", "list", "--json"], removing: ["MYSTASH_PASSWORD"])
            }
            sessions["show"] = try repeated {
                try mystashRun(["password", "show", "site-\(size / 2)", "--reveal"], removing: ["MYSTASH_PASSWORD"])
            }
            sessions["search"] = try repeated {
                try mystashRun(["note", "search", searchWord, "--json"], removing: ["MYSTASH_PASSWORD"])
            }
            if let list = sessions["list"] {
                var browseEnvironment = environment.merging(["TERM": "xterm-256color"]) { $1 }
                browseEnvironment["MYSTASH_PASSWORD"] = nil
                results.append(contentsOf: browseResults(try browseTimings(environment: browseEnvironment), list: list))
            }
            _ = try? mystashRun(["lock"])
        } else {
            log("vault: no kernel keyring here; session cases skipped")
        }
        results.append(
            contentsOf: peers.compare("vault.list10k", ours: list, kdf: kdf, session: sessions["list"]) {
                try $0.list()
            })
        results.append(
            contentsOf: peers.compare("vault.show", ours: show, kdf: kdf, session: sessions["show"]) {
                try $0.show(name: "site-\(size / 2)")
            })
        results.append(
            contentsOf: peers.compare("vault.search10k", ours: search, kdf: kdf, session: sessions["search"]) {
                try $0.search(searchWord)
            })
        results.append(
            contentsOf: peers.compare("vault.unlock", ours: (kdf, kdfRuns.map(\.rssKiB).max()!), kdf: kdf, session: nil)
            { try $0.unlock() })
    }
}

func log(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

func format(_ seconds: Double) -> String { String(format: "%.4f", seconds) }
