import Foundation
import XCTest

/// Processes started together against a vault whose write lock an outside sqlite3 holds
/// until every one of them is seen waiting for it (a busy-wait sleep, under strace); then
/// they run at once, reading and writing in whatever order the machine gives. Whatever the
/// order, delete rules, relationship targets and unique category names hold, because they
/// are checked again inside each write transaction. Each test runs several rounds.
final class RelationalRaceTests: CLITestCase {
    struct Finished {
        var arguments: [String]
        var status: Int32
        var stderr: String
    }

    /// Runs `commands` so that each has read the vault and waits for the write lock before
    /// any of them may write; returns how each ended.
    /// An sqlite3 process holding the write lock of Passwords.sqlite until `release`.
    final class LockHolder {
        let process = Process()
        let input = Pipe()

        init(_ store: URL) throws {
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
            process.arguments = [store.path]
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            input.fileHandleForWriting.write(Data("BEGIN IMMEDIATE;\nSELECT 'locked';\n".utf8))
            var said = Data()
            while !String(decoding: said, as: UTF8.self).contains("locked") {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else {
                    XCTFail("sqlite3 did not take the lock")
                    break
                }
                said += chunk
            }
        }

        /// Runs `sql` in the held transaction, commits and ends.
        func release(after sql: String = "") throws {
            input.fileHandleForWriting.write(Data("\(sql)\nCOMMIT;\n.quit\n".utf8))
            try input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    /// Waits until the traced process sleeps in SQLite's busy handler: it waits for the write lock.
    /// Waits until `process` sleeps (SQLite's busy handler) after the first `offset` bytes of its trace.
    func waitUntilWaitingForTheLock(_ process: Process, log: URL, after offset: Int = 0,
                                    deadline: Date = Date().addingTimeInterval(120)) {
        func traced() -> String {
            String(decoding: ((try? Data(contentsOf: log)) ?? Data()).dropFirst(offset), as: UTF8.self)
        }
        while !traced().contains("nanosleep") {
            guard process.isRunning, Date() < deadline else {
                return XCTFail("mystash ended or never waited for the lock")
            }
            usleep(10_000)
        }
    }

    /// Stops `pid` (SIGSTOP) in a sleep of SQLite's busy handler at which it holds no file lock:
    /// stopped holding one (a read lock kept while it waits to write), it would block every other
    /// writer. Until then it is let go on to its next sleep.
    func stopWhileWaitingAndHoldingNoLock(_ process: Process, pid: pid_t, log: URL, after offset: Int) throws {
        var offset = offset
        let deadline = Date().addingTimeInterval(120)
        while true {
            guard Date() < deadline else {
                return XCTFail("mystash never waited for the write lock without holding a file lock")
            }
            waitUntilWaitingForTheLock(process, log: log, after: offset, deadline: deadline)
            XCTAssertEqual(kill(pid, SIGSTOP), 0)
            while try !isStopped(pid) { sched_yield() }
            guard try holdsFileLocks(pid) else { return }
            offset = (try? Data(contentsOf: log))?.count ?? offset
            XCTAssertEqual(kill(pid, SIGCONT), 0)
        }
    }

    func isStopped(_ pid: pid_t) throws -> Bool {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The state follows the command name, which is in parentheses: T, or t under strace.
        return ["T", "t"].contains(stat.split(separator: ")").last?.split(separator: " ").first)
    }

    /// Whether `/proc/locks` lists a lock of `pid` (SQLite's are POSIX record locks).
    func holdsFileLocks(_ pid: pid_t) throws -> Bool {
        try String(contentsOfFile: "/proc/locks", encoding: .utf8).split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[1] != "->" && fields[4] == "\(pid)"
        }
    }

    /// mystash traced for sleeps (its main thread only: an editor's own sleeps do not count).
    func tracedProcess(_ arguments: [String], log: URL, environment: [String: String] = [:]) throws -> Process {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        process.arguments =
            ["-qq", "-e", "trace=nanosleep,clock_nanosleep", "-o", log.path, Self.binary.path] + arguments
        process.environment = baseEnvironment.merging(
            environment.merging(["MYSTASH_BUSY_TIMEOUT": "120"]) { old, _ in old }
        ) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        return process
    }

