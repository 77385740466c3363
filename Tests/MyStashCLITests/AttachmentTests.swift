import Foundation
import XCTest

/// `password attach`, `detach` and `attachment list/save` through the built binary.
final class AttachmentTests: CLITestCase {
    /// Bytes no code path could produce by chance: random, and crossing chunk boundaries (1 MiB).
    func randomFile(_ name: String, size: Int) throws -> (url: URL, data: Data) {
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        let data = random.readData(ofLength: size)
        try random.close()
        let url = home.appendingPathComponent(name)
        try data.write(to: url)
        return (url, data)
    }

    func addEntry(_ name: String = "Bank") throws {
        try runOK(["password", "add", name], stdin: "hunter2\n")
    }

    func testAttachedFileComesBackByteForByteAndIsListed() throws {
        try initVault()
        try addEntry()
        let (file, data) = try randomFile("statement.pdf", size: 3 * 1_048_576 + 12_345)
        let attached = try run(["password", "attach", "Bank", file.path])
        XCTAssertEqual(attached.status, 0, attached.stderr)
        XCTAssertEqual(attached.stderr, "Attached 'statement.pdf' (3.0 MiB) to entry 1 'Bank'.\n")
        // Listed by show, in its JSON and by attachment list.
        let shown = try runOK(["password", "show", "Bank"]).stdout
        XCTAssertTrue(shown.contains("Attachment: statement.pdf (3.0 MiB)\n"), shown)
        let listed = try XCTUnwrap(try json(try runOK(["password", "show", "Bank", "--json"]).stdout) as? [String: Any])
        let attachments = try XCTUnwrap(listed["attachments"] as? [[String: Any]])
        XCTAssertEqual(attachments.map { $0["name"] as? String }, ["statement.pdf"])
        XCTAssertEqual(attachments.first?["size"] as? Int, data.count)
        XCTAssertTrue(try runOK(["password", "attachment", "list", "Bank"]).stdout.contains("statement.pdf"))

        // Saved to a file: mode 0600, the same bytes.
        let out = home.appendingPathComponent("copy.pdf")
        let saved = try run(["password", "attachment", "save", "Bank", "statement.pdf", "-o", out.path])
        XCTAssertEqual(saved.status, 0, saved.stderr)
        XCTAssertEqual(try Data(contentsOf: out), data)
        let mode = try FileManager.default.attributesOfItem(atPath: out.path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        // Never over a file without --force; with it, replaced.
        try Data("mine".utf8).write(to: out)
        let refused = try run(["password", "attachment", "save", "Bank", "statement.pdf", "-o", out.path])
        XCTAssertEqual(refused.status, 73)
        XCTAssertEqual(refused.stderr, "Error: '\(out.path)' exists; nothing was written\nhint: add --force to replace it\n")
        XCTAssertEqual(try Data(contentsOf: out), Data("mine".utf8))
        try runOK(["password", "attachment", "save", "Bank", "STATEMENT.PDF", "-o", out.path, "--force"])
        XCTAssertEqual(try Data(contentsOf: out), data)
        // To stdout, and into a directory under its own name.
        let piped = try shell("mystash password attachment save Bank statement.pdf -o - | cmp - \(file.path) && echo same")
        XCTAssertEqual(piped.stdout, "same\n", piped.stderr)
        let folder = home.appendingPathComponent("folder")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try runOK(["password", "attachment", "save", "Bank", "#1", "-o", folder.path])
        XCTAssertEqual(try Data(contentsOf: folder.appendingPathComponent("statement.pdf")), data)
        // No temporary file left beside any of them.
        for place in [home!, folder] {
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: place.path).filter {
                $0.hasPrefix(".mystash-attachment-")
            }
            XCTAssertEqual(leftovers, [String]())
        }

        // The plaintext is nowhere in the stores.
        let stores = try Data(contentsOf: vaultDirectory.appendingPathComponent("Passwords.sqlite"))
        XCTAssertNil(stores.range(of: data.subdata(in: 1000..<1064)))

        let detached = try run(["password", "detach", "Bank", "statement.pdf", "--force"])
        XCTAssertEqual(detached.status, 0, detached.stderr)
        XCTAssertFalse(try runOK(["password", "show", "Bank"]).stdout.contains("Attachment"))
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEMATTACHMENTCHUNK"), "0")
        XCTAssertEqual(try run(["check"]).status, 0)
    }

