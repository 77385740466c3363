import Foundation
import XCTest

/// `mystash health` on a vault of known problems, and its offline breach lists built with
/// coreutils' `sha1sum` and `sort`, as a user would from the downloads.
final class HealthCommandTests: CLITestCase {
    static let weak = "P@ssw0rd1"
    static let shared = "vG7#qL9!zR2@xW5k"
    static let unique = "pQ4$mN8&tY1*bH6j"
    static let ancient = "cX3%rK7^dS0(wF2e"

    /// mail (weak), bank and shop (sharing one), strong, and forum (imported, set in 2019).
    private func makeVault() throws {
        try initVault()
        try runOK(["password", "add", "mail"], stdin: Self.weak + "\n")
        try runOK(["password", "add", "bank"], stdin: Self.shared + "\n")
        try runOK(["password", "add", "shop"], stdin: Self.shared + "\n")
        try runOK(["password", "add", "strong"], stdin: Self.unique + "\n")
        let date = "2019-03-04T05:06:07.000Z"
        let export = """
        {"encrypted": false, "folders": [], "items": [{"type": 1, "name": "forum",
         "login": {"password": "\(Self.ancient)"}, "creationDate": "\(date)", "revisionDate": "\(date)"}]}
        """
        try runOK(["import", "--format", "bitwarden-json", "-"], stdin: export)
    }

    private func assertNoSecret(_ result: Result, file: StaticString = #filePath, line: UInt = #line) {
        for secret in [Self.weak, Self.shared, Self.unique, Self.ancient] {
            XCTAssertFalse(result.stdout.contains(secret) || result.stderr.contains(secret), secret, file: file, line: line)
        }
    }

    func testTheReportNamesWeakReusedAndOldEntriesAndNeverAPassword() throws {
        try makeVault()
        let result = try run(["health"])
        XCTAssertEqual(result.status, 2, result.stderr)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.first, "Weak passwords (1):")
        XCTAssertTrue(lines.contains { $0.hasPrefix("1   mail  ") && $0.hasSuffix("a common password (look-alike letters)") },
                      result.stdout)
        XCTAssertTrue(result.stdout.contains("Reused passwords (1 group):\n  bank (#2), shop (#3)\n"), result.stdout)
        XCTAssertTrue(result.stdout.contains("Old passwords (1, unchanged for 365 days or more):\n"), result.stdout)
        XCTAssertTrue(lines.contains { $0.hasPrefix("5   forum  2019-03-04") }, result.stdout)
        XCTAssertTrue(result.stdout.contains("Vault settings (1):\n  scrypt's cost is N=2^10, below the 2^"), result.stdout)
        XCTAssertEqual(lines.suffix(2), ["Checked 5 passwords: 1 weak, 2 reused, 1 old; 1 setting to change.", ""])
        assertNoSecret(result)

        let report = try XCTUnwrap(try json(try run(["health", "--json"]).stdout) as? [String: Any])
        let weak = try XCTUnwrap((report["weak"] as? [[String: Any]])?.first)
        XCTAssertEqual((weak["entry"] as? [String: Any])?["name"] as? String, "mail")
        XCTAssertLessThan(try XCTUnwrap(weak["score"] as? Int), 3)
        XCTAssertEqual(weak["patterns"] as? [String], ["commonPassword"])
        XCTAssertEqual(weak["substitutions"] as? Bool, true)
        XCTAssertLessThan(try XCTUnwrap(weak["bits"] as? Double), 20)
        let reused = try XCTUnwrap(report["reused"] as? [[[String: Any]]])
        XCTAssertEqual(reused.map { $0.compactMap { $0["id"] as? Int } }, [[2, 3]])
        let old = try XCTUnwrap((report["old"] as? [[String: Any]])?.first)
        XCTAssertGreaterThan(try XCTUnwrap(old["days"] as? Int), 365 * 7)
        XCTAssertTrue((old["since"] as? String)?.hasPrefix("2019-03-04T05:06:07") == true)
        let setting = try XCTUnwrap((report["settings"] as? [[String: Any]])?.first)
        XCTAssertEqual(setting["kind"] as? String, "scryptCost")
        XCTAssertEqual(setting["current"] as? Int, 10)
        XCTAssertNil(report["breached"], "no list was given")

