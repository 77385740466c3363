import Foundation
import ObjectGraph

/// What the CLI shows of a note.
public struct NoteInfo: Codable, Equatable {
    public var id: Int64
    public var title: String
    /// The folder an import brought the note from.
    public var folder: String?
    public var text: String?
    public var createdAt: Date
    public var updatedAt: Date
}

/// What the CLI shows of a password entry; `password`, hidden field values and the TOTP
/// secret are nil unless revealed.
public struct EntryInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    public var userId: String?
    public var url: String?
    /// Addresses beyond `url`; nil when there are none.
    public var moreURLs: [String]?
    public var category: String?
    public var password: String?
    public var notes: String?
    public var favorite: Bool?
    /// Whether the entry has a TOTP secret; the secret itself is in `totp` when revealed.
    public var hasTOTP: Bool?
    public var totp: String?
    public var fields: [FieldInfo]?
    /// How many earlier passwords the entry keeps.
    public var historyCount: Int?
    /// Files kept with the entry; nil when there are none.
    public var attachments: [AttachmentInfo]?
    public var createdAt: Date
    public var updatedAt: Date
}

/// A custom field of an entry; a hidden field's value is nil unless revealed.
public struct FieldInfo: Codable, Equatable {
    public var name: String
    public var value: String?
    public var hidden: Bool

    public init(name: String, value: String?, hidden: Bool) {
        self.name = name
        self.value = value
        self.hidden = hidden
    }
}

/// An earlier password of an entry; `password` is nil unless revealed.
public struct HistoryInfo: Codable, Equatable {
    public var password: String?
    public var replacedAt: Date

    public init(password: String?, replacedAt: Date) {
        self.password = password
        self.replacedAt = replacedAt
    }
}

/// A category with how many entries use it.
public struct CategoryInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    public var entries: Int
}

extension NoteInfo {
    init(_ note: Note, withText: Bool) {
        self.init(
            id: note.id, title: note.title, folder: withText ? note.folder : nil, text: withText ? note.text : nil,
                  createdAt: note.createdAt, updatedAt: note.updatedAt)
    }

    /// What a list shows, read as ``Note/listed`` dictionary results: no object is made for it.
    static let listed: [FetchedProperty] = [
        .objectID(), .keyPath(Note.Key.title.rawValue), .keyPath(Note.Key.createdAt.rawValue),
        .keyPath(Note.Key.updatedAt.rawValue),
    ]

    init(listed row: FetchedValues) {
        self.init(
            id: (row["objectID"] as? ObjectID)?.primaryKey ?? 0, title: row[Note.Key.title.rawValue] as? String ?? "",
            createdAt: row[Note.Key.createdAt.rawValue] as? Date ?? .distantPast,
            updatedAt: row[Note.Key.updatedAt.rawValue] as? Date ?? .distantPast)
    }
}

extension EntryInfo {
    /// What a list shows (never the password or the notes), read as dictionary results: no
    /// object is made for it. ``init(listed:)`` reads them by position, in this order.
    static let listed: [FetchedProperty] = [
        .objectID(), .keyPath(PasswordEntry.categoryName, as: "category"),
    ] + [PasswordEntry.Key.name, .userId, .url, .favorite, .createdAt, .updatedAt].map { .keyPath($0.rawValue) }

    init(listed row: FetchedValues) {
        // By position, not by name: a list makes thousands.
        let values = row.values
        self.init(
            id: (values[0] as? ObjectID)?.primaryKey ?? 0, name: values[2] as? String ?? "",
            userId: values[3] as? String, url: values[4] as? String, category: values[1] as? String,
            password: nil, createdAt: values[6] as? Date ?? .distantPast, updatedAt: values[7] as? Date ?? .distantPast)
        favorite = values[5] as? Bool == true ? true : nil
    }

