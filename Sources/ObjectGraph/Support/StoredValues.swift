import Foundation
import GRDB

/// Conversions between attribute values and SQLite values, following Core Data's
/// conventions: dates as seconds since 2001-01-01, booleans 0/1, UUIDs as 16-byte BLOBs.
enum StoredValues {
    static func databaseValue(_ value: Any?, type: AttributeType) -> DatabaseValue {
        guard let value, !(value is NSNull) else { return .null }
        switch type {
        case .integer16, .integer32, .integer64:
            if let number = value as? Int { return Int64(number).databaseValue }
            if let number = value as? Bool { return (number ? 1 : 0).databaseValue }
            return .null
        case .decimal: return (value as? Decimal).map(decimalDatabaseValue) ?? .null
        case .double: return (value as? Double)?.databaseValue ?? .null
        case .float: return (value as? Float).map { Double($0).databaseValue } ?? .null
        case .string: return (value as? String)?.databaseValue ?? .null
        case .boolean: return ((value as? Bool).map { $0 ? 1 : 0 } as Int64?)?.databaseValue ?? .null
        case .date: return (value as? Date)?.timeIntervalSinceReferenceDate.databaseValue ?? .null
        case .binary: return (value as? Data)?.databaseValue ?? .null
        case .uuid: return (value as? UUID).map { withUnsafeBytes(of: $0.uuid) { Data($0) }.databaseValue } ?? .null
        case .uri: return (value as? URL)?.absoluteString.databaseValue ?? .null
        case .transformable: return (value as? Data)?.databaseValue ?? .null
        }
    }

    /// A predicate constant as a SQLite value, whatever its Swift type.
    static func databaseValue(ofConstant value: Any?) -> DatabaseValue {
        switch value {
        case nil, is NSNull: return .null
        case let value as Bool: return (value ? 1 : 0).databaseValue
        case let value as Int: return value.databaseValue
        case let value as Int64: return value.databaseValue
        case let value as Int32: return Int64(value).databaseValue
        case let value as Int16: return Int64(value).databaseValue
        case let value as Double: return value.databaseValue
        case let value as Float: return Double(value).databaseValue
        case let value as Decimal: return "\(value)".databaseValue
        case let value as String: return value.databaseValue
        case let value as Date: return value.timeIntervalSinceReferenceDate.databaseValue
        case let value as Data: return value.databaseValue
        case let value as UUID: return withUnsafeBytes(of: value.uuid) { Data($0) }.databaseValue
        case let value as URL: return value.absoluteString.databaseValue
        case let value as ManagedObject: return (value.objectID.primaryKey ?? -1).databaseValue
        default: return "\(value!)".databaseValue
        }
    }

    /// The attribute value a stored SQLite value stands for, read as Core Data writes it.
    ///
    /// SQLite's dynamic typing is followed where the meaning is clear (an integral REAL for
    /// an integer, numeric text for a number); anything else is an error, never a value of
    /// the wrong type or a silent nil. Decimals never go through a binary double: a REAL
    /// (which SQLite makes of a decimal literal of up to 15 significant digits) is read back
    /// through its shortest decimal form, text and our BLOB form are parsed exactly.
    ///
    /// - throws: ``UndecodableStoredValue`` saying what was found.
    static func value(_ dbValue: DatabaseValue, type: AttributeType) throws(UndecodableStoredValue) -> Any? {
        func unreadable(_ found: String) -> UndecodableStoredValue { .init(found: found, expected: type) }
        switch dbValue.storage {
        case .null: return nil
        case .int64(let number):
            switch type {
            case .integer16, .integer32, .integer64: return Int(number)
            case .boolean: return number != 0
            case .double: return Double(number)
            case .float: return Float(number)
            case .decimal: return Decimal(number)
            case .date: return Date(timeIntervalSinceReferenceDate: Double(number))
            case .string: return String(number)
            case .uri, .binary, .uuid, .transformable: throw unreadable("an INTEGER")
            }
        case .double(let number):
            switch type {
            case .integer16, .integer32, .integer64:
                guard let integer = Int(exactly: number.rounded(.towardZero)) else {
                    throw unreadable("the REAL \(number)")
                }
                return integer
            case .boolean: return number != 0
            case .double: return number
            case .float: return Float(number)
            case .decimal:
                guard number.isFinite, let decimal = Decimal(string: "\(number)") else {
                    throw unreadable("the REAL \(number)")
                }
                return decimal
            case .date: return Date(timeIntervalSinceReferenceDate: number)
            case .string, .uri, .binary, .uuid, .transformable: throw unreadable("a REAL")
            }
        case .string(let text):
            switch type {
            case .string: return text
            case .decimal: return try exactDecimal(text, type: type)
            case .uri:
                guard let url = URL(string: text) else { throw unreadable("text that is not a URL") }
                return url
            case .integer16, .integer32, .integer64:
                guard let integer = Int(text) else { throw unreadable("non-integer text") }
                return integer
            case .boolean:
                guard let integer = Int(text) else { throw unreadable("non-integer text") }
                return integer != 0
            case .double, .date, .float:
                guard let number = Double(text) else { throw unreadable("non-numeric text") }
                if type == .date { return Date(timeIntervalSinceReferenceDate: number) }
                return type == .float ? Float(number) as Any : number
            case .uuid:
                guard let uuid = UUID(uuidString: text) else { throw unreadable("text that is not a UUID") }
                return uuid
            case .binary, .transformable: return Data(text.utf8)
            }
        case .blob(let data):
            switch type {
            case .binary, .transformable: return data
            case .uuid:
                guard data.count == 16 else { throw unreadable("a \(data.count)-byte BLOB") }
                return data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            case .decimal:
                guard let text = String(data: data, encoding: .utf8) else { throw unreadable("a BLOB") }
                return try exactDecimal(text, type: type)
            case .string:
                guard let text = String(data: data, encoding: .utf8) else { throw unreadable("a non-UTF-8 BLOB") }
                return text
            default: throw unreadable("a BLOB")
            }
        }
    }

