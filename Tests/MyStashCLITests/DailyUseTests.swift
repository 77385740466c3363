import Foundation
import XCTest

/// Day-to-day behaviour: pipes, terminal safety, suggestions, sessions, TOTP, history,
/// the clipboard and completion, each through the built binary.
final class DailyUseTests: CLITestCase {
    func importJSON(_ json: String) throws {
        let file = home.appendingPathComponent("import-\(UUID().uuidString).json")
        try json.write(to: file, atomically: true, encoding: .utf8)
        try runOK(["import", file.path, "--format", "mystash-json"])
    }

    func testAClosedPipeEndsQuietlyEvenWhenSIGPIPEIsIgnored() throws {
        try initVault()
        try runOK(["password", "add", "one"], stdin: "pw")
        // The reader is gone before mystash writes: stdout is a pipe whose read end is closed.
        for trap in ["trap '' PIPE; ", ""] {
            let pipe = Pipe()
            try pipe.fileHandleForReading.close()
            let result = try shell("\(trap)exec mystash password list", stdout: pipe.fileHandleForWriting)
            XCTAssertEqual(result.status, 0, "\(trap): \(result.stderr)")
            XCTAssertEqual(result.stderr, "", trap)
        }
        let head = try shell("trap '' PIPE; mystash password list | head -1; echo \"status ${PIPESTATUS:-0}\"")
        XCTAssertTrue(head.stdout.hasPrefix("ID"), head.stdout)
    }