    func testBadRequestsAreRefusedWithTheirCodeAndSaveNothing() throws {
        try initVault()
        try addEntry()
        let (file, _) = try randomFile("a.bin", size: 10)
        XCTAssertEqual(try run(["password", "attach", "Nobody", file.path]).status, 66)
        let missing = try run(["password", "attach", "Bank", home.appendingPathComponent("nope").path])
        XCTAssertEqual(missing.status, 66)
        XCTAssertTrue(missing.stderr.hasPrefix("Error: cannot attach '"), missing.stderr)
        XCTAssertEqual(try run(["password", "attach", "Bank", home.path]).status, 64)
        XCTAssertEqual(try run(["password", "attach", "Bank", "-"], stdin: "x").status, 64, "stdin needs --name")
        try runOK(["password", "attach", "Bank", file.path])
        let twice = try run(["password", "attach", "Bank", file.path])
        XCTAssertEqual(twice.status, 65)
        XCTAssertTrue(twice.stderr.contains("already has an attachment named 'a.bin'"), twice.stderr)
        let slash = try run(["password", "attach", "Bank", file.path, "--name", "x/y"])
        XCTAssertEqual(slash.status, 65, slash.stderr)
        let unknown = try run(["password", "attachment", "save", "Bank", "b.bin", "-o", "-"])
        XCTAssertEqual(unknown.status, 66)
        XCTAssertEqual(unknown.stderr, "Error: entry 'Bank' has no attachment 'b.bin'\nhint: its attachments are: 'a.bin'\n")
        XCTAssertEqual(try run(["password", "detach", "Bank", "a.bin"]).status, 64, "no terminal to confirm")
        // From standard input, named.
        try runOK(["password", "attach", "Bank", "-", "--name", "piped.txt"], stdin: "from a pipe")
        XCTAssertEqual(try runOK(["password", "attachment", "save", "Bank", "piped.txt", "-o", "-"]).stdout,
                       "from a pipe")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEMATTACHMENT"), "2")
    }

    /// A rekey re-encrypts the chunks with the rest: afterwards the file reads back under the new key.
    func testAttachmentsReadBackAfterARekey() throws {
        try initVault()
        try addEntry()
        let (file, _) = try randomFile("key.bin", size: 1_048_576 + 5)
        try runOK(["password", "attach", "Bank", file.path])
        let chunks = "SELECT hex(ZDATA) FROM ZSYSTEMATTACHMENTCHUNK ORDER BY Z_PK"
        let before = try sqlite("Passwords.sqlite", chunks)
        try runOK(["passwd", "--rekey", "--kdf-cost", "10"], environment: ["MYSTASH_NEW_PASSWORD": "pw2"])
        XCTAssertNotEqual(try sqlite("Passwords.sqlite", chunks), before)
        let same = try shell("mystash password attachment save Bank key.bin -o - | cmp - \(file.path) && echo same",
                             environment: ["MYSTASH_PASSWORD": "pw2"])
        XCTAssertEqual(same.stdout, "same\n", same.stderr)
        XCTAssertEqual(try run(["check"], environment: ["MYSTASH_PASSWORD": "pw2"]).status, 0)
    }

    func testAttachmentNamesCompleteInAnUnlockedSession() throws {
        try initVault()
        try addEntry()
        let (file, _) = try randomFile("statement.pdf", size: 100)
        try runOK(["password", "attach", "Bank", file.path])
        try runOK(["password", "attach", "Bank", file.path, "--name", "scan.png"])
        let query = ["---completion", "password", "detach", "--", "positional@1", "4", "2",
                     "mystash", "password", "detach", "Bank", "st"]
        XCTAssertEqual(try run(query).stdout, "", "names are encrypted: nothing while locked")
        guard try run(["unlock", "--timeout", "5m"]).status == 0 else { throw XCTSkip("no kernel keyring here") }
        defer { _ = try? run(["lock"]) }
        XCTAssertEqual(try run(query, removing: ["MYSTASH_PASSWORD"]).stdout, "statement.pdf\n")
        let save = ["---completion", "password", "attachment", "save", "--", "positional@1", "5", "0",
                    "mystash", "password", "attachment", "save", "Bank", ""]
        XCTAssertEqual(try run(save, removing: ["MYSTASH_PASSWORD"]).stdout, "scan.png\nstatement.pdf\n")
    }

