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
            deletedInParent.insert(ObjectIdentifier(object))
            return
        }
        deletedInParent.remove(ObjectIdentifier(object))
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
        for object in inserted + updated {
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

        let (created, createdIDs): ([ManagedObject], [ObjectID]) = try parent.performAndWait {
            // Every saved object is found before anything changes, so a missing one changes nothing.
            var existing: [ObjectID: ManagedObject] = [:]
            let references = changes.flatMap { [$0.target] + $0.relationships.flatMap(\.1) } + deletions
            for case .objectID(let objectID) in references where existing[objectID] == nil {
                existing[objectID] = try parent.existingObject(with: objectID)
            }
            let created = entityNames.map { parent.insertNewObject(forEntityName: $0) }
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
