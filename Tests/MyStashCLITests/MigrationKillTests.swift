import Foundation
import XCTest

/// A version-1 vault killed (SIGKILL through strace fault injection) at a write or a sync
/// while mystash migrates and seeds it: the next open finishes the job and loses nothing.
final class MigrationKillTests: CLITestCase {
    func copyFixture() throws {
        try? FileManager.default.removeItem(at: vaultDirectory)
        _ = try installVersion1Vault()
    }

    /// The suite kills at a sample of points; MYSTASH_KILL_SWEEP=1 tries every one.
    func testKilledDuringMigrationTheNextOpenHasEverything() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else { throw XCTSkip("strace is not installed") }
        let password = ["MYSTASH_PASSWORD": "fixture-password"]
        let sweep = ProcessInfo.processInfo.environment["MYSTASH_KILL_SWEEP"] == "1"
        var killed = 0
        for (call, count) in [("pwrite64", 92), ("fdatasync", 18)] {
            for point in stride(from: 1, through: count, by: sweep ? 1 : 9) {
                try copyFixture()
                let strace = Process()
                strace.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
                strace.arguments = ["-f", "-o", "/dev/null", "-e", "trace=\(call)", "-e", "inject=\(call):signal=KILL:when=\(point)",
                                    Self.binary.path, "password", "list"]
                strace.environment = baseEnvironment.merging(password) { _, new in new }
                let result = try execute(strace, stdin: nil)
                if result.stderr.contains("+++ killed by SIGKILL") || result.status != 0 { killed += 1 }

                let list = try runOK(["password", "list", "--json"], environment: password)
                let names = (try json(list.stdout) as? [[String: Any]])?.compactMap { $0["name"] as? String }
                XCTAssertEqual(names, ["GitHub", "Mail", "Router"], "\(call) #\(point)")
                XCTAssertEqual(try runOK(["password", "show", "Router", "--field", "password"], environment: password).stdout,
                               "p@ss w0rd é\n", "\(call) #\(point)")
                XCTAssertEqual(try runOK(["note", "show", "Office"], environment: password).stdout,
                               "# Office\n\ndoor code 4711\nsecond line ü\n", "\(call) #\(point)")
                XCTAssertTrue(try runOK(["category", "list"], environment: password).stdout.contains("SSH Key"), "\(call) #\(point)")
                let check = try run(["check"], environment: password)
                XCTAssertEqual(check.status, 0, "\(call) #\(point): \(check.stdout)\(check.stderr)")
            }
        }
        XCTAssertGreaterThan(killed, 0, "the fault injection killed mystash")
    }
}
