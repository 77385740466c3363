import Foundation
import XCTest

@testable import MyStashKit
import StashPlatform

/// Imports of files made by the real tools (keepassxc-cli, pass with gpg) where this machine
/// can make them, and of Bitwarden exports built from its documented schema with every item type.
final class ImportTests: VaultTestCase {
    // MARK: - Bitwarden

    func testBitwardenEveryItemTypeIsCarriedOverOrReported() throws {
        let vault = try makeVault()
        let report = try vault.transfer.importItems(try fixture("bitwarden-all-types.json"), format: .bitwardenJSON)
        XCTAssertEqual(
            report.imported.filter { $0.kind == "entry" }.map(\.title).sorted(),
            ["Build server key", "Jira", "Passport", "Router", "Visa"])
        XCTAssertEqual(report.imported.filter { $0.kind == "note" }.map(\.title), ["Door codes"])
        XCTAssertEqual(report.skipped.map(\.title), ["Future kind"])
        XCTAssertEqual(report.skipped.first?.reason, "unknown Bitwarden item type 9")

        let jira = try vault.items.entry("Jira", reveal: true)
        XCTAssertEqual(jira.url, "https://jira.example.com")
        XCTAssertEqual(jira.moreURLs, ["jira.example.net", "androidapp://com.atlassian.android.jira.core"])
        XCTAssertEqual(jira.userId, "ada@example.com")
        XCTAssertEqual(jira.password, "jira-pw-now")
        XCTAssertEqual(jira.category, "Work/Clients & Partners")
        XCTAssertEqual(jira.favorite, true)
        XCTAssertEqual(jira.totp, "otpauth://totp/Jira:ada?secret=JBSWY3DPEHPK3PXP&issuer=Jira")
        XCTAssertEqual(jira.notes, "team board")
        XCTAssertEqual(
            jira.fields,
            [
                FieldInfo(name: "Employee ID", value: "E-1024", hidden: false),
                FieldInfo(name: "Security answer", value: "blue whale", hidden: true),
                FieldInfo(name: "Remember me", value: "true", hidden: false),
                FieldInfo(name: "Login alias", value: "(linked to the username)", hidden: false),
            ])
        XCTAssertEqual(jira.createdAt, try XCTUnwrap(ISO8601DateFormatter().date(from: "2021-01-02T03:04:05Z")))
        XCTAssertEqual(
            try vault.items.passwordHistory("Jira", reveal: true).map(\.password), ["jira-pw-old-2", "jira-pw-old-1"])
        XCTAssertNil(
            try vault.items.entry("Jira", reveal: false).fields?[1].value, "a hidden field is masked unless revealed")

        let router = try vault.items.entry("Router", reveal: true)
        XCTAssertEqual(router.password, "")
        XCTAssertEqual(router.userId, "admin user")
        XCTAssertEqual(router.url, "192.168.1.1")
        XCTAssertEqual(try vault.items.totpCode("Router").totp.digits, 6)

        let visa = try vault.items.entry("Visa", reveal: true)
        XCTAssertEqual(visa.category, "Payment Card")
        XCTAssertEqual(try vault.items.fieldValue("number", of: "Visa"), "4111111111111111")
        XCTAssertEqual(visa.fields?.first { $0.name == "Security code" }?.hidden, true)
        XCTAssertEqual(try vault.items.entry("Passport", reveal: true).category, "Identity")
        XCTAssertEqual(try vault.items.fieldValue("Passport number", of: "Passport"), "925076473")
        XCTAssertEqual(try vault.items.entry("Build server key", reveal: true).category, "SSH Key")
        XCTAssertTrue(
            try vault.items.fieldValue("Private key", of: "Build server key").hasPrefix("-----BEGIN OPENSSH PRIVATE KEY-----")
        )

        let door = try vault.items.note("Door codes")
        XCTAssertEqual(door.folder, "Home")
        XCTAssertEqual(door.text, "front 4711\nback 0815\n\nAlarm: 9999")
    }

