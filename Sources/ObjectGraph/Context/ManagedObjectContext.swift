import Foundation
import GRDB

/// A scratch pad of managed objects over a coordinator's stores, as `NSManagedObjectContext`.
///
/// Insert, change and delete objects, then ``save()`` to write every change at once, or
/// ``rollback()`` to forget them. A context holds one object per row (uniquing), keeps
/// inverse relationships in sync, applies delete rules and validates at save, and posts
/// ``objectsDidChangeNotification`` and ``didSaveNotification``.
///
/// For example:
///
/// ```swift
/// let context = ManagedObjectContext(coordinator: coordinator)
/// let note = context.insertNewObject(forEntityName: "Note")
/// note["title"] = "Groceries"
/// try context.save()
/// ```
///
/// - warning: A context and its objects are confined to the thread that uses them, as in Core Data.
public final class ManagedObjectContext {
    public let coordinator: PersistentStoreCoordinator
    public var model: ManagedObjectModel { coordinator.managedObjectModel }

    /// Posted by ``processPendingChanges()`` (and so before each save and fetch) when objects
    /// changed since the last time; `userInfo` holds ``insertedObjectsKey``, ``updatedObjectsKey``, ``deletedObjectsKey``.
    public static let objectsDidChangeNotification = Notification.Name("ObjectGraphObjectsDidChangeNotification")
    /// Posted after a save commits, with the same keys.
    public static let didSaveNotification = Notification.Name("ObjectGraphContextDidSaveNotification")
    public static let insertedObjectsKey = "inserted"
    public static let updatedObjectsKey = "updated"
    public static let deletedObjectsKey = "deleted"

    /// The notification center this context posts to.
    public let notificationCenter: NotificationCenter

    struct ObjectKey: Hashable {
        let rootEntityNumber: Int
        let primaryKey: Int64
    }

    var registered: [ObjectKey: ManagedObject] = [:]
    var insertedSet = ObjectSet()
    var updatedSet = ObjectSet()
    var deletedSet = ObjectSet()
    private var unprocessedInserted = ObjectSet()
    private var unprocessedUpdated = ObjectSet()
    private var unprocessedDeleted = ObjectSet()
    private var temporaryCounter = 0
    /// A failure while loading a relationship behind a property access (which cannot
    /// throw); the next save or fetch throws it, so nothing is decided on missing objects.
    var deferredError: Error?
    /// INSERT statements by entity name, built once.
    var insertSQL: [String: String] = [:]

    func throwDeferredError() throws {
        if let error = deferredError {
            deferredError = nil
            throw error
        }
    }

    public init(coordinator: PersistentStoreCoordinator, notificationCenter: NotificationCenter = .default) {
        self.coordinator = coordinator
        self.notificationCenter = notificationCenter
    }

    public var insertedObjects: [ManagedObject] { insertedSet.objects }
    public var updatedObjects: [ManagedObject] { updatedSet.objects }
    public var deletedObjects: [ManagedObject] { deletedSet.objects }
    public var registeredObjects: [ManagedObject] { Array(registered.values) + insertedSet.objects }
    public var hasChanges: Bool { !insertedSet.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty }

    // MARK: - Inserting and deleting

    /// Inserts a new object of the named entity, with the model's default values.
    ///
    /// - precondition: the entity exists and is not abstract.
    @discardableResult
    public func insertNewObject(forEntityName name: String) -> ManagedObject {
        guard let entity = model.entity(named: name) else { preconditionFailure("No entity named '\(name)' in the model") }
        let object = model.objectClass(for: entity).init(entity: entity)
        insert(object)
        return object
    }

    /// Inserts a new object of a typed class.
    @discardableResult
    public func insert<T: ManagedEntity>(_ type: T.Type) -> T {
        guard let object = insertNewObject(forEntityName: T.entityName) as? T else {
            preconditionFailure("Register \(T.self) with model.setClass(_:forEntityName:) before inserting it")
        }
        return object
    }

