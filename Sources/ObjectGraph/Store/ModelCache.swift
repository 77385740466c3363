import Foundation
import GRDB

/// The model Apple's Core Data keeps inside a SQLite store: table `Z_MODELCACHE`, one row whose
/// `Z_CONTENT` is the store's `NSManagedObjectModel` as a keyed archive compressed with raw
/// deflate. It lets a store be read when its model version is no longer in the app's bundle.
enum ModelCache {
    /// Name of the model read from a cache, when the archive records no version identifier.
    static let identifier = "Z_MODELCACHE"
    /// More than any model needs; what inflates beyond it is refused as damage.
    static let inflatedLimit = 64 * 1024 * 1024

    /// The model in the store's cache; nil when the store has none.
    ///
    /// - throws: ``ModelError`` when the cache is there but cannot be read.
    static func model(_ db: Database, schema: String, storeName: String) throws -> ManagedObjectModel? {
        let quoted = "\"\(schema)\""
        let hasTable =
            try Bool.fetchOne(
                db, sql: "SELECT COUNT(*) > 0 FROM \(quoted).sqlite_master WHERE type = 'table' AND name = ?",
                arguments: [identifier]) ?? false
        guard hasTable else { return nil }
        let file = "\(storeName) (\(identifier))"
        let rows = try DatabaseValue.fetchAll(db, sql: "SELECT Z_CONTENT FROM \(quoted).Z_MODELCACHE")
        guard let cell = rows.first else { return nil }
        guard rows.count == 1, case .blob(let compressed) = cell.storage else {
            throw ModelError(file: file, reason: "the model cache is not one row holding bytes")
        }
        let archive: Data
        do {
            archive = try RawDeflate.inflate(compressed, limit: inflatedLimit)
        } catch {
            throw ModelError(file: file, reason: "the model cache cannot be inflated: \(error)")
        }
        return try ManagedObjectModel(keyedArchive: archive, fallbackIdentifier: identifier, file: file)
    }
}

extension ModelCache {
    /// After a migration to `model`: the cache holds the compiled model of that version when
    /// it is known, and is dropped otherwise, so that it never describes an older version.
    static func replace(_ db: Database, schema: String, with model: ManagedObjectModel) throws {
        let table = "\"\(schema)\".\(identifier)"
        let hasTable =
            try Bool.fetchOne(
                db, sql: "SELECT COUNT(*) > 0 FROM \"\(schema)\".sqlite_master WHERE type = 'table' AND name = ?",
                arguments: [identifier]) ?? false
        guard hasTable else { return }
        guard let archive = model.compiledArchive, let compressed = try? RawDeflate.deflate(archive) else {
            try db.execute(sql: "DROP TABLE \(table)")
            return
        }
        try db.execute(sql: "DELETE FROM \(table)")
        try db.execute(sql: "INSERT INTO \(table) (Z_CONTENT) VALUES (?)", arguments: [compressed])
    }
}

extension ManagedObjectModel {
    /// The model Apple's Core Data keeps in the store at `url` (its `Z_MODELCACHE` table): the
    /// model the store was last written with, to read a store whose model version is no longer
    /// at hand. Nothing is written.
    ///
    /// - returns: nil when the store keeps no model (ObjectGraph's own stores do not).
    /// - throws: ``ModelError`` when the cache is damaged; ``ObjectGraphError`` 134080 when the
    ///   file is not a SQLite database.
    public static func cachedModel(ofStoreAt url: URL) throws -> ManagedObjectModel? {
        try StoreMetadataReader.reading(url) { db in
            try ModelCache.model(db, schema: "main", storeName: url.lastPathComponent)
        }
    }
}

extension ModelVersions {
    /// The model the store at `url` keeps (`Z_MODELCACHE`), when it fits what the store holds:
    /// the way to read a store made with a version these versions lack. Nothing is written.
    ///
    /// - returns: nil when the store keeps no model, or one that does not fit its tables.
    /// - throws: ``ModelError`` when the cache is damaged.
    public func cachedModel(fittingStoreAt url: URL, configuration: String? = nil) throws -> ManagedObjectModel? {
        try StoreMetadataReader.reading(url) { db in
            try cachedModel(db, schema: "main", storeName: url.lastPathComponent, configuration: configuration)
        }
    }

    func cachedModel(
        _ db: Database, schema: String, storeName: String, configuration: String?
    ) throws -> ManagedObjectModel? {
        guard let cached = try ModelCache.model(db, schema: schema, storeName: storeName) else { return nil }
        let shape = try StoreShape(db, schema: schema)
        // The cache holds the whole model; a store of one configuration lists only its entities.
        let listed = Set(shape.entities.keys)
        let members =
            configuration == nil ? cached.entities : cached.entities.filter { listed.contains($0.name) }
        return shape.differences(from: cached, entities: members).isEmpty ? cached : nil
    }
}