    /// Output that cannot be written is an I/O error named on stderr (74), help and the version
    /// included (they ended in success on a full disk).
    func testAFullDiskForTheOutputIsAnErrorNamedOnStandardError() throws {
        try initVault()
        try runOK(["password", "add", "one"], stdin: "pw")
        for arguments in [["--help"], ["--version"], ["password", "add", "--help"], ["help", "note"],
                          ["password", "list"], ["password", "show", "one"]] {
            guard let full = FileHandle(forWritingAtPath: "/dev/full") else { throw XCTSkip("no /dev/full") }
            let result = try execute(process(arguments), stdin: nil, stdout: full)
            XCTAssertEqual(result.status, 74, "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stderr, "Error: could not write the output: No space left on device\n", "\(arguments)")
        }
    }

    /// A non-blocking stdout (another program's pipe) that fills is waited on, not an error
    /// (it ended in 74): the reader here starts only once mystash waits for it.
    func testANonBlockingOutputThatFillsIsWaitedOn() throws {
        try initVault()
        let text = String(repeating: "a line of a long note\n", count: 10_000)
        try runOK(["note", "add", "long"], stdin: text)
        let reader = """
            import fcntl, os, subprocess
            read_end, write_end = os.pipe()
            fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
            command = subprocess.Popen(["mystash", "note", "show", "long"], stdout=write_end)
            os.close(write_end)
            # Read once mystash waits for the pipe (in poll(2), syscall 7) or has ended.
            while command.poll() is None:
                try:
                    if open(f"/proc/{command.pid}/syscall").read().startswith("7 "): break
                except PermissionError:
                    command.kill()
                    raise SystemExit("no access to /proc/PID/syscall")
                except OSError:
                    pass
            data = b""
            while chunk := os.read(read_end, 65536): data += chunk
            print(command.wait(), data.count(b"a line of a long note"))
            """
        let result = try shell("python3 -c \(shellQuoted(reader))")
        if result.stderr.contains("no access to /proc/PID/syscall") {
            throw XCTSkip("this machine hides a child's system call (/proc/PID/syscall)")
        }
        XCTAssertEqual(result.stdout, "0 10000\n", result.stderr)
    }

    /// Errors whose reader is gone are dropped, not a crash; `check`'s problems whose reader is
    /// gone still end in failure (a pipe into `head` must not make a tampered vault pass).
    func testAClosedPipeOnStandardErrorIsNoCrashAndCheckKeepsItsFailure() throws {
        try initVault()
        try runOK(["password", "add", "one"], stdin: "pw")
        func closedPipe() throws -> FileHandle {
            let pipe = Pipe()
            try pipe.fileHandleForReading.close()
            return pipe.fileHandleForWriting
        }
        // Errors go where stdout was (the closed pipe), the output to /dev/null.
        let missing = try shell("exec mystash password show Nope 2>&1 >/dev/null", stdout: try closedPipe())
        XCTAssertEqual(missing.status, 66, missing.stderr)
        _ = try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZUPDATEDAT = ZUPDATEDAT + 1 WHERE Z_PK = 1")
        let check = try shell("exec mystash check", stdout: try closedPipe())
        XCTAssertEqual(check.status, 65, check.stderr)
        let checkErrors = try shell("exec mystash check 2>&1 >/dev/null", stdout: try closedPipe())
        XCTAssertEqual(checkErrors.status, 65, checkErrors.stderr)
    }

    func testStoredEscapeSequencesCannotDriveTheTerminal() throws {
        try initVault()
        try importJSON(
            #"""
            {"format":"mystash-json","version":2,"categories":[],"notes":[{"title":"Evil note","text":"a\u001b]0;pwned\u0007b\u001b[2J"}],
             "passwords":[{"name":"Evil","password":"pw","notes":"x\u001b[31mred\u202eevil",
                           "fields":[{"name":"Field","value":"\u001b[2Jcleared","hidden":false}]}]}
            """#)
        let shown = try runOK(["password", "show", "Evil"]).stdout
        XCTAssertFalse(shown.contains("\u{1B}"), shown)
        XCTAssertTrue(shown.contains("x\\x1B[31mred\\u202Eevil"), shown)
        XCTAssertTrue(shown.contains("\\x1B[2Jcleared"), shown)
        let note = try runOK(["note", "show", "Evil note"]).stdout
        XCTAssertEqual(note, "# Evil note\n\na\\x1B]0;pwned\\x07b\\x1B[2J\n")
        XCTAssertFalse(try runOK(["note", "list"]).stdout.contains("\u{1B}"))
    }

    func testMistypedSubcommandsGetASuggestion() throws {
        let top = try run(["pasword", "list"])
        XCTAssertEqual(top.status, 64)
        XCTAssertTrue(
            top.stderr.contains("Unknown command 'pasword' for 'mystash'. Did you mean 'password'?"), top.stderr)
        let nested = try run(["password", "lst"])
        XCTAssertEqual(nested.status, 64)
        XCTAssertTrue(nested.stderr.contains("Did you mean 'list'?"), nested.stderr)
        XCTAssertEqual(try run(["note", "xyzzy-nothing-like-it"]).stderr.contains("Did you mean"), false)
    }

    func testUnlockTimeoutTakesUnitsAndIsCapped() throws {
        try initVault()
        let tooLong = try run(["unlock", "--timeout", "48h"])
        XCTAssertEqual(tooLong.status, 64)
        XCTAssertTrue(tooLong.stderr.contains("at most 24h"), tooLong.stderr)
        XCTAssertEqual(try run(["unlock", "--timeout", "90000"]).status, 64)
        XCTAssertEqual(try run(["unlock", "--timeout", "10x"]).status, 64)
        let unlocked = try run(["unlock", "--timeout", "1h30m"])
        guard unlocked.status == 0 else { throw XCTSkip("no kernel keyring here: \(unlocked.stderr)") }
        XCTAssertTrue(unlocked.stderr.contains("Unlocked for 1h30m."), unlocked.stderr)
        try runOK(["lock"])
    }

    func testOTPPrintsTheCodeOathtoolComputes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/oathtool") else {
            throw XCTSkip("oathtool is not installed")
        }
        try initVault()
        let secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        try importJSON(
            """
            {"format":"mystash-json","version":2,"categories":[],"notes":[],
             "passwords":[{"name":"Bank","password":"pw","totp":"otpauth://totp/Bank?secret=\(secret)&algorithm=SHA512&digits=8&period=60"}]}
            """)
        func oathtool() throws -> String {
            try shell("oathtool --totp=sha512 -d 8 -s 60s --base32 \(secret)").stdout.trimmingCharacters(
                in: .whitespacesAndNewlines)
        }
        let before = try oathtool()
        let ours = try runOK(["password", "otp", "Bank"])
        let after = try oathtool()
        XCTAssertTrue(
            [before, after].contains(ours.stdout.trimmingCharacters(in: .newlines)),
            "\(ours.stdout) vs \(before)/\(after)")
        XCTAssertTrue(ours.stderr.range(of: #"Valid for \d+ s\."#, options: .regularExpression) != nil, ours.stderr)
        let field = try runOK(["password", "show", "Bank", "--field", "otp"]).stdout.trimmingCharacters(in: .newlines)
        XCTAssertEqual(field.count, 8)
        let none = try run(["password", "otp", "#9"])
        XCTAssertEqual(none.status, 66)
        try runOK(["password", "add", "Plain"], stdin: "pw")
        let noSecret = try run(["password", "otp", "Plain"])
        XCTAssertEqual(noSecret.status, 66)
        XCTAssertTrue(noSecret.stderr.contains("entry 'Plain' has no TOTP secret"), noSecret.stderr)
    }

    func testPasswordHistoryListsReplacedPasswordsRevealedOnlyOnRequest() throws {
        try initVault()
        try runOK(["password", "add", "Mail"], stdin: "first")
        try runOK(["password", "edit", "Mail", "--new-password"], stdin: "second")
        try runOK(["password", "edit", "Mail", "--new-password"], stdin: "third")
        let masked = try runOK(["password", "history", "Mail"]).stdout
        XCTAssertEqual(masked.split(separator: "\n").count, 3, masked)
        XCTAssertFalse(masked.contains("first"))
        let revealed = try XCTUnwrap(
            try json(try runOK(["password", "history", "Mail", "--reveal", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(revealed.compactMap { $0["password"] as? String }, ["second", "first"])
        XCTAssertTrue(try runOK(["password", "show", "Mail"]).stdout.contains("2 earlier password(s)"))
    }

    func testClipCopiesAndTheDetachedHelperClearsOnlyOurValue() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/xvfb-run"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip")
        else { throw XCTSkip("xvfb-run and xclip are needed") }
        try initVault()
        try runOK(["password", "add", "Mail", "--user", "ada"], stdin: "clip-secret")
        // Inside one X session: copy, read back, wait (polling, 60 s at most) for the helper.
        let script = """
            mystash password show Mail --clip || exit 90
            printf 'copied=%s\\n' "$(xclip -selection clipboard -o)"
            i=0; while [ -n "$(xclip -selection clipboard -o 2>/dev/null)" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
            printf 'after=%s\\n' "$(xclip -selection clipboard -o)"
            mystash password show Mail -c user || exit 91
            printf 'mine' | xclip -selection clipboard -i
            i=0; while pgrep -f "$(command -v mystash) clipboard-clear" >/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            printf 'kept=%s\\n' "$(xclip -selection clipboard -o)"
            """
        let result = try shell(
            "xvfb-run -a sh -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'",
            environment: ["MYSTASH_CLIP_TIME": "1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("copied=clip-secret\n"), result.stdout)
        XCTAssertTrue(result.stdout.contains("after=\n"), result.stdout)
        XCTAssertTrue(
            result.stdout.contains("kept=mine\n"), "the helper leaves a value that is not ours: \(result.stdout)")
        XCTAssertTrue(result.stderr.contains("it is cleared in 1 second."), result.stderr)
        XCTAssertFalse(result.stderr.contains("clip-secret"))

        let noDisplay = try run(
            ["password", "show", "Mail", "--clip"], removing: ["DISPLAY", "WAYLAND_DISPLAY", "TERM"])
        XCTAssertEqual(noDisplay.status, 66)
        XCTAssertTrue(noDisplay.stderr.contains("there is no clipboard"), noDisplay.stderr)
    }

    /// The clearer outlives mystash: it must not keep a pipe mystash was given beside its
    /// standard streams (descriptor 3 here), or whoever reads that pipe waits the clearing
    /// time. The read ends while the clearer still waits: the clipboard still holds the value.
    func testTheClipboardClearerKeepsNoneOfTheCallersPipes() throws {
        let clipboard = try fakeClipboard()
        try initVault()
        try runOK(["password", "add", "Mail"], stdin: "clip-secret")
        let result = try shell(
            "out=$( (mystash password show Mail --clip 3>&1) 2>&1 ); printf '%s|' \"$out\"; cat \(shellQuoted(clipboard.store.path))",
            environment: ["PATH": clipboard.bin.path + ":/usr/bin:/bin", "DISPLAY": ":99", "MYSTASH_CLIP_TIME": "30"])
        XCTAssertEqual(result.stdout, "Copied the password of 'Mail' to the clipboard; it is cleared in 30 seconds.|clip-secret")
        _ = try? shell("pkill -f \(shellQuoted(Self.binary.path + " clipboard-clear"))")
    }

    func testWithoutADisplayTheTerminalGetsTheValueThroughOSC52() throws {
        try initVault()
        try runOK(["password", "add", "Mail"], stdin: "osc-secret")
        var environment = baseEnvironment
        environment["TERM"] = "xterm"
        let session = try TerminalSession(["password", "show", "Mail", "--clip"], environment: environment)
        session.expect("\u{1B}]52;c;\(Data("osc-secret".utf8).base64EncodedString())\u{07}")
        session.expect("it is not cleared automatically")
        XCTAssertEqual(session.wait(), 0, session.transcript)
    }

    func testAVersion1VaultIsUpgradedOnItsNextOpenWithOneLine() throws {
        let password = try installVersion1Vault()
        let first = try runOK(["password", "show", "Router", "--field", "password"], environment: password)
        XCTAssertEqual(first.stdout, "p@ss w0rd é\n")
        XCTAssertEqual(
            first.stderr, "Upgraded the vault from model 'MyStash' to 'MyStash 5' (Notes.sqlite, Passwords.sqlite).\n")
        let second = try runOK(["password", "list"], environment: password)
        XCTAssertEqual(second.stderr, "", "upgraded once")
    }

    func testCompletionOffersNamesOnlyWhenUnlocked() throws {
        try initVault()
        try runOK(["password", "add", "GitHub Work"], stdin: "pw")
        try runOK(["password", "add", "Gitea"], stdin: "pw")
        let query = [
            "---completion", "password", "show", "--", "positional@0", "3", "2", "mystash", "password", "show", "Gi",
        ]
        let locked = try run(query)
        XCTAssertEqual(locked.stdout, "", "names are encrypted: nothing while locked")
        XCTAssertEqual(locked.stderr, "")
        let categories = try run([
            "---completion", "password", "add", "--", "--category", "4", "0", "mystash", "password", "add", "x",
            "--category", "",
        ])
        XCTAssertTrue(categories.stdout.contains("Web Site\n"), categories.stdout)
        guard try run(["unlock", "--timeout", "5m"]).status == 0 else { throw XCTSkip("no kernel keyring here") }
        defer { _ = try? run(["lock"]) }
        XCTAssertEqual(try run(query).stdout, "GitHub Work\nGitea\n")
        // Through bash's own completion machinery: a name with a space stays one candidate.
        let bash = try shell(#"""
            eval "$(mystash --generate-completion-script bash)"
            COMP_WORDS=(mystash password show Gi); COMP_CWORD=3; COMP_LINE="mystash password show Gi"
            COMP_POINT=${#COMP_LINE}; _mystash mystash Gi show; printf '[%s]\n' "${COMPREPLY[@]}"
            """#, bash: true)
        XCTAssertEqual(bash.stdout, "[GitHub Work]\n[Gitea]\n", bash.stderr)
    }
}
