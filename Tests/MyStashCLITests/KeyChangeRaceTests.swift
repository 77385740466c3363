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

    func started(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws
        -> (Process, Pipe)
    {
        let process = process(arguments, environment: environment)
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

    /// Adds keep starting, four at a time, for as long as the rekey runs. Before key changes took
    /// every store's write lock, adds committed between what the rekey read and what it wrote,
    /// and their rows stayed under the old key with fresh tags: the whole vault failed to read.
    func testAddsDuringARekeyAreEitherKeptUnderTheNewKeyOrRefused() throws {
        try makeVault(entries: 1_500)
        let rekey = try started(["passwd", "--rekey", "--kdf-cost", "10"], environment: ["MYSTASH_NEW_PASSWORD": "new"])
        var adds: [(name: String, status: Int32, stderr: String)] = []
        while rekey.0.isRunning || adds.isEmpty {
            let batch = try (0..<4).map { index -> (String, (Process, Pipe)) in
                let name = "race \(adds.count + index)"
                return (name, try started(["password", "add", name], stdin: "pw-\(name)"))
            }
            adds += batch.map { name, process in
                let result = finished(process)
                return (name, result.status, result.stderr)
            }
        }
        let rekeyed = finished(rekey)
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)

        for add in adds {
            XCTAssertTrue([0, 75, 77].contains(add.status), "\(add.name): \(add.status) \(add.stderr)")
            if add.status == 75 { XCTAssertTrue(add.stderr.contains("changed the vault's key"), add.stderr) }
        }
        let newPassword = ["MYSTASH_PASSWORD": "new"]
        let check = try run(["check"], environment: newPassword)
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        let listed = try run(["password", "list"], environment: newPassword)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let added = Set(adds.filter { $0.status == 0 }.map(\.name))
        for add in adds {
            XCTAssertEqual(listed.stdout.contains(add.name), added.contains(add.name), "\(add.name) \(add.status)")
        }
        for name in added {
            let shown = try run(["password", "show", name, "--field", "password"], environment: newPassword)
            XCTAssertEqual(shown.stdout, "pw-\(name)\n", shown.stderr)
        }
        XCTAssertEqual(try run(["check"]).status, 77, "the old password must no longer open the vault")
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