    func testMystashJSONCarriesEveryVersion2FieldAcross() throws {
        let vault = try makeVault()
        _ = try vault.transfer.importItems(try fixture("bitwarden-all-types.json"), format: .bitwardenJSON)
        let exported = try vault.transfer.exportJSON()
        let other = directory.appendingPathComponent("../copy-\(UUID().uuidString)").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: other) }
        let copy = try Vault.create(at: other, password: password, parameters: cheap)
        _ = try copy.transfer.importItems(exported, format: .mystashJSON)
        for name in ["Jira", "Router", "Visa", "Passport", "Build server key"] {
            var original = try vault.items.entry(.name(name), reveal: true)
            var copied = try copy.items.entry(.name(name), reveal: true)
            XCTAssertEqual(try copy.items.passwordHistory(.name(name), reveal: true), try vault.items.passwordHistory(.name(name), reveal: true), name)
            (original.id, copied.id) = (0, 0)
            XCTAssertEqual(copied, original, name)
        }
        XCTAssertEqual(try copy.items.note("Door codes"), try vault.items.note("Door codes"))
        XCTAssertEqual(try copy.transfer.importItems(exported, format: .mystashJSON).imported, [], "and again adds nothing")
    }

    func testBitwardenOrganisationCollectionsBecomeTheCategory() throws {
        let vault = try makeVault()
        _ = try vault.transfer.importItems(try fixture("bitwarden-organization.json"), format: .bitwardenJSON)
        let payroll = try vault.items.entry("Payroll", reveal: true)
        XCTAssertEqual(payroll.category, "Ops")
        XCTAssertEqual(payroll.fields, [FieldInfo(name: "Collections", value: "Ops, Finance", hidden: false)])
    }

    func testAnEncryptedBitwardenExportIsRefusedSavingNothing() throws {
        let vault = try makeVault()
        assertVaultError(
            .invalidData,
            { _ = try vault.transfer.importItems(try self.fixture("bitwarden-encrypted.json"), format: .bitwardenJSON) }
        ) {
            XCTAssertTrue($0.message.contains("encrypted"), $0.message)
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    /// An item in Bitwarden's trash (`deletedDate`, as `bw list items --trash` lists it) is not
    /// imported as a live one: it is skipped, and the report says so.
    func testABitwardenItemInTheTrashIsSkippedAndSaid() throws {
        let vault = try makeVault()
        let export = Data(
            #"""
            {"encrypted": false, "folders": [], "items": [
              {"id": "a", "type": 1, "name": "Mail", "login": {"password": "live"}},
              {"id": "b", "type": 1, "name": "Old bank", "deletedDate": "2026-01-02T03:04:05.000Z",
               "login": {"password": "gone"}}
            ]}
            """#.utf8)
        let report = try vault.transfer.importItems(export, format: .bitwardenJSON)
        XCTAssertEqual(report.skipped.map(\.title), ["Old bank"])
        XCTAssertEqual(report.skipped.first?.reason, "in the trash")
        XCTAssertEqual(try vault.items.entries().map(\.name), ["Mail"])
    }

    /// Values of another type than Bitwarden documents read as absent (or, for numbers and
    /// booleans where text belongs, as text), as the dictionary reader took them.
    func testBitwardenValuesOfAnotherTypeReadAsAbsentOrAsText() throws {
        let vault = try makeVault()
        let export = Data(
            #"""
            {"folders": "not a list", "items": [
              {"type": 3, "name": "Amex", "favorite": 1, "card": {"number": 378282246310005, "expMonth": 7,
               "expYear": "2030", "code": true, "brand": {"name": "Amex"}}, "fields": {"name": "x"}},
              {"type": 1.0, "name": "Mail", "folderId": 42, "notes": 8080, "login": {"username": ["a"],
               "password": "pw", "uris": [{"uri": "mail.example.com"}, {"uri": null}, {"uri": 8080}]},
               "passwordHistory": [{"password": "old", "lastUsedDate": 5}], "collectionIds": [1]},
              {"type": "1", "name": "Stringly typed"}
            ]}
            """#.utf8)
        // A number where an address belongs becomes text, and as an address it is refused.
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(export, format: .bitwardenJSON) }) {
            XCTAssertEqual($0.details, ["entry 'Mail': more URLs must name a host, as in https://example.com or example.com"])
        }
        let report = try vault.transfer.importItems(
            Data(String(decoding: export, as: UTF8.self).replacingOccurrences(of: #", {"uri": 8080}"#, with: "").utf8),
            format: .bitwardenJSON)
        XCTAssertEqual(report.skipped.map(\.reason), ["unknown Bitwarden item type (none)"])
        let amex = try vault.items.entry("Amex", reveal: true)
        XCTAssertEqual(
            amex.fields,
            [
                FieldInfo(name: "Number", value: "378282246310005", hidden: true),
                FieldInfo(name: "Expiry month", value: "7", hidden: false),
                FieldInfo(name: "Expiry year", value: "2030", hidden: false),
                FieldInfo(name: "Security code", value: "1", hidden: true),
            ])
        XCTAssertEqual(amex.favorite, true)
        let mail = try vault.items.entry("Mail", reveal: true)
        XCTAssertNil(mail.userId)
        XCTAssertNil(mail.category)
        XCTAssertEqual(mail.url, "mail.example.com")
        XCTAssertEqual(mail.moreURLs, nil, "a null address is none")
        XCTAssertEqual(mail.notes, "8080")
        XCTAssertEqual(
            try vault.items.passwordHistory("Mail", reveal: true).map(\.replacedAt), [Date(timeIntervalSince1970: 0)])
    }

    func testJSONThatIsNotJSONIsRefusedNamingLineAndColumn() throws {
        let vault = try makeVault()
        let cases: [(ImportFormat, String, String)] = [
            (.bitwardenJSON, "{\"items\": [\n  {\"type\": 1, \"name\": \"A\"}\n  {\"type\": 1}]}", "line 3, column 3"),
            (.bitwardenJSON, #"{"items": [{"name": "Grün\x"}]}"#, "line 1, column 27"),
            (.mystashJSON, "{\"format\": \"mystash-json\",\n \"version\": 2,\n \"notes\": [tru]}", "line 3, column 12"),
            (.bitwardenJSON, "{\"items\": [", "line 1, column 12"),
        ]
        for (format, text, place) in cases {
            XCTAssertThrowsError(try vault.transfer.importItems(Data(text.utf8), format: format), text) { error in
                let message = (error as? VaultError)?.message ?? "\(error)"
                XCTAssertTrue(message.contains("not JSON at \(place): expected"), message)
            }
        }
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data("[1]".utf8), format: .bitwardenJSON) }) {
            XCTAssertTrue($0.message.hasSuffix("expected a JSON object"), $0.message)
        }
        assertVaultError(.invalidData, {
            _ = try vault.transfer.importItems(Data(#"{"items": [{"type": 1}, 2]}"#.utf8), format: .bitwardenJSON)
        }) {
            XCTAssertTrue($0.message.hasSuffix(#"expected an object with an "items" array"#), $0.message)
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    /// Members are found in the text and decoded one by one: spacing, escaped names, members
    /// in any order and values of every kind around the items are all read as a decoder reads them.
    func testBitwardenMembersAreFoundWhateverTheirSpacingOrderAndEscapes() throws {
        let vault = try makeVault()
        let export = Data(
            #"""
            	{ "\u0069tems" :
              [ {"type":1,"name":"A [x], {y}","login":{"password":"p\"]}"}} ,{"type":1,"name":"B","folderId":"f"} ] ,
              "other": [1, -2.5e3, true, null, {"a": [[]]}], "folders" : [{"id": "f", "name": "Home"}],
              "encrypted": false }
            """#.utf8)
        _ = try vault.transfer.importItems(export, format: .bitwardenJSON)
        XCTAssertEqual(try vault.items.entry("A [x], {y}", reveal: true).password, #"p"]}"#)
        XCTAssertEqual(try vault.items.entry("B", reveal: true).category, "Home")
        let empty = try vault.transfer.importItems(Data(#"{"items": [ ]}"#.utf8), format: .bitwardenJSON)
        XCTAssertEqual(empty.imported, [])
    }

    func testTheSyntaxCheckerAcceptsWhatJSONDecoderAccepts() throws {
        let documents = [
            #"{"a": [1, -0.5e+3, true, false, null, "\"\\\/\b\f\n\r\t\u00e9"], "b": {}, "c": []}"#, "  [ ]  ", "0",
            String(decoding: try fixture("bitwarden-all-types.json"), as: UTF8.self),
        ]
        for text in documents {
            XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed))
            XCTAssertNil(Data(text.utf8).withUnsafeBytes { JSONSyntax.firstError(in: $0.bindMemory(to: UInt8.self)) })
        }
    }

    // MARK: - Reports, dry runs and re-imports

    func testImportingTheSameFileAgainAddsNothingAndADryRunSavesNothing() throws {
        let vault = try makeVault()
        let data = try fixture("bitwarden-all-types.json")
        let dry = try vault.transfer.importItems(data, format: .bitwardenJSON, dryRun: true)
        XCTAssertTrue(dry.dryRun)
        XCTAssertEqual(dry.imported.filter { $0.kind == "entry" }.count, 5)
        XCTAssertEqual(try vault.items.entries().count, 0, "a dry run saves nothing")

        let first = try vault.transfer.importItems(data, format: .bitwardenJSON)
        let entriesBefore = try vault.items.entries().count
        let second = try vault.transfer.importItems(data, format: .bitwardenJSON)
        XCTAssertEqual(second.imported, [])
        XCTAssertEqual(second.updated, [])
        XCTAssertEqual(
            Set(second.skipped.map(\.title)),
            Set(first.imported.filter { $0.kind != "category" }.map(\.title) + ["Future kind"]))
        XCTAssertEqual(try vault.items.entries().count, entriesBefore)
        XCTAssertEqual(try vault.items.notes().count, 1)
        XCTAssertEqual(try vault.items.passwordHistory("Jira", reveal: true).count, 2, "history is merged, not repeated")

        // A changed password updates the entry and moves the old one into its history.
        let changed = try XCTUnwrap(String(data: data, encoding: .utf8)).replacingOccurrences(
            of: "jira-pw-now", with: "jira-pw-newer")
        let third = try vault.transfer.importItems(Data(changed.utf8), format: .bitwardenJSON)
        XCTAssertEqual(third.updated.map(\.title), ["Jira"])
        XCTAssertEqual(try vault.items.entry("Jira", reveal: true).password, "jira-pw-newer")
        XCTAssertEqual(try vault.items.passwordHistory("Jira", reveal: true).first?.password, "jira-pw-now")
    }

    func testValidationNamesTheItemByItsTitleAndSavesNothing() throws {
        let vault = try makeVault()
        let bad = Data(
            #"""
            {"items":[{"type":1,"name":"Good","login":{"password":"x"}},
                      {"type":1,"name":"Bad\u001b[2J","login":{"username":"a\u0007b","password":"y"}},
                      {"type":1,"name":"","login":{"password":"z"}}]}
            """#.utf8)
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(bad, format: .bitwardenJSON, dryRun: true) }) {
            error in
            XCTAssertEqual(error.details.count, 3, "a dry run finds the same problems")
        }
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(bad, format: .bitwardenJSON) }) { error in
            XCTAssertEqual(
                Set(error.details),
                [
                    "entry 'Bad\u{1B}[2J': name must be one line without control characters",
                    "entry 'Bad\u{1B}[2J': user ID must be one line without control characters",
                    "entry 3 (untitled): name is required",
                ])
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    func testValidationNamesUntitledNotesAndCustomFieldsByWhereTheyAre() throws {
        let vault = try makeVault()
        let bad = Data(
            #"""
            {"items":[{"type":2,"name":"Fine","notes":"x"}, {"type":2,"name":"","notes":"y"},
                      {"type":1,"name":"Mail","login":{"password":"p"},"fields":[{"name":"PIN\u0007","value":"1"}]}]}
            """#.utf8)
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(bad, format: .bitwardenJSON) }) { error in
            XCTAssertEqual(error.details.count, 2, "\(error.details)")
            XCTAssertEqual(
                error.details.filter { $0.hasPrefix("note 2 (untitled): title ") }.count, 1, "\(error.details)")
            XCTAssertEqual(
                error.details.filter { $0.hasPrefix("entry 'Mail', field 'PIN\u{7}': field name ") }.count, 1,
                "\(error.details)")
        }
        XCTAssertEqual(try vault.items.notes().count, 0)
    }

    func testHistoryIsBounded() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "Rotating", password: "p0", userId: nil, url: nil, category: nil, notes: nil)
        for number in 1...(Vault.historyLimit + 5) {
            var changes = EntryChanges()
            changes.password = "p\(number)"
            try vault.items.editEntry("Rotating", changes)
        }
        let history = try vault.items.passwordHistory("Rotating", reveal: true)
        XCTAssertEqual(history.count, Vault.historyLimit)
        XCTAssertEqual(history.first?.password, "p\(Vault.historyLimit + 4)")
        XCTAssertNil(try vault.items.passwordHistory("Rotating", reveal: false).first?.password)
    }

    /// A KeePassXC CSV row with fewer columns than the header is read, its missing columns as
    /// empty, and the report names it.
    func testAShortKeePassXCCSVRowIsReadAndSaid() throws {
        let csv = "\"Group\",\"Title\",\"Username\",\"Password\",\"URL\",\"Notes\"\n"
            + "\"Root\",\"Mail\",\"ada\",\"pw\",\"https://mail.example\",\"\"\n\"Root\",\"Bank\",\"ada\"\n"
        let vault = try makeVault()
        let report = try vault.transfer.importItems(Data(csv.utf8), format: .keepassxcCSV)
        XCTAssertEqual(report.warnings.map(\.title), ["Bank"])
        XCTAssertEqual(report.warnings.first?.reason, "row 3 has 3 of the header's 6 columns; the missing ones were read as empty")
        XCTAssertEqual(try vault.items.entries().map(\.name).sorted(), ["Bank", "Mail"])
    }

    // MARK: - KeePassXC, through keepassxc-cli

    func testKeePassXCCSVFromKeePassXCWithBOMAndCRLF() throws {
        let csv = try keepassxcExport("csv")
        for (label, data) in [
            ("as exported", csv),
            (
                "re-saved with a BOM and CRLF",
                Data([0xEF, 0xBB, 0xBF])
                    + Data(
                        String(decoding: csv, as: UTF8.self)
                            .replacingOccurrences(of: "\n", with: "\r\n").utf8)
            ),
        ] {
            try? FileManager.default.removeItem(at: directory)
            let vault = try makeVault()
            let report = try vault.transfer.importItems(data, format: .keepassxcCSV)
            XCTAssertEqual(report.skipped.map(\.title), ["Old thing"], label)
            XCTAssertEqual(report.skipped.first?.reason, "in the recycle bin", label)
            let github = try vault.items.entry("GitHub", reveal: true)
            XCTAssertEqual(github.userId, "ada lovelace", label)
            XCTAssertEqual(github.url, "github.com", label)
            XCTAssertEqual(github.notes, "line one\nline two", label)
            XCTAssertNil(github.category, label)
            XCTAssertEqual(github.createdAt, ISO8601DateFormatter().date(from: "2020-01-02T03:04:05Z"), label)
            XCTAssertEqual(github.updatedAt, ISO8601DateFormatter().date(from: "2021-02-03T04:05:06Z"), label)
            XCTAssertEqual(try vault.items.totpCode("GitHub").totp.period, 30, label)
            let router = try vault.items.entry("Router", reveal: true)
            XCTAssertEqual(router.category, "Work/Mail & Chat", label)
            XCTAssertEqual(router.password, "", label)
            XCTAssertEqual(router.url, "192.168.1.1", label)
        }
    }

    func testKeePassXCXMLKeepsCustomAttributesTagsHistoryAndTOTP() throws {
        let vault = try makeVault()
        let report = try vault.transfer.importItems(try keepassxcExport("xml"), format: .keepassxcXML)
        XCTAssertEqual(report.skipped.map(\.title), ["Old thing"])
        let github = try vault.items.entry("GitHub", reveal: true)
        XCTAssertEqual(
            github.fields,
            [
                FieldInfo(name: "Recovery code", value: "rc-1234-5678", hidden: true),
                FieldInfo(name: "Team", value: "Analytical Engines", hidden: false),
                FieldInfo(name: "Tags", value: "2fa,work", hidden: false),
            ])
        XCTAssertEqual(github.hasTOTP, true)
        XCTAssertEqual(try vault.items.passwordHistory("GitHub", reveal: true).map(\.password), ["second-pw", "first-pw"])
        XCTAssertEqual(try vault.items.entry("Router", reveal: false).category, "Work/Mail & Chat")
    }

    /// KeePassXC writes one entry's user or password as a reference to another's
    /// (`{REF:P@I:<uuid>}`) and its exports keep the reference: the XML export's entries are
    /// resolved (by UUID, and by a title; a chain of two), a reference to no entry is kept and
    /// reported; the CSV export, without UUIDs, keeps them (and a reference to one) and says why.
    func testKeePassFieldReferencesAreResolvedOrReported() throws {
        let xml = directory.deletingLastPathComponent().appendingPathComponent("references-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: xml) }
        try Data("""
            <?xml version="1.0" encoding="utf-8" standalone="yes"?>
            <KeePassFile><Meta><Generator>test</Generator></Meta>
            <Root><Group><UUID>AAAAAAAAAAAAAAAAAAAAAQ==</UUID><Name>Root</Name>
             <Entry><UUID>AAAAAAAAAAAAAAAAAAAAEA==</UUID>
              <String><Key>Title</Key><Value>Corp SSO</Value></String>
              <String><Key>UserName</Key><Value>ada.corp</Value></String>
              <String><Key>Password</Key><Value>sso-real-secret</Value></String></Entry>
             <Entry><UUID>AAAAAAAAAAAAAAAAAAAAEQ==</UUID>
              <String><Key>Title</Key><Value>Corp Mail</Value></String>
              <String><Key>UserName</Key><Value>{REF:U@I:00000000000000000000000000000010}</Value></String>
              <String><Key>Password</Key><Value>{REF:P@I:00000000000000000000000000000010}</Value></String></Entry>
             <Entry><UUID>AAAAAAAAAAAAAAAAAAAAEg==</UUID>
              <String><Key>Title</Key><Value>Corp VPN</Value></String>
              <String><Key>UserName</Key><Value>vpn-{REF:U@T:Corp Mail}</Value></String>
              <String><Key>Password</Key><Value>{REF:P@I:000000000000000000000000000000FF}</Value></String></Entry>
            </Group><DeletedObjects/></Root></KeePassFile>
            """.utf8).write(to: xml)
        let vault = try makeVault()
        let report = try vault.transfer.importItems(try keepassxcExport("xml", xml: xml), format: .keepassxcXML)
        let mail = try vault.items.entry("Corp Mail", reveal: true)
        XCTAssertEqual([mail.userId, mail.password], ["ada.corp", "sso-real-secret"])
        let vpn = try vault.items.entry("Corp VPN", reveal: true)
        XCTAssertEqual(vpn.userId, "vpn-ada.corp")
        XCTAssertEqual(vpn.password, "{REF:P@I:000000000000000000000000000000FF}")
        XCTAssertEqual(report.warnings.map(\.title), ["Corp VPN"])
        XCTAssertTrue(report.warnings.first?.reason?.contains("reference to no entry of the file") == true,
                      "\(report.warnings)")

        let csvVault = try Vault.create(at: directory.appendingPathComponent("csv"), password: password, parameters: cheap)
        let csv = try csvVault.transfer.importItems(try keepassxcExport("csv", xml: xml), format: .keepassxcCSV)
        XCTAssertEqual(Set(csv.warnings.map(\.title)), ["Corp Mail", "Corp VPN"])
        XCTAssertTrue(csv.warnings.allSatisfy { $0.reason?.contains("import KeePassXC's XML export") == true },
                      "\(csv.warnings)")
        XCTAssertEqual(try csvVault.items.entry("Corp VPN", reveal: true).userId, "vpn-{REF:U@T:Corp Mail}")
    }

    /// A reference by title takes the entry with that whole title (as KeePassXC does), not the
    /// first whose title contains it; a loop and a value that references would make longer than
    /// any field are kept and reported (resolving the second took minutes for a 4 KB file).
    func testKeePassReferencesMatchWholeValuesAndStopAtLoopsAndRunawayLengths() throws {
        func entry(_ number: Int, _ title: String, _ password: String) -> String {
            let uuid = Data((0..<16).map { $0 == 15 ? UInt8(number) : 0 }).base64EncodedString()
            return "<Entry><UUID>\(uuid)</UUID><String><Key>Title</Key><Value>\(title)</Value></String>"
                + "<String><Key>Password</Key><Value>\(password)</Value></String></Entry>"
        }
        let hex = { (number: Int) in String(repeating: "0", count: 30) + String(format: "%02X", number) }
        var entries = [entry(1, "Domain admin", "DOMAIN-ADMIN-PW"), entry(2, "Main", "main-pw"),
                       entry(3, "Mail alias", "{REF:P@T:Main}"), entry(4, "Loop", "{REF:P@T:Loop}"),
                       entry(5, "Half", "own-secret-{REF:P@T:Nobody}{REF:U@P:main-pw}")]
        // Eleven entries, each password six references to the next one's: 6^10 characters.
        for level in 0...10 {
            let next = level == 10 ? "x" : String(repeating: "{REF:P@I:\(hex(11 + level))}", count: 6)
            entries.append(entry(10 + level, "Runaway \(level)", next))
        }
        // A chain of twelve: its head is past KeePassXC's ten levels, the next one within them.
        for link in 0...11 {
            entries.append(entry(30 + link, "Chain \(link)", link == 11 ? "end" : "{REF:P@T:Chain \(link + 1)}"))
        }
        let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><KeePassFile><Meta/><Root><Group><Name>Root</Name>"
            + entries.joined() + "</Group></Root></KeePassFile>"
        let vault = try makeVault()
        let report = try vault.transfer.importItems(Data(xml.utf8), format: .keepassxcXML)
        XCTAssertEqual(try vault.items.entry("Mail alias", reveal: true).password, "main-pw")
        XCTAssertEqual(try vault.items.entry("Loop", reveal: true).password, "{REF:P@T:Loop}")
        let reasons = Dictionary(report.warnings.map { ($0.title, $0.reason ?? "") }) { first, _ in first }
        XCTAssertTrue(reasons["Loop"]?.contains("leads back to itself") == true, "\(reasons)")
        XCTAssertTrue(reasons["Runaway 0"]?.contains("longer than 10000 characters") == true, "\(reasons)")
        XCTAssertEqual(try vault.items.entry("Runaway 9", reveal: true).password, "xxxxxx")
        XCTAssertTrue(reasons["Chain 0"]?.contains("deeper than KeePassXC's 10 levels") == true, "\(reasons)")
        XCTAssertEqual(try vault.items.entry("Chain 1", reveal: true).password, "end", "\(reasons)")
        XCTAssertEqual(reasons.keys.filter { $0.hasPrefix("Chain") }, ["Chain 0"])
        // The report names the references, never the field's own text nor a password searched for.
        XCTAssertEqual(reasons["Half"], "its password is a KeePass reference to no entry of the file "
                       + "({REF:P@T:Nobody} {REF:U@P:…}); kept as written")
    }

    /// A KeePass XML file cut short says so (libxml2 names it as text after the document's end).
    func testAKeePassXMLCutShortSaysItEndsEarly() throws {
        let vault = try makeVault()
        let whole = try fixture("keepassxc-source.xml")
        // Cut inside the last closing tag too, where libxml2 closes every element before it stops.
        let lastTag = try XCTUnwrap(whole.lastRange(of: Data("</KeePassFile".utf8))).lowerBound - whole.startIndex
        for length in [whole.count / 3, whole.count / 2, whole.count - 20, lastTag + 2, lastTag + 9, lastTag + 13] {
            assertVaultError(.invalidData, {
                _ = try vault.transfer.importItems(whole.prefix(length), format: .keepassxcXML)
            }) {
                XCTAssertTrue($0.message.contains("the file ends before its elements are closed"), $0.message)
            }
        }
    }

    // MARK: - pass, through gpg

    func testPassStoreDecryptedWithGPG() throws {
        guard ChildProcess.find("pass") != nil else { throw XCTSkip("pass is not installed (apt-get install pass)") }
        try withTestGPGKey { recipient in try importPassStore(madeFor: recipient) }
    }

    func importPassStore(madeFor recipient: String) throws {
        try withPassStore(for: recipient) { store in try importPassStore(store) }
    }

    func importPassStore(_ store: URL) throws {
        try must(
            ["pass", "insert", "-m", "Work/Mail & Chat/ada@example.org"],
            Data(
                ("mail-pw\nlogin: ada@example.org\nurl: mail.example.org\n"
                    + "otpauth://totp/Mail:ada?secret=JBSWY3DPEHPK3PXP\n\nrecovery: 1234\n").utf8))
        try must(["pass", "insert", "-m", "router"], Data("router-pw\n".utf8))
        try FileManager.default.createDirectory(
            at: store.appendingPathComponent("broken"), withIntermediateDirectories: true)
        try Data("not gpg".utf8).write(to: store.appendingPathComponent("broken/garbage.gpg"))

        let vault = try makeVault()
        let report = try vault.transfer.importPasswordStore(at: store)
        XCTAssertEqual(
            report.imported.filter { $0.kind == "entry" }.map(\.title).sorted(), ["ada@example.org", "router"])
        XCTAssertEqual(report.skipped.map(\.title), ["broken/garbage"])
        XCTAssertTrue(report.skipped.first?.reason?.hasPrefix("gpg could not decrypt it") == true)
        let mail = try vault.items.entry("ada@example.org", reveal: true)
        XCTAssertEqual(mail.password, "mail-pw")
        XCTAssertEqual(mail.userId, "ada@example.org")
        XCTAssertEqual(mail.url, "mail.example.org")
        XCTAssertEqual(mail.category, "Work/Mail & Chat")
        XCTAssertEqual(mail.notes, "recovery: 1234")
        XCTAssertEqual(mail.hasTOTP, true)
        XCTAssertEqual(try vault.items.entry("router", reveal: true).password, "router-pw")
        XCTAssertEqual(try vault.transfer.importPasswordStore(at: store).imported, [], "a second import adds nothing")
    }

    /// A hand-made KeePass XML without a recycle bin and without group UUIDs: every entry is
    /// imported (nil compared equal to nil put them all in "the recycle bin").
    func testAKeePassXMLWithoutARecycleBinImportsEveryEntry() throws {
        let vault = try makeVault()
        let xml = """
            <KeePassFile><Meta></Meta><Root><Group><Name>Root</Name>
            <Entry><String><Key>Title</Key><Value>Mail</Value></String>
            <String><Key>Password</Key><Value>pw</Value></String></Entry>
            </Group></Root></KeePassFile>
            """
        let report = try vault.transfer.importItems(Data(xml.utf8), format: .keepassxcXML)
        XCTAssertEqual(report.skipped.map(\.reason), [])
        XCTAssertEqual(try vault.items.entry("Mail", reveal: true).password, "pw")
    }

    /// A group deleted in KeePassXC lies in the recycle bin whole: its entries are left out too,
    /// each reported, and the entries of a group beside the bin named alike are kept.
    func testEntriesOfAGroupInsideTheRecycleBinAreLeftOutAndReported() throws {
        let vault = try makeVault()
        func entry(_ title: String) -> String {
            "<Entry><String><Key>Title</Key><Value>\(title)</Value></String>"
                + "<String><Key>Password</Key><Value>pw-\(title)</Value></String></Entry>"
        }
        let xml = "<KeePassFile><Meta><RecycleBinUUID>YmluYmluYmluYmluYmluYg==</RecycleBinUUID></Meta><Root>"
            + "<Group><UUID>cm9vdHJvb3Ryb290cm9vdA==</UUID><Name>Root</Name>" + entry("Kept")
            + "<Group><UUID>YmluYmluYmluYmluYmluYg==</UUID><Name>Recycle Bin</Name>" + entry("Deleted")
            + "<Group><UUID>b2xkb2xkb2xkb2xkb2xkbw==</UUID><Name>Old</Name>" + entry("In a deleted group")
            + "</Group></Group><Group><UUID>b2xkb2xkb2xkb2xkb2xkbA==</UUID><Name>Old</Name>" + entry("Elsewhere")
            + "</Group></Group></Root></KeePassFile>"
        let report = try vault.transfer.importItems(Data(xml.utf8), format: .keepassxcXML)
        XCTAssertEqual(report.skipped.map(\.title), ["Deleted", "In a deleted group"])
        XCTAssertEqual(Set(report.skipped.map(\.reason)), ["in the recycle bin"])
        XCTAssertEqual(try vault.items.entries().map(\.name).sorted(), ["Elsewhere", "Kept"])
        XCTAssertEqual(try vault.items.entry("Elsewhere", reveal: true).category, "Old")
    }

    /// What an entry needs of a KeePass file may come after it: <Meta> (the recycle bin, shared
    /// attachments) after <Root>, a group's <Name> or <UUID> after its entries. Entries are made as
    /// they are read, so those wait for the end of the file; each case imports as in file order.
    func testAKeePassFileInAnUnusualOrderImportsAsInTheUsualOne() throws {
        func entry(_ title: String, attachment: Bool = false) -> String {
            "<Entry><String><Key>Title</Key><Value>\(title)</Value></String>"
                + "<String><Key>Password</Key><Value>pw-\(title)</Value></String>"
                + (attachment ? "<Binary><Key>a.txt</Key><Value Ref=\"0\"/></Binary>" : "") + "</Entry>"
        }
        let meta = "<Meta><RecycleBinUUID>YmluYmluYmluYmluYmluYg==</RecycleBinUUID>"
            + "<Binaries><Binary ID=\"0\">aGVsbG8=</Binary></Binaries></Meta>"
        let bin = "<UUID>YmluYmluYmluYmluYmluYg==</UUID><Name>Recycle Bin</Name>"
        func file(metaFirst: Bool, namesFirst: Bool) -> String {
            let work = namesFirst ? "<Group><UUID>d29ya3dvcmt3b3Jrd29yaw==</UUID><Name>Work</Name>" + entry("Mail", attachment: true)
                : "<Group>" + entry("Mail", attachment: true) + "<UUID>d29ya3dvcmt3b3Jrd29yaw==</UUID><Name>Work</Name>"
            let binned = namesFirst ? "<Group>" + bin + entry("Old") : "<Group>" + entry("Old") + bin
            let root = "<Root><Group><UUID>cm9vdHJvb3Ryb290cm9vdA==</UUID><Name>Root</Name>" + work + "</Group>"
                + binned + "</Group></Group></Root>"
            return "<KeePassFile>" + (metaFirst ? meta + root : root + meta)
                + "<Root><Group><Name>Second root</Name>" + entry("Elsewhere") + "</Group></Root></KeePassFile>"
        }
        for (metaFirst, namesFirst) in [(true, true), (false, true), (true, false), (false, false)] {
            let label = "Meta first: \(metaFirst), names first: \(namesFirst)"
            let source = try KeePassXCReader.readXML(Data(file(metaFirst: metaFirst, namesFirst: namesFirst).utf8))
            XCTAssertEqual(source.skipped.map(\.title), ["Old"], label)
            XCTAssertEqual(source.document.passwords.map(\.name), ["Mail"], label)
            XCTAssertEqual(source.document.passwords.first?.category, "Work", label)
            XCTAssertEqual(source.document.passwords.first?.attachments?.map(\.name), ["a.txt"], label)
            XCTAssertEqual(source.document.passwords.first?.attachments?.first?.data, Data("hello".utf8), label)
        }
    }

    /// An attachment that refers to a shared binary the file does not hold is reported, never
    /// imported empty; a file that declares Latin-1 but is UTF-8 (checked first) is read as UTF-8;
    /// text that is not a KeePass file says so.
    func testKeePassAttachmentsMissingFromTheFileEncodingsAndNonFilesAreSaid() throws {
        let vault = try makeVault()
        let xml = "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><KeePassFile><Meta/><Root><Group><Name>Root</Name>"
            + "<Entry><String><Key>Title</Key><Value>Router</Value></String>"
            + "<String><Key>Password</Key><Value>s3cr\u{20AC}t</Value></String>"
            + "<Binary><Key>file.bin</Key><Value Ref=\"0\"/></Binary></Entry></Group></Root></KeePassFile>"
        let report = try vault.transfer.importItems(Data(xml.utf8), format: .keepassxcXML)
        XCTAssertEqual(try vault.items.entry("Router", reveal: true).password, "s3cr\u{20AC}t")
        XCTAssertEqual(try vault.items.attachments(of: "Router").count, 0)
        XCTAssertEqual(report.warnings.map(\.reason), ["attachment 'file.bin' refers to binary 0, which the file "
            + "does not hold (an export without its attachments?); not imported"])
        for text in ["x", "<", "<?", "<K"] {
            assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data(text.utf8), format: .keepassxcXML) }) {
                XCTAssertTrue($0.message.hasSuffix("no <KeePassFile> element"), "\(text): \($0.message)")
            }
        }
    }
}
