import Foundation
import TestSupport
import XCTest

@testable import MyStashKit

/// The date reader of imports gives what `ISO8601DateFormatter` gives, to the bit: a date read
/// by the old reader and again by the new must compare equal, or a re-import would see changes.
final class InternetDateTests: XCTestCase {
    let whole = ISO8601DateFormatter()
    let fractional: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()

    func formatterDate(_ text: String) -> Date? { whole.date(from: text) ?? fractional.date(from: text) }

    func testRandomDatesReadAsTheFormatterReadsThem() {
        var random = SplitMix64(seed: 19)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        for _ in 0..<3_000 {
            let year = Int.random(in: 1600...9999, using: &random)
            let month = Int.random(in: 1...12, using: &random)
            let day = Int.random(in: 1...28, using: &random)
            var text = "\(year)-\(two(month))-\(two(day))T\(two(Int.random(in: 0...23, using: &random))):"
                + "\(two(Int.random(in: 0...59, using: &random))):\(two(Int.random(in: 0...59, using: &random)))"
            let fractionDigits = Int.random(in: 0...9, using: &random)
            if fractionDigits > 0 {
                text += "." + String((0..<fractionDigits).map { _ in "0123456789".randomElement(using: &random)! })
            }
            if Bool.random(using: &random) {
                text += "Z"
            } else {
                text += (Bool.random(using: &random) ? "+" : "-") + two(Int.random(in: 0...23, using: &random))
                    + ":" + two(Int.random(in: 0...59, using: &random))
            }
            let expected = formatterDate(text)
            XCTAssertNotNil(expected, text)
            XCTAssertEqual(InternetDate.date(text)?.timeIntervalSinceReferenceDate,
                           expected?.timeIntervalSinceReferenceDate, text)
        }
    }

    func testEdgesOfTheCalendarReadAsTheFormatterReadsThem() {
        for text in [
            "2024-02-29T00:00:00Z", "2000-02-29T12:00:00.5Z", "1600-03-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
            "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00.000Z", "2024-03-04T05:06:07.890+05:30",
        ] {
            XCTAssertEqual(InternetDate.date(text), formatterDate(text), text)
            XCTAssertNotNil(InternetDate.date(text), text)
        }
    }

    /// Shapes the formatter reads its own way (leniently, or in the Julian calendar) are left to it.
    func testOtherShapesAreLeftToTheFormatter() {
        let dates = ExportDocument.Dates()
        for text in [
            "2023-02-29T00:00:00Z", "1583-01-01T00:00:00Z", "2024-3-4T5:6:7Z", "2024-03-04T05:06:07+0100",
            "2024-03-04T05:06:07Zjunk", " 2024-03-04T05:06:07Z", "2024-03-04T05:06:07.Z", "2024-03-04T24:00:00Z",
            "2024-03-04T05:06:07.1234567890Z", "2024-03-04T05:06:07", "", "2024-13-01T00:00:00Z",
        ] {
            XCTAssertNil(InternetDate.date(text), text)
            XCTAssertEqual(dates.date(text), formatterDate(text), text)
        }
    }
}
