extension ManagedObjectContext {
    /// Undoes the last group of changes (see ``ContextUndoManager``) and announces what
    /// changed in ``objectsDidChangeNotification``. Does nothing without an undo manager.
    public func undo() {
        guard let undoManager else { return }
        processPendingChanges()
        undoManager.undo(then: processPendingChanges)
    }

    /// Redoes the last undone group of changes.
    public func redo() {
        guard let undoManager else { return }
        processPendingChanges()
        undoManager.redo(then: processPendingChanges)
    }

    // MARK: - Undo actions (each registers its opposite)

    /// Takes back an insertion: the object leaves the context, its values kept for redo.
    /// A saved insertion is taken back by deleting the object.
    func undoInsert(_ object: ManagedObject) {
        guard !isOwnedElsewhere(object) else { return passOver(object) }
        if object.managedObjectContext === self, !insertedSet.contains(object) {
            delete(object)
            return
        }
        undoManager?.register { [weak self] in self?.reinsert(object) }
        insertedSet.remove(object)
        // Leaving the context, it leaves every set: a deletion of it left behind (an insertion,
        // deletion and insertion undone as one group) made the next save trap on its missing key.
        deletedSet.remove(object)
        updatedSet.remove(object)
        // An announced insertion is taken back by announcing a deletion.
        if !unprocessedInserted.contains(object) { unprocessedDeleted.insert(object) }
        unprocessedInserted.remove(object)
        unprocessedUpdated.remove(object)
        object.managedObjectContext = nil
        object.isPendingInsert = false
    }

    /// Puts back an object whose insertion was undone (or that was deleted before any save).
    func reinsert(_ object: ManagedObject) {
        guard !isOwnedElsewhere(object) else { return passOver(object) }
        undoManager?.register { [weak self] in self?.undoInsert(object) }
        reinsertPrimitive(object)
    }

    /// Deletes again what an undo brought back, unless it is no longer this context's (another
    /// context's save deleted its row, or another context took it).
    private func redelete(_ object: ManagedObject) {
        guard object.managedObjectContext === self else { return passOver(object) }
        delete(object)
    }

    /// An object that left this context and was inserted into another is that one's: this
    /// context's undo and redo pass over it (its set bits are the other context's now).
    private func isOwnedElsewhere(_ object: ManagedObject) -> Bool {
        object.managedObjectContext.map { $0 !== self } ?? false
    }

    /// An undo or redo step for an object this context no longer has: it does nothing, now and
    /// each time it is undone or redone, so the steps around it keep their place in the group.
    private func passOver(_ object: ManagedObject) {
        undoManager?.register { [weak self] in self?.passOver(object) }
    }

    private func reinsertPrimitive(_ object: ManagedObject) {
        // An object without a context is in no set of any: the bits of a context gone since
        // (one that took it, then was freed) would hide it from this context's sets.
        if object.managedObjectContext == nil { object.memberships = [] }
        object.managedObjectContext = self
        object.isPendingInsert = true
        insertedSet.insert(object)
        unprocessedDeleted.remove(object)
        unprocessedInserted.insert(object)
    }

    /// Takes back the deletion of a saved object. When the deletion was saved too, the object
    /// comes back as a new insertion with the same values (a new row, a new ID).
    func undelete(_ object: ManagedObject) {
        guard !isOwnedElsewhere(object) else { return passOver(object) }
        object.isPreparedForDeletion = false
        guard object.managedObjectContext === self else {
            undoManager?.register { [weak self] in self?.redelete(object) }
            if let primaryKey = object.objectID.primaryKey {
                relinkBroughtBack(object, row: ObjectKey(
                    rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: primaryKey))
            }
            object.assign(temporaryID(of: object.entity, number: Self.nextTemporaryNumber()), in: self)
            object.version = 0
            object.changedKeys = []
            reinsertPrimitive(object)
            return
        }
        undoManager?.register { [weak self] in self?.redelete(object) }
        // A deletion a merge policy kept at a save left nothing to bring back.
        guard deletedSet.contains(object) else { return }
        deletedSet.remove(object)
        if !unprocessedDeleted.contains(object) { unprocessedInserted.insert(object) }
        unprocessedDeleted.remove(object)
    }