        let lenient = try run(["health", "--json", "--max-age", "36500"])
        XCTAssertEqual(((try json(lenient.stdout) as? [String: Any])?["old"] as? [Any])?.count, 0)
        let refused = try run(["health", "--max-age", "0"])
        XCTAssertEqual(refused.status, 64)
        XCTAssertTrue(refused.stderr.contains("--max-age must be a number of days"), refused.stderr)
    }

    /// The SHA-1 of `text` in uppercase hex, by coreutils.
    private func sha1sum(_ text: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha1sum")
        return String(try execute(process, stdin: text).stdout.prefix(40)).uppercased()
    }

    func testBreachListsInBothLayoutsAreReadOfflineAndCountThePassword() throws {
        try makeVault()
        let hash = try sha1sum(Self.weak)
        XCTAssertEqual(hash.count, 40)
        // A range directory: the password's range file and a neighbour.
        let ranges = home.appendingPathComponent("pwned-ranges")
        try FileManager.default.createDirectory(at: ranges, withIntermediateDirectories: true)
        try Data("0A1B2C3D4E5F60718293A4B5C6D7E8F9012:7\r\n\(hash.dropFirst(5)):4242\r\n".utf8)
            .write(to: ranges.appendingPathComponent("\(hash.prefix(5)).txt"))
        try Data("0A1B2C3D4E5F60718293A4B5C6D7E8F9012:7\r\n".utf8).write(to: ranges.appendingPathComponent("00000.txt"))
        // One file ordered by hash: 500 hashes of other words and the password's, through sort(1).
        let words = (0..<500).map { "word \($0)\n" }.joined()
        let script = """
        while IFS= read -r line; do printf '%s' "$line" | sha1sum; done | tr a-f A-F | \
        awk '{ print $1 ":" NR }' > unsorted.txt
        echo '\(hash):4242' >> unsorted.txt
        LC_ALL=C sort unsorted.txt > pwned-sorted.txt
        """
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", script]
        shell.currentDirectoryURL = home
        XCTAssertEqual(try execute(shell, stdin: words).status, 0)

        for list in [ranges.path, home.appendingPathComponent("pwned-sorted.txt").path] {
            let result = try run(["health", "--json", "--breaches", list])
            XCTAssertEqual(result.status, 2, result.stderr)
            let breached = try XCTUnwrap((try json(result.stdout) as? [String: Any])?["breached"] as? [[String: Any]])
            XCTAssertEqual(breached.count, 1, list)
            XCTAssertEqual((breached.first?["entry"] as? [String: Any])?["name"] as? String, "mail", list)
            XCTAssertEqual(breached.first?["occurrences"] as? Int, 4242, list)
            let text = try run(["health", "--breaches", list])
            XCTAssertTrue(text.stdout.contains("Breached passwords (1):\n"), text.stdout)
            XCTAssertTrue(text.stdout.contains(", 1 breached;"), text.stdout)
            assertNoSecret(text)
        }

        // Nothing but files: no network socket is ever opened.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else { return }
        let trace = home.appendingPathComponent("trace.txt")
        let traced = process(["health", "--breaches", ranges.path])
        traced.arguments = ["-f", "-qq", "-e", "trace=socket,connect", "-o", trace.path, Self.binary.path]
            + (traced.arguments ?? [])
        traced.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        XCTAssertEqual(try execute(traced, stdin: nil).status, 2)
        let calls = try String(contentsOf: trace, encoding: .utf8)
        XCTAssertFalse(calls.contains("AF_INET"), calls)
    }

    func testABadBreachListIsRefusedBeforeTheVaultIsUnlocked() throws {
        try makeVault()
        let missing = try run(["health", "--breaches", home.appendingPathComponent("nowhere").path],
                              removing: ["MYSTASH_PASSWORD"])
        XCTAssertEqual(missing.status, 66)
        XCTAssertTrue(missing.stderr.contains("there is no breach list at"), missing.stderr)
        let notRanges = home.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: notRanges, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: notRanges.appendingPathComponent("notes.txt"))
        let wrongDirectory = try run(["health", "--breaches", notRanges.path], removing: ["MYSTASH_PASSWORD"])
        XCTAssertEqual(wrongDirectory.status, 65)
        XCTAssertTrue(wrongDirectory.stderr.contains("holds no range files"), wrongDirectory.stderr)
        let unsorted = home.appendingPathComponent("by-prevalence.txt")
        try Data("7C4A8D09CA3762AF61E59520943DC26494F8941B:24230577\n5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:1\n".utf8)
            .write(to: unsorted)
        let byPrevalence = try run(["health", "--breaches", unsorted.path], removing: ["MYSTASH_PASSWORD"])
        XCTAssertEqual(byPrevalence.status, 65)
        XCTAssertTrue(byPrevalence.stderr.contains("not ordered by hash"), byPrevalence.stderr)
        for result in [missing, wrongDirectory, byPrevalence] {
            XCTAssertFalse(result.stderr.contains("master password"), result.stderr)
            XCTAssertEqual(result.stdout, "")
        }
    }

    func testALongUnlockedSessionIsReportedAndAShortOneIsNot() throws {
        try makeVault()
        let unlocked = try run(["unlock", "--timeout", "5h"])
        guard unlocked.status == 0 else { throw XCTSkip("no kernel keyring here: \(unlocked.stderr)") }
        defer { _ = try? run(["lock"]) }
        func sessionSettings() throws -> [[String: Any]] {
            let result = try run(["health", "--json"], removing: ["MYSTASH_PASSWORD"])
            let settings = (try json(result.stdout) as? [String: Any])?["settings"] as? [[String: Any]] ?? []
            return settings.filter { $0["kind"] as? String == "sessionLifetime" }
        }
        let long = try sessionSettings()
        XCTAssertEqual(long.count, 1)
        XCTAssertGreaterThanOrEqual(long.first?["current"] as? Int ?? 0, 4 * 3600)
        XCTAssertEqual(long.first?["recommended"] as? Int, 3600)
        let text = try run(["health"], removing: ["MYSTASH_PASSWORD"]).stdout
        XCTAssertTrue(text.contains("the unlocked session has "), text)
        try runOK(["lock"])
        try runOK(["unlock", "--timeout", "10m"])
        XCTAssertEqual(try sessionSettings().count, 0)
    }
}

