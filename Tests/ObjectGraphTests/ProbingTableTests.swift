import TestSupport
import XCTest
@testable import ObjectGraph

/// The open-addressed table behind a context's registry and its to-many positions, against a
/// `Dictionary` doing the same: random inserts, lookups and removals, with hashes made to
/// collide in their slots and in the byte a probe compares before reading a value.
final class ProbingTableTests: XCTestCase {
    private final class Entry {
        let key: Int
        init(_ key: Int) { self.key = key }
    }

    private func check(hash: @escaping (Int) -> Int, keys: Range<Int>, steps: Int, seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        var table = ProbingTable<Entry?>()
        var model: [Int: Entry] = [:]
        let home: (Entry?) -> Int = { hash($0!.key) }
        func place(_ key: Int) -> ProbingTable<Entry?>.Place { table.place(home: hash(key)) { $0!.key == key } }
        for step in 0..<steps {
            let key = Int.random(in: keys, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0:
                table.reserveCapacity(table.count + 1, home: home)
                let entry = Entry(key)
                table.set(entry, at: place(key))
                model[key] = entry
            case 1:
                if !table.isEmpty { table.remove(at: place(key), home: home) }
                model[key] = nil
            default:
                let found = table.isEmpty ? nil : table[place(key)]
                XCTAssertTrue(found === model[key], "step \(step): key \(key)")
                if found !== model[key] { return }
            }
            XCTAssertEqual(table.count, model.count, "step \(step)")
        }
        for (key, entry) in model { XCTAssertTrue(table[place(key)] === entry, "key \(key) at the end") }
        XCTAssertEqual(table.slots.compactMap { $0 }.count, model.count)
    }

    func testAWellSpreadHash() {
        check(hash: { ProbingTable<Entry?>.spread(UInt64($0)) }, keys: 0..<3000, steps: 60000, seed: 1)
    }

    func testSlotsThatCollideInLongClusters() {
        // Four homes, so every value sits in one of four clusters and removals shift them.
        check(hash: { $0 % 4 }, keys: 0..<400, steps: 30000, seed: 2)
    }

    func testHashBytesThatMatchWhereValuesDiffer() {
        // One top byte for every key: the probe must still tell values apart by reading them.
        check(hash: { 0x5A << 56 | ($0 % 64) }, keys: 0..<800, steps: 30000, seed: 3)
    }

    func testATopByteOfZero() {
        // 0 marks an empty slot: a hash whose top byte is 0 must still be found.
        check(hash: { $0 & 0xFF }, keys: 0..<500, steps: 20000, seed: 4)
    }
}