    /// An object a saved deletion's undo brings back gets a new ID, and its to-ones still name
    /// rows by key: each naming an object brought back (by this undo or an earlier one) points
    /// at it, and the others wait for theirs (a cascade's children for their parent, which a
    /// save would otherwise find gone).
    private func relinkBroughtBack(_ object: ManagedObject, row: ObjectKey) {
        for relationship in object.entity.relationships where !relationship.isToMany {
            guard let slot = object.values.layout.index(of: relationship.name),
                  case .fault(let primaryKey) = object.values.slot(slot),
                  let destination = object.entity.destination(of: relationship)
            else { continue }
            let named = ObjectKey(rootEntityNumber: destination.rootEntity.entityNumber, primaryKey: primaryKey)
            if let target = broughtBack[named]?.object, target.entity.isKind(of: destination) {
                object.values.setSlot(slot, .object(target))
            } else {
                awaitingBroughtBack[named, default: []].append((WeakObject(object: object), slot))
            }
        }
        broughtBack[row] = WeakObject(object: object)
        for (waiting, slot) in awaitingBroughtBack.removeValue(forKey: row) ?? [] {
            guard let waiting = waiting.object, case .fault(row.primaryKey) = waiting.values.slot(slot) else {
                continue
            }
            waiting.values.setSlot(slot, .object(object))
        }
    }

    /// After an undo or redo put back one of an object's values.
    func objectWasRestored(_ object: ManagedObject) {
        if insertedSet.contains(object) {
            insertedObjectDidChange(object)
            return
        }
        guard !deletedSet.contains(object) else { return }
        if object.changedKeys.isEmpty { updatedSet.remove(object) } else { updatedSet.insert(object) }
        unprocessedUpdated.insert(object)
    }
}

extension ManagedObject {
    /// Records the value of `key` before a change, so undo can put it back.
    func registerUndo(forKey key: String) { undoOfValue(forKey: key)?() }

    /// The value of `key` as it is now, kept; the returned function registers its undo (called
    /// once the change is known to happen). Nil when nothing is recorded.
    func undoOfValue(forKey key: String) -> (() -> Void)? {
        guard let undoManager = managedObjectContext?.undoManager, undoManager.isUndoRegistrationEnabled else {
            return nil
        }
        // An ordered to-many is kept whole, O(its size): once per group, not once per change.
        let isOrdered = entity.relationshipsByName[key]?.isOrdered ?? false
        if isOrdered, undoManager.keepsWholeValue(of: self, forKey: key) { return nil }
        // Members change in place: the snapshot needs storage of its own.
        let old = (values[key] as? RelationshipMembers)?.copy() ?? values[key]
        let wasLoaded = loadedToMany.contains(key)
        let wasChanged = changedKeys.contains(key)
        let generation = managedObjectContext?.saveGeneration
        return { [self] in
            let putBack = { [self] in
                putBackValue(old, forKey: key, wasLoaded: wasLoaded, wasChanged: wasChanged, generation: generation)
            }
            if isOrdered {
                undoManager.register(wholeValueOf: self, forKey: key, putBack)
            } else {
                undoManager.register(putBack)
            }
        }
    }

    /// Undo of a value kept by ``undoOfValue(forKey:)``: `old` and what the context knew of it.
    private func putBackValue(_ old: Any?, forKey key: String, wasLoaded: Bool, wasChanged: Bool, generation: Int?) {
        registerUndo(forKey: key)
        values[key] = old
        if wasLoaded { loadedToMany.insert(key) } else { loadedToMany.remove(key) }
        var changed = wasChanged
        if managedObjectContext?.saveGeneration != generation {
            // Saved since: changed when the value differs from what the store now holds.
            let isToMany = entity.relationship(named: key)?.isToMany ?? false
            changed = isToMany ? wasLoaded : !ManagedObjectContext.sameStoredValue(old, committedValues[key])
        }
        if changed && !isPendingInsert { changedKeys.insert(key) } else { changedKeys.remove(key) }
        // Put back as a whole: what differs from the store is written whole, or nothing is.
        if let members = old as? RelationshipMembers {
            if changed { members.markRewritesAll() } else { members.forgetChanges() }
        }
        managedObjectContext?.objectWasRestored(self)
    }

    /// Records that `member` joined (or left) the to-many relationship `key`, so undo can take
    /// back that one change: O(1), where a copy of the relationship would cost its size.
    func registerUndo(ofMembership member: ManagedObject, joined: Bool, key: String) {
        guard let undoManager = managedObjectContext?.undoManager, undoManager.isUndoRegistrationEnabled,
              let relationship = entity.relationshipsByName[key],
              !(relationship.isOrdered && undoManager.keepsWholeValue(of: self, forKey: key)) else {
            return
        }
        undoManager.register { [self] in
            if joined { _ = leave(member, relationship) } else { _ = join(member, relationship) }
            let members = membersForChange(relationship)
            registerUndo(ofMembership: member, joined: !joined, key: key)
            if members.hasUnsavedChanges && !isPendingInsert {
                changedKeys.insert(key)
            } else {
                changedKeys.remove(key)
            }
            managedObjectContext?.objectWasRestored(self)
        }
    }
}
