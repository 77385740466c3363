import Foundation

/// The kinds of persistent store: SQLite, in-memory, and atomic stores (binary, XML, or an
/// ``AtomicStore`` subclass registered under its own name).
public struct StoreType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A SQLite file laid out as Core Data lays out its SQLite stores.
    public static let sqlite = StoreType(rawValue: "SQLite")
    /// A store that lives in memory only and vanishes with its coordinator.
    public static let inMemory = StoreType(rawValue: "InMemory")
    /// An atomic store in one binary property-list file (``BinaryStore``).
    public static let binary = StoreType(rawValue: "Binary")
    /// An atomic store in one XML file (``XMLStore``).
    public static let xml = StoreType(rawValue: "XML")
    public var description: String { rawValue }
}

/// One persistent store of a coordinator: a SQLite file or memory, holding the entities
/// of one configuration, as `NSPersistentStore`.
public final class PersistentStore {
    /// SQLite, XML, binary or in memory.
    public let type: StoreType
    /// The store's file; nil for an in-memory store.
    public let url: URL?
    /// The model configuration whose entities the store holds; nil for all.
    public let configurationName: String?
    /// The store's identity (`Z_METADATA.Z_UUID`, `NSStoreUUID`).
    public internal(set) var identifier: String
    /// The store's metadata: Core Data's keys plus any the application set.
    public internal(set) var metadata: [String: Any]
    /// The entities whose rows this store holds.
    public let entities: [EntityDescription]
    /// The schema name of this store on the coordinator's connection (`main` or an attached alias).
    let schemaName: String
    var metadataNeedsSaving = false
    /// The file format of an atomic store; its rows live in an in-memory schema meanwhile.
    var atomicStore: AtomicStore?
    /// The files the coordinator's connection opened for this store (see ``StoreReader``).
    var openedFiles: Set<OpenFile> = []
    /// Whether each save records a transaction in the store's history (``StoreOptions/tracksPersistentHistory``).
    public private(set) var tracksHistory = false
    /// Whether the store has its history tables (it was added with history tracking once).
    var hasHistoryTables = false

    /// Stops or resumes recording saves in the history of a store added with
    /// ``StoreOptions/tracksPersistentHistory`` (its tables stay): an application that learns
    /// only once the store is open whether anything reads the history. Saves made while it is
    /// off are not in the history.
    ///
    /// - precondition: the store was added with history tracking, when turning it on.
    public func setTracksHistory(_ on: Bool) {
        precondition(!on || hasHistoryTables, "\(displayName) was added without persistent history")
        tracksHistory = on
    }

    /// Turns history on as the store is added with it.
    func historyTablesReady() {
        hasHistoryTables = true
        tracksHistory = true
    }

    init(type: StoreType, url: URL?, configurationName: String?, entities: [EntityDescription], schemaName: String) {
        self.type = type
        self.url = url
        self.configurationName = configurationName
        self.entities = entities
        self.schemaName = schemaName
        self.identifier = ""
        self.metadata = [:]
    }

    /// The store's file name, as messages name it.
    var displayName: String { url?.lastPathComponent ?? "in-memory store" }

    func qualified(_ table: String) -> String { Self.qualified(table, schemaName: schemaName) }

    static func qualified(_ table: String, schemaName: String) -> String { "\"\(schemaName)\".\(table)" }

    /// The root entities whose tables live in this store.
    var rootEntities: [EntityDescription] {
        var seen: Set<String> = []
        return entities.map(\.rootEntity).filter { seen.insert($0.name).inserted }
    }
}

/// Options for ``PersistentStoreCoordinator/addPersistentStore(type:configuration:at:options:)``.
public struct StoreOptions: Sendable {
    /// Permissions of a store file the coordinator creates (owner-only by default).
    public var fileMode: mode_t = 0o600
    /// Refuse to create a store that does not exist yet.
    public var mustExist = false
    /// Opens the store even when it does not fit the model, as Core Data's
    /// `NSIgnorePersistentStoreVersioningOption`: no version or structural check is made, and
    /// a missing table or column fails later, when an object is read or saved.
    public var ignoresVersioning = false
    /// Migrates a store made with an older version of the model in place, as Core Data's
    /// `NSMigratePersistentStoresAutomaticallyOption` (see ``PersistentStoreCoordinator/modelVersions``).
    public var migratesAutomatically = false
    /// Infers the migration from the two versions, as `NSInferMappingModelAutomaticallyOption`;
    /// needed with ``migratesAutomatically``.
    public var infersMappingModel = false
    /// Records every save as a transaction with its changes, as Core Data's
    /// `NSPersistentHistoryTrackingKey` (see ``ManagedObjectContext/fetchHistory(after:)``).
    /// SQLite and in-memory stores only.
    public var tracksPersistentHistory = false
    /// Posts ``PersistentStoreCoordinator/remoteChangeNotification`` when another connection
    /// commits to the store, as `NSPersistentStoreRemoteChangeNotificationPostOptionKey`; the
    /// store's file is watched, so a commit is announced within ``remoteChangePollInterval``.
    public var postsRemoteChangeNotifications = false
    /// How often the store is checked for other connections' commits (seconds).
    public var remoteChangePollInterval: TimeInterval = 0.2
    public init() {}
}

// Core Data's metadata keys.
public enum StoreMetadataKey {
    public static let storeType = "NSStoreType"
    public static let storeUUID = "NSStoreUUID"
    public static let versionHashes = "NSStoreModelVersionHashes"
    public static let versionIdentifiers = "NSStoreModelVersionIdentifiers"
    public static let versionHashesVersion = "NSStoreModelVersionHashesVersion"
    /// Apple's summaries of ``versionHashes``, dropped when the hashes change (never computed here).
    public static let versionHashDigests = ["NSStoreModelVersionHashesDigest", "NSStoreModelVersionChecksumKey"]
    /// Our addition: per entity, per property, the persisted shape, so an incompatible
    /// store can be explained property by property.
    public static let entityShapes = "ObjectGraphEntityShapes"
}
