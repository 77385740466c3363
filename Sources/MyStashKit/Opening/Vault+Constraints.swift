import Foundation
import ObjectGraph

extension Vault {
    /// Gives the vault its integrity record if it has none, and makes the store refuse
    /// duplicate category names (ignoring case) from any writer,
    /// mystash or not: a unique index, added to older vaults on their first write. A vault
    /// that already holds duplicates gets none until they are renamed; `check` lists them.
    func ensureStoreConstraints() throws {
        guard !storeConstraintsEnsured else { return }
        try ensureIntegrityRecord()
        _ = try Self.wrapErrors {
            try coordinator.ensureUniqueIndex(
                on: Category.entityName, attribute: Category.Key.name.rawValue, caseInsensitive: true)
        }
        storeConstraintsEnsured = true
    }

    /// Categories whose names differ only in case, as check reports them.
    func duplicateCategoryNames() throws -> [CheckProblem] {
        let categories = try Self.wrapErrors { try context.fetch(FetchRequest<Category>()) }
        let groups = Dictionary(grouping: categories) { $0.name.folding(options: [.caseInsensitive], locale: nil) }
        return groups.values.filter { $0.count > 1 }.flatMap { group in
            let sorted = group.sorted { $0.id < $1.id }
            return sorted.dropFirst().map { category in
                CheckProblem(
                    store: Self.passwordsFileName, entity: Category.entityName, primaryKey: category.id,
                    message:
                        "its name '\(category.name)' is also the name of Category row \(sorted[0].id) (ignoring case)")
            }
        }.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
    }
}
