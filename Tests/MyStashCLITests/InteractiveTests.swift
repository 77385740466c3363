import Foundation
import XCTest

final class InteractiveTests: CLITestCase {
    func testInitAndAddAskOnTheTerminalWithoutEcho() throws {
        var environment = baseEnvironment
        environment["MYSTASH_PASSWORD"] = nil
        environment["MYSTASH_NEW_PASSWORD"] = nil
        let initSession = try TerminalSession(["init", "--kdf-cost", "10"], environment: environment)
        initSession.expect("New master password: ")
        initSession.send("s3cret-master")
        initSession.expect("Repeat the new master password: ")
        initSession.send("s3cret-master")
        XCTAssertEqual(initSession.wait(), 0, initSession.transcript)
        XCTAssertFalse(initSession.transcript.contains("s3cret-master"), "typed passwords are not echoed: \(initSession.transcript)")

        let add = try TerminalSession(["password", "add", "Bank", "--user", "ada"], environment: environment)
        add.expect("Master password for \(vaultDirectory.path): ")
        add.send("s3cret-master")
        add.expect("Password: ")
        add.send("entry-pass-1")
        add.expect("Repeat the password: ")
        add.send("entry-pass-1")
        add.expect("Added entry 1.")
        XCTAssertEqual(add.wait(), 0, add.transcript)
        XCTAssertFalse(add.transcript.contains("entry-pass-1"), add.transcript)

        let mismatch = try TerminalSession(["password", "add", "Other"], environment: environment)
        mismatch.expect("Master password for")
        mismatch.send("s3cret-master")
        mismatch.expect("Password: ")
        mismatch.send("one")
        mismatch.expect("Repeat the password: ")
        mismatch.send("two")
        mismatch.expect("did not match")
        XCTAssertEqual(mismatch.wait(), 64)

        // Three tries at the prompt, then exit 77; a right one on the way in succeeds.
        let wrong = try TerminalSession(["note", "list"], environment: environment)
        for left in [2, 1] {
            wrong.expect("Master password for")
            wrong.send("not it")
            wrong.expect("Wrong master password; try again (\(left) left).")
        }
        wrong.expect("Master password for")
        wrong.send("not it either")
        wrong.expect("Error: wrong master password")
        XCTAssertEqual(wrong.wait(), 77)
        let second = try TerminalSession(["note", "list"], environment: environment)
        second.expect("Master password for")
        second.send("typo")
        second.expect("try again (2 left)")
        second.send("s3cret-master")
        XCTAssertEqual(second.wait(), 0, second.transcript)

        let reveal = try run(["password", "show", "Bank", "--reveal", "--json"], environment: ["MYSTASH_PASSWORD": "s3cret-master"])
        XCTAssertTrue(reveal.stdout.contains("\"password\" : \"entry-pass-1\""), reveal.stdout)
    }

    /// A signal at a hidden prompt leaves the terminal echoing again for the shell after it
    /// (SIGTERM, SIGHUP and SIGQUIT left it silent).
    func testASignalAtAHiddenPromptGivesTheEchoBack() throws {
        try initVault()
        let assignments = shellAssignments(baseEnvironment)
        for (signal, status) in [(SIGTERM, 143), (SIGHUP, 129), (SIGQUIT, 131), (SIGINT, 130)] {
            let tmux = try TmuxSession(
                "env -i \(assignments) \(shellQuoted(Self.binary.path)) password add Signalled; "
                    + "echo \"add-exit=$?\"; stty -a | tr ' ' '\\n' | grep -xE -- '-?echo' | sed 's/^/tty:/'; sleep 600")
            tmux.expect("Password:")  // tmux leaves out the trailing space
            let pids = tmux.commandProcessIDs()
            XCTAssertEqual(pids.count, 1)
            for pid in pids { kill(pid, signal) }
            tmux.expect("add-exit=\(status)")
            tmux.wait(for: "the shell's terminal settings") { $0.contains("tty:") }
            XCTAssertTrue(tmux.screen().contains("tty:echo"), "signal \(signal): \(tmux.screen())")
            XCTAssertFalse(tmux.screen().contains("tty:-echo"), "signal \(signal): \(tmux.screen())")
        }
        XCTAssertEqual(try run(["password", "show", "Signalled"]).status, 66, "nothing was saved")
    }

