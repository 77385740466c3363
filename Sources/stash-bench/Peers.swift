import Foundation

/// One row of the report: our median beside one baseline's, measured in the same run.
struct CaseResult: Codable {
    var name: String
    var ours_s: Double
    var ours_rss_mib: Double
    /// Vault cases given the password: our time minus the KDF's, chosen cost on purpose.
    var ours_beyond_kdf_s: Double?
    /// Vault cases with an unlocked session (no KDF at all).
    var ours_session_s: Double?
    var baseline: String
    var baseline_s: Double?
    var baseline_rss_mib: Double?
    var ratio: Double?
    var note: String?
    /// Cases run at two sizes: our time at this size over our time at the size ten times smaller.
    var slope: Double?
    /// The session's peak memory (the password's runs include the KDF's).
    var ours_session_rss_mib: Double?
}

typealias BenchData = (
    notes: [(String, String)], entries: [(name: String, user: String, password: String, url: String)]
)

/// A vault tool run on the same data: each operation returns its measurement.
protocol Peer {
    var name: String { get }
    func importData(_ data: BenchData) throws -> Measurement?
    func list() throws -> Measurement
    func show(name: String) throws -> Measurement
    func search(_ word: String) throws -> Measurement
    func unlock() throws -> Measurement?
}

struct Peers {
    var available: [Peer]
    var missing: [(String, String)]
    var repeats: Int
    /// pass and gopass decrypt every file to search: run those once.
    var slowRepeats = 1

    func compare(
        _ name: String, ours: (seconds: Double, rssKiB: Int), kdf: Double, session: (seconds: Double, rssKiB: Int)?,
                 _ body: (Peer) throws -> Measurement?) -> [CaseResult] {
        let mib = { (kib: Int) in Double(kib) / 1024 }
        let beyond = name == "vault.unlock" ? nil : max(ours.seconds - kdf, 0)
        var rows: [CaseResult] = []
        for peer in available {
            var runs: [Measurement] = []
            var note: String?
            do {
                let count = name == "vault.search" && peer.name != "keepassxc-cli" ? slowRepeats : repeats
                for _ in 0..<count {
                    guard let measurement = try body(peer) else {
                        note = "not measured: \(peer.name) has no such operation"; break
                    }
                    runs.append(measurement)
                }
            } catch {
                note = "failed: \(error)"
            }
            let seconds = runs.isEmpty ? nil : median(runs.map(\.seconds))
            rows.append(
                CaseResult(
                    name: name, ours_s: ours.seconds, ours_rss_mib: mib(ours.rssKiB), ours_beyond_kdf_s: beyond,
                                   ours_session_s: session?.seconds, baseline: peer.name, baseline_s: seconds,
                                   baseline_rss_mib: runs.isEmpty ? nil : mib(runs.map(\.rssKiB).max()!),
                                   ratio: seconds.map { ours.seconds / $0 }, note: note))
        }
        for (peer, reason) in missing {
            rows.append(
                CaseResult(
                    name: name, ours_s: ours.seconds, ours_rss_mib: mib(ours.rssKiB), ours_beyond_kdf_s: beyond,
                                   ours_session_s: session?.seconds, baseline: peer, note: "skipped: \(reason)"))
        }
        if rows.isEmpty {
            rows.append(
                CaseResult(
                    name: name, ours_s: ours.seconds, ours_rss_mib: mib(ours.rssKiB), ours_beyond_kdf_s: beyond,
                                   ours_session_s: session?.seconds, baseline: "none", note: "no peer selected"))
        }
        for index in rows.indices { rows[index].ours_session_rss_mib = session.map { mib($0.rssKiB) } }
        return rows
    }

    static func detect(work: URL, repeats: Int) -> Peers {
        var peers = Peers(available: [], missing: [], repeats: repeats)
        let gpgStore = PassStore(work: work)
        for (name, binary) in [("pass", "/usr/bin/pass"), ("gopass", "/usr/bin/gopass")] {
            guard FileManager.default.isExecutableFile(atPath: binary) else {
                peers.missing.append((name, "not installed (apt-get install \(name))"))
                continue
            }
            peers.available.append(PassLike(name: name, binary: binary, store: gpgStore))
        }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/keepassxc-cli") {
            peers.available.append(KeePassXC(work: work))
        } else {
            peers.missing.append(("keepassxc-cli", "not installed (apt-get install keepassxc)"))
        }
        return peers
    }
}

/// A pass store (shared by pass and gopass, which reads the same layout) with its own GnuPG home.
final class PassStore {
    let work: URL
    var populated = false
    init(work: URL) { self.work = work }

    var gnupg: URL { work.appendingPathComponent("gnupg") }
    var store: URL { work.appendingPathComponent("pass-store") }
    let key = "bench@mystash.invalid"
    var environment: [String: String] {
        [
            "HOME": work.path, "GNUPGHOME": gnupg.path, "PASSWORD_STORE_DIR": store.path, "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
        ]
    }