    /// `detailed` adds what only `show` prints: notes, fields, TOTP and history.
    init(_ entry: PasswordEntry, reveal: Bool, detailed: Bool = true) {
        self.init(id: entry.id, name: entry.name, userId: entry.userId, url: entry.url, category: entry.category?.name,
                  password: reveal ? entry.password : nil, createdAt: entry.createdAt, updatedAt: entry.updatedAt)
        favorite = entry.isFavorite ? true : nil
        guard detailed else { return }
        notes = entry.notes
        moreURLs = entry.moreURLs.isEmpty ? nil : entry.moreURLs
        hasTOTP = entry.totp != nil ? true : nil
        totp = reveal ? entry.totp : nil
        let fields = entry.fields
        self.fields = fields.isEmpty ? nil : fields.map {
            FieldInfo(name: $0.name, value: $0.isHidden && !reveal ? nil : $0.value, hidden: $0.isHidden)
        }
        let history = entry.history.count
        historyCount = history == 0 ? nil : history
        let attachments = entry.attachments
        self.attachments = attachments.isEmpty ? nil : attachments.map(AttachmentInfo.init)
    }
}

/// Changes to apply to a password entry; nil leaves a field as it is, "" clears an optional one.
public struct EntryChanges {
    public var name: String?
    public var userId: String?
    public var url: String?
    /// The category's name ("" for none).
    public var category: String?
    public var password: String?
    public var notes: String?
    /// Addresses beyond the first; [] clears them.
    public var moreURLs: [String]?
    public var totp: String?
    public var favorite: Bool?
    /// Replaces every custom field.
    public var fields: [FieldInfo]?
    /// Earlier passwords to record (imports), besides the one a password change replaces.
    public var history: [HistoryInfo]?
    /// Dates an import keeps.
    public var createdAt: Date?
    public var updatedAt: Date?

    public init(name: String? = nil, userId: String? = nil, url: String? = nil, category: String? = nil,
                password: String? = nil, notes: String? = nil) {
        self.name = name
        self.userId = userId
        self.url = url
        self.category = category
        self.password = password
        self.notes = notes
    }

    /// True when the change sets nothing: an edit of nothing is refused, not saved.
    public var isEmpty: Bool {
        let texts = [name, userId, url, category, password, notes, totp]
        return texts.allSatisfy { $0 == nil } && moreURLs == nil && favorite == nil && fields == nil
            && history == nil && createdAt == nil && updatedAt == nil
    }
}

extension Vault {
    // MARK: - Finding by ID or name

    /// The one object of `T` that `reference` names: by its ID, or by its name (its `nameKey`,
    /// ignoring case); a name naming nothing that spells a number falls back to that ID, as
    /// version 1 read it.
    ///
    /// - parameter extent: what else a read of the object found shows (related rows, and the
    ///   lookups that found them), vouched for with it in one check.
    /// - throws: ``VaultError/notFound(_:_:)``, or ``VaultError/ambiguous(_:_:candidates:)``
    ///   listing each match by `describe` when several match.
    func find<T: NamedEntity>(_ type: T.Type, _ reference: ItemReference, kind: ItemKind,
                                extent: (T) throws -> ReadExtent = { _ in ReadExtent() },
                                describe: (T) -> Candidate) throws -> T {
        func findInTransaction() throws -> T {
            func byID(_ id: Int64) throws -> T? {
                guard let object = try context.existingObject(entityName: T.entityName, primaryKey: id) as? T else {
                    // Its bucket is not known from its ID: only its whole store can say it is not there.
                    try verifyForRead(of: storesHolding(T.self))
                    return nil
                }
                try context.decodeValues(of: object)
                let more = try extent(object)
                try verifyRead(of: [object] + more.objects, lookups: more.lookups)
                return object
            }
            let name: String
            switch reference {
            case .id(let id):
                guard let object = try byID(id) else { throw VaultError.notFound(kind, .id(id)) }
                return object
            case .name(let text):
                name = text
            }
            let matches: [T]
            if let indexed = try lookUpByNameKey(T.self, name) {
                matches = indexed.matches
                // Several are each described by what they show (an entry by its category).
                let more = try matches.map(extent)
                // Found or not, the bucket it would be in vouches for the answer.
                try verifyRead(of: matches + more.flatMap(\.objects),
                               lookups: [indexed.lookup] + more.flatMap(\.lookups))
            } else {
                try verifyForRead(of: storesHolding(T.self))
                // Only the names are decrypted to find the match; then all of its fields are.
                var request = FetchRequest<T>(
                    predicate: try Predicate(format: "%K ==[c] %@", T.nameAttribute.rawValue, name))
                request.fetchOnly(T.nameAttribute)
                matches = try context.fetch(request)
            }
            switch matches.count {
            case 0:
                if let id = Int64(name), let object = try byID(id) { return object }
                throw VaultError.notFound(kind, reference)
            case 1:
                try context.decodeValues(of: matches[0])
                return matches[0]
            default:
                for match in matches { try context.decodeValues(of: match) }
                throw VaultError.ambiguous(
                    kind, reference,
                    candidates: matches.sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
                        .map(describe))
            }
        }
        return try Self.wrapErrors { try readingInOneTransaction(findInTransaction) }
    }