    /// Stopped at a hidden prompt (Ctrl-Z) and brought back (`fg`) in an interactive shell, the
    /// typing is hidden again (it showed the password as it was typed), and the prompt shown
    /// again once it is (the test typed at once, and a loaded machine echoed it before).
    func testAPromptStoppedAndContinuedHidesTheTypingAgain() throws {
        try initVault()
        let assignments = shellAssignments(baseEnvironment)
        let tmux = try TmuxSession("exec bash --norc --noprofile -i")
        tmux.type("env -i \(assignments) \(shellQuoted(Self.binary.path)) password add Stopped")
        tmux.send("Enter")
        tmux.expect("Password:")  // tmux leaves out the trailing space
        tmux.send("C-z")
        tmux.expect("Stopped")
        tmux.type("fg")
        tmux.send("Enter")
        tmux.wait(for: "the prompt again") { $0.components(separatedBy: "Password:").count == 3 }
        tmux.type("typed-after-fg")
        tmux.send("Enter")
        tmux.expect("Repeat the password:")
        tmux.type("typed-after-fg")
        tmux.send("Enter")
        tmux.expect("Added entry 1.")
        XCTAssertFalse(tmux.screen(history: true).contains("typed-after-fg"), tmux.screen(history: true))
        let shown = try runOK(["password", "show", "Stopped", "--field", "password"]).stdout
        XCTAssertEqual(shown, "typed-after-fg\n")
    }

    func testRemovalAsksOnTheTerminal() throws {
        try initVault()
        try runOK(["note", "add", "keep"], stdin: "x")
        let no = try TerminalSession(["note", "rm", "keep"], environment: baseEnvironment)
        no.expect("Remove note 1 'keep'? [y/N] ")
        no.send("n")
        XCTAssertEqual(no.wait(), 64)
        XCTAssertEqual(try runOK(["note", "list", "--json"]).stdout.contains("keep"), true)
        let yes = try TerminalSession(["note", "rm", "keep"], environment: baseEnvironment)
        yes.expect("[y/N] ")
        yes.send("y")
        XCTAssertEqual(yes.wait(), 0)
        XCTAssertEqual(try run(["note", "show", "keep"]).status, 66)
    }

    /// The editor sees a 0600 file in /dev/shm, which is gone afterwards, and inherits a
    /// core-dump limit of 0 from mystash.
    func testNoteTextFromTheEditorUsesAPrivateFileInDevShm() throws {
        try initVault()
        let record = home.appendingPathComponent("editor-saw")
        let editor = home.appendingPathComponent("editor.sh")
        try """
        #!/bin/sh
        printf '%s %s %s\\n' "$1" "$(stat -c %a "$1")" "$(ulimit -c)" > '\(record.path)'
        printf 'written in the editor' > "$1"
        """.write(to: editor, atomically: true, encoding: .utf8)
        chmod(editor.path, 0o700)
        let session = try TerminalSession(["note", "add", "From editor"], environment: baseEnvironment.merging(["EDITOR": editor.path]) { _, new in new })
        session.expect("Added note 1.")
        XCTAssertEqual(session.wait(), 0, session.transcript)
        let saw = try String(contentsOf: record, encoding: .utf8).split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertTrue(saw[0].hasPrefix("/dev/shm/mystash-"), saw[0])
        XCTAssertEqual(saw[1], "600")
        XCTAssertEqual(saw[2], "0", "core dumps are disabled")
        XCTAssertFalse(FileManager.default.fileExists(atPath: saw[0]), "the plaintext file was removed")
        XCTAssertTrue(try runOK(["note", "show", "1"]).stdout.contains("written in the editor"))
    }
}

