import Foundation
import MyStashKit
import ObjectGraph

/// The two tabs' fetched results controllers, and which tabs they reported as changed:
/// by this process's saves and undo, or by another process's commits once followed.
final class BrowseResults: FetchedResultsControllerDelegate {
    private let vault: Vault
    private var entries: FetchedResultsController<PasswordEntry>?
    private var notes: FetchedResultsController<Note>?
    /// Tabs whose rows must be made again from their controller.
    private(set) var changedTabs: Set<Browser.Tab> = []

    init(vault: Vault) {
        self.vault = vault
    }

    var isFetched: Bool { entries != nil || notes != nil }

    /// Starts a tab's controller (fetching its objects) unless it runs already.
    func fetch(_ tab: Browser.Tab) throws {
        do {
            switch tab {
            case .notes where notes == nil:
                let controller = vault.notesController()
                controller.delegate = self
                try controller.performFetch()
                notes = controller
            case .passwords where entries == nil:
                let controller = try vault.entriesController()
                controller.delegate = self
                try controller.performFetch()
                entries = controller
            default:
                return
            }
        } catch {
            throw VaultError.wrapping(error)
        }
        changedTabs.insert(tab)
    }

    /// The rows of a tab in the controller's order and sections; notes in sections by day.
    func rows(_ tab: Browser.Tab) -> [BrowseRow] {
        changedTabs.remove(tab)
        switch tab {
        case .notes:
            let days = DaySections()
            return (notes?.fetchedObjects ?? []).map { note in
                BrowseRow(id: note.id, title: note.title, subtitle: days.time(note.updatedAt),
                          section: days.section(note.updatedAt), searchable: [note.title, note.text])
            }
        case .passwords:
            return (entries?.sections ?? []).flatMap { section in
                section.objects.compactMap { $0 as? PasswordEntry }.map { entry in
                    BrowseRow(id: entry.id, title: entry.name, subtitle: entry.userId ?? "",
                              section: section.name.isEmpty ? "No category" : section.name,
                              searchable: [entry.name, entry.userId, entry.url, section.name])
                }
            }
        }
    }

    /// Stops both controllers, so nothing follows the context while it is reset.
    func stop() {
        entries = nil
        notes = nil
        changedTabs = []
    }

    // MARK: - FetchedResultsControllerDelegate

    func controllerDidChangeContent(_ controller: any FetchedResultsControlling) {
        if controller === entries { changedTabs.insert(.passwords) }
        if controller === notes { changedTabs.insert(.notes) }
    }
}
