import Foundation
import XCTest

@testable import MyStashKit

/// The sync state as the vault stores it: the field clocks apart, read only when asked for,
/// written back unread as they were; the first release's JSON still read; damaged bytes refused.
final class SyncStateTests: XCTestCase {
    let laptop = String(repeating: "a1", count: 16)
    let desktop = String(repeating: "b2", count: 16)

    func sampleState() -> SyncState {
        var state = SyncState(device: laptop, deviceName: "laptop", remote: "/srv/vault.git")
        state.heads = [laptop: .init(sequence: 7, hash: String(repeating: "0f", count: 32), version: "abc123")]
        for item in 0..<50 {
            let id = UUID().uuidString
            for (index, key) in ["name", "password", "url"].enumerated() {
                state.fields[id, default: [:]][key] = HybridClock(
                    milliseconds: 1_700_000_000_000 + Int64(item * 10 + index), counter: UInt32(index),
                    device: item % 2 == 0 ? laptop : desktop)
            }
        }
        state.deleted[UUID().uuidString] = HybridClock(milliseconds: -5, counter: .max, device: desktop)
        return state
    }

    func testClocksComeBackFromTheStoredFormOnlyOnceRead() throws {
        let state = sampleState()
        let stored = try state.stored()
        var loaded = try SyncState(stored: stored)
        XCTAssertEqual(loaded.heads, state.heads)
        XCTAssertEqual(loaded.remote, "/srv/vault.git")
        // Unread, the clocks are written back byte for byte.
        XCTAssertEqual(try loaded.stored(), stored)
        try loaded.readClocks()
        XCTAssertEqual(loaded.fields, state.fields)
        XCTAssertEqual(loaded.deleted, state.deleted)
        XCTAssertEqual(loaded.fields.values.map(\.count).reduce(0, +), 150)
    }

    func testTheFirstReleasesJSONStateIsReadWhole() throws {
        let id = UUID().uuidString
        let json = """
            {"device": "\(laptop)", "deviceName": "laptop", "remote": "/srv/vault.git",
             "heads": {"\(laptop)": {"sequence": 3, "hash": "\(String(repeating: "1f", count: 32))"}},
             "fields": {"\(id)": {"password": "1700000000000.2.\(desktop)"}},
             "deleted": {"\(UUID().uuidString)": "1700000000001.0.\(laptop)"}}
            """
        let state = try SyncState(stored: Data(json.utf8))
        XCTAssertEqual(state.heads[laptop]?.sequence, 3)
        XCTAssertNil(state.heads[laptop]?.version)
        XCTAssertEqual(state.fields[id]?["password"], HybridClock(milliseconds: 1_700_000_000_000, counter: 2,
                                                                  device: desktop))
        XCTAssertEqual(state.deleted.count, 1)
        // Stored again, it takes the new form and keeps every clock.
        var again = try SyncState(stored: try state.stored())
        try again.readClocks()
        XCTAssertEqual(again.fields, state.fields)
        XCTAssertEqual(again.deleted, state.deleted)
    }

    func testCutOrDamagedClocksAreRefusedAsADamagedSyncState() throws {
        let stored = try sampleState().stored()
        // 2, the rest's length (u32be), the rest, then the clocks.
        let clocksStart = 5 + stored[1...4].reduce(0) { $0 << 8 | Int($1) }
        XCTAssertGreaterThan(clocksStart, 5)
        for length in clocksStart..<stored.count {
            guard var cut = try? SyncState(stored: stored.prefix(length)) else { continue }
            XCTAssertThrowsError(try cut.readClocks(), "cut at \(length) of \(stored.count)") { error in
                XCTAssertEqual((error as? VaultError)?.description.contains("sync state is damaged"), true)
            }
        }
        // Bytes changed here and there in the clocks.
        var bytes = [UInt8](stored)
        var flipped = 0
        for position in stride(from: clocksStart, to: bytes.count, by: 97) {
            bytes[position] ^= 0x5A
            var damaged = try? SyncState(stored: Data(bytes))
            // Either refused or read as other clocks; never a crash.
            if (try? damaged?.readClocks()) == nil { flipped += 1 }
            bytes[position] ^= 0x5A
        }
        XCTAssertGreaterThan(flipped, 0)
    }
}
