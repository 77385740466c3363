import Foundation
import MyStashKit

/// The last change made in the browser, kept so it can be taken back. Every change is saved
/// at once (other processes see it), so undo is the opposite change, saved in turn: an added
/// item is removed, a removed one added again (under a new ID), an edited one given back its
/// fields. An item changed elsewhere since is left alone.
struct BrowseChange {
    enum Kind {
        case added
        case edited(before: Browser.Detail)
        case removed(Browser.Detail)
    }

    var tab: Browser.Tab
    var id: Int64
    var kind: Kind
    /// The item's change date right after our change, to notice a later change by others.
    var savedAt: Date?
}

extension Browser {
    /// The item as saved now, every field decrypted (the password too).
    func currentDetail(_ tab: Tab, _ id: Int64) throws -> Detail {
        switch tab {
        case .notes: return .note(try vault.note(String(id)))
        case .passwords: return .entry(try vault.entry(String(id), reveal: true))
        }
    }

    func updatedAt(_ detail: Detail) -> Date {
        switch detail {
        case .note(let note): return note.updatedAt
        case .entry(let entry): return entry.updatedAt
        }
    }

    /// Takes back `lastChange`; says what it did, or why it could not.
    func undoLastChange() throws {
        guard let change = lastChange else { return say("Nothing to undo.") }
        lastChange = nil
        do {
            var selectID = change.id
            switch change.kind {
            case .added:
                try refuseIfChangedElsewhere(change)
                switch change.tab {
                case .notes: try vault.removeNote(String(change.id))
                case .passwords: try vault.removeEntry(String(change.id))
                }
                say("Undone: the \(change.tab.noun) \(change.id) added is removed.")
            case .edited(let before):
                try refuseIfChangedElsewhere(change)
                try restore(before)
                say("Undone: \(change.tab.noun) \(change.id) has its fields back.")
            case .removed(let before):
                selectID = try add(before)
                say("Undone: the \(change.tab.noun) removed is back as \(selectID).")
            }
            tab = change.tab
            try load(tab)
            list.select(id: selectID)
        } catch {
            say(errorLines(error).joined(separator: " "), isError: true)
        }
    }

    private func refuseIfChangedElsewhere(_ change: BrowseChange) throws {
        vault.forgetLoadedObjects()
        let now = try currentDetail(change.tab, change.id)
        if let savedAt = change.savedAt, updatedAt(now) != savedAt {
            throw VaultError(.busy, "\(change.tab.noun) \(change.id) was changed by another process since; not undone")
        }
    }

    private func restore(_ detail: Detail) throws {
        switch detail {
        case .note(let note):
            try vault.editNote(String(note.id), title: note.title, text: note.text ?? "")
        case .entry(let entry):
            let fields = EntryChanges(name: entry.name, userId: entry.userId ?? "", url: entry.url ?? "",
                                      category: entry.category ?? "", password: entry.password,
                                      notes: entry.notes ?? "")
            try vault.editEntry(String(entry.id), fields)
        }
    }

    private func add(_ detail: Detail) throws -> Int64 {
        switch detail {
        case .note(let note):
            return try vault.addNote(title: note.title, text: note.text ?? "")
        case .entry(let entry):
            return try vault.addEntry(name: entry.name, password: entry.password ?? "", userId: entry.userId,
                                      url: entry.url, category: entry.category, notes: entry.notes)
        }
    }
}