    public func insert(_ object: ManagedObject) {
        precondition(!object.entity.isAbstract, "Cannot insert an object of abstract entity \(object.entity.name)")
        precondition(object.managedObjectContext == nil || object.managedObjectContext === self, "The object belongs to another context")
        guard !insertedSet.contains(object) else { return }
        if deletedSet.contains(object) {
            deletedSet.remove(object)
            unprocessedDeleted.remove(object)
            return
        }
        temporaryCounter += 1
        object.objectID = ObjectID(entityName: object.entity.name, storeIdentifier: nil, primaryKey: nil, temporaryNumber: temporaryCounter)
        object.managedObjectContext = self
        for attribute in object.entity.attributes where object.values[attribute.name] == nil {
            if let value = attribute.defaultValue { object.values[attribute.name] = value }
        }
        for relationship in object.entity.relationships where relationship.isToMany {
            if object.values[relationship.name] == nil { object.values[relationship.name] = [ManagedObject]() }
            object.loadedToMany.insert(relationship.name)
        }
        insertedSet.insert(object)
        unprocessedInserted.insert(object)
        object.isPendingInsert = true
        object.awakeFromInsert()
    }

    /// Marks an object for deletion at the next save, when its delete rules apply.
    public func delete(_ object: ManagedObject) {
        precondition(object.managedObjectContext === self, "The object does not belong to this context")
        if insertedSet.contains(object) {
            insertedSet.remove(object)
            unprocessedInserted.remove(object)
            detachRelationships(of: object)
            object.managedObjectContext = nil
            object.isPendingInsert = false
            return
        }
        if deletedSet.insert(object) { unprocessedDeleted.insert(object) }
    }

    /// Removes a never-saved object from the other side of each of its relationships.
    private func detachRelationships(of object: ManagedObject) {
        for relationship in object.entity.relationships {
            guard let inverseName = relationship.inverseName,
                  let inverse = model.entity(named: relationship.destinationEntityName)?.relationship(named: inverseName) else { continue }
            let destinations = relationship.isToMany ? object.toManyObjects(relationship) : object.toOneObject(relationship).map { [$0] } ?? []
            for destination in destinations { destination.primitiveUnlink(inverse, from: object) }
        }
    }

    func objectDidChange(_ object: ManagedObject) {
        guard !insertedSet.contains(object), !deletedSet.contains(object) else { return }
        if updatedSet.insert(object) { unprocessedUpdated.insert(object) }
    }

    // MARK: - Notifications

    /// Posts ``objectsDidChangeNotification`` for the changes made since the last call.
    public func processPendingChanges() {
        guard !(unprocessedInserted.isEmpty && unprocessedUpdated.isEmpty && unprocessedDeleted.isEmpty) else { return }
        let userInfo: [String: Any] = [
            Self.insertedObjectsKey: unprocessedInserted.objects,
            Self.updatedObjectsKey: unprocessedUpdated.objects,
            Self.deletedObjectsKey: unprocessedDeleted.objects,
        ]
        unprocessedInserted.removeAll()
        unprocessedUpdated.removeAll()
        unprocessedDeleted.removeAll()
        notificationCenter.post(name: Self.objectsDidChangeNotification, object: self, userInfo: userInfo)
    }

    // MARK: - Rollback, refresh, reset

    /// Forgets every unsaved change: inserted objects leave the context, updated and
    /// deleted ones return to their last saved state.
    public func rollback() {
        for object in insertedSet.objects {
            object.managedObjectContext = nil
            object.isPendingInsert = false
        }
        for object in updatedSet.objects + deletedSet.objects { revertToCommitted(object) }
        insertedSet.removeAll()
        updatedSet.removeAll()
        deletedSet.removeAll()
        unprocessedInserted.removeAll()
        unprocessedUpdated.removeAll()
        unprocessedDeleted.removeAll()
    }

    private func revertToCommitted(_ object: ManagedObject) {
        object.values = object.committedValues
        object.loadedToMany = []
        object.changedKeys = []
    }

