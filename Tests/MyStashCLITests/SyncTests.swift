import Foundation
import MyStashKit
import StashPlatform
import XCTest

/// `mystash sync` and `mystash clone`: two machines (two HOMEs) against one bare git repository.
final class SyncTests: CLITestCase {
    var remote: URL!
    var homeB: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/git") else {
            throw XCTSkip("git is not installed (apt install git)")
        }
        remote = home.appendingPathComponent("remote.git")
        homeB = home.appendingPathComponent("machine-b")
        try FileManager.default.createDirectory(at: homeB, withIntermediateDirectories: true)
        try git(["init", "-q", "--bare", remote.path])
    }

    // MARK: - Helpers

    @discardableResult
    func onA(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> Result {
        try run(arguments, stdin: stdin, environment: environment)
    }

    @discardableResult
    func onB(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> Result {
        try run(arguments, stdin: stdin, environment: environment.merging(["HOME": homeB.path]) { _, new in new })
    }

    @discardableResult
    func okA(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
             file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let result = try onA(arguments, stdin: stdin, environment: environment)
        XCTAssertEqual(result.status, 0, "A: mystash \(arguments.joined(separator: " ")): \(result.stderr)",
                       file: file, line: line)
        return result
    }

    @discardableResult
    func okB(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
             file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let result = try onB(arguments, stdin: stdin, environment: environment)
        XCTAssertEqual(result.status, 0, "B: mystash \(arguments.joined(separator: " ")): \(result.stderr)",
                       file: file, line: line)
        return result
    }

    /// Runs git; returns its standard output.
    @discardableResult
    func git(_ arguments: [String], in directory: URL? = nil, file: StaticString = #filePath, line: UInt = #line)
        throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/git")
        process.arguments = ["-c", "user.name=tester", "-c", "user.email=tester@invalid"] + arguments
        process.currentDirectoryURL = directory
        process.environment = ["HOME": home.path, "PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0"]
        let result = try execute(process, stdin: nil)
        XCTAssertEqual(result.status, 0, "git \(arguments.joined(separator: " ")): \(result.stderr)",
                       file: file, line: line)
        return result.stdout
    }

    /// A on "laptop" with an entry and a note, synced; B on "desktop" cloned from the remote.
    func setUpTwoMachines() throws {
        try okA(["init", "--kdf-cost", "10"])
        try okA(["password", "add", "GitHub", "--user", "alice", "--url", "https://github.com"], stdin: "p0")
        try okA(["note", "add", "Wi-Fi"], stdin: "code 1234")
        try okA(["sync", "--remote", remote.path, "--device-name", "laptop"])
        try okB(["clone", remote.path, "--device-name", "desktop"])
    }

    func syncBoth() throws {
        try okA(["sync"])
        try okB(["sync"])
        try okA(["sync"])
        try okB(["sync"])
    }

    /// A working copy of the remote, changed by `change` and pushed back (forced when asked).
    func alterRemote(force: Bool = false, _ change: (URL) throws -> Void) throws {
        let work = home.appendingPathComponent("work-\(UUID().uuidString)")
        try git(["clone", "-q", "-b", "main", remote.path, work.path])
        try change(work)
        try git(["add", "-A"], in: work)
        try git(["commit", "-q", "--allow-empty", "-m", "altered"], in: work)
        try git(["push", "-q"] + (force ? ["-f"] : []) + ["origin", "HEAD:main"], in: work)
    }

    func logFiles(in work: URL) throws -> [String] {
        try git(["ls-files", "log"], in: work).split(separator: "\n").map(String.init).sorted()
    }

    /// The names of a machine's entries, sorted (IDs differ between machines).
    func entryNames(_ machine: ([String], String?, [String: String]) throws -> Result) throws -> [String] {
        let list = try machine(["password", "list", "--json"], nil, [:])
        XCTAssertEqual(list.status, 0, list.stderr)
        return try XCTUnwrap(try json(list.stdout) as? [[String: Any]]).compactMap { $0["name"] as? String }.sorted()
    }

    func categoryNames(_ machine: ([String], String?, [String: String]) throws -> Result) throws -> [String] {
        let list = try machine(["category", "list", "--json"], nil, [:])
        XCTAssertEqual(list.status, 0, list.stderr)
        return try XCTUnwrap(try json(list.stdout) as? [[String: Any]]).compactMap { $0["name"] as? String }.sorted()
    }

    func remoteHead() throws -> String {
        try git(["--git-dir", remote.path, "rev-parse", "main"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: - Sending, cloning, merging

    func testCloneOnAnotherMachineReadsEverythingAndTheRemoteHoldsNoPlaintext() throws {
        try okA(["init", "--kdf-cost", "10"])
        try okA(["password", "add", "GitHub", "--user", "alice", "--url", "https://github.com"], stdin: "s3cret-pw")
        try okA(["note", "add", "Wi-Fi"], stdin: "the code is 8812-wren-5530")
        let first = try okA(["sync", "--remote", remote.path, "--device-name", "laptop"])
        XCTAssertEqual(first.stdout, """
            Sent 2 changes to \(remote.path):
              added entry 'GitHub'
              added note 'Wi-Fi'

            """)
        let clone = try okB(["clone", remote.path, "--device-name", "desktop"])
        XCTAssertEqual(clone.stderr, "Created a vault at \(homeB.path)/.local/share/mystash from \(remote.path) "
                        + "(2 items from 1 log file).\n")
        XCTAssertEqual(try okB(["password", "show", "GitHub", "--field", "password"]).stdout, "s3cret-pw\n")
        XCTAssertTrue(try okB(["password", "show", "GitHub"]).stdout.contains("alice"))
        XCTAssertTrue(try okB(["note", "show", "Wi-Fi"]).stdout.contains("the code is 8812-wren-5530"))
        XCTAssertEqual(try okB(["sync"]).stdout, "Nothing to send or receive: in step with \(remote.path).\n")
        // Everything the remote holds, in every commit: no name, login, address, password or note.
        // The note's code is long and not hex: the remote's file names and hashes are hex, and
        // four digits turned up in them by chance.
        let everything = try git(["--git-dir", remote.path, "log", "-p", "--all", "--binary", "--format=%an %ae %s"])
        for secret in ["GitHub", "alice", "github.com", "s3cret-pw", "Wi-Fi", "8812-wren-5530", "laptop", "desktop"] {
            XCTAssertFalse(everything.contains(secret), "the remote shows '\(secret)'")
        }
        let work = home.appendingPathComponent("inspect")
        try git(["clone", "-q", "-b", "main", remote.path, work.path])
        for file in try logFiles(in: work) {
            let bytes = try Data(contentsOf: work.appendingPathComponent(file))
            for secret in ["GitHub", "s3cret-pw", "8812-wren-5530", "laptop"] {
                XCTAssertNil(bytes.range(of: Data(secret.utf8)), "\(file) holds '\(secret)' in plaintext")
            }
        }
        // The wrong master password opens nothing and leaves no vault.
        let wrong = try run(["clone", remote.path, "--vault", home.appendingPathComponent("c").path],
                            environment: ["MYSTASH_PASSWORD": "not it"])
        XCTAssertEqual(wrong.status, 77, wrong.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home.appendingPathComponent("c").path))
    }

    func testEditsOfDifferentFieldsOnTwoMachinesBothSurvive() throws {
        try setUpTwoMachines()
        try okA(["password", "edit", "GitHub", "--user", "bob"])
        try okB(["password", "edit", "GitHub", "--url", "https://github.example.org"])
        try okB(["category", "add", "Work"])
        try okB(["password", "edit", "GitHub", "--category", "Work"])
        try okA(["sync"])
        let received = try okB(["sync"])
        XCTAssertTrue(received.stdout.contains("Received 1 change:\n  changed entry 'GitHub' (user ID) from laptop\n"),
                      received.stdout)
        XCTAssertFalse(received.stdout.contains("conflict"), received.stdout)
        try okA(["sync"])
        for show in [try okA(["password", "show", "GitHub"]), try okB(["password", "show", "GitHub"])] {
            XCTAssertTrue(show.stdout.contains("bob"), show.stdout)
            XCTAssertTrue(show.stdout.contains("https://github.example.org"), show.stdout)
            XCTAssertTrue(show.stdout.contains("Work"), show.stdout)
        }
    }

    func testSameFieldLaterEditWinsAndTheOtherIsKept() throws {
        try setUpTwoMachines()
        try okA(["password", "edit", "GitHub", "--new-password"], stdin: "from-laptop")
        try okA(["note", "edit", "Wi-Fi"], stdin: "laptop's code")
        // B edits after A: B's edits are the later ones, whatever order the syncs run in.
        try okB(["password", "edit", "GitHub", "--new-password"], stdin: "from-desktop")
        try okB(["note", "edit", "Wi-Fi"], stdin: "desktop's code")
        let dryRun = try okA(["sync", "--dry-run"])
        XCTAssertTrue(dryRun.stdout.hasPrefix("Would send 2 changes to \(remote.path):\n"), dryRun.stdout)
        XCTAssertTrue(dryRun.stdout.hasSuffix("Dry run: nothing was changed here or on the remote.\n"))
        try okA(["sync"])
        let merged = try okB(["sync", "--json"])
        let report = try XCTUnwrap(try json(merged.stdout) as? [String: Any])
        let conflicts = try XCTUnwrap(report["conflicts"] as? [[String: Any]])
        XCTAssertEqual(Set(conflicts.compactMap { $0["field"] as? String }), ["password", "text"])
        let resolved = try okA(["sync"])
        XCTAssertTrue(resolved.stdout.contains("""
              entry 'GitHub', password: changed here and on desktop; kept the later change, from desktop; \
            this machine's password is in the entry's history
            """), resolved.stdout)
        XCTAssertTrue(resolved.stdout.contains("this machine's text is in the note 'Wi-Fi (laptop)'"), resolved.stdout)
        try okB(["sync"])
        for machine in [onA, onB] {
            XCTAssertEqual(try machine(["password", "show", "GitHub", "--field", "password"], nil, [:]).stdout,
                           "from-desktop\n")
            XCTAssertTrue(try machine(["password", "history", "GitHub", "--reveal"], nil, [:]).stdout
                .contains("from-laptop"))
            XCTAssertTrue(try machine(["note", "show", "Wi-Fi"], nil, [:]).stdout.contains("desktop's code"))
            XCTAssertTrue(try machine(["note", "show", "Wi-Fi (laptop)"], nil, [:]).stdout.contains("laptop's code"))
        }
    }

    func testEditAgainstDeleteKeepsTheItem() throws {
        try setUpTwoMachines()
        try okA(["password", "remove", "GitHub", "--force"])
        try okB(["password", "edit", "GitHub", "--user", "carol"])
        try okA(["sync"])
        let kept = try okB(["sync"])
        XCTAssertTrue(kept.stdout.contains("entry 'GitHub': kept: it was changed after laptop deleted it"), kept.stdout)
        let back = try okA(["sync"])
        XCTAssertTrue(back.stdout.contains("added entry 'GitHub' from desktop"), back.stdout)
        XCTAssertTrue(try okA(["password", "show", "GitHub"]).stdout.contains("carol"))
        // A delete made after seeing every edit goes through.
        try okB(["password", "remove", "GitHub", "--force"])
        try syncBoth()
        XCTAssertEqual(try onA(["password", "show", "GitHub"]).status, 66)
        XCTAssertEqual(try onB(["password", "show", "GitHub"]).status, 66)
    }

    /// A push that lands on the remote though git sees the connection drop after it (here a hook
    /// ends the receiving side): the sync succeeds with one log file. It was taken for another
    /// machine's push and tried again: an edit was then reported as nothing to send, and a
    /// deletion pushed again at every try (nine copies, then "nothing was sent").
    func testAPushThatLandsBeforeTheConnectionDropsIsSentOnce() throws {
        try setUpTwoMachines()
        let hook = remote.appendingPathComponent("hooks/post-receive")
        try "#!/bin/sh\ncat >/dev/null\nkill -9 $PPID\n".write(to: hook, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: hook.path)
        try okA(["password", "edit", "GitHub", "--user", "carol"])
        let sent = try okA(["sync"]).stdout
        XCTAssertTrue(sent.contains("changed entry 'GitHub' (user ID)"), sent)
        let files = try git(["--git-dir", remote.path, "ls-tree", "-r", "--name-only", "main"])
            .split(separator: "\n").filter { $0.hasPrefix("log/") }
        XCTAssertEqual(files.count, 2, "the first sync's file and this one's: \(files)")
        try FileManager.default.removeItem(at: hook)
        XCTAssertTrue(try okA(["sync"]).stdout.contains("Nothing to send or receive"))
        try okB(["sync"])
        XCTAssertTrue(try okB(["password", "show", "GitHub"]).stdout.contains("carol"))
    }

    /// The laptop deletes an entry that a third machine deleted and the desktop kept (it had
    /// changed it) before the laptop syncs: the desktop's revival makes the entry anew on the
    /// laptop, whole. It took only the fields whose clocks beat those the laptop still kept
    /// from before its own deletion, so the entry had no name and every sync failed with
    /// "name is required" after pushing again.
    func testAnItemDeletedHereAndRevivedElsewhereComesBackWhole() throws {
        try setUpTwoMachines()
        let homeC = ["HOME": home.appendingPathComponent("machine-c").path]
        try FileManager.default.createDirectory(atPath: homeC["HOME"]!, withIntermediateDirectories: true)
        try runOK(["clone", remote.path, "--device-name", "third"], environment: homeC)
        try runOK(["password", "remove", "GitHub", "--force"], environment: homeC)
        try okB(["password", "edit", "GitHub", "--new-password"], stdin: "desk-secret\n")
        try runOK(["sync"], environment: homeC)
        XCTAssertTrue(try okB(["sync"]).stdout.contains("restored entry 'GitHub'"))
        try okA(["password", "remove", "GitHub", "--force"])
        try okA(["sync"])
        let shown = try okA(["password", "show", "GitHub", "--reveal"]).stdout
        XCTAssertTrue(shown.contains("desk-secret") && shown.contains("alice"), shown)
        XCTAssertTrue(try okA(["sync"]).stdout.contains("Nothing to send or receive"))
    }

    /// A vault put back from a copy made before a deletion it then synced: the next sync takes
    /// its own deletion from the remote again, as it takes its other changes, on both machines.
    func testAVaultRestoredFromBeforeItsSyncedDeletionTakesTheDeletion() throws {
        try setUpTwoMachines()
        let vault = home.appendingPathComponent(".local/share/mystash")
        let copy = home.appendingPathComponent("vault-copy")
        try FileManager.default.copyItem(at: vault, to: copy)
        try okA(["password", "remove", "GitHub", "--force"])
        try okA(["sync"])
        try FileManager.default.removeItem(at: vault)
        try FileManager.default.moveItem(at: copy, to: vault)
        try okA(["sync"])
        try okB(["sync"])
        XCTAssertEqual(try onA(["password", "show", "GitHub"]).status, 66)
        XCTAssertEqual(try onB(["password", "show", "GitHub"]).status, 66)
        XCTAssertTrue(try okA(["sync"]).stdout.contains("Nothing to send or receive"))
    }

    /// A third machine gets the laptop's delete and the desktop's refusal of it (its edit, sent
    /// with the item whole) in one sync: it keeps the entry with the desktop's password, as the
    /// others do. The refusal carried the edit at the clock of the value it replaced, so the
    /// third machine saw nothing newer than the delete and removed the entry for good.
    func testADeleteAndAnotherMachinesRefusalReceivedTogetherKeepTheItem() throws {
        try setUpTwoMachines()
        let homeC = ["HOME": home.appendingPathComponent("machine-c").path]
        try FileManager.default.createDirectory(atPath: homeC["HOME"]!, withIntermediateDirectories: true)
        try runOK(["clone", remote.path, "--device-name", "third"], environment: homeC)
        try okB(["password", "edit", "GitHub", "--new-password"], stdin: "desk-secret\n")
        try okA(["password", "remove", "GitHub", "--force"])
        try okA(["sync"])
        XCTAssertTrue(try okB(["sync"]).stdout.contains("restored entry 'GitHub'"))
        let third = try runOK(["sync"], environment: homeC).stdout
        XCTAssertTrue(third.contains("entry 'GitHub': kept: it was changed after laptop deleted it"), third)
        try syncBoth()
        try runOK(["sync"], environment: homeC)
        for machine in [[:], ["HOME": homeB.path], homeC] {
            let shown = try runOK(["password", "show", "GitHub", "--reveal"], environment: machine).stdout
            XCTAssertTrue(shown.contains("desk-secret"), shown)
        }
    }

    /// Attachments stay on their machine: a delete from one that never saw them keeps the entry
    /// (and its only copy of the file) here, says why, and sends the entry back.
    func testADeleteFromAMachineThatNeverSawTheAttachmentKeepsTheEntry() throws {
        try setUpTwoMachines()
        let file = home.appendingPathComponent("passport.pdf")
        try Data("the only copy".utf8).write(to: file)
        try okA(["password", "attach", "GitHub", file.path])
        try okA(["sync"])
        try okB(["sync"])
        try okB(["password", "remove", "GitHub", "--force"])
        try okB(["sync"])
        let kept = try okA(["sync"])
        XCTAssertTrue(kept.stdout.contains("entry 'GitHub': kept: its attachments are only on this machine"), kept.stdout)
        let saved = home.appendingPathComponent("saved.pdf")
        try okA(["password", "attachment", "save", "GitHub", "passport.pdf", "--output", saved.path])
        XCTAssertEqual(try String(contentsOf: saved, encoding: .utf8), "the only copy")
        let back = try okB(["sync"])
        XCTAssertTrue(back.stdout.contains("added entry 'GitHub' from laptop"), back.stdout)
    }

    /// A deletion written into the history with sqlite3 (the entry's sync identity is not
    /// secret) of an entry still in the store is refused, on its own row or under another: the
    /// history is under the integrity record, which holds no tag for such rows (and `check` also
    /// names the deletion the history records of a row still there). The other machine keeps it.
    func testADeletionForgedInTheHistoryIsRefusedAndNotSent() throws {
        for forgedRow in ["the entry's own", "another"] {
            try setUpTwoMachines()
            let row = try sqlite("Passwords.sqlite", "select Z_PK || '|' || hex(ZUUID) from ZSYSTEM limit 1")
                .split(separator: "|").map(String.init)
            let entity = try sqlite("Passwords.sqlite", "select Z_ENT from Z_PRIMARYKEY where Z_NAME = 'System'")
            let hex = Array(row[1].utf8)
            let uuid = Data(stride(from: 0, to: hex.count, by: 2).compactMap {
                UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)
            })
            XCTAssertEqual(uuid.count, 16, row[1])
            let tombstone = try PropertyListSerialization.data(
                fromPropertyList: ["uuid": uuid], format: .binary, options: 0)
            let file = home.appendingPathComponent("tombstone.bin")
            try tombstone.write(to: file)
            let primaryKey = forgedRow == "another" ? "999" : row[0]
            _ = try sqlite("Passwords.sqlite", """
                insert into ATRANSACTION(Z_ENT, Z_OPT, ZTIMESTAMP) values (16002, 1, 817615700.0);
                insert into ACHANGE(Z_ENT, Z_OPT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZTOMBSTONE)
                values (16001, 1, 2, \(entity), \(primaryKey), (select max(Z_PK) from ATRANSACTION), readfile('\(file.path)'));
                """)
            if forgedRow == "the entry's own" {
                // A row the history says is gone is still here: check names it too.
                let checked = try onA(["check"])
                XCTAssertEqual(checked.status, 65, checked.stdout + checked.stderr)
                XCTAssertTrue((checked.stdout + checked.stderr).contains("the history records its deletion"),
                              checked.stdout + checked.stderr)
            }
            let refused = try onA(["sync"])
            XCTAssertEqual(refused.status, 65, "\(forgedRow): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("HistoryChange row 1: the row was added outside mystash"),
                          refused.stderr)
            XCTAssertTrue(refused.stderr.contains("HistoryTransaction row "), refused.stderr)
            try okB(["sync"])
            XCTAssertTrue(try okB(["password", "show", "GitHub"]).stdout.contains("alice"), forgedRow)
            try FileManager.default.removeItem(at: home)
            try setUpWithError()
        }
    }

    /// The history is under the integrity record: a change whose history rows were deleted with
    /// sqlite3, or whose save was marked as one of sync's own (which sync does not send), is not
    /// left unsent in silence: sync refuses (exit 65, naming the history's row) and sends
    /// nothing, `check` names it, and the vault put back syncs the change.
    func testAChangeHiddenFromTheHistoryIsRefusedNotLeftUnsent() throws {
        let hidings = [
            "delete from ACHANGE where Z_PK = (select max(Z_PK) from ACHANGE)",
            "delete from ACHANGE; delete from ATRANSACTION",
            """
            insert or ignore into ATRANSACTIONSTRING (Z_ENT, Z_OPT, ZNAME) values (16003, 1, 'mystash-sync');
            update ATRANSACTION set ZAUTHORTS = (select Z_PK from ATRANSACTIONSTRING where ZNAME = 'mystash-sync')
            where Z_PK = (select max(Z_PK) from ATRANSACTION)
            """,
        ]
        for hiding in hidings {
            try setUpTwoMachines()
            try okA(["password", "edit", "GitHub", "--user", "carol"])
            let store = vaultDirectory.appendingPathComponent("Passwords.sqlite")
            let backup = home.appendingPathComponent("Passwords.backup")
            try FileManager.default.copyItem(at: store, to: backup)
            _ = try sqlite("Passwords.sqlite", hiding)
            let refused = try onA(["sync"])
            XCTAssertEqual(refused.status, 65, "\(hiding): \(refused.stdout) \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("Passwords.sqlite, History"), refused.stderr)
            let checked = try onA(["check"])
            XCTAssertEqual(checked.status, 65, hiding)
            XCTAssertTrue((checked.stdout + checked.stderr).contains("Passwords.sqlite, History"), checked.stdout)
            XCTAssertFalse(try okB(["sync"]).stdout.contains("changed entry"), hiding)
            try FileManager.default.removeItem(at: store)
            try FileManager.default.copyItem(at: backup, to: store)
            XCTAssertTrue(try okA(["sync"]).stdout.contains("changed entry 'GitHub' (user ID)"), hiding)
            XCTAssertTrue(try okB(["sync"]).stdout.contains("changed entry 'GitHub' (user ID)"), hiding)
            try FileManager.default.removeItem(at: home)
            try setUpWithError()
        }
    }

    /// A vault of the last release that synced, holding changes made since its last sync in a
    /// history not yet under the integrity record: `check` verifies it as that release wrote it
    /// and writes nothing; the first sync checks it, covers its history and sends the changes; a
    /// history row deleted afterwards is refused. Changed with sqlite3 before its first opening,
    /// it is refused and its record is not made again over the change.
    func testASyncedVaultOfTheLastReleaseHasItsHistoryCoveredAndSendsWhatItHeld() throws {
        let record = "select ZMODEL from MYSTASH_RECORD"
        for changedBefore in [false, true] {
            try? FileManager.default.removeItem(at: vaultDirectory)
            let password = try installFixtureVault("vault-v5-synced")
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../MyStashKitTests/Fixtures/vault-v5-synced/remote.tar").standardizedFileURL
            let remoteCopy = home.appendingPathComponent("last-release")
            try? FileManager.default.removeItem(at: remoteCopy)
            try FileManager.default.createDirectory(at: remoteCopy, withIntermediateDirectories: true)
            XCTAssertEqual(try shell("tar -xf \(shellQuoted(fixture.path)) -C \(shellQuoted(remoteCopy.path))").status, 0)
            let lastRemote = remoteCopy.appendingPathComponent("remote.git").path
            XCTAssertEqual(try sqlite("Passwords.sqlite", record), "MyStash 5")
            if changedBefore {
                _ = try sqlite("Passwords.sqlite", "update ZSYSTEM set ZURL = NULL where Z_PK = 1")
                let refused = try onA(["sync", "--remote", lastRemote], environment: password)
                XCTAssertEqual(refused.status, 65, refused.stderr)
                XCTAssertTrue(refused.stderr.contains("System row 1: the row was changed outside mystash"),
                              refused.stderr)
                XCTAssertEqual(try sqlite("Passwords.sqlite", record), "MyStash 5", "not made again over the change")
                continue
            }
            XCTAssertTrue(try okA(["check"], environment: password).stderr.contains("All is well."))
            XCTAssertEqual(try sqlite("Passwords.sqlite", record), "MyStash 5", "check writes nothing")
            let sent = try okA(["sync", "--remote", lastRemote], environment: password).stdout
            XCTAssertTrue(sent.contains("changed entry 'GitHub' (user ID)"), sent)
            XCTAssertTrue(sent.contains("added note 'After sync'"), sent)
            for store in ["Notes.sqlite", "Passwords.sqlite"] {
                XCTAssertEqual(try sqlite(store, record), "MyStash 5 with history", store)
            }
            try okA(["password", "edit", "GitHub", "--user", "heidi"], environment: password)
            _ = try sqlite("Passwords.sqlite", "delete from ACHANGE")
            let refused = try onA(["sync"], environment: password)
            XCTAssertEqual(refused.status, 65, refused.stderr)
            XCTAssertTrue(refused.stderr.contains("Passwords.sqlite, HistoryChange row"), refused.stderr)
        }
    }

    /// Moving to another remote: `sync --remote NEW` naming an empty remote starts a new log there
    /// with the whole vault (the changes since the last sync listed, the rest counted), once this
    /// machine has what the others sent to the old one, and a clone of it holds everything. Another machine joins it by a clone, not by a sync (one
    /// resending its vault there brought back older passwords and deleted items); the same log
    /// under another name is synced as always, and an older copy of it is refused as rolled back.
    func testAVaultMovesToAnEmptyRemoteAndTheOthersCloneIt() throws {
        try setUpTwoMachines()
        let moved = home.appendingPathComponent("moved.git")
        try git(["init", "-q", "--bare", moved.path])
        // A machine that never sent anything knows the log by what it read: another spelling of it syncs.
        XCTAssertTrue(try okB(["sync", "--remote", remote.path + "/"]).stdout.contains("Nothing to send or receive"))
        try okA(["password", "add", "Bank"], stdin: "b")
        try okA(["password", "edit", "GitHub", "--user", "carol"])
        // What another machine sent to the old remote since this one's last sync would be left behind.
        try okB(["note", "add", "From B"], stdin: "b's note")
        try okB(["sync"])
        let behind = try onA(["sync", "--remote", moved.path])
        XCTAssertEqual(behind.status, 64, behind.stderr)
        XCTAssertTrue(behind.stderr.contains("holds changes this machine has not synced yet"), behind.stderr)
        XCTAssertTrue(try okA(["sync"]).stdout.contains("added note 'From B' from desktop"))
        try okA(["password", "edit", "GitHub", "--user", "dave"])
        let first = try okA(["sync", "--remote", moved.path]).stdout
        XCTAssertTrue(first.contains("Sent 1 change to \(moved.path):\n  changed entry 'GitHub' (user ID)\n"), first)
        XCTAssertTrue(first.contains("Also sent 3 items unchanged since the last sync"), first)
        let joined = try onB(["sync", "--remote", moved.path])
        XCTAssertEqual(joined.status, 64, joined.stderr)
        XCTAssertTrue(joined.stderr.contains("holds a sync log begun on another machine"), joined.stderr)
        XCTAssertTrue(joined.stderr.contains("mystash clone \(moved.path)"), joined.stderr)
        let homeC = home.appendingPathComponent("machine-c")
        try okA(["clone", moved.path], environment: ["HOME": homeC.path])
        let onC = { (arguments: [String], _: String?, _: [String: String]) in
            try self.run(arguments, environment: ["HOME": homeC.path])
        }
        XCTAssertEqual(try entryNames(onC), try entryNames(onA))
        XCTAssertEqual(try okA(["password", "show", "GitHub", "--field", "user"], environment: ["HOME": homeC.path])
            .stdout, "dave\n")
        XCTAssertEqual(try okA(["note", "show", "From B"], environment: ["HOME": homeC.path]).stdout,
                       "# From B\n\nb's note\n")
        XCTAssertEqual(try okA(["note", "show", "Wi-Fi"], environment: ["HOME": homeC.path]).stdout,
                       try okA(["note", "show", "Wi-Fi"]).stdout)
        // The same log under another name, then an older copy of it at a third place.
        let copy = home.appendingPathComponent("copy.git")
        try git(["clone", "-q", "--bare", moved.path, copy.path])
        XCTAssertTrue(try okA(["sync", "--remote", moved.path + "/"]).stdout.contains("Nothing to send or receive"))
        try okA(["note", "add", "Later"], stdin: "later")
        try okA(["sync"])
        let stale = try onA(["sync", "--remote", copy.path])
        XCTAssertEqual(stale.status, 65, stale.stderr)
        XCTAssertTrue(stale.stderr.contains("rolled back"), stale.stderr)
    }

    /// After `passwd --rekey`, the old remote's sync key stays wrapped under the old data key (and
    /// rekey says so); a new, empty remote gets a new sync key wrapped under the new data key only:
    /// a machine still on the old data key cannot join it, nor clone it with the old password, and a
    /// clone with the new master password reads everything.
    func testARekeyedVaultMovedToANewRemoteIsOutOfReachOfTheOldDataKey() throws {
        try setUpTwoMachines()
        let rekeyed = try okA(["passwd", "--rekey"], environment: ["MYSTASH_NEW_PASSWORD": "new-password"])
        XCTAssertTrue(rekeyed.stderr.contains("To cut that off, sync to a new, empty remote"), rekeyed.stderr)
        let moved = home.appendingPathComponent("moved.git")
        try git(["init", "-q", "--bare", moved.path])
        let newPassword = ["MYSTASH_PASSWORD": "new-password"]
        try okA(["sync", "--remote", moved.path], environment: newPassword)
        let wraps = try git(["--git-dir", moved.path, "ls-tree", "--name-only", "main", "keys/"])
            .split(separator: "\n")
        XCTAssertEqual(wraps.count, 1, "the new sync key wrapped under the new data key alone")
        let refused = try onB(["sync", "--remote", moved.path])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("holds a sync log begun on another machine"), refused.stderr)
        // Not even a clone with the old data key's password opens it.
        let oldClone = try onA(["clone", moved.path], environment: ["HOME": home.appendingPathComponent("old").path])
        XCTAssertNotEqual(oldClone.status, 0, oldClone.stderr)
        let homeC = home.appendingPathComponent("machine-c")
        try okA(["clone", moved.path], environment: newPassword.merging(["HOME": homeC.path]) { $1 })
        XCTAssertEqual(try okA(["password", "show", "GitHub", "--field", "user"],
                               environment: newPassword.merging(["HOME": homeC.path]) { $1 }).stdout, "alice\n")
    }

    /// The history's key counter put back with sqlite3 (lowered, deleted, or restarted by dropping
    /// the tables): sync keeps the newest transaction it read, tagged, so SQLite numbers the next
    /// save past it and the change is sent; dropping the tables or that row is refused.
    func testAHistoryCounterPutBackHidesNoChange() throws {
        let putBack = [
            "update sqlite_sequence set seq = 0 where name = 'ATRANSACTION'",
            "delete from sqlite_sequence where name = 'ATRANSACTION'",
        ]
        for (round, change) in putBack.enumerated() {
            try setUpTwoMachines()
            try okA(["password", "edit", "GitHub", "--user", "synced-once"])
            try okA(["sync"])
            try okB(["sync"])
            _ = try sqlite("Passwords.sqlite", change)
            try okA(["password", "edit", "GitHub", "--user", "after-\(round)"])
            XCTAssertTrue(try okA(["sync"]).stdout.contains("changed entry 'GitHub' (user ID)"), change)
            XCTAssertTrue(try okB(["sync"]).stdout.contains("changed entry 'GitHub' (user ID) from laptop"), change)
            XCTAssertEqual(try okB(["password", "show", "GitHub", "--field", "user"]).stdout, "after-\(round)\n")
            try FileManager.default.removeItem(at: home)
            try setUpWithError()
        }
        for change in ["delete from ATRANSACTION", "drop table ACHANGE; drop table ATRANSACTION; "
                        + "drop table ATRANSACTIONSTRING"] {
            try setUpTwoMachines()
            try okA(["password", "edit", "GitHub", "--user", "synced-once"])
            try okA(["sync"])
            _ = try sqlite("Passwords.sqlite", change)
            let refused = try onA(["sync"])
            XCTAssertEqual(refused.status, 65, "\(change): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("Passwords.sqlite, HistoryTransaction row"), refused.stderr)
            try FileManager.default.removeItem(at: home)
            try setUpWithError()
        }
    }

    /// An entry added with a password history on one machine and removed there before the other
    /// synced: the other receives both at once, and the entry, its history with it, is neither
    /// added nor a wedge (every later sync failed with "entry is required", exit 65).
    func testAnEntryWithHistoryAddedAndRemovedBeforeTheOtherSyncsLeavesNothingBehind() throws {
        try setUpTwoMachines()
        try okB(["password", "add", "Brief"], stdin: "first")
        try okB(["password", "edit", "Brief", "--new-password"], stdin: "second")
        try okB(["sync"])
        try okB(["password", "remove", "Brief", "--force"])
        try okB(["sync"])
        let received = try okA(["sync"])
        XCTAssertTrue(received.stdout.contains("Nothing to send or receive"), received.stdout)
        XCTAssertEqual(try entryNames(onA), ["GitHub"])
        XCTAssertTrue(try okA(["check"]).stderr.contains("All is well."))
        try okA(["password", "edit", "GitHub", "--user", "later"])
        XCTAssertTrue(try okA(["sync"]).stdout.contains("changed entry 'GitHub' (user ID)"))
    }

    /// A synced vault of the last release, its history pruned to nothing (as that release left
    /// it): its first opening keeps a row at the token sync read, so the history's key counter put
    /// back cannot number a new save where sync never looks (the save was never sent).
    func testAnUpgradedVaultKeepsItsHistoryNumberingPastTheToken() throws {
        try? FileManager.default.removeItem(at: vaultDirectory)
        let password = try installFixtureVault("vault-v5-synced-idle")
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../MyStashKitTests/Fixtures/vault-v5-synced-idle/remote.tar").standardizedFileURL
        let remoteCopy = home.appendingPathComponent("last-release")
        try FileManager.default.createDirectory(at: remoteCopy, withIntermediateDirectories: true)
        XCTAssertEqual(try shell("tar -xf \(shellQuoted(fixture.path)) -C \(shellQuoted(remoteCopy.path))").status, 0)
        let lastRemote = remoteCopy.appendingPathComponent("remote.git").path
        try okA(["password", "list"], environment: password)
        _ = try sqlite("Passwords.sqlite", "update sqlite_sequence set seq = 0 where name = 'ATRANSACTION'")
        try okA(["password", "edit", "GitHub", "--user", "after-upgrade"], environment: password)
        let sent = try okA(["sync", "--remote", lastRemote], environment: password).stdout
        XCTAssertTrue(sent.contains("changed entry 'GitHub' (user ID)"), sent)
    }

    /// An entry and then its category removed on one machine reach the other in one sync: the
    /// category goes too, not kept as still in use by the entry going with it (it came back to
    /// the machine that removed it, as "restored").
    func testACategoryRemovedAfterItsEntriesIsRemovedOnTheOtherMachineToo() throws {
        try setUpTwoMachines()
        try okB(["password", "add", "Trip", "--category", "Travel", "--create-category"], stdin: "t")
        try okB(["sync"])
        try okA(["sync"])
        XCTAssertTrue(try categoryNames(onA).contains("Travel"))
        try okB(["password", "remove", "Trip", "--force"])
        try okB(["category", "remove", "Travel"])
        try okB(["sync"])
        let received = try okA(["sync"]).stdout
        XCTAssertFalse(received.contains("conflict"), received)
        XCTAssertFalse(try categoryNames(onA).contains("Travel"), received)
        XCTAssertFalse(try okB(["sync"]).stdout.contains("Travel"))
        XCTAssertFalse(try categoryNames(onB).contains("Travel"))
    }

    func testNameClashIsRenamedAndReportedTheSameOnBothMachines() throws {
        try setUpTwoMachines()
        try okA(["password", "add", "Bank"], stdin: "a")
        try okB(["password", "add", "bank"], stdin: "b")
        try okA(["category", "add", "Travel"])
        try okB(["category", "add", "travel"])
        try okA(["sync"])
        let clash = try okB(["sync"])
        XCTAssertTrue(clash.stdout.contains("Resolved 2 conflicts:"), clash.stdout)
        XCTAssertTrue(clash.stdout.contains("another entry has this name; renamed to '"), clash.stdout)
        XCTAssertTrue(clash.stdout.contains("another category has this name; renamed to '"), clash.stdout)
        try syncBoth()
        let names = try entryNames(onA)
        XCTAssertEqual(names, try entryNames(onB))
        XCTAssertEqual(names.filter { $0.lowercased().hasPrefix("bank") }.count, 2)
        XCTAssertTrue(names.contains { $0.hasSuffix(" (2)") })
        XCTAssertEqual(try categoryNames(onA), try categoryNames(onB))
        XCTAssertEqual(try categoryNames(onA).filter { $0.lowercased().hasPrefix("travel") }.count, 2)
    }

    func testAVaultMadeBeforeSyncSyncsAndItsSeedCategoriesMeetTheClones() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../MyStashKitTests/Fixtures/vault-v1").standardizedFileURL
        try FileManager.default.createDirectory(at: vaultDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let target = vaultDirectory.appendingPathComponent(store)
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(store), to: target)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        }
        let password = ["MYSTASH_PASSWORD": "fixture-password"]
        let first = try okA(["sync", "--remote", remote.path], environment: password)
        XCTAssertTrue(first.stdout.contains("added entry 'Router'"), first.stdout)
        try okB(["clone", remote.path], environment: password)
        let onA = { (arguments: [String], input: String?, _: [String: String]) in
            try self.onA(arguments, stdin: input, environment: password)
        }
        let onB = { (arguments: [String], input: String?, _: [String: String]) in
            try self.onB(arguments, stdin: input, environment: password)
        }
        XCTAssertEqual(try entryNames(onA), try entryNames(onB))
        XCTAssertEqual(try categoryNames(onA), try categoryNames(onB))
        XCTAssertEqual(try okB(["password", "show", "Router", "--field", "password"], environment: password).stdout,
                       "p@ss w0rd é\n")
    }

    func testACloneStartsFromTheLatestSnapshotAndReadsOnlyTheFilesAfterIt() throws {
        let every = ["MYSTASH_TEST_SNAPSHOT_INTERVAL": "3"]
        try okA(["init", "--kdf-cost", "10"])
        for index in 1...4 {
            try okA(["password", "add", "E\(index)"], stdin: "p\(index)")
            try okA(["sync"] + (index == 1 ? ["--remote", remote.path] : []), environment: every)
        }
        try okA(["password", "remove", "E2", "--force"])
        try okA(["password", "edit", "E3", "--user", "late"])
        try okA(["sync"], environment: every)
        let files = try git(["--git-dir", remote.path, "ls-tree", "-r", "--name-only", "main"])
        let snapshots = files.split(separator: "\n").filter { $0.hasPrefix("snapshots/") }
        XCTAssertEqual(snapshots.count, 1, files)
        // Five log files; the snapshot came with the third: the clone reads the two after it.
        let clone = try okB(["clone", remote.path])
        XCTAssertTrue(clone.stderr.hasSuffix("(3 items from 2 log files).\n"), clone.stderr)
        XCTAssertEqual(try entryNames(onB), ["E1", "E3", "E4"])
        XCTAssertTrue(try okB(["password", "show", "E3"]).stdout.contains("late"))
        XCTAssertEqual(try okB(["password", "show", "E1", "--field", "password"]).stdout, "p1\n")
        // Git brought only what the clone read: the log files before the one the snapshot came with
        // (whose hash the snapshot names) and the marker (only its name is looked at) stayed on the remote.
        let cache = homeB.appendingPathComponent(".local/share/mystash/sync.git")
        let missing = try git(["--git-dir", cache.path, "rev-list", "--objects", "--missing=print",
                               "refs/remotes/origin/main"]).split(separator: "\n").filter { $0.hasPrefix("?") }
        var objects: [String: String] = [:]
        for line in try git(["--git-dir", remote.path, "ls-tree", "-r", "main"]).split(separator: "\n") {
            let parts = line.split(separator: "\t")
            objects[String(parts[1])] = String(parts[0].split(separator: " ")[2])
        }
        let logs = objects.keys.filter { $0.hasPrefix("log/") }.sorted()
        XCTAssertEqual(logs.count, 5)
        XCTAssertEqual(Set(missing.map { String($0.dropFirst()) }),
                       Set((logs.prefix(2) + ["MYSTASH-SYNC"]).compactMap { objects[$0] }),
                       "the clone fetched \(objects.count - missing.count) of \(objects.count) files")

        // A snapshot changed on the remote is refused and leaves no vault.
        try alterRemote { work in
            let url = work.appendingPathComponent(String(snapshots[0]))
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count - 1] ^= 1
            try bytes.write(to: url)
        }
        let third = home.appendingPathComponent("third")
        let refused = try onA(["clone", remote.path, "--vault", third.path])
        XCTAssertEqual(refused.status, 65, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\(snapshots[0]) was changed or forged"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: third.path))
    }

    // MARK: - An untrusted remote

    func testChangedDroppedReplayedAndRolledBackLogFilesAreRefused() throws {
        try setUpTwoMachines()
        try okA(["password", "add", "Second"], stdin: "2")
        try okA(["sync"])
        try okA(["password", "add", "Third"], stdin: "3")
        try okA(["sync"])
        let good = try remoteHead()
        var files: [String] = []
        try alterRemote { work in files = try self.logFiles(in: work) }
        XCTAssertEqual(files.count, 3)
        func refused(_ named: String, _ problem: String, file: StaticString = #filePath, line: UInt = #line) throws {
            let result = try onB(["sync"])
            XCTAssertEqual(result.status, 65, result.stderr, file: file, line: line)
            XCTAssertTrue(result.stderr.contains("\(named) \(problem)"), result.stderr, file: file, line: line)
            XCTAssertTrue(result.stderr.contains("nothing was applied"), result.stderr, file: file, line: line)
            XCTAssertEqual(try onB(["password", "show", "Second"]).status, 66, "applied anyway", file: file, line: line)
        }
        func restore() throws {
            try alterRemote(force: true) { work in try self.git(["reset", "-q", "--hard", good], in: work) }
        }

        // A byte changed in the last file.
        try alterRemote { work in
            let url = work.appendingPathComponent(files[2])
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count - 20] ^= 1
            try bytes.write(to: url)
        }
        try refused(files[2], "was changed or forged")
        try restore()
        // The middle file dropped.
        try alterRemote { work in try FileManager.default.removeItem(at: work.appendingPathComponent(files[1])) }
        try refused(files[1], "is missing (dropped)")
        try restore()
        // An old file replayed as the next one.
        let next = String(files[2].dropLast(10)) + "0000000004"
        try alterRemote { work in
            try FileManager.default.copyItem(at: work.appendingPathComponent(files[1]),
                                             to: work.appendingPathComponent(next))
        }
        try refused(next, "holds file 2 of device")
        try restore()
        // Files 2 and 3 swapped.
        try alterRemote { work in
            let (second, third) = (work.appendingPathComponent(files[1]), work.appendingPathComponent(files[2]))
            let swap = work.appendingPathComponent("swap")
            try FileManager.default.moveItem(at: second, to: swap)
            try FileManager.default.moveItem(at: third, to: second)
            try FileManager.default.moveItem(at: swap, to: third)
        }
        try refused(files[1], "holds file 3 of device")
        try restore()

        let received = try okB(["sync"])
        XCTAssertTrue(received.stdout.contains("added entry 'Second' from laptop"), received.stdout)
        // Rolled back to before the last file, once B has read it.
        try alterRemote(force: true) { work in try self.git(["reset", "-q", "--hard", "HEAD~2"], in: work) }
        let rolledBack = try onB(["sync"])
        XCTAssertEqual(rolledBack.status, 65)
        XCTAssertTrue(rolledBack.stderr.contains("\(files[2]) is gone: the remote was rolled back"), rolledBack.stderr)
    }

    func testAVaultChangedOutsideMystashSendsNothing() throws {
        try setUpTwoMachines()
        try okA(["password", "add", "Pending"], stdin: "p")
        let before = try remoteHead()
        let passwords = vaultDirectory.appendingPathComponent("Passwords.sqlite")
        XCTAssertEqual(try sqlite(passwords, "UPDATE ZCATEGORY SET ZNAME = 'Renamed behind its back' "
                                    + "WHERE ZNAME = 'Banking'").status, 0)
        let refused = try onA(["sync"])
        XCTAssertEqual(refused.status, 65, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("changed outside mystash"), refused.stderr)
        XCTAssertEqual(try remoteHead(), before, "a tampered vault was sent")
    }

    /// A sync with nothing to do verifies only the sync state's bucket; one that merges or
    /// sends checks the whole vault first, so a row changed elsewhere still stops it.
    func testARowChangedElsewhereStopsASyncThatMergesOrSendsAndCheckNamesIt() throws {
        try setUpTwoMachines()
        let storeB = homeB.appendingPathComponent(".local/share/mystash/Passwords.sqlite")
        let notesB = homeB.appendingPathComponent(".local/share/mystash/Notes.sqlite")
        func change(_ file: URL, _ sql: String, file line: UInt = #line) throws {
            XCTAssertEqual(try sqlite(file, sql).status, 0, sql, line: line)
        }
        func entriesB() throws -> String { try sqlite(storeB, "SELECT COUNT(*) FROM ZSYSTEM").output }

        // The sync state itself is what a sync with nothing to do verifies.
        try change(storeB, "UPDATE ZSYNCSTATE SET Z_OPT = Z_OPT + 7")
        let stateChanged = try onB(["sync"])
        XCTAssertEqual(stateChanged.status, 65, stateChanged.stderr)
        XCTAssertTrue(stateChanged.stderr.contains("changed outside mystash"), stateChanged.stderr)
        try change(storeB, "UPDATE ZSYNCSTATE SET Z_OPT = Z_OPT - 7")
        XCTAssertTrue(try okB(["sync"]).stdout.hasPrefix("Nothing to send or receive"))

        // A note changed behind mystash's back: nothing of it is read or sent when there is nothing to do...
        try change(notesB, "UPDATE ZNOTE SET Z_OPT = Z_OPT + 7")
        let idle = try okB(["sync"])
        XCTAssertTrue(idle.stdout.hasPrefix("Nothing to send or receive"), idle.stdout)
        let check = try onB(["check"])
        XCTAssertEqual(check.status, 65, check.stdout)
        XCTAssertTrue(check.stdout.contains("Note row 1: the row was changed outside mystash"), check.stdout)
        // ...and a sync that has something to merge refuses and applies nothing.
        try okA(["password", "add", "Second"], stdin: "2")
        try okA(["sync"])
        let entries = try entriesB()
        let merging = try onB(["sync"])
        XCTAssertEqual(merging.status, 65, merging.stderr)
        XCTAssertTrue(merging.stderr.contains("changed outside mystash: Notes.sqlite, Note row 1"), merging.stderr)
        XCTAssertEqual(try entriesB(), entries, "merged into a tampered vault")
        try change(notesB, "UPDATE ZNOTE SET Z_OPT = Z_OPT - 7")
        XCTAssertTrue(try okB(["sync"]).stdout.contains("added entry 'Second' from laptop"))

        // A sync that has something to send refuses and sends nothing.
        try okB(["password", "add", "Pending"], stdin: "p")
        try change(notesB, "UPDATE ZNOTE SET Z_OPT = Z_OPT + 7")
        let before = try remoteHead()
        let sending = try onB(["sync"])
        XCTAssertEqual(sending.status, 65, sending.stderr)
        XCTAssertTrue(sending.stderr.contains("changed outside mystash: Notes.sqlite, Note row 1"), sending.stderr)
        XCTAssertEqual(try remoteHead(), before, "a tampered vault was sent")
    }

    // MARK: - Master password

    func testPasswdElsewhereIsAdoptedAndRekeyElsewhereStillReads() throws {
        try setUpTwoMachines()
        try okA(["passwd", "--kdf-cost", "10"], environment: ["MYSTASH_NEW_PASSWORD": "second"])
        let sent = try okA(["sync"], environment: ["MYSTASH_PASSWORD": "second"])
        XCTAssertTrue(sent.stdout.contains("Sent this machine's new master password"), sent.stdout)
        let adopted = try okB(["sync"])
        XCTAssertTrue(adopted.stdout.contains("The master password was changed on laptop"), adopted.stdout)
        XCTAssertEqual(try onB(["password", "list"]).status, 77, "the old password still opens B")
        try okB(["password", "list"], environment: ["MYSTASH_PASSWORD": "second"])

        try okA(["passwd", "--rekey", "--kdf-cost", "10"],
                environment: ["MYSTASH_PASSWORD": "second", "MYSTASH_NEW_PASSWORD": "third"])
        let rekeyed = try okA(["sync"], environment: ["MYSTASH_PASSWORD": "third"])
        XCTAssertFalse(rekeyed.stdout.contains("changed entry"), "a rekey is sent as edits: \(rekeyed.stdout)")
        try okA(["password", "add", "After"], stdin: "x", environment: ["MYSTASH_PASSWORD": "third"])
        try okA(["sync"], environment: ["MYSTASH_PASSWORD": "third"])
        let notice = try okB(["sync"], environment: ["MYSTASH_PASSWORD": "second"])
        XCTAssertTrue(notice.stdout.contains("added entry 'After' from laptop"), notice.stdout)
        XCTAssertTrue(notice.stdout.contains("whose data key differs from this machine's"), notice.stdout)
        // A clone after the rekey opens with the new password and reads what came before it.
        let third = home.appendingPathComponent("third-vault")
        try okA(["clone", remote.path, "--vault", third.path], environment: ["MYSTASH_PASSWORD": "third"])
        let list = try okA(["password", "list", "--vault", third.path], environment: ["MYSTASH_PASSWORD": "third"])
        XCTAssertTrue(list.stdout.contains("GitHub") && list.stdout.contains("After"), list.stdout)
    }

    // MARK: - Concurrency and crashes

    func testTwoMachinesSyncingAtOnceEndWithTheSameContent() throws {
        try setUpTwoMachines()
        for index in 1...3 {
            try okA(["password", "add", "A\(index)"], stdin: "a")
            try okB(["password", "add", "B\(index)"], stdin: "b")
        }
        let a = process(["sync"])
        let b = process(["sync"])
        b.environment?["HOME"] = homeB.path
        for process in [a, b] {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }
        a.waitUntilExit()
        b.waitUntilExit()
        XCTAssertEqual([a.terminationStatus, b.terminationStatus], [0, 0])
        try okA(["sync"])
        try okB(["sync"])
        let names = try entryNames(onA)
        XCTAssertEqual(names, try entryNames(onB))
        for name in ["A1", "A2", "A3", "B1", "B2", "B3"] { XCTAssertTrue(names.contains(name), "\(names)") }
    }

    /// A `git` first on PATH that SIGKILLs mystash at its push: before it (`before`) or
    /// right after the push succeeded (`after`).
    func killingGit(_ when: String) throws -> String {
        let directory = home.appendingPathComponent("killing-git-\(when)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = """
            #!/bin/sh
            for argument in "$@"; do
              if [ "$argument" = push ]; then
                [ "\(when)" = after ] && /usr/bin/git "$@"
                kill -KILL $PPID
                exit 1
              fi
            done
            exec /usr/bin/git "$@"

            """
        let path = directory.appendingPathComponent("git")
        try script.write(to: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path.path)
        return directory.path + ":/usr/local/bin:/usr/bin:/bin"
    }

    func testKilledAtThePushLeavesVaultAndRemoteBeforeOrAfterAndARerunFinishes() throws {
        try setUpTwoMachines()
        try okA(["password", "add", "Killed"], stdin: "k")
        try okA(["password", "edit", "GitHub", "--user", "dave"])
        let before = try remoteHead()

        let killedBefore = try onA(["sync"], environment: ["PATH": try killingGit("before")])
        XCTAssertNotEqual(killedBefore.status, 0)
        XCTAssertEqual(try remoteHead(), before, "the remote changed")
        XCTAssertTrue(try okA(["check"]).stderr.contains("All is well"))

        let killedAfter = try onA(["sync"], environment: ["PATH": try killingGit("after")])
        XCTAssertNotEqual(killedAfter.status, 0)
        XCTAssertNotEqual(try remoteHead(), before, "the push did not happen")
        XCTAssertTrue(try okA(["check"]).stderr.contains("All is well"))
        let pushed = try remoteHead()

        // The rerun finds its own file and sends nothing twice.
        let rerun = try okA(["sync"])
        XCTAssertEqual(rerun.stdout, "Nothing to send or receive: in step with \(remote.path).\n")
        XCTAssertEqual(try remoteHead(), pushed)
        let received = try okB(["sync"])
        XCTAssertTrue(received.stdout.contains("added entry 'Killed' from laptop"), received.stdout)
        XCTAssertTrue(try okB(["password", "show", "GitHub"]).stdout.contains("dave"))
        XCTAssertEqual(try entryNames(onA), try entryNames(onB))
    }

    /// The remote's log files, from its main branch.
    func remoteLogFiles() throws -> Set<String> {
        Set(try git(["--git-dir", remote.path, "ls-tree", "-r", "--name-only", "main"]).split(separator: "\n")
            .map(String.init).filter { $0.hasPrefix("log/") })
    }

    func testSIGKILLAtEveryWriteOfASyncLeavesBothSidesBeforeOrAfterAndARerunFinishes() throws {
        let strace = "/usr/bin/strace"
        guard FileManager.default.isExecutableFile(atPath: strace) else { throw XCTSkip("strace is not installed") }
        try setUpTwoMachines()
        try okA(["password", "add", "Swept"], stdin: "s")
        try okA(["password", "edit", "GitHub", "--user", "erin"])
        let pristine = home.appendingPathComponent("pristine")
        try FileManager.default.createDirectory(at: pristine, withIntermediateDirectories: true)
        let vaultA = vaultDirectory
        let vaultB = homeB.appendingPathComponent(".local/share/mystash")
        let places = [vaultA, vaultB, remote!]
        for (index, place) in places.enumerated() {
            try FileManager.default.copyItem(at: place, to: pristine.appendingPathComponent("\(index)"))
        }
        func restore() throws {
            for (index, place) in places.enumerated() {
                try FileManager.default.removeItem(at: place)
                try FileManager.default.copyItem(at: pristine.appendingPathComponent("\(index)"), to: place)
            }
        }
        let before = try remoteLogFiles()
        var injections = 0
        var killed = 0
        // Every call of each kind that changes a file, in mystash itself (git's are its own).
        for (syscall, every) in [("pwrite64", 12), ("fdatasync", 3), ("unlink", 2), ("write", 1), ("rename", 1)] {
            var call = 1
            while true {
                try restore()
                let traced = process(["sync"])
                traced.executableURL = URL(fileURLWithPath: strace)
                traced.arguments = ["-qq", "-o", "/dev/null", "-e", "trace=\(syscall)",
                                    "-e", "inject=\(syscall):signal=KILL:when=\(call)", Self.binary.path, "sync"]
                let result = try execute(traced, stdin: nil)
                injections += 1
                let label = "\(syscall) #\(call)"
                // The remote: exactly as before, or with A's one new file.
                let after = try remoteLogFiles()
                XCTAssertTrue(after == before || (after.count == before.count + 1 && after.isSuperset(of: before)),
                              "\(label): the remote holds \(after.subtracting(before))")
                XCTAssertTrue(try okA(["check"]).stderr.contains("All is well"), label)
                XCTAssertTrue(try entryNames(onA).contains("Swept"), label)
                // A rerun finishes, sends nothing twice, and B gets everything once.
                try okA(["sync"])
                XCTAssertEqual(try remoteLogFiles().count, before.count + 1, "\(label): files sent twice or never")
                try okB(["sync"])
                XCTAssertEqual(try entryNames(onA), try entryNames(onB), label)
                XCTAssertTrue(try okB(["password", "show", "GitHub"]).stdout.contains("erin"), label)
                // strace dies of the signal that killed mystash; a run past the last call exits.
                guard traced.terminationReason == .uncaughtSignal, result.status == SIGKILL else {
                    XCTAssertEqual(result.status, 0, "\(label): \(result.stderr)")
                    break
                }
                killed += 1
                call += every
            }
        }
        XCTAssertGreaterThan(killed, 10, "the sweep killed mystash \(killed) times in \(injections) runs")
    }

    func testSIGKILLDuringACloneLeavesNoVaultOrACompleteOneAndARerunFinishes() throws {
        let strace = "/usr/bin/strace"
        guard FileManager.default.isExecutableFile(atPath: strace) else { throw XCTSkip("strace is not installed") }
        try setUpTwoMachines()
        try okB(["password", "add", "FromB"], stdin: "b")
        try okB(["sync"])
        let expected = try entryNames(onB)
        let target = homeB.appendingPathComponent("clone")
        var killed = 0
        for (syscall, every) in [("rename", 1), ("pwrite64", 15), ("fdatasync", 4)] {
            var call = 1
            while true {
                try? FileManager.default.removeItem(at: target)
                let traced = process([])
                traced.environment?["HOME"] = homeB.path
                traced.executableURL = URL(fileURLWithPath: strace)
                traced.arguments = ["-qq", "-o", "/dev/null", "-e", "trace=\(syscall)",
                                    "-e", "inject=\(syscall):signal=KILL:when=\(call)", Self.binary.path,
                                    "clone", remote.path, "--vault", target.path]
                let result = try execute(traced, stdin: nil)
                let label = "\(syscall) #\(call)"
                if FileManager.default.fileExists(atPath: target.path) {
                    // Complete, or not there at all.
                    XCTAssertTrue(try okB(["check", "--vault", target.path]).stderr.contains("All is well"), label)
                    XCTAssertEqual(try entryNames { arguments, input, environment in
                        try self.onB(arguments + ["--vault", target.path], stdin: input, environment: environment)
                    }, expected, label)
                }
                guard traced.terminationReason == .uncaughtSignal, result.status == SIGKILL else {
                    XCTAssertEqual(result.status, 0, "\(label): \(result.stderr)")
                    break
                }
                killed += 1
                // A rerun finishes (what the killed clone left beside it is cleared).
                try? FileManager.default.removeItem(at: target)
                try okB(["clone", remote.path, "--vault", target.path])
                call += every
            }
        }
        XCTAssertGreaterThan(killed, 5)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: homeB.path).filter { $0.hasPrefix(".clone.") }
        XCTAssertEqual(leftovers, [], "a killed clone left its build behind")
    }

    // MARK: - A plain folder, and what is refused

    func testAFolderKeptInStepByAnotherProgramWorksAsARemote() throws {
        let folder = home.appendingPathComponent("Sync/vault")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try okA(["init", "--kdf-cost", "10"])
        try okA(["password", "add", "Folder"], stdin: "f")
        try okA(["sync", "--remote", folder.path])
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.appendingPathComponent("MYSTASH-SYNC").path))
        try okB(["clone", folder.path])
        XCTAssertEqual(try okB(["password", "show", "Folder", "--field", "password"]).stdout, "f\n")
    }

    func testSyncWithoutRemoteAndAnotherVaultsRemoteAreRefused() throws {
        try okA(["init", "--kdf-cost", "10"])
        let none = try onA(["sync"])
        XCTAssertEqual(none.status, 64)
        XCTAssertTrue(none.stderr.contains("this vault has no sync remote yet"), none.stderr)
        try okA(["sync", "--remote", remote.path])
        try okB(["init", "--kdf-cost", "10"])
        let other = try onB(["sync", "--remote", remote.path])
        XCTAssertEqual(other.status, 65)
        XCTAssertTrue(other.stderr.contains("holds the sync log of another vault"), other.stderr)
        XCTAssertTrue(other.stderr.contains("mystash clone"), other.stderr)
    }

    /// A token in the remote's URL never reaches a message: the unreachable remote is named
    /// without it, as git names it.
    func testATokenInTheRemotesURLIsLeftOutOfMessages() throws {
        try okA(["init", "--kdf-cost", "10"])
        for remote in ["https://ada:ghp_TOKENSECRET@127.0.0.1:9/vault.git", "https://ghp_TOKENSECRET@127.0.0.1:9/vault.git"] {
            let result = try onA(["sync", "--remote", remote], environment: ["GIT_TERMINAL_PROMPT": "0"])
            XCTAssertEqual(result.status, 75, result.stderr)
            XCTAssertTrue(result.stderr.contains("'https://127.0.0.1:9/vault.git'"), result.stderr)
            XCTAssertFalse((result.stdout + result.stderr).contains("TOKENSECRET"), result.stderr)
        }
        XCTAssertEqual(withoutURLPasswords("'ada:s3cret@host.example:vault.git' and git@host:x.git"),
                       "'ada@host.example:vault.git' and git@host:x.git")
    }

    // MARK: - Over ssh

    /// A and B reach the bare repository only through a local sshd, as `user@localhost:/path`.
    func testARemoteOverSSHSyncsAndClonesAndARefusedKeyChangesNothing() throws {
        for tool in ["ssh", "ssh-keygen"] where ChildProcess.find(tool) == nil {
            throw XCTSkip("\(tool) is not installed (CI installs openssh-client)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd") else {
            throw XCTSkip("sshd is not installed (CI installs openssh-server)")
        }
        let sshd = try LocalSSHD(home: home)
        defer { sshd.stop() }
        let identity = home.appendingPathComponent("id_sync").path
        XCTAssertEqual(ChildProcess.execute(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sync@test",
                                             "-f", identity])?.status, 0)
        let publicKey = try Data(contentsOf: URL(fileURLWithPath: identity + ".pub"))
        try publicKey.write(to: sshd.authorizedKeys)
        // git's ssh: this sshd's port and key, no prompt, nothing of the user's own ssh setup; the
        // wrapper notes the environment each ssh got.
        let seen = home.appendingPathComponent("ssh-environments")
        let wrapper = home.appendingPathComponent("git-ssh")
        try """
            #!/bin/sh
            env >> \(shellQuoted(seen.path))
            exec ssh -F /dev/null -p \(sshd.port) -i \(shellQuoted(identity)) -o IdentitiesOnly=yes \\
                -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR "$@"

            """.write(to: wrapper, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(wrapper.path, 0o700), 0)
        let ssh = ["GIT_SSH": wrapper.path]
        let user = String(cString: getpwuid(getuid()).pointee.pw_name)
        let url = "\(user)@localhost:\(remote.path)"

        try okA(["init", "--kdf-cost", "10"])
        try okA(["password", "add", "Router", "--user", "admin"], stdin: "over-ssh-pw")
        XCTAssertEqual(try okA(["sync", "--remote", url, "--device-name", "laptop"], environment: ssh).stdout,
                       "Sent 1 change to \(url):\n  added entry 'Router'\n")
        let clone = try okB(["clone", url, "--device-name", "desktop"], environment: ssh)
        XCTAssertEqual(clone.stderr, "Created a vault at \(homeB.path)/.local/share/mystash from \(url) "
                        + "(1 item from 1 log file).\n")
        XCTAssertEqual(try okB(["password", "show", "Router", "--field", "password"]).stdout, "over-ssh-pw\n")
        try okB(["password", "edit", "Router", "--user", "root"])
        try okB(["sync"], environment: ssh)
        XCTAssertEqual(try okA(["sync"], environment: ssh).stdout,
                       "Received 1 change:\n  changed entry 'Router' (user ID) from desktop\n")
        XCTAssertTrue(try okA(["password", "show", "Router"]).stdout.contains("root"))
        XCTAssertEqual(try okA(["sync"], environment: ssh).stdout,
                       "Nothing to send or receive: in step with \(url).\n")

        // The key no longer authorized: the remote cannot be reached, nothing is sent or changed.
        try Data().write(to: sshd.authorizedKeys)
        let head = try git(["--git-dir", remote.path, "rev-parse", "main"])
        try okA(["password", "edit", "Router", "--user", "nobody"])
        let refused = try onA(["sync"], environment: ssh)
        XCTAssertEqual(refused.status, 75, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("cannot reach the sync remote '\(url)'"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("Permission denied"), refused.stderr)
        XCTAssertEqual(try git(["--git-dir", remote.path, "rev-parse", "main"]), head)
        // Authorized again, the edit made while it was refused goes out.
        try publicKey.write(to: sshd.authorizedKeys)
        try okA(["sync"], environment: ssh)
        try okB(["sync"], environment: ssh)
        XCTAssertTrue(try okB(["password", "show", "Router"]).stdout.contains("nobody"))
        // Every sync and the clone went through ssh, which never saw the master password's variables.
        let environments = try String(contentsOf: seen, encoding: .utf8)
        XCTAssertGreaterThanOrEqual(environments.components(separatedBy: "GIT_SSH=").count - 1, 8)
        for variable in ["MYSTASH_PASSWORD=", "MYSTASH_NEW_PASSWORD="] {
            XCTAssertFalse(environments.contains(variable), "ssh was given \(variable)")
        }
    }
}