    /// Parses a decimal literal exactly, refusing what `Decimal(string:)` would read only a prefix of.
    private static func exactDecimal(_ text: String, type: AttributeType) throws(UndecodableStoredValue) -> Decimal {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.allSatisfy({ "0123456789+-.eE".contains($0) }),
              let decimal = Decimal(string: trimmed) else {
            throw UndecodableStoredValue(found: "text that is not a decimal number", expected: type)
        }
        return decimal
    }

    /// How a Decimal is stored: as text, which SQLite's NUMERIC affinity turns into an exact
    /// INTEGER or REAL when it has at most 15 significant digits (so SQL comparisons work);
    /// longer values as the UTF-8 text in a BLOB, which no affinity touches, so no digit is lost.
    static func decimalDatabaseValue(_ decimal: Decimal) -> DatabaseValue {
        let text = "\(decimal)"
        let digits = text.prefix { $0 != "e" && $0 != "E" }.filter(\.isNumber).drop { $0 == "0" }
        return digits.count <= 15 ? text.databaseValue : Data(text.utf8).databaseValue
    }

    /// Converts what a caller assigned into the attribute's canonical Swift type, or traps
    /// on a type mismatch (a programmer error, as in Core Data).
    static func normalized(_ value: Any?, type attributeType: AttributeType, key: String, entity: String) -> Any? {
        guard let value else { return nil }
        // The common case first: an Int for an integer attribute.
        if attributeType.isInteger, let integer = value as? Int { return integer }
        if value is NSNull { return nil }
        func mismatch() -> Never {
            preconditionFailure(
                "Unacceptable type of value for attribute \(entity).\(key): \(type(of: value)) is not "
                    + "\(attributeType.rawValue)"
            )
        }
        switch attributeType {
        case .integer16, .integer32, .integer64:
            switch value {
            case let v as Int: return v
            case let v as Int64: return Int(v)
            case let v as Int32: return Int(v)
            case let v as Int16: return Int(v)
            case let v as UInt8: return Int(v)
            default: mismatch()
            }
        case .double:
            if let v = value as? Double { return v }
            if let v = value as? Int { return Double(v) }
            mismatch()
        case .float:
            if let v = value as? Float { return v }
            if let v = value as? Double { return Float(v) }
            if let v = value as? Int { return Float(v) }
            mismatch()
        case .decimal:
            if let v = value as? Decimal { return v }
            if let v = value as? Int { return Decimal(v) }
            if let v = value as? Double { return Decimal(v) }
            mismatch()
        case .string: if let v = value as? String { return v }; mismatch()
        case .boolean: if let v = value as? Bool { return v }; mismatch()
        case .date: if let v = value as? Date { return v }; mismatch()
        case .binary: if let v = value as? Data { return v }; mismatch()
        case .uuid: if let v = value as? UUID { return v }; mismatch()
        case .uri: if let v = value as? URL { return v }; mismatch()
        case .transformable: return value
        }
    }
}

/// A stored value that cannot be read as its attribute's type.
struct UndecodableStoredValue: Error, CustomStringConvertible {
    var found: String
    var expected: AttributeType

    var description: String { "\(found), not a value of type \(expected.rawValue)" }
}