    func testAFileOverTheLimitIsRefusedBeforeAnythingIsWritten() throws {
        try initVault()
        try addEntry()
        // Sparse: 600 MiB on the file system's word, no disk.
        let big = home.appendingPathComponent("disk.img")
        XCTAssertTrue(FileManager.default.createFile(atPath: big.path, contents: nil))
        let handle = try FileHandle(forWritingTo: big)
        try handle.truncate(atOffset: 600 << 20)
        try handle.close()
        let refused = try run(["password", "attach", "Bank", big.path])
        XCTAssertEqual(refused.status, 65)
        XCTAssertEqual(refused.stderr, """
            Error: 'disk.img' is larger than the 512 MiB an attachment may hold; nothing was saved
            hint: compress or split the file, or keep it outside the vault (encrypted with gpg or age)

            """)
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEMATTACHMENT"), "0")
    }

    /// The integrity record covers the chunk rows: a chunk moved to another attachment (both rows'
    /// attachment columns swapped with sqlite3) is found before any byte is written out.
    func testAChunkSwappedBetweenAttachmentsIsCaught() throws {
        try initVault()
        try addEntry()
        let (first, _) = try randomFile("one.bin", size: 1_048_576 + 10)
        let (second, _) = try randomFile("two.bin", size: 1_048_576 + 20)
        try runOK(["password", "attach", "Bank", first.path])
        try runOK(["password", "attach", "Bank", second.path])
        let rows = try sqlite("Passwords.sqlite",
                              "SELECT Z_PK, ZATTACHMENT FROM ZSYSTEMATTACHMENTCHUNK WHERE ZINDEX = 1")
            .split(separator: "\n").map { $0.split(separator: "|").map(String.init) }
        XCTAssertEqual(rows.count, 2)
        try sqlite("Passwords.sqlite", """
            UPDATE ZSYSTEMATTACHMENTCHUNK SET ZATTACHMENT = \(rows[1][1]) WHERE Z_PK = \(rows[0][0]);
            UPDATE ZSYSTEMATTACHMENTCHUNK SET ZATTACHMENT = \(rows[0][1]) WHERE Z_PK = \(rows[1][0]);
            """)
        let out = home.appendingPathComponent("out.bin")
        let saved = try run(["password", "attachment", "save", "Bank", "one.bin", "-o", out.path])
        XCTAssertEqual(saved.status, 65)
        XCTAssertTrue(saved.stderr.contains("changed outside mystash"), saved.stderr)
        XCTAssertTrue(saved.stderr.contains("AttachmentChunk row \(rows[0][0])"), saved.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out.path))
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65)
        XCTAssertTrue(check.stdout.contains("AttachmentChunk row \(rows[1][0])"), check.stdout)
    }

    /// Killed (strace, SIGKILL) at a sample of the writes and syncs of an attach that takes
    /// several saves: afterwards the vault checks clean and shows the whole attachment or none,
    /// and the next attach clears what the killed one left.
    func testAnAttachKilledAtAnyWriteLeavesTheWholeFileOrNone() throws {
        guard let strace = ["/usr/bin/strace", "/bin/strace"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else { throw XCTSkip("strace is not installed (.ci/run installs it)") }
        try initVault()
        try addEntry()
        // Over one save's four chunks: three saves (the row, four chunks, the rest).
        let (file, _) = try randomFile("big.bin", size: 5 * 1_048_576 + 7)
        let base = home.appendingPathComponent("base")
        try FileManager.default.copyItem(at: vaultDirectory, to: base)
        func traced(_ options: [String]) throws -> Result {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: strace)
            // The main thread only, as scripts/crash-sweep: it is the one that writes.
            process.arguments = ["-qq"] + options + [Self.binary.path, "password", "attach", "Bank", file.path]
            process.environment = baseEnvironment
            return try execute(process, stdin: nil)
        }
        let counted = try traced(["-c", "-U", "name,calls", "-e", "trace=fdatasync,fsync,pwrite64"])
        let calls = Dictionary(uniqueKeysWithValues: counted.stderr.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            return words.count == 2 ? (String(words[0]), Int(words[1])) : nil
        }.compactMap { name, count in count.map { (name, $0) } })
        let syncs = (calls["fdatasync"] ?? 0) + (calls["fsync"] ?? 0)
        XCTAssertGreaterThan(syncs, 4, counted.stderr)
        let writes = try XCTUnwrap(calls["pwrite64"], counted.stderr)
        var points = ["fdatasync", "fsync"].flatMap { name in (0..<(calls[name] ?? 0)).map { (name, $0 + 1) } }
        points += stride(from: 1, through: writes, by: max(1, writes / 6)).map { ("pwrite64", $0) }
        var whole = 0
        var none = 0
        for (call, number) in points {
            try FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.copyItem(at: base, to: vaultDirectory)
            let killed = try traced(["-e", "trace=\(call)", "-e", "inject=\(call):signal=KILL:when=\(number)"])
            XCTAssertNotEqual(killed.status, 0, "\(call)#\(number)")
            let check = try run(["check"])
            XCTAssertEqual(check.status, 0, "\(call)#\(number): \(check.stdout) \(check.stderr)")
            let listed = try runOK(["password", "attachment", "list", "Bank"])
            if listed.stdout.contains("big.bin") {
                whole += 1
                let same = try shell("mystash password attachment save Bank big.bin -o - | cmp - \(file.path) && echo same")
                XCTAssertEqual(same.stdout, "same\n", "\(call)#\(number): \(same.stderr)")
            } else {
                none += 1
                XCTAssertEqual(listed.stderr, "No attachments.\n", "\(call)#\(number)")
                // Whatever the killed attach left is cleared by the next one.
                try runOK(["password", "attach", "Bank", file.path])
                XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEMATTACHMENT"), "1")
                XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEMATTACHMENTCHUNK"), "6")
                XCTAssertEqual(try run(["check"]).status, 0)
            }
        }
        XCTAssertGreaterThan(none, 0, "some kills came before the last save")
        XCTAssertGreaterThan(whole + none, 10)
    }
}

