import Foundation

/// Reads the one shape of ISO 8601 date that exports hold, `2024-03-04T05:06:07.890Z` (RFC 3339:
/// fraction optional, `Z` or `±HH:MM`), without ICU: `ISO8601DateFormatter` copies an ICU
/// formatter for every date it reads, and that was half the time of a 100,000-item import.
///
/// Gives exactly the `Date` the formatter gives (milliseconds, the fraction cut, not rounded,
/// as ICU does), so a date read again compares equal. Anything else is nil, for the formatter to
/// judge as before: other shapes, years before 1600 (ICU counts those in the Julian calendar),
/// days a month does not have (ICU rolls them over).
enum InternetDate {
    static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { date($0) }
    }

    private static func date(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var reader = Reader(bytes: bytes)
        guard let year = reader.number(digits: 4), reader.skip("-"), let month = reader.number(digits: 2),
            reader.skip("-"), let day = reader.number(digits: 2), reader.skip("T"),
            let hour = reader.number(digits: 2), reader.skip(":"), let minute = reader.number(digits: 2),
            reader.skip(":"), let second = reader.number(digits: 2)
        else { return nil }
        var milliseconds = 0
        if reader.skip(".") {
            // At most nine digits: ICU reads more through an Int32 that overflows.
            var digits = 0
            while let digit = reader.digit() {
                if digits < 3 { milliseconds = milliseconds * 10 + digit }
                digits += 1
            }
            guard (1...9).contains(digits) else { return nil }
            for _ in min(digits, 3)..<3 { milliseconds *= 10 }
        }
        var offsetMinutes = 0
        if !reader.skip("Z") {
            let sign: Int
            if reader.skip("+") { sign = 1 } else if reader.skip("-") { sign = -1 } else { return nil }
            guard let hours = reader.number(digits: 2), reader.skip(":"), let minutes = reader.number(digits: 2),
                hours < 24, minutes < 60
            else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        }
        guard reader.isAtEnd, year >= 1600, (1...12).contains(month), day >= 1,
            day <= daysIn(month: month, year: year), hour < 24, minute < 60, second < 60
        else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offsetMinutes * 60
        // CFDateFormatter's own arithmetic on ICU's milliseconds, for the same Double.
        let since1970 = Double(seconds * 1000 + milliseconds) / 1000
        return Date(timeIntervalSinceReferenceDate: since1970 - Date.timeIntervalBetween1970AndReferenceDate)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        var isAtEnd: Bool { position == bytes.endIndex }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard position < bytes.endIndex, bytes[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        mutating func digit() -> Int? {
            guard position < bytes.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position])
            else { return nil }
            position += 1
            return Int(bytes[position - 1] - UInt8(ascii: "0"))
        }

        mutating func number(digits: Int) -> Int? {
            var value = 0
            for _ in 0..<digits {
                guard let digit = digit() else { return nil }
                value = value * 10 + digit
            }
            return value
        }
    }
}
