import Foundation
import GRDB

extension PersistentStoreCoordinator {
    /// Makes the store itself refuse two rows of `entity` whose `attribute` values are equal
    /// (ignoring ASCII case with `caseInsensitive`), whoever writes them: a unique index.
    ///
    /// Returns false, creating nothing, when the store already holds such duplicates.
    ///
    /// - throws: ``ObjectGraphError`` when the index cannot be written (busy, read-only, ...).
    @discardableResult
    public func ensureUniqueIndex(on entityName: String, attribute attributeName: String, caseInsensitive: Bool) throws
        -> Bool
    {
        guard let entity = managedObjectModel.entity(named: entityName),
            let attribute = entity.attribute(named: attributeName)
        else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "the model has no attribute \(entityName).\(attributeName)")
        }
        let root = entity.rootEntity
        let store = try store(for: root)
        let (name, definition) = Self.uniqueIndex(root: root, attribute: attribute, caseInsensitive: caseInsensitive)
        let exists = try wrapStoreErrors(.saveFailed, "cannot read the indexes of \(root.name)") {
            try read { db in
                try Bool.fetchOne(
                    db,
                    sql:
                        "SELECT EXISTS (SELECT 1 FROM \(store.qualified("sqlite_master")) "
                            + "WHERE type = 'index' AND name = ?)",
                    arguments: [name]) ?? false
            }
        }
        guard !exists else { return true }
        do {
            try write { db in
                try db.execute(sql: "CREATE UNIQUE INDEX IF NOT EXISTS \(store.qualified(name)) \(definition)")
            }
            return true
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            return false
        } catch let error as DatabaseError {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "cannot index \(root.name).\(attributeName): \(error.message ?? "SQLite error")",
                underlyingError: error)
        }
    }

    /// The unique index ``ensureUniqueIndex(on:attribute:caseInsensitive:)`` makes, as the store
    /// holding it and the statement creating it (unqualified), for ``schemaProblems(extraObjects:)``.
    public func uniqueIndexStatement(on entityName: String, attribute attributeName: String, caseInsensitive: Bool)
        throws -> (storeIdentifier: String, statement: String)
    {
        guard let entity = managedObjectModel.entity(named: entityName),
            let attribute = entity.attribute(named: attributeName)
        else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "the model has no attribute \(entityName).\(attributeName)")
        }
        let (name, definition) = Self.uniqueIndex(
            root: entity.rootEntity, attribute: attribute, caseInsensitive: caseInsensitive)
        return (try store(for: entity.rootEntity).identifier, "CREATE UNIQUE INDEX IF NOT EXISTS \(name) \(definition)")
    }

    private static func uniqueIndex(root: EntityDescription, attribute: AttributeDescription, caseInsensitive: Bool)
        -> (name: String, definition: String)
    {
        ("\(root.tableName)_\(attribute.columnName)_UNIQUE\(caseInsensitive ? "_NOCASE" : "")",
         "ON \(root.tableName) (\(attribute.columnName)\(caseInsensitive ? " COLLATE NOCASE" : ""))")
    }
}
