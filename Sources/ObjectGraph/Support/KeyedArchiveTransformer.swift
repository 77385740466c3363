import Foundation

/// Bytes a built-in transformer cannot decode; the context names the store, entity,
/// attribute and row when it reports it (``ObjectGraphError/Code/undecodableValue``).
struct UndecodableTransformedValue: Error, CustomStringConvertible {
    var reason: String
    var description: String { reason }
}

/// Core Data's default transformers for Transformable attributes (`NSKeyedUnarchiveFromData`,
/// `NSSecureUnarchiveFromData`): a keyed archive of strings, numbers, dates, data, URLs, UUIDs,
/// arrays and dictionaries, read and written by Foundation's `NSKeyedUnarchiver` and
/// `NSKeyedArchiver`.
///
/// Values come back as Swift values (`String`, `Int`, `Double`, `Bool`, `Date`, `Data`, `URL`,
/// `UUID`, `[Any]`, `[String: Any]`). Before Foundation sees an archive, its structure is
/// checked here (known classes only, every reference in range, no cycle, no missing element),
/// because swift-corelibs-foundation traps on some malformed archives instead of failing.
final class KeyedArchiveTransformer: ValueTransformer {
    /// The names Core Data and Xcode give these transformers.
    static let names = [
        "NSKeyedUnarchiveFromData", "NSSecureUnarchiveFromData",
        "NSSecureUnarchiveFromDataTransformer", "NSSecureUnarchiveFromDataTransformerName",
    ]

    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        let object: NSObject
        do {
            object = try Self.foundationObject(value)
        } catch let error as UndecodableTransformedValue {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "cannot archive \(place.entityName).\(place.attributeName): \(error.reason)")
        }
        return try NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: true)
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        let plist = try Self.checkedPropertyList(data, expecting: "a keyed archive")
        guard Self.isKeyedArchive(plist) else {
            throw UndecodableTransformedValue(reason: "a property list but not a keyed archive")
        }
        return try Self.decode(archive: plist, data: data)
    }

    /// The binary property list in `data` as ``BinaryPropertyList`` reads it, or an error.
    static func checkedPropertyList(_ data: Data, expecting what: String) throws -> Any {
        guard BinaryPropertyList.isBinaryPropertyList(data) else {
            throw UndecodableTransformedValue(reason: "not \(what) (no binary property list)")
        }
        do {
            return try BinaryPropertyList.parse(data)
        } catch {
            throw UndecodableTransformedValue(reason: "not \(what) (\(error))")
        }
    }

    /// True when a property list read by ``BinaryPropertyList`` is a keyed archive.
    static func isKeyedArchive(_ plist: Any) -> Bool {
        (plist as? [String: Any])?["$archiver"] as? String == "NSKeyedArchiver"
    }

    /// Decodes the keyed archive `data`, whose property list ``BinaryPropertyList`` read as `plist`.
    static func decode(archive plist: Any, data: Data) throws -> Any {
        var check = ArchiveCheck(plist)
        try check.checkRoot()
        let unarchiver: NSKeyedUnarchiver
        do {
            unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
        } catch {
            throw UndecodableTransformedValue(reason: "not a keyed archive (\(error.localizedDescription))")
        }
        unarchiver.requiresSecureCoding = true
        unarchiver.decodingFailurePolicy = .setErrorAndReturn
        let classes: [AnyClass] = [
            NSArray.self, NSDictionary.self, NSString.self, NSNumber.self, NSDate.self,
            NSData.self, NSURL.self, NSUUID.self,
        ]
        guard let object = unarchiver.decodeObject(of: classes, forKey: NSKeyedArchiveRootObjectKey) else {
            throw UndecodableTransformedValue(
                reason: "the keyed archive holds no readable value"
                    + (unarchiver.error.map { " (\($0.localizedDescription))" } ?? ""))
        }
        return try swiftValue(object)
    }

    // MARK: - Foundation objects and Swift values

    static func swiftValue(_ object: Any) throws -> Any {
        switch object {
        case let number as NSNumber:
            switch String(cString: number.objCType) {
            case "c", "B": return number.boolValue
            case "f", "d": return number.doubleValue
            case "Q", "L", "I": return Int(exactly: number.uint64Value) ?? number.doubleValue
            default: return Int(number.int64Value)
            }
        case let text as NSString: return String(describing: text)
        case let date as NSDate: return Date(timeIntervalSinceReferenceDate: date.timeIntervalSinceReferenceDate)
        case let data as NSData: return Data(referencing: data)
        case let url as NSURL:
            guard let value = URL(string: (url.absoluteString as String?) ?? "") else {
                throw UndecodableTransformedValue(reason: "an unreadable URL")
            }
            return value
        case let uuid as NSUUID: return UUID(uuidString: uuid.uuidString) ?? UUID()
        case let array as NSArray: return try array.map(swiftValue)
        case let dictionary as NSDictionary:
            var result: [String: Any] = [:]
            for key in dictionary.allKeys {
                guard let text = key as? NSString, let value = dictionary.object(forKey: key) else {
                    throw UndecodableTransformedValue(reason: "a dictionary key that is not a string")
                }
                result[String(describing: text)] = try swiftValue(value)
            }
            return result
        default:
            throw UndecodableTransformedValue(reason: "an object of class \(type(of: object))")
        }
    }

    static func foundationObject(_ value: Any) throws -> NSObject {
        switch value {
        case let value as Bool: return NSNumber(value: value)
        case let value as Int: return NSNumber(value: value)
        case let value as Int64: return NSNumber(value: value)
        case let value as Int32: return NSNumber(value: value)
        case let value as Int16: return NSNumber(value: value)
        case let value as Double: return NSNumber(value: value)
        case let value as Float: return NSNumber(value: value)
        case let value as String: return NSString(string: value)
        case let value as Date: return NSDate(timeIntervalSinceReferenceDate: value.timeIntervalSinceReferenceDate)
        case let value as Data: return NSData(data: value)
        case let value as URL:
            guard let url = NSURL(string: value.absoluteString) else {
                throw UndecodableTransformedValue(reason: "an unusable URL")
            }
            return url
        case let value as UUID: return NSUUID(uuidString: value.uuidString) ?? NSUUID()
        case let value as [Any]: return NSArray(array: try value.map(foundationObject))
        case let value as [String: Any]:
            let keys = Array(value.keys)
            return NSDictionary(
                objects: try keys.map { try foundationObject(value[$0] as Any) },
                forKeys: keys.map { NSString(string: $0) })
        case let value as NSObject
        where value is NSNumber || value is NSString || value is NSDate || value is NSData || value is NSURL:
            return value
        default:
            throw UndecodableTransformedValue(
                reason: "a value of type \(type(of: value)) cannot go in a keyed archive")
        }
    }
}

