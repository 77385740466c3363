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
/// - warning: A context and its objects belong to its queue, as in Core Data: use them inside
///   `perform(_:)` or `performAndWait(_:)` (or on the main thread for a main-queue context),
///   and pass ``ObjectID``s, never objects, between contexts.
public final class ManagedObjectContext {
    public let coordinator: PersistentStoreCoordinator
    public var model: ManagedObjectModel { coordinator.managedObjectModel }

    /// Posted by ``processPendingChanges()`` (and so before each save and fetch) when objects
    /// changed since the last time; `userInfo` holds ``insertedObjectsKey``, ``updatedObjectsKey``,
    /// ``deletedObjectsKey``.
    public static let objectsDidChangeNotification = Notification.Name("ObjectGraphObjectsDidChangeNotification")
    /// Posted after a save commits, with the same keys.
    public static let didSaveNotification = Notification.Name("ObjectGraphContextDidSaveNotification")
    public static let insertedObjectsKey = "inserted"
    public static let updatedObjectsKey = "updated"
    public static let deletedObjectsKey = "deleted"
    /// In ``didSaveNotification``: the saved objects' IDs (an ``ObjectIDList``), safe to read
    /// on any queue, for ``mergeChanges(fromContextDidSave:)``. The deleted IDs include rows a
    /// cascade deleted in SQL without making objects (see ``save()``), which ``deletedObjectsKey``
    /// does not list.
    public static let insertedObjectIDsKey = "insertedObjectIDs"
    public static let updatedObjectIDsKey = "updatedObjectIDs"
    public static let deletedObjectIDsKey = "deletedObjectIDs"

    /// The notification center this context posts to.
    public let notificationCenter: NotificationCenter
    /// How conflicts with changes saved elsewhere are settled at save and merge (`.error` by default).
    public var mergePolicy = MergePolicy.error
    /// Records changes for ``undo()`` and ``redo()``; nil (the default) records nothing.
    public var undoManager: ContextUndoManager?
    /// The context's name, recorded with each save in a store's history (Core Data's `name`).
    public var name: String?
    /// Who saves, recorded with each save in a store's history, as Core Data's `transactionAuthor`.
    public var transactionAuthor: String?

    struct ObjectKey: Hashable {
        let rootEntityNumber: Int
        let primaryKey: Int64

        func hash(into hasher: inout Hasher) {
            hasher.combine(primaryKey ^ Int64(truncatingIfNeeded: rootEntityNumber) << 48)
        }

        /// Every fetched row looks its key up and registers it: a seeded splitmix64 mix of one
        /// word instead of a full `Hasher` (a third of a 200k-row fetch's time went there).
        func _rawHashValue(seed: Int) -> Int {
            var bits = UInt64(bitPattern: primaryKey ^ Int64(truncatingIfNeeded: rootEntityNumber) << 48)
                ^ UInt64(bitPattern: Int64(seed))
            bits = (bits ^ (bits >> 30)) &* 0xbf58476d1ce4e5b9
            bits = (bits ^ (bits >> 27)) &* 0x94d049bb133111eb
            return Int(truncatingIfNeeded: bits ^ (bits >> 31))
        }
    }

    var registered = ObjectRegistry()
    /// The cascades the save under way runs in SQL (``StoreCascade``).
    var storeCascadeKeys: Set<StoreCascade.Key> = []
    /// The objects a merge policy settled or a new object's adoption changed during the save under
    /// way, as they were, oldest first (nil outside a save). A failed save restores them newest
    /// first, so each ends as it was before the save whatever took a second snapshot of it.
    var settledInSave: [SettledObject]?
    /// The objects of `settledInSave` the merge policy settled: each is remembered once.
    var rememberedInSave: Set<ObjectIdentifier> = []
    /// The scopes of this context's object IDs (see ``objectID(of:storeIdentifier:kind:number:)``).
    var idScopes: [IDScopeKey: ObjectIDScope] = [:]
    /// The scope each new object of an entity starts in, kept alive while this context makes
    /// objects of it: without a holder it was freed and made again for every object.
    private var keptUnassignedScopes: [ObjectIdentifier: ObjectIDScope] = [:]
    /// Objects an undo brought back after their deletion was saved, by the rows they had; and the
    /// to-ones of such objects that name a row not brought back yet, by that row.
    var broughtBack: [ObjectKey: WeakObject] = [:]
    var awaitingBroughtBack: [ObjectKey: [(object: WeakObject, slot: Int)]] = [:]
    struct WeakObject {
        weak var object: ManagedObject?
    }
    struct IDScopeKey: Hashable {
        let entity: ObjectIdentifier
        let kind: ObjectIDScope.Kind
    }
    var insertedSet = ObjectSet(.inserted)
    var updatedSet = ObjectSet(.updated)
    var deletedSet = ObjectSet(.deleted)
    var unprocessedInserted = ObjectSet(.unprocessedInserted)
    var unprocessedUpdated = ObjectSet(.unprocessedUpdated)
    var unprocessedDeleted = ObjectSet(.unprocessedDeleted)
    /// Temporary IDs are unique in the process, so a child's copy of its parent's insert keeps its ID.
    private static let temporaryLock = NSLock()
    nonisolated(unsafe) private static var temporaryCounter = 0
    static func nextTemporaryNumber() -> Int {
        temporaryLock.withLock {
            temporaryCounter += 1
            return temporaryCounter
        }
    }
    /// Counts saves, so undo knows whether a recorded state predates one.
    var saveGeneration = 0
    /// A failure while loading a relationship behind a property access (which cannot
    /// throw); the next save or fetch throws it, so nothing is decided on missing objects.
    var deferredError: Error?
    /// INSERT statements by entity name, built once.
    var insertSQL: [String: String] = [:]
    /// The stores' `data_version`s when this context last looked (see `mergeExternalChanges()`).
    var knownExternalChangeToken: [Int]?

