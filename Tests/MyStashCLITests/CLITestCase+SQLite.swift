import Foundation
import XCTest

extension CLITestCase {
    /// Runs the sqlite3 tool on a file, as someone editing the vault from outside would.
    func sqlite(_ file: URL, _ sql: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [file.path, sql]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Runs sqlite3 on a store of the test's vault, which must succeed; its output, trimmed.
    func sqlite(_ store: String, _ sql: String) throws -> String {
        let result = try sqlite(vaultDirectory.appendingPathComponent(store), sql)
        XCTAssertEqual(result.status, 0, sql)
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