    /// Re-reads an object from its store. Without `mergeChanges` its unsaved changes are
    /// dropped; with it they are kept over the fresh values.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) throws {
        guard let primaryKey = object.objectID.primaryKey else { return }
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?"
        let row = try wrapStoreErrors(.objectNotFound, "cannot refresh \(object)") {
            try coordinator.read { db in try Row.fetchOne(db, sql: sql, arguments: [primaryKey]) }
        }
        guard let row else {
            throw ObjectGraphError(code: .objectNotFound, message: "\(object.entity.name) row \(primaryKey) no longer exists", objects: [object])
        }
        let kept = mergeChanges ? object.changedKeys : []
        let keptValues = object.values.filter { kept.contains($0) }
        try load(row, into: object, root: root, store: store)
        object.values.merge(keptValues)
        object.changedKeys = kept
        if kept.isEmpty { updatedSet.remove(object); unprocessedUpdated.remove(object) }
    }

    /// Forgets every object and change.
    public func reset() {
        rollback()
        for object in registered.values { object.managedObjectContext = nil }
        registered = [:]
    }

    // MARK: - Objects from rows

    /// The registered object for a row, updated from `row` unless it has unsaved changes,
    /// or a new object made from `row`.
    func materialize(_ row: Row, root: EntityDescription, store: PersistentStore, decoding: Set<String>? = nil) throws -> ManagedObject {
        let header = try StoredRowHeader(row, root: root, store: store)
        let primaryKey = header.primaryKey
        let key = ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)
        if let object = registered[key] {
            if !object.hasChanges, object.version != header.version {
                try load(row, into: object, root: root, store: store, decoding: decoding)
            }
            return object
        }
        let entity = model.entity(number: header.entityNumber).flatMap { $0.rootEntity === root ? $0 : nil } ?? root
        let object = model.objectClass(for: entity).init(entity: entity)
        object.objectID = ObjectID(entityName: entity.name, storeIdentifier: store.identifier, primaryKey: primaryKey, temporaryNumber: nil)
        object.managedObjectContext = self
        try load(row, into: object, root: root, store: store, decoding: decoding)
        registered[key] = object
        return object
    }

    /// Fills an object's values from its row, decoding transformed attributes in place.
    func load(_ row: Row, into object: ManagedObject, root: EntityDescription, store: PersistentStore, decoding: Set<String>? = nil) throws {
        let entity = object.entity
        var values = PropertyValues(minimumCapacity: entity.storedColumns.count + entity.storedToOne.count)
        let header = try StoredRowHeader(row, root: root, store: store)
        let primaryKey = header.primaryKey
        for column in entity.storedColumns {
            let dbValue = row[column.index] as DatabaseValue
            guard column.type == .transformable else {
                if let value = StoredValues.value(dbValue, type: column.type) { values[column.name] = value }
                continue
            }
            guard case .blob(let data) = dbValue.storage else {
                // Transformers write BLOBs; anything else, or nothing where a value is required, was not written by us.
                if dbValue.isNull, entity.attribute(named: column.name)?.isOptional ?? true { continue }
                throw StoredRowHeader.damaged(store: store, root: root, primaryKey: primaryKey,
                                              "column \(column.columnName) holds \(StoredRowHeader.kind(of: dbValue)) "
                                                + "where \(entity.name).\(column.name) keeps its encoded value")
            }
            let place = ValuePlace(storeIdentifier: store.identifier, entityName: entity.name, attributeName: column.name, primaryKey: primaryKey)
            let encoded = EncodedValue(data: data, place: place)
            values[column.name] = decoding.map { $0.contains(column.name) } ?? true
                ? try decode(encoded, transformerName: column.transformerName, entity: entity, key: column.name) : encoded
        }
        for (relationship, index) in entity.storedToOne {
            if let destination = try StoredRowHeader.destinationKey(
                row, at: index, column: relationship.columnName, root: root, store: store, primaryKey: primaryKey) {
                values[relationship.name] = FaultReference(primaryKey: destination)
            }
        }
        for attribute in entity.transientAttributes {
            if let value = object.values[attribute.name] { values[attribute.name] = value }
        }
        object.values = values
        object.committedValues = values
        object.loadedToMany = []
        object.changedKeys = []
        object.version = header.version
    }

    func decode(_ encoded: EncodedValue, transformerName: String?, entity: EntityDescription, key: String) throws -> Any {
        try transformer(named: transformerName, entity: entity, key: key).reverseTransformedValue(encoded.data, at: encoded.place)
    }

    /// Decodes every value of `object` a fetch left encoded (see `propertiesToFetch`).
    ///
    /// - throws: the transformer's error for the first value that cannot be decoded.
    public func decodeValues(of object: ManagedObject) throws {
        for (key, value) in object.values {
            guard let encoded = value as? EncodedValue, let attribute = object.entity.attribute(named: key) else { continue }
            let decoded = try decode(encoded, transformerName: attribute.valueTransformerName, entity: object.entity, key: key)
            object.values[key] = decoded
            if object.committedValues[key] is EncodedValue { object.committedValues[key] = decoded }
        }
    }

    func transformer(named transformerName: String?, entity: EntityDescription, key: String) throws -> ValueTransformer {
        let name = transformerName ?? ValueTransformerRegistry.defaultTransformerName
        guard let transformer = coordinator.valueTransformers.transformer(named: name) else {
            throw ObjectGraphError(code: .saveFailed, message: "no value transformer named '\(name)' is registered (for \(entity.name).\(key))")
        }
        return transformer
    }

    /// The object with a primary key in a relationship's destination table, or nil when gone.
    func object(primaryKey: Int64, destinationOf relationship: RelationshipDescription) -> ManagedObject? {
        guard let destination = model.entity(named: relationship.destinationEntityName) else { return nil }
        do {
            return try object(primaryKey: primaryKey, root: destination.rootEntity)
        } catch {
            if deferredError == nil { deferredError = error }
            return nil
        }
    }

    func object(primaryKey: Int64, root: EntityDescription) throws -> ManagedObject? {
        if let object = registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)] { return object }
        let store = try coordinator.store(for: root)
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) WHERE Z_PK = ?"
        return try coordinator.read { db in
            try Row.fetchOne(db, sql: sql, arguments: [primaryKey]).map { try materialize($0, root: root, store: store) }
        }
    }

    /// The object with an ID, read from its store if needed.
    ///
    /// - throws: ``ObjectGraphError`` 133000 when no such object exists.
    public func existingObject(with objectID: ObjectID) throws -> ManagedObject {
        if let object = insertedSet.objects.first(where: { $0.objectID == objectID }) { return object }
        guard let primaryKey = objectID.primaryKey, let entity = model.entity(named: objectID.entityName),
              let object = try object(primaryKey: primaryKey, root: entity.rootEntity) else {
            throw ObjectGraphError(code: .objectNotFound, message: "no object with ID \(objectID)")
        }
        return object
    }

    /// The object of an entity (or a sub-entity) with a primary key, or nil when there is none.
    public func existingObject(entityName: String, primaryKey: Int64) throws -> ManagedObject? {
        guard let entity = model.entity(named: entityName) else {
            throw ObjectGraphError(code: .objectNotFound, message: "the model has no entity named '\(entityName)'")
        }
        guard let object = try object(primaryKey: primaryKey, root: entity.rootEntity), object.entity.isKind(of: entity) else { return nil }
        return deletedSet.contains(object) ? nil : object
    }

    /// The primary keys of every saved row of an entity (and its sub-entities), read
    /// without decoding any value: for walking a large or damaged store row by row.
    public func primaryKeys(forEntityName entityName: String) throws -> [Int64] {
        guard let entity = model.entity(named: entityName) else {
            throw ObjectGraphError(code: .objectNotFound, message: "the model has no entity named '\(entityName)'")
        }
        let store = try coordinator.store(for: entity)
        let numbers = entity.selfAndDescendants.map { String($0.entityNumber) }.joined(separator: ", ")
        return try coordinator.read { db in
            try Int64.fetchAll(db, sql: "SELECT Z_PK FROM \(store.qualified(entity.rootEntity.tableName)) WHERE Z_ENT IN (\(numbers)) ORDER BY Z_PK")
        }
    }

    /// Reads the destinations of a to-many relationship from the store.
    func loadToMany(_ relationship: RelationshipDescription, of object: ManagedObject) -> [ManagedObject] {
        guard let primaryKey = object.objectID.primaryKey ?? object.pendingPrimaryKey,
              let destination = model.entity(named: relationship.destinationEntityName) else { return [] }
        let root = destination.rootEntity
        guard let store = try? coordinator.store(for: root) else { return [] }
        let columns = root.selectColumns.map { "t0.\($0)" }.joined(separator: ", ")
        let sql: String
        if SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            sql = "SELECT \(columns) FROM \(store.qualified(root.tableName)) t0 JOIN \(store.qualified(join.name)) j ON j.\(join.destinationColumn) = t0.Z_PK WHERE j.\(join.sourceColumn) = ?"
        } else {
            guard let inverse = SQLiteSchema.inverse(of: relationship, in: model) else { return [] }
            sql = "SELECT \(columns) FROM \(store.qualified(root.tableName)) t0 WHERE t0.\(inverse.columnName) = ?"
        }
        do {
            let objects = try coordinator.read { db in
                try Row.fetchAll(db, sql: sql, arguments: [primaryKey]).map { try materialize($0, root: root, store: store) }
            }
            return objects.filter { $0.entity.isKind(of: destination) }
        } catch {
            if deferredError == nil { deferredError = error }
            return []
        }
    }
}
