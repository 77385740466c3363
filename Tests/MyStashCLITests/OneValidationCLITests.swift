import Foundation
import XCTest

/// Issue 22, item 5, tried from outside as the issue tried it: each case failed before.
final class OneValidationCLITests: CLITestCase {
    func testBlankNamesAndTakenNamesAreRefusedOnAddAndEditAlike() throws {
        try initVault()
        let blank = try run(["password", "add", "   "], stdin: "pw")
        XCTAssertEqual(blank.status, 65)
        XCTAssertEqual(blank.stderr, "Error: nothing was saved:\n  name is required\n")
        try runOK(["password", "add", " GitHub "], stdin: "pw")
        try runOK(["password", "add", "Mail"], stdin: "pw")
        let blankRename = try run(["password", "edit", "Mail", "--name", "  "])
        XCTAssertEqual(blankRename.status, 65)
        XCTAssertEqual(blankRename.stderr, "Error: nothing was saved:\n  name is required\n")
        let taken = try run(["password", "edit", "Mail", "--name", "github"])
        XCTAssertEqual(taken.status, 65)
        XCTAssertEqual(taken.stderr, "Error: an entry named 'GitHub' exists already (#1)\n"
                       + "hint: choose another name, or allow a second one\n")
        try runOK(["password", "edit", "Mail", "--name", "github", "--allow-duplicate"])
        XCTAssertEqual(try runOK(["password", "show", "#1", "--field", "name"]).stdout, "GitHub\n")
    }

    func testURLsWithoutAHostOrWithAScriptSchemeAreRefused() throws {
        try initVault()
        try runOK(["password", "add", "A"], stdin: "pw")
        for url in ["nope", "http://", "javascript:alert(1)"] {
            for command in [["password", "add", "B", "--url", url], ["password", "edit", "A", "--url", url]] {
                let result = try run(command, stdin: "pw")
                XCTAssertEqual(result.status, 65, url)
                XCTAssertTrue(result.stderr.hasPrefix("Error: nothing was saved:\n  URL must "), result.stderr)
            }
        }
        XCTAssertEqual(try run(["password", "show", "A", "--field", "url"]).status, 66, "no URL was saved")
        try runOK(["password", "edit", "A", "--url", "https://example.com"])
    }

    func testAnEmptyStandardInputSavesNoPasswordButAnEmptyLineDoes() throws {
        try initVault()
        try runOK(["password", "add", "A"], stdin: "old")
        let edit = try run(["password", "edit", "A", "--new-password"], stdin: "")
        XCTAssertEqual(edit.status, 65)
        XCTAssertEqual(edit.stderr, "Error: standard input is empty, so there is no password; nothing was saved\n"
                       + "hint: pipe the password in; an empty line (echo |) saves an empty password\n")
        XCTAssertEqual(try runOK(["password", "show", "A", "--field", "password"]).stdout, "old\n")
        XCTAssertEqual(try run(["password", "add", "B"], stdin: "").status, 65)
        try runOK(["password", "add", "Router"], stdin: "\n")
        let router = try runOK(["password", "show", "Router", "--reveal", "--json"]).stdout
        XCTAssertTrue(router.contains(#""password" : """#), router)
    }

    func testAnEditWithNoOptionIsAUsageErrorNotSaved() throws {
        try initVault()
        try runOK(["password", "add", "A"], stdin: "pw")
        let before = try runOK(["password", "show", "A", "--json"]).stdout
        let result = try run(["password", "edit", "A"])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.hasPrefix("Error: Nothing to change: give at least one of --name, --user"),
                      result.stderr)
        XCTAssertFalse(result.stderr.contains("Saved."))
        XCTAssertEqual(try runOK(["password", "show", "A", "--json"]).stdout, before, "not even its date changed")
    }

    func testImportParserErrorsNameTheLineAndColumn() throws {
        try initVault()
        let xml = home.appendingPathComponent("bad.xml")
        try "<KeePassFile>\n  <Root><Group></Root>\n</KeePassFile>".write(to: xml, atomically: true, encoding: .utf8)
        let badXML = try run(["import", xml.path, "--format", "keepassxc-xml"])
        XCTAssertEqual(badXML.status, 65)
        XCTAssertEqual(badXML.stderr, "Error: the file is not valid keepassxc-xml: line 2, column 23: "
                       + "a closing tag that does not match the element it closes\n")
        let json = home.appendingPathComponent("bad.json")
        try "{\"format\": \"mystash-json\",\n  \"version\": 2\n  \"notes\": []}"
            .write(to: json, atomically: true, encoding: .utf8)
        let badJSON = try run(["import", json.path, "--format", "mystash-json"])
        XCTAssertEqual(badJSON.status, 65)
        XCTAssertEqual(badJSON.stderr,
                       "Error: the file is not valid mystash-json: not JSON at line 3, column 3: expected ',' or '}'\n")
    }
}
