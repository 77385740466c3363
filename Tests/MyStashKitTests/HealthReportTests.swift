import Foundation
import StashCrypto
import TestSupport
import XCTest
@testable import MyStashKit

final class HealthReportTests: VaultTestCase {
    /// Passwords far beyond 10^10 guesses, each used once unless a test says otherwise.
    let strong = ["vG7#qL9!zR2@xW5k", "pQ4$mN8&tY1*bH6j", "cX3%rK7^dS0(wF2e", "uJ5)gT9+hM1=nB4v"]

    func testAHealthyVaultHasNoFindings() throws {
        let vault = try Vault.create(at: directory, password: password, parameters: ScryptParameters(logN: 15))
        for (index, password) in strong.enumerated() {
            try vault.items.addEntry(name: "site \(index)", password: password, userId: nil, url: nil, category: nil,
                               notes: nil)
        }
        let report = try vault.items.healthReport(calibrated: ScryptParameters(logN: 15))
        XCTAssertEqual(report.entriesChecked, strong.count)
        XCTAssertTrue(report.isHealthy, "\(report)")
        XCTAssertNil(report.breached)
    }

    func testWeakReusedAndOldPasswordsAreFoundAndNoPasswordIsInTheReport() throws {
        let vault = try makeVault()
        let now = Date()
        try vault.items.addEntry(name: "mail", password: "P@ssw0rd1", userId: nil, url: nil, category: nil, notes: nil)
        try vault.items.addEntry(name: "bank", password: strong[0], userId: nil, url: nil, category: nil, notes: nil)
        try vault.items.addEntry(name: "Shop", password: strong[0], userId: nil, url: nil, category: nil, notes: nil)
        var ancient = EntryChanges(name: "forum", password: strong[1])
        ancient.createdAt = now.addingTimeInterval(-800 * 86400)
        try vault.items.addEntry(ancient)
        var renewed = EntryChanges(name: "wiki", password: strong[2])
        renewed.createdAt = now.addingTimeInterval(-800 * 86400)
        renewed.history = [HistoryInfo(password: "older", replacedAt: now.addingTimeInterval(-10 * 86400))]
        try vault.items.addEntry(renewed)
        try vault.items.addEntry(name: "erased", password: "", userId: nil, url: nil, category: nil, notes: nil)

        let report = try vault.items.healthReport(calibrated: cheap, now: now)
        XCTAssertEqual(report.entriesChecked, 5, "the empty password is not checked")
        XCTAssertEqual(report.weak.map(\.entry.name), ["mail"])
        XCTAssertEqual(report.weak.first?.patterns.first, .commonPassword)
        XCTAssertEqual(report.weak.first?.substitutions, true)
        XCTAssertEqual(report.reused.map { $0.map(\.name) }, [["bank", "Shop"]])
        XCTAssertEqual(report.old.map(\.entry.name), ["forum"])
        XCTAssertEqual(report.old.first?.days, 800)
        // The floor of 2^15 applies even where the machine calibrates lower.
        XCTAssertEqual(report.settings, [HealthReport.Setting(kind: .scryptCost, current: 10, recommended: 15)])
        let encoded = String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
        for secret in ["P@ssw0rd1", "older"] + strong { XCTAssertFalse(encoded.contains(secret), secret) }
    }

    func testTheCostCalibratedHereIsTheBar() throws {
        let vault = try Vault.create(at: directory, password: password, parameters: ScryptParameters(logN: 15))
        let report = try vault.items.healthReport(calibrated: ScryptParameters(logN: 17))
        XCTAssertEqual(report.settings, [HealthReport.Setting(kind: .scryptCost, current: 15, recommended: 17)])
    }

    func testBreachedPasswordsAreCountedFromTheList() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "mail", password: "password", userId: nil, url: nil, category: nil, notes: nil)
        try vault.items.addEntry(name: "bank", password: strong[0], userId: nil, url: nil, category: nil, notes: nil)
        let list = directory.deletingLastPathComponent().appendingPathComponent("pwned-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: list) }
        // The SHA-1 of "password", as every copy of the list has it.
        try Data("0000000000000000000000000000000000000001:1\n5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:9545824\n"
            .utf8).write(to: list)
        let report = try vault.items.healthReport(breaches: try BreachList(at: list), calibrated: cheap)
        XCTAssertEqual(report.breached, [HealthReport.BreachedPassword(
            entry: HealthReport.EntryReference(id: 1, name: "mail"), occurrences: 9_545_824)])
    }
}

