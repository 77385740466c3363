import Foundation
import XCTest

/// One byte of an index changed on disk: reads through the index would miss a row (a custom
/// field vanished from `show` and `export`, exit 0). Every command now refuses the
/// vault, and check names the index, exit 65.
final class IndexDamageTests: CLITestCase {
    /// Rewrites, in the index's only (leaf) page, the first entry whose first column is the
    /// one-byte integer `from` to `to`; returns whether one was found.
    func retarget(index: String, from: UInt8, to: UInt8, in store: URL) throws -> Bool {
        let rootPage = try sqlite(store, "SELECT rootpage FROM sqlite_master WHERE name = '\(index)'")
        let pageSize = try sqlite(store, "PRAGMA page_size")
        let page = try XCTUnwrap(Int(rootPage.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        let size = try XCTUnwrap(Int(pageSize.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        var bytes = [UInt8](try Data(contentsOf: store))
        let start = (page - 1) * size + (page == 1 ? 100 : 0)
        XCTAssertEqual(bytes[start], 0x0A, "a leaf index page")
        let cells = Int(bytes[start + 3]) << 8 | Int(bytes[start + 4])
        for cell in 0..<cells {
            let pointer = start + 8 + 2 * cell
            var offset = (page - 1) * size + (Int(bytes[pointer]) << 8 | Int(bytes[pointer + 1]))
            offset += 1  // payload size (one byte for such short entries)
            let headerSize = Int(bytes[offset])
            // Serial type 1: an 8-bit integer, the first value after the header.
            guard bytes[offset + 1] == 1, bytes[offset + headerSize] == from else { continue }
            bytes[offset + headerSize] = to
            try Data(bytes).write(to: store)
            return true
        }
        return false
    }

    /// Found by a reviewer: a NUL byte written into an index's name (SQLite reads a name up to
    /// it) made `check` stop with SQLite's "unrecognized token" and exit 1; now the commands that
    /// check every index (those reading the whole store) name it and refuse the vault.
    func testAnIndexNameHoldingANulIsNamed() throws {
        try initVault()
        try runOK(["password", "add", "Bank", "--user", "me"], stdin: "secret\n")
        let store = vaultDirectory.appendingPathComponent("Passwords.sqlite")
        _ = try sqlite(store, "PRAGMA writable_schema = ON; UPDATE sqlite_master SET name = name || char(0) || 'x' "
                           + "WHERE name = 'ZFIELD_ZENTRY_INDEX';")
        let problem = "index 'ZFIELD_ZENTRY_INDEX\\u{0}x' on ZFIELD has a name holding a NUL byte"
        for command in [["export"], ["password", "list"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(problem), result.stderr)
            XCTAssertEqual(result.stdout, "")
        }
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65, check.stderr)
        XCTAssertTrue(check.stdout.contains("Passwords.sqlite: " + problem), check.stdout)
        XCTAssertFalse(check.stderr.contains("unrecognized token"), check.stderr)
    }

    func testAnIndexEntryPointingAtAnotherEntryIsCaught() throws {
        try initVault()
        let document = """
            {"format": "mystash-json", "version": 2, "categories": [], "notes": [], "passwords": [
              {"name": "First", "password": "one", "fields": [{"name": "PIN", "value": "1234", "hidden": true}]},
              {"name": "Second", "password": "two", "fields": [{"name": "Code", "value": "5678", "hidden": false}]}]}
            """
        let file = home.appendingPathComponent("fields.json")
        try document.write(to: file, atomically: true, encoding: .utf8)
        try runOK(["import", file.path, "--format", "mystash-json"])
        XCTAssertTrue(try runOK(["password", "show", "Second", "--reveal"]).stdout.contains("5678"))
        let store = vaultDirectory.appendingPathComponent("Passwords.sqlite")
        // Second's field now listed under First (SQLite stores 1 as a constant, 2 as one byte).
        XCTAssertTrue(try retarget(index: "ZFIELD_ZENTRY_INDEX", from: 2, to: 1, in: store))

        for command in [["password", "show", "Second", "--reveal"], ["export"], ["password", "list"]] {
            let result = try run(command)
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.contains("index 'ZFIELD_ZENTRY_INDEX' does not match table ZFIELD"), result.stderr)
            XCTAssertEqual(result.stdout, "")
        }
        let check = try run(["check"])
        XCTAssertEqual(check.status, 65, check.stderr)
        XCTAssertTrue(check.stdout.contains("Passwords.sqlite: index 'ZFIELD_ZENTRY_INDEX' does not match table ZFIELD"),
                      check.stdout)
        XCTAssertFalse(check.stderr.contains("SQLite error"), check.stderr)
    }

    /// Each page of each store zeroed in turn: check exits 65 naming the damaged store (or 0
    /// when it passes as a whole, as for an unused page), never 1 with a raw SQLite error; a
    /// reading command exits 0 or 65.
    func testEveryZeroedPageIsNamedByCheck() throws {
        try initVault()
        try runOK(["password", "add", "Bank", "--category", "Banking"], stdin: "s3cret\n")
        try runOK(["note", "add", "Wi-Fi"], stdin: "code 1234")
        let base = home.appendingPathComponent("base")
        try FileManager.default.copyItem(at: vaultDirectory, to: base)
        var damaged = 0
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let pages = try Data(contentsOf: base.appendingPathComponent(store)).count / 4096
            for page in 1...pages {
                try FileManager.default.removeItem(at: vaultDirectory)
                try FileManager.default.copyItem(at: base, to: vaultDirectory)
                let file = vaultDirectory.appendingPathComponent(store)
                var bytes = try Data(contentsOf: file)
                bytes.replaceSubrange((page - 1) * 4096..<page * 4096, with: Data(count: 4096))
                try bytes.write(to: file)
                let check = try run(["check"])
                XCTAssertTrue([0, 65].contains(check.status), "\(store) page \(page): \(check.stderr)")
                XCTAssertFalse((check.stdout + check.stderr).contains("SQLite error"), "\(store) page \(page)")
                if check.status == 65 {
                    damaged += 1
                    XCTAssertTrue((check.stdout + check.stderr).contains(store), "\(store) page \(page): "
                                  + check.stdout + check.stderr)
                }
                for command in [["password", "list"], ["note", "list"], ["password", "show", "Bank"]] {
                    let result = try run(command)
                    XCTAssertTrue([0, 65].contains(result.status), "\(store) page \(page) \(command): \(result.stderr)")
                }
            }
        }
        XCTAssertGreaterThan(damaged, 10)
    }

    /// A copy of the vault taken while a save was being written, without its rollback journals
    /// (a backup tool that skips them): each such copy opens as the vault before or after the
    /// save, or is refused with exit 65 and, by check, named problems — never exit 1.
    func testCopiesTakenMidSaveWithoutTheirJournalsAreNamedByCheck() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            throw XCTSkip("strace is not installed (.ci/run installs it)")
        }
        try initVault()
        for index in 0..<30 {
            try runOK(["password", "add", "entry \(index)", "--category", "Banking"], stdin: "pw\(index)\n")
        }
        let base = home.appendingPathComponent("base")
        try FileManager.default.copyItem(at: vaultDirectory, to: base)
        try """
            {"format": "mystash-json", "version": 2, "categories": ["Banking"], "notes": [], "passwords": [
              {"name": "new one", "password": "x", "category": "Banking"},
              {"name": "entry 3", "password": "changed", "category": "Banking"}]}
            """.write(to: home.appendingPathComponent("more.json"), atomically: true, encoding: .utf8)
        // How many pwrite64 calls the import makes: the stores' own pages are written last, after
        // the journals, so kill points spread over the whole run land in them too.
        let log = home.appendingPathComponent("writes.log")
        let counted = Process()
        counted.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        counted.arguments = ["-f", "-o", log.path, "-e", "trace=pwrite64", Self.binary.path, "import",
                             home.appendingPathComponent("more.json").path]
        counted.environment = baseEnvironment
        XCTAssertEqual(try execute(counted, stdin: nil).status, 0)
        let writes = try String(contentsOf: log, encoding: .utf8).components(separatedBy: "pwrite64(").count - 1
        XCTAssertGreaterThan(writes, 4)
        var refused = 0
        for write in Set(stride(from: 1, through: writes, by: max(1, writes / 16))).union([writes]).sorted() {
            try? FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.copyItem(at: base, to: vaultDirectory)
            let killed = Process()
            killed.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
            killed.arguments = ["-f", "-o", "/dev/null", "-e", "inject=pwrite64:signal=KILL:when=\(write)",
                                Self.binary.path, "import", home.appendingPathComponent("more.json").path]
            killed.environment = baseEnvironment
            _ = try execute(killed, stdin: nil)
            for leftover in try FileManager.default.contentsOfDirectory(atPath: vaultDirectory.path)
            where leftover.contains("-journal") || leftover.contains("-mj") {
                try FileManager.default.removeItem(at: vaultDirectory.appendingPathComponent(leftover))
            }
            let check = try run(["check"])
            XCTAssertTrue([0, 65].contains(check.status), "write \(write): \(check.stderr)")
            XCTAssertFalse((check.stdout + check.stderr).contains("SQLite error"), "write \(write): \(check.stderr)")
            if check.status == 65 { refused += 1 }
            let list = try run(["password", "list"])
            XCTAssertTrue([0, 65].contains(list.status), "write \(write): \(list.stderr)")
        }
        XCTAssertGreaterThan(refused, 0, "some copies are torn, and check names them")
    }
}
