import Foundation
import XCTest
@testable import MyStashKit
import StashPlatform

/// Attachments arriving from the exports of real tools, and leaving in mystash-json.
final class AttachmentImportTests: VaultTestCase {
    func random(_ count: Int) throws -> Data {
        let source = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? source.close() }
        return source.readData(ofLength: count)
    }

    func saved(_ vault: Vault, _ attachment: String, of entry: String) throws -> Data {
        var data = Data()
        _ = try vault.items.readAttachment(.name(attachment), of: .name(entry)) { data += $0 }
        return data
    }

    func work() throws -> URL {
        let work = directory.deletingLastPathComponent().appendingPathComponent("work-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: work) }
        return work
    }

    func testKeePassXCDatabaseAttachmentsArriveByteForByte() throws {
        guard let cli = ChildProcess.find("keepassxc-cli") else {
            throw XCTSkip("keepassxc-cli is not installed (apt-get install keepassxc)")
        }
        let work = try work()
        let database = work.appendingPathComponent("db.kdbx").path
        let scan = try random(70_000)
        let text = Data("recovery codes\n1234 5678\n".utf8)
        try scan.write(to: work.appendingPathComponent("scan.png"))
        try text.write(to: work.appendingPathComponent("codes.txt"))
        try must([cli, "db-create", "-p", database], Data("kp\nkp\n".utf8))
        try must([cli, "add", database, "Bank", "-u", "alice"], Data("kp\n".utf8))
        for name in ["scan.png", "codes.txt"] {
            try must([cli, "attachment-import", database, "Bank", name, work.appendingPathComponent(name).path],
                     Data("kp\n".utf8))
        }
        let exported = try XCTUnwrap(ChildProcess.execute([cli, "export", "-f", "xml", database], input: Data("kp\n".utf8)))
        XCTAssertEqual(exported.status, 0)

        let vault = try makeVault()
        let report = try vault.transfer.importItems(exported.output, format: .keepassxcXML)
        XCTAssertEqual(report.importedCount("attachment"), 2)
        XCTAssertEqual(report.warnings, [])
        XCTAssertEqual(try vault.items.attachments(of: "Bank").map(\.name), ["codes.txt", "scan.png"])
        XCTAssertEqual(try saved(vault, "scan.png", of: "Bank"), scan)
        XCTAssertEqual(try saved(vault, "codes.txt", of: "Bank"), text)
        // Again: nothing new.
        let again = try vault.transfer.importItems(exported.output, format: .keepassxcXML)
        XCTAssertEqual(again.importedCount("attachment"), 0)
        XCTAssertEqual(again.skipped.map(\.title), ["Bank"])
        XCTAssertEqual(try vault.items.attachments(of: "Bank").count, 2)
    }

    func testBinaryFilesOfAPassStoreBecomeAttachments() throws {
        guard ChildProcess.find("pass") != nil else { throw XCTSkip("pass is not installed (apt-get install pass)") }
        try withTestGPGKey { recipient in
            try withPassStore(for: recipient) { store in
                // As pass users keep a file: `pass insert -m name < file`.
                var image = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D])
                image += try random(4000)
                try must(["pass", "insert", "-m", "docs/passport.png"], image)
                try must(["pass", "insert", "-m", "mail"], Data("hunter2\nuser: me\n".utf8))
                let vault = try makeVault()
                let report = try vault.transfer.importPasswordStore(at: store)
                XCTAssertEqual(report.importedCount("attachment"), 1)
                XCTAssertEqual(report.warnings.map(\.title), ["docs/passport.png"])
                let entry = try vault.items.entry("passport.png", reveal: true)
                XCTAssertEqual(entry.category, "docs")
                XCTAssertEqual(entry.password, "")
                XCTAssertEqual(try saved(vault, "passport.png", of: "passport.png"), image)
                XCTAssertEqual(try vault.items.entry("mail", reveal: true).password, "hunter2")
                XCTAssertNil(try vault.items.entry("mail", reveal: true).attachments)
            }
        }
    }

    func testBitwardenZipExportBringsEachItemsFiles() throws {
        guard let zip = ChildProcess.find("zip") else { throw XCTSkip("zip is not installed (apt-get install zip)") }
        let work = try work()
        let json = """
            {"encrypted": false, "folders": [], "items": [
              {"id": "c1", "type": 1, "name": "Bank", "login": {"username": "alice", "password": "pw"}},
              {"id": "c2", "type": 2, "name": "Passport", "notes": "number in the scan", "secureNote": {"type": 0}},
              {"id": "c3", "type": 1, "name": "Shop", "login": {"password": "x"}}
            ]}
            """
        try Data(json.utf8).write(to: work.appendingPathComponent("data.json"))
        let statement = try random(300_000)  // stored: random bytes do not deflate
        let letter = Data(String(repeating: "Dear customer, ", count: 2000).utf8)  // deflated
        let scan = try random(1000)
        for (path, data) in [("attachments/c1/statement.pdf", statement), ("attachments/c1/letter.txt", letter),
                             ("attachments/c2/scan.jpg", scan), ("attachments/zz/orphan.txt", Data("x".utf8))] {
            let url = work.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url)
        }
        let archive = work.appendingPathComponent("bitwarden_export.zip")
        let zipped = try XCTUnwrap(ChildProcess.execute(
            ["/bin/sh", "-c", "cd '\(work.path)' && '\(zip)' -qr '\(archive.path)' data.json attachments"]))
        XCTAssertEqual(zipped.status, 0, String(decoding: zipped.errors, as: UTF8.self))
        let file = try Data(contentsOf: archive)
        XCTAssertEqual(try ImportFormat.detect(in: file), .bitwardenZIP)

        let vault = try makeVault()
        let report = try vault.transfer.importItems(file, format: .bitwardenZIP)
        XCTAssertEqual(report.importedCount("attachment"), 3)
        XCTAssertEqual(try saved(vault, "statement.pdf", of: "Bank"), statement)
        XCTAssertEqual(try saved(vault, "letter.txt", of: "Bank"), letter)
        // A secure note with a file comes as an entry, which can hold it.
        XCTAssertEqual(try saved(vault, "scan.jpg", of: "Passport"), scan)
        XCTAssertEqual(try vault.items.entry("Passport", reveal: false).notes, "number in the scan")
        XCTAssertTrue(report.warnings.contains { $0.title == "Passport" })
        // A file in no item's folder is named in the report, never dropped without a word.
        XCTAssertTrue(report.warnings.contains { $0.title == "attachments/zz/orphan.txt" }, "\(report)")
        XCTAssertNil(try vault.items.entry("Shop", reveal: false).attachments)
    }

    /// A file's name the vault cannot keep as it is (a control character, a path, one name twice)
    /// is changed, and the report says from what.
    func testARenamedAttachmentIsReportedWithItsNameInTheFile() throws {
        let data = Data("x".utf8).base64EncodedString()
        let json = #"{"format":"mystash-json","version":2,"categories":[],"notes":[],"passwords":[{"name":"Bank","#
            + #""password":"p","attachments":[{"name":"a\u0001b.txt","data":"\#(data)"},"#
            + #"{"name":"docs/id.txt","data":"\#(data)"},{"name":"id.txt","data":"\#(data)"}]}]}"#
        let report = try makeVault().transfer.importItems(Data(json.utf8), format: .mystashJSON)
        XCTAssertEqual(report.warnings.map(\.title), ["Bank/a_b.txt", "Bank/id.txt", "Bank/id.txt (2)"])
        XCTAssertEqual(report.warnings.first?.reason?.hasPrefix(#"named "a\u{01}b.txt" in the file"#), true,
                       "\(report.warnings)")
    }

    func testBitwardenJSONNamesTheAttachmentsItLeavesOut() throws {
        let json = """
            {"encrypted": false, "items": [{"id": "c1", "type": 1, "name": "Bank", "login": {},
              "attachments": [{"id": "a1", "fileName": "statement.pdf", "size": "1000"}]}]}
            """
        let report = try makeVault().transfer.importItems(Data(json.utf8), format: .bitwardenJSON)
        XCTAssertEqual(report.warnings.map(\.title), ["Bank"])
        XCTAssertTrue(report.warnings[0].reason?.contains("not in this file") == true, "\(report.warnings)")
    }

    /// Damaged archives: every byte changed in turn at a sample of places, and cut short; each
    /// is read or refused as invalid data, never crashing or reading past the end.
    func testDamagedZipArchivesAreRefusedNotReadPast() throws {
        guard let zip = ChildProcess.find("zip") else { throw XCTSkip("zip is not installed (apt-get install zip)") }
        let work = try work()
        try Data(#"{"encrypted": false, "items": [{"id": "c1", "type": 1, "name": "A", "login": {}}]}"#.utf8)
            .write(to: work.appendingPathComponent("data.json"))
        try FileManager.default.createDirectory(at: work.appendingPathComponent("attachments/c1"),
                                                withIntermediateDirectories: true)
        try Data(String(repeating: "abc", count: 300).utf8).write(to: work.appendingPathComponent("attachments/c1/f"))
        let archive = work.appendingPathComponent("a.zip")
        try must(["/bin/sh", "-c", "cd '\(work.path)' && '\(zip)' -qr '\(archive.path)' data.json attachments"])
        let original = try Data(contentsOf: archive)
        var damaged: [Data] = (0..<original.count).filter { $0 % 7 == 0 }.map { index in
            var copy = original
            copy[index] ^= 0xFF
            return copy
        }
        damaged += stride(from: 4, to: original.count, by: 13).map { original.prefix($0) }
        var refused = 0
        for data in damaged {
            do {
                _ = try Vault.read(data, format: .bitwardenZIP)
            } catch let error as VaultError {
                XCTAssertEqual(error.kind, .invalidData, error.message)
                refused += 1
            }
        }
        XCTAssertGreaterThan(refused, damaged.count / 2)
    }

    func testMystashJSONCarriesAttachmentsAndCSVNamesThem() throws {
        let vault = try makeVault()
        try vault.items.addEntry(EntryChanges(name: "Bank", password: "pw"))
        let file = directory.appendingPathComponent("key.bin")
        let data = try random(2_500_000)
        try data.write(to: file)
        try vault.items.attach(try FileHandle(forReadingFrom: file), named: "key.bin", to: "Bank")
        let exported = try vault.transfer.exportJSON()
        let document = try XCTUnwrap(try JSONSerialization.jsonObject(with: exported) as? [String: Any])
        let entry = try XCTUnwrap((document["passwords"] as? [[String: Any]])?.first)
        let attachment = try XCTUnwrap((entry["attachments"] as? [[String: Any]])?.first)
        XCTAssertEqual(attachment["name"] as? String, "key.bin")
        XCTAssertEqual((attachment["data"] as? String).flatMap { Data(base64Encoded: $0) }, data)
        XCTAssertEqual(try vault.transfer.exportCSV().leftOut, ["1 attachment of 1 entry"])

        let other = try Vault.create(at: directory.appendingPathComponent("other"), password: password, parameters: cheap)
        let report = try other.transfer.importItems(exported, format: .mystashJSON)
        XCTAssertEqual(report.importedCount("attachment"), 1)
        XCTAssertEqual(try saved(other, "key.bin", of: "Bank"), data)
        // A file of the same name with other bytes is added beside it, never over it.
        var changed = document
        var passwords = try XCTUnwrap(changed["passwords"] as? [[String: Any]])
        passwords[0]["attachments"] = [["name": "key.bin", "data": Data("new".utf8).base64EncodedString()]]
        changed["passwords"] = passwords
        let update = try other.transfer.importItems(try JSONSerialization.data(withJSONObject: changed), format: .mystashJSON)
        XCTAssertEqual(update.updated.first?.changes?.map(\.field), ["attachment"])
        XCTAssertEqual(try other.items.attachments(of: "Bank").map(\.name), ["key.bin", "key.bin (2)"])
        XCTAssertEqual(try saved(other, "key.bin", of: "Bank"), data)
    }
}
