import Foundation
@testable import MyStashKit
import ObjectGraph
import XCTest

/// Kills and starves mystash at its system calls (strace fault injection) and runs it on a
/// vault it cannot write: a crash leaves the vault as it was or as the command made it, also
/// once moved; reading never writes; a full disk fails with 73 and changes nothing.
final class CrashSafetyTests: CLITestCase {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let strace = ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let readingCommands = [["note", "list"], ["note", "show", "Wi-Fi"], ["note", "search", "router"],
                                  ["password", "list"], ["password", "show", "mail"], ["password", "search", "mail"],
                                  ["category", "list"], ["export"], ["check"]]

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard Self.strace != nil else { throw XCTSkip("strace is not installed (.ci/run installs it)") }
    }

    /// Runs mystash under strace with `options` (an injection).
    func runTraced(_ options: [String], _ arguments: [String], stdin: String? = nil) throws -> Result {
        let traced = process(arguments)
        traced.executableURL = URL(fileURLWithPath: Self.strace!)
        traced.arguments = ["-qq", "-o", "/dev/null"] + options + [Self.binary.path] + arguments
        return try run(traced, stdin: stdin)
    }

    func run(_ process: Process, stdin: String?) throws -> Result {
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let input = Pipe()
        if stdin != nil { process.standardInput = input }
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        nonisolated(unsafe) var errData = Data()  // written once before group.leave(), read after wait()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            errData = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }

    func makeVault() throws {
        try initVault()
        try runOK(["note", "add", "Wi-Fi"], stdin: "the code is on the router\n")
        try runOK(["password", "add", "mail", "--user", "me", "--category", "E-mail"], stdin: "hunter2\n")
    }

    /// Names, sizes and bytes of everything in the vault directory.
    func snapshot() throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: vaultDirectory.path) {
            files[name] = try Data(contentsOf: vaultDirectory.appendingPathComponent(name))
        }
        return files
    }

    /// How often `arguments` calls `syscall` in mystash's main thread.
    func count(_ syscall: String, _ arguments: [String], stdin: String?) throws -> Int {
        let trace = home.appendingPathComponent("trace")
        let traced = process(arguments)
        traced.executableURL = URL(fileURLWithPath: Self.strace!)
        traced.arguments = ["-qq", "-o", trace.path, "-e", "trace=\(syscall)", Self.binary.path] + arguments
        XCTAssertEqual(try run(traced, stdin: stdin).status, 0)
        let lines = try String(contentsOf: trace, encoding: .utf8).split(separator: "\n")
        return lines.filter { $0.hasPrefix(syscall + "(") }.count
    }

    /// Makes the vault read-only to whoever reads it next: root writes anywhere, so as root the
    /// vault goes to an unprivileged user; returns what runs a command as that user (or nothing).
    func makeVaultReadOnly() throws -> [String] {
        var wrapper: [String] = []
        if geteuid() == 0 {
            try changeOwner(of: home, to: "65534:65534")
            wrapper = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        }
        for store in [".", "Notes.sqlite", "Passwords.sqlite"] {
            let mode = store == "." ? 0o500 : 0o400
            let path = vaultDirectory.appendingPathComponent(store).path
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        }
        return wrapper
    }

    /// Runs mystash through `wrapper`, as ``makeVaultReadOnly()`` returns it.
    func run(_ command: [String], through wrapper: [String], environment: [String: String] = [:],
             stdin: String? = nil) throws -> Result {
        let reader = process(command, environment: environment)
        if !wrapper.isEmpty {
            reader.executableURL = URL(fileURLWithPath: wrapper[0])
            reader.arguments = Array(wrapper.dropFirst()) + [Self.binary.path] + command
        }
        return try run(reader, stdin: stdin)
    }

    func changeOwner(of directory: URL, to owner: String) throws {
        let chown = Process()
        chown.executableURL = URL(fileURLWithPath: "/bin/chown")
        chown.arguments = ["-R", owner, directory.path]
        try chown.run()
        chown.waitUntilExit()
        XCTAssertEqual(chown.terminationStatus, 0)
    }

    // MARK: - Item 1: a sample of scripts/crash-sweep (the full sweep is the script alone)

    func testSampleOfTheCrashSweepKillsAtWritesAndVaultsRecoverInPlaceAndMoved() throws {
        // Sync and clone make hundreds of writes each (and a remote): a sparser sample of them.
        let samples = [
            (every: 5, scenarios: ["note-add", "password-edit", "category-rm", "passwd", "rekey", "init",
                                   "open-v1-fixture"]),
            (every: 30, scenarios: ["sync", "clone"]),
        ]
        for sample in samples {
            let sweep = Process()
            sweep.executableURL = Self.repository.appendingPathComponent("scripts/crash-sweep")
            sweep.arguments = ["--every", String(sample.every)] + sample.scenarios
            sweep.environment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "MYSTASH_BIN": Self.binary.path]
            let result = try run(sweep, stdin: nil)
            XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
            let summaries = result.stdout.split(separator: "\n").filter { $0.contains("injections") }
            XCTAssertEqual(summaries.count, sample.scenarios.count, result.stdout)
            for line in summaries {
                let counts = line.components(separatedBy: "injections ").last ?? ""
                let numbers = counts.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
                XCTAssertGreaterThan(numbers[0], 2, String(line))
                XCTAssertEqual(numbers[0], numbers[1], "every injection killed mystash: \(line)")
                XCTAssertEqual(numbers.last, 0, String(line))
            }
        }
    }

    func testStaleJournalFilesAreRemovedByTheNextOpenOrReportedByCheck() throws {
        try makeVault()
        let stale = ["Notes.sqlite-mj0123AB9CD": Data("Passwords.sqlite-journal\0".utf8),
                     "Passwords.sqlite-journal": Data(count: 512)]
        for (name, contents) in stale {
            let path = vaultDirectory.appendingPathComponent(name).path
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: contents, attributes: [.posixPermissions: 0o600]))
        }
        // Where they cannot be removed, check names them.
        var wrapper: [String] = []
        if geteuid() == 0 {
            try changeOwner(of: home, to: "65534:65534")
            wrapper = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: vaultDirectory.path)
        let checker = process(["check"])
        if !wrapper.isEmpty {
            checker.executableURL = URL(fileURLWithPath: wrapper[0])
            checker.arguments = Array(wrapper.dropFirst()) + [Self.binary.path, "check"]
        }
        let reported = try run(checker, stdin: nil)
        XCTAssertEqual(reported.status, 65, reported.stdout + reported.stderr)
        let report = reported.stdout + reported.stderr
        for name in stale.keys { XCTAssertTrue(report.contains(name), report) }
        // The next open that can write removes them: neither was ever needed by a store.
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: vaultDirectory.path)
        if geteuid() == 0 { try changeOwner(of: home, to: "0:0") }
        try runOK(["note", "list"])
        let remaining = try FileManager.default.contentsOfDirectory(atPath: vaultDirectory.path).sorted()
        XCTAssertEqual(remaining, ["Notes.sqlite", "Passwords.sqlite"])
        try runOK(["check"])
    }

    /// The journal of a save another process is making is live: check, reading beside it, does
    /// not report it as left over (it did, with a hint to restore from a backup).
    func testCheckDuringAnotherProcesssSaveReportsNoJournal() throws {
        try makeVault()
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        writer.arguments = [vaultDirectory.appendingPathComponent("Passwords.sqlite").path]
        let input = Pipe(), output = Pipe()
        writer.standardInput = input
        writer.standardOutput = output
        try writer.run()
        // A save under way: the write lock held, a page changed, the journal written; not committed.
        input.fileHandleForWriting.write(Data("""
            BEGIN IMMEDIATE;
            UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX WHERE Z_ENT = 1;
            UPDATE Z_METADATA SET Z_VERSION = Z_VERSION;
            SELECT 'journal-written';

            """.utf8))
        var said = Data()
        while !String(decoding: said, as: UTF8.self).contains("journal-written") {
            let chunk = output.fileHandleForReading.availableData
            XCTAssertFalse(chunk.isEmpty, "sqlite3 ended early")
            if chunk.isEmpty { break }
            said += chunk
        }
        XCTAssertTrue(FileManager.default.fileExists(
            atPath: vaultDirectory.appendingPathComponent("Passwords.sqlite-journal").path))
        let check = try run(["check"])
        input.fileHandleForWriting.write(Data("ROLLBACK;\n.quit\n".utf8))
        writer.waitUntilExit()
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        XCTAssertFalse((check.stdout + check.stderr).contains("journal"), check.stdout)
    }

    // MARK: - Item 5: reading never writes

    /// Makes the next open want to load the seed lists again, a write that reading must skip.
    /// Makes the vault's seed list older than the binary's, as mystash itself would have left
    /// it (an outside edit would rightly be reported by the integrity record): the next
    /// unlocking command wants to write.
    func forgetSeedVersion() throws {
        let vault = try Vault.open(at: vaultDirectory)
        try vault.unlock(password: .password("pw"))
        try vault.change {
            for list in try vault.context.fetch(FetchRequest<SeedList>()) { list["version"] = 0 }
        }
    }

    func testReadingCommandsWorkOnAFullDiskAndWriteNothing() throws {
        try makeVault()
        let expected = try Self.readingCommands.map { try runOK($0).stdout }
        try forgetSeedVersion()
        let before = try snapshot()
        let full = ["-e", "trace=pwrite64,fdatasync,fsync,ftruncate,fallocate,rename,unlink",
                    "-e", "inject=pwrite64,ftruncate,fallocate:error=ENOSPC",
                    "-e", "inject=fdatasync,fsync:error=ENOSPC"]
        for (command, output) in zip(Self.readingCommands, expected) {
            let result = try runTraced(full, command)
            XCTAssertEqual(result.status, 0, "\(command) on a full disk: \(result.stderr)")
            XCTAssertEqual(result.stdout, output, "\(command)")
        }
        XCTAssertEqual(try snapshot(), before)
    }

    func testReadingCommandsWorkOnAReadOnlyVault() throws {
        try makeVault()
        let expected = try Self.readingCommands.map { try runOK($0).stdout }
        try forgetSeedVersion()
        let before = try snapshot()
        let wrapper = try makeVaultReadOnly()
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: vaultDirectory.path) }
        for (command, output) in zip(Self.readingCommands, expected) {
            let result = try run(command, through: wrapper)
            XCTAssertEqual(result.status, 0, "\(command) on a read-only vault: \(result.stderr)")
            XCTAssertEqual(result.stdout, output, "\(command)")
        }
        // A write is refused with a clear message and changes nothing.
        let refused = try run(["note", "add", "New"], through: wrapper, stdin: "text\n")
        XCTAssertEqual(refused.status, 77, refused.stderr)
        XCTAssertEqual(try snapshot(), before)
    }

    /// A vault of the last release, first opened by this one on a full disk or a read-only vault:
    /// read as its record says, nothing written (its history is covered at the next opening that
    /// can write). The first release to cover the history wrote at that opening, and refused both.
    func testAVaultOfTheLastReleaseIsReadOnAFullDiskAndAReadOnlyVault() throws {
        let commands = [["password", "show", "GitHub", "--field", "user"], ["password", "list"],
                        ["note", "show", "After sync"], ["export"]]
        try? FileManager.default.removeItem(at: vaultDirectory)
        let password = try installFixtureVault("vault-v5-synced")
        let before = try snapshot()
        let full = ["-e", "trace=pwrite64,fdatasync,fsync,ftruncate,fallocate,rename,unlink",
                    "-e", "inject=pwrite64,ftruncate,fallocate:error=ENOSPC",
                    "-e", "inject=fdatasync,fsync:error=ENOSPC"]
        var outputs: [String] = []
        for command in commands {
            let traced = process(command, environment: password)
            traced.executableURL = URL(fileURLWithPath: Self.strace!)
            traced.arguments = ["-qq", "-o", "/dev/null"] + full + [Self.binary.path] + command
            let result = try run(traced, stdin: nil)
            XCTAssertEqual(result.status, 0, "\(command) on a full disk: \(result.stderr)")
            outputs.append(result.stdout)
        }
        XCTAssertEqual(outputs[0], "grace\n")
        XCTAssertEqual(try snapshot(), before)

        let wrapper = try makeVaultReadOnly()
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: vaultDirectory.path) }
        for (command, output) in zip(commands, outputs) {
            let result = try run(command, through: wrapper, environment: password)
            XCTAssertEqual(result.status, 0, "\(command) on a read-only vault: \(result.stderr)")
            XCTAssertEqual(result.stdout, output, "\(command)")
        }
        XCTAssertEqual(try snapshot(), before)
    }

    func testWritesOnAFullDiskFailWith73AtEveryWriteAndChangeNothing() throws {
        try makeVault()
        let before = try runOK(["export"]).stdout
        let cases: [([String], String?)] = [(["note", "add", "Third"], "text\n"),
                                           (["password", "edit", "mail", "--user", "other"], nil),
                                           (["passwd", "--rekey", "--kdf-cost", "10"], nil)]
        var injections = 0
        for (command, stdin) in cases {
            // Counted on a copy, so the vault under test stays as it was.
            let copy = home.appendingPathComponent("copy")
            try? FileManager.default.removeItem(at: copy)
            try FileManager.default.copyItem(at: vaultDirectory, to: copy)
            let writes = try count("pwrite64", command + ["--vault", copy.path], stdin: stdin)
            XCTAssertGreaterThan(writes, 0)
            for call in 1...writes {
                let injection = ["-e", "trace=pwrite64", "-e", "inject=pwrite64:error=ENOSPC:when=\(call)"]
                let result = try runTraced(injection, command, stdin: stdin)
                XCTAssertEqual(result.status, 73, "\(command), write \(call) failing: \(result.stderr)")
                XCTAssertTrue(result.stderr.contains("the disk is full; nothing was saved"), result.stderr)
                XCTAssertEqual(try runOK(["export"]).stdout, before, "\(command), write \(call) failing")
                injections += 1
            }
        }
        try runOK(["check"])
        XCTAssertGreaterThan(injections, 20)
    }
}