    /// The note `reference` names: by ID, by title, or, when no note has that title,
    /// `folder/title` (the folder an import brought it from).
    func findNote(_ reference: ItemReference) throws -> Note {
        func describe(_ note: Note) -> Candidate {
            Candidate(id: note.id, summary: note.title + (note.folder.map { "  folder: \($0)" } ?? ""))
        }
        return try findFallingBackToPath(reference, kind: .note, describe: describe) {
            try find(Note.self, reference, kind: .note, describe: describe)
        } atPath: { container, name in
            try Predicate(format: "%K ==[c] %@ AND %K ==[c] %@", Note.Key.folder.rawValue, container,
                          Note.Key.title.rawValue, name)
        }
    }

    /// What `find` finds; when it finds nothing and `reference` holds a slash, the one object
    /// whose container (category or folder) and name, joined by `/`, are `reference` (ignoring
    /// case; a container may hold `/` itself, so every split is tried).
    ///
    /// - throws: `find`'s error when no path matches either; ``VaultError/ambiguous(_:_:candidates:)``
    ///   listing each match when several do.
    private func findFallingBackToPath<T: NamedEntity>(
        _ reference: ItemReference, kind: ItemKind, describe: (T) -> Candidate, find: () throws -> T,
        atPath predicate: (_ container: String, _ name: String) throws -> ObjectGraph.Predicate
    ) throws -> T {
        do {
            return try find()
        } catch let error as VaultError where error.kind == .notFound {
            guard case .name(let path) = reference, path.contains("/") else { throw error }
            try verifyForRead(of: storesHolding(T.self))
            let matches = try Self.wrapErrors {
                var found: [T] = []
                for slash in path.indices where path[slash] == "/" {
                    let container = String(path[..<slash])
                    let name = String(path[path.index(after: slash)...])
                    guard !container.isEmpty, !name.isEmpty else { continue }
                    found += try context.fetch(FetchRequest<T>(predicate: try predicate(container, name)))
                }
                for object in found { try context.decodeValues(of: object) }
                return found.sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
            }
            guard matches.count < 2 else {
                throw VaultError.ambiguous(kind, reference, candidates: matches.map(describe))
            }
            guard let object = matches.first else { throw error }
            return object
        }
    }

    /// The entry `reference` names, with its fields and history decoded, so a damaged
    /// related row is reported instead of read as missing: by ID, by name, or, when no entry has
    /// that name, a path `category/name` as pass names its files (`web/github`; categories may
    /// hold `/` too).
    func findEntry(_ reference: ItemReference) throws -> PasswordEntry {
        var extended = false
        let entry = try findFallingBackToPath(reference, kind: .entry, describe: Self.describeEntry) {
            try find(PasswordEntry.self, reference, kind: .entry, extent: { entry in
                extended = true
                return try entryExtent(entry)
            }, describe: Self.describeEntry)
        } atPath: { container, name in
            try Predicate(format: "%K ==[c] %@ AND %K ==[c] %@", PasswordEntry.categoryName, container,
                          PasswordEntry.Key.name.rawValue, name)
        }
        // Found by its path, after its whole store was checked: its parts are decoded here.
        if !extended { _ = try entryExtent(entry) }
        return entry
    }

