import Foundation
import ObjectGraph

// MARK: - Keys

/// An entity whose attributes and relationships are named once, in its `Key` (as the model
/// names them; ModelKeysTests holds every list to the model). Reads and writes go through the
/// typed properties below, sorts, fetched properties and predicates through `Key`: a
/// misspelt key does not compile.
protocol EntityKeys: ManagedEntity {
    associatedtype Key: RawRepresentable<String>, CaseIterable
}

extension EntityKeys {
    /// A sort by one of the entity's attributes.
    static func sort(_ key: Key, ascending: Bool = true, caseInsensitive: Bool = false) -> FetchSortDescriptor {
        FetchSortDescriptor(key: key.rawValue, ascending: ascending, caseInsensitive: caseInsensitive)
    }

    /// `relationship.key`: a key path through a to-one relationship (sorts, sections, predicates).
    static func path<Destination: RawRepresentable<String>>(_ relationship: Key, _ key: Destination) -> String {
        relationship.rawValue + "." + key.rawValue
    }

    /// The value of a property, typed; only the typed properties of this file use it.
    fileprivate subscript<Value>(key: Key) -> Value? {
        get { self[key.rawValue] as? Value }
        set { self[key.rawValue] = newValue }
    }

    /// A to-many relationship's members of `Member`.
    fileprivate func members<Member: ManagedObject>(_ key: Key) -> [Member] {
        (self[key.rawValue] as? [ManagedObject] ?? []).compactMap { $0 as? Member }
    }

    fileprivate func hasChanged(_ key: Key) -> Bool { changedValues[key.rawValue] != nil }
}

extension FetchRequest where Result: EntityKeys {
    /// Fetches only `keys` of each object (the others are read when first used).
    mutating func fetchOnly(_ keys: Result.Key...) { propertiesToFetch = Set(keys.map(\.rawValue)) }
}

/// What a name finds: a note by its title, an entry or category by its name.
protocol NamedEntity: EntityKeys {
    /// The attribute holding the name.
    static var nameAttribute: Key { get }
}

extension NamedEntity {
    /// Its title or name.
    var itemName: String {
        get { self[Self.nameAttribute] ?? "" }
        set { self[Self.nameAttribute] = newValue }
    }

    /// ``nameAttribute``'s name, for code that holds an object of no known entity.
    var nameAttributeName: String { Self.nameAttribute.rawValue }
}

/// A note or an entry: its name indexed by a keyed hash (model version 4, ``Vault/updateNameKeys(using:all:)``).
protocol NameIndexedEntity: NamedEntity {
    static var nameIndexAttribute: Key { get }
}

extension NameIndexedEntity {
    var nameIndex: Data? {
        get { self[Self.nameIndexAttribute] }
        set { self[Self.nameIndexAttribute] = newValue }
    }
}

/// What sync matches across machines by identity (model version 3): notes, entries, categories.
protocol SyncedEntity: NamedEntity {
    static var syncIdentityAttribute: Key { get }
}

extension SyncedEntity {
    var syncIdentity: UUID? {
        get { self[Self.syncIdentityAttribute] }
        set { self[Self.syncIdentityAttribute] = newValue }
    }

    /// Gives a new item its identity, which no undo takes back: an undone addition is a deletion
    /// whose history keeps the identity, for sync to send it.
    func assignNewSyncIdentity() {
        let undoManager = managedObjectContext?.undoManager
        undoManager?.disableUndoRegistration()
        defer { undoManager?.enableUndoRegistration() }
        syncIdentity = UUID()
    }
}

// MARK: - Entities

/// A note: title and text are encrypted.
final class Note: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "Note"
    enum Key: String, CaseIterable { case nameKey, uuid, title, text, folder, createdAt, updatedAt }

    var id: Int64 { objectID.primaryKey ?? 0 }
    var title: String {
        get { self[.title] ?? "" }
        set { self[.title] = newValue }
    }
    var text: String {
        get { self[.text] ?? "" }
        set { self[.text] = newValue }
    }
    /// The folder an import brought the note from (model version 2).
    var folder: String? {
        get { self[.folder] }
        set { self[.folder] = newValue }
    }
    var createdAt: Date {
        get { self[.createdAt] ?? .distantPast }
        set { self[.createdAt] = newValue }
    }
    var updatedAt: Date {
        get { self[.updatedAt] ?? .distantPast }
        set { self[.updatedAt] = newValue }
    }

    override func awakeFromInsert() {
        createdAt = Date()
        updatedAt = Date()
        assignNewSyncIdentity()
    }
}

extension Note: NameIndexedEntity, SyncedEntity {
    static let nameAttribute = Key.title
    static let nameIndexAttribute = Key.nameKey
    static let syncIdentityAttribute = Key.uuid
}

