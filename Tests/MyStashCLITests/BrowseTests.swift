import Foundation
import XCTest

/// `mystash browse` driven through tmux: keys in, the screen out.
final class BrowseTests: CLITestCase {
    /// A shell line that prints a marker, runs browse, then reports its exit status and the
    /// terminal's mode afterwards, so a test can see that the terminal came back.
    func browseCommand(_ arguments: [String] = [], environment: [String: String] = [:]) -> String {
        let env = baseEnvironment.merging(["TERM": "screen"]) { $1 }.merging(environment) { $1 }
        let assignments = shellAssignments(env)
        let argumentList = arguments.map { "'\($0)'" }.joined(separator: " ")
        return "echo before-browse; env -i \(assignments) '\(Self.binary.path)' browse \(argumentList); "
            + "echo \"browse-exit=$?\"; "
            + "stty -a | tr ' ' '\\n' | grep -xE -- '-?(icanon|echo)' | tr '\\n' ' '; echo; sleep 600"
    }

    /// Renames the selected entry in the edit form.
    func rename(_ tmux: TmuxSession, entry id: Int, to name: String,
                file: StaticString = #filePath, line: UInt = #line) {
        tmux.send("C-e")
        tmux.expect("Edit entry \(id)", file: file, line: line)
        tmux.send("C-u")
        tmux.type(name)
        tmux.send("C-s")
        tmux.expect("Saved entry \(id).", file: file, line: line)
    }

    func addEntries() throws {
        try initVault()
        try runOK(["password", "add", "GitHub", "--user", "ada", "--url", "https://github.com",
                   "--category", "Web Site"], stdin: "gh-secret-1")
        try runOK(["password", "add", "Router", "--category", "Wi-Fi"], stdin: "router-secret-2")
        try runOK(["password", "add", "漢字 Bank", "--user", "bob"], stdin: "bank-secret-3")
        try runOK(["note", "add", "Office"], stdin: "door code 4711")
    }

    func testNavigateFilterRevealAndQuitRestoringTheTerminal() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (3)")
        // Sections by category (the controller's section key path), uncategorized first as
        // the sort puts them; the first entry is selected, its password masked.
        tmux.wait(for: "sections in order") { screen in
            guard let web = screen.range(of: "Web Site (1)"), let wifi = screen.range(of: "Wi-Fi (1)"),
                  let none = screen.range(of: "No category (1)") else { return false }
            return none.lowerBound < web.lowerBound && web.lowerBound < wifi.lowerBound
        }
        tmux.expect("Name      漢字 Bank")
        XCTAssertTrue(tmux.screen().contains("••••••••"))
        XCTAssertFalse(tmux.screen().contains("bank-secret-3"), "masked until revealed")

        tmux.send("Down")
        tmux.expect("https://github.com")
        tmux.send("Down")
        tmux.wait(for: "Router in the detail pane") { $0.contains("Name      Router") }
        tmux.send("C-r")
        tmux.expect("router-secret-2")
        tmux.send("Up")
        tmux.expectGone("router-secret-2")  // moving on hides it again
        XCTAssertFalse(tmux.screen().contains("gh-secret-1"))

        tmux.type("BANK")
        tmux.expect("Passwords (1)")
        tmux.expect("Filter: BANK")
        tmux.expect("Name      漢字 Bank")
        tmux.send("Escape")
        tmux.expect("Passwords (3)")
        // Case and accents aside, in a row of ASCII text and in one of other text.
        tmux.type("gÍthüb")
        tmux.expect("Filter: gÍthüb")
        tmux.expect("Passwords (1)")
        tmux.expect("https://github.com")
        tmux.send("Escape")
        tmux.expect("Passwords (3)")
        tmux.type("漢字 bÄnk")
        tmux.expect("Passwords (1)")
        tmux.expect("Name      漢字 Bank")
        tmux.send("Escape")
        tmux.expect("Passwords (3)")
        tmux.type("4711")
        tmux.expect("Nothing matches '4711'.")
        tmux.send("Tab")
        tmux.wait(for: "the note found by its text") { $0.contains("Notes (1)") && $0.contains("door code 4711") }
        tmux.send("F1")
        tmux.expect("copy the one-time code")
        tmux.send("q")
        tmux.expectGone("copy the one-time code")