    /// An entry's fields, history, attachments and category, decoded, and the lookups of the
    /// first three in the entry's bucket, which vouches for all of them being there.
    func entryExtent(_ entry: PasswordEntry) throws -> ReadExtent {
        let category: Category?
        do {
            category = try entry.loadedValue(forKey: PasswordEntry.Key.category.rawValue) as? Category
        } catch {
            // The row it names is gone: the whole vault says whether that was done outside mystash.
            try verifyWholeVaultForRead()
            throw VaultError.wrapping(error)
        }
        let parts: [ManagedObject] = entry.fields + entry.history + entry.attachments
        try Self.wrapErrors {
            for part in parts { try context.decodeValues(of: part) }
        }
        let bucket = RowAuthentication.bucket(table: entry.entity.tableName, primaryKey: entry.id)
        let lookups = [CustomField.entityName, PasswordHistoryItem.entityName, Attachment.entityName].compactMap {
            coordinator.managedObjectModel.entity(named: $0).map {
                RowAuthentication.Lookup(
                    storeIdentifier: passwordsStore.identifier, bucket: bucket, table: $0.tableName,
                    column: "ZENTRY", value: .integer(entry.id))
            }
        }
        return ReadExtent(objects: parts + (category.map { [$0] } ?? []), lookups: lookups)
    }

    private static func describeEntry(_ entry: PasswordEntry) -> Candidate {
        Candidate(id: entry.id, summary: [
            entry.name, "user: \(entry.userId ?? "-")", "category: \(entry.category?.name ?? "-")",
            "URL: \(entry.url ?? "-")",
        ].joined(separator: "  "))
    }

    /// The store of `T`'s rows (every store if the model puts them in none): what a lookup of
    /// one that its name key cannot vouch for verifies in full.
    func storesHolding<T: NamedEntity>(_ type: T.Type) -> [PersistentStore]? {
        let entity = coordinator.managedObjectModel.entity(named: T.entityName)
        return entity.flatMap(coordinator.persistentStore(for:)).map { [$0] }
    }

    func findCategory(_ reference: ItemReference) throws -> Category {
        try find(Category.self, reference, kind: .category) { Candidate(id: $0.id, summary: $0.name) }
    }

    // MARK: - Password entries

    /// How many earlier passwords an entry keeps; older ones are dropped.
    static let historyLimit = 20

    /// Refuses a name (as stored: trimmed) that an entry other than `entry` has already,
    /// ignoring case: on a rename as on an add.
    private func refuseTakenName(_ name: String, besides entry: PasswordEntry? = nil) throws {
        let taken = try Self.wrapErrors {
            var request = FetchRequest<PasswordEntry>(
                predicate: try Predicate(
                    format: "%K ==[c] %@", PasswordEntry.Key.name.rawValue, EntryRules.trimmedName(name)))
            request.fetchOnly(.name)
            return try context.fetch(request).first { $0 !== entry }
        }
        if let taken {
            throw VaultError.nameTaken(.entry, name: taken.name, id: taken.id)
        }
    }

    /// The category an entry change names, looked up before the change begins; the closure
    /// gives it inside the change, where one `creating` allows is inserted.
    private func category(for changes: EntryChanges, creating: Bool) throws -> () -> Category? {
        guard let name = changes.category.flatMap({ $0.isEmpty ? nil : $0 }) else { return { nil } }
        do {
            let found = try findCategory(.name(name))
            return { found }
        } catch let error as VaultError where error.kind == .notFound && creating {
            return { self.insertCategory(name) }
        }
    }