/// A password entry (the book's `System` entity): every field but the dates is encrypted.
final class PasswordEntry: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "System"
    enum Key: String, CaseIterable {
        case nameKey, uuid, name, userId, password, url, moreURLs, totp, notes, favorite, createdAt, updatedAt
        case category, fields, history, attachments
    }

    /// The key path of the entry's category's name (sorts, sections, predicates).
    static let categoryName = path(.category, Category.Key.name)

    var id: Int64 { objectID.primaryKey ?? 0 }
    var name: String {
        get { self[.name] ?? "" }
        set { self[.name] = newValue }
    }
    var userId: String? {
        get { self[.userId] }
        set { self[.userId] = newValue }
    }
    var password: String {
        get { self[.password] ?? "" }
        set { self[.password] = newValue }
    }
    var url: String? {
        get { self[.url] }
        set { self[.url] = newValue }
    }
    var notes: String? {
        get { self[.notes] }
        set { self[.notes] = newValue }
    }
    var category: Category? {
        get { self[.category] }
        set { self[.category] = newValue }
    }
    /// An `otpauth://totp/` URI or a base32 secret (model version 2).
    var totp: String? {
        get { self[.totp] }
        set { self[.totp] = newValue }
    }
    /// Addresses beyond `url`, in order; stored one per line, none as nil.
    var moreURLs: [String] {
        get { (self[.moreURLs] as String?)?.split(separator: "\n").map(String.init) ?? [] }
        set { self[.moreURLs] = newValue.isEmpty ? nil : newValue.joined(separator: "\n") }
    }
    var isFavorite: Bool {
        get { self[.favorite] ?? false }
        set { self[.favorite] = newValue }
    }
    /// Custom fields in their order; set whole, in one change of the relationship.
    var fields: [CustomField] {
        get { (members(.fields) as [CustomField]).sorted { $0.position < $1.position } }
        set { self[.fields] = newValue }
    }
    /// Earlier passwords, the most recently replaced first; set whole.
    var history: [PasswordHistoryItem] {
        get { (members(.history) as [PasswordHistoryItem]).sorted { $0.replacedAt > $1.replacedAt } }
        set { self[.history] = newValue }
    }
    /// Its attachments that are complete (model version 4), by name.
    var attachments: [Attachment] {
        allAttachments.filter(\.isComplete)
            .sorted { $0.name.localizedStandardCompare($1.name) == .orderedAscending }
    }
    /// Its attachments, complete or not, in no order.
    var allAttachments: [Attachment] { members(.attachments) }
    var createdAt: Date {
        get { self[.createdAt] ?? .distantPast }
        set { self[.createdAt] = newValue }
    }
    var updatedAt: Date {
        get { self[.updatedAt] ?? .distantPast }
        set { self[.updatedAt] = newValue }
    }

    override func awakeFromInsert() {
        createdAt = Date()
        updatedAt = Date()
        assignNewSyncIdentity()
    }

    /// Addresses must name a host with a scheme the model allows (``EntryRules``). Only
    /// new or changed ones: a vault may hold older addresses this rule came after.
    override func validateForSave(into errors: inout [ValidationError]) {
        let schemes = EntryRules.urlSchemes(of: entity)
        for key in [Key.url, .moreURLs] where isInserted || hasChanged(key) {
            guard let text: String = self[key] else { continue }
            // Spaces and control characters break the model's pattern, which says so itself.
            let breaksPattern = CharacterSet.whitespacesAndNewlines.union(.controlCharacters)
            let addresses = text.split(separator: "\n").map(String.init)
                .filter { !$0.unicodeScalars.contains(where: breaksPattern.contains) }
            let problems = addresses.lazy.compactMap { EntryRules.problem(withAddress: $0, schemes: schemes) }
            if let problem = problems.first {
                errors.append(ValidationError(code: .generic, object: self, key: key.rawValue, value: text,
                                              constraint: .custom(problem)))
            }
        }
    }
}

extension PasswordEntry: NameIndexedEntity, SyncedEntity {
    static let nameAttribute = Key.name
    static let nameIndexAttribute = Key.nameKey
    static let syncIdentityAttribute = Key.uuid
}

/// A named value of an entry beyond the standard fields (a PIN, a security question...).
final class CustomField: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "Field"
    enum Key: String, CaseIterable { case name, value, hidden, position, entry }

    var name: String {
        get { self[.name] ?? "" }
        set { self[.name] = newValue }
    }
    var value: String { storedValue ?? "" }
    /// The value as stored: nil when the field has none.
    var storedValue: String? {
        get { self[.value] }
        set { self[.value] = newValue }
    }
    /// Hidden values are masked like passwords unless revealed.
    var isHidden: Bool {
        get { self[.hidden] ?? false }
        set { self[.hidden] = newValue }
    }
    var position: Int {
        get { self[.position] ?? 0 }
        set { self[.position] = newValue }
    }
    var entry: PasswordEntry? { self[.entry] }
}

