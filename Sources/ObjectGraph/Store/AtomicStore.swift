import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One object of an atomic store as its file holds it, as `NSAtomicStoreCacheNode`.
///
/// `propertyCache` holds attribute values by name in their Swift types (Transformable
/// values stay encoded, as `Data`, exactly as a SQLite store keeps them), a to-one
/// destination as its node, a to-many one as `[AtomicStoreCacheNode]`. Nil values are absent.
public final class AtomicStoreCacheNode {
    /// The object this node stands for.
    public let objectID: ObjectID
    /// The object's values by property name (see above).
    public var propertyCache: [String: Any]

    /// A node for `objectID` with the given values.
    public init(objectID: ObjectID, propertyCache: [String: Any] = [:]) {
        self.objectID = objectID
        self.propertyCache = propertyCache
    }
}

/// A store kept in memory and read and written as one whole file, as `NSAtomicStore`.
///
/// Subclass it for a file format of your own: ``load()`` reads the file, sets ``metadata``
/// and hands over every object with ``addCacheNodes(_:)``; ``save()`` writes ``metadata``
/// and ``cacheNodes()`` back, whole, with ``writeAtomically(_:to:)``. Name each object with a
/// reference object of your choice (a number, a string): ``objectID(for:referenceObject:)``
/// turns it into an ``ObjectID`` and ``referenceObject(for:)`` back. Register the class
/// under a store type, then add stores of that type to a coordinator:
///
/// ```swift
/// PersistentStoreCoordinator.registerStoreClass(CustomStore.self, forStoreType: StoreType(rawValue: "Custom"))
/// try coordinator.addPersistentStore(type: StoreType(rawValue: "Custom"), at: url)
/// ```
///
/// The coordinator loads the file when the store is added and calls ``save()`` inside every
/// transaction that changes the store, before it commits: when `save()` throws, nothing is
/// saved. Integer reference objects (the default) are also the rows' primary keys, so they
/// stay the same from one load to the next; a value transformer that binds values to their
/// place (an encrypting one) needs them. A save spanning an atomic store and another store
/// is atomic per file only.
open class AtomicStore {
    /// The store's file.
    public let url: URL
    /// The model whose entities the file holds.
    public let model: ManagedObjectModel
    /// The configuration naming those entities (nil: all).
    public let configurationName: String?
    /// The entities this store holds.
    public let entities: [EntityDescription]
    /// The store's metadata (``StoreMetadataKey``s and any the application set).
    public var metadata: [String: Any] = [:]
    /// Permissions of the files ``writeAtomically(_:to:)`` creates.
    public var fileMode: mode_t = 0o600

    private var nodes: [AtomicStoreCacheNode] = []
    /// Reference objects are unique per entity; keys per root entity (one table).
    private var keysByReference: [String: [AnyHashable: Int64]] = [:]
    private var referencesByKey: [Int: [Int64: AnyHashable]] = [:]
    private var highestKey: [Int: Int64] = [:]

    /// A store for the file at `url`; the coordinator makes these and then calls ``load()``.
    public required init(url: URL, model: ManagedObjectModel, configurationName: String?) {
        self.url = url
        self.model = model
        self.configurationName = configurationName
        self.entities = model.entities(forConfiguration: configurationName)
    }

    // MARK: - What a subclass provides

    /// Reads the whole file: sets ``metadata`` and calls ``addCacheNodes(_:)``.
    ///
    /// - throws: an error naming what is wrong when the file is not a store of this kind.
    open func load() throws {
        throw ObjectGraphError(code: .storeOpenFailed, message: "\(type(of: self)) does not implement load()")
    }

    /// Writes ``metadata`` and every node of ``cacheNodes()`` to the file, whole and atomically.
    open func save() throws {
        throw ObjectGraphError(code: .saveFailed, message: "\(type(of: self)) does not implement save()")
    }

    /// The reference object for a row saved for the first time; by default its primary key.
    open func newReferenceObject(for entity: EntityDescription, primaryKey: Int64) -> AnyHashable {
        AnyHashable(primaryKey)
    }

    // MARK: - Nodes and references

    /// Every object of the store, as last loaded or saved.
    public func cacheNodes() -> [AtomicStoreCacheNode] { nodes }

    /// Adds objects read from the file (during ``load()``).
    public func addCacheNodes(_ newNodes: [AtomicStoreCacheNode]) { nodes += newNodes }

