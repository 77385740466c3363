import Foundation
import ObjectGraph

/// What the CLI shows of a note.
public struct NoteInfo: Codable, Equatable {
    public var id: Int64
    public var title: String
    public var text: String?
    public var createdAt: Date
    public var updatedAt: Date
}

/// What the CLI shows of a password entry; `password` is nil unless revealed.
public struct EntryInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    public var userId: String?
    public var url: String?
    public var category: String?
    public var password: String?
    public var notes: String?
    public var createdAt: Date
    public var updatedAt: Date
}

public struct CategoryInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    public var entries: Int
}

extension NoteInfo {
    init(_ note: Note, withText: Bool) {
        self.init(id: note.id, title: note.title, text: withText ? note.text : nil, createdAt: note.createdAt, updatedAt: note.updatedAt)
    }
}

extension EntryInfo {
    init(_ entry: PasswordEntry, reveal: Bool, withNotes: Bool = true) {
        self.init(id: entry.id, name: entry.name, userId: entry.userId, url: entry.url, category: entry.category?.name,
                  password: reveal ? entry.password : nil, notes: withNotes ? entry.notes : nil, createdAt: entry.createdAt, updatedAt: entry.updatedAt)
    }
}

/// Changes to apply to a password entry; nil leaves a field as it is, "" clears an optional one.
public struct EntryChanges {
    public var name: String?
    public var userId: String?
    public var url: String?
    public var category: String?
    public var password: String?
    public var notes: String?

    public init(name: String? = nil, userId: String? = nil, url: String? = nil, category: String? = nil, password: String? = nil, notes: String? = nil) {
        self.name = name
        self.userId = userId
        self.url = url
        self.category = category
        self.password = password
        self.notes = notes
    }
}

extension Vault {
    // MARK: - Finding by ID or name

    /// The one object of `T` whose ID is `reference`, or whose name field equals it (ignoring case).
    ///
    /// - throws: ``VaultError`` `.notFound` (66), or `.usage` (64) listing the IDs when
    ///   several match.
    func find<T: ManagedEntity>(_ type: T.Type, _ reference: String, nameKey: String, noun: String, listCommand: String) throws -> T {
        try Self.wrapErrors {
            if let id = Int64(reference), let object = try context.existingObject(entityName: T.entityName, primaryKey: id) as? T {
                try context.decodeValues(of: object)
                return object
            }
            // Only the names are decrypted to find the match; then all of its fields are.
            var request = FetchRequest<T>(predicate: try Predicate(format: "%K ==[c] %@", nameKey, reference))
            request.propertiesToFetch = [nameKey]
            let matches = try context.fetch(request)
            switch matches.count {
            case 0:
                throw VaultError(.notFound, "no \(noun) named '\(reference)'", hint: "'\(listCommand)' shows them with their IDs")
            case 1:
                try context.decodeValues(of: matches[0])
                return matches[0]
            default:
                let plural = noun.hasSuffix("y") ? noun.dropLast() + "ies" : noun + "s"
                throw VaultError(.usage, "'\(reference)' matches \(matches.count) \(plural); give one of their IDs:",
                                 details: matches.map { "  ID \($0.objectID.primaryKey ?? 0)" })
            }
        }
    }

    // MARK: - Notes

    @discardableResult
    public func addNote(title: String, text: String) throws -> Int64 {
        let note = try change {
            let note = context.insert(Note.self)
            note.title = title
            note.text = text
            return note
        }
        return note.id
    }

    public func notes() throws -> [NoteInfo] {
        try Self.wrapErrors {
            var request = FetchRequest<Note>(sortDescriptors: [FetchSortDescriptor(key: "title", caseInsensitive: true)])
            request.propertiesToFetch = ["title"]
            return try context.fetch(request).map { NoteInfo($0, withText: false) }
        }
    }

    public func note(_ reference: String) throws -> NoteInfo {
        NoteInfo(try find(Note.self, reference, nameKey: "title", noun: "note", listCommand: "mystash note list"), withText: true)
    }

    public func editNote(_ reference: String, title: String?, text: String?) throws {
        let note = try find(Note.self, reference, nameKey: "title", noun: "note", listCommand: "mystash note list")
        try change {
            if let title { note.title = title }
            if let text { note.text = text }
            note["updatedAt"] = Date()
        }
    }

    public func removeNote(_ reference: String) throws {
        let note = try find(Note.self, reference, nameKey: "title", noun: "note", listCommand: "mystash note list")
        try change { context.delete(note) }
    }

    /// Notes whose title or text contains `query`, ignoring case and diacritics.
    public func searchNotes(_ query: String) throws -> [NoteInfo] {
        try Self.wrapErrors {
            let predicate = try Predicate(format: "title CONTAINS[cd] %@ OR text CONTAINS[cd] %@", query, query)
            return try context.fetch(FetchRequest<Note>(predicate: predicate, sortDescriptors: [FetchSortDescriptor(key: "title", caseInsensitive: true)]))
                .map { NoteInfo($0, withText: false) }
        }
    }

    // MARK: - Password entries

