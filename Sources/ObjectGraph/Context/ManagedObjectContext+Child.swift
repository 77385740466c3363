extension ManagedObjectContext {
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