extension BrowseTests {
    func testF2ShowsTheHealthReportAndAnyOtherKeyClosesIt() throws {
        try addEntries()
        try runOK(["password", "add", "Mail"], stdin: "P@ssw0rd1")
        try runOK(["password", "add", "Shop"], stdin: "bank-secret-3")
        let tmux = try TmuxSession(browseCommand(), columns: 120, rows: 30)
        tmux.expect("Passwords (5)")
        tmux.send("F2")
        tmux.expect("Password health")
        tmux.expect("Weak passwords (")
        tmux.wait(for: "Mail among the weak, as a common password") { screen in
            screen.split(separator: "\n").contains { $0.contains("Mail") && $0.contains("a common password") }
        }
        tmux.expect("Reused passwords (1 group):")
        tmux.expect("Shop (#5), 漢字 Bank (#3)")
        tmux.expect("scrypt's cost is N=2^10")
        XCTAssertFalse(tmux.screen().contains("P@ssw0rd1"))
        XCTAssertFalse(tmux.screen().contains("bank-secret-3"))
        tmux.send("Down")
        tmux.wait(for: "the report scrolled by a line") { !$0.contains("Weak passwords (") }
        tmux.send("q")
        tmux.expectGone("Password health")
        tmux.expect("Passwords (5)")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }
}
