import Foundation
import XCTest

/// The plaintext handed to $EDITOR never outlives mystash: each signal that can end it
/// while the editor is open wipes the private directory; after SIGKILL the next run does.
final class EditorSignalTests: CLITestCase {
    var runtimeDirectory: URL { home.appendingPathComponent("run") }
    var record: URL { home.appendingPathComponent("editor-saw") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try FileManager.default.createDirectory(
            at: runtimeDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// An "editor" that records what it was given, then sends `signal` to the mystash
    /// process that started it (found by walking up its parents).
    func signallingEditor(_ signal: String) throws -> URL {
        let editor = home.appendingPathComponent("editor-\(signal).sh")
        try """
        #!/bin/sh
        dir=$(dirname "$1")
        {
          echo "file=$1"
          echo "dirmode=$(stat -c %a "$dir")"
          echo "filemode=$(stat -c %a "$1")"
          echo "content=$(cat "$1")"
          env | grep '^MYSTASH_' | sed 's/=.*//' | sed 's/^/env=/'
        } > '\(record.path)'
        printf 'typed but never saved' >> "$1"
        pid=$PPID
        while [ "$(cat /proc/$pid/comm)" != mystash ]; do pid=$(cut -d' ' -f4 /proc/$pid/stat); done
        kill -\(signal) $pid
        """.write(to: editor, atomically: true, encoding: .utf8)
        chmod(editor.path, 0o700)
        return editor
    }

    func recorded() throws -> [String: [String]] {
        var values: [String: [String]] = [:]
        for line in try String(contentsOf: record, encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            values[parts[0], default: []].append(parts.count > 1 ? parts[1] : "")
        }
        return values
    }

    /// Adds an entry with notes, then opens them in the signalling editor.
    func editNotes(signal: String) throws -> Process {
        try initVault()
        try runOK(
            ["password", "add", "GitHub", "--edit-notes"], stdin: "hunter2\n",
            environment: ["EDITOR": "printf 'recovery codes 1234' >"], terminal: true)
        let process = process(
            ["password", "edit", "GitHub", "--edit-notes"],
            environment: ["EDITOR": try signallingEditor(signal).path, "XDG_RUNTIME_DIR": runtimeDirectory.path])
        try giveTerminal(to: process, stdin: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process
    }

    func assertWipedOnSignal(_ name: String, _ number: Int32, file: StaticString = #filePath, line: UInt = #line) throws
    {
        let process = try editNotes(signal: name)
        XCTAssertEqual(process.terminationStatus, 128 + number, "mystash died of SIG\(name)", file: file, line: line)
        let saw = try recorded()
        let path = try XCTUnwrap(saw["file"]?.first, file: file, line: line)
        XCTAssertTrue(path.hasPrefix(runtimeDirectory.path + "/mystash-editor."), path, file: file, line: line)
        XCTAssertEqual(saw["dirmode"], ["700"], file: file, line: line)
        XCTAssertEqual(saw["filemode"], ["600"], file: file, line: line)
        XCTAssertEqual(
            saw["content"], ["recovery codes 1234"], "the editor got the current notes", file: file, line: line)
        XCTAssertNil(
            saw["env"]?.first(where: { $0.contains("PASSWORD") }), "the editor saw \(saw["env"] ?? [])", file: file,
            line: line)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: path), "the plaintext file is gone", file: file, line: line)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: (path as NSString).deletingLastPathComponent),
            "its directory is gone",
            file: file, line: line)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: runtimeDirectory.path), [], file: file, line: line)
        // Nothing was saved: the notes are as before.
        let entry = try XCTUnwrap(
            try json(try runOK(["password", "show", "GitHub", "--json"]).stdout) as? [String: Any])
        XCTAssertEqual(entry["notes"] as? String, "recovery codes 1234", file: file, line: line)
    }

    func testSIGINTWipesTheEditorFile() throws { try assertWipedOnSignal("INT", SIGINT) }
    func testSIGHUPWipesTheEditorFile() throws { try assertWipedOnSignal("HUP", SIGHUP) }
    func testSIGTERMWipesTheEditorFile() throws { try assertWipedOnSignal("TERM", SIGTERM) }
    func testSIGQUITWipesTheEditorFile() throws { try assertWipedOnSignal("QUIT", SIGQUIT) }
    func testSIGUSR1WipesTheEditorFile() throws { try assertWipedOnSignal("USR1", SIGUSR1) }
    func testSIGALRMWipesTheEditorFile() throws { try assertWipedOnSignal("ALRM", SIGALRM) }
    func testARealTimeSignalWipesTheEditorFile() throws {
        let number = __libc_current_sigrtmin() + 3
        try assertWipedOnSignal("\(number)", number)
    }

    func testAfterSIGKILLTheNextRunRemovesTheLeftoverAndSaysSo() throws {
        let process = try editNotes(signal: "KILL")
        XCTAssertEqual(process.terminationStatus, 128 + SIGKILL, "mystash died of SIGKILL")
        let path = try XCTUnwrap(try recorded()["file"]?.first)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "SIGKILL cannot be caught: the file is still there")
        let next = try runOK(["password", "list"], environment: ["XDG_RUNTIME_DIR": runtimeDirectory.path])
        XCTAssertTrue(next.stderr.contains("removed '\((path as NSString).deletingLastPathComponent)'"), next.stderr)
        XCTAssertTrue(next.stderr.contains("interrupted editor session"), next.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: runtimeDirectory.path), [])
        XCTAssertFalse(
            try runOK(["password", "list"], environment: ["XDG_RUNTIME_DIR": runtimeDirectory.path]).stderr.contains(
                "removed"),
            "said once")
    }

    /// A live session's editor directory is not a leftover: another run leaves it alone.
    func testALiveEditorSessionIsNotRemovedByAnotherRun() throws {
        try initVault()
        let editor = home.appendingPathComponent("waiting-editor.sh")
        let release = home.appendingPathComponent("release")
        try """
        #!/bin/sh
        echo "$1" > '\(record.path).tmp' && mv '\(record.path).tmp' '\(record.path)'
        while [ ! -e '\(release.path)' ]; do sleep 0.05; done
        printf 'kept' > "$1"
        """.write(to: editor, atomically: true, encoding: .utf8)
        chmod(editor.path, 0o700)
        let environment = ["EDITOR": editor.path, "XDG_RUNTIME_DIR": runtimeDirectory.path]
        let editing = process(["password", "add", "Mail", "--edit-notes"], environment: environment)
        try giveTerminal(to: editing, stdin: "pw\n")
        editing.standardError = FileHandle.nullDevice
        try editing.run()
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: record.path), Date() < deadline, editing.isRunning {
            usleep(20_000)
        }
        let path = try String(contentsOf: record, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let other = try runOK(["password", "list"], environment: ["XDG_RUNTIME_DIR": runtimeDirectory.path])
        XCTAssertFalse(other.stderr.contains("removed"), other.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
        _ = FileManager.default.createFile(atPath: release.path, contents: nil)
        editing.waitUntilExit()
        XCTAssertEqual(editing.terminationStatus, 0)
        let entry = try XCTUnwrap(try json(try runOK(["password", "show", "Mail", "--json"]).stdout) as? [String: Any])
        XCTAssertEqual(entry["notes"] as? String, "kept")
    }
}

/// Hints never advise deleting a directory that still holds an intact store.
final class DamagedStoreHintTests: CLITestCase {
    func testATruncatedNotesStoreNamesItAndKeepsThePasswords() throws {
        try initVault()
        try runOK(["password", "add", "Bank"], stdin: "s3cret\n")
        let notes = vaultDirectory.appendingPathComponent("Notes.sqlite")
        XCTAssertEqual(truncate(notes.path, 0), 0)
        for command in [["note", "list"], ["password", "list"], ["check"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, result.stderr)
            XCTAssertTrue(result.stderr.contains("Notes.sqlite has no key slot"), result.stderr)
            XCTAssertTrue(
                result.stderr.contains("hint: restore Notes.sqlite from a backup and keep Passwords.sqlite"),
                result.stderr)
            XCTAssertFalse(result.stderr.lowercased().contains("remove"), result.stderr)
        }
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: vaultDirectory.appendingPathComponent("Passwords.sqlite").path))
    }
}