    func throwDeferredError() throws {
        if let error = deferredError {
            deferredError = nil
            throw error
        }
    }

    /// The queue `perform(_:)` and `performAndWait(_:)` run on.
    public let concurrencyType: ConcurrencyType
    let queue: DispatchQueue
    /// The context whose save this context's save pushes into, or nil when it saves to the stores.
    public let parent: ManagedObjectContext?
    /// Objects a child read whose rows its parent deleted without saving yet: fetches leave them out.
    /// By row, not by object: an object left out of a fetch is freed, and its address reused.
    var deletedInParent: Set<ObjectKey> = []
    /// The objects this child inserted and pushed, with the parent's object for each.
    var pushedInserts: [ObjectIdentifier: (child: ManagedObject, parent: ManagedObject)] = [:]
    /// Observes other contexts' saves while ``automaticallyMergesChangesFromParent`` is on.
    var mergeObserver: NSObjectProtocol?
    /// This child's copies of the objects its parent inserted and has not saved, by their ID there.
    var parentInserted: [ObjectID: ManagedObject] = [:]

    /// A context over a coordinator's stores.
    ///
    /// - parameter concurrencyType: the queue its `perform(_:)` blocks run on: a private
    ///   serial queue (the default) or the main queue.
    public init(coordinator: PersistentStoreCoordinator, notificationCenter: NotificationCenter = .default,
                concurrencyType: ConcurrencyType = .privateQueue) {
        self.coordinator = coordinator
        self.notificationCenter = notificationCenter
        self.concurrencyType = concurrencyType
        self.parent = nil
        self.queue = Self.makeQueue(concurrencyType)
    }

    /// A child context: it reads through its parent's coordinator, and its ``save()`` pushes
    /// its changes into `parent` (as unsaved changes there) instead of writing the stores.
    ///
    /// A child reads what the stores hold, with the parent's unsaved changes to those objects'
    /// attributes and to-one relationships on top, and without the objects the parent deleted.
    /// Its fetches, as Core Data's, also return the objects the parent (or an ancestor) inserted
    /// and has not saved, and match the rows the parent changed on the parent's values. To-many
    /// changes the parent made to saved objects are not seen from their other side.
    public init(parent: ManagedObjectContext, concurrencyType: ConcurrencyType = .privateQueue) {
        self.coordinator = parent.coordinator
        self.notificationCenter = parent.notificationCenter
        self.concurrencyType = concurrencyType
        self.parent = parent
        self.queue = Self.makeQueue(concurrencyType)
    }

    deinit {
        if let mergeObserver { notificationCenter.removeObserver(mergeObserver) }
    }

    public var insertedObjects: [ManagedObject] { insertedSet.objects }
    public var updatedObjects: [ManagedObject] { updatedSet.objects }
    public var deletedObjects: [ManagedObject] { deletedSet.objects }
    public var registeredObjects: [ManagedObject] {
        let pushed = pushedInserts.values.map(\.child).filter { $0.managedObjectContext === self }
        return registered.values + insertedSet.objects + pushed + parentInserted.values
    }
    public var hasChanges: Bool { !insertedSet.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty }

    // MARK: - Inserting and deleting

