import Foundation
import XCTest
@testable import MyStashKit
import StashCrypto

final class VaultTests: VaultTestCase {
    func testNotesAndPasswordsGoToTheirOwnStores() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "n", text: "t")
        try vault.items.addEntry(name: "e", password: "p", userId: nil, url: nil, category: "Web Site", notes: nil)
        XCTAssertEqual(try sqlite("Notes.sqlite", "SELECT COUNT(*) FROM ZNOTE"), "1")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEM"), "1")
        XCTAssertEqual(try sqlite("Notes.sqlite", "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('ZSYSTEM', 'ZCATEGORY', 'ZLIST')"), "0")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM sqlite_master WHERE name = 'ZNOTE'"), "0")
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT typeof(ZNAME) || ' ' || typeof(ZPASSWORD) FROM ZSYSTEM"), "blob blob")
    }

    func testVaultFilesAreOwnerOnlyFromTheStart() throws {
        _ = try makeVault()
        let attributes = { (path: String) in try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int }
        XCTAssertEqual(try attributes(directory.path), 0o700)
        XCTAssertEqual(try attributes(directory.appendingPathComponent("Notes.sqlite").path), 0o600)
        XCTAssertEqual(try attributes(directory.appendingPathComponent("Passwords.sqlite").path), 0o600)
    }

    func testAVaultOthersCanReadIsRefusedWithAChmodHint() throws {
        _ = try makeVault()
        chmod(directory.appendingPathComponent("Passwords.sqlite").path, 0o644)
        let store = directory.appendingPathComponent("Passwords.sqlite").path
        assertVaultError(.permission, { _ = try Vault.open(at: directory) }) { error in
            XCTAssertEqual(error, .openToOthers(path: store, mode: 0o644, wanted: "600"))
        }
        chmod(directory.appendingPathComponent("Passwords.sqlite").path, 0o600)
        chmod(directory.path, 0o755)
        assertVaultError(.permission, { _ = try Vault.open(at: directory) }) { error in
            XCTAssertEqual(error, .openToOthers(path: self.directory.path, mode: 0o755, wanted: "700"))
        }
    }

    func testAnExistingVaultIsNotOverwritten() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "keep", text: "me")
        assertVaultError(.cannotCreate, { _ = try Vault.create(at: directory, password: .password("other"), parameters: cheap) }) { error in
            XCTAssertEqual(error, .vaultExists(path: self.directory.path))
        }
        XCTAssertEqual(try reopen().items.notes().map(\.title), ["keep"])
    }

    func testAMissingVaultIsNamed() {
        assertVaultError(.notFound, { _ = try Vault.open(at: directory) }) { error in
            XCTAssertEqual(error, .noVault(path: self.directory.path))
        }
    }


    func testWrongPasswordIsToldApartFromADamagedField() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "a", password: "p", userId: nil, url: nil, category: nil, notes: nil)
        assertVaultError(.wrongPassword, { try Vault.open(at: directory).unlock(password: .password("nope")) }) { error in
            XCTAssertEqual(error.message, "wrong master password")
        }
        try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZPASSWORD = zeroblob(40)")
        assertVaultError(.invalidData, { _ = try reopen(verification: .skipped).items.entry("1", reveal: true) }) { error in
            XCTAssertTrue(error.message.contains("tampered or damaged"), error.message)
        }
    }

    func testValidationGivesOneReadableLinePerProblemAndSavesNothing() throws {
        let vault = try makeVault()
        assertVaultError(.invalidData, {
            try vault.items.addEntry(name: "", password: "p", userId: String(repeating: "u", count: 300), url: "no pe", category: nil, notes: nil)
        }) { error in
            XCTAssertEqual(Set(error.details), ["name is required", "user ID can't be longer than 254 characters",
                                                "URL must be one address without spaces or control characters"])
        }
        assertVaultError(.invalidData, { try vault.items.addEntry(name: "x", password: "p", userId: "a\u{1B}[2Jb", url: nil, category: nil, notes: nil) }) { error in
            XCTAssertEqual(error.details, ["user ID must be one line without control characters"])
        }
        assertVaultError(.invalidData, { try vault.items.addNote(title: String(repeating: "t", count: 201), text: "") }) { error in
            XCTAssertEqual(error.details, ["title can't be longer than 200 characters"])
        }
        assertVaultError(.invalidData, { try vault.items.addCategory("web site") }) { error in
            XCTAssertEqual(error.details, ["category name 'web site' is already used by another category"])
        }
        assertVaultError(.invalidData, { try vault.items.addCategory("Bad\tName") }) { error in
            XCTAssertEqual(error.details, ["category name must be printable characters on one line"])
        }
        assertVaultError(.invalidData, { try vault.items.addCategory(String(repeating: "c", count: 65)) }) { error in
            XCTAssertEqual(error.details, ["category name can't be longer than 64 characters"])
        }
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZSYSTEM"), "0")
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    func testSearchIgnoresCaseAndAccentsOverTitlesAndTexts() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "Café list", text: "beans")
        try vault.items.addNote(title: "Other", text: "Crème brûlée recipe")
        try vault.items.addNote(title: "Unrelated", text: "nothing")
        XCTAssertEqual(try vault.items.searchNotes("CAFE").map(\.title), ["Café list"])
        XCTAssertEqual(try vault.items.searchNotes("creme BRULEE").map(\.title), ["Other"])
        try vault.items.addEntry(name: "Bank", password: "secret-word", userId: "Zoë", url: nil, category: nil, notes: nil)
        XCTAssertEqual(try vault.items.searchEntries("zoe").map(\.name), ["Bank"])
        XCTAssertEqual(try vault.items.searchEntries("secret-word").count, 0, "passwords are never searched")
    }

    func testRealWorldValuesPass() throws {
        let vault = try makeVault()
        try vault.items.addCategory("Work/Clients & Partners — 2026")
        try vault.items.addEntry(name: "Router", password: "", userId: "Ada Lovelace", url: "192.168.1.1", category: nil, notes: nil)
        try vault.items.addEntry(name: "Mail", password: "p", userId: "ada@example.org", url: "mailto:ada@example.org",
                           category: "Work/Clients & Partners — 2026", notes: nil)
        try vault.items.addEntry(name: "App", password: "p", userId: nil, url: "androidapp://com.example", category: nil, notes: nil)
        XCTAssertEqual(try reopen().items.entry("Router", reveal: true).password, "")
        XCTAssertEqual(try reopen().items.entry("Mail", reveal: false).category, "Work/Clients & Partners — 2026")
    }

    func testDuplicateNamesAreRefusedUnlessAllowedAndAmbiguousNamesListEachMatch() throws {
        let vault = try makeVault()
        let first = try vault.items.addEntry(name: "Mail", password: "a", userId: "ada", url: "https://mail.example", category: "E-mail", notes: nil)
        assertVaultError(.invalidData, { try vault.items.addEntry(name: "mail", password: "b", userId: nil, url: nil, category: nil, notes: nil) }) { error in
            XCTAssertEqual(error.message, "an entry named 'Mail' exists already (#\(first))")
        }
        var changes = EntryChanges(name: "mail", password: "b")
        changes.userId = "bob"
        let second = try vault.items.addEntry(changes, allowDuplicate: true)
        assertVaultError(.invalidRequest, { _ = try vault.items.entry("MAIL", reveal: false) }) { error in
            XCTAssertEqual(error, .ambiguous(.entry, .name("MAIL"), candidates: [
                Candidate(id: first, summary: "Mail  user: ada  category: E-mail  URL: https://mail.example"),
                Candidate(id: second, summary: "mail  user: bob  category: -  URL: -"),
            ]))
        }
        XCTAssertEqual(try vault.items.entry(.id(second), reveal: true).password, "b")
        XCTAssertEqual(try vault.items.entry(.name(String(second)), reveal: true).password, "b", "a number naming nothing is an ID")
        let numbered = try vault.items.addEntry(name: String(first), password: "named", userId: nil, url: nil, category: nil, notes: nil)
        XCTAssertEqual(try vault.items.entry(.name(String(first)), reveal: true).id, numbered, "a bare word is a name first")
        XCTAssertEqual(try vault.items.entry(.id(first), reveal: true).password, "a")
        assertVaultError(.notFound, { _ = try vault.items.entry(.id(999), reveal: false) })
    }

    func testDeleteRulesNullifyAndDeny() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "a", password: "p", userId: nil, url: nil, category: "Banking", notes: nil)
        assertVaultError(.invalidData, { try vault.items.removeCategory("Banking") }) { error in
            XCTAssertEqual(error.details, ["category can't be deleted while it has entries"])
        }
        try vault.items.removeEntry("a")
        XCTAssertNoThrow(try vault.items.removeCategory("Banking"))
        XCTAssertFalse(try vault.items.categories().map(\.name).contains("Banking"))
    }

    func testExportAndImportRoundTripAllOrNothing() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "n1", text: "text one")
        try vault.items.addCategory("Games")
        try vault.items.addEntry(name: "Steam", password: "pw1", userId: "gamer", url: "https://store.example", category: "Games", notes: "n")
        let exported = try vault.transfer.exportJSON()

        let other = directory.appendingPathComponent("../copy-\(UUID().uuidString)").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: other) }
        let copy = try Vault.create(at: other, password: password, parameters: cheap)
        let report = try copy.transfer.importItems(exported, format: .mystashJSON)
        XCTAssertEqual(report.imported.map(\.kind).sorted(), ["category", "entry", "note"])
        XCTAssertEqual(try copy.items.entry("Steam", reveal: true).password, "pw1")
        XCTAssertEqual(try copy.items.entry("Steam", reveal: false).category, "Games")

        let bad = Data(#"{"format":"mystash-json","version":1,"categories":[],"notes":[{"title":"ok"}],"passwords":[{"name":"","password":"x"},{"name":"y","password":"z","url":"b a d"}]}"#.utf8)
        assertVaultError(.invalidData, { _ = try copy.transfer.importItems(bad, format: .mystashJSON) }) { error in
            XCTAssertEqual(Set(error.details), ["entry 1 (untitled): name is required",
                                                "entry 'y': URL must be one address without spaces or control characters"])
        }
        XCTAssertEqual(try copy.items.notes().count, 1, "the valid note of the bad file was not imported either")
    }

    /// The export is written a batch at a time; its bytes must be those the encoder writes for
    /// the whole document, whatever the vault holds: nothing, no category, one of each kind,
    /// fields, history, TOTP, attachments, and more notes and entries than one batch.
    func testAStreamedExportIsWhatTheEncoderWritesForTheWholeDocument() throws {
        let vault = try makeVault()
        let encoder = ExportDocument.encoder()
        func assertStreamedAsWhole(_ shape: String, file: StaticString = #filePath, line: UInt = #line) throws {
            var streamed: [UInt8] = []
            var pieces = 0
            try vault.transfer.exportJSON { streamed += $0; pieces += 1 }
            var document = ExportDocument(categories: try vault.exportedCategories(), notes: [], passwords: [])
            var counter = try Vault.ExportProgress(vault: vault, progress: nil)
            try vault.forEachExportedNoteBatch(&counter) { document.notes += $0 }
            try vault.forEachExportedEntryBatch(&counter) { document.passwords += $0 }
            let whole = try encoder.encode(document) + Data("\n".utf8)
            XCTAssertEqual(String(decoding: streamed, as: UTF8.self), String(decoding: whole, as: UTF8.self),
                           shape, file: file, line: line)
            XCTAssertGreaterThan(pieces, 1, shape, file: file, line: line)
        }
        for category in try vault.items.categories() { try vault.items.removeCategory(.name(category.name)) }
        try assertStreamedAsWhole("nothing at all")
        try vault.items.addNote(title: "only", text: "a note")
        try assertStreamedAsWhole("one note, no entry, no category")
        let source = try Data(contentsOf: try XCTUnwrap(
            Bundle.module.url(forResource: "Fixtures/vault-v3/source", withExtension: "json")))
        _ = try vault.transfer.importItems(source, format: .mystashJSON)
        let entry = try vault.items.entry("Bank", reveal: false)
        let attachment = directory.appendingPathComponent("statement.txt")
        try Data("statement \u{1}\n".utf8).write(to: attachment)
        try vault.items.attach(try FileHandle(forReadingFrom: attachment), named: "statement.txt", to: .id(entry.id))
        try assertStreamedAsWhole("fields, history, TOTP, an attachment")
        let notes = (0..<1_001).map { #"{"title": "note \#($0)", "text": "line\nnext \#($0)"}"# }
        let entries = (0..<501).map { #"{"name": "site \#($0)", "password": "pw \#($0)", "moreURLs": []}"# }
        let many = #"{"format": "mystash-json", "version": 2, "categories": [], "notes": ["#
            + notes.joined(separator: ",") + #"], "passwords": ["# + entries.joined(separator: ",") + "]}"
        _ = try vault.transfer.importItems(Data(many.utf8), format: .mystashJSON)
        try assertStreamedAsWhole("more notes and entries than a batch")
    }

    func testImportsBitwardenAndKeePassXCExports() throws {
        let vault = try makeVault()
        let bitwarden = Data(#"""
        {"folders":[{"id":"f1","name":"Work"}],"items":[
          {"type":1,"name":"Jira","folderId":"f1","notes":null,"login":{"username":"ada","password":"pw","uris":[{"uri":"https://jira.example"}]}},
          {"type":2,"name":"Door","notes":"code 4711","folderId":null}]}
        """#.utf8)
        XCTAssertEqual(try vault.transfer.importItems(bitwarden, format: .bitwardenJSON).imported.map(\.kind).sorted(), ["category", "entry", "note"])
        XCTAssertEqual(try vault.items.entry("Jira", reveal: true).userId, "ada")
        XCTAssertEqual(try vault.items.note("Door").text, "code 4711")
        let keepass = Data("\"Group\",\"Title\",\"Username\",\"Password\",\"URL\",\"Notes\"\n\"Root/Banking\",\"Bank, main\",\"me\",\"p\"\"w\",\"https://bank.example\",\"two\nlines\"\n".utf8)
        XCTAssertEqual(try vault.transfer.importItems(keepass, format: .keepassxcCSV).imported.map(\.title), ["Bank, main"])
        let bank = try vault.items.entry("Bank, main", reveal: true)
        XCTAssertEqual(bank.password, "p\"w")
        XCTAssertEqual(bank.notes, "two\nlines")
        XCTAssertEqual(bank.category, "Banking")
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data("{}".utf8), format: .bitwardenJSON) })
    }
}
