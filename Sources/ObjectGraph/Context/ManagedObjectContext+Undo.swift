extension ManagedObjectContext {
    /// Undoes the last group of changes (see ``ContextUndoManager``) and announces what
    /// changed in ``objectsDidChangeNotification``. Does nothing without an undo manager.
    public func undo() {
        guard let undoManager else { return }
        processPendingChanges()
        undoManager.undo()
        processPendingChanges()
    }

    /// Redoes the last undone group of changes.
    public func redo() {
        guard let undoManager else { return }
        processPendingChanges()
        undoManager.redo()
        processPendingChanges()
    }

    // MARK: - Undo actions (each registers its opposite)

    /// Takes back an insertion: the object leaves the context, its values kept for redo.
    func undoInsert(_ object: ManagedObject) {
        undoManager?.register { [weak self] in self?.reinsert(object) }
        insertedSet.remove(object)
        // An announced insertion is taken back by announcing a deletion.
        if !unprocessedInserted.contains(object) { unprocessedDeleted.insert(object) }
        unprocessedInserted.remove(object)
        unprocessedUpdated.remove(object)
        object.managedObjectContext = nil
        object.isPendingInsert = false
    }

    /// Puts back an object whose insertion was undone (or that was deleted before any save).
    func reinsert(_ object: ManagedObject) {
        undoManager?.register { [weak self] in self?.undoInsert(object) }
        object.managedObjectContext = self
        object.isPendingInsert = true
        insertedSet.insert(object)
        unprocessedDeleted.remove(object)
        unprocessedInserted.insert(object)
    }

    /// Takes back the deletion of a saved object.
    func undelete(_ object: ManagedObject) {
        undoManager?.register { [weak self] in self?.delete(object) }
        deletedSet.remove(object)
        if !unprocessedDeleted.contains(object) { unprocessedInserted.insert(object) }
        unprocessedDeleted.remove(object)
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
    func registerUndo(forKey key: String) {
        guard let undoManager = managedObjectContext?.undoManager, undoManager.isUndoRegistrationEnabled else {
            return
        }
        let old = values[key]
        let wasLoaded = loadedToMany.contains(key)
        let wasChanged = changedKeys.contains(key)
        undoManager.register { [self] in
            registerUndo(forKey: key)
            values[key] = old
            if wasLoaded { loadedToMany.insert(key) } else { loadedToMany.remove(key) }
            if wasChanged { changedKeys.insert(key) } else { changedKeys.remove(key) }
            managedObjectContext?.objectWasRestored(self)
        }
    }
}