    /// Inserts a new object of the named entity, with the model's default values.
    ///
    /// - precondition: the entity exists and is not abstract.
    @discardableResult
    public func insertNewObject(forEntityName name: String) -> ManagedObject {
        guard let entity = model.entity(named: name) else {
            preconditionFailure("No entity named '\(name)' in the model")
        }
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
        precondition(
            object.managedObjectContext == nil || object.managedObjectContext === self,
            "The object belongs to another context")
        if object.managedObjectContext === self {
            // Already this context's (inserted, fetched or saved): only a deleted one comes back.
            if deletedSet.contains(object) { undelete(object) }
            return
        }
        // An object without a context is in no set of any (its old context may be gone).
        object.memberships = []
        object.assign(temporaryID(of: object.entity, number: Self.nextTemporaryNumber()), in: self)
        for attribute in object.entity.attributes
        where attribute.defaultValue != nil && object.values[attribute.name] == nil {
            object.values[attribute.name] = attribute.defaultValue
        }
        for relationship in object.entity.relationships where relationship.isToMany {
            // Never saved, so nothing else to read: what it holds is all of it. One still empty
            // stays absent until it is read or changed (loaded and absent is empty): an import of
            // 100,000 entries made 300,000 empty members for their fields, history and attachments.
            if let members = object.values[relationship.name] as? RelationshipMembers, !members.isComplete {
                object.values[relationship.name] = RelationshipMembers(complete: members.objects)
            }
            object.loadedToMany.insert(relationship.name)
        }
        insertedSet.insert(object)
        unprocessedInserted.insert(object)
        object.isPendingInsert = true
        undoManager?.register { [weak self] in self?.undoInsert(object) }
        object.awakeFromInsert()
    }

    /// Marks an object for deletion at the next save, when its delete rules apply.
    public func delete(_ object: ManagedObject) {
        precondition(object.managedObjectContext === self, "The object does not belong to this context")
        markDeleted(object)
    }

    /// ``delete(_:)`` of an object known to be this context's (a cascade checks each once).
    func markDeleted(_ object: ManagedObject) {
        if insertedSet.contains(object) {
            undoManager?.register { [weak self] in self?.reinsert(object) }
            insertedSet.remove(object)
            // Changed since its insertion was announced, it is not announced as updated either.
            discardUnprocessed(object)
            // Its cascade goes with it, as a saved object's would at the save: children inserted
            // with it and required to have it were left parentless, and failed the save.
            let cascaded = object.entity.relationships.filter { $0.deleteRule == .cascade }.flatMap { relationship in
                relationship.isToMany
                    ? object.toManyObjects(relationship) : object.toOneObject(relationship).map { [$0] } ?? []
            }
            detachRelationships(of: object)
            object.managedObjectContext = nil
            object.isPendingInsert = false
            for destination in cascaded where destination.managedObjectContext === self { markDeleted(destination) }
            return
        }
        guard deletedSet.insert(object) else { return }
        unprocessedDeleted.insert(object)
        undoManager?.register { [weak self] in self?.undelete(object) }
    }

    /// Removes a never-saved object from the other side of each of its relationships.
    private func detachRelationships(of object: ManagedObject) {
        for relationship in object.entity.relationships {
            guard let inverseName = relationship.inverseName,
                let inverse = model.entity(named: relationship.destinationEntityName)?.relationship(named: inverseName)
            else { continue }
            let destinations =
                relationship.isToMany
                ? object.toManyObjects(relationship) : object.toOneObject(relationship).map { [$0] } ?? []
            for destination in destinations { destination.primitiveUnlink(inverse, from: object) }
        }
    }

    func objectDidChange(_ object: ManagedObject) {
        guard !insertedSet.contains(object), !deletedSet.contains(object) else { return }
        updatedSet.insert(object)
        // Announced again when it changes again after a processPendingChanges().
        unprocessedUpdated.insert(object)
    }

    /// An object inserted since the last save changed: announced as updated, unless its
    /// insertion is not announced yet.
    func insertedObjectDidChange(_ object: ManagedObject) {
        guard insertedSet.contains(object), !unprocessedInserted.contains(object) else { return }
        unprocessedUpdated.insert(object)
    }

    /// Leaves an object out of the next ``objectsDidChangeNotification``.
    func discardUnprocessed(_ object: ManagedObject) {
        unprocessedInserted.remove(object)
        unprocessedUpdated.remove(object)
        unprocessedDeleted.remove(object)
    }

    // MARK: - Notifications

    /// Posts ``objectsDidChangeNotification`` for the changes made since the last call.
    public func processPendingChanges() {
        // As in Core Data, delete rules apply at the end of the event, in its undo group.
        let deletions = unprocessedDeleted.objects.filter { deletedSet.contains($0) }
        if !deletions.isEmpty { propagateDeletes(of: deletions) }
        undoManager?.endEventGroup()
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
        undoManager?.removeAllActions()
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
        object.isPreparedForDeletion = false
        object.values = object.committedValues
        object.loadedToMany = []
        object.changedKeys = []
    }