    /// Sets the fields a change names; "" clears an optional field. A new password moves
    /// the old one into the history.
    func apply(_ changes: EntryChanges, category: Category?, to entry: PasswordEntry) throws {
        if let name = changes.name { entry.name = EntryRules.trimmedName(name) }
        var newHistory = changes.history ?? []
        if let password = changes.password {
            // An empty password is no earlier password worth keeping.
            if !entry.isInserted, entry.password != password, !entry.password.isEmpty {
                newHistory.append(HistoryInfo(password: entry.password, replacedAt: changes.updatedAt ?? Date()))
            }
            entry.password = password
        }
        if let userId = changes.userId { entry.userId = userId.isEmpty ? nil : userId }
        if let url = changes.url { entry.url = url.isEmpty ? nil : url }
        if let notes = changes.notes { entry.notes = notes.isEmpty ? nil : notes }
        if changes.category != nil { entry.category = category }
        if let urls = changes.moreURLs { entry.moreURLs = urls }
        if var totp = changes.totp {
            if !totp.isEmpty {
                do { totp = try TOTP.normalized(totp) } catch {
                    throw VaultError.invalidValues(["TOTP secret: \(error)"])
                }
            }
            entry.totp = totp.isEmpty ? nil : totp
        }
        if let favorite = changes.favorite { entry.isFavorite = favorite }
        // Each to-many is set once, whole: linking objects one by one copies the entry's list
        // each time, and 10,000 fields or earlier passwords took minutes.
        if let fields = changes.fields {
            let old = entry.fields
            entry.fields = fields.enumerated().map { position, field in
                let object = context.insert(CustomField.self)
                object.name = field.name
                object.storedValue = field.value
                object.isHidden = field.hidden
                object.position = position
                return object
            }
            for object in old { context.delete(object) }
        }
        if !newHistory.isEmpty { mergeHistory(newHistory, into: entry) }
        if let date = changes.createdAt { entry.createdAt = date }
        if let date = changes.updatedAt { entry.updatedAt = date }
    }

    /// Adds earlier passwords the entry does not have yet, keeping the ``historyLimit`` most
    /// recently replaced of old and new: only those are inserted, the others never made.
    func mergeHistory(_ items: [HistoryInfo], into entry: PasswordEntry) {
        func key(_ password: String, _ date: Date) -> String { "\(password)\u{0}\(date.timeIntervalSince1970)" }
        let existing = entry.history
        let known = Set(existing.map { key($0.password, $0.replacedAt) })
        let added = items.filter { !known.contains(key($0.password ?? "", $0.replacedAt)) }
        guard !added.isEmpty else { return }
        // Stable sort: among equal dates, what the entry had comes first, then the items in order.
        let ranked = (existing.map { (date: $0.replacedAt, old: Optional($0), new: HistoryInfo?.none) }
            + added.map { (date: $0.replacedAt, old: nil, new: Optional($0)) }).sorted { $0.date > $1.date }
        let kept = ranked.prefix(Self.historyLimit).map { candidate -> PasswordHistoryItem in
            if let old = candidate.old { return old }
            let object = context.insert(PasswordHistoryItem.self)
            object.password = candidate.new?.password ?? ""
            object.replacedAt = candidate.date
            return object
        }
        entry.history = kept
        for dropped in ranked.dropFirst(Self.historyLimit) { if let old = dropped.old { context.delete(old) } }
    }

    /// The entries of `category`.
    static func entryPredicate(in category: Category) throws -> ObjectGraph.Predicate {
        try Predicate(format: "%K == %@", PasswordEntry.Key.category.rawValue, category)
    }

    /// Registers every category, so entries' category faults resolve without a query each.
    func prefetchCategories() throws {
        _ = try context.fetch(FetchRequest<Category>())
    }

    /// What ``names(of:)`` lists.
    public enum NameKind: Sendable { case entries, notes, categories, sshKeys }

    // MARK: - Categories

    private func insertCategory(_ name: String) -> Category {
        let category = context.insert(Category.self)
        category.name = EntryRules.trimmedName(name)
        return category
    }

}