/// A password an entry had before, with when it was replaced.
final class PasswordHistoryItem: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "PasswordHistory"
    enum Key: String, CaseIterable { case password, replacedAt, entry }

    var password: String {
        get { self[.password] ?? "" }
        set { self[.password] = newValue }
    }
    var replacedAt: Date {
        get { self[.replacedAt] ?? .distantPast }
        set { self[.replacedAt] = newValue }
    }
    var entry: PasswordEntry? { self[.entry] }
}

/// A category of password entries; names are plain and unique (ignoring case).
final class Category: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "Category"
    enum Key: String, CaseIterable { case uuid, name, systems }

    var id: Int64 { objectID.primaryKey ?? 0 }
    var name: String {
        get { self[.name] ?? "" }
        set { self[.name] = newValue }
    }
    /// The entries in the category (its `systems`), in no order.
    var entries: [PasswordEntry] { members(.systems) }

    override func awakeFromInsert() { assignNewSyncIdentity() }

    /// - throws: the store's error when the other categories cannot be read: a name is never
    ///   saved unchecked.
    override func validateForSave(into errors: inout [ValidationError]) throws {
        guard let context = managedObjectContext, hasChanged(.name) || isInserted else { return }
        let others = try context.fetch(
            FetchRequest<Category>(predicate: try Predicate(format: "%K ==[c] %@", Key.name.rawValue, name)))
        // As they stand in the context: one renamed in the same save no longer clashes.
        if others.contains(where: {
            $0 !== self && !$0.isDeleted && $0.name.caseInsensitiveCompare(name) == .orderedSame
        }) {
            errors.append(ValidationError(code: .generic, object: self, key: Key.name.rawValue, value: name,
                                          constraint: .custom("'\(name)' is already used by another category")))
        }
    }
}

extension Category: SyncedEntity {
    static let nameAttribute = Key.name
    static let syncIdentityAttribute = Key.uuid
}

/// A file kept with an entry (model version 4): its name encrypted, its bytes in encrypted
/// chunks written one save at a time; it shows only once `complete` says the last one is saved.
final class Attachment: ManagedObject, ManagedEntity, EntityKeys {
    /// After `System` in name order (model version 5), as every new entity must be: see the model.
    static let entityName = "SystemAttachment"
    enum Key: String, CaseIterable { case uuid, name, size, chunkCount, complete, createdAt, entry, chunks }

    var id: Int64 { objectID.primaryKey ?? 0 }
    var name: String {
        get { self[.name] ?? "" }
        set { self[.name] = newValue }
    }
    /// Its length in bytes.
    var size: Int64 {
        get { Int64(self[.size] ?? 0 as Int) }
        set { self[.size] = Int(newValue) }
    }
    var chunkCount: Int {
        get { self[.chunkCount] ?? 0 }
        set { self[.chunkCount] = newValue }
    }
    var isComplete: Bool {
        get { self[.complete] ?? false }
        set { self[.complete] = newValue }
    }
    var createdAt: Date { self[.createdAt] ?? .distantPast }
    var entry: PasswordEntry? {
        get { self[.entry] }
        set { self[.entry] = newValue }
    }

    override func awakeFromInsert() {
        self[.createdAt] = Date()
        self[.uuid] = UUID()
    }
}

/// One piece of an attachment's bytes, in order by `index`.
final class AttachmentChunk: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "SystemAttachmentChunk"
    enum Key: String, CaseIterable { case index, data, attachment }

    var index: Int {
        get { self[.index] ?? 0 }
        set { self[.index] = newValue }
    }
    var data: Data {
        get { self[.data] ?? Data() }
        set { self[.data] = newValue }
    }
    var attachment: Attachment? {
        get { self[.attachment] }
        set { self[.attachment] = newValue }
    }
}

/// Which version of a seed list the vault has loaded.
final class SeedList: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "List"
    enum Key: String, CaseIterable { case name, version }

    var name: String {
        get { self[.name] ?? "" }
        set { self[.name] = newValue }
    }
    var version: Int {
        get { self[.version] ?? 0 }
        set { self[.version] = newValue }
    }
}

/// This machine's sync bookkeeping (model version 3): one row, its key encrypted like every secret.
final class SyncStateRow: ManagedObject, ManagedEntity, EntityKeys {
    static let entityName = "SyncState"
    enum Key: String, CaseIterable { case key, state }

    /// The sync key, base64.
    var key: String? {
        get { self[.key] }
        set { self[.key] = newValue }
    }
    /// ``SyncState``, stored.
    var state: Data? {
        get { self[.state] }
        set { self[.state] = newValue }
    }
}

/// Keys of what sync adds to the model.
enum SyncKeys {
    /// The attribute sync matches notes, entries and categories by: `uuid` in each of them.
    static let uuid = Note.Key.uuid.rawValue
}