final class BreachListTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("breach-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func write(_ text: String, to name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
        return url
    }

    private func sha1(_ text: String) throws -> String {
        try SHA1Digest.hash(Array(text.utf8)).map { String(format: "%02X", $0) }.joined()
    }

    func testSHA1IsTheOneTheListsUse() throws {
        XCTAssertEqual(try sha1("password"), "5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8")
        XCTAssertEqual(try sha1(""), "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709")
    }

    func testBisectionFindsEveryLineOfALargeSortedFileAndNothingElse() throws {
        var random = SplitMix64(seed: 24)
        var hashes = Set<String>()
        while hashes.count < 5000 {
            hashes.insert((0..<40).map { _ in String(format: "%X", random.next() % 16) }.joined())
        }
        let sorted = hashes.sorted()
        let counts = Dictionary(uniqueKeysWithValues: sorted.enumerated().map { ($1, $0 + 1) })
        // CR LF line ends, as the downloads have them, and no newline after the last.
        let file = try write(sorted.map { "\($0):\(counts[$0]!)" }.joined(separator: "\r\n"), to: "sorted.txt")
        let list = try BreachList(at: file)
        XCTAssertEqual(list.layout, .sortedFile)
        for hash in sorted {
            XCTAssertEqual(try list.occurrences(ofSHA1: Array(hash.utf8)), counts[hash], hash)
        }
        for _ in 0..<500 {
            let absent = (0..<40).map { _ in String(format: "%X", random.next() % 16) }.joined()
            if counts[absent] == nil { XCTAssertEqual(try list.occurrences(ofSHA1: Array(absent.utf8)), 0) }
        }
        XCTAssertEqual(try list.occurrences(ofSHA1: Array(String(repeating: "0", count: 40).utf8)), 0)
        XCTAssertEqual(try list.occurrences(ofSHA1: Array(String(repeating: "F", count: 40).utf8)), 0)
    }

    func testRangeFilesAreFoundByPrefixWithOrWithoutTxt() throws {
        let hash = try sha1("hunter2")
        _ = try write("0018A45C4D1DEF81644B54AB7F969B88D65:1\r\n\(hash.dropFirst(5)):17043\r\n",
                      to: "ranges/\(hash.prefix(5)).txt")
        let other = try sha1("letmein")
        _ = try write("\(other.dropFirst(5).lowercased()):3\n", to: "ranges/\(other.prefix(5))")
        let list = try BreachList(at: directory.appendingPathComponent("ranges"))
        XCTAssertEqual(list.layout, .rangeDirectory)
        XCTAssertEqual(try list.occurrences(of: "hunter2"), 17043)
        XCTAssertEqual(try list.occurrences(of: "letmein"), 3)
        XCTAssertEqual(try list.occurrences(of: "not in any range file"), 0)
    }

    func testListsOfAnotherShapeAreRefusedByName() throws {
        func refusal(_ url: URL, file: StaticString = #filePath, line: UInt = #line) -> VaultError? {
            do {
                _ = try BreachList(at: url).occurrences(of: "password")
                XCTFail("accepted \(url.lastPathComponent)", file: file, line: line)
                return nil
            } catch let error as VaultError {
                return error
            } catch {
                XCTFail("\(error)", file: file, line: line)
                return nil
            }
        }
        XCTAssertEqual(refusal(directory.appendingPathComponent("missing"))?.kind, .notFound)
        _ = try write("x", to: "not-ranges/readme.md")
        XCTAssertTrue(refusal(directory.appendingPathComponent("not-ranges"))?.message.contains("no range files") == true)
        let ntlm = try write("8846F7EAEE8FB117AD06BDD830B7586C:1\n", to: "ntlm.txt")
        XCTAssertTrue(refusal(ntlm)?.message.contains("not NTLM") == true)
        let byCount = try write("FFFF0000000000000000000000000000000000FF:9\n0000000000000000000000000000000000000001:8\n",
                                to: "by-count.txt")
        XCTAssertTrue(refusal(byCount)?.message.contains("not ordered by hash") == true)
        let garbage = try write(String(repeating: "A", count: 40) + ":1\n" + String(repeating: "z", count: 5000),
                                to: "garbage.txt")
        XCTAssertEqual(refusal(garbage)?.kind, .invalidData)
        let prefix = try sha1("password").prefix(5)
        _ = try write("not a line\n", to: "bad-ranges/\(prefix).txt")
        XCTAssertTrue(refusal(directory.appendingPathComponent("bad-ranges"))?.message.contains("line 1") == true)
    }
}