extension Vault {
    /// The notes, entries, categories, attachments, SSH keys and credentials of an open vault,
    /// as in `vault.items.entry("github", reveal: true)`.
    public struct Items {
        let vault: Vault
    }

    public var items: Items { Items(vault: self) }
}

extension Vault.Items {
    @discardableResult
    public func addNote(title: String, text: String) throws -> Int64 {
        let note = try vault.change {
            let note = vault.context.insert(Note.self)
            note.title = EntryRules.trimmedName(title)
            note.text = text
            return note
        }
        return note.id
    }

    public func notes() throws -> [NoteInfo] {
        try vault.verifyForRead(of: [vault.notesStore])
        return try Vault.wrapErrors {
            var request = FetchRequest<Note>(sortDescriptors: [Note.sort(.title, caseInsensitive: true)])
            request.dictionaryProperties = NoteInfo.listed
            return try vault.context.fetchDictionaries(request) { NoteInfo(listed: $0) }
        }
    }

    public func note(_ reference: ItemReference) throws -> NoteInfo {
        NoteInfo(try vault.findNote(reference), withText: true)
    }

    /// Changes a note's title and/or text; nil leaves either as it is.
    public func editNote(_ reference: ItemReference, title: String?, text: String?) throws {
        let note = try vault.findNote(reference)
        try vault.change {
            if let title { note.title = EntryRules.trimmedName(title) }
            if let text { note.text = text }
            note.updatedAt = Date()
        }
    }

    public func removeNote(_ reference: ItemReference) throws {
        let note = try vault.findNote(reference)
        try vault.change { vault.context.delete(note) }
    }

    /// Notes whose title or text contains `query`, ignoring case and diacritics.
    public func searchNotes(_ query: String) throws -> [NoteInfo] {
        try vault.verifyForRead(of: [vault.notesStore])
        return try Vault.wrapErrors {
            let predicate = try Predicate(
                format: "%K CONTAINS[cd] %@ OR %K CONTAINS[cd] %@", Note.Key.title.rawValue, query,
                Note.Key.text.rawValue, query)
            // Read row by row, each text decrypted to be searched: only the matches are kept.
            var request = FetchRequest<Note>(
                predicate: predicate, sortDescriptors: [Note.sort(.title, caseInsensitive: true)])
            request.dictionaryProperties = NoteInfo.listed + [.keyPath(Note.Key.text.rawValue)]
            return try vault.context.fetchDictionaries(request) { NoteInfo(listed: $0) }
        }
    }

    /// Adds an entry; a name another entry has already (ignoring case) is refused unless
    /// `allowDuplicate`.
    /// With `creatingCategory`, a category the vault does not have yet is added in the same save.
    @discardableResult
    public func addEntry(_ changes: EntryChanges, allowDuplicate: Bool = false, creatingCategory: Bool = false)
        throws -> Int64
    {
        if !allowDuplicate, let name = changes.name { try vault.refuseTakenName(name) }
        let category = try vault.category(for: changes, creating: creatingCategory)
        let entry = try vault.change {
            let entry = vault.context.insert(PasswordEntry.self)
            try vault.apply(changes, category: category(), to: entry)
            return entry
        }
        return entry.id
    }

    @discardableResult
    public func addEntry(
        name: String, password: String, userId: String?, url: String?, category: String?, notes: String?
    ) throws -> Int64 {
        try addEntry(
            EntryChanges(name: name, userId: userId, url: url, category: category, password: password, notes: notes))
    }

    /// The name of the category `reference` names.
    public func categoryName(_ reference: ItemReference) throws -> String {
        try vault.findCategory(reference).name
    }

    /// Whether a category answers to `reference` (a name, ignoring case, or an ID).
    public func hasCategory(_ reference: ItemReference) throws -> Bool {
        do {
            _ = try vault.findCategory(reference)
            return true
        } catch let error as VaultError where error.kind == .notFound {
            return false
        }
    }