    /// Brings an object up to date with its store, as Core Data's `refresh(_:mergeChanges:)`.
    ///
    /// Without `mergeChanges` its unsaved changes are dropped and it becomes a fault
    /// (``ManagedObject/isFault``): its values are let go and read again on next access. With
    /// it, it is re-read now and its unsaved changes are kept over the fresh values.
    ///
    /// - throws: ``ObjectGraphError`` 133000 when, merging, its row no longer exists.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) throws {
        guard let primaryKey = object.objectID.primaryKey else { return }
        if !mergeChanges, !insertedSet.contains(object) {
            if deletedSet.contains(object) { deletedSet.remove(object); unprocessedDeleted.remove(object) }
            updatedSet.remove(object)
            unprocessedUpdated.remove(object)
            turnIntoFault(object)
            return
        }
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let sql =
            "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) WHERE Z_PK = "
                + "?"
        let row = try wrapStoreErrors(.objectNotFound, "cannot refresh \(object)") {
            try coordinator.read { db in try Row.fetchOne(db, sql: sql, arguments: [primaryKey]) }
        }
        guard let row else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "\(object.entity.name) row \(primaryKey) no longer exists",
                objects: [object])
        }
        let kept = mergeChanges ? object.changedKeys : []
        let keptValues = object.values.filter { kept.contains($0) }
        try load(row, into: object, root: root, store: store)
        object.values.merge(keptValues)
        object.changedKeys = kept
        // A kept to-many is read again, its unsaved changes applied (a whole replacement stays whole).
        for name in object.entity.toManyRelationshipNames where kept.contains(name) {
            guard let members = object.values[name] as? RelationshipMembers else { continue }
            if members.rewritesAll {
                object.loadedToMany.insert(name)
            } else {
                object.values[name] = members.unsavedChanges()
            }
        }
        if kept.isEmpty { updatedSet.remove(object); unprocessedUpdated.remove(object) }
    }

    /// Lets go of an unchanged object's values; they are read again on its next access.
    func turnIntoFault(_ object: ManagedObject) {
        object.values = object.entity.emptyValues
        object.committedValues = PropertyValues()
        object.loadedToMany = []
        object.changedKeys = []
        object.isFault = true
    }

    /// Reads a fault's row into it (with a child's parent's unsaved state on top).
    ///
    /// - throws: ``ObjectGraphError`` 133000 when its row no longer exists; the store's error.
    func fulfillFault(_ object: ManagedObject) throws {
        guard let primaryKey = object.objectID.primaryKey else { return }
        let root = object.entity.rootEntity
        let store = try coordinator.store(for: root)
        let sql = "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) "
            + "WHERE Z_PK = ?"
        let row = try wrapStoreErrors(.objectNotFound, "cannot read \(object)") {
            try coordinator.read { db in try Row.fetchOne(db, sql: sql, arguments: [primaryKey]) }
        }
        guard let row else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "\(object.entity.name) row \(primaryKey) no longer exists",
                objects: [object])
        }
        try load(row, into: object, root: root, store: store)
        adoptParentState(of: object, key: ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey))
    }

    /// Forgets every object and change.
    public func reset() {
        broughtBack = [:]
        awaitingBroughtBack = [:]
        rollback()
        for object in registered.values + parentInserted.values { object.managedObjectContext = nil }
        registered.removeAll()
        parentInserted.removeAll()
    }

    // MARK: - Objects from rows

    /// An ID of `entity` in a scope of this context's own.
    func objectID(of entity: EntityDescription, storeIdentifier: String?, kind: ObjectIDScope.Kind,
                  number: Int64) -> ObjectID {
        ObjectID(scope: idScope(of: entity, storeIdentifier: storeIdentifier, kind: kind), number: number)
    }

    /// This context's scope for IDs of `entity`: looked up here rather than in the shared
    /// table (which takes a lock) for every row, and naming this context to its objects.
    func idScope(of entity: EntityDescription, storeIdentifier: String?, kind: ObjectIDScope.Kind) -> ObjectIDScope {
        let key = IDScopeKey(entity: ObjectIdentifier(entity), kind: kind)
        if let scope = idScopes[key], scope.storeIdentifier == storeIdentifier { return scope }
        let scope = ObjectIDScope.owned(by: self, entity: entity, storeIdentifier: storeIdentifier, kind: kind)
        idScopes[key] = scope
        if keptUnassignedScopes[key.entity] == nil { keptUnassignedScopes[key.entity] = .unassigned(entity) }
        return scope
    }

    /// A temporary ID for a new object of `entity`.
    func temporaryID(of entity: EntityDescription, number: Int) -> ObjectID {
        objectID(of: entity, storeIdentifier: nil, kind: .temporary, number: Int64(number))
    }

    /// The ID of a row of `entity` in `store`.
    func permanentID(of entity: EntityDescription, in store: PersistentStore, primaryKey: Int64) -> ObjectID {
        objectID(of: entity, storeIdentifier: store.identifier, kind: .permanent, number: primaryKey)
    }

    /// The registered object for a row, updated from `row` unless it has unsaved changes,
    /// or a new object made from `row`.
    func materialize(
        _ row: some StoredRow, root: EntityDescription, store: PersistentStore, decoding: Set<String>? = nil,
                     registering: Bool = true, asFault: Bool = false) throws -> ManagedObject {
        let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
        let key = ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)
        if let object = registered[key] {
            if asFault { return object }
            if !object.hasChanges,
               try object.isFault || object.version != Self.rowVersion(row, root: root, store: store) {
                try load(row, into: object, root: root, store: store, decoding: decoding)
                adoptParentState(of: object, key: key)
            }
            return object
        }
        let entityNumber = try Self.integer(row, 1, "Z_ENT", root: root, store: store)
        guard let entity = Int(exactly: entityNumber).flatMap(model.entity(number:)), entity.rootEntity === root else {
            throw ObjectGraphError.undecodable(
                "\(entityNumber) is not the number of \(root.name) or of one of its sub-entities", store: store,
                entity: root.name, attribute: "Z_ENT", primaryKey: primaryKey)
        }
        let object = model.objectClass(for: entity).init(entity: entity)
        object.assign(permanentID(of: entity, in: store, primaryKey: primaryKey), in: self)
        if asFault {
            object.isFault = true
            object.version = try Self.rowVersion(row, root: root, store: store)
            if registering { registered[key] = object }
            return object
        }
        try load(row, into: object, root: root, store: store, decoding: decoding)
        if registering { registered[key] = object }
        adoptParentState(of: object, key: key)
        return object
    }

    /// A bookkeeping column of a row (Z_PK, Z_ENT, Z_OPT) as an integer; a NULL or a value of
    /// another type is an error naming the row, never a trap or a silent 0.
    static func integer(
        _ row: some StoredRow, _ index: Int, _ column: String, root: EntityDescription, store: PersistentStore
    ) throws -> Int64 {
        guard let integer = try optionalInteger(row, index, column, root: root, store: store) else {
            throw ObjectGraphError.undecodable(
                "NULL, not an integer", store: store, entity: root.name, attribute: column,
                primaryKey: row.int64(at: 0) ?? 0)
        }
        return integer
    }

    /// A row's version (Z_OPT), which Core Data counts up from 1. One out of what an object keeps
    /// (`ManagedObject.rowVersions`: only a damaged store holds one) reads as
    /// `ManagedObject.largestRowNumber`: the row still reads, and a save refuses to update it (its
    /// version cannot grow), where a version made up would fail its optimistic lock for ever.
    static func rowVersion(_ row: some StoredRow, root: EntityDescription, store: PersistentStore) throws -> Int64 {
        keptVersion(try integer(row, 2, "Z_OPT", root: root, store: store))
    }
    /// A stored version as an object keeps it, for comparing a row with its object: a raw one out
    /// of range never equals it, and the row looked changed at every delete and merge.
    static func keptVersion(_ version: Int64) -> Int64 {
        ManagedObject.rowVersions.contains(version) ? version : ManagedObject.largestRowNumber
    }

    /// A foreign key or bookkeeping column as an integer, nil when NULL.
    static func optionalInteger(
        _ row: some StoredRow, _ index: Int, _ column: String, root: EntityDescription, store: PersistentStore
    ) throws -> Int64? {
        if let integer = row.int64(at: index) { return integer }
        switch row.databaseValue(at: index).storage {
        case .null: return nil
        case .double(let number) where Int64(exactly: number) != nil: return Int64(number)
        default:
            throw ObjectGraphError.undecodable(
                "a value of another type, not an integer", store: store, entity: root.name, attribute: column,
                primaryKey: row.int64(at: 0) ?? 0)
        }
    }

    /// Fills an object's values from its row, decoding transformed attributes in place.
    func load(_ row: some StoredRow, into object: ManagedObject, root: EntityDescription, store: PersistentStore,
              decoding: Set<String>? = nil) throws {
        let entity = object.entity
        // A transient keeps what was set on the object, or starts at its default as on insert.
        let transients = entity.transientAttributes.compactMap { attribute in
            (object.values[attribute.name] ?? attribute.defaultValue).map { (attribute.name, $0) }
        }
        // A new object's own buffer, with nothing in it to lose should a value not decode, is
        // reused rather than replaced.
        var values = PropertyValues()
        if object.values.isEmpty { swap(&values, &object.values) }
        values.removeAll(layout: entity.propertyLayout)
        let primaryKey = try Self.integer(row, 0, "Z_PK", root: root, store: store)
        for (position, column) in entity.storedColumns.enumerated() {
            if let slot = row.plainSlot(at: column.index, type: column.type) {
                values.setSlot(entity.storedColumnSlots[position], slot)
                continue
            }
            let slot = entity.storedColumnSlots[position]
            let decodes = decoding.map { $0.contains(column.name) } ?? true
            if column.type == .transformable, decodes {
                // Decoded where the row holds it: no copy of the bytes for a value read at once.
                let place = ValuePlace(
                    storeIdentifier: store.identifier, entityName: entity.name, attributeName: column.name,
                    primaryKey: primaryKey)
                if let decoded = try decodedInPlace(row, at: column.index, place: place, {
                    try transformer(named: column.transformerName, entity: entity, key: column.name)
                }) {
                    values.setSlot(slot, PropertySlot(decoded))
                    continue
                }
            }
            let dbValue = row.databaseValue(at: column.index)
            guard column.type == .transformable else {
                do {
                    // By slot: no search by name (a fetch of 100,000 rows would do it a million times).
                    if let value = try StoredValues.value(dbValue, type: column.type) {
                        let slot = PropertySlot(stored: value, type: column.type)
                        values.setSlot(entity.storedColumnSlots[position], slot)
                    }
                } catch {
                    throw ObjectGraphError.undecodable(
                        error, store: store, entity: entity.name, attribute: column.name, primaryKey: primaryKey)
                }
                continue
            }
            // A value to decode was decoded above; here is one left for later (or NULL, or damage).
            guard let encoded = try encodedValue(
                dbValue, attribute: column.name, column: column.columnName, entity: entity, root: root, store: store,
                primaryKey: primaryKey)
            else { continue }
            // By slot, an encoded value boxed as it is (it would fail every cast of `PropertySlot.init`).
            values.setSlot(slot, .boxed(PropertySlot.AnyBox(encoded)))
        }
        for (offset, (relationship, index)) in entity.storedToOne.enumerated() {
            if let destination = try Self.optionalInteger(row, index, relationship.columnName, root: root, store: store)
            {
                values.setSlot(entity.storedToOneSlots[offset], .fault(destination))
            }
        }
        for (name, value) in transients { values[name] = value }
        object.setStoredValues(values)
        object.loadedToMany = []
        object.changedKeys = []
        object.version = try Self.rowVersion(row, root: root, store: store)
        object.isFault = false
    }

    /// A transformed attribute's stored bytes at their place; nil for NULL where the attribute is
    /// optional. Transformers write BLOBs: anything else, or nothing where a value is required,
    /// was not written by us.
    func encodedValue(
        _ dbValue: DatabaseValue, attribute name: String, column: String, entity: EntityDescription,
        root: EntityDescription, store: PersistentStore, primaryKey: Int64
    ) throws -> EncodedValue? {
        guard case .blob(let data) = dbValue.storage else {
            if dbValue.isNull, entity.attribute(named: name)?.isOptional ?? true { return nil }
            throw ObjectGraphError.damagedRow(
                store: store, root: root, primaryKey: primaryKey,
                "column \(column) holds \(dbValue.storageKind) where \(entity.name).\(name) keeps its encoded value")
        }
        let place = ValuePlace(
            storeIdentifier: store.identifier, entityName: entity.name, attributeName: name, primaryKey: primaryKey)
        return EncodedValue(data: data, place: place)
    }

    /// - throws: ``ObjectGraphError`` 134060 naming the store, entity, attribute and row when
    ///   a built-in transformer cannot decode the bytes; an application's transformer's own
    ///   error unchanged (it was told the place).
    func decode(_ encoded: EncodedValue, transformerName: String?, entity: EntityDescription, key: String) throws -> Any
    {
        try decode(encoded, with: try transformer(named: transformerName, entity: entity, key: key))
    }

    /// The transformed value at `index` of `row` decoded from the bytes where the row holds them
    /// (no copy); nil when the row holds no blob there. `transformer` is asked only for a blob.
    func decodedInPlace(_ row: some StoredRow, at index: Int, place: ValuePlace,
                        _ transformer: () throws -> ValueTransformer) throws -> Any? {
        try row.withBlob(at: index) { bytes in
            let transformer = try transformer()
            return try decoding(at: place) { try transformer.reverseTransformedValue(bytes: bytes, at: place) }
        }
    }

    /// ``decode(_:transformerName:entity:key:)`` with the transformer looked up once for many values.
    func decode(_ encoded: EncodedValue, with transformer: ValueTransformer) throws -> Any {
        try decoding(at: encoded.place) { try transformer.reverseTransformedValue(encoded.data, at: encoded.place) }
    }

    /// What `decode` returns, a value a built-in transformer cannot decode named at `place`.
    func decoding(at place: ValuePlace, _ decode: () throws -> Any) throws -> Any {
        do {
            return try decode()
        } catch let error as UndecodableTransformedValue {
            guard let store = coordinator.persistentStores.first(where: { $0.identifier == place.storeIdentifier })
            else {
                throw error
            }
            throw ObjectGraphError.undecodable(
                error, store: store, entity: place.entityName, attribute: place.attributeName,
                primaryKey: place.primaryKey)
        }
    }

    /// Decodes every value of `object` a fetch left encoded (see `propertiesToFetch`).
    ///
    /// - throws: the transformer's error for the first value that cannot be decoded.
    public func decodeValues(of object: ManagedObject) throws {
        for (key, value) in object.values {
            guard let encoded = value as? EncodedValue, let attribute = object.entity.attribute(named: key) else {
                continue
            }
            let decoded = try decode(
                encoded, transformerName: attribute.valueTransformerName, entity: object.entity, key: key)
            object.replaceEncoded(key, with: decoded)
        }
    }

    func transformer(named transformerName: String?, entity: EntityDescription, key: String) throws -> ValueTransformer
    {
        let name = transformerName ?? ValueTransformerRegistry.defaultTransformerName
        guard let transformer = coordinator.valueTransformers.transformer(named: name) else {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "no value transformer named '\(name)' is registered (for \(entity.name).\(key))")
        }
        return transformer
    }

    /// The destination of a to-one relationship of `source`, stored as `primaryKey`.
    ///
    /// - throws: ``ObjectGraphError`` 133000 when no row of the destination entity has that
    ///   primary key (Core Data's unfulfillable fault); the store's error when it cannot be read.
    func destination(
        primaryKey: Int64, of relationship: RelationshipDescription, source: ManagedObject
    ) throws -> ManagedObject {
        // Only for a message: a to-one is resolved once per object a sort or a walk reads.
        var place: String { "\(source.entity.name).\(relationship.name) of row \(source.objectID.primaryKey ?? 0)" }
        guard let destination = model.entity(named: relationship.destinationEntityName) else {
            throw ObjectGraphError(
                code: .objectNotFound,
                message: "\(place): the model has no entity \(relationship.destinationEntityName)")
        }
        if let object = registeredDestination(primaryKey: primaryKey, of: destination) { return object }
        guard let object = try object(primaryKey: primaryKey, root: destination.rootEntity),
              object.entity.isKind(of: destination) else {
            throw ObjectGraphError(
                code: .objectNotFound,
                message: "\(place) refers to \(destination.name) row \(primaryKey), which does not exist",
                objects: [source])
        }
        return object
    }

    /// The object of `destination` (or a sub-entity) with `primaryKey` when it is registered
    /// here: found without a read.
    func registeredDestination(primaryKey: Int64, of destination: EntityDescription) -> ManagedObject? {
        guard let object = registered[ObjectKey(rootEntityNumber: destination.rootEntity.entityNumber,
                                                primaryKey: primaryKey)],
              object.entity.isKind(of: destination) else { return nil }
        return object
    }

    func object(primaryKey: Int64, root: EntityDescription) throws -> ManagedObject? {
        if let object = registered[ObjectKey(rootEntityNumber: root.entityNumber, primaryKey: primaryKey)] {
            return object
        }
        let store = try coordinator.store(for: root)
        let sql =
            "SELECT \(root.selectColumns.joined(separator: ", ")) FROM \(store.qualified(root.tableName)) WHERE Z_PK = "
                + "?"
        return try wrapStoreErrors(.objectNotFound, "cannot read \(root.name) row \(primaryKey)") {
            try coordinator.read { db in
                // Prepared once: a walk over a store (a check) reads every row this way.
                try Row.fetchOne(try db.cachedStatement(sql: sql), arguments: [primaryKey]).map {
                    try materialize($0, root: root, store: store)
                }
            }
        }
    }

    /// The object with an ID, read from its store if needed.
    ///
    /// - throws: ``ObjectGraphError`` 133000 when no such object exists.
    public func existingObject(with objectID: ObjectID) throws -> ManagedObject {
        if let object = insertedSet.objects.first(where: { $0.objectID == objectID }) { return object }
        if let object = parentInserted[objectID] { return object }
        if objectID.isTemporaryID, let parent {
            let pending = parent.performAndWait { parent.pendingStateForChild() }
            if let object = mirrors(ofParentInserts: pending.inserted.filter { $0.objectID == objectID }).first {
                return object
            }
        }
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
        guard let object = try object(primaryKey: primaryKey, root: entity.rootEntity), object.entity.isKind(of: entity)
        else { return nil }
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
        return try wrapStoreErrors(.objectNotFound, "cannot read the rows of \(entity.name)") {
            try coordinator.read { db in
                try Int64.fetchAll(
                    db,
                    sql:
                        "SELECT Z_PK FROM \(store.qualified(entity.rootEntity.tableName)) WHERE Z_ENT IN (\(numbers)) "
                            + "ORDER BY Z_PK"
                )
            }
        }
    }

    /// Whether the store holds the join row linking `source` (row `primaryKey`) to row
    /// `destinationKey` through the many-to-many `relationship`: one indexed look-up.
    func joinRowExists(from source: ManagedObject, primaryKey: Int64, to destinationKey: Int64,
                       through relationship: RelationshipDescription) throws -> Bool {
        let join = SQLiteSchema.joinTable(for: relationship, of: source.entity, in: model)
        let store = try coordinator.store(for: source.entity.rootEntity)
        let sql = "SELECT EXISTS (SELECT 1 FROM \(store.qualified(join.name)) WHERE \(join.sourceColumn) = ? "
            + "AND \(join.destinationColumn) = ?)"
        return try wrapStoreErrors(.objectNotFound, "cannot read \(join.name)") {
            try coordinator.read { db in
                try Bool.fetchOne(db.cachedStatement(sql: sql), arguments: [primaryKey, destinationKey]) ?? false
            }
        }
    }

    /// Reads the destinations of a to-many relationship from the store.
    ///
    /// - throws: the store's error, or a destination's value that cannot be read.
    /// The rows of a one-to-many's members, by the destination's to-one `inverse` (the object's
    /// key is the one argument), in the relationship's order when it is ordered.
    func membersSQL(columns: String, root: EntityDescription, store: PersistentStore,
                    inverse: RelationshipDescription) -> String {
        "SELECT \(columns) FROM \(store.qualified(root.tableName)) t0 WHERE t0.\(inverse.columnName) = ?"
            + (SQLiteSchema.orderColumnName(ofToOne: inverse, in: model).map { " ORDER BY t0.\($0), t0.Z_PK" } ?? "")
    }

    func loadToMany(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> [ManagedObject] {
        guard let primaryKey = object.objectID.primaryKey ?? object.pendingPrimaryKey else { return [] }
        guard let destination = model.entity(named: relationship.destinationEntityName) else {
            throw ObjectGraphError(
                code: .objectNotFound,
                message: "\(object.entity.name).\(relationship.name): "
                    + "the model has no entity \(relationship.destinationEntityName)")
        }
        let root = destination.rootEntity
        let store = try coordinator.store(for: root)
        let columns = root.selectColumns.map { "t0.\($0)" }.joined(separator: ", ")
        let sql: String
        if SQLiteSchema.usesJoinTable(relationship, in: model) {
            let join = SQLiteSchema.joinTable(for: relationship, of: object.entity, in: model)
            sql =
                "SELECT \(columns) FROM \(store.qualified(root.tableName)) t0 JOIN \(store.qualified(join.name)) j ON "
                    + "j.\(join.destinationColumn) = t0.Z_PK WHERE j.\(join.sourceColumn) = ?"
                    + (join.destinationOrderColumn.map { " ORDER BY j.\($0), t0.Z_PK" } ?? "")
        } else {
            guard let inverse = SQLiteSchema.inverse(of: relationship, in: model) else { return [] }
            sql = membersSQL(columns: columns, root: root, store: store, inverse: inverse)
        }
        // Stepped straight off the statement, as a fetch is: a relationship may hold 100,000 rows.
        var objects: [ManagedObject] = []
        try wrapStoreErrors(.objectNotFound, "cannot read \(object.entity.name).\(relationship.name)") {
            try coordinator.read { db in
                try db.forEachRow(sql: sql, arguments: [primaryKey.databaseValue]) { row in
                    let object = try materialize(row, root: root, store: store)
                    if object.entity.isKind(of: destination) { objects.append(object) }
                }
            }
        }
        return objects
    }
}
