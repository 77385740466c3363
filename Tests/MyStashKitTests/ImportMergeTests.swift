import Foundation
import XCTest

@testable import MyStashKit

/// Re-imports never subtract: every fixture imported over every other keeps each value the
/// vault had, and every value that changes is in the report, field by field.
final class ImportMergeTests: VaultTestCase {
    /// The sources a switcher has: each fixture, KeePassXC's own CSV and XML exports of its
    /// database, and a mystash-json backup.
    func sources() throws -> [(label: String, data: Data, format: ImportFormat)] {
        var sources: [(String, Data, ImportFormat)] = [
            ("bitwarden-all-types", try fixture("bitwarden-all-types.json"), .bitwardenJSON),
            ("bitwarden-organization", try fixture("bitwarden-organization.json"), .bitwardenJSON),
            ("bitwarden-switcher", try fixture("bitwarden-switcher.json"), .bitwardenJSON),
            ("keepassxc-source.xml", try fixture("keepassxc-source.xml"), .keepassxcXML),
            ("keepassxc-cli csv", try keepassxcExport("csv"), .keepassxcCSV),
            ("keepassxc-cli xml", try keepassxcExport("xml"), .keepassxcXML),
        ]
        let backup = try freshVault()
        _ = try backup.transfer.importItems(try fixture("bitwarden-all-types.json"), format: .bitwardenJSON)
        _ = try backup.transfer.importItems(try fixture("keepassxc-source.xml"), format: .keepassxcXML)
        sources.append(("mystash-json backup", try backup.transfer.exportJSON(), .mystashJSON))
        return sources
    }

