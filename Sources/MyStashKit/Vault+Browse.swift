import Foundation
import ObjectGraph

extension Vault {
    // MARK: - Locking

    /// Forgets the data key and every decrypted value the context holds; the vault stays
    /// open and can be unlocked again. Drop fetched results controllers first: the context's
    /// reset would make them fetch again, without a key.
    public func lock() {
        context.reset()
        transformer.dataKey = nil
    }

    // MARK: - What a browser lists

    /// A controller over every password entry in sections by category (the section key
    /// path), by name within each; entries without a category form the section "".
    /// Only names, user IDs and URLs are decrypted for it.
    public func entriesController() throws -> FetchedResultsController<PasswordEntry> {
        // Registers every category at once, so entries' categories resolve without a query each.
        _ = try Self.wrapErrors { try context.fetch(FetchRequest<Category>()) }
        var request = FetchRequest<PasswordEntry>(sortDescriptors: [
            FetchSortDescriptor(key: "category.name", caseInsensitive: true),
            FetchSortDescriptor(key: "name", caseInsensitive: true),
        ])
        request.propertiesToFetch = ["name", "userId", "url"]
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                        sectionNameKeyPath: "category.name")
    }

    /// A controller over every note with its title and text, the most recently changed first.
    public func notesController() -> FetchedResultsController<Note> {
        var request = FetchRequest<Note>(sortDescriptors: [FetchSortDescriptor(key: "updatedAt", ascending: false)])
        request.propertiesToFetch = ["title", "text"]
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context)
    }

    /// Reads what other processes committed since the last look into the context, which
    /// tells the controllers on it; true when there was something.
    @discardableResult
    public func followExternalChanges() throws -> Bool {
        try Self.wrapErrors { try context.mergeExternalChanges() }
    }
}