    func shell(_ script: String) throws {
        let (_, status, stderr) = try runTimed("/bin/sh", ["-c", script], environment: environment)
        guard status == 0 else { throw BenchError("'\(script.prefix(60))...' failed: \(stderr)") }
    }

    /// Fills the store once. Neither pass nor gopass can import in bulk, so the files are
    /// encrypted by one batched gpg call, exactly as `pass insert` would write them; not timed.
    func populate(_ data: BenchData) throws {
        guard !populated else { return }
        try? FileManager.default.removeItem(at: gnupg)
        try FileManager.default.createDirectory(
            at: gnupg, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try shell(
            "gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key \(key) default default never && pass "
                + "init \(key) >/dev/null"
        )
        let plain = URL(fileURLWithPath: "/dev/shm/stash-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: plain) }
        for folder in ["Passwords", "Notes"] {
            try FileManager.default.createDirectory(
                at: plain.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        for entry in data.entries {
            try "\(entry.password)\nuser: \(entry.user)\nurl: \(entry.url)\n".write(
                to: plain.appendingPathComponent("Passwords/\(entry.name)"), atomically: false, encoding: .utf8)
        }
        for (index, note) in data.notes.enumerated() {
            try "\(note.0)\n\(note.1)\n".write(
                to: plain.appendingPathComponent("Notes/note-\(index)"), atomically: false, encoding: .utf8)
        }
        try shell(
            "cd '\(plain.path)' && find . -type f -print0 | xargs -0 gpg --batch --yes --trust-model always -r \(key) "
                + "--encrypt-files && find . -type f ! -name '*.gpg' -delete && cp -r Passwords Notes '\(store.path)/'"
        )
        populated = true
    }
}

struct PassLike: Peer {
    let name: String
    let binary: String
    let store: PassStore

    func run(_ arguments: [String]) throws -> Measurement {
        let (measurement, status, stderr) = try runTimed(binary, arguments, environment: store.environment)
        guard status == 0 else {
            throw BenchError("\(name) \(arguments.joined(separator: " ")) failed (\(status)): \(stderr.prefix(200))")
        }
        return measurement
    }

    func importData(_ data: BenchData) throws -> Measurement? {
        try store.populate(data)
        return nil
    }

    func list() throws -> Measurement { try run(["ls"]) }
    func show(name: String) throws -> Measurement { try run(["show", "Passwords/\(name)"]) }
    func search(_ word: String) throws -> Measurement { try run(["grep", word]) }
    func unlock() throws -> Measurement? { nil }
}

struct KeePassXC: Peer {
    let name = "keepassxc-cli"
    let work: URL
    let password = "bench-master-password"
    var database: URL { work.appendingPathComponent("keepassxc.kdbx") }

    func run(_ arguments: [String], input: String) throws -> Measurement {
        let inputFile = work.appendingPathComponent("keepassxc-input")
        try input.write(to: inputFile, atomically: true, encoding: .utf8)
        let (measurement, status, stderr) = try runTimed(
            "/usr/bin/keepassxc-cli", arguments,
            environment: ["HOME": work.path, "PATH": "/usr/bin:/bin", "QT_QPA_PLATFORM": "offscreen"],
            stdinPath: inputFile.path)
        guard status == 0 else {
            throw BenchError("keepassxc-cli \(arguments.first ?? "") failed (\(status)): \(stderr.prefix(200))")
        }
        return measurement
    }

    func importData(_ data: BenchData) throws -> Measurement? {
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
        }
        func entry(_ fields: [(String, String)]) -> String {
            "<Entry>" + fields.map { "<String><Key>\($0.0)</Key><Value>\(escape($0.1))</Value></String>" }.joined()
                + "</Entry>"
        }
        var xml =
            "<?xml version=\"1.0\" "
                + "encoding=\"utf-8\"?><KeePassFile><Root><Group><Name>Root</Name><Group><Name>Passwords</Name>"
        xml += data.entries.map {
            entry([("Title", $0.name), ("UserName", $0.user), ("Password", $0.password), ("URL", $0.url)])
        }.joined()
        xml += "</Group><Group><Name>Notes</Name>"
        xml += data.notes.enumerated().map {
            entry([("Title", "note-\($0.offset)"), ("Notes", $0.element.0 + "\n" + $0.element.1)])
        }.joined()
        xml += "</Group></Group></Root></KeePassFile>"
        let xmlFile = work.appendingPathComponent("keepassxc.xml")
        try xml.write(to: xmlFile, atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(at: database)
        // The same KDF budget as mystash's calibrated default: 500 ms.
        return try run(
            ["import", "-q", "-p", "-t", "500", xmlFile.path, database.path], input: "\(password)\n\(password)\n")
    }

    func list() throws -> Measurement { try run(["ls", "-q", "-R", database.path], input: password + "\n") }
    func show(name: String) throws -> Measurement {
        try run(["show", "-q", "-s", database.path, "Passwords/\(name)"], input: password + "\n")
    }
    func search(_ word: String) throws -> Measurement {
        try run(["search", "-q", database.path, word], input: password + "\n")
    }
    func unlock() throws -> Measurement? { try run(["db-info", "-q", database.path], input: password + "\n") }
}
