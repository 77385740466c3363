import Foundation
import XCTest

/// Import files made to hurt, through the built binary: what they hold must not reach the
/// terminal raw, and bytes that are not text are refused rather than changed.
final class HostileFileTests: CLITestCase {
    func write(_ name: String, _ data: Data) throws -> String {
        let file = home.appendingPathComponent(name)
        try data.write(to: file)
        return file.path
    }

    func testImportErrorsShowControlCharactersFromTheFileEscaped() throws {
        try initVault()
        // OSC 52 sets the clipboard, OSC 0 the window title: both must arrive as text.
        let file = try write(
            "evil.json",
            Data(
                #"""
                {"items":[{"type":1,"name":"Evil\u001b]52;c;cHduZWQ=\u0007","login":{"password":"x"}},
                          {"type":1,"name":"Title","login":{"username":"\u001b]0;pwned\u0007","password":"y"}}]}
                """#.utf8))
        let result = try run(["import", file, "--format", "bitwarden-json"])
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertFalse(result.stderr.unicodeScalars.contains("\u{1B}"), result.stderr)
        XCTAssertFalse(result.stderr.unicodeScalars.contains("\u{07}"), result.stderr)
        XCTAssertTrue(result.stderr.contains(#"entry 'Evil\x1B]52;c;cHduZWQ=\x07'"#), result.stderr)
        XCTAssertTrue(result.stderr.contains(#"entry 'Title': user ID"#), result.stderr)
        XCTAssertEqual(try run(["password", "list"]).stdout, "", "nothing was imported")
    }

    func testInvalidUTF8OnStandardInputIsRefusedNotChanged() throws {
        try initVault()
        let process = process(["password", "add", "Mail"])
        let result = try execute(process, bytes: Data([0x70, 0x77, 0xE9, 0x0A]))  // "pw" and Latin-1 "é"
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertTrue(result.stderr.contains("standard input is not UTF-8 text (an invalid byte at line 1, byte 3)"),
                      result.stderr)
        XCTAssertEqual(try run(["password", "list"]).stdout, "", "nothing was saved")
    }

    func testImportWithLossyAcceptsInvalidUTF8AsReplacementCharacters() throws {
        try initVault()
        let file = try write(
            "latin1.csv", Data(Array("\"Title\",\"Password\"\n\"Caf".utf8) + [0xE9] + Array("\",\"pw\"\n".utf8)))
        let refused = try run(["import", file, "--format", "keepassxc-csv"])
        XCTAssertEqual(refused.status, 65, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("line 2, byte 5"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--lossy"), refused.stderr)
        try runOK(["import", file, "--format", "keepassxc-csv", "--lossy"])
        XCTAssertEqual(try runOK(["password", "show", "Caf\u{FFFD}", "--field", "name"]).stdout, "Caf\u{FFFD}\n")
    }

    // MARK: - Values with control characters

    /// An entry whose password holds an OSC 52 sequence (standard input takes any text).
    let oscPassword = "pw\u{1B}]52;c;eA==\u{07}"

    func testFieldPrintsTheValueAsStoredAndEscapedOnlyWithEscape() throws {
        try initVault()
        try runOK(["password", "add", "Evil"], stdin: oscPassword)
        XCTAssertEqual(try runOK(["password", "show", "Evil", "--field", "password"]).stdout, oscPassword + "\n")
        // Also on a terminal: the script that asked may run under one (tmux, expect, script).
        let session = try TerminalSession(
            ["password", "show", "Evil", "--field", "password"], environment: baseEnvironment)
        session.expect(oscPassword)
        XCTAssertEqual(session.wait(), 0)
        let escaped = try runOK(["password", "show", "Evil", "--field", "password", "--escape"]).stdout
        XCTAssertEqual(escaped, #"pw\x1B]52;c;eA==\x07"# + "\n")
        XCTAssertEqual(try run(["password", "show", "Evil", "--escape"]).status, 64, "--escape goes with --field")
    }

    func testCSVExportRefusesControlCharactersNamingEachEntryAndField() throws {
        try initVault()
        try runOK(["password", "add", "Evil"], stdin: oscPassword)
        try runOK(["password", "add", "Fine"], stdin: "tab\tand\nline")
        let result = try run(["export", "--format", "csv"])
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.stdout, "", "nothing half-written")
        XCTAssertTrue(result.stderr.contains("  entry 'Evil': password\n"), result.stderr)
        XCTAssertFalse(result.stderr.contains("'Fine'"), "tabs and line ends are CSV's own")
        XCTAssertTrue(result.stderr.contains("mystash-json"), result.stderr)
        // JSON carries the value exactly, escaped.
        XCTAssertTrue(try runOK(["export"]).stdout.contains(#""pw\u001b]52;c;eA==\u0007""#))
    }
}
