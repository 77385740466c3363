import Foundation
import GRDB

/// An error from the persistence stack that is not a validation failure: a merge
/// conflict, an incompatible store, a store that cannot be opened or written.
///
/// Codes follow Core Data's where one exists (133020 merge conflict, 134100 incompatible
/// model, 134080 store open failure, 134030 save failure).
public struct ObjectGraphError: Error, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Another context or process changed or deleted a row this save would overwrite.
        public static let mergeConflict = Code(rawValue: 133020)
        /// The store was made with a model whose persisted shape differs.
        public static let incompatibleVersionHash = Code(rawValue: 134100)
        public static let storeOpenFailed = Code(rawValue: 134080)
        public static let saveFailed = Code(rawValue: 134030)
        public static let objectNotFound = Code(rawValue: 133000)
        /// Objects share the values of a uniqueness constraint (Core Data's
        /// `NSManagedObjectConstraintMergeError`).
        public static let constraintConflict = Code(rawValue: 133021)
        /// A stored value cannot be read as its attribute's type, or its transformer failed
        /// (Core Data's general error code).
        public static let undecodableValue = Code(rawValue: 134060)
        public var description: String { String(rawValue) }
    }

    public var code: Code
    public var message: String
    /// The objects involved (the conflicting objects of a merge conflict). They belong to
    /// their context's queue, like every managed object: read them there.
    public nonisolated(unsafe) var objects: [ManagedObject]
    /// The SQLite error behind this one, if any (busy, full disk, permission denied, ...).
    public var underlyingError: Error?

    public init(code: Code, message: String, objects: [ManagedObject] = [], underlyingError: Error? = nil) {
        self.code = code
        self.message = message
        self.objects = objects
        self.underlyingError = underlyingError
    }

    /// The SQLite primary result code behind this error, if it came from SQLite.
    public var sqliteResultCode: Int32? {
        (underlyingError as? DatabaseError).map { $0.resultCode.primaryResultCode.rawValue }
    }

    /// True when another connection held the store's lock beyond the busy timeout.
    public var isBusy: Bool { sqliteResultCode == 5 || sqliteResultCode == 6 }

    public var description: String { "\(message) (code \(code.rawValue))" }
}

extension ObjectGraphError {
    /// A stored value that cannot be read, named by store file, entity, attribute and row.
    static func undecodable(
        _ reason: Any, store: PersistentStore, entity: String, attribute: String, primaryKey: Int64
    ) -> ObjectGraphError {
        ObjectGraphError(
            code: .undecodableValue,
            message: "cannot read \(entity).\(attribute) of row \(primaryKey) "
                + "in store '\(store.displayName)': \(reason)",
            underlyingError: reason as? Error)
    }
}

/// Wraps SQLite failures into ``ObjectGraphError``; GRDB leaves statement arguments out
/// of its descriptions, so no value reaches the message.
func wrapStoreErrors<T>(_ code: ObjectGraphError.Code, _ what: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as DatabaseError {
        throw ObjectGraphError(code: code, message: "\(what): \(error.message ?? "SQLite error \(error.resultCode.rawValue)")", underlyingError: error)
    }
}
