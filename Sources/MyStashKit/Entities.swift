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
    public var createdAt: Date { self["createdAt"] as? Date ?? .distantPast }
    public var updatedAt: Date { self["updatedAt"] as? Date ?? .distantPast }

    public override func awakeFromInsert() {
        self["createdAt"] = Date()
        self["updatedAt"] = Date()
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
    public var createdAt: Date { self["createdAt"] as? Date ?? .distantPast }
    public var updatedAt: Date { self["updatedAt"] as? Date ?? .distantPast }

    public override func awakeFromInsert() {
        self["createdAt"] = Date()
        self["updatedAt"] = Date()
    }
}

/// A category of password entries; names are plain and unique (ignoring case).
public final class Category: ManagedObject, ManagedEntity {
    public static let entityName = "Category"
    public var id: Int64 { objectID.primaryKey ?? 0 }
    public var name: String { self["name"] as? String ?? "" }

    public override func validateForSave(into errors: inout [ValidationError]) {
        guard let context = managedObjectContext, changedValues["name"] != nil || isInserted else { return }
        let others = (try? context.fetch(FetchRequest<Category>(predicate: try? Predicate(format: "name ==[c] %@", name)))) ?? []
        if others.contains(where: { $0 !== self && !$0.isDeleted }) {
            errors.append(ValidationError(code: .generic, object: self, key: "name", value: name,
                                          constraint: .custom("'\(name)' is already used by another category")))
        }
    }
}

/// Which version of a seed list the vault has loaded.
public final class SeedList: ManagedObject, ManagedEntity {
    public static let entityName = "List"
    public var name: String { self["name"] as? String ?? "" }
    public var version: Int { self["version"] as? Int ?? 0 }
}
