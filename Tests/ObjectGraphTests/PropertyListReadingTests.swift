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
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                bytes.append(try XCTUnwrap(UInt8(hex[index..<next], radix: 16)))
                index = next
            }
            XCTAssertTrue(BinaryPropertyList.isBinaryPropertyList(Data(bytes)), path)
            try assertReadAsFoundationReads(Data(bytes), path)
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
}
