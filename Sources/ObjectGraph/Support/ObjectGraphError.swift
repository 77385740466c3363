import Foundation
import GRDB

/// An error from the persistence stack that is not a validation failure: a merge
/// conflict, an incompatible store, a store that cannot be opened or written.
///
/// Its codes follow Core Data's where one exists; all are listed in `ErrorCodes.swift`.
/// When SQLite refused to read or write a store, ``storeFailure`` names why.
public struct ObjectGraphError: Error, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public var description: String { String(rawValue) }
    }

    /// What kind of failure, as one of the codes in `ErrorCodes.swift`.
    public var code: Code
    /// What failed and why, in words that name the store, entity and row when known.
    public var message: String
    /// The objects involved (the conflicting objects of a merge conflict). They belong to
    /// their context's queue, like every managed object: read them there.
    public nonisolated(unsafe) var objects: [ManagedObject]
    /// The error behind this one, if any (SQLite's, a transformer's, the file system's).
    public var underlyingError: Error?
    /// Why the store could not be read or written, when SQLite refused or the file is missing.
    public var storeFailure: StoreFailure?
    /// For a damaged row (``Code/damagedRow``): what is wrong with it, without the store, entity
    /// and row ``message`` names, so a report that lists problems by place names it once.
    public var rowProblem: String?

    public init(code: Code, message: String, objects: [ManagedObject] = [], underlyingError: Error? = nil) {
        self.code = code
        self.message = message
        self.objects = objects
        self.underlyingError = underlyingError
        storeFailure = (underlyingError as? DatabaseError).map { StoreFailure($0.resultCode) }
    }

    init(code: Code, message: String, storeFailure: StoreFailure) {
        self.init(code: code, message: message)
        self.storeFailure = storeFailure
    }

    public var description: String { "\(message) (code \(code.rawValue))" }
}

// MARK: - Store failures

extension ObjectGraphError {
    /// Why SQLite could not read or write a store, named as GRDB's `ResultCode` names SQLite's
    /// result codes; the number itself stays inside ObjectGraph.
    ///
    /// For example:
    ///
    /// ```swift
    /// switch (error as? ObjectGraphError)?.storeFailure {
    /// case .busy?: print("another process holds the store; try again")
    /// case .full?: print("the disk is full")
    /// default: throw error
    /// }
    /// ```
    ///
    /// See <https://www.sqlite.org/rescode.html> for the result codes behind each kind.
    public struct StoreFailure: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case busy, full, readOnly = "read-only", permission, corrupt, missing, cannotOpen = "cannot open"
            case constraint, ioError = "I/O error", other
        }

        private let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// Another connection held the store's lock beyond the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`).
        public static let busy = Self(.busy)
        /// The disk is full (`SQLITE_FULL`).
        public static let full = Self(.full)
        /// The store or its directory cannot be written (`SQLITE_READONLY`).
        public static let readOnly = Self(.readOnly)
        /// The file system or an authorizer refused access (`SQLITE_PERM`, `SQLITE_AUTH`).
        public static let permission = Self(.permission)
        /// The file is damaged or is not an SQLite database (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
        public static let corrupt = Self(.corrupt)
        /// The store's file does not exist and the store was asked not to create it.
        public static let missing = Self(.missing)
        /// SQLite cannot open the file (`SQLITE_CANTOPEN`).
        public static let cannotOpen = Self(.cannotOpen)
        /// A constraint of the schema refused a write (`SQLITE_CONSTRAINT`).
        public static let constraint = Self(.constraint)
        /// The operating system reported an I/O error (`SQLITE_IOERR`).
        public static let ioError = Self(.ioError)
        /// Any other SQLite failure; the error's message says which.
        public static let other = Self(.other)

        /// Names SQLite's primary result code.
        init(_ resultCode: ResultCode) {
            switch resultCode.primaryResultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED: kind = .busy
            case .SQLITE_FULL: kind = .full
            case .SQLITE_READONLY: kind = .readOnly
            case .SQLITE_PERM, .SQLITE_AUTH: kind = .permission
            case .SQLITE_CORRUPT, .SQLITE_NOTADB: kind = .corrupt
            case .SQLITE_CANTOPEN: kind = .cannotOpen
            case .SQLITE_CONSTRAINT: kind = .constraint
            case .SQLITE_IOERR: kind = .ioError
            default: kind = .other
            }
        }

        public var description: String { kind.rawValue }
    }
}

// MARK: - Making errors

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

    /// A store the options say must exist, whose file does not.
    static func missingStore(_ path: String) -> ObjectGraphError {
        ObjectGraphError(code: .storeOpenFailed, message: "store '\(path)' does not exist", storeFailure: .missing)
    }
}

/// Wraps SQLite failures into ``ObjectGraphError``; GRDB leaves statement arguments out
/// of its descriptions, so no value reaches the message.
func wrapStoreErrors<T>(_ code: ObjectGraphError.Code, _ what: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as DatabaseError {
        throw ObjectGraphError(
            code: code, message: "\(what): \(error.message ?? "SQLite error \(error.resultCode.rawValue)")",
            underlyingError: error)
    }
}
