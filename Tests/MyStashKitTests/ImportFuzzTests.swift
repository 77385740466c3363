import Foundation
import TestSupport
import XCTest
@testable import MyStashKit

/// Damaged exports never crash an importer: every mutation either reads or throws a
/// ``VaultError``, and what reads imports all or nothing. Seeded, so a failure replays.
final class ImportFuzzTests: VaultTestCase {

    static let interesting: [[UInt8]] = [
        Array("\"".utf8), Array("{".utf8), Array("]".utf8), Array("null".utf8), Array("-1".utf8), Array("1e999".utf8),
        Array("\u{1B}[2J".utf8), [0], [0xFF, 0xFE], Array("<".utf8), Array("&amp;".utf8), Array(",".utf8), Array("\r\n".utf8),
        Array("\"type\":3".utf8), Array("otpauth://totp/x?secret=".utf8), Array(String(repeating: "A", count: 300).utf8),
    ]

    func mutate(_ bytes: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0: bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...40, using: &random)))
            case 2: bytes.insert(contentsOf: Self.interesting.randomElement(using: &random)!, at: at)
            case 3: bytes = Array(bytes.prefix(at))
            default:
                let from = Int.random(in: 0..<bytes.count, using: &random)
                bytes.insert(contentsOf: bytes[from..<min(bytes.count, from + 64)], at: at)
            }
        }
        return bytes
    }

    /// The suite runs a sample; a long sweep sets MYSTASH_FUZZ_CASES and MYSTASH_FUZZ_SEED.
    func fuzz(_ format: ImportFormat, _ seedData: Data, seed: UInt64) throws {
        let environment = ProcessInfo.processInfo.environment
        let cases = environment["MYSTASH_FUZZ_CASES"].flatMap(Int.init) ?? 300
        let seed = seed &+ (environment["MYSTASH_FUZZ_SEED"].flatMap(UInt64.init) ?? 0) &* 1000
        var random = SplitMix64(seed: seed)
        let vault = try makeVault()
        var (read, refused, imported) = (0, 0, 0)
        for number in 0..<cases {
            let data = Data(mutate(Array(seedData), &random))
            do {
                _ = try Vault.read(data, format: format)
                read += 1
            } catch is VaultError {
                refused += 1
                continue
            }
            // Every 10th readable case goes through validation and a save, all or nothing.
            guard number % 10 == 0 else { continue }
            let before = try vault.items.entries().count
            do {
                let report = try vault.transfer.importItems(data, format: format)
                imported += 1
                XCTAssertGreaterThanOrEqual(try vault.items.entries().count, before, "seed \(seed) case \(number)")
                _ = report
            } catch let error as VaultError {
                XCTAssertEqual(error.kind, .invalidData, "seed \(seed) case \(number): \(error)")
                XCTAssertEqual(try vault.items.entries().count, before, "nothing saved: seed \(seed) case \(number)")
            }
        }
        XCTAssertEqual(read + refused, cases)
        XCTAssertGreaterThan(read, 0, "some mutations still read")
        XCTAssertGreaterThan(refused, 0, "some mutations are refused")
        _ = imported
    }

    func testDamagedBitwardenExports() throws {
        try fuzz(.bitwardenJSON, try fixture("bitwarden-all-types.json"), seed: 1)
    }

    func testDamagedKeePassXML() throws {
        try fuzz(.keepassxcXML, try fixture("keepassxc-source.xml"), seed: 2)
    }

    func testDamagedKeePassCSV() throws {
        let csv = """
            "Group","Title","Username","Password","URL","Notes","TOTP","Icon","Last Modified","Created"
            "Root","GitHub","ada lovelace","current-pw","github.com","line one
            line two","otpauth://totp/GitHub:ada?secret=JBSWY3DPEHPK3PXP&period=30&digits=6","0","2021-02-03T04:05:06Z","2020-01-02T03:04:05Z"
            "Root/Work/Mail & Chat","Router","admin","","192.168.1.1","","","0","2026-11-22T22:32:19Z","2026-11-22T22:32:19Z"

            """
        try fuzz(.keepassxcCSV, Data(csv.utf8), seed: 3)
    }

    func testDamagedMystashJSON() throws {
        let other = directory.appendingPathComponent("../source-\(UUID().uuidString)").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: other) }
        let source = try Vault.create(at: other, password: password, parameters: cheap)
        _ = try source.transfer.importItems(try fixture("bitwarden-all-types.json"), format: .bitwardenJSON)
        try fuzz(.mystashJSON, try source.transfer.exportJSON(), seed: 4)
    }
}
