import Foundation
import XCTest

@testable import ObjectGraph

/// A binary property list read for Foundation's callers (store metadata, above all) is given
/// in Foundation's own shapes, value by value and type by type, without Foundation reading it.
final class PropertyListReadingTests: ObjectGraphTestCase {
    /// The value with the type of each part, keys sorted, so that an `Int` where Foundation
    /// gives an `NSNumber` (or a `Bool` where it gives a number) is a difference.
    func shape(_ value: Any) -> String {
        switch value {
        case let dictionary as [String: Any]:
            let parts = dictionary.keys.sorted().map { "\($0): \(shape(dictionary[$0]!))" }
            return "{" + parts.joined(separator: ", ") + "}"
        case let array as [Any]:
            return "[" + array.map(shape).joined(separator: ", ") + "]"
        case let data as Data:
            return "Data(\(data.map { String(format: "%02x", $0) }.joined()))"
        default:
            // An object's address (a keyed archive's reference describes itself by it) aside.
            return "\(type(of: value))(\(value))".replacingOccurrences(
                of: "0x[0-9a-f]+", with: "", options: .regularExpression)
        }
    }

    func assertReadAsFoundationReads(_ data: Data, _ what: String, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        let foundations = try PropertyListSerialization.propertyList(from: data, format: nil)
        let ours = try BinaryPropertyList.foundationPropertyList(from: data)
        XCTAssertEqual(shape(ours), shape(foundations), what, file: file, line: line)
    }

    func testMetadataOfStoresCoreDataWroteReadsAsFoundationReadsIt() throws {
        let stores = try FileManager.default.subpathsOfDirectory(atPath: Self.fixturesURL.path)
            .filter { $0.hasSuffix(".sqlite") }
        XCTAssertGreaterThanOrEqual(stores.count, 4)
        for path in stores {
            let url = Self.fixturesURL.appendingPathComponent(path)
            let hex = try XCTUnwrap(sqlite3(url, "SELECT hex(Z_PLIST) FROM Z_METADATA").first, path)
            let metadata = dataFromHex(hex)
            XCTAssertTrue(BinaryPropertyList.isBinaryPropertyList(metadata), path)
            try assertReadAsFoundationReads(metadata, path)
        }
    }

    func testEveryKindOfValueReadsAsFoundationReadsIt() throws {
        let values: [String: Any] = [
            "small": 7, "negative": -3, "large": Int.max, "smallest": Int.min, "zero": 0,
            "real": 1.5, "tiny": 5e-324, "yes": true, "no": false, "text": "café ☕︎ 𝄞", "ascii": "plain",
            "empty": "", "data": Data([0, 1, 255]), "date": Date(timeIntervalSinceReferenceDate: -12.25),
            "list": [1, "two", 3.0, [false], ["k": Data()]] as [Any], "nested": ["a": ["b": ["c": 1]]],
            "emptyList": [Any](), "emptyDictionary": [String: Any](),
        ]
        let binary = try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0)
        try assertReadAsFoundationReads(binary, "values of every kind")
        // A 16-byte integer (Foundation keeps all of it) and a keyed archive (its references
        // are Foundation's own type) go to Foundation itself.
        let huge = try PropertyListSerialization.data(
            fromPropertyList: ["huge": NSNumber(value: UInt64.max)], format: .binary, options: 0)
        try assertReadAsFoundationReads(huge, "a 16-byte integer")
        let archive = try NSKeyedArchiver.archivedData(
            withRootObject: ["x": 1] as NSDictionary, requiringSecureCoding: false)
        try assertReadAsFoundationReads(archive, "a keyed archive")
    }

    // The lists below were made by hand by an outside review of the first version, which read
    // each of them otherwise than Foundation.

    func testAKeyWrittenTwiceAndAFourByteRealReadAsFoundationReadsThem() throws {
        // {AppKey: "first", AppKey: "second"}: Foundation keeps the first.
        let twice = dataFromHex(
            "62706c6973743030d201020304564170704b6579564170704b6579556669727374567365636f6e64080d141b21"
                + "0000000000000101000000000000000500000000000000000000000000000028")
        try assertReadAsFoundationReads(twice, "a key written twice")
        XCTAssertEqual((try BinaryPropertyList.foundationPropertyList(from: twice) as? [String: Any])?["AppKey"]
            as? String, "first")
        // {f: 0.1 as a 4-byte real}: Foundation keeps it a Float, printed and saved as one.
        let single = dataFromHex(
            "62706c6973743030d101025166223dcccccd080b0d00000000000001010000000000000003"
                + "00000000000000000000000000000012")
        try assertReadAsFoundationReads(single, "a 4-byte real")
        let read = try XCTUnwrap(try BinaryPropertyList.foundationPropertyList(from: single) as? [String: Any])
        XCTAssertEqual("\(read["f"]!)", "0.1")
    }

    func testListsFoundationRefusesAreRefused() throws {
        let refused = [
            "a gap between the offset table and the trailer":
                "62706c6973743030a1011005080aeeeeee00000000000001010000000000000002"
                + "0000000000000000000000000000000c",
            "an integer running into the offset table":
                "62706c6973743030a10113080a000000000000010100000000000000020000000000000000000000000000000b",
        ]
        for (what, hex) in refused.sorted(by: { $0.key < $1.key }) {
            XCTAssertThrowsError(try PropertyListSerialization.propertyList(from: dataFromHex(hex), format: nil), what)
            XCTAssertThrowsError(try BinaryPropertyList.foundationPropertyList(from: dataFromHex(hex)), what)
        }
        // An empty UTF-16 string: Foundation on Linux refuses it, so it goes to Foundation.
        let emptyUTF16 = dataFromHex(
            "62706c6973743030a10160080a000000000000010100000000000000020000000000000000000000000000000b")
        XCTAssertThrowsError(try PropertyListSerialization.propertyList(from: emptyUTF16, format: nil))
        XCTAssertThrowsError(try BinaryPropertyList.foundationPropertyList(from: emptyUTF16))
    }

    func testReferencesTooNarrowForTheirListAreRefused() throws {
        // An array of one integer, then 299 integers nothing refers to: 300 objects, which
        // 1-byte references cannot all reach, though the one reference made reads fine.
        func list(referenceSize: Int) -> Data {
            var bytes = Array("bplist00".utf8) + [0xA1] + [UInt8](repeating: 0, count: referenceSize - 1) + [0x01]
            var offsets = [8]
            for _ in 1..<300 {
                offsets.append(bytes.count)
                bytes += [0x10, 0x05]
            }
            let table = bytes.count
            for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
            func bigEndian(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8((value >> ($0 * 8)) & 0xFF) } }
            bytes += [0, 0, 0, 0, 0, 0, 2, UInt8(referenceSize)] + bigEndian(300) + bigEndian(0) + bigEndian(table)
            return Data(bytes)
        }
        XCTAssertThrowsError(try PropertyListSerialization.propertyList(from: list(referenceSize: 1), format: nil))
        XCTAssertThrowsError(try BinaryPropertyList.parse(list(referenceSize: 1)))
        XCTAssertThrowsError(try BinaryPropertyList.foundationPropertyList(from: list(referenceSize: 1)))
        // With 2-byte references, the same list is read.
        XCTAssertEqual((try BinaryPropertyList.parse(list(referenceSize: 2)) as? [Any])?.first as? Int, 5)
    }
}