    public func entries(category: ItemReference? = nil) throws -> [EntryInfo] {
        try vault.verifyForRead(of: [vault.passwordsStore])
        let filter = try category.map { try vault.findCategory($0) }
        return try Vault.wrapErrors {
            var request = FetchRequest<PasswordEntry>(sortDescriptors: [
                PasswordEntry.sort(.name, caseInsensitive: true)
            ])
            if let filter { request.predicate = try Vault.entryPredicate(in: filter) }
            request.dictionaryProperties = EntryInfo.listed
            // Read row by row, kept only as the lines to print.
            return try vault.context.fetchDictionaries(request) { EntryInfo(listed: $0) }
        }
    }

    public func entry(_ reference: ItemReference, reveal: Bool) throws -> EntryInfo {
        let entry = try vault.findEntry(reference)
        return EntryInfo(entry, reveal: reveal)
    }

    /// One value of an entry: `password`, `user`, `url`, `otp` (the current code), `notes`,
    /// `name`, `category`, `totp` (the secret), or a custom field's name (ignoring case).
    ///
    /// - throws: ``VaultError`` `.notFound` when the entry has no such field or it is empty.
    public func fieldValue(_ field: String, of reference: ItemReference) throws -> String {
        let entry = try vault.findEntry(reference)
        let value: String?
        switch field.lowercased() {
        case "password": value = entry.password
        case "user", "userid", "username", "login": value = entry.userId
        case "url": value = entry.url
        case "notes": value = entry.notes
        case "name": value = entry.name
        case "category": value = entry.category?.name
        case "totp": value = entry.totp
        case "otp": return try totpCode(.id(entry.id)).code.value
        default:
            guard let custom = entry.fields.first(where: { $0.name.lowercased() == field.lowercased() }) else {
                let names = ["password", "user", "url", "otp", "notes"] + entry.fields.map(\.name)
                throw VaultError.noSuchField(entry: entry.name, field: field, fields: names)
            }
            value = custom.value
        }
        guard let value else { throw VaultError.emptyField(entry: entry.name, field: field) }
        return value
    }

    /// The entry's earlier passwords, the most recently replaced first.
    public func passwordHistory(_ reference: ItemReference, reveal: Bool) throws -> [HistoryInfo] {
        try vault.findEntry(reference).history.map {
            HistoryInfo(password: reveal ? $0.password : nil, replacedAt: $0.replacedAt)
        }
    }

    /// The entry's current TOTP code.
    ///
    /// - throws: ``VaultError`` `.notFound` when the entry has no TOTP secret, `.invalidData`
    ///   when it cannot be used.
    public func totpCode(_ reference: ItemReference, at date: Date = Date()) throws -> (code: TOTP.Code, totp: TOTP) {
        let entry = try vault.findEntry(reference)
        guard let secret = entry.totp else {
            throw VaultError.noTOTPSecret(entry: entry.name)
        }
        do {
            let totp = try TOTP(parsing: secret)
            return (try totp.code(at: date), totp)
        } catch let error as TOTP.ParseError {
            throw VaultError.unusableTOTPSecret(entry: entry.name, reason: "\(error)")
        }
    }

    /// Changes the fields `changes` names; a new name another entry has (ignoring case) is
    /// refused unless `allowDuplicate`, as ``addEntry(_:allowDuplicate:)`` refuses it.
    ///
    /// - throws: ``VaultError/nothingToChange`` when `changes` names nothing,
    ///   ``VaultError/nameTaken(_:name:id:)`` or ``VaultError/invalidValues(_:)`` for a taken
    ///   name or any field the model refuses; nothing is saved then.
    public func editEntry(_ reference: ItemReference, _ changes: EntryChanges, allowDuplicate: Bool = false,
                          creatingCategory: Bool = false) throws {
        guard !changes.isEmpty else { throw VaultError.nothingToChange }
        let entry = try vault.findEntry(reference)
        if !allowDuplicate, let name = changes.name { try vault.refuseTakenName(name, besides: entry) }
        let category = try vault.category(for: changes, creating: creatingCategory)
        try vault.change {
            try vault.apply(changes, category: category(), to: entry)
            entry.updatedAt = Date()
        }
    }