    func raceAtTheWriteLock(_ commands: [(arguments: [String], stdin: String?)]) throws -> [Finished] {
        let holder = try LockHolder(vaultDirectory.appendingPathComponent("Passwords.sqlite"))

        var running: [(Process, Pipe, URL, [String])] = []
        for (index, command) in commands.enumerated() {
            let log = home.appendingPathComponent("strace-\(index).log")
            try? FileManager.default.removeItem(at: log)
            let process = try tracedProcess(command.arguments, log: log)
            let (input, errors) = (Pipe(), Pipe())
            process.standardInput = command.stdin == nil ? FileHandle.nullDevice : input
            process.standardError = errors
            try process.run()
            if let stdin = command.stdin {
                input.fileHandleForWriting.write(Data(stdin.utf8))
                try input.fileHandleForWriting.close()
            }
            running.append((process, errors, log, command.arguments))
        }
        for (process, _, log, _) in running { waitUntilWaitingForTheLock(process, log: log) }
        try holder.release()
        return running.map { process, errors, _, arguments in
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return Finished(arguments: arguments, status: process.terminationStatus, stderr: stderr)
        }
    }

    func entry(_ name: String) throws -> [String: Any] {
        try XCTUnwrap(try json(try runOK(["password", "show", name, "--json"]).stdout) as? [String: Any])
    }

    func categoryNames() throws -> [String] {
        try XCTUnwrap(try json(try runOK(["category", "list", "--json"]).stdout) as? [[String: Any]]).compactMap {
            $0["name"] as? String
        }
    }

    static let rounds = 4

