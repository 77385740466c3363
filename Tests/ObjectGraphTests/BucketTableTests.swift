import XCTest
@testable import ObjectGraph

/// The flat table of bucket sums against the byte-wise sum the record's format defines.
final class BucketTableTests: XCTestCase {
    private func randomTag(_ generator: inout some RandomNumberGenerator) -> [UInt8] {
        (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    func testSumsAgreeWithTheByteWiseSumAcrossCarriesAndTakingOut() {
        var generator = SystemRandomNumberGenerator()
        var table = BucketTable()
        var expected = RowAuthentication.zeroSum
        // All ones carries through every word; random tags carry between some.
        var tags = [[UInt8](repeating: 0xFF, count: 32), [UInt8](repeating: 0, count: 31) + [1]]
        for _ in 0..<200 { tags.append(randomTag(&generator)) }
        for tag in tags {
            tag.withUnsafeBytes { table.add($0, to: 7) }
            expected = RowAuthentication.add(expected, tag)
            XCTAssertEqual(table.sum(of: 7), expected)
        }
        for tag in tags.shuffled().prefix(150) {
            tag.withUnsafeBytes { table.add($0, to: 7, negating: true) }
            expected = RowAuthentication.add(expected, tag, negating: true)
            XCTAssertEqual(table.sum(of: 7), expected)
        }
        XCTAssertEqual(table.count(of: 7), Int64(tags.count - 150))
        XCTAssertEqual(table.numbers, [7])
    }

    func testTakingOutEveryTagLeavesTheBucketEmptyAndEqualToANewOne() {
        var generator = SystemRandomNumberGenerator()
        var table = BucketTable()
        let tags = (0..<20).map { _ in randomTag(&generator) }
        for tag in tags { tag.withUnsafeBytes { table.add($0, to: 4095) } }
        XCTAssertNotEqual(table, BucketTable())
        for tag in tags.reversed() { tag.withUnsafeBytes { table.add($0, to: 4095, negating: true) } }
        XCTAssertEqual(table, BucketTable())
        XCTAssertEqual(table.numbers, [])
    }

    func testABucketSetAsStoredReadsBackAndIsComparedByCountAndSum() {
        var generator = SystemRandomNumberGenerator()
        let sum = randomTag(&generator)
        var stored = BucketTable()
        sum.withUnsafeBytes { stored.set(12, count: 3, sum: $0) }
        XCTAssertEqual(stored.sum(of: 12), sum)
        XCTAssertEqual(stored.count(of: 12), 3)
        var summed = BucketTable()
        for _ in 0..<3 { RowAuthentication.zeroSum.withUnsafeBytes { summed.add($0, to: 12) } }
        XCTAssertFalse(summed.agrees(with: stored, on: 12), "same count, another sum")
        XCTAssertTrue(summed.agrees(with: stored, on: 11))
    }

    func testABucketBeyondTheTableIsKeptAsAStrayAndCounted() {
        var table = BucketTable()
        let tag = [UInt8](repeating: 2, count: 32)
        tag.withUnsafeBytes { table.add($0, to: RowAuthentication.bucketCount + 5) }
        tag.withUnsafeBytes { table.add($0, to: 1) }
        XCTAssertEqual(table.numbers, [1, RowAuthentication.bucketCount + 5])
        XCTAssertEqual(table.total, 2)
        XCTAssertEqual(table.sum(of: RowAuthentication.bucketCount + 5), tag)
        XCTAssertFalse(table.agrees(with: BucketTable(), on: RowAuthentication.bucketCount + 5))
    }

    func testTheMessageHoldsEachCountedBucketInOrderAsTheRecordFormatSays() {
        var table = BucketTable()
        let first = [UInt8](repeating: 0, count: 31) + [9]
        let second = (0..<32).map { UInt8($0) }
        second.withUnsafeBytes { table.add($0, to: 300) }
        first.withUnsafeBytes { table.add($0, to: 2) }
        var message: [UInt8] = [0xAA]
        table.appendCounted(to: &message)
        func number(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        let expected = [0xAA] + number(2) + number(1) + number(32) + first + number(300) + number(1) + number(32)
            + second
        XCTAssertEqual(message, expected)
    }
}
