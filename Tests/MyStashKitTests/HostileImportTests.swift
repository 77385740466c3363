import Foundation
import XCTest

@testable import MyStashKit

/// Import files made to hurt: nested without end, holding bytes that are not text, and
/// large where a real export is small. None may crash the process or save half of it.
final class HostileImportTests: VaultTestCase {
    /// A KeePass XML file whose groups nest `depth` deep.
    func keePassXML(groupsNested depth: Int) -> Data {
        Data(
            ("<KeePassFile><Root><Group><Name>Root</Name>" + String(repeating: "<Group>", count: depth)
                + String(repeating: "</Group>", count: depth) + "</Group></Root></KeePassFile>").utf8)
    }

    func testKeePassXMLNestedAMillionDeepIsRefusedNamingTheLimit() throws {
        let vault = try makeVault()
        let deep = keePassXML(groupsNested: 1_000_000)
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(deep, format: .keepassxcXML) }) {
            XCTAssertTrue(
                $0.message.contains("nested more than \(KeePassXMLLimits.maximumDepth) deep"), $0.message)
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    func testKeePassXMLJustWithinTheDepthLimitReads() throws {
        // Root group, the groups inside it, <KeePassFile> and <Root>: the limit exactly.
        let source = try Vault.read(
            keePassXML(groupsNested: KeePassXMLLimits.maximumDepth - 3), format: .keepassxcXML)
        XCTAssertEqual(source.document.passwords.count, 0)
        XCTAssertThrowsError(
            try Vault.read(keePassXML(groupsNested: KeePassXMLLimits.maximumDepth - 2), format: .keepassxcXML))
    }

    /// One entry with `history` earlier passwords (the n-th replaced n seconds after 2001)
    /// and `fields` custom fields.
    func mystashJSON(history: Int, fields: Int) throws -> Data {
        var entry = ExportDocument.Entry(name: "Rotating", password: "current")
        entry.history = (0..<history).map {
            HistoryInfo(password: "p\($0)", replacedAt: Date(timeIntervalSinceReferenceDate: Double($0)))
        }
        entry.fields = (0..<fields).map { FieldInfo(name: "f\($0)", value: "v\($0)", hidden: $0 % 2 == 0) }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(ExportDocument(categories: [], notes: [], passwords: [entry]))
    }

    func testTenThousandEarlierPasswordsKeepTheMostRecentAndReportTheCount() throws {
        let vault = try makeVault()
        let report = try vault.transfer.importItems(try mystashJSON(history: 10_000, fields: 0), format: .mystashJSON)
        XCTAssertEqual(
            report.warnings.map(\.reason),
            ["kept the \(Vault.historyLimit) most recent of 10000 earlier passwords"])
        let kept = try vault.items.passwordHistory("Rotating", reveal: true)
        XCTAssertEqual(kept.map(\.password), (0..<Vault.historyLimit).map { "p\(9_999 - $0)" })
        // Importing again changes nothing: the older ones would be dropped again.
        let again = try vault.transfer.importItems(try mystashJSON(history: 10_000, fields: 0), format: .mystashJSON)
        XCTAssertEqual(again.imported, [])
        XCTAssertEqual(again.updated, [])
        XCTAssertEqual(again.skipped.map(\.reason), ["already in the vault, unchanged"])
        XCTAssertEqual(try vault.items.passwordHistory("Rotating", reveal: true).map(\.password), kept.map(\.password))
    }

    func testTenThousandCustomFieldsAreAllImportedInOrder() throws {
        let vault = try makeVault()
        _ = try vault.transfer.importItems(try mystashJSON(history: 0, fields: 10_000), format: .mystashJSON)
        let fields = try XCTUnwrap(try vault.items.entry("Rotating", reveal: true).fields)
        XCTAssertEqual(fields, (0..<10_000).map { FieldInfo(name: "f\($0)", value: "v\($0)", hidden: $0 % 2 == 0) })
    }

    // MARK: - Bytes that are not UTF-8

    func testInvalidUTF8IsRefusedNamingItsLineInEveryFileFormat() throws {
        let vault = try makeVault()
        // "é" in Latin-1 (0xE9) on the second line, after a two-byte "ü" that is valid.
        let files: [(ImportFormat, before: String, after: String)] = [
            (.keepassxcCSV, "\"Title\",\"Password\"\n\"Grün\",\"p", "w\"\n"),
            (.keepassxcXML, "<KeePassFile>\n<Root><Group><Name>Grün", "</Name></Group></Root></KeePassFile>"),
            (.bitwardenJSON, "{\"items\":\n[{\"type\":1,\"name\":\"Grün", "\",\"login\":{}}]}"),
            (.mystashJSON, "{\"format\":\"mystash-json\",\n\"Grün", "\":1}"),
        ]
        for (format, before, after) in files {
            let bytes = Data(Array(before.utf8) + [0xE9] + Array(after.utf8))
            assertVaultError(.invalidText, { _ = try vault.transfer.importItems(bytes, format: format) }) {
                XCTAssertTrue($0.message.hasPrefix("the file is not UTF-8 text (an invalid byte at line 2"), $0.message)
            }
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    func testReplacingInvalidUTF8ImportsEachBadSequenceAsAReplacementCharacter() throws {
        let vault = try makeVault()
        let csv = Data(
            Array("\"Title\",\"Password\"\n\"Caf".utf8) + [0xE9] + Array("\",\"p".utf8) + [0xFF, 0xFE]
                + Array("w\"\n".utf8))
        _ = try vault.transfer.importItems(csv, format: .keepassxcCSV, replacingInvalidUTF8: true)
        XCTAssertEqual(try vault.items.entry("Caf\u{FFFD}", reveal: true).password, "p\u{FFFD}\u{FFFD}w")
    }

    /// Nesting is followed without recursion by the syntax check, and refused by the decoder.
    func testBitwardenJSONNestedAMillionDeepIsRefusedNotACrash() throws {
        let vault = try makeVault()
        let deep = String(repeating: "[", count: 1_000_000) + String(repeating: "]", count: 1_000_000)
        let inItem = #"{"items": [{"type": 1, "name": "x", "junk": \#(deep)}]}"#
        for text in [inItem, #"{"folders": \#(deep), "items": []}"#] {
            assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data(text.utf8), format: .bitwardenJSON) })
        }
        let unclosed = #"{"items": [{"junk": "# + String(repeating: "[", count: 1_000_000)
        assertVaultError(.invalidData, { _ = try vault.transfer.importItems(Data(unclosed.utf8), format: .bitwardenJSON) }) {
            XCTAssertTrue($0.message.contains("not JSON at line 1, column 1000021: expected a value"), $0.message)
        }
        XCTAssertEqual(try vault.items.entries().count, 0)
    }

    /// Checked in slices: characters cut by a slice's end are still whole, a bad byte far in still found.
    func testLongTextIsCheckedAcrossSliceBoundaries() {
        func isValid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { UTF8Text.isValid($0) } }
        for character in ["€", "😀", "é"] {
            for offset in 0..<4 {
                let text = Array(
                    (String(repeating: "a", count: offset) + String(repeating: character, count: 70_000)).utf8)
                XCTAssertTrue(isValid(text), "\(character) after \(offset)")
                XCTAssertFalse(isValid(text.dropLast()), "\(character) after \(offset), cut at the end")
                var damaged = text
                damaged[100_001] = 0xFF
                XCTAssertFalse(isValid(damaged), "\(character) after \(offset), a bad byte inside")
            }
        }
        XCTAssertTrue(isValid([]))
    }

    func testTheFirstInvalidSequenceIsFoundByLineAndByte() {
        let bytes = Array("ok\nü€😀".utf8) + [0xC3] + Array("x".utf8)  // a lead byte without its follower
        XCTAssertTrue(UTF8Text.firstInvalidSequence(in: bytes) == (line: 2, byte: 10))
        XCTAssertTrue(UTF8Text.firstInvalidSequence(in: [0xED, 0xA0, 0x80]) == (line: 1, byte: 1), "a surrogate")
        XCTAssertEqual(try UTF8Text.decode(Array("ok\nü€😀".utf8), place: "x"), "ok\nü€😀")
    }

    // MARK: - pass stores

    func testPassStoreLinksAndSpecialFilesAreSkippedWithTheReasonNeverFollowed() throws {
        try withTestGPGKey { recipient in
            let base = directory.deletingLastPathComponent().appendingPathComponent("pass-\(UUID().uuidString)")
            let (store, outside) = (base.appendingPathComponent("store"), base.appendingPathComponent("outside"))
            defer { try? FileManager.default.removeItem(at: base) }
            for folder in [store.appendingPathComponent("Work"), outside] {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            func encrypt(_ text: [UInt8], to file: URL) throws {
                try must(["gpg", "--batch", "--yes", "--encrypt", "-r", recipient, "-o", file.path], Data(text))
            }
            try encrypt(Array("mail-pw\n".utf8), to: store.appendingPathComponent("Work/mail.gpg"))
            try encrypt(Array("stolen-pw\n".utf8), to: outside.appendingPathComponent("secret.gpg"))
            let manager = FileManager.default
            for (link, target) in [("secret.gpg", outside.path + "/secret.gpg"), ("Elsewhere", outside.path),
                                   ("Work/same.gpg", "mail.gpg")] {
                try manager.createSymbolicLink(atPath: store.path + "/" + link, withDestinationPath: target)
            }
            XCTAssertEqual(mkfifo(store.path + "/pipe.gpg", 0o600), 0)
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(socket) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let socketPath = store.path + "/agent.sock"
            withUnsafeMutableBytes(of: &address.sun_path) {
                $0.copyBytes(from: socketPath.utf8CString.map(UInt8.init))
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            XCTAssertEqual(bound, 0)

            let vault = try makeVault()
            let report = try vault.transfer.importPasswordStore(at: store)
            XCTAssertEqual(report.imported.filter { $0.kind == "entry" }.map(\.title), ["mail"])
            XCTAssertEqual(
                report.skipped.map { "\($0.title): \($0.reason ?? "")" },
                [
                    "Elsewhere: a symbolic link (to '\(outside.path)'), not followed",
                    "Work/same.gpg: a symbolic link (to 'mail.gpg'), not followed",
                    "agent.sock: a socket, not a file",
                    "pipe.gpg: a named pipe, not a file",
                    "secret.gpg: a symbolic link (to '\(outside.path)/secret.gpg'), not followed",
                ])
            XCTAssertEqual(try vault.items.entries().map(\.name), ["mail"], "nothing from outside the store")

            // A decrypted entry that is not UTF-8 is refused by name, or read with replacement characters.
            let latin = store.appendingPathComponent("Work/latin.gpg")
            try encrypt(Array("caf".utf8) + [0xE9] + Array("\n".utf8), to: latin)
            assertVaultError(.invalidText, { _ = try vault.transfer.importPasswordStore(at: store) }) {
                XCTAssertTrue($0.message.hasPrefix("the decrypted entry 'Work/latin' is not UTF-8 text"), $0.message)
            }
            _ = try vault.transfer.importPasswordStore(at: store, replacingInvalidUTF8: true)
            XCTAssertEqual(try vault.items.entry("latin", reveal: true).password, "caf\u{FFFD}")
        }
    }
}
