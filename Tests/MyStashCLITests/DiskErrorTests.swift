import Foundation
import XCTest

/// The disk reporting EIO on a sync (strace's fault injection): before the commit, nothing is
/// saved and the message says so; on the last sync, after the commit, the change is in the vault
/// and the message says it was saved — before, both said "cannot save", exit 1.
final class DiskErrorTests: CLITestCase {
    func traced(_ arguments: [String], stdin: String, inject: String) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        process.arguments = ["-f", "-o", "/dev/null", "-e", inject, Self.binary.path] + arguments
        process.environment = baseEnvironment
        return try execute(process, stdin: stdin)
    }

    func testAnErrorOnTheLastSyncIsReportedAsSavedAndEarlierOnesAsNotSaved() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed (.ci/run installs it)")
        }
        try initVault()
        try runOK(["password", "add", "first"], stdin: "one\n")
        // How many fdatasync calls one add makes, counted by an add that succeeds.
        let log = home.appendingPathComponent("syncs.log")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        process.arguments = ["-f", "-o", log.path, "-e", "trace=fdatasync", Self.binary.path, "password", "add", "probe"]
        process.environment = baseEnvironment
        XCTAssertEqual(try execute(process, stdin: "three\n").status, 0)
        let syncs = try String(contentsOf: log, encoding: .utf8).components(separatedBy: "fdatasync(").count - 1
        XCTAssertGreaterThan(syncs, 2)

        let last = try traced(["password", "add", "late"], stdin: "four\n",
                              inject: "inject=fdatasync:error=EIO:when=\(syncs)")
        XCTAssertEqual(last.status, 74, last.stderr)
        XCTAssertTrue(last.stderr.contains("the change was saved, but the disk reported an error while syncing"),
                      last.stderr)
        XCTAssertEqual(try runOK(["password", "show", "late", "--field", "password"]).stdout, "four\n")

        let first = try traced(["password", "add", "early"], stdin: "five\n", inject: "inject=fdatasync:error=EIO:when=1")
        XCTAssertEqual(first.status, 74, first.stderr)
        XCTAssertTrue(first.stderr.contains("the disk reported an error"), first.stderr)
        XCTAssertFalse(first.stderr.contains("was saved"), first.stderr)
        XCTAssertEqual(try run(["password", "show", "early"]).status, 66)
        XCTAssertEqual(try run(["check"]).status, 0)
    }
}