    func replaceCacheNodes(_ newNodes: [AtomicStoreCacheNode]) { nodes = newNodes }

    /// The entity of this store named `name`, for reading a file.
    public func entity(named name: String) -> EntityDescription? { entities.first { $0.name == name } }

    /// The ID of the object of `entity` that the file names `referenceObject`; the same
    /// reference always gives the same ID. A positive integer reference is the primary key.
    public func objectID(for entity: EntityDescription, referenceObject: AnyHashable) -> ObjectID {
        let root = entity.rootEntity.entityNumber
        let key: Int64
        if let known = keysByReference[entity.name]?[referenceObject] {
            key = known
        } else {
            let taken = referencesByKey[root] ?? [:]
            if let number = Self.integer(referenceObject), number > 0, taken[number] == nil {
                key = number
            } else {
                key = freeKey(root: root, taken: taken)
            }
            keysByReference[entity.name, default: [:]][referenceObject] = key
            referencesByKey[root, default: [:]][key] = referenceObject
            highestKey[root] = max(highestKey[root] ?? 0, key)
        }
        return ObjectID(
            entityName: entity.name, storeIdentifier: metadata[StoreMetadataKey.storeUUID] as? String,
            primaryKey: key, temporaryNumber: nil)
    }

    /// The next key above every key taken, or (when a file used the largest) the first free one.
    private func freeKey(root: Int, taken: [Int64: AnyHashable]) -> Int64 {
        let (next, overflow) = (highestKey[root] ?? 0).addingReportingOverflow(1)
        if !overflow { return next }
        var candidate: Int64 = 1
        while taken[candidate] != nil { candidate += 1 }
        return candidate
    }

    /// The reference object the file uses for an object ID of this store.
    public func referenceObject(for objectID: ObjectID) -> AnyHashable? {
        guard let key = objectID.primaryKey, let entity = model.entity(named: objectID.entityName) else { return nil }
        return referencesByKey[entity.rootEntity.entityNumber]?[key]
    }

    /// The reference object of a row, made with ``newReferenceObject(for:primaryKey:)`` the first time.
    func referenceObject(for entity: EntityDescription, primaryKey: Int64) -> AnyHashable {
        let root = entity.rootEntity.entityNumber
        if let known = referencesByKey[root]?[primaryKey] { return known }
        let reference = newReferenceObject(for: entity, primaryKey: primaryKey)
        keysByReference[entity.name, default: [:]][reference] = primaryKey
        referencesByKey[root, default: [:]][primaryKey] = reference
        highestKey[root] = max(highestKey[root] ?? 0, primaryKey)
        return reference
    }

    private static func integer(_ reference: AnyHashable) -> Int64? {
        switch reference.base {
        case let number as Int64: return number
        case let number as Int: return Int64(number)
        default: return nil
        }
    }

    // MARK: - Files

    /// Replaces the file at `url` with `data` so that a crash leaves the old file or the
    /// new one, never a mix: a new file beside it is written, flushed, then renamed over it.
    public func writeAtomically(_ data: Data, to url: URL) throws {
        let directory = url.deletingLastPathComponent().path
        let temporary = "\(directory)/.\(url.lastPathComponent).\(UUID().uuidString).tmp"
        func failure(_ what: String) -> ObjectGraphError {
            ObjectGraphError(
                code: .saveFailed,
                message: "cannot \(what) '\(url.lastPathComponent)': \(String(cString: strerror(errno)))")
        }
        let descriptor = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, fileMode)
        guard descriptor >= 0 else { throw failure("create a new copy of") }
        var written = 0
        let ok = data.withUnsafeBytes { buffer -> Bool in
            while written < buffer.count {
                let result = Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                written += result
            }
            return fsync(descriptor) == 0
        }
        let error = failure("write")
        Glibc.close(descriptor)
        guard ok else {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, url.path) == 0 else {
            let error = failure("replace")
            unlink(temporary)
            throw error
        }
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            _ = fsync(directoryDescriptor)
            Glibc.close(directoryDescriptor)
        }
    }

    /// An error for a file that is not a store of this kind, naming the file and the problem.
    public func damaged(_ problem: String) -> ObjectGraphError {
        ObjectGraphError(
            code: .storeOpenFailed,
            message: "'\(url.lastPathComponent)' is not a readable \(type(of: self)) file: \(problem)")
    }
}
