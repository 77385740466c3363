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
        case .decimal: return (value as? Decimal).map { "\($0)".databaseValue } ?? .null
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

    static func value(_ dbValue: DatabaseValue, type: AttributeType) -> Any? {
        switch dbValue.storage {
        case .null: return nil
        case .int64(let number):
            switch type {
            case .boolean: return number != 0
            case .double: return Double(number)
            case .float: return Float(number)
            case .decimal: return Decimal(number)
            case .date: return Date(timeIntervalSinceReferenceDate: Double(number))
            case .string: return String(number)
            default: return Int(number)
            }
        case .double(let number):
            switch type {
            case .integer16, .integer32, .integer64: return Int(exactly: number.rounded(.towardZero))
            case .boolean: return number != 0
            case .float: return Float(number)
            case .decimal: return Decimal(number)
            case .date: return Date(timeIntervalSinceReferenceDate: number)
            default: return number
            }
        case .string(let text):
            switch type {
            case .decimal: return Decimal(string: text)
            case .uri: return URL(string: text)
            case .integer16, .integer32, .integer64: return Int(text)
            case .double: return Double(text)
            default: return text
            }
        case .blob(let data):
            if type == .uuid, data.count == 16 {
                return data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            }
            return data
        }
    }

    /// Converts what a caller assigned into the attribute's canonical Swift type, or traps
    /// on a type mismatch (a programmer error, as in Core Data).
    static func normalized(_ value: Any?, type attributeType: AttributeType, key: String, entity: String) -> Any? {
        guard let value else { return nil }
        // The common case first: an Int for an integer attribute.
        if attributeType.isInteger, let integer = value as? Int { return integer }
        if value is NSNull { return nil }
        func mismatch() -> Never {
            preconditionFailure("Unacceptable type of value for attribute \(entity).\(key): \(type(of: value)) is not \(attributeType.rawValue)")
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
