import Foundation
import ObjectGraph

/// The keyed index of names (model version 4, FORMAT.md "Name index"): each note and entry
/// stores an HMAC of its name, case folded, so finding one by name reads the rows of one
/// bucket instead of decrypting every name.
extension Vault {
    /// The attribute holding the name key, in notes and entries alike.
    static let nameKeyAttribute = Note.nameIndexAttribute.rawValue

    /// Gives each note and entry this save inserts or renames its name key, under `record`'s
    /// key (the current one unless a rekey passes the new one); `all` renews every loaded one.
    func updateNameKeys(using record: IntegrityRecord? = nil, all: Bool = false) throws {
        guard let record = record ?? integrityRecord else { return }
        let objects = all ? context.registeredObjects : context.insertedObjects + context.updatedObjects
        for object in objects where !object.isDeleted {
            guard let object = object as? any NameIndexedEntity else { continue }
            guard all || object.isInserted || object.changedValues[object.nameAttributeName] != nil
                || object.nameIndex == nil
            else { continue }
            let key = try record.nameKey(object.itemName, entity: object.entity.name)
            if object.nameIndex != key { object.nameIndex = key }
        }
    }

    /// Whether a note or entry has no name key yet (a vault from before model version 4).
    func hasUnindexedNames() throws -> Bool {
        try Self.wrapErrors {
            let missing = try Predicate(format: "%K == nil", Self.nameKeyAttribute)
            var notes = FetchRequest<Note>(predicate: missing)
            notes.fetchLimit = 1
            var entries = FetchRequest<PasswordEntry>(predicate: missing)
            entries.fetchLimit = 1
            return try context.count(for: notes) > 0 || context.count(for: entries) > 0
        }
    }

    /// Gives every note and entry without one its name key, once the vault passed its check.
    func indexUnindexedNames() throws {
        guard integrityRecord != nil else { return }
        guard try hasUnindexedNames() else {
            namesAreIndexed = true
            return
        }
        try change {
            let missing = try Predicate(format: "%K == nil", Self.nameKeyAttribute)
            for note in try context.fetch(FetchRequest<Note>(predicate: missing)) {
                note.nameIndex = try integrityRecord?.nameKey(note.title, entity: Note.entityName)
            }
            for entry in try context.fetch(FetchRequest<PasswordEntry>(predicate: missing)) {
                entry.nameIndex = try integrityRecord?.nameKey(entry.name, entity: PasswordEntry.entityName)
            }
        }
        namesAreIndexed = true
    }

    /// The objects of `T` named `name` (ignoring case), found through the name index, and the
    /// store and bucket they were looked for in: nil when `T` has no index or it cannot be used.
    func lookUpByNameKey<T: NamedEntity>(_ type: T.Type, _ name: String) throws
        -> (matches: [T], lookup: RowAuthentication.Lookup)?
    {
        guard namesAreIndexed, let integrityRecord, T.self is any NameIndexedEntity.Type else { return nil }
        let store = T.entityName == Note.entityName ? notesStore : passwordsStore
        let key = try integrityRecord.nameKey(name, entity: T.entityName)
        let found = try context.fetch(
            FetchRequest<T>(predicate: try Predicate(format: "%K == %@", Self.nameKeyAttribute, key)))
        let folded = IntegrityRecord.foldedName(name)
        let matches = found.filter { IntegrityRecord.foldedName($0.itemName) == folded }
        let entity = coordinator.managedObjectModel.entity(named: T.entityName)
        return (matches, RowAuthentication.Lookup(
            storeIdentifier: store.identifier, bucket: RowAuthentication.bucket(ofNameKey: key),
            table: entity?.tableName ?? "", column: entity?.attribute(named: Self.nameKeyAttribute)?.columnName ?? "",
            value: .blob(key)))
    }
}
