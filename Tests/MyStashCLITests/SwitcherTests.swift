import Foundation
import XCTest

/// What a switcher from pass, KeePassXC or Bitwarden expects day to day (issue 22), through
/// the built binary: imports that merge and say what they change, the format told by the
/// file, path-style names, categories made on the way, generated passwords shown, values of
/// several lines, wide characters, completion of aliases and field names, the clipboard.
final class SwitcherTests: CLITestCase {
    func write(_ text: String, to name: String) throws -> String {
        let file = home.appendingPathComponent(name)
        try Data(text.utf8).write(to: file)
        return file.path
    }

    // MARK: - Imports

    func testAReImportListsEachChangedValueAndReplaceRemovesWhatTheFileLacks() throws {
        try initVault()
        let first = try write(
            #"{"items":[{"type":1,"name":"Mail","notes":"pin 1234","login":{"username":"ada","password":"old-pw","#
                + #""totp":"JBSWY3DPEHPK3PXP"},"fields":[{"name":"Recovery","value":"r-1","type":1}]}]}"#,
            to: "first.json")
        try runOK(["import", first])
        let second = try write(
            #"{"items":[{"type":1,"name":"Mail","folderId":"f","login":{"username":"ada","password":"new-pw"}}],"#
                + #""folders":[{"id":"f","name":"Personal"}]}"#,
            to: "second.json")
        let dryRun = try runOK(["import", second, "--dry-run"])
        XCTAssertEqual(
            dryRun.stderr,
            """
            Would import 0 entries, 0 notes, 1 category; would update 1; skipped 0.
              would update entry 'Mail':
                password: ******** -> ******** (the old one kept in the history)
                category: (none) -> 'Personal'
            Nothing was saved (--dry-run).

            """)
        XCTAssertFalse(dryRun.stderr.contains("pw"), "no password in the report")
        try runOK(["import", second])
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "password"]).stdout, "new-pw\n")
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "Recovery"]).stdout, "r-1\n")
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "notes"]).stdout, "pin 1234\n")
        XCTAssertEqual(try runOK(["password", "otp", "Mail", "--json"]).status, 0, "the TOTP secret stays")

        let replaced = try runOK(["import", second, "--replace"])
        XCTAssertEqual(
            replaced.stderr,
            """
            Imported 0 entries, 0 notes, 0 categories; updated 1; skipped 0.
              updated entry 'Mail':
                notes: ******** -> (removed)
                TOTP: ******** -> (removed)
                field 'Recovery': ******** -> (removed)

            """)
        let json = try XCTUnwrap(try json(try runOK(["import", first, "--json", "--dry-run"]).stdout) as? [String: Any])
        let updated = try XCTUnwrap((json["updated"] as? [[String: Any]])?.first)
        XCTAssertEqual(updated["id"] as? Int, 1)
        XCTAssertEqual((updated["changes"] as? [[String: Any]])?.compactMap { $0["field"] as? String },
                       ["password", "notes", "TOTP", "field 'Recovery'"])
    }

    func testTheFormatIsToldByTheFileWhenLeftOut() throws {
        try initVault()
        let csv = try write("\"Group\",\"Title\",\"Username\",\"Password\"\n\"Root\",\"Router\",\"admin\",\"pw\"\n",
                            to: "export.csv")
        XCTAssertTrue(try runOK(["import", csv]).stderr.hasPrefix("Imported 1 entry"))
        let mystash = try write(try runOK(["export"]).stdout, to: "backup.json")
        XCTAssertTrue(try runOK(["import", mystash]).stderr.hasSuffix("skipped 1.\n  skipped entry 'Router': "
                                                                       + "already in the vault, unchanged\n"))
        for (content, seen) in [
            ("{\"format\": \"other\", \"passwords\": []}", "a JSON object whose \"format\" is \"other\""),
            ("{\"items\": [], \"format\": \"mystash-json\"}", "a JSON object with both a \"format\" and Bitwarden's"),
            ("<html></html>", "XML, but not a KeePass file"),
            ("name;secret\n", "neither JSON, XML nor a CSV with \"Title\" and \"Password\" columns"),
        ] {
            let result = try run(["import", try write(content, to: "unknown")])
            XCTAssertEqual(result.status, 64, result.stderr)
            XCTAssertTrue(result.stderr.hasPrefix("Error: cannot tell the format of the file: \(seen)"), result.stderr)
            XCTAssertTrue(result.stderr.contains("hint: name it with '--format' (mystash-json, bitwarden-json"))
        }
        XCTAssertEqual(try runOK(["password", "list", "--json"]).stdout.components(separatedBy: "\"name\"").count, 2)
    }

    // MARK: - Names and categories

    func testPathStyleNamesFindEntriesByCategoryAndName() throws {
        try initVault()
        try runOK(["password", "add", "github", "--category", "Web Site"], stdin: "web-pw\n")
        try runOK(["password", "add", "github", "--category", "Work/Dev", "--create-category", "--allow-duplicate"],
                  stdin: "work-pw\n")
        XCTAssertEqual(try runOK(["password", "show", "web site/GitHub", "--field", "password"]).stdout, "web-pw\n")
        XCTAssertEqual(try runOK(["pw", "get", "Work/Dev/github", "--field", "password"]).stdout, "work-pw\n")
        let ambiguous = try run(["password", "show", "github"])
        XCTAssertEqual(ambiguous.status, 64)
        let missing = try run(["password", "show", "Work/github"])
        XCTAssertEqual(missing.status, 66)
        XCTAssertTrue(missing.stderr.hasPrefix("Error: no entry named 'Work/github'"), missing.stderr)
        // A name that holds a slash itself is found as it is.
        try runOK(["password", "add", "a/b"], stdin: "slash-pw\n")
        XCTAssertEqual(try runOK(["password", "show", "a/b", "--field", "password"]).stdout, "slash-pw\n")
        // Notes by the folder an import brought them from.
        try runOK(["import", try write(
            #"{"folders":[{"id":"h","name":"Home"}],"#
                + #""items":[{"type":2,"name":"Codes","folderId":"h","notes":"4711"}]}"#,
            to: "notes.json")])
        XCTAssertEqual(try runOK(["note", "show", "home/codes", "--json"]).stdout.contains("\"4711\""), true)
    }

    func testACategoryIsCreatedOnlyWhenAsked() throws {
        try initVault()
        let refused = try run(["password", "add", "Steam", "--category", "Games"], stdin: "pw\n")
        XCTAssertEqual(refused.status, 66)
        XCTAssertEqual(
            refused.stderr,
            "Error: no category named 'Games'; nothing was saved\n"
                + "hint: add '--create-category' to create it, or see 'mystash category list'\n")
        XCTAssertEqual(try runOK(["password", "list", "--json"]).stdout, "[\n\n]\n")
        try runOK(["password", "add", "Steam", "--category", "Games", "--create-category"], stdin: "pw\n")
        try runOK(["password", "edit", "Steam", "--category", "Video Games", "--create-category"])
        XCTAssertEqual(try runOK(["password", "show", "Steam", "--field", "category"]).stdout, "Video Games\n")
        let categories = try runOK(["category", "list"]).stdout
        XCTAssertTrue(categories.contains("Games\n") && categories.contains("Video Games\n"), categories)
        XCTAssertEqual(try run(["password", "edit", "Steam", "--category", "Nope"]).status, 66)
    }

    // MARK: - Output

    func testGeneratePrintsThePasswordItSaved() throws {
        try initVault()
        let added = try runOK(["password", "add", "Mail", "--generate", "--length", "24"])
        XCTAssertEqual(added.stdout.count, 25)
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "password"]).stdout, added.stdout)
        let edited = try runOK(["password", "edit", "Mail", "--generate", "--no-symbols"])
        XCTAssertNotEqual(edited.stdout, added.stdout)
        XCTAssertEqual(try runOK(["password", "show", "Mail", "--field", "password"]).stdout, edited.stdout)
        XCTAssertEqual(try run(["password", "add", "X", "--clip"], stdin: "pw\n").status, 64)
    }

    func testGenerateWithClipCopiesInsteadOfPrinting() throws {
        try initVault()
        var environment = baseEnvironment
        environment["TERM"] = "xterm"
        let session = try TerminalSession(["password", "add", "Mail", "--generate", "-c"], environment: environment)
        session.expect("Sent the new password of 'Mail' to the terminal's clipboard (OSC 52)")
        XCTAssertEqual(session.wait(), 0, session.transcript)
        let password = try runOK(["password", "show", "Mail", "--field", "password"]).stdout.dropLast()
        XCTAssertTrue(
            session.transcript.contains("\u{1B}]52;c;\(Data(password.utf8).base64EncodedString())\u{07}"),
            session.transcript)
        XCTAssertFalse(session.transcript.contains(String(password)), "copied, not printed")
    }

    func testShowPrintsEachLineOfAValueOnItsOwnLine() throws {
        try initVault()
        let file = try write(
            #"{"format":"mystash-json","version":2,"categories":[],"notes":[],"passwords":[{"name":"Bank","#
                + #""password":"p","notes":"line one\nline two\u001b[2J"}]}"#,
            to: "bank.json")
        try runOK(["import", file])
        let shown = try runOK(["password", "show", "Bank"]).stdout
        XCTAssertTrue(shown.contains("Notes:    line one\n          line two\\x1B[2J\n"), shown)
    }

    func testListColumnsLineUpWithWideCharacters() throws {
        try initVault()
        try runOK(["password", "add", "日本語のサイト", "--user", "山田"], stdin: "pw\n")
        try runOK(["password", "add", "mail", "--user", "ada"], stdin: "pw\n")
        let lines = try runOK(["password", "list"]).stdout.split(separator: "\n").map(String.init)
        // The USER column starts at the same terminal column on every line.
        func columnOfUser(_ line: String, _ user: String) -> Int {
            let prefix = line[..<line.range(of: user)!.lowerBound]
            return prefix.reduce(0) { $0 + ($1.unicodeScalars.first!.value >= 0x3000 ? 2 : 1) }
        }
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(columnOfUser(lines[0], "USER"), columnOfUser(lines[1], "ada"), lines.joined(separator: "\n"))
        XCTAssertEqual(columnOfUser(lines[0], "USER"), columnOfUser(lines[2], "山田"), lines.joined(separator: "\n"))
        try runOK(["import", try write(
            #"{"items":[{"type":1,"name":"Bank","login":{"password":"p"},"#
                + #""fields":[{"name":"暗証番号","value":"1"}]}]}"#,
            to: "bank.json")])
        let shown = try runOK(["password", "show", "Bank"]).stdout
        // 暗証番号: takes 9 columns: its value starts at column 10, as Bank after Name: does.
        XCTAssertTrue(shown.contains("\nName:     Bank\n") && shown.contains("\n暗証番号: 1\n"), shown)
    }

    func testOTPJSONNumbersAreNumbers() throws {
        try initVault()
        let file = try write(
            #"{"items":[{"type":1,"name":"Site","login":{"password":"p","#
                + #""totp":"otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=8&period=60"}}]}"#,
            to: "site.json")
        try runOK(["import", file])
        let shown = try XCTUnwrap(try json(try runOK(["password", "otp", "Site", "--json"]).stdout) as? [String: Any])
        XCTAssertEqual(shown["digits"] as? Int, 8)
        XCTAssertEqual(shown["period"] as? Int, 60)
        XCTAssertNotNil(shown["secondsLeft"] as? Int)
        XCTAssertEqual((shown["code"] as? String)?.count, 8, "the code stays a string: its leading zeros count")
    }

    // MARK: - Completion and clipboard

    func testCompletionFollowsAliasesAndOffersFieldNames() throws {
        try initVault()
        try runOK(["password", "add", "GitHub Work"], stdin: "pw")
        try runOK(["import", try write(
            #"{"items":[{"type":1,"name":"Bank","login":{"password":"p"},"fields":[{"name":"PIN","value":"1"}]}]}"#,
            to: "bank.json")])
        func complete(_ words: [String]) throws -> Result {
            let line = words.joined(separator: " ")
            let quoted = words.map(shellQuoted).joined(separator: " ")
            return try shell(#"""
                eval "$(mystash --generate-completion-script bash)"
                COMP_WORDS=(\#(quoted)); COMP_CWORD=\#(words.count - 1); COMP_LINE=\#(shellQuoted(line))
                COMP_POINT=${#COMP_LINE}; _mystash_aliases mystash \#(shellQuoted(words[words.count - 1])) \#(
                    shellQuoted(words[words.count - 2])); printf '[%s]\n' "${COMPREPLY[@]}"
                """#, bash: true)
        }
        XCTAssertEqual(try complete(["mystash", "pw", "ls", "--cat"]).stdout, "[--category]\n")
        XCTAssertEqual(try complete(["mystash", "password", "rm", "--fo"]).stdout, "[--force]\n")
        XCTAssertEqual(try complete(["mystash", "pw", "delete", "--fo"]).stdout, "[--force]\n")
        XCTAssertEqual(try complete(["mystash", "pw", "get", "Bank", "--field", "pa"]).stdout, "[password]\n")
        guard try run(["unlock", "--timeout", "5m"]).status == 0 else { throw XCTSkip("no kernel keyring here") }
        defer { _ = try? run(["lock"]) }
        XCTAssertEqual(try complete(["mystash", "pw", "get", "Git"]).stdout, "[GitHub Work]\n")
        XCTAssertEqual(try complete(["mystash", "pw", "show", "Bank", "--field", "P"]).stdout, "[PIN]\n")
    }

    func testFishCompletesAliasesAsTheirCommands() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/fish") else {
            throw XCTSkip("fish is not installed (apt-get install fish)")
        }
        func complete(_ line: String) throws -> String {
            try shell("fish -c \(shellQuoted("""
                mystash --generate-completion-script fish | source; complete -C \(shellQuoted(line))
                """))").stdout
        }
        XCTAssertEqual(try complete("mystash pw ls --cat"), "--category\tOnly list entries of this category.\n")
        XCTAssertEqual(try complete("mystash password list --cat"), try complete("mystash pw ls --cat"))
        XCTAssertTrue(try complete("mystash pw get x --fie").hasPrefix("--field\t"))
        XCTAssertTrue(try complete("mystash note delete --fo").hasPrefix("--force\t"))
    }

    func testZshCompletesAliasesAsTheirCommands() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh") else {
            throw XCTSkip("zsh is not installed (apt-get install zsh)")
        }
        let script = home.appendingPathComponent("_mystash")
        try Data(try runOK(["--generate-completion-script", "zsh"]).stdout.utf8).write(to: script)
        // An interactive zsh on a pseudo-terminal (zsh/zpty): type the line and a tab, and read
        // until the completed option shows (timeout ends a wait that never matches).
        let driver = """
            zmodload zsh/zpty
            zpty z zsh -f -i
            zpty -w z 'PROMPT="> "; autoload -Uz compinit; compinit -u -D; source \(script.path); echo READY'
            zpty -r z line '*READY*'; zpty -r z line '*READY*'
            zpty -w -n z $'mystash pw ls --cat\\t'
            zpty -r z out '*--category*' && print COMPLETED
            zpty -d z
            """
        let result = try shell("timeout 30 zsh -f -c \(shellQuoted(driver))")
        XCTAssertTrue(result.stdout.hasSuffix("COMPLETED\n"), result.stdout + result.stderr)
    }

    func testTheClipboardIsPutBackAfterTheCopyIsCleared() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/xvfb-run"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip")
        else { throw XCTSkip("xvfb-run and xclip are needed") }
        try initVault()
        try runOK(["password", "add", "Mail"], stdin: "clip-secret")
        // Inside one X session: what was there, the copy, then (polling, 60 s at most) what is back.
        let script = """
            printf 'a link I copied' | xclip -selection clipboard -i
            mystash password show Mail --clip || exit 90
            printf 'copied=%s\\n' "$(xclip -selection clipboard -o)"
            i=0; while [ "$(xclip -selection clipboard -o 2>/dev/null)" = clip-secret ] && [ $i -lt 600 ]; do
              sleep 0.1; i=$((i+1)); done
            printf 'after=%s\\n' "$(xclip -selection clipboard -o)"
            """
        let result = try shell(
            "xvfb-run -a sh -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'",
            environment: ["MYSTASH_CLIP_TIME": "1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("copied=clip-secret\n"), result.stdout)
        XCTAssertTrue(result.stdout.contains("after=a link I copied\n"), result.stdout)
    }
}