    /// A new vault in a new directory (each pair of imports needs its own).
    func freshVault() throws -> Vault {
        try? FileManager.default.removeItem(at: directory)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID().uuidString)")
        return try makeVault()
    }

    /// Every value of every entry and note, by ID, as the report names the fields.
    struct Snapshot: Equatable {
        var entries: [Int64: [String: String]] = [:]
        var history: [Int64: [String]] = [:]
        var titles: [Int64: String] = [:]
        var notes: [Int64: (title: String, text: String)] = [:]
        var categories: Set<String> = []

        static func == (a: Snapshot, b: Snapshot) -> Bool {
            func notes(_ snapshot: Snapshot) -> [Int64: String] {
                snapshot.notes.mapValues { "\($0.title)\u{0}\($0.text)" }
            }
            return a.entries == b.entries && a.history == b.history && a.categories == b.categories
                && notes(a) == notes(b)
        }
    }

    func snapshot(_ vault: Vault) throws -> Snapshot {
        var snapshot = Snapshot()
        for listed in try vault.items.entries() {
            let entry = try vault.items.entry(.id(listed.id), reveal: true)
            var values: [String: String] = ["name": entry.name]
            values["user"] = entry.userId
            values["URL"] = entry.url
            values["password"] = entry.password.flatMap { $0.isEmpty ? nil : $0 }
            values["notes"] = entry.notes
            values["category"] = entry.category
            values["TOTP"] = entry.totp
            values["favorite"] = entry.favorite == true ? "yes" : "no"
            values["more URLs"] = entry.moreURLs?.joined(separator: ", ")
            for field in entry.fields ?? [] { values["field '\(field.name)'"] = field.value ?? "" }
            snapshot.entries[entry.id] = values
            snapshot.titles[entry.id] = entry.name
            snapshot.history[entry.id] = try vault.items.passwordHistory(.id(entry.id), reveal: true).compactMap(\.password)
        }
        for listed in try vault.items.notes() {
            snapshot.notes[listed.id] = (listed.title, try vault.items.note(.id(listed.id)).text ?? "")
        }
        snapshot.categories = Set(try vault.items.categories().map(\.name))
        return snapshot
    }

    /// What `report` says changed, by item ID and field.
    func changes(_ report: ImportReport, kind: String) -> [Int64: [String: ImportReport.Change]] {
        var table: [Int64: [String: ImportReport.Change]] = [:]
        for item in report.updated where item.kind == kind {
            guard let id = item.id else {
                XCTFail("updated \(kind) '\(item.title)' without its ID")
                continue
            }
            for change in item.changes ?? [] { table[id, default: [:]][change.field] = change }
        }
        return table
    }

    func testEveryFixtureImportedOverEveryOtherLosesNoValueAndReportsEveryChange() throws {
        let sources = try sources()
        var updates = 0
        for first in sources {
            for second in sources where second.label != first.label {
                let pair = "\(second.label) over \(first.label)"
                let vault = try freshVault()
                _ = try vault.transfer.importItems(first.data, format: first.format)
                let before = try snapshot(vault)
                let dryRun = try vault.transfer.importItems(second.data, format: second.format, dryRun: true)
                XCTAssertEqual(try snapshot(vault), before, "\(pair): a dry run saves nothing")
                let report = try vault.transfer.importItems(second.data, format: second.format)
                XCTAssertEqual(dryRun.updated, report.updated, "\(pair): the dry run shows every change")
                updates += report.updated.count
                let after = try snapshot(vault)
                let listed = changes(report, kind: "entry")
                for (id, old) in before.entries {
                    let title = before.titles[id]!
                    guard let new = after.entries[id] else {
                        XCTFail("\(pair): entry '\(title)' left the vault")
                        continue
                    }
                    for (field, value) in old {
                        XCTAssertNotNil(new[field], "\(pair): '\(title)' lost its \(field)")
                    }
                    for field in Set(old.keys).union(new.keys) where old[field] != new[field] {
                        let change = listed[id]?[field]
                        XCTAssertNotNil(change, "\(pair): '\(title)': \(field) changed unreported")
                        let secret = ["password", "notes", "TOTP"].contains(field) || change?.new == "********"
                        if let change, !secret {
                            XCTAssertEqual(change.old, old[field], "\(pair): '\(title)': \(field)")
                            XCTAssertEqual(change.new, new[field], "\(pair): '\(title)': \(field)")
                        }
                    }
                    for (field, change) in listed[id] ?? [:] where field != "history" {
                        XCTAssertNotEqual(old[field], new[field], "\(pair): '\(title)': \(field) reported, unchanged")
                        XCTAssertFalse(
                            ["password", "notes", "TOTP"].contains(field) && [change.old, change.new].contains {
                                $0 != nil && $0 != ImportReport.Change.masked
                            }, "\(pair): '\(title)': the report shows a secret")
                    }
                    let history = after.history[id] ?? []
                    XCTAssertTrue(Set(before.history[id] ?? []).isSubset(of: history), "\(pair): '\(title)' history")
                    if let password = old["password"], new["password"] != password {
                        XCTAssertTrue(history.contains(password), "\(pair): '\(title)': the old password is kept")
                    }
                }
                let notes = changes(report, kind: "note")
                for (id, old) in before.notes {
                    let new = try XCTUnwrap(after.notes[id], "\(pair): note '\(old.title)' left the vault")
                    if new.text != old.text {
                        XCTAssertNotNil(notes[id]?["text"], "\(pair): note '\(old.title)' changed unreported")
                        XCTAssertFalse(new.text.isEmpty, "\(pair): note '\(old.title)' lost its text")
                    }
                }
                XCTAssertTrue(before.categories.isSubset(of: after.categories), "\(pair): a category left")
            }
        }
        XCTAssertGreaterThan(updates, 10, "the fixtures share entries, so re-imports update some")
    }

    func testEachSourceSaysWhichFormatItIs() throws {
        for source in try sources() {
            XCTAssertEqual(try ImportFormat.detect(in: source.data), source.format, source.label)
        }
        // With a byte order mark and CRLF line ends, as Windows tools save them.
        let csv = Data([0xEF, 0xBB, 0xBF]) + Data("\"Title\",\"Password\"\r\n\"a\",\"b\"\r\n".utf8)
        XCTAssertEqual(try ImportFormat.detect(in: csv), .keepassxcCSV)
        for unknown in [
            "", "  \n", "[1]", "{\"a\": 1}", "{\"format\": \"x\"}", "{\"items\": [], \"format\": 1}", "<a/>",
            "Name,Secret\n", "{\"a\": [", "{\"items\": [1, 2",
        ] {
            assertVaultError(.invalidRequest, { _ = try ImportFormat.detect(in: Data(unknown.utf8)) })
        }
        // Cut short (an interrupted copy): refused as the format its beginning shows, naming where it ends.
        let cuts = [("{\"encrypted\": false, \"items\": [{\"type\": 1, ", "bitwarden-json"),
                    ("{\n  \"categories\" : [\n    \"Banking\",\n    \"Cred", "mystash-json")]
        for (cut, format) in cuts {
            assertVaultError(.invalidData, { _ = try ImportFormat.detect(in: Data(cut.utf8)) }) {
                XCTAssertTrue($0.message.hasPrefix("the file is not valid \(format): not JSON at line"), $0.message)
            }
        }
    }

    func testARefusedImportChangesNothing() throws {
        let vault = try freshVault()
        _ = try vault.transfer.importItems(try fixture("bitwarden-all-types.json"), format: .bitwardenJSON)
        let before = try snapshot(vault)
        assertVaultError(.invalidData, {
            _ = try vault.transfer.importItems(try self.fixture("bitwarden-encrypted.json"), format: .bitwardenJSON)
        })
        XCTAssertEqual(try snapshot(vault), before)
    }

    /// The case: the CSV export of a KeePassXC entry, then its XML export, then the CSV
    /// again: the fields only the XML holds stay, unless the import replaces.
    func testWhatTheSourceLacksLeavesOnlyWithReplace() throws {
        let vault = try freshVault()
        _ = try vault.transfer.importItems(try keepassxcExport("xml"), format: .keepassxcXML)
        let csv = try keepassxcExport("csv")
        let merged = try vault.transfer.importItems(csv, format: .keepassxcCSV)
        XCTAssertEqual(merged.updated, [], "the CSV holds nothing new: \(merged.updated)")
        XCTAssertEqual(try vault.items.entry("GitHub", reveal: true).fields?.map(\.name), ["Recovery code", "Team", "Tags"])
        XCTAssertEqual(try vault.items.totpCode("GitHub").totp.secret, Array("Hello!".utf8) + [0xDE, 0xAD, 0xBE, 0xEF])

        let dryRun = try vault.transfer.importItems(csv, format: .keepassxcCSV, dryRun: true, merge: .replacingValues)
        let replaced = try vault.transfer.importItems(csv, format: .keepassxcCSV, merge: .replacingValues)
        XCTAssertEqual(dryRun.updated, replaced.updated)
        XCTAssertEqual(replaced.updated.map(\.title), ["GitHub"])
        XCTAssertEqual(
            replaced.updated.first?.changes,
            [
                .init(field: "field 'Recovery code'", old: "********", new: nil),
                .init(field: "field 'Team'", old: "Analytical Engines", new: nil),
                .init(field: "field 'Tags'", old: "2fa,work", new: nil),
            ])
        XCTAssertNil(try vault.items.entry("GitHub", reveal: true).fields)
        XCTAssertEqual(try vault.items.passwordHistory("GitHub", reveal: true).count, 2, "earlier passwords stay")
    }

    /// A Bitwarden export of the same accounts: its values update the vault's, each listed.
    func testAnUpdateListsEachChangedValueMaskingSecrets() throws {
        let vault = try freshVault()
        _ = try vault.transfer.importItems(try fixture("keepassxc-source.xml"), format: .keepassxcXML)
        let report = try vault.transfer.importItems(try fixture("bitwarden-switcher.json"), format: .bitwardenJSON)
        let github = try XCTUnwrap(report.updated.first { $0.title == "GitHub" })
        XCTAssertEqual(
            github.changes,
            [
                .init(field: "category", old: nil, new: "Dev"),
                .init(field: "more URLs", old: nil, new: "https://gist.github.com"),
                .init(field: "favorite", old: "no", new: "yes"),
                .init(field: "field 'Team'", old: "Analytical Engines", new: "Difference Engines"),
                .init(field: "field 'SSH key name'", old: nil, new: "ada@engine"),
            ])
        let router = try XCTUnwrap(report.updated.first { $0.title == "Router" })
        XCTAssertEqual(
            router.changes,
            [
                .init(field: "password", old: nil, new: "********"),
                .init(field: "notes", old: nil, new: "********"),
                .init(field: "category", old: "Work/Mail & Chat", new: "Network"),
            ])
        let entry = try vault.items.entry("GitHub", reveal: true)
        XCTAssertEqual(entry.updatedAt, ISO8601DateFormatter().date(from: "2024-05-05T05:05:05Z"), "as the source says")
        XCTAssertEqual(entry.notes, "line one\nline two", "notes the source lacks stay")
        XCTAssertEqual(entry.hasTOTP, true, "the TOTP secret the source lacks stays")
        XCTAssertEqual(entry.fields?.first { $0.name == "Recovery code" }?.value, "rc-1234-5678")
    }
}