    @discardableResult
    public func addEntry(name: String, password: String, userId: String?, url: String?, category: String?, notes: String?) throws -> Int64 {
        let changes = EntryChanges(name: name, userId: userId, url: url, category: category, password: password, notes: notes)
        let categoryObject = try self.category(for: changes)
        let entry = try change {
            let entry = context.insert(PasswordEntry.self)
            apply(changes, category: categoryObject, to: entry)
            return entry
        }
        return entry.id
    }

    /// The category an entry change names, looked up before the change begins.
    private func category(for changes: EntryChanges) throws -> Category? {
        try changes.category.flatMap { $0.isEmpty ? nil : $0 }.map {
            try find(Category.self, $0, nameKey: "name", noun: "category", listCommand: "mystash category list")
        }
    }

    /// Sets the fields a change names; "" clears an optional field.
    private func apply(_ changes: EntryChanges, category: Category?, to entry: PasswordEntry) {
        if let name = changes.name { entry["name"] = name }
        if let password = changes.password { entry["password"] = password }
        if let userId = changes.userId { entry["userId"] = userId.isEmpty ? nil : userId }
        if let url = changes.url { entry["url"] = url.isEmpty ? nil : url }
        if let notes = changes.notes { entry["notes"] = notes.isEmpty ? nil : notes }
        if changes.category != nil { entry["category"] = category }
    }

    public func entries(category: String? = nil) throws -> [EntryInfo] {
        let filter = try category.map { try find(Category.self, $0, nameKey: "name", noun: "category", listCommand: "mystash category list") }
        return try Self.wrapErrors {
            try prefetchCategories()
            var request = FetchRequest<PasswordEntry>(sortDescriptors: [FetchSortDescriptor(key: "name", caseInsensitive: true)])
            if let filter { request.predicate = try Predicate(format: "category == %@", filter) }
            // What a list shows: never the password or the notes.
            request.propertiesToFetch = ["name", "userId", "url"]
            return try context.fetch(request).map { EntryInfo($0, reveal: false, withNotes: false) }
        }
    }

    public func entry(_ reference: String, reveal: Bool) throws -> EntryInfo {
        EntryInfo(try find(PasswordEntry.self, reference, nameKey: "name", noun: "entry", listCommand: "mystash password list"), reveal: reveal)
    }

    public func editEntry(_ reference: String, _ changes: EntryChanges) throws {
        let entry = try find(PasswordEntry.self, reference, nameKey: "name", noun: "entry", listCommand: "mystash password list")
        let category = try self.category(for: changes)
        try change {
            apply(changes, category: category, to: entry)
            entry["updatedAt"] = Date()
        }
    }

    public func removeEntry(_ reference: String) throws {
        let entry = try find(PasswordEntry.self, reference, nameKey: "name", noun: "entry", listCommand: "mystash password list")
        try change { context.delete(entry) }
    }

    /// Entries whose name, user ID, URL or notes contain `query` (never the password),
    /// ignoring case and diacritics.
    public func searchEntries(_ query: String) throws -> [EntryInfo] {
        try Self.wrapErrors {
            try prefetchCategories()
            let predicate = try Predicate(format: "name CONTAINS[cd] %@ OR userId CONTAINS[cd] %@ OR url CONTAINS[cd] %@ OR notes CONTAINS[cd] %@ OR category.name CONTAINS[cd] %@",
                                          query, query, query, query, query)
            return try context.fetch(FetchRequest<PasswordEntry>(predicate: predicate, sortDescriptors: [FetchSortDescriptor(key: "name", caseInsensitive: true)]))
                .map { EntryInfo($0, reveal: false) }
        }
    }

    /// Registers every category, so entries' category faults resolve without a query each.
    private func prefetchCategories() throws {
        _ = try context.fetch(FetchRequest<Category>())
    }

    // MARK: - Categories

    public func categories() throws -> [CategoryInfo] {
        try Self.wrapErrors {
            // Counted in SQL: entries need not be decrypted, so this works on a locked vault.
            try context.fetch(FetchRequest<Category>(sortDescriptors: [FetchSortDescriptor(key: "name", caseInsensitive: true)])).map { category in
                let entries = try context.count(for: FetchRequest<PasswordEntry>(predicate: try Predicate(format: "category == %@", category)))
                return CategoryInfo(id: category.id, name: category.name, entries: entries)
            }
        }
    }

    @discardableResult
    public func addCategory(_ name: String) throws -> Int64 {
        let category = try change {
            let category = context.insert(Category.self)
            category["name"] = name
            return category
        }
        return category.id
    }

    public func renameCategory(_ reference: String, to newName: String) throws {
        let category = try find(Category.self, reference, nameKey: "name", noun: "category", listCommand: "mystash category list")
        try change { category["name"] = newName }
    }

    /// Removes a category; refused (Deny) while entries use it.
    public func removeCategory(_ reference: String) throws {
        let category = try find(Category.self, reference, nameKey: "name", noun: "category", listCommand: "mystash category list")
        do {
            try change { context.delete(category) }
        } catch var error as VaultError where error.kind == .invalidData {
            error.hint = "move or remove its entries first ('mystash password list --category \(category.name)')"
            throw error
        }
    }
}
