import Foundation
import ObjectGraph

/// A note: title and text are encrypted.
public final class Note: ManagedObject, ManagedEntity {
    public static let entityName = "Note"
    public var id: Int64 { objectID.primaryKey ?? 0 }
    public var title: String {
        get { self["title"] as? String ?? "" }
        set { self["title"] = newValue }
    }
    public var text: String {
        get { self["text"] as? String ?? "" }
        set { self["text"] = newValue }
    }
    /// The folder an import brought the note from (model version 2).
    public var folder: String? { self["folder"] as? String }
    public var createdAt: Date { self["createdAt"] as? Date ?? .distantPast }
    public var updatedAt: Date { self["updatedAt"] as? Date ?? .distantPast }

    public override func awakeFromInsert() {
        self["createdAt"] = Date()
        self["updatedAt"] = Date()
        self[SyncKeys.uuid] = UUID()
    }
}

/// A password entry (the book's `System` entity): every field but the dates is encrypted.
public final class PasswordEntry: ManagedObject, ManagedEntity {
    public static let entityName = "System"
    public var id: Int64 { objectID.primaryKey ?? 0 }
    public var name: String { self["name"] as? String ?? "" }
    public var userId: String? { self["userId"] as? String }
    public var password: String { self["password"] as? String ?? "" }
    public var url: String? { self["url"] as? String }
    public var notes: String? { self["notes"] as? String }
    public var category: Category? { self["category"] as? Category }
    /// An `otpauth://totp/` URI or a base32 secret (model version 2).
    public var totp: String? { self["totp"] as? String }
    /// Addresses beyond `url`, in order.
    public var moreURLs: [String] { (self["moreURLs"] as? String)?.split(separator: "\n").map(String.init) ?? [] }
    public var isFavorite: Bool { self["favorite"] as? Bool ?? false }
    /// Custom fields in their order.
    public var fields: [CustomField] {
        (self["fields"] as? [ManagedObject] ?? []).compactMap { $0 as? CustomField }.sorted {
            $0.position < $1.position
        }
    }
    /// Earlier passwords, the most recently replaced first.
    public var history: [PasswordHistoryItem] {
        (self["history"] as? [ManagedObject] ?? []).compactMap { $0 as? PasswordHistoryItem }.sorted {
            $0.replacedAt > $1.replacedAt
        }
    }
    /// Its attachments that are complete (model version 4), by name.
    public var attachments: [Attachment] {
        (self["attachments"] as? [ManagedObject] ?? []).compactMap { $0 as? Attachment }.filter(\.isComplete)
            .sorted { $0.name.localizedStandardCompare($1.name) == .orderedAscending }
    }
    public var createdAt: Date { self["createdAt"] as? Date ?? .distantPast }
    public var updatedAt: Date { self["updatedAt"] as? Date ?? .distantPast }

    public override func awakeFromInsert() {
        self["createdAt"] = Date()
        self["updatedAt"] = Date()
        self[SyncKeys.uuid] = UUID()
    }

    /// Addresses must name a host with a scheme the model allows (``EntryRules``). Only
    /// new or changed ones: a vault may hold older addresses this rule came after.
    public override func validateForSave(into errors: inout [ValidationError]) {
        let schemes = EntryRules.urlSchemes(of: entity)
        for key in ["url", "moreURLs"] where isInserted || changedValues[key] != nil {
            guard let text = self[key] as? String else { continue }
            // Spaces and control characters break the model's pattern, which says so itself.
            let breaksPattern = CharacterSet.whitespacesAndNewlines.union(.controlCharacters)
            let addresses = text.split(separator: "\n").map(String.init)
                .filter { !$0.unicodeScalars.contains(where: breaksPattern.contains) }
            let problems = addresses.lazy.compactMap { EntryRules.problem(withAddress: $0, schemes: schemes) }
            if let problem = problems.first {
                errors.append(ValidationError(code: .generic, object: self, key: key, value: text,
                                              constraint: .custom(problem)))
            }
        }
    }
}

