import Foundation
import MyStashKit
import StashCrypto

/// The sync cases: `mystash sync` and `mystash clone` on a realistic vault, two machines (two
/// HOMEs, each with an unlocked session) and a local bare repository, each against git alone
/// doing the same work in the same run: the git commands a sync with nothing to do runs; a
/// commit and push, and a pull, of one changed file per changed entry in a repository of one
/// file per item (how pass keeps a store in git); a clone.
struct SyncBench {
    static let names = ["sync.nothing", "sync.send1k", "sync.receive1k", "sync.clone", "sync.cloneHistory"]

    let work: URL
    let size: Int
    let repeats: Int
    let mystash: String
    /// How many transactions (one saved edit each) the history of `sync.cloneHistory` holds at each step.
    let histories: [Int]
    let password = "bench-master-password"
    var results: [CaseResult] = []

    var remote: URL { work.appendingPathComponent("remote.git") }
    var plain: URL { work.appendingPathComponent("plain.git") }
    func home(_ machine: String) -> URL { work.appendingPathComponent("home-\(machine)") }
    func vault(_ machine: String) -> URL { home(machine).appendingPathComponent("vault") }

    func environment(_ machine: String, password: Bool = false) -> [String: String] {
        var variables = ["HOME": home(machine).path, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                         "MYSTASH_VAULT": vault(machine).path]
        if password {
            variables["MYSTASH_PASSWORD"] = self.password
            variables["MYSTASH_NEW_PASSWORD"] = self.password
        }
        return variables
    }

    @discardableResult
    func mystash(_ machine: String, _ arguments: [String], password: Bool = false) throws -> Measurement {
        let (measurement, status, stderr) = try runTimed(mystash, arguments,
                                                         environment: environment(machine, password: password))
        guard status == 0 else {
            throw BenchError("\(machine): mystash \(arguments.joined(separator: " ")) failed (\(status)): \(stderr)")
        }
        return measurement
    }

    /// A shell script, for the git baselines.
    @discardableResult
    func shell(_ script: String, in directory: URL? = nil) throws -> Measurement {
        let cd = directory.map { "cd '\($0.path)' && " } ?? ""
        let (measurement, status, stderr) = try runTimed(
            "/bin/sh", ["-c", "set -e; " + cd + script],
            environment: ["HOME": home("git").path, "PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "bench",
                          "GIT_AUTHOR_EMAIL": "bench@invalid", "GIT_COMMITTER_NAME": "bench",
                          "GIT_COMMITTER_EMAIL": "bench@invalid"])
        guard status == 0 else { throw BenchError("sh -c '\(script)' failed (\(status)): \(stderr)") }
        return measurement
    }

    func row(_ name: String, ours: [Measurement], baseline: String, base: [Measurement]) -> CaseResult {
        let mib = { (runs: [Measurement]) in Double(runs.map(\.rssKiB).max() ?? 0) / 1024 }
        let (oursSeconds, baseSeconds) = (median(ours.map(\.seconds)), median(base.map(\.seconds)))
        log("\(name) \(size): \(format(oursSeconds)) s, \(baseline) \(format(baseSeconds)) s")
        return CaseResult(name: name, ours_s: oursSeconds, ours_rss_mib: mib(ours), baseline: baseline,
                          baseline_s: baseSeconds, baseline_rss_mib: mib(base), ratio: oursSeconds / baseSeconds)
    }

    /// Changes the password of `count` entries, each in its own save, in this process.
    func edit(_ machine: String, count: Int, round: Int, syncingEvery: Int? = nil) throws {
        let vault = try Vault.open(at: vault(machine))
        try vault.unlock(password: SecretBytes(copying: Array(password.utf8)))
        for index in 0..<count {
            // By ID: finding an entry by its encrypted name reads them all.
            let entry = Int64((round * count + index) % size + 1)
            let password = "round-\(round)-\(index)-\(UUID().uuidString)"
            try vault.items.editEntry(.id(entry), EntryChanges(password: password))
            if let every = syncingEvery, (index + 1) % every == 0 { _ = try vault.sync() }
        }
    }

