import Foundation
import TestSupport
import XCTest
@testable import MyStashKit
@testable import StashCrypto

/// Random values of every SQLite type, written with the sqlite3 tool into random cells of
/// real vaults (rows, bookkeeping columns, primary-key table, metadata). Every run of
/// mystash afterwards ends with exit 0 and data that is exactly what was stored, or exit
/// 65 and a message naming the store: never a signal, never another row's plaintext.
///
/// CI runs `MYSTASH_FUZZ_CASES` cases (default 120); `.ci/fuzz-stored-values` runs 2,000.
final class StoredValueFuzzTests: CLITestCase {

    static let tables = [
        "Notes.sqlite": ["ZNOTE", "Z_PRIMARYKEY", "Z_METADATA", "MYSTASH_ROW_TAG", "MYSTASH_RECORD", "MYSTASH_BUCKET"],
        "Passwords.sqlite": [
            "ZSYSTEM", "ZCATEGORY", "ZLIST", "Z_PRIMARYKEY", "Z_METADATA", "MYSTASH_ROW_TAG", "MYSTASH_RECORD",
            "MYSTASH_BUCKET",
        ],
    ]

    /// A SQL expression for a random value of a random SQLite type; `copy` stands for a
    /// value taken from another row's cell of the same column (a replayed ciphertext).
    func randomValue(_ rng: inout SplitMix64, copy: String) -> (sql: String, kind: String) {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: return ("NULL", "null")
        case 1:
            let edges: [Int64] = [0, 1, -1, 2, 3, 4, 5, 6, Int64.max, Int64.min, Int64.max - 1, 1 << 32]
            let value =
                Bool.random(using: &rng)
                ? edges.randomElement(using: &rng)! : Int64.random(in: Int64.min...Int64.max, using: &rng)
            return (value == Int64.min ? "(-9223372036854775807 - 1)" : String(value), "integer")
        case 2:
            let edges = ["9e999", "-9e999", "0.5", "1e308", "-1e-308", "1.0", "3.0", "-0.0", "817000000.25"]
            return (
                Bool.random(using: &rng)
                    ? edges.randomElement(using: &rng)! : String(Double.random(in: -1e12...1e12, using: &rng)), "real"
            )
        case 3:
            let samples = [
                "", "abc", "12", "-7", "1e5", "Web Site", "web site", "\u{00e9}t\u{00e9}",
                String(repeating: "x", count: 10_000),
                "x'00'", "NaN",
            ]
            let text = samples.randomElement(using: &rng)!
            return ("'" + text.replacingOccurrences(of: "'", with: "''") + "'", "text")
        case 4:
            let count = Int.random(in: 0...64, using: &rng)
            let hex = (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
            return ("X'\(hex)'", "blob")
        default:
            return (copy, "copied")
        }
    }

    struct Outcome: Hashable {
        var command: String
        var status: Int32
    }

    func testRandomValuesInRandomCellsNeverCrashNorShowWrongPlaintext() throws {
        let cases = Int(ProcessInfo.processInfo.environment["MYSTASH_FUZZ_CASES"] ?? "") ?? 120
        let seed = UInt64(ProcessInfo.processInfo.environment["MYSTASH_FUZZ_SEED"] ?? "") ?? 20_261_122
        try initVault()
        for index in 1...3 { try runOK(["note", "add", "note-\(index)"], stdin: "text-of-note-\(index)") }
        let categories = ["Web Site", "Banking", "E-mail", ""]
        for index in 1...4 {
            try runOK(
                [
                    "password", "add", "entry-\(index)", "--user", "user-of-entry-\(index)", "--url",
                    "https://entry-\(index).example",
                    "--category", categories[index - 1], "--edit-notes",
                ],
                stdin: "pw-of-entry-\(index)\n", environment: ["EDITOR": "printf 'notes-of-entry-\(index)' >"],
                terminal: true)
        }
        let base = home.appendingPathComponent("base")
        try FileManager.default.moveItem(at: vaultDirectory, to: base)
        var columns: [String: [String]] = [:]
        for (file, tables) in Self.tables {
            for table in tables {
                columns[file + table] = try sqlite(
                    base.appendingPathComponent(file), "SELECT name FROM pragma_table_info('\(table)')"
                )
                .output.split(separator: "\n").map(String.init)
            }
        }
        var rng = SplitMix64(seed: seed)
        var outcomes: [Outcome: Int] = [:]
        var refusedBySQLite = 0
        for number in 1...cases {
            try? FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.copyItem(at: base, to: vaultDirectory)
            let file = Bool.random(using: &rng) ? "Notes.sqlite" : "Passwords.sqlite"
            let table = Self.tables[file]!.randomElement(using: &rng)!
            let column = columns[file + table]!.randomElement(using: &rng)!
            let store = vaultDirectory.appendingPathComponent(file)
            let rows =
                Int(
                    try sqlite(store, "SELECT count(*) FROM \(table)").output.trimmingCharacters(
                        in: .whitespacesAndNewlines)) ?? 1
            let offset = Int.random(in: 0..<max(rows, 1), using: &rng)
            let other = Int.random(in: 0..<max(rows, 1), using: &rng)
            let copy = "(SELECT \(column) FROM \(table) ORDER BY rowid LIMIT 1 OFFSET \(other))"
            let (value, kind) = randomValue(&rng, copy: copy)
            let mutation =
                "UPDATE \(table) SET \(column) = \(value) "
                + "WHERE rowid = (SELECT rowid FROM \(table) ORDER BY rowid LIMIT 1 OFFSET \(offset))"
            let what =
                "case \(number) (seed \(seed)): \(file) \(table).\(column) row #\(offset) "
                + ":= \(kind) \(value.prefix(60))"
            if try sqlite(store, mutation).status != 0 { refusedBySQLite += 1 }

            let export = try run(["export"])
            outcomes[Outcome(command: "export", status: export.status), default: 0] += 1
            assertEnded(export, what: "export \(what)")
            if export.status == 0 { try assertPlaintextIsExact(export.stdout, what: what) }
            let check = try run(["check"])
            outcomes[Outcome(command: "check", status: check.status), default: 0] += 1
            assertEnded(check, what: "check \(what)")
            let write =
                file == "Notes.sqlite"
                ? try run(["note", "add", "added"], stdin: "added text")
                : try run(["password", "add", "added"], stdin: "added-pw\n")
            outcomes[Outcome(command: "add", status: write.status), default: 0] += 1
            assertEnded(write, what: "add \(what)")
        }
        let summary = outcomes.sorted { ($0.key.command, $0.key.status) < ($1.key.command, $1.key.status) }
            .map { "\($0.key.command)→\($0.key.status): \($0.value)" }.joined(separator: ", ")
        print("stored-value fuzz: \(cases) cases, seed \(seed), \(refusedBySQLite) refused by SQLite; \(summary)")
    }

