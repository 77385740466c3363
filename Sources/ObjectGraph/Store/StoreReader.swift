import Foundation
import GRDB

/// A second, read-only connection to a coordinator's SQLite stores, for reading on another
/// thread while the coordinator's own connection is busy: checking the stores, say, while a
/// context fetches from them. It sees what is committed, as another process would.
///
/// For example:
///
/// ```swift
/// if let reader = try coordinator.makeReader() {
///     DispatchQueue.global().async {
///         let count = try? reader.performRead { try $0.rows("SELECT COUNT(*) FROM ...") }
///     }
/// }
/// ```
public final class StoreReader: Sendable {
    private let connection: DatabaseQueue
    private let schemaNames: [String: String]

    init(connection: DatabaseQueue, schemaNames: [String: String]) {
        self.connection = connection
        self.schemaNames = schemaNames
    }

    /// Runs `body` in a read transaction of this connection.
    ///
    /// - throws: ``ObjectGraphError`` when the stores cannot be read (busy, damaged, or a hot
    ///   journal left by a crashed writer, which a read-only connection cannot roll back).
    public func performRead<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        try wrapStoreErrors(.saveFailed, "cannot read") {
            try connection.read { db in try body(StoreTransaction(db: db, schemaNames: schemaNames)) }
        }
    }
}

extension PersistentStoreCoordinator {
    /// Each store's schema name on the coordinator's connection, by store identifier.
    var schemaNamesByStoreIdentifier: [String: String] {
        Dictionary(persistentStores.map { ($0.identifier, $0.schemaName) }) { first, _ in first }
    }

    /// Opens a ``StoreReader`` on this coordinator's stores, under the same schema names; nil
    /// when a store is not a SQLite file (in-memory and atomic stores live in this connection only).
    public func makeReader() throws -> StoreReader? {
        guard !persistentStores.isEmpty, persistentStores.allSatisfy({ $0.type == .sqlite && $0.url != nil }),
              let main = persistentStores.first(where: { $0.schemaName == "main" }), let mainURL = main.url
        else { return nil }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA temp_store = MEMORY") }
        return try wrapStoreErrors(.storeOpenFailed, "cannot open a reader on '\(main.displayName)'") {
            let connection = try DatabaseQueue(path: mainURL.path, configuration: configuration)
            try connection.inDatabase { db in
                for store in persistentStores where store !== main {
                    guard let url = store.url else { continue }
                    try db.execute(sql: "ATTACH DATABASE ? AS \"\(store.schemaName)\"", arguments: [url.path])
                }
            }
            return StoreReader(connection: connection, schemaNames: schemaNamesByStoreIdentifier)
        }
    }
}