        tmux.send("C-q")
        tmux.expect("browse-exit=0")
        tmux.expect("icanon echo", timeout: 5)
        let everything = tmux.screen(history: true)
        XCTAssertTrue(everything.contains("before-browse"), "the screen from before came back: \(everything)")
        for secret in ["GitHub", "door code", "router-secret-2", "Passwords ("] {
            XCTAssertFalse(everything.contains(secret), "'\(secret)' is on screen or in scrollback: \(everything)")
        }
    }

    func testAnotherProcessesChangesAppearWithoutAKeyPressKeepingTheSelection() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (3)")
        tmux.send("Down", "Down")
        tmux.wait(for: "Router selected") { $0.contains("Name      Router") }

        // No key is pressed from here on: the view follows the other processes by itself.
        try runOK(["password", "add", "Aardvark", "--user", "zed"], stdin: "x")
        tmux.wait(for: "the new entry, Router still selected", timeout: 10) {
            $0.contains("Passwords (4)") && $0.contains("Aardvark") && $0.contains("Name      Router")
        }
        try runOK(["password", "edit", "Router", "--user", "admin", "--url", "http://192.168.1.1"])
        tmux.wait(for: "the edited fields in the detail pane", timeout: 10) {
            $0.contains("User      admin") && $0.contains("http://192.168.1.1") && $0.contains("Name      Router")
        }
        try runOK(["password", "rm", "GitHub", "--force"])
        tmux.wait(for: "the removal", timeout: 10) { !$0.contains("GitHub") && $0.contains("Passwords (3)") }
        XCTAssertTrue(tmux.screen().contains("Name      Router"), "the selection stayed: \(tmux.screen())")
        try runOK(["note", "add", "Fresh note"], stdin: "written elsewhere")
        tmux.send("Tab")
        tmux.wait(for: "the other process's note", timeout: 10) {
            $0.contains("Notes (2)") && $0.contains("Fresh note")
        }
        tmux.send("Tab")
        try runOK(["password", "rm", "Router", "--force"])
        tmux.wait(for: "the selected entry gone, a neighbour selected", timeout: 10) {
            !$0.contains("Router") && $0.contains("Passwords (2)") && $0.contains("Name      ")
        }
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    /// What another process commits is checked before the view follows it: a change made
    /// outside mystash locks the view, naming the row, and nothing of it is shown.
    func testAChangeMadeOutsideMystashWhileBrowsingLocksTheView() throws {
        try addEntries()
        // A changed row is named; a check that cannot run at all (its tag table dropped) locks too.
        for (tamper, said) in [("UPDATE ZSYSTEM SET Z_OPT = Z_OPT + 1 WHERE Z_PK = 1", "changed outside mystash"),
                               ("DROP TABLE MYSTASH_ROW_TAG", "MYSTASH_ROW_TAG")] {
            let saved = home.appendingPathComponent("saved-vault")
            try FileManager.default.copyItem(at: vaultDirectory, to: saved)
            let tmux = try TmuxSession(browseCommand())
            tmux.expect("Passwords (3)")
            let tampered = try sqlite(vaultDirectory.appendingPathComponent("Passwords.sqlite"), tamper)
            XCTAssertEqual(tampered.status, 0, tampered.output)
            tmux.wait(for: "the view locked after: \(tamper)", timeout: 10) {
                $0.contains("MyStash is locked") && $0.contains(said) && !$0.contains("GitHub")
            }
            tmux.send("C-q")
            tmux.expect("browse-exit=0")
            try FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.moveItem(at: saved, to: vaultDirectory)
        }
    }

    /// Each tab is vouched for by a check of its own store before it shows anything: a note
    /// changed outside mystash leaves the Passwords tab as it is, and stops browse, naming the
    /// row, when the Notes tab would show it.
    func testEachTabShowsNothingOfAStoreChangedOutsideMystash() throws {
        try addEntries()
        let tampered = try sqlite(vaultDirectory.appendingPathComponent("Notes.sqlite"),
                                  "UPDATE ZNOTE SET ZUPDATEDAT = ZUPDATEDAT + 1 WHERE Z_PK = 1")
        XCTAssertEqual(tampered.status, 0, tampered.output)
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (3)")
        tmux.send("Tab")
        tmux.wait(for: "browse stopped, naming the changed row") {
            $0.contains("Error: the vault was changed outside mystash: Notes.sqlite, Note row 1")
                && $0.contains("browse-exit=65")
        }
        XCTAssertFalse(tmux.screen(history: true).contains("door code"), "nothing of the notes was shown")
        XCTAssertFalse(tmux.screen(history: true).contains("Notes (1)"))
    }

    func testAddShowsTheCLIValidationMessagesAndSavesNothingUntilValid() throws {
        try initVault()
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("No entries yet")
        tmux.send("C-n")
        tmux.expect("New password entry")
        tmux.send("Tab")
        tmux.type("a b")
        tmux.send("Tab", "Tab")
        tmux.type("nope")
        tmux.send("C-s")
        let cli = try run(["password", "add", "", "--user", "a b", "--url", "nope"], stdin: "\n")
        XCTAssertEqual(cli.status, 65)
        for line in cli.stderr.split(separator: "\n") {
            tmux.expect(String(line))  // the same words as the CLI, line for line
        }
        let listed = try runOK(["password", "list", "--json"]).stdout
        XCTAssertEqual(listed.trimmingCharacters(in: .whitespacesAndNewlines), "[\n\n]")

        tmux.send("BTab", "BTab", "BTab")
        tmux.type("Mail")
        tmux.send("Tab", "C-u")
        tmux.type("ada")
        tmux.send("Tab")
        tmux.type("mail-secret")
        tmux.send("Tab", "C-u")
        tmux.type("https://mail.example")
        tmux.send("C-s")
        tmux.expect("Added entry 1.")
        tmux.expect("Passwords (1)")
        XCTAssertFalse(tmux.screen().contains("mail-secret"), "a typed password is never shown")
        let shown = try runOK(["password", "show", "Mail", "--reveal", "--json"]).stdout
        XCTAssertTrue(shown.contains("\"password\" : \"mail-secret\"") && shown.contains("\"userId\" : \"ada\""), shown)

        // Editing and deleting go through the same vault calls.
        rename(tmux, entry: 1, to: "Webmail")
        XCTAssertTrue(try runOK(["password", "list"]).stdout.contains("Webmail"))
        tmux.send("C-d")
        tmux.expect("Delete entry 1 'Webmail'? y/n")
        tmux.type("y")
        tmux.expect("Removed entry 1.")
        XCTAssertEqual(try run(["password", "show", "1"]).status, 66)
    }

    /// An entry deleted in browse and synced (the other machine deletes it too), then brought
    /// back by Ctrl-Z and synced again, comes back on the other machine: sent as a revival, which
    /// a machine that applied the deletion takes, not as an item it had deleted.
    func testAnUndoneDeletionAlreadySyncedComesBackOnTheOtherMachine() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        deleteMail(tmux)
        try runOK(["sync"])
        try runOK(["sync"], environment: desktop)
        XCTAssertEqual(try run(["password", "show", "Mail"], environment: desktop).status, 66)
        tmux.send("C-z")
        tmux.expect("Undone: entry 2 is back.")
        let sent = try runOK(["sync"]).stdout
        XCTAssertTrue(sent.contains("restored entry 'Mail'"), sent)
        try runOK(["sync"], environment: desktop)
        XCTAssertTrue(try runOK(["password", "show", "Mail"], environment: desktop).stdout.contains("ada"))
        XCTAssertTrue(try runOK(["sync"]).stdout.contains("Nothing to send or receive"))
    }

    /// A laptop and a desktop in step through a bare git remote, the laptop's browse open.
    private func twoMachinesInStep() throws -> (desktop: [String: String], browse: TmuxSession) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/git") else { throw XCTSkip("git is needed") }
        try initVault()
        try runOK(["password", "add", "Mail", "--user", "ada"], stdin: "mail-secret")
        let remote = home.appendingPathComponent("remote.git")
        XCTAssertEqual(try shell("git init -q --bare \(shellQuoted(remote.path))").status, 0)
        try runOK(["sync", "--remote", remote.path, "--device-name", "laptop"])
        let desktop = ["HOME": home.appendingPathComponent("machine-b").path]
        try FileManager.default.createDirectory(atPath: desktop["HOME"]!, withIntermediateDirectories: true)
        try runOK(["clone", remote.path, "--device-name", "desktop"], environment: desktop)
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (1)")
        return (desktop, tmux)
    }

    private func deleteMail(_ tmux: TmuxSession) {
        tmux.send("C-d")
        tmux.expect("'Mail'? y/n")
        tmux.type("y")
        tmux.expect("Removed entry")
    }

    private func deleteAndUndo(_ tmux: TmuxSession, syncingBetween: Bool = false) throws {
        deleteMail(tmux)
        if syncingBetween { XCTAssertTrue(try runOK(["sync"]).stdout.contains("removed an entry")) }
        tmux.send("C-z")
        tmux.expect("is back.")
    }

    /// A deletion undone before any sync is no edit: the next sync sends only what changed
    /// before the deletion, and another machine's later edit of the entry stands. Sent as an
    /// edit of every field at the undo's time, the old password won over the desktop's new one.
    func testADeletionUndoneBeforeSyncingIsNoEdit() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        try runOK(["password", "edit", "Mail", "--user", "ada.l"])
        try runOK(["password", "edit", "Mail", "--new-password"], stdin: "desktop-secret\n", environment: desktop)
        try runOK(["sync"], environment: desktop)
        try deleteAndUndo(tmux)
        let laptop = try runOK(["sync"]).stdout
        XCTAssertTrue(laptop.contains("changed entry 'Mail' (user ID)"), laptop)
        XCTAssertTrue(laptop.contains("changed entry 'Mail' (password, password history) from desktop"), laptop)
        XCTAssertFalse(laptop.contains("conflict"), laptop)
        let other = try runOK(["sync"], environment: desktop).stdout
        XCTAssertFalse(other.contains("conflict"), other)
        for environment in [[:], desktop] {
            let shown = try runOK(["password", "show", "Mail", "--reveal"], environment: environment).stdout
            XCTAssertTrue(shown.contains("desktop-secret") && shown.contains("ada.l"), shown)
        }
    }

    /// Deleted, brought back, edited, deleted and brought back again before a sync: the edit
    /// made between the two is sent (its row is gone, the row back holds it).
    func testAnEditBetweenTwoUndoneDeletionsIsSent() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        try deleteAndUndo(tmux)
        try runOK(["password", "edit", "Mail", "--new-password"], stdin: "between-secret\n")
        try deleteAndUndo(tmux)
        let laptop = try runOK(["sync"]).stdout
        XCTAssertTrue(laptop.contains("changed entry 'Mail' (password"), laptop)
        XCTAssertFalse(laptop.contains("name"), laptop)
        try runOK(["sync"], environment: desktop)
        let shown = try runOK(["password", "show", "Mail", "--reveal"], environment: desktop).stdout
        XCTAssertTrue(shown.contains("between-secret"), shown)
    }

    /// The sync that sent a deletion is killed once its push is on the remote, before it recorded
    /// that (a post-receive hook kills it); the deletion is undone, and sync runs again. The entry
    /// stays on both machines: the rerun finds its own deletion on the remote and sends the entry
    /// back after it. Before, the rerun applied its own deletion to the entry back (the undo lost).
    func testAnUndoAfterASyncKilledPastItsPushKeepsTheEntry() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        deleteMail(tmux)
        let remote = home.appendingPathComponent("remote.git")
        let pidFile = home.appendingPathComponent("sync.pid").path
        let hook = remote.appendingPathComponent("hooks/post-receive")
        try "#!/bin/sh\ncat >/dev/null\nkill -9 $(cat \(shellQuoted(pidFile)))\n".write(
            to: hook, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: hook.path)
        let killed = try shell("mystash sync & echo $! > \(shellQuoted(pidFile)); wait $!")
        XCTAssertEqual(killed.status, 137, "killed by the hook")
        try FileManager.default.removeItem(at: hook)
        tmux.send("C-z")
        tmux.expect("is back.")
        XCTAssertTrue(try runOK(["sync"]).stdout.contains("restored entry 'Mail'"))
        try runOK(["sync"], environment: desktop)
        for environment in [[:], desktop] {
            XCTAssertTrue(try runOK(["password", "show", "Mail"], environment: environment).stdout.contains("ada"))
            XCTAssertTrue(try runOK(["sync"], environment: environment).stdout.contains("Nothing to send or receive"))
        }
    }

    /// An entry added in browse and synced, then taken back by Ctrl-Z: the other machine removes
    /// it too. The undo took back the identity the addition gave the entry, so the deletion's
    /// history had none and sync never sent it.
    func testAnUndoneAdditionAlreadySyncedIsRemovedOnTheOtherMachine() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        tmux.send("C-n")
        tmux.expect("New password entry")
        tmux.type("Shop")
        tmux.send("C-s")
        tmux.expect("Added entry")
        try runOK(["sync"])
        try runOK(["sync"], environment: desktop)
        XCTAssertEqual(try run(["password", "show", "Shop"], environment: desktop).status, 0)
        tmux.send("C-z")
        tmux.expect("removed.")
        XCTAssertTrue(try runOK(["sync"]).stdout.contains("removed an entry"))
        try runOK(["sync"], environment: desktop)
        XCTAssertEqual(try run(["password", "show", "Shop"], environment: desktop).status, 66)
    }

    /// A deletion the desktop refused (it had changed the entry) came back on the laptop by a
    /// sync; Ctrl-Z then takes back nothing: the entry is not there twice, and the desktop's
    /// password stands. Before, the undo made a second 'Mail' with the same identity, whose old
    /// password then went out over the desktop's.
    func testUndoingADeletionASyncAlreadyTookBackMakesNoSecondEntry() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        deleteMail(tmux)
        try runOK(["password", "edit", "Mail", "--new-password"], stdin: "desk-secret\n", environment: desktop)
        try runOK(["sync"], environment: desktop)
        try runOK(["sync"])
        XCTAssertTrue(try runOK(["sync"], environment: desktop).stdout.contains("restored entry 'Mail'"))
        try runOK(["sync"])
        tmux.send("C-z")
        tmux.expect("was back already, brought back by a sync.")
        XCTAssertEqual(try runOK(["password", "list"]).stdout.components(separatedBy: "Mail").count, 2)
        try runOK(["sync"])
        try runOK(["sync"], environment: desktop)
        for environment in [[:], desktop] {
            let shown = try runOK(["password", "show", "Mail", "--reveal"], environment: environment).stdout
            XCTAssertTrue(shown.contains("desk-secret"), shown)
        }
    }

    /// A deletion and its undo, synced one after the other, reach the desktop in one sync:
    /// nothing changed there, so nothing is reported and nothing sent back. The desktop called
    /// it a conflict ("kept: it was changed after laptop deleted it") and sent the entry back.
    func testADeletionAndItsUndoReceivedTogetherAreNoConflict() throws {
        let (desktop, tmux) = try twoMachinesInStep()
        try deleteAndUndo(tmux, syncingBetween: true)
        XCTAssertTrue(try runOK(["sync"]).stdout.contains("restored entry 'Mail'"))
        let other = try runOK(["sync"], environment: desktop).stdout
        XCTAssertTrue(other.contains("Nothing to send or receive"), other)
        XCTAssertTrue(try runOK(["password", "show", "Mail"], environment: desktop).stdout.contains("ada"))
        XCTAssertTrue(try runOK(["sync"]).stdout.contains("Nothing to send or receive"))
    }

    func testUndoTakesBackTheLastChangesKeepingAnotherProcesssChange() throws {
        try initVault()
        try runOK(["password", "add", "Mail", "--user", "ada", "--category", "E-mail"], stdin: "mail-secret")
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (1)")
        tmux.send("C-z")
        tmux.expect("Nothing to undo.")

        rename(tmux, entry: 1, to: "Webmail")
        tmux.send("C-z")
        tmux.expect("Undone: entry 1 has its fields back.")
        let restored = try runOK(["password", "show", "1", "--reveal", "--json"]).stdout
        XCTAssertTrue(restored.contains("\"name\" : \"Mail\""), restored)
        XCTAssertTrue(restored.contains("\"password\" : \"mail-secret\""), restored)

        tmux.send("C-d")
        tmux.expect("Delete entry 1 'Mail'? y/n")
        tmux.type("y")
        tmux.expect("Removed entry 1.")
        XCTAssertEqual(try run(["password", "show", "1"]).status, 66)
        tmux.send("C-z")
        tmux.expect("Undone: entry 2 is back.")  // under a new ID, every field with it
        let back = try runOK(["password", "show", "2", "--reveal", "--json"]).stdout
        for field in ["\"name\" : \"Mail\"", "\"password\" : \"mail-secret\"", "\"userId\" : \"ada\"",
                      "\"category\" : \"E-mail\""] {
            XCTAssertTrue(back.contains(field), "\(field) in \(back)")
        }

        // Undo puts back only what the view's change set: another process's change stays.
        rename(tmux, entry: 2, to: "Mine")
        try runOK(["password", "edit", "2", "--url", "https://theirs.example"])
        tmux.send("C-z")
        tmux.expect("Undone: entry 2 has its fields back.")
        let merged = try runOK(["password", "show", "2", "--json"]).stdout
        XCTAssertTrue(merged.contains("\"name\" : \"Mail\""), merged)
        XCTAssertTrue(merged.contains("https://theirs.example"), "their change is kept: \(merged)")

        // Adding is undone by removing; an undo after the history is used up says so.
        tmux.send("C-n")
        tmux.type("Spare")
        tmux.send("Tab", "Tab")
        tmux.type("spare-secret")
        tmux.send("C-s")
        tmux.expect("Added entry 3.")
        tmux.send("C-z")
        tmux.expect("Undone: entry 3 removed.")
        XCTAssertEqual(try run(["password", "show", "3"]).status, 66)
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    func testCopiesPasswordUserAndOneTimeCodeAndClearsThem() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/oathtool") else {
            throw XCTSkip("oathtool is not installed (CI installs it)")
        }
        try initVault()
        try runOK(["password", "add", "GitHub", "--user", "ada"], stdin: "gh-secret-1")
        let clipboard = try fakeClipboard()
        let read = { (try? String(contentsOf: clipboard.store, encoding: .utf8)) ?? "" }
        let tmux = try TmuxSession(browseCommand(environment: [
            "PATH": clipboard.bin.path + ":/usr/local/bin:/usr/bin:/bin", "DISPLAY": ":99", "MYSTASH_CLIP_TIME": "2",
        ]))
        tmux.expect("Passwords (1)")
        tmux.send("C-p")
        tmux.expect("Copied the password to the clipboard; it is cleared in 2 seconds.")
        XCTAssertEqual(read(), "gh-secret-1")
        XCTAssertFalse(tmux.screen().contains("gh-secret-1"), "copying shows nothing")
        tmux.wait(for: "the clipboard cleared", timeout: 15) { _ in read().isEmpty }
        tmux.send("C-y")
        tmux.expect("Copied the user to the clipboard")
        XCTAssertEqual(read(), "ada")

        tmux.send("C-o")
        tmux.expect("Error: entry 'GitHub' has no TOTP secret")
        XCTAssertFalse(tmux.screen().contains("mystash password edit"), "no command line inside the view")
        // A TOTP secret added in the edit form (its seventh field), then its code copied.
        tmux.send("C-e")
        tmux.expect("Edit entry 1")
        for _ in 0..<6 { tmux.send("Tab") }
        tmux.type("JBSWY3DPEHPK3PXP")
        tmux.send("C-s")
        tmux.expect("Saved entry 1.")
        tmux.expect("OTP       ••••••  (^O copies)")
        tmux.send("C-o")
        tmux.expect("Copied the one-time code to the clipboard")
        let oathtool = Process()
        oathtool.executableURL = URL(fileURLWithPath: "/usr/bin/oathtool")
        oathtool.arguments = ["--totp", "-b", "-N", "now - 30 seconds", "-w", "1", "JBSWY3DPEHPK3PXP"]
        let output = Pipe()
        oathtool.standardOutput = output
        try oathtool.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let codes = String(decoding: printed, as: UTF8.self).split(separator: "\n")
        oathtool.waitUntilExit()
        XCTAssertTrue(codes.contains(Substring(read())), "\(read()) is oathtool's code (one of \(codes))")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    func testIdleLockDropsTheViewAndTheMasterPasswordBringsItBack() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand(["--idle-lock", "1"]))
        tmux.expect("Passwords (3)")
        tmux.expect("MyStash is locked")
        tmux.expect("locked after 1 seconds without a key press")
        let locked = tmux.screen()
        for name in ["GitHub", "Router", "ada", "Web Site"] {
            XCTAssertFalse(locked.contains(name), "\(name) is gone: \(locked)")
        }
        tmux.type("wrong")
        tmux.send("Enter")
        tmux.expect("Error: wrong master password")
        tmux.type("pw")
        tmux.send("Enter")
        tmux.expect("Passwords (3)", timeout: 10)
        tmux.expect("GitHub")
        tmux.send("C-c")
        tmux.expect("browse-exit=0")
    }

    /// The view comes back from an idle lock as it was: both tabs' counts, the item selected in
    /// each, and the filter typed (issue 22: the tab counts and the selection were lost).
    func testUnlockingBringsBackBothTabsAndEachSelection() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand(["--idle-lock", "3"]))
        tmux.expect("Passwords (3)")
        tmux.send("Tab")
        tmux.wait(for: "the notes tab") { $0.contains("Notes (1)") && $0.contains("door code 4711") }
        tmux.send("Tab")
        tmux.send("Down")
        tmux.send("Down")
        tmux.wait(for: "Router selected") { $0.contains("Name      Router") }
        tmux.expect("MyStash is locked", timeout: 20)
        XCTAssertFalse(tmux.screen().contains("Notes (1)"), "nothing is shown while locked")
        tmux.type("pw")
        tmux.send("Enter")
        tmux.wait(for: "the view as it was", timeout: 10) {
            $0.contains("Passwords (3)") && $0.contains("Notes (1)") && $0.contains("Name      Router")
        }
        tmux.send("C-c")
        tmux.expect("browse-exit=0")
    }

    /// A note's text is edited line by line (↑ to an earlier line, End, typing there), and a form
    /// left open when the view locks comes back, as typed, once the master password is given; while
    /// locked nothing of it is on the screen (issue 22: the form was discarded, the text one line).
    func testAnOpenFormSurvivesTheIdleLockAndNotesAreEditedLineByLine() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand(["--idle-lock", "4"]))
        tmux.expect("Passwords (3)")
        tmux.send("Tab")
        tmux.expect("Notes (1)")
        tmux.send("C-n")
        tmux.expect("New note")
        tmux.type("Groceries")
        tmux.send("Tab")
        tmux.type("milk")
        tmux.send("Enter")
        tmux.type("eggs")
        tmux.send("Enter")
        tmux.type("bread")
        tmux.send("Up")
        tmux.send("Up")
        tmux.send("End")
        tmux.type(" x2")
        tmux.wait(for: "three lines, the first changed") { screen in
            guard let milk = screen.range(of: "milk x2"), let eggs = screen.range(of: "eggs"),
                  let bread = screen.range(of: "bread") else { return false }
            return milk.upperBound < eggs.lowerBound && eggs.upperBound < bread.lowerBound
                && screen.contains("Enter new line")
        }
        tmux.expect("MyStash is locked", timeout: 20)
        let locked = tmux.screen()
        for text in ["Groceries", "milk", "bread", "New note"] {
            XCTAssertFalse(locked.contains(text), "\(text) is gone while locked: \(locked)")
        }
        tmux.type("pw")
        tmux.send("Enter")
        tmux.expect("Your unsaved note is back", timeout: 10)
        XCTAssertTrue(tmux.screen().contains("New note"))
        // The cursor is where it was, at the end of the first line: two lines down, at the end.
        tmux.send("Down")
        tmux.send("Down")
        tmux.send("End")
        tmux.type("s")
        tmux.send("C-s")
        tmux.expect("Added note 2.")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
        let shown = try runOK(["note", "show", "Groceries"]).stdout
        XCTAssertTrue(shown.hasSuffix("milk x2\neggs\nbreads\n"), shown)
    }

    /// At 40×15 the keys do not fit: the help says it scrolls, and PgDn brings the last ones in
    /// (issue 22: they were cut off).
    func testTheHelpScrollsInASmallTerminal() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand(), columns: 40, rows: 15)
        tmux.expect("Passwords (3)")
        tmux.send("F1")
        tmux.expect("Keys (↑ ↓ PgUp PgDn scroll")
        XCTAssertFalse(tmux.screen().contains("this help"), "the last key is below the screen")
        tmux.send("PageDown")
        tmux.expect("this help")
        tmux.send("x")
        tmux.expectGone("this help")
        tmux.expect("Passwords (3)")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    func testNarrowResizedAndWithoutColour() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand(environment: ["NO_COLOR": "1"]), columns: 40, rows: 16)
        tmux.expect("Passwords (3)")
        tmux.expect("Name      漢字 Bank")  // the detail pane below the list
        let narrow = tmux.screen(escapes: true)
        let colour = narrow.range(of: "\u{1B}\\[[0-9;]*3[0-7](;[0-9]+)*m", options: .regularExpression)
        XCTAssertNil(colour, "no colour under NO_COLOR")
        XCTAssertTrue(narrow.contains("\u{1B}[7m") || narrow.contains(";7m"), "selection in reverse video")
        for line in tmux.screen().split(separator: "\n") { XCTAssertLessThanOrEqual(line.count, 40, String(line)) }

        tmux.resize(columns: 100, rows: 20)
        tmux.wait(for: "the side-by-side layout") { $0.contains("│ Name      漢字 Bank") }
        tmux.resize(columns: 30, rows: 10)
        tmux.wait(for: "the small layout") { screen in
            screen.split(separator: "\n").allSatisfy { $0.count <= 30 } && screen.contains("Passwords")
        }
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    func testSignalsRestoreTheTerminal() throws {
        try addEntries()
        for (signal, status) in [(SIGTERM, 143), (SIGHUP, 129), (SIGINT, 130)] {
            let tmux = try TmuxSession(browseCommand())
            tmux.expect("Passwords (3)")
            let pids = tmux.commandProcessIDs()
            XCTAssertEqual(pids.count, 1)
            for pid in pids { kill(pid, signal) }
            tmux.expect("browse-exit=\(status)")
            tmux.expect("icanon echo", timeout: 5)
            XCTAssertFalse(tmux.screen(history: true).contains("GitHub"), "signal \(signal): nothing left on screen")
        }
    }

    func testSuspendedFromOutsideItGivesTheTerminalBackAndRedrawsOnContinue() throws {
        try addEntries()
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (3)")
        let pids = tmux.commandProcessIDs()
        XCTAssertEqual(pids.count, 1)
        pids.forEach { kill($0, SIGTSTP) }
        tmux.wait(for: "the shell's screen while stopped") { $0.contains("before-browse") && !$0.contains("GitHub") }
        pids.forEach { kill($0, SIGCONT) }
        tmux.wait(for: "a full redraw") { $0.contains("Passwords (3)") && $0.contains("Name      漢字 Bank") }
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }

    func testInsideGNUScreen() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/screen") else {
            throw XCTSkip("GNU screen is not installed (CI installs it)")
        }
        try addEntries()
        // screen runs the same shell line from a file, inside the tmux pane.
        let script = home.appendingPathComponent("browse.sh")
        let line = browseCommand().replacingOccurrences(of: "sleep 600", with: "sleep 2")
        try line.write(to: script, atomically: true, encoding: .utf8)
        let tmux = try TmuxSession("screen -U -q -c /dev/null sh '\(script.path)'; echo screen-done; sleep 600",
                                   columns: 60, rows: 20)
        tmux.expect("Passwords (3)")
        tmux.expect("Name      漢字 Bank")
        tmux.type("rout")
        tmux.expect("Passwords (1)")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
        tmux.expect("icanon echo")
        XCTAssertFalse(tmux.screen().contains("Router"), tmux.screen())
    }

    func testWithoutATerminalItSaysSo() throws {
        try initVault()
        let result = try run(["browse"])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.contains("hint: run 'mystash browse' in a terminal"), result.stderr)
    }
}
