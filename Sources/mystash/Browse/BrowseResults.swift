import Foundation
import MyStashKit

/// The two tabs' observations of the vault's items, and which tabs they reported as changed:
/// by this process's saves and undo, or by another process's commits once followed.
final class BrowseResults {
    private let vault: Vault
    private var entriesObservation: ItemObservation?
    private var notesObservation: ItemObservation?
    /// Each tab's rows as its observation last reported them.
    private var rowsOfTab: [Browser.Tab: [BrowseRow]] = [:]
    /// Tabs whose rows changed since ``rows(_:)`` last gave them.
    private(set) var changedTabs: Set<Browser.Tab> = []
    /// Why an observation could not follow a change (its tab shows the items from before).
    private var failure: Error?

    init(vault: Vault) {
        self.vault = vault
    }

    var isFetched: Bool { entriesObservation != nil || notesObservation != nil }

    /// Starts observing a tab's items (fetching them) unless that runs already; reports a change
    /// an observation could not follow since the last call.
    func fetch(_ tab: Browser.Tab) throws {
        if let failure {
            self.failure = nil
            throw failure
        }
        let onError: (Error) -> Void = { [weak self] in self?.failure = $0 }
        switch tab {
        case .notes where notesObservation == nil:
            notesObservation = try vault.observeNotes(onError: onError) { [weak self] notes in
                self?.replace(.notes, with: Self.rows(notes))
            }
        case .passwords where entriesObservation == nil:
            entriesObservation = try vault.observeEntries(onError: onError) { [weak self] entries in
                self?.replace(.passwords, with: Self.rows(entries))
            }
        default:
            return
        }
    }

    private func replace(_ tab: Browser.Tab, with rows: [BrowseRow]) {
        rowsOfTab[tab] = rows
        changedTabs.insert(tab)
    }

    /// The rows of a tab in the vault's order and sections.
    func rows(_ tab: Browser.Tab) -> [BrowseRow] {
        changedTabs.remove(tab)
        return rowsOfTab[tab] ?? []
    }

    /// Notes in sections by day, the most recently changed first.
    private static func rows(_ notes: [NoteSummary]) -> [BrowseRow] {
        let days = DaySections()
        return notes.map { note in
            BrowseRow(id: note.id, title: note.title, subtitle: days.time(note.updatedAt),
                      section: days.section(note.updatedAt), searchable: [note.title, note.text])
        }
    }

    /// Entries in sections by category.
    private static func rows(_ entries: [EntrySummary]) -> [BrowseRow] {
        entries.map { entry in
            BrowseRow(id: entry.id, title: entry.name, subtitle: entry.userId ?? "",
                      section: entry.category ?? "No category",
                      searchable: [entry.name, entry.userId, entry.url, entry.category])
        }
    }

    /// Ends both observations, so nothing follows the vault while it is locked.
    func stop() {
        entriesObservation?.cancel()
        notesObservation?.cancel()
        entriesObservation = nil
        notesObservation = nil
        rowsOfTab = [:]
        changedTabs = []
        failure = nil
    }
}