/// A named value of an entry beyond the standard fields (a PIN, a security question...).
public final class CustomField: ManagedObject, ManagedEntity {
    public static let entityName = "Field"
    public var name: String { self["name"] as? String ?? "" }
    public var value: String { self["value"] as? String ?? "" }
    /// Hidden values are masked like passwords unless revealed.
    public var isHidden: Bool { self["hidden"] as? Bool ?? false }
    public var position: Int { self["position"] as? Int ?? 0 }
}

/// A password an entry had before, with when it was replaced.
public final class PasswordHistoryItem: ManagedObject, ManagedEntity {
    public static let entityName = "PasswordHistory"
    public var password: String { self["password"] as? String ?? "" }
    public var replacedAt: Date { self["replacedAt"] as? Date ?? .distantPast }
}

/// A category of password entries; names are plain and unique (ignoring case).
public final class Category: ManagedObject, ManagedEntity {
    public static let entityName = "Category"
    public var id: Int64 { objectID.primaryKey ?? 0 }
    public var name: String { self["name"] as? String ?? "" }

    public override func awakeFromInsert() { self[SyncKeys.uuid] = UUID() }

    /// - throws: the store's error when the other categories cannot be read: a name is never
    ///   saved unchecked.
    public override func validateForSave(into errors: inout [ValidationError]) throws {
        guard let context = managedObjectContext, changedValues["name"] != nil || isInserted else { return }
        let others = try context.fetch(FetchRequest<Category>(predicate: try Predicate(format: "name ==[c] %@", name)))
        // As they stand in the context: one renamed in the same save no longer clashes.
        if others.contains(where: {
            $0 !== self && !$0.isDeleted && $0.name.caseInsensitiveCompare(name) == .orderedSame
        }) {
            errors.append(ValidationError(code: .generic, object: self, key: "name", value: name,
                                          constraint: .custom("'\(name)' is already used by another category")))
        }
    }
}

/// A file kept with an entry (model version 4): its name encrypted, its bytes in encrypted
/// chunks written one save at a time; it shows only once `complete` says the last one is saved.
public final class Attachment: ManagedObject, ManagedEntity {
    /// After `System` in name order (model version 5), as every new entity must be: see the model.
    public static let entityName = "SystemAttachment"
    public var id: Int64 { objectID.primaryKey ?? 0 }
    public var name: String { self["name"] as? String ?? "" }
    /// Its length in bytes.
    public var size: Int64 { Int64(self["size"] as? Int ?? 0) }
    public var chunkCount: Int { self["chunkCount"] as? Int ?? 0 }
    public var isComplete: Bool { self["complete"] as? Bool ?? false }
    public var createdAt: Date { self["createdAt"] as? Date ?? .distantPast }

    public override func awakeFromInsert() {
        self["createdAt"] = Date()
        self[SyncKeys.uuid] = UUID()
    }
}

/// One piece of an attachment's bytes, in order by `index`.
final class AttachmentChunk: ManagedObject, ManagedEntity {
    static let entityName = "SystemAttachmentChunk"
    var index: Int { self["index"] as? Int ?? 0 }
    var data: Data { self["data"] as? Data ?? Data() }
}

/// Which version of a seed list the vault has loaded.
public final class SeedList: ManagedObject, ManagedEntity {
    public static let entityName = "List"
    public var name: String { self["name"] as? String ?? "" }
    public var version: Int { self["version"] as? Int ?? 0 }
}

/// This machine's sync bookkeeping (model version 3): one row, its key encrypted like every secret.
final class SyncStateRow: ManagedObject, ManagedEntity {
    static let entityName = "SyncState"
}

/// Keys of what sync adds to the model.
enum SyncKeys {
    /// The identity sync matches notes, entries and categories by across machines.
    static let uuid = "uuid"
}
