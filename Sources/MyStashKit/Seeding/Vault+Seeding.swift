import Foundation
import ObjectGraph

/// One versioned seed list of `Config/Seeds/`.
public struct SeedStatus: Codable, Equatable {
    public var list: String
    /// The version the vault has loaded.
    public var loaded: Int
    /// The newest version this build of mystash carries.
    public var available: Int
}

extension Vault {
    /// Seed lists: `Config/Seeds/<list>s.csv` with rows `version,name`.
    static var seedCategories: [(version: Int, name: String)] {
        let text = String(decoding: Resources.file("Seeds/categories.csv") ?? Data(), as: UTF8.self)
        return CSV.parse(text).dropFirst().compactMap { row in
            guard row.count >= 2, let version = Int(row[0].trimmingCharacters(in: .whitespaces)) else { return nil }
            return (version, row[1].trimmingCharacters(in: .whitespaces))
        }
    }

    static let categoryListName = "category"

    private func categoryList() throws -> SeedList? {
        try context.fetch(FetchRequest<SeedList>(
            predicate: try Predicate(format: "%K == %@", SeedList.Key.name.rawValue, Self.categoryListName))).first
    }

    /// Inserts (unsaved) the seed rows newer than the loaded version, and records the new
    /// version in the same change: one save makes both durable, or neither.
    func insertMissingSeeds() throws {
        let rows = Self.seedCategories
        let available = rows.map(\.version).max() ?? 0
        let list = try categoryList() ?? {
            let list = context.insert(SeedList.self)
            list.name = Self.categoryListName
            return list
        }()
        guard list.version < available else { return }
        var existing = Set(try context.fetch(FetchRequest<Category>()).map { $0.name.lowercased() })
        for row in rows where row.version > list.version && !existing.contains(row.name.lowercased()) {
            let category = context.insert(Category.self)
            category.name = row.name
            // The same on every machine, so seeded categories meet as one when vaults sync.
            category.syncIdentity = Self.seedIdentity(of: row.name)
            existing.insert(row.name.lowercased())
        }
        list.version = available
    }

    /// Loads newer seed rows, retrying when another process seeds at the same moment (its
    /// save wins; ours then finds nothing left to do).
    func seed() throws {
        for attempt in 1...5 {
            do {
                try ensureStoreConstraints()
                try insertMissingSeeds()
                try context.save()
                return
            } catch where attempt < 5
                && ((error as? ObjectGraphError)?.code == .mergeConflict || error is ValidationError) {
                // Another process seeded first; its categories are now visible to the next attempt.
                context.reset()
            } catch {
                context.rollback()
                throw VaultError.wrapping(error)
            }
        }
    }

    public func seedStatus() throws -> [SeedStatus] {
        let loaded = try Self.wrapErrors { try categoryList()?.version ?? 0 }
        return [
            SeedStatus(
                list: Self.categoryListName, loaded: loaded, available: Self.seedCategories.map(\.version).max() ?? 0)
        ]
    }
}