extension SyncTests {
    /// Sync carries no files (documented): an attachment stays where it was attached, sync says
    /// so, and the entry's other changes still travel both ways without touching it.
    func testAttachmentsStayOnTheirMachineAndSyncSaysSo() throws {
        try setUpTwoMachines()
        let file = try scannedPassport()
        try okA(["password", "attach", "GitHub", file.path])
        let sent = try okA(["sync"])
        XCTAssertTrue(sent.stdout.contains("1 attachment stays on this machine: sync does not carry attachments\n"),
                      sent.stdout)
        try okB(["sync"])
        XCTAssertFalse(try okB(["password", "show", "GitHub"]).stdout.contains("Attachment"))
        XCTAssertFalse(try okB(["sync"]).stdout.contains("attachment"), "B has none to leave behind")
        try okB(["password", "edit", "GitHub", "--user", "bob"])
        try syncBoth()
        let shown = try okA(["password", "show", "GitHub"]).stdout
        XCTAssertTrue(shown.contains("bob"), shown)
        XCTAssertTrue(shown.contains("Attachment: scan.pdf (16 bytes)"), shown)
    }
}

extension BrowseTests {
    func testBrowseDetailsListAttachmentsAndDeletingSaysTheyGoForGood() throws {
        try addEntries()
        let file = try scannedPassport()
        try runOK(["password", "attach", "Router", file.path])
        let tmux = try TmuxSession(browseCommand())
        tmux.expect("Passwords (3)")
        tmux.send("Down")
        tmux.send("Down")
        tmux.wait(for: "Router with its attachment") {
            $0.contains("Name      Router") && $0.contains("Attached  scan.pdf (16 bytes)")
        }
        // Removing it says the attachment goes for good: undo brings back the entry alone.
        tmux.send("C-d")
        tmux.expect("Delete entry 2 'Router' and its 1 attachment (for good)? y/n")
        tmux.type("y")
        tmux.expect("Removed entry 2. Ctrl-Z brings it back, without its attachments.")
        tmux.send("C-q")
        tmux.expect("browse-exit=0")
    }
}

extension CLITestCase {
    /// A small file to attach: 16 bytes.
    func scannedPassport() throws -> URL {
        let file = home.appendingPathComponent("scan.pdf")
        try Data("scanned passport".utf8).write(to: file)
        return file
    }
}