/// Checks a keyed archive's structure before Foundation decodes it.
private struct ArchiveCheck {
    let objects: [Any]
    let root: Any?
    private var checked: Set<Int> = []
    private var inProgress: Set<Int> = []

    init(_ plist: Any) {
        let archive = plist as? [String: Any] ?? [:]
        objects = archive["$objects"] as? [Any] ?? []
        root = (archive["$top"] as? [String: Any])?["root"]
    }

    private static func fail(_ reason: String) -> UndecodableTransformedValue {
        UndecodableTransformedValue(reason: "damaged keyed archive: \(reason)")
    }

    mutating func checkRoot() throws {
        guard objects.first as? String == "$null", let root else { throw Self.fail("no $null, $objects or $top root") }
        try check(reference: root, depth: 0, allowsNull: false)
    }

    /// The index a reference (an archiver UID) points to.
    static func index(of reference: Any) -> Int? { (reference as? BinaryPropertyList.UID)?.value }

    private mutating func check(reference: Any, depth: Int, allowsNull: Bool) throws {
        guard let index = Self.index(of: reference), index >= 0, index < objects.count else {
            throw Self.fail("a reference out of range")
        }
        guard index != 0 else {
            if allowsNull { return }
            throw Self.fail("a missing element")
        }
        guard !checked.contains(index) else { return }
        guard depth < 64, inProgress.insert(index).inserted else { throw Self.fail("nested too deeply or in a cycle") }
        defer { inProgress.remove(index) }
        switch objects[index] {
        case let text as String:
            // Foundation reads "$null" anywhere as nil, which a collection cannot hold.
            guard text != "$null" else { throw Self.fail("a second $null object") }
        case is Data, is Bool, is Int, is Double:
            break
        case let object as [String: Any]:
            try checkObject(object, depth: depth)
        default:
            throw Self.fail("object \(index) of an unknown kind")
        }
        checked.insert(index)
    }

    private func references(_ object: [String: Any], _ key: String) throws -> [Any] {
        guard let list = object[key] as? [Any] else { throw Self.fail("no \(key) list") }
        return list
    }

    private mutating func checkObject(_ object: [String: Any], depth: Int) throws {
        guard let classReference = object["$class"], let classIndex = Self.index(of: classReference), classIndex > 0,
            classIndex < objects.count, let description = objects[classIndex] as? [String: Any],
            let className = description["$classname"] as? String,
            let chain = description["$classes"] as? [Any], !chain.isEmpty, chain.allSatisfy({ $0 is String })
        else {
            throw Self.fail("an object without a readable class")
        }
        switch className {
        case "NSArray", "NSMutableArray":
            for element in try references(object, "NS.objects") {
                try check(reference: element, depth: depth + 1, allowsNull: false)
            }
        case "NSDictionary", "NSMutableDictionary":
            let keys = try references(object, "NS.keys")
            let values = try references(object, "NS.objects")
            guard keys.count == values.count else {
                throw Self.fail("a dictionary with \(keys.count) keys and \(values.count) values")
            }
            var names: Set<String> = []
            for key in keys {
                guard let index = Self.index(of: key), index > 0, index < objects.count,
                    let name = objects[index] as? String
                else {
                    throw Self.fail("a dictionary key that is not a string")
                }
                guard names.insert(name).inserted else { throw Self.fail("a dictionary with the key '\(name)' twice") }
            }
            for value in values { try check(reference: value, depth: depth + 1, allowsNull: false) }
        case "NSString", "NSMutableString":
            guard object["NS.string"] is String else { throw Self.fail("a string without NS.string") }
        case "NSDate":
            guard object["NS.time"] is Double || object["NS.time"] is Int else {
                throw Self.fail("a date without NS.time")
            }
        case "NSData", "NSMutableData":
            guard object["NS.data"] is Data else { throw Self.fail("data without NS.data") }
        case "NSUUID":
            guard (object["NS.uuidbytes"] as? Data)?.count == 16 else { throw Self.fail("a UUID without 16 bytes") }
        case "NSURL":
            // Only absolute URLs (no base URL), as archives of stored values hold.
            guard let base = object["NS.base"], Self.index(of: base) == 0, let relative = object["NS.relative"] else {
                throw Self.fail("a URL without NS.relative, or relative to another URL")
            }
            guard let index = Self.index(of: relative), index > 0, index < objects.count,
                let text = objects[index] as? String, NSURL(string: text) != nil
            else {
                throw Self.fail("a URL whose NS.relative is not a URL string")
            }
        default:
            throw Self.fail("an object of class \(className), which is not a property-list class")
        }
    }
}
