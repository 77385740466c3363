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
    private let lockOrder: [String]

    init(connection: DatabaseQueue, schemaNames: [String: String], lockOrder: [String]) {
        self.connection = connection
        self.schemaNames = schemaNames
        self.lockOrder = lockOrder
    }

    /// Runs `body` in a read transaction of this connection.
    ///
    /// - throws: ``ObjectGraphError`` when the stores cannot be read (busy, damaged, or a hot
    ///   journal left by a crashed writer, which a read-only connection cannot roll back).
    public func performRead<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        try wrapStoreErrors(.saveFailed, "cannot read") {
            try connection.read { db in
                try db.takeReadLocks(lockOrder)
                return try body(StoreTransaction(db: db, schemaNames: schemaNames))
            }
        }
    }
}

extension PersistentStoreCoordinator {
    /// Each store's schema name on the coordinator's connection, by store identifier.
    var schemaNamesByStoreIdentifier: [String: String] {
        Dictionary(persistentStores.map { ($0.identifier, $0.schemaName) }) { first, _ in first }
    }

    /// Opens a ``StoreReader`` on this coordinator's stores, under the same schema names; nil
    /// when a store is not a SQLite file (in-memory and atomic stores live in this connection
    /// only), or when a store's path no longer names the file this coordinator has open.
    public func makeReader() throws -> StoreReader? {
        guard !persistentStores.isEmpty, persistentStores.allSatisfy({ $0.type == .sqlite && $0.url != nil }),
              let main = persistentStores.first(where: { $0.schemaName == "main" }), let mainURL = main.url
        else { return nil }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA temp_store = MEMORY") }
        // The reader opens the stores by path, and a path may name another file by now (a store
        // swapped since the coordinator opened it): it must read the very files this
        // coordinator opened, so each file it opens must be one of those.
        let storeFiles = persistentStores.reduce(into: Set<OpenFile>()) { $0.formUnion($1.openedFiles) }
        let openBefore = OpenFile.all()
        let reader = try wrapStoreErrors(.storeOpenFailed, "cannot open a reader on '\(main.displayName)'") {
            let connection = try DatabaseQueue(path: mainURL.path, configuration: configuration)
            try connection.inDatabase { db in
                for store in persistentStores where store !== main {
                    guard let url = store.url else { continue }
                    try db.execute(sql: "ATTACH DATABASE ? AS \"\(store.schemaName)\"", arguments: [url.path])
                }
                // SQLite opens a file when it first reads it.
                for store in persistentStores {
                    _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(store.qualified("sqlite_master"))")
                }
            }
            return StoreReader(connection: connection, schemaNames: schemaNamesByStoreIdentifier,
                               lockOrder: schemasInCommitOrder)
        }
        let opened = OpenFile.all().filter { openBefore[$0.key] == nil }.values
        guard opened.count >= persistentStores.count, opened.allSatisfy(storeFiles.contains) else { return nil }
        return reader
    }
}

/// A regular file this process has open, by device and inode: what a path named when it was
/// opened, whatever it names now.
struct OpenFile: Hashable {
    let device: UInt64
    let inode: UInt64

    /// Every regular file this process has open, by descriptor; none when `/proc` cannot be
    /// read, so that ``PersistentStoreCoordinator/makeReader()`` finds no match and gives no reader.
    static func all() -> [Int32: OpenFile] {
        // Read with readdir and fstat: this runs around every store's opening.
        guard let directory = opendir("/proc/self/fd") else { return [:] }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var files: [Int32: OpenFile] = [:]
        while let entry = readdir(directory) {
            // Read in place: a record may end before the 256 bytes `d_name` declares.
            let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            let name = String(
                cString: UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self))
            guard let descriptor = Int32(name), descriptor != own else { continue }
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            files[descriptor] = OpenFile(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        }
        return files
    }

    /// The files `body` opened and left open.
    static func opened(by body: () throws -> Void) rethrows -> Set<OpenFile> {
        let before = all()
        try body()
        return Set(all().filter { before[$0.key] == nil }.values)
    }
}

extension Database {
    /// Takes the shared lock of each schema now, in `order`. A save commits its stores in that
    /// order, taking each one's exclusive lock: a read taking its shared locks lazily could hold
    /// one store while waiting for another that a committing save holds, each waiting for the
    /// other until the busy timeout.
    func takeReadLocks(_ order: [String]) throws {
        guard order.count > 1 else { return }
        for schema in order {
            _ = try Int.fetchOne(cachedStatement(sql: "PRAGMA \"\(schema)\".schema_version"))
        }
    }
}
