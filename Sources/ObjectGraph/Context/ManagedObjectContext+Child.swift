extension ManagedObjectContext {
    /// Gives an object a child just read from its row the parent's unsaved changes to it (its
    /// values become the child's baseline), or notes that the parent deleted it.
    func adoptParentState(of object: ManagedObject, key: ObjectKey) {
        guard let parent else { return }
        // Raw values only: the parent's block must not reach the store, whose lock this
        // thread may hold (a fetch reading rows).
        let state: (deleted: Bool, values: [(String, Any?)])? = parent.performAndWait {
            guard let theirs = parent.registered[key], theirs.hasChanges else { return nil }
            if parent.deletedSet.contains(theirs) { return (true, []) }
            let values = theirs.changedKeys.compactMap { name -> (String, Any?)? in
                if theirs.entity.attribute(named: name) != nil { return (name, theirs.values[name]) }
                guard let relationship = theirs.entity.relationship(named: name), !relationship.isToMany else {
                    return nil
                }
                switch theirs.values[name] {
                case let fault as FaultReference: return (name, fault)
                case let destination as ManagedObject:
                    // A destination the parent inserted has no row the child could read.
                    return destination.objectID.primaryKey.map { (name, FaultReference(primaryKey: $0)) }
                default: return (name, nil)
                }
            }
            return (false, values)
        }
        guard let state else { return }
        if state.deleted {
            deletedInParent.insert(key)
            return
        }
        deletedInParent.remove(key)
        for (name, value) in state.values {
            object.values[name] = value
            object.committedValues[name] = value
        }
    }

    /// Where a pushed change points in the parent.
    private enum ParentReference {
        case inserted(Int)
        case object(ManagedObject)
        case objectID(ObjectID)
    }

    private struct PushedChange {
        var target: ParentReference
        var attributes: [(String, Any?)] = []
        var relationships: [(RelationshipDescription, [ParentReference])] = []
    }

    /// A child's save: its changes become unsaved changes of the parent, on the parent's queue.
    ///
    /// - throws: ``ObjectGraphError`` 133000 when an object is gone from the parent.
    func push(to parent: ManagedObjectContext, inserted: [ManagedObject], updated: [ManagedObject],
              deleted: [ManagedObject]) throws {
        let insertedIndex = Dictionary(uniqueKeysWithValues: inserted.enumerated().map { (ObjectIdentifier($1), $0) })
        func reference(_ object: ManagedObject) -> ParentReference {
            if let index = insertedIndex[ObjectIdentifier(object)] { return .inserted(index) }
            if let pushed = pushedInserts[ObjectIdentifier(object)] { return .object(pushed.parent) }
            return .objectID(object.objectID)
        }
        // Read on this context's queue; only values and references cross to the parent's.
        var changes: [PushedChange] = []
        for object in [inserted, updated].joined() {
            var change = PushedChange(target: reference(object))
            let allKeys = Set(object.entity.attributes.map(\.name) + object.entity.relationships.map(\.name))
            let keys = insertedIndex[ObjectIdentifier(object)] != nil ? allKeys : object.changedKeys
            for attribute in object.entity.attributes where keys.contains(attribute.name) {
                change.attributes.append((attribute.name, object.value(forKey: attribute.name)))
            }
            for relationship in object.entity.relationships where keys.contains(relationship.name) {
                let destinations = relationship.isToMany
                    ? object.toManyObjects(relationship) : [object.toOneObject(relationship)].compactMap { $0 }
                change.relationships.append((relationship, destinations.map(reference)))
            }
            changes.append(change)
        }
        let deletions = deleted.map(reference)
        let entityNames = inserted.map(\.entity.name)
        // IDs made permanent in the child (obtainPermanentIDs(for:)) stay theirs in the parent.
        let permanentIDs = inserted.map { $0.objectID.isTemporaryID ? nil : $0.objectID }

        let (created, createdIDs): ([ManagedObject], [ObjectID]) = try parent.performAndWait {
            // Every saved object is found before anything changes, so a missing one changes nothing.
            var existing: [ObjectID: ManagedObject] = [:]
            let references = changes.flatMap { [$0.target] + $0.relationships.flatMap(\.1) } + deletions
            for case .objectID(let objectID) in references where existing[objectID] == nil {
                existing[objectID] = try parent.existingObject(with: objectID)
            }
            let created = entityNames.map { parent.insertNewObject(forEntityName: $0) }
            for (object, objectID) in zip(created, permanentIDs) { if let objectID { object.objectID = objectID } }
            func resolve(_ reference: ParentReference) -> ManagedObject {
                switch reference {
                case .inserted(let index): return created[index]
                case .object(let object): return object
                case .objectID(let objectID): return existing[objectID]!  // all found above
                }
            }
            for change in changes {
                let target = resolve(change.target)
                for (key, value) in change.attributes { target.setValue(value, forKey: key) }
                for (relationship, references) in change.relationships {
                    let objects = references.map(resolve)
                    target.setValue(relationship.isToMany ? objects : objects.first, forKey: relationship.name)
                }
            }
            for deletion in deletions {
                let object = resolve(deletion)
                if object.managedObjectContext === parent { parent.delete(object) }
            }
            return (created, created.map(\.objectID))
        }
        for (index, object) in inserted.enumerated() {
            pushedInserts[ObjectIdentifier(object)] = (object, created[index])
            object.objectID = createdIDs[index]
        }
        finishSave(inserted: inserted, updated: updated, deleted: deleted)
    }
}

// MARK: - A child's view of its parent's unsaved objects