    /// The edit has read the category and waits for the write lock when another mystash
    /// removes the category: the edit must fail, not save a reference to nothing. The edit is
    /// held at its editor until an outside sqlite3 holds the lock of Notes.sqlite (which every
    /// save takes first), then stopped (SIGSTOP) while it waits, so the removal runs whole.
    func testAnEditWhoseCategoryIsRemovedBeforeItWritesSavesNothing() throws {
        try initVault()
        try runOK(["category", "add", "Travel"])
        try runOK(
            ["password", "add", "Airline", "--edit-notes"], stdin: "fly\n",
            environment: ["EDITOR": "printf 'seat 12A' >"], terminal: true)
        let (ready, go) = (home.appendingPathComponent("ready"), home.appendingPathComponent("go"))
        let editor = home.appendingPathComponent("gate.sh")
        try """
        #!/bin/sh
        pid=$PPID
        while [ "$(cat /proc/$pid/comm)" != mystash ]; do pid=$(cut -d' ' -f4 /proc/$pid/stat); done
        echo $pid > '\(ready.path).tmp' && mv '\(ready.path).tmp' '\(ready.path)'
        while [ ! -e '\(go.path)' ]; do sleep 0.02; done
        printf 'seat 14C' > "$1"
        """.write(to: editor, atomically: true, encoding: .utf8)
        chmod(editor.path, 0o700)
        let log = home.appendingPathComponent("edit.log")
        let edit = try tracedProcess(
            ["password", "edit", "Airline", "--category", "Travel", "--edit-notes"], log: log,
            environment: ["EDITOR": editor.path])
        try giveTerminal(to: edit, stdin: nil)
        let errors = Pipe()
        edit.standardError = errors
        try edit.run()
        let deadline = Date().addingTimeInterval(120)
        while !FileManager.default.fileExists(atPath: ready.path), edit.isRunning, Date() < deadline { usleep(10_000) }
        let pid = try XCTUnwrap(
            pid_t(try String(contentsOf: ready, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        let holder = try LockHolder(vaultDirectory.appendingPathComponent("Notes.sqlite"))
        // Only a wait after the editor counts: the one for the save's write lock.
        let traceBeforeTheSave = (try? Data(contentsOf: log))?.count ?? 0
        _ = FileManager.default.createFile(atPath: go.path, contents: nil)
        try stopWhileWaitingAndHoldingNoLock(edit, pid: pid, log: log, after: traceBeforeTheSave)
        try holder.release()
        try runOK(["category", "rm", "Travel"])
        XCTAssertEqual(kill(pid, SIGCONT), 0)
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        edit.waitUntilExit()
        XCTAssertEqual(edit.terminationStatus, 75, said)
        XCTAssertTrue(said.contains("nothing was saved"), said)
        XCTAssertFalse(said.contains("Saved."), said)
        let airline = try entry("Airline")
        XCTAssertNil(airline["category"])
        XCTAssertEqual(airline["notes"] as? String, "seat 12A", "nothing of the edit was saved")
        try runOK(["check"])
    }

    func testCategoryRemovedWhileAnEntryMovesIntoItLeavesNoEntryPointingNowhere() throws {
        try initVault()
        try runOK(["password", "add", "Airline"], stdin: "fly\n")
        var outcomes: [String: Int] = [:]
        for round in 1...Self.rounds {
            let name = "Travel\(round)"
            try runOK(["category", "add", name])
            let results = try raceAtTheWriteLock([
                (["password", "edit", "Airline", "--category", name], nil), (["category", "rm", name], nil),
            ])
            let (edit, remove) = (results[0], results[1])
            outcomes["edit \(edit.status), rm \(remove.status)", default: 0] += 1
            XCTAssertEqual([edit.status, remove.status].filter { $0 == 0 }.count, 1, "exactly one wins: \(results)")
            if edit.status == 0 {
                XCTAssertTrue(edit.stderr.contains("Saved."))
                XCTAssertEqual(
                    remove.status, 65, "the delete is denied: an entry uses the category now: \(remove.stderr)")
                XCTAssertEqual(try entry("Airline")["category"] as? String, name)
                XCTAssertTrue(try categoryNames().contains(name))
                try runOK(["password", "edit", "Airline", "--category", ""])
            } else {
                // 75: the category went between the edit's read and its write; 66: before its read.
                XCTAssertTrue([75, 66].contains(edit.status), "\(edit.stderr)")
                XCTAssertFalse(edit.stderr.contains("Saved."))
                XCTAssertNil(try entry("Airline")["category"])
                XCTAssertFalse(try categoryNames().contains(name))
            }
            try runOK(["check"])
        }
        print("category rm against password edit --category: \(outcomes)")
    }

    func testAddsRenamesAndImportsOfOneNameInAnyCaseMakeOneCategory() throws {
        try initVault()
        var winners: [String: Int] = [:]
        for round in 1...Self.rounds {
            let name = "Trip\(round)"
            let document = home.appendingPathComponent("import.json")
            try #"{"format": "mystash-json", "version": 1, "categories": ["\#(name.uppercased())"], "notes": [],"#
                .appending(
                    #" "passwords": [{"name": "Train", "password": "rail", "category": "\#(name.uppercased())"}]}"#
                )
                .write(to: document, atomically: true, encoding: .utf8)
            try runOK(["category", "add", "Old\(round)"])
            let results = try raceAtTheWriteLock([
                (["category", "add", name], nil), (["category", "add", name.lowercased()], nil),
                (["category", "rename", "Old\(round)", name.uppercased()], nil),
                (["import", document.path, "--format", "mystash-json"], nil),
            ])
            // One of add, add and rename makes the name; the import files its entry under it,
            // or makes it itself if it comes first.
            let makers = results.filter { $0.status == 0 && $0.arguments[0] == "category" }
            XCTAssertLessThanOrEqual(makers.count, 1, "\(results)")
            XCTAssertEqual(makers.count + (results[3].status == 0 ? 1 : 0) >= 1, true, "\(results)")
            for result in results where result.status == 0 {
                winners[
                    result.arguments[0] == "import" ? "import" : result.arguments[0...1].joined(separator: " "),
                    default: 0] += 1
            }
            for loser in results where loser.status != 0 {
                XCTAssertEqual(loser.status, 65, "\(loser)")
                XCTAssertTrue(loser.stderr.contains("is already used by another category"), loser.stderr)
            }
            XCTAssertEqual(try categoryNames().filter { $0.lowercased() == name.lowercased() }.count, 1)
            try runOK(["check"])
        }
        print("one category name, four writers: winners \(winners)")
    }

    /// The store itself refuses a duplicate name from any writer; check lists duplicates.
    func testTheStoreRefusesDuplicateNamesAndCheckReportsThem() throws {
        try initVault()
        let store = vaultDirectory.appendingPathComponent("Passwords.sqlite")
        func sqlite(_ sql: String) throws -> Int32 { try self.sqlite(store, sql).status }
        let duplicate =
            "INSERT INTO ZCATEGORY (Z_PK, Z_ENT, Z_OPT, ZNAME) "
            + "SELECT 500, Z_ENT, 1, 'WEB site' FROM ZCATEGORY WHERE ZNAME = 'Web Site'"
        XCTAssertNotEqual(try sqlite(duplicate), 0, "the unique index refuses it")
        XCTAssertEqual(try sqlite("DROP INDEX ZCATEGORY_ZNAME_UNIQUE_NOCASE; " + duplicate), 0)
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65)
        XCTAssertTrue(
            check.stdout.contains(
                "Passwords.sqlite, Category row 500: its name 'WEB site' is also the name of Category row"),
            check.stdout)
        XCTAssertTrue(
            check.stdout.contains("Passwords.sqlite, Category row 500: the row was added outside mystash"), check.stdout
        )
    }
}
