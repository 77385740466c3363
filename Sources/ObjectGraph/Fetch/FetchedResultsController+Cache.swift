import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GRDB

/// A fetched results controller's persisted sections: valid while the request and the
/// stores' contents are those it was made from.
struct SectionCache: Codable, Equatable {
    struct Key: Codable, Equatable {
        /// Everything about the request that decides the sections.
        var request: String
        /// Per store: its identity, and per table its row count, the sum of `Z_OPT` (grows on
        /// every saved update) and the largest primary key handed out.
        var contents: [String]

        init?<T>(request: FetchRequest<T>, sectionNameKeyPath: String?, context: ManagedObjectContext) throws {
            // Unsaved changes are part of the results but not of the stores.
            guard !context.hasChanges else { return nil }
            self.request = [
                request.entityName, request.predicate?.canonicalDescription ?? "",
                request.sortDescriptors.map { "\($0.key) \($0.ascending) \($0.caseInsensitive)" }
                    .joined(separator: ","),
                sectionNameKeyPath ?? "",
                "\(request.includesSubentities) \(request.fetchLimit) \(request.fetchOffset)",
            ].joined(separator: "|")
            self.contents = try context.coordinator.contentFingerprint()
        }
    }

    var key: Key
    var names: [String]
    var indexTitles: [String?]
    var counts: [Int]

    static func url(name: String, in directory: URL) -> URL {
        let safe = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "cache"
        return directory.appendingPathComponent(safe + ".json")
    }

    /// Writes the cache owner-only, replacing the old file by rename.
    static func write(_ cache: SectionCache, to url: URL) throws {
        let directory = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let data = try JSONEncoder().encode(cache)
        let temporary = directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        let descriptor = open(temporary.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission) }
        let written = data.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        Glibc.close(descriptor)
        guard written == data.count, rename(temporary.path, url.path) == 0 else {
            unlink(temporary.path)
            throw CocoaError(.fileWriteUnknown)
        }
    }
}

extension PersistentStoreCoordinator {
    /// A summary of the stores' rows that changes whenever a save through ObjectGraph
    /// inserts, updates or deletes one, in this process or another.
    func contentFingerprint() throws -> [String] {
        try wrapStoreErrors(.objectNotFound, "cannot read the stores' contents") {
            try read { db in
                try persistentStores.map { store in
                    var parts = [store.identifier]
                    for root in store.rootEntities {
                        let sql = "SELECT COUNT(*), TOTAL(Z_OPT), MAX(Z_PK) FROM \(store.qualified(root.tableName))"
                        let row = try Row.fetchOne(db, sql: sql)
                        let count: Int64 = row?[0] ?? 0, versions: Double = row?[1] ?? 0, largest: Int64 = row?[2] ?? 0
                        parts.append("\(root.tableName) \(count) \(versions) \(largest)")
                    }
                    let keys = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_MAX FROM \(store.qualified("Z_PRIMARYKEY"))"
                                                    + " ORDER BY Z_ENT")
                    // Compared, never decoded: a damaged value must move the fingerprint, not trap.
                    let pairs = keys.map { "\($0[0] as DatabaseValue):\($0[1] as DatabaseValue)" }
                    parts.append(pairs.joined(separator: ","))
                    return parts.joined(separator: ";")
                }
            }
        }
    }
}

extension Predicate {
    /// The parsed predicate with its arguments in place: two predicates with the same
    /// description select the same objects.
    var canonicalDescription: String { Self.describe(root) }

    private static func describe(_ node: Node) -> String {
        switch node {
        case .constant(let value): return value ? "TRUE" : "FALSE"
        case .and(let parts): return "(" + parts.map(describe).joined(separator: " AND ") + ")"
        case .or(let parts): return "(" + parts.map(describe).joined(separator: " OR ") + ")"
        case .not(let inner): return "NOT " + describe(inner)
        case .comparison(let comparison):
            let op = "\(comparison.op.rawValue)[\(comparison.options.rawValue)]"
            return "\(comparison.modifier) \(describe(comparison.left)) \(op) \(describe(comparison.right))"
        }
    }

    private static func describe(_ expression: Expression) -> String {
        switch expression {
        case .keyPath(let keys): return keys.joined(separator: ".")
        case .list(let items): return "{" + items.map(describe).joined(separator: ",") + "}"
        case .subqueryCount(let collection, let predicate):
            return "SUBQUERY(\(collection.joined(separator: ".")), \(describe(predicate))).@count"
        case .constant(let value):
            switch value {
            case nil: return "nil"
            case let object as ManagedObject: return object.objectID.description
            case let value?: return "\(type(of: value)):\(String(reflecting: value))"
            }
        }
    }
}