/// What a parent holds unsaved that its child's fetches must see, in values and IDs only (they
/// cross from the parent's queue to the child's).
struct ParentPendingState {
    /// An object the parent (or one of its ancestors) inserted and has not saved.
    struct Inserted {
        let objectID: ObjectID
        let entityName: String
        /// Attributes as values; a to-one as `ObjectID?`; a to-many as `[ObjectID]`.
        var values: [(String, Any?)]
    }
    var inserted: [Inserted] = []
    /// Saved rows whose values the parent changed: a child matches them in memory.
    var updatedKeys: Set<ManagedObjectContext.ObjectKey> = []

    var isEmpty: Bool { inserted.isEmpty && updatedKeys.isEmpty }
}

extension ManagedObjectContext {
    /// This context's unsaved inserts and updates with its own ancestors' under them, for a child.
    func pendingStateForChild() -> ParentPendingState {
        var state = parent.map { parent in parent.performAndWait { parent.pendingStateForChild() } }
            ?? ParentPendingState()
        // What this context shows of an ancestor's insert (its copy, changed or deleted here) wins.
        state.inserted = state.inserted.compactMap { ancestors in
            guard let mine = parentInserted[ancestors.objectID] else { return ancestors }
            return deletedSet.contains(mine) ? nil : snapshot(of: mine)
        }
        state.inserted += insertedSet.objects.map(snapshot(of:))
        for object in updatedSet.objects + deletedSet.objects {
            guard let primaryKey = object.objectID.primaryKey else { continue }
            state.updatedKeys.insert(ObjectKey(rootEntityNumber: object.entity.rootEntity.entityNumber,
                                               primaryKey: primaryKey))
        }
        return state
    }

    private func snapshot(of object: ManagedObject) -> ParentPendingState.Inserted {
        var values: [(String, Any?)] = object.entity.attributes.map { ($0.name, object.value(forKey: $0.name)) }
        for relationship in object.entity.relationships {
            if relationship.isToMany {
                values.append((relationship.name, object.toManyObjects(relationship).map(\.objectID)))
            } else {
                values.append((relationship.name, object.toOneObject(relationship)?.objectID))
            }
        }
        return .init(objectID: object.objectID, entityName: object.entity.name, values: values)
    }

    /// This child's objects for its parent's unsaved inserts: made (or brought up to date, when
    /// unchanged here) from the parent's values, relationships resolved among them.
    func mirrors(ofParentInserts inserted: [ParentPendingState.Inserted]) -> [ManagedObject] {
        var byID: [ObjectID: ManagedObject] = [:]
        // Objects this child inserted and pushed are already its own.
        for (child, _) in pushedInserts.values where child.managedObjectContext === self {
            byID[child.objectID] = child
        }
        var refreshed: [(ManagedObject, ParentPendingState.Inserted)] = []
        for snapshot in inserted where byID[snapshot.objectID] == nil {
            if let mine = parentInserted[snapshot.objectID] {
                byID[snapshot.objectID] = mine
                if !mine.hasChanges { refreshed.append((mine, snapshot)) }
                continue
            }
            guard let entity = model.entity(named: snapshot.entityName) else { continue }
            let object = model.objectClass(for: entity).init(entity: entity)
            let id = snapshot.objectID
            let mine = objectID(of: entity, storeIdentifier: id.storeIdentifier, kind: id.scope.kind, number: id.number)
            object.assign(mine, in: self)
            parentInserted[snapshot.objectID] = object
            byID[snapshot.objectID] = object
            refreshed.append((object, snapshot))
        }
        func resolve(_ objectID: ObjectID) -> ManagedObject? {
            byID[objectID] ?? (objectID.isTemporaryID ? nil : try? existingObject(with: objectID))
        }
        for (object, snapshot) in refreshed {
            var values = PropertyValues(layout: object.entity.propertyLayout)
            for (name, value) in snapshot.values {
                if object.entity.attribute(named: name) != nil {
                    values[name] = value
                } else if let objectIDs = value as? [ObjectID] {
                    values[name] = RelationshipMembers(complete: objectIDs.compactMap(resolve))
                } else if let objectID = value as? ObjectID {
                    values[name] = byID[objectID] ?? objectID.primaryKey.map { FaultReference(primaryKey: $0) }
                }
            }
            object.values = values
            object.committedValues = values
            object.loadedToMany = Set(object.entity.toManyRelationshipNames)
            object.changedKeys = []
        }
        return inserted.compactMap { byID[$0.objectID] }
    }

    /// A child's fetch result with its parent's unsaved state applied: rows the parent changed
    /// are matched on the parent's values, and the parent's inserts that match are added.
    func applying(_ pending: ParentPendingState, to fetched: [ManagedObject],
                  request: FetchRequest<some ManagedObject>, plan: FetchPlan) throws -> [ManagedObject] {
        func matches(_ object: ManagedObject) -> Bool {
            plan.entities.contains { $0 === object.entity }
                && !(request.includesPendingChanges && deletedSet.contains(object))
                && !(key(object).map(deletedInParent.contains) ?? false)
                && (request.predicate.map { $0.evaluate(with: object) } ?? true)
        }
        func key(_ object: ManagedObject) -> ObjectKey? {
            object.objectID.primaryKey.map { ObjectKey(rootEntityNumber: plan.root.entityNumber, primaryKey: $0) }
        }
        var objects = fetched.filter { object in key(object).map { !pending.updatedKeys.contains($0) } ?? true }
        var seen = Set(objects.map(ObjectIdentifier.init))
        for changed in pending.updatedKeys where changed.rootEntityNumber == plan.root.entityNumber {
            guard let object = try object(primaryKey: changed.primaryKey, root: plan.root),
                  !seen.contains(ObjectIdentifier(object)), matches(object) else { continue }
            objects.append(object)
            seen.insert(ObjectIdentifier(object))
        }
        objects += mirrors(ofParentInserts: pending.inserted).filter(matches)
        return objects
    }
}