final class ConcurrencyTests: CLITestCase {
    func testTenSimultaneousAddsAllSucceed() throws {
        try initVault()
        var processes: [(Process, Pipe)] = []
        for index in 0..<10 {
            let process = process(["password", "add", "entry-\(index)", "--category", "Web Site"])
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            processes.append((process, input))
        }
        for (process, _) in processes { try process.run() }
        for (index, (_, input)) in processes.enumerated() {
            input.fileHandleForWriting.write(Data("secret-\(index)".utf8))
            try input.fileHandleForWriting.close()
        }
        for (process, _) in processes { process.waitUntilExit() }
        XCTAssertEqual(processes.map { $0.0.terminationStatus }, Array(repeating: 0, count: 10))
        let entries = try XCTUnwrap(try json(try runOK(["password", "list", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(Set(entries.compactMap { $0["name"] as? String }), Set((0..<10).map { "entry-\($0)" }))
        for index in [0, 9] {
            XCTAssertTrue(try runOK(["password", "show", "entry-\(index)", "--reveal"]).stdout.contains("secret-\(index)"))
        }
    }

    /// After a SIGKILL at any moment of `passwd`, the old or the new password opens the
    /// vault, and every entry still decrypts.
    func testPasswdKilledAtAnyMomentLeavesOldOrNewPasswordWorking() throws {
        try initVault()
        for index in 0..<5 { try runOK(["password", "add", "e\(index)"], stdin: "secret-\(index)") }
        try runOK(["note", "add", "n"], stdin: "note text")
        // How long one passwd takes here, to spread the kills over it.
        let start = Date()
        try runOK(["passwd", "--kdf-cost", "12"], environment: ["MYSTASH_NEW_PASSWORD": "pw"])
        let duration = Date().timeIntervalSince(start)
        var current = "pw"
        var changes = 0
        for trial in 0..<50 {
            let next = "pw-\(trial)"
            let process = process(["passwd", "--kdf-cost", "12"], environment: ["MYSTASH_PASSWORD": current, "MYSTASH_NEW_PASSWORD": next])
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(Double.random(in: 0...(duration * 1.1)) * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()

            let opensWithOld = try run(["check"], environment: ["MYSTASH_PASSWORD": current])
            let opensWithNew = try run(["check"], environment: ["MYSTASH_PASSWORD": next])
            XCTAssertTrue(opensWithOld.status == 0 || opensWithNew.status == 0,
                          "trial \(trial): neither password opens the vault (\(opensWithOld.stderr) / \(opensWithNew.stderr))")
            XCTAssertFalse(opensWithOld.status == 0 && opensWithNew.status == 0, "trial \(trial): both passwords open it")
            if opensWithNew.status == 0 {
                current = next
                changes += 1
            }
        }
        XCTAssertGreaterThan(changes, 0, "some kills came after the commit")
        XCTAssertLessThan(changes, 50, "some kills came before the commit")
        let shown = try run(["password", "show", "e4", "--reveal"], environment: ["MYSTASH_PASSWORD": current])
        XCTAssertTrue(shown.stdout.contains("secret-4"), shown.stderr)
    }
}

final class ManPageTests: CLITestCase {
    private var manPage: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../man/mystash.1").standardizedFileURL
    }

    /// Subcommand paths and long options, read from the CLI's own help.
    private func commandsAndOptions(_ path: [String] = []) throws -> (commands: Set<String>, options: Set<String>) {
        let help = try runOK(path + ["--help"]).stdout
        var commands: Set<String> = []
        var options = Set(help.matches(of: try Regex("--[a-z][a-z-]+")).map { String(help[$0.range]) })
        if path.count < 3, let section = help.range(of: "SUBCOMMANDS:\n") {
            // The section runs to the first blank line; aliases print as "list, ls".
            for line in help[section.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).prefix(while: { !$0.isEmpty }) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                // Command names are indented two spaces; wrapped descriptions further.
                guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = trimmed.split(separator: " ").first else { continue }
                let sub = String(name).trimmingCharacters(in: CharacterSet(charactersIn: ","))
                guard sub != "help", !sub.hasPrefix("-") else { continue }
                commands.insert((path + [sub]).joined(separator: " "))
                let nested = try commandsAndOptions(path + [sub])
                commands.formUnion(nested.commands)
                options.formUnion(nested.options)
            }
        }
        return (commands, options)
    }

    func testEverySubcommandAndOptionIsInTheManPage() throws {
        let page = try String(contentsOf: manPage, encoding: .utf8).replacingOccurrences(of: "\\-", with: "-")
        let (commands, options) = try commandsAndOptions()
        XCTAssertGreaterThan(commands.count, 25)
        XCTAssertTrue(options.contains("--reveal"))
        for command in commands {
            XCTAssertTrue(page.contains(command), "man page lacks '\(command)'")
        }
        for option in options where !["--help", "--version"].contains(option) {
            XCTAssertTrue(page.contains(option), "man page lacks \(option)")
        }
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXAMPLES", "FILES", "ENVIRONMENT", "EXIT STATUS", "SECURITY", "SEE ALSO"] {
            XCTAssertTrue(page.contains(".SH \(section)"), section)
        }
    }

    func testTheManPageRendersWithoutWarnings() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else { throw XCTSkip("man is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/man")
        process.arguments = ["--warnings", "-l", manPage.path]
        process.environment = ["MANWIDTH": "80", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "MANPAGER": "cat"]
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let rendered = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let warnings = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertEqual(warnings, "")
        XCTAssertTrue(rendered.contains("EXIT STATUS"))
    }
}