    public func removeEntry(_ reference: ItemReference) throws {
        let id = try vault.findEntry(reference).id
        // Attachments first, a few chunks per save: one save would hold every byte in memory.
        try vault.removeAttachments(ofEntry: id)
        let entry = try vault.findEntry(.id(id))
        try vault.change { vault.context.delete(entry) }
    }

    /// Entries whose name, user ID, URL or notes contain `query` (never the password),
    /// ignoring case and diacritics.
    public func searchEntries(_ query: String) throws -> [EntryInfo] {
        try vault.verifyForRead(of: [vault.passwordsStore])
        return try Vault.wrapErrors {
            let searched = [PasswordEntry.Key.name, .userId, .url, .notes].map(\.rawValue)
                + [PasswordEntry.categoryName]
            let predicate = try Predicate(
                format: searched.map { _ in "%K CONTAINS[cd] %@" }.joined(separator: " OR "),
                argumentArray: searched.flatMap { key -> [Any?] in [key, query] })
            var request = FetchRequest<PasswordEntry>(
                predicate: predicate, sortDescriptors: [PasswordEntry.sort(.name, caseInsensitive: true)])
            // The notes are searched, not shown.
            request.dictionaryProperties = EntryInfo.listed + [.keyPath(PasswordEntry.Key.notes.rawValue)]
            return try vault.context.fetchDictionaries(request) { EntryInfo(listed: $0) }
        }
    }

    /// Entry, note or category names for shell completion; names only (no secret beyond them).
    public func names(of kind: Vault.NameKind) throws -> [String] {
        try vault.verifyWholeVaultForRead()
        return try Vault.wrapErrors {
            switch kind {
            case .entries:
                var request = FetchRequest<PasswordEntry>()
                request.fetchOnly(.name)
                return try vault.context.fetch(request).map(\.name)
            case .notes:
                var request = FetchRequest<Note>()
                request.fetchOnly(.title)
                return try vault.context.fetch(request).map(\.title)
            case .categories:
                return try vault.context.fetch(FetchRequest<Category>()).map(\.name)
            case .sshKeys:
                let named = try Predicate(format: "%K ==[c] %@", Category.Key.name.rawValue, Vault.sshKeyCategory)
                guard let category = try vault.context.fetch(FetchRequest<Category>(predicate: named)).first else {
                    return []
                }
                var request = FetchRequest<PasswordEntry>(predicate: try Vault.entryPredicate(in: category))
                request.fetchOnly(.name)
                return try vault.context.fetch(request).map(\.name)
            }
        }
    }

    public func categories() throws -> [CategoryInfo] {
        try vault.verifyForRead(of: [vault.passwordsStore])
        return try Vault.wrapErrors {
            // Counted in SQL: entries need not be decrypted, so this works on a locked vault.
            try vault.context.fetch(
                FetchRequest<Category>(sortDescriptors: [Category.sort(.name, caseInsensitive: true)])
            ).map { category in
                let entries = try vault.context.count(
                    for: FetchRequest<PasswordEntry>(predicate: try Vault.entryPredicate(in: category)))
                return CategoryInfo(id: category.id, name: category.name, entries: entries)
            }
        }
    }

    @discardableResult
    public func addCategory(_ name: String) throws -> Int64 {
        try vault.change { vault.insertCategory(name) }.id
    }

    public func renameCategory(_ reference: ItemReference, to newName: String) throws {
        let category = try vault.findCategory(reference)
        try vault.change { category.name = EntryRules.trimmedName(newName) }
    }

    /// Removes a category; refused (Deny) while entries use it.
    public func removeCategory(_ reference: ItemReference) throws {
        let category = try vault.findCategory(reference)
        do {
            try vault.change { vault.context.delete(category) }
        } catch VaultError.invalidValues(let problems) {
            throw VaultError.categoryHasEntries(category: category.name, problems: problems)
        }

    }
}
