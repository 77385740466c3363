import Foundation
import XCTest

/// Master password changes and rekeys racing other mystash processes: they serialize with
/// every writer, and no process reports success for a change that did not take.
final class KeyChangeRaceTests: CLITestCase {
    /// A vault of `count` entries, imported in one go.
    func makeVault(entries count: Int) throws {
        try initVault()
        let passwords = (0..<count).map { ["name": "entry \($0)", "password": "secret \($0)", "category": "Banking"] }
        let document: [String: Any] = [
            "format": "mystash-json", "version": 2, "categories": ["Banking"], "notes": [], "passwords": passwords,
        ]
        let file = home.appendingPathComponent("seed.json")
        try JSONSerialization.data(withJSONObject: document).write(to: file)
        try runOK(["import", file.path, "--format", "mystash-json"])
    }

    func started(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
                 shell: Bool = false) throws -> (Process, Pipe)
    {
        let process = process(shell ? Array(arguments.dropFirst()) : arguments, environment: environment)
        if shell { process.executableURL = URL(fileURLWithPath: "/bin/\(arguments[0])") }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        return (process, errors)
    }

    func finished(_ started: (Process, Pipe)) -> (status: Int32, stderr: String) {
        let errors = started.1.fileHandleForReading.readDataToEndOfFile()
        started.0.waitUntilExit()
        return (started.0.terminationStatus, String(decoding: errors, as: UTF8.self))
    }

    /// Writers and readers keep starting — an add, an edit, an import, a list, a check and a show
    /// at a time — for as long as two rekeys in a row run. Before key changes took every store's
    /// write lock, adds committed between what the rekey read and what it wrote, and their rows stayed under
    /// the old key with fresh tags: the whole vault failed to read. Now each either takes effect
    /// under the new key, or is refused (75, 77): never 65, never lost after reporting success.
    func testWritersAndReadersDuringRekeysAreKeptUnderTheNewKeyOrRefused() throws {
        try makeVault(entries: 1_500)
        let rekeys = try started(
            ["sh", "-c", "mystash passwd --rekey --kdf-cost 10 && MYSTASH_PASSWORD=new MYSTASH_NEW_PASSWORD=newer "
                + "mystash passwd --rekey --kdf-cost 10"],
            environment: ["MYSTASH_NEW_PASSWORD": "new", "PATH": Self.binary.deletingLastPathComponent().path + ":/usr/bin:/bin"],
            shell: true)
        let importFile = home.appendingPathComponent("one.json")
        var runs: [(kind: String, name: String, status: Int32, stderr: String)] = []
        while rekeys.0.isRunning || runs.isEmpty {
            let round = runs.count
            try """
                {"format": "mystash-json", "version": 2, "categories": ["Banking"], "notes": [],
                 "passwords": [{"name": "imported \(round)", "password": "pw-imported \(round)", "category": "Banking"}]}
                """.write(to: importFile, atomically: true, encoding: .utf8)
            let batch = [
                ("add", "race \(round)", try started(["password", "add", "race \(round)"], stdin: "pw-race \(round)")),
                ("edit", "entry \(round % 1_500)",
                 try started(["password", "edit", "entry \(round % 1_500)", "--user", "edited \(round)"])),
                ("import", "imported \(round)", try started(["import", importFile.path, "--format", "mystash-json"])),
                ("list", "", try started(["password", "list"])),
                // Rows read a batch to a transaction: a rekey between two is a retry, not damage.
                ("check", "", try started(["check"])),
                // One item read by its buckets only, while the record is rebuilt under another key.
                ("show", "entry \((round + 7) % 1_500)",
                 try started(["password", "show", "entry \((round + 7) % 1_500)", "--field", "password"])),
            ]
            runs += batch.map { kind, name, process in
                let result = finished(process)
                return (kind, name, result.status, result.stderr)
            }
        }
        let rekeyed = finished(rekeys)
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)

        for run in runs {
            XCTAssertTrue([0, 75, 77].contains(run.status), "\(run.kind) \(run.name): \(run.status) \(run.stderr)")
        }
        let newest = ["MYSTASH_PASSWORD": "newer"]
        let check = try run(["check"], environment: newest)
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        for run in runs where run.status == 0 && ["add", "import"].contains(run.kind) {
            let shown = try self.run(["password", "show", run.name, "--field", "password"], environment: newest)
            XCTAssertEqual(shown.stdout, "pw-\(run.name)\n", "\(run.kind): \(shown.stderr)")
        }
        for run in runs where run.status == 0 && run.kind == "edit" {
            let user = try self.run(["password", "show", run.name, "--field", "user"], environment: newest)
            XCTAssertTrue(user.stdout.hasPrefix("edited "), "\(run.name): \(user.stdout) \(user.stderr)")
        }
        XCTAssertEqual(try run(["check"]).status, 77, "the first password must no longer open the vault")
    }

    /// Two `passwd` started together from the same old password: exactly one succeeds, its
    /// password opens the vault, and the other reports that nothing changed.
    func testTwoPasswordChangesAtOnceNeverBothReportSuccess() throws {
        try makeVault(entries: 200)
        var current = "pw"
        for trial in 0..<5 {
            let candidates = ["a\(trial)", "b\(trial)"]
            let changes = try candidates.map { new in
                try started(["passwd", "--kdf-cost", "10"],
                            environment: ["MYSTASH_PASSWORD": current, "MYSTASH_NEW_PASSWORD": new])
            }
            let results = changes.map(finished)
            let succeeded = zip(candidates, results).filter { $0.1.status == 0 }.map(\.0)
            XCTAssertEqual(succeeded.count, 1, "trial \(trial): \(results)")
            for (candidate, result) in zip(candidates, results) where result.status != 0 {
                XCTAssertTrue([75, 77].contains(result.status), "\(candidate): \(result)")
                XCTAssertFalse(result.stderr.contains("Changed the master password"), result.stderr)
                XCTAssertEqual(try run(["check"], environment: ["MYSTASH_PASSWORD": candidate]).status, 77)
            }
            guard let winner = succeeded.first else { return }
            let check = try run(["check"], environment: ["MYSTASH_PASSWORD": winner])
            XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
            current = winner
        }
    }
}
