import Foundation
import XCTest
@testable import MyStashKit

/// Issue 22, item 5: each rule holds on add, edit and import alike.
final class OneValidationTests: VaultTestCase {
    private func importJSON(_ vault: Vault, _ passwords: String) throws -> ImportReport {
        let json = #"{"format":"mystash-json","version":2,"categories":[],"notes":[],"passwords":["# + passwords + "]}"
        return try vault.transfer.importItems(Data(json.utf8), format: .mystashJSON)
    }

    func testNamesAreTrimmedAndANameOfSpacesIsRequiredOnEveryPath() throws {
        let vault = try makeVault()
        assertVaultError(.invalidData, { try vault.items.addEntry(EntryChanges(name: "   ", password: "p")) }) {
            XCTAssertEqual($0.details, ["name is required"])
        }
        try vault.items.addEntry(EntryChanges(name: "  Mail \n", password: "p"))
        XCTAssertEqual(try vault.items.entries().map(\.name), ["Mail"])
        assertVaultError(.invalidData, { try vault.items.editEntry("Mail", EntryChanges(name: " \t ")) }) {
            XCTAssertEqual($0.details, ["name is required"])
        }
        assertVaultError(.invalidData, { _ = try self.importJSON(vault, #"{"name":"   ","password":"x"}"#) }) {
            XCTAssertEqual($0.details, ["entry 1 (untitled): name is required"])
        }
        let report = try importJSON(vault, #"{"name":" Mail ","password":"p"}"#)
        XCTAssertEqual(report.skipped.map(\.reason), ["already in the vault, unchanged"], "matched by the stored name")
        try vault.items.addNote(title: "  Office  ", text: "t")
        XCTAssertEqual(try vault.items.notes().map(\.title), ["Office"])
        try vault.items.addCategory(" Games ")
        XCTAssertTrue(try vault.items.categories().map(\.name).contains("Games"))
    }

    func testARenameOntoAnotherEntrysNameIsRefusedAsAnAddIs() throws {
        let vault = try makeVault()
        let github = try vault.items.addEntry(EntryChanges(name: "GitHub", password: "a"))
        try vault.items.addEntry(EntryChanges(name: "Mail", password: "b"))
        for name in ["github", " GITHUB "] {
            assertVaultError(.invalidData, { try vault.items.editEntry("Mail", EntryChanges(name: name)) }) {
                XCTAssertEqual($0.message, "an entry named 'GitHub' exists already (#\(github))")
            }
        }
        try vault.items.editEntry("GitHub", EntryChanges(name: "GITHUB"))
        XCTAssertEqual(try vault.items.entry(.id(github), reveal: false).name, "GITHUB", "its own name in other case")
        try vault.items.editEntry("Mail", EntryChanges(name: "github"), allowDuplicate: true)
        XCTAssertEqual(try vault.items.entries().map(\.name), ["GITHUB", "github"])
    }

    func testURLsNeedAHostAndAnAllowedSchemeOnEveryPath() throws {
        let vault = try makeVault()
        let noHost = "URL must name a host, as in https://example.com or example.com"
        let schemes = "URL must use one of the schemes http, https, ftp, ftps, sftp, ssh, smb, rdp, vnc, androidapp, "
            + "iosapp or mailto"
        let refused = ["nope": noHost, "http://": noHost, "https://user@:443/x": noHost, "mailto:": noHost,
                       "javascript:alert(1)": schemes, "data:text/html,x": schemes, "file:///etc/passwd": schemes,
                       "JavaScript://example.com/%0Aalert(1)": schemes]
        for (url, message) in refused {
            assertVaultError(.invalidData, { try vault.items.addEntry(EntryChanges(name: "A", url: url, password: "p")) }) {
                XCTAssertEqual($0.details, [message], url)
            }
        }
        try vault.items.addEntry(EntryChanges(name: "A", password: "p"))
        for (url, message) in refused {
            assertVaultError(.invalidData, { try vault.items.editEntry("A", EntryChanges(url: url)) }) {
                XCTAssertEqual($0.details, [message], url)
            }
        }
        let accepted = ["https://example.com", "HTTP://user:pw@[::1]:8080/x?y#z", "ssh://git@example.com",
                        "example.com:8443/login", "192.168.1.1", "androidapp://com.example", "mailto:ada@example.org"]
        for url in accepted { XCTAssertNoThrow(try vault.items.editEntry("A", EntryChanges(url: url)), url) }
        assertVaultError(.invalidData, {
            let item = #"{"name":"J","password":"x","url":"javascript:alert(1)","moreURLs":["a.example","http://"]}"#
            _ = try self.importJSON(vault, item)
        }) {
            XCTAssertEqual($0.message, "nothing was imported:")
            XCTAssertEqual($0.details, ["entry 'J': \(schemes)",
                                        "entry 'J': more URLs must name a host, as in https://example.com or example.com"])
        }
        XCTAssertEqual(try vault.items.entries().map(\.name), ["A"], "all or nothing, as imports promise")
    }

    /// An unusable TOTP secret is one problem among the file's others: all are listed at once.
    func testAnImportListsATOTPProblemWithEveryOther() throws {
        let vault = try makeVault()
        assertVaultError(.invalidData, {
            _ = try self.importJSON(vault, #"{"name":"J","password":"p","totp":"not base32!","url":"bad url"},"#
                + #"{"name":"","password":"p","url":"bad url2"}"#)
        }) {
            XCTAssertEqual($0.details.count, 4, "\($0.details)")
            XCTAssertEqual($0.details.first, "entry 'J': TOTP secret: the secret is not base32 (letters A-Z and digits 2-7)")
            XCTAssertEqual($0.details.filter { $0.hasPrefix("entry 'J': URL") }.count, 1, "\($0.details)")
        }
        XCTAssertEqual(try vault.items.entries().map(\.name), [], "all or nothing")
    }

    func testAnEditOfNothingIsRefusedAndChangesNothing() throws {
        let vault = try makeVault()
        try vault.items.addEntry(EntryChanges(name: "A", password: "p"))
        let before = try vault.items.entry("A", reveal: true)
        assertVaultError(.invalidRequest, { try vault.items.editEntry("A", EntryChanges()) }) {
            XCTAssertEqual($0.message, "nothing to change")
        }
        XCTAssertEqual(try reopen().items.entry("A", reveal: true), before)
    }

    func testJSONSyntaxErrorsNameTheLineAndColumn() throws {
        let vault = try makeVault()
        let cases: [(String, String)] = [
            ("{\"format\":\"mystash-json\",\n \"version\": 2,, \"x\": 1}",
             "not JSON at line 2, column 15: expected a quoted name"),
            ("{\"passwords\": [\n  {\"name\": \"é\", \"password\": \"x\"}\n  {}]}",
             "not JSON at line 3, column 3: expected ',' or ']'"),
            ("{\"a\": [1, 2", "not JSON at line 1, column 12: expected ',' or ']'"),
            ("{\"a\": 01}", "not JSON at line 1, column 8: expected ',' or '}'"),
            ("{\"a\": tru}", "not JSON at line 1, column 7: expected a value"),
            ("{} {}", "not JSON at line 1, column 4: expected the end of the text"),
        ]
        for (text, position) in cases {
            for format in [ImportFormat.mystashJSON, .bitwardenJSON] {
                assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data(text.utf8), format: format) }) {
                    XCTAssertEqual($0.message, "the file is not valid \(format.rawValue): \(position)", text)
                }
            }
        }
        XCTAssertNil(JSONSyntax.error(in: Data(#"{"a":[1,-2.5e+3,"\u00e9\n",true,null,{}],"b":{"c":[]}}"#.utf8)))
        let deep = String(repeating: "[", count: 1_000_000)
        XCTAssertEqual(JSONSyntax.error(in: Data(deep.utf8)), "not JSON at line 1, column 1000001: expected a value",
                       "no recursion")
        assertVaultError(.invalidData, {
            _ = try self.importJSON(vault, #"{"name":"a","password":"x"},{"password":"y"}"#)
        }) {
            XCTAssertEqual($0.message, #"the file is not valid mystash-json: missing "name" in passwords[1]"#)
        }
    }

    func testXMLErrorsNameTheLineAndColumnInWords() throws {
        let vault = try makeVault()
        let cases: [(String, String)] = [
            ("not xml", "line 1, column 1: expected an element ('<')"),
            ("<KeePassFile>\n  <Root><Group></Root>\n</KeePassFile>",
             "line 2, column 23: a closing tag that does not match the element it closes"),
            ("<KeePassFile>\n<Root>&bogus;</Root></KeePassFile>",
             "line 2, column 14: an entity ('&name;') that XML does not know"),
        ]
        for (text, position) in cases {
            assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data(text.utf8), format: .keepassxcXML) }) {
                XCTAssertEqual($0.message, "the file is not valid keepassxc-xml: \(position)", text)
                XCTAssertFalse($0.message.contains("NSXMLParserErrorDomain"))
            }
        }
    }
}