    /// The crashes reported in issue 10, one by one: each is now exit 65 naming the place.
    func testValuesThatCrashedMyStashAreReportedWithTheirPlace() throws {
        try initVault()
        try runOK(["note", "add", "Wi-Fi"], stdin: "code on the router")
        try runOK(["password", "add", "Bank", "--category", "Banking"], stdin: "s3cret\n")
        let base = home.appendingPathComponent("base")
        try FileManager.default.moveItem(at: vaultDirectory, to: base)
        // A vault from before the integrity record, which would name these rows first: the
        // values themselves must be reported, not crash.
        try makeVaultFromBeforeTheRecord(base)
        let cases: [(file: String, sql: String, command: [String], says: String)] = [
            (
                "Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = NULL", ["note", "show", "1"],
                "cannot read Note.Z_OPT of row 1 in store 'Notes.sqlite': NULL, not an integer"
            ),
            (
                "Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = 'two'", ["note", "show", "1"],
                "cannot read Note.Z_OPT of row 1 in store 'Notes.sqlite': a value of another type"
            ),
            (
                "Notes.sqlite", "UPDATE ZNOTE SET Z_ENT = NULL", ["note", "list"],
                "cannot read Note.Z_ENT of row 1 in store 'Notes.sqlite': NULL, not an integer"
            ),
            (
                "Passwords.sqlite", "UPDATE ZSYSTEM SET Z_ENT = 'x'", ["password", "list"],
                "cannot read System.Z_ENT of row 1 in store 'Passwords.sqlite': a value of another type"
            ),
            (
                "Passwords.sqlite", "UPDATE ZSYSTEM SET ZCATEGORY = 'x'", ["password", "show", "Bank"],
                "cannot read System.ZCATEGORY of row 1 in store 'Passwords.sqlite': a value of another type"
            ),
            (
                "Passwords.sqlite", "UPDATE ZSYSTEM SET Z_OPT = 9223372036854775807",
                ["password", "edit", "Bank", "--url", "https://bank.example"],
                "Passwords.sqlite, System row 1: its version (Z_OPT) cannot grow any further"
            ),
            (
                "Notes.sqlite", "UPDATE ZNOTE SET ZTITLE = 'plain'", ["note", "list"],
                "Notes.sqlite, Note row 1: column ZTITLE holds TEXT"
            ),
            (
                "Passwords.sqlite", "UPDATE Z_METADATA SET Z_UUID = (SELECT Z_UUID FROM n.Z_METADATA)",
                ["password", "list"],
                "Notes.sqlite and Passwords.sqlite carry the same store UUID"
            ),
        ]
        for (file, sql, command, says) in cases {
            try? FileManager.default.removeItem(at: vaultDirectory)
            try FileManager.default.copyItem(at: base, to: vaultDirectory)
            let attach = "ATTACH '\(vaultDirectory.appendingPathComponent("Notes.sqlite").path)' AS n; "
            XCTAssertEqual(try sqlite(vaultDirectory.appendingPathComponent(file), attach + sql).status, 0, sql)
            // The command names the place and what is wrong; check names at least the place.
            let place = says.components(separatedBy: ": ").first!
            // check names the place either as the command did or in its own words ("File, Entity row N").
            var places = [place]
            if let match = place.firstMatch(of: /cannot read (\w+)\.\w+ of row (\d+) in store '([^']+)'/) {
                places.append("\(match.3), \(match.1) row \(match.2)")
            }
            for (run, expected) in [(command, [says]), (["check"], places)] {
                let result = try self.run(run)
                XCTAssertEqual(result.status, 65, "\(sql) → \(run): \(result.stderr)")
                XCTAssertTrue(
                    expected.contains { (result.stdout + result.stderr).contains($0) },
                    "\(sql) → \(run): \(result.stdout + result.stderr)")
            }
        }
        try FileManager.default.removeItem(at: vaultDirectory)
        try FileManager.default.copyItem(at: base, to: vaultDirectory)
        for timeout in ["inf", "nan", "-1", "1e400", "soon"] {
            let result = try run(["note", "list"], environment: ["MYSTASH_BUSY_TIMEOUT": timeout])
            XCTAssertEqual(result.status, 64, timeout)
            XCTAssertTrue(
                result.stderr.contains(
                    "MYSTASH_BUSY_TIMEOUT must be a number of seconds from 0 to 86400, not '\(timeout)'"), result.stderr
            )
        }
        XCTAssertEqual(try run(["note", "list"], environment: ["MYSTASH_BUSY_TIMEOUT": "2.5"]).status, 0)
    }

    /// Exit 0, or exit 65 with a message naming the store; never a signal or another code.
    func assertEnded(_ result: Result, what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(
            [0, 65].contains(result.status), "\(what): exit \(result.status): \(result.stderr.prefix(600))", file: file,
            line: line)
        if result.status == 65 {
            let said = result.stderr + result.stdout
            XCTAssertTrue(
                said.contains("Notes.sqlite") || said.contains("Passwords.sqlite"),
                "\(what): no place named: \(said.prefix(600))",
                file: file, line: line)
        }
        XCTAssertFalse(
            result.stderr.contains("Fatal error"), "\(what): \(result.stderr.prefix(600))", file: file, line: line)
    }

    /// Every row shown carries its own plaintext, exactly: an altered, moved or removed value
    /// never shows as anything else (the integrity record catches what field encryption cannot).
    func assertPlaintextIsExact(_ json: String, what: String, file: StaticString = #filePath, line: UInt = #line) throws
    {
        let export = try XCTUnwrap(try self.json(json) as? [String: Any], what, file: file, line: line)
        let notes = export["notes"] as? [[String: Any]] ?? []
        XCTAssertEqual(notes.count, 3, what, file: file, line: line)
        for note in notes {
            let title = note["title"] as? String ?? ""
            XCTAssertTrue(title.hasPrefix("note-"), "\(what): note \(note)", file: file, line: line)
            XCTAssertEqual(note["text"] as? String, "text-of-\(title)", what, file: file, line: line)
        }
        let entries = export["passwords"] as? [[String: Any]] ?? []
        XCTAssertEqual(entries.count, 4, what, file: file, line: line)
        for entry in entries {
            let name = entry["name"] as? String ?? ""
            XCTAssertTrue(name.hasPrefix("entry-"), "\(what): entry \(entry)", file: file, line: line)
            let expected = [
                "password": "pw-of-\(name)", "userId": "user-of-\(name)", "url": "https://\(name).example",
                "notes": "notes-of-\(name)",
            ]
            for (key, value) in expected {
                XCTAssertEqual(entry[key] as? String, value, "\(what): \(key)", file: file, line: line)
            }
        }
    }
}

extension CLITestCase {
    /// Makes the vault at `directory` one from before the integrity record: no record tables,
    /// and a version 1 key slot (the password "pw"), which cannot say the vault has a record.
    func makeVaultFromBeforeTheRecord(_ directory: URL) throws {
        let vault = try Vault.open(at: directory)
        try vault.unlock(password: .password("pw"), verification: .skipped)
        let olderSlot = try KeySlot.wrapping(
            try vault.sessionContents().dataKey, password: .password("pw"), parameters: ScryptParameters(logN: 10),
            version: 1)
        for store in vault.coordinator.persistentStores {
            vault.coordinator.setMetadata(Data(olderSlot.serialized), forKey: Vault.keySlotKey, in: store)
        }
        try vault.coordinator.saveMetadata()
        try vault.coordinator.close()
        for file in ["Notes.sqlite", "Passwords.sqlite"] {
            let dropped = try sqlite(
                directory.appendingPathComponent(file),
                "DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_RECORD; DROP TABLE MYSTASH_BUCKET")
            XCTAssertEqual(dropped.status, 0)
        }
    }
}