    mutating func run(selected: (String) -> Bool) throws {
        for machine in ["a", "b", "git"] {
            try FileManager.default.createDirectory(at: home(machine), withIntermediateDirectories: true)
        }
        let data = RealisticData(size: size, searchWord: VaultBench.searchWord)
        let dataFile = work.appendingPathComponent("data.json")
        try data.mystashJSON().write(to: dataFile)
        try mystash("a", ["init", "--kdf-cost", "15"], password: true)
        try mystash("a", ["import", dataFile.path, "--format", "mystash-json"], password: true)
        try mystash("a", ["unlock", "--timeout", "2h"], password: true)
        try shell("git init -q --bare '\(remote.path)'")
        let first = try mystash("a", ["sync", "--remote", remote.path, "--device-name", "a"])
        log("sync.first \(size): \(format(first.seconds)) s, \(first.rssKiB / 1024) MiB")

        // The same items as files in a plain git repository, for git alone: one file an item.
        let checkout = work.appendingPathComponent("plain-a")
        try FileManager.default.createDirectory(at: checkout, withIntermediateDirectories: true)
        for (index, entry) in data.entries.enumerated() {
            try Data("\(entry.password)\nuser: \(entry.user)\nurl: \(entry.url)\n".utf8)
                .write(to: checkout.appendingPathComponent("entry-\(index)"))
        }
        for (index, note) in data.notes.enumerated() {
            try Data("\(note.title)\n\(note.text)\n".utf8).write(to: checkout.appendingPathComponent("note-\(index)"))
        }
        try shell("git init -q --bare '\(plain.path)' && git init -q -b main && git add -A && git commit -q -m all "
                  + "&& git push -q '\(plain.path)' main", in: checkout)

        if selected("sync.clone") {
            var clones: [Measurement] = []
            var gitClones: [Measurement] = []
            for run in 0..<repeats {
                let target = work.appendingPathComponent("clone-\(run)")
                clones.append(try mystash("a", ["clone", remote.path, "--vault", target.path, "--device-name", "c"],
                                          password: true))
                try FileManager.default.removeItem(at: target)
                let plainTarget = work.appendingPathComponent("plain-clone-\(run)")
                gitClones.append(try shell("git clone -q --no-local '\(plain.path)' '\(plainTarget.path)'"))
                try FileManager.default.removeItem(at: plainTarget)
            }
            results.append(row("sync.clone", ours: clones, baseline: "git clone of one file an item",
                               base: gitClones))
        }
        try mystash("b", ["clone", remote.path, "--device-name", "b"], password: true)
        try mystash("b", ["unlock", "--timeout", "2h"], password: true)
        let plainB = work.appendingPathComponent("plain-b")
        try shell("git clone -q '\(plain.path)' '\(plainB.path)'")

        if selected("sync.nothing") {
            // The commands a sync with nothing to do runs: ls-remote, fetch, ls-tree, cat-file.
            let cache = vault("a").appendingPathComponent("sync.git").path
            let git = "git --git-dir='\(cache)'"
            let alone = "\(git) ls-remote --exit-code '\(remote.path)' refs/heads/main >/dev/null; "
                + "\(git) fetch -q --no-tags '\(remote.path)' +refs/heads/main:refs/remotes/origin/main; "
                + "\(git) ls-tree -r -z refs/remotes/origin/main >/dev/null; "
                + "printf 'refs/remotes/origin/main:MYSTASH-SYNC\\n' | \(git) cat-file --batch >/dev/null"
            var ours: [Measurement] = []
            var base: [Measurement] = []
            for _ in 0..<repeats {
                ours.append(try mystash("a", ["sync"]))
                base.append(try shell(alone))
            }
            results.append(row("sync.nothing", ours: ours, baseline: "the same git commands alone", base: base))
        }

        if selected("sync.send1k") || selected("sync.receive1k") {
            var (sent, received, pushed, pulled) = ([Measurement](), [Measurement](), [Measurement](), [Measurement]())
            for round in 0..<repeats {
                try edit("a", count: 1_000, round: round)
                sent.append(try mystash("a", ["sync"]))
                received.append(try mystash("b", ["sync"]))
                let changes = (0..<1_000).map { "echo 'round \(round) change \($0)' >> entry-\(($0 * 7) % size)" }
                try shell(changes.joined(separator: "; "), in: checkout)
                pushed.append(try shell("git add -A && git commit -q -m change && git push -q '\(plain.path)' main",
                                        in: checkout))
                pulled.append(try shell("git pull -q origin main", in: plainB))
            }
            results.append(row("sync.send1k", ours: sent, baseline: "git commit and push of 1,000 files",
                               base: pushed))
            results.append(row("sync.receive1k", ours: received, baseline: "git pull of 1,000 files", base: pulled))
        }

        if selected("sync.cloneHistory") {
            // Transactions of one edit each, synced every 100, then a clone timed at each step.
            var done = 0
            var smaller: Double?
            for total in histories.sorted() where total > done {
                log("sync.cloneHistory \(size): making a history of \(total) transactions")
                try edit("a", count: total - done, round: 1_000 + done, syncingEvery: 100)
                try mystash("a", ["sync"])
                done = total
                var clones: [Measurement] = []
                var gitClones: [Measurement] = []
                for run in 0..<min(repeats, 3) {
                    let target = work.appendingPathComponent("history-clone-\(run)")
                    clones.append(try mystash("a", ["clone", remote.path, "--vault", target.path], password: true))
                    try FileManager.default.removeItem(at: target)
                    let bare = work.appendingPathComponent("history-git-clone-\(run)")
                    // --no-local: through git's transport, as mystash's fetch goes, not hard links.
                    gitClones.append(try shell("git clone -q --no-local --bare '\(remote.path)' '\(bare.path)'"))
                    try FileManager.default.removeItem(at: bare)
                }
                var result = row("sync.cloneHistory \(Self.historyLabel(total))", ours: clones,
                                 baseline: "git clone of the same remote", base: gitClones)
                result.slope = smaller.map { result.ours_s / $0 }
                smaller = result.ours_s
                results.append(result)
            }
        }
        try? mystash("a", ["lock"])
        try? mystash("b", ["lock"])
    }

    static func historyLabel(_ count: Int) -> String { count % 1000 == 0 ? "\(count / 1000)k tx" : "\(count) tx" }
}
