import Foundation

/// Where a transformed value lives: enough for an encrypting transformer to bind a
/// ciphertext to its place, so that a value moved elsewhere is detected.
public struct ValuePlace: Hashable, Sendable, CustomStringConvertible {
    /// Where one attribute's values live: shared by the places of its rows, as a list decodes
    /// thousands (and a place that held its own strings copied three for each).
    public final class Attribute: Sendable {
        /// The store's identifier (`Z_UUID`).
        public let storeIdentifier: String
        /// The concrete entity of the row.
        public let entityName: String
        /// The attribute whose value is transformed.
        public let attributeName: String

        public init(storeIdentifier: String, entityName: String, attributeName: String) {
            self.storeIdentifier = storeIdentifier
            self.entityName = entityName
            self.attributeName = attributeName
        }
    }

    public let attribute: Attribute
    /// The row (`Z_PK`).
    public var primaryKey: Int64

    public var storeIdentifier: String { attribute.storeIdentifier }
    public var entityName: String { attribute.entityName }
    public var attributeName: String { attribute.attributeName }

    public init(storeIdentifier: String, entityName: String, attributeName: String, primaryKey: Int64) {
        self.init(
            attribute: Attribute(
                storeIdentifier: storeIdentifier, entityName: entityName, attributeName: attributeName),
            primaryKey: primaryKey)
    }

    public init(attribute: Attribute, primaryKey: Int64) {
        self.attribute = attribute
        self.primaryKey = primaryKey
    }

    public static func == (left: ValuePlace, right: ValuePlace) -> Bool {
        left.primaryKey == right.primaryKey
            && (left.attribute === right.attribute
                || (left.storeIdentifier, left.entityName, left.attributeName)
                    == (right.storeIdentifier, right.entityName, right.attributeName))
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storeIdentifier)
        hasher.combine(entityName)
        hasher.combine(attributeName)
        hasher.combine(primaryKey)
    }

    public var description: String { "store \(storeIdentifier), \(entityName).\(attributeName), row \(primaryKey)" }
}

/// Converts a Transformable attribute's value to the bytes stored in its BLOB column
/// and back, as `NSValueTransformer`, but told where the value lives.
///
/// For example:
///
/// ```swift
/// final class Reversed: ValueTransformer {
///     func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
///         Data((value as! String).reversed().utf8)
///     }
///     func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
///         String(String(decoding: data, as: UTF8.self).reversed())
///     }
/// }
/// ValueTransformerRegistry.shared.register(Reversed(), forName: "Reversed")
/// ```
public protocol ValueTransformer: AnyObject {
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data
    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any
    /// ``reverseTransformedValue(_:at:)`` of bytes read in place from the store, as a dictionary
    /// fetch reads them (thousands at a time); by default they are copied into `Data` first.
    func reverseTransformedValue(bytes: UnsafeRawBufferPointer, at place: ValuePlace) throws -> Any
}

extension ValueTransformer {
    public func reverseTransformedValue(bytes: UnsafeRawBufferPointer, at place: ValuePlace) throws -> Any {
        try reverseTransformedValue(Data(bytes), at: place)
    }
}

/// Transformers by name, as `NSValueTransformer.setValueTransformer(_:forName:)`.
///
/// Each coordinator has a registry that falls back to ``shared``, so two vaults open in
/// one process can each use their own keys under the same transformer name.
public final class ValueTransformerRegistry: @unchecked Sendable {  // every access holds the lock
    public static let shared = ValueTransformerRegistry(parent: nil)
    /// The name of the transformer used when a Transformable attribute names none.
    public static let defaultTransformerName = "ObjectGraphPropertyListTransformer"

    private let parent: ValueTransformerRegistry?
    private var transformers: [String: ValueTransformer] = [:]
    private let lock = NSLock()

    public init(parent: ValueTransformerRegistry? = .shared) {
        self.parent = parent
        if parent == nil {
            transformers[Self.defaultTransformerName] = PropertyListTransformer()
            for name in KeyedArchiveTransformer.names { transformers[name] = KeyedArchiveTransformer() }
        }
    }

    public func register(_ transformer: ValueTransformer?, forName name: String) {
        lock.withLock { transformers[name] = transformer }
    }

    public func transformer(named name: String) -> ValueTransformer? {
        lock.withLock { transformers[name] } ?? parent?.transformer(named: name)
    }
}

/// Stores property-list values (strings, numbers, dates, data, arrays, dictionaries) as binary plists.
///
/// It also reads keyed archives: a Transformable attribute that names no transformer in a
/// model made for Apple's Core Data holds `NSKeyedUnarchiveFromData` archives.
final class PropertyListTransformer: ValueTransformer {
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        try PropertyListSerialization.data(fromPropertyList: [value], format: .binary, options: 0)
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        let plist = try KeyedArchiveTransformer.checkedPropertyList(data, expecting: "a property list")
        if KeyedArchiveTransformer.isKeyedArchive(plist) {
            return try KeyedArchiveTransformer.decode(archive: plist, data: data)
        }
        guard plist is [Any],
              let array = try PropertyListSerialization.propertyList(from: data, format: nil) as? [Any],
              let value = array.first else {
            throw UndecodableTransformedValue(reason: "a property list of another shape than ObjectGraph writes")
        }
        return value
    }
}
