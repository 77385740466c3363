/// The objects of one to-many relationship of one object, as its context sees them: in the order
/// they joined, with O(1) membership tests, additions and removals, so changing a relationship of
/// a million objects costs what changing one of ten does.
///
/// Until the relationship is read from the store (while it is a fault) it holds only what changed
/// since the last save: reading it applies those changes to what the store lists, so adding to a
/// relationship never reads the relationship. The changes since the last save are kept in either
/// state: a save writes them (join-table rows) instead of the whole relationship.
final class RelationshipMembers {
    /// Whether the members are all there (read from the store, or of an object never saved).
    private(set) var isComplete: Bool
    /// Members in the order they joined; a removed one leaves a hole until the next compaction.
    private var slots: [ManagedObject?] = []
    private var positions: [ObjectIdentifier: Int] = [:]
    /// Added and removed since the last save. The objects are held, so an identifier is never reused.
    private(set) var added: [ObjectIdentifier: ManagedObject] = [:]
    private(set) var removed: [ObjectIdentifier: ManagedObject] = [:]
    /// Replaced as a whole since the last save (or put back by undo): a save writes every member.
    private(set) var rewritesAll = false
    /// The members as an array, made on first read after a change.
    private var cachedObjects: [ManagedObject]?

    /// Members that are all there.
    init(complete objects: [ManagedObject]) {
        isComplete = true
        positions.reserveCapacity(objects.count)
        slots.reserveCapacity(objects.count)
        for object in objects { append(object) }
    }

    /// A fault: the store's list of members, not read yet, and no change made to it.
    init() { isComplete = false }

    /// The members the store lists, with the changes made while they were not read applied.
    func completed(withStored stored: [ManagedObject]) -> RelationshipMembers {
        let members = RelationshipMembers(complete: [])
        members.positions.reserveCapacity(stored.count + positions.count)
        members.slots.reserveCapacity(stored.count + positions.count)
        for object in stored where removed[ObjectIdentifier(object)] == nil { members.append(object) }
        for case let object? in slots { members.append(object) }
        members.added = added
        members.removed = removed
        return members
    }

    /// The same members and changes, in storage of its own (for an undo snapshot).
    func copy() -> RelationshipMembers {
        let copy = RelationshipMembers()
        copy.isComplete = isComplete
        copy.slots = slots
        copy.positions = positions
        copy.added = added
        copy.removed = removed
        copy.cachedObjects = cachedObjects
        copy.rewritesAll = rewritesAll
        return copy
    }

    /// The changes since the last save, as a fault: what stays of members read from the store
    /// once they may be stale.
    func unsavedChanges() -> RelationshipMembers {
        let fault = RelationshipMembers()
        // In the order they joined.
        for case let object? in slots where added[ObjectIdentifier(object)] != nil { fault.append(object) }
        fault.added = added
        fault.removed = removed
        return fault
    }

    /// Makes `objects` (without repeats, in their order) the members; a save writes them all.
    func replaceAll(with objects: [ManagedObject]) {
        slots = []
        positions = [:]
        for object in objects { append(object) }
        cachedObjects = nil
        isComplete = true
        rewritesAll = true
    }

    /// Put back by undo: the members differ from the store's in ways no change list records.
    func markRewritesAll() { rewritesAll = isComplete }

    var count: Int { positions.count }

    var objects: [ManagedObject] {
        if let cachedObjects { return cachedObjects }
        let objects = slots.compactMap { $0 }
        cachedObjects = objects
        return objects
    }

    var hasUnsavedChanges: Bool { rewritesAll || !added.isEmpty || !removed.isEmpty }

    /// Whether `object` is a member; unknown for an object not added while a fault.
    func contains(_ object: ManagedObject) -> Bool { positions[ObjectIdentifier(object)] != nil }

    /// Adds `object` at the end; false when it is a member already. While a fault, `isStored`
    /// says whether the store lists it (asked only when nothing here tells).
    @discardableResult
    func insert(_ object: ManagedObject, isStored: () -> Bool) -> Bool {
        let identifier = ObjectIdentifier(object)
        guard positions[identifier] == nil else { return false }
        let wasRemoved = removed.removeValue(forKey: identifier) != nil
        if !wasRemoved {
            // A member the store lists is no change: recording it would make a later removal cancel it.
            if !isComplete, isStored() { return false }
            added[identifier] = object
        }
        append(object)
        return true
    }

    /// Removes `object`; false when it was not a member. While a fault, `isStored` says
    /// whether the store lists it (asked only when nothing here tells).
    @discardableResult
    func remove(_ object: ManagedObject, isStored: () -> Bool) -> Bool {
        let identifier = ObjectIdentifier(object)
        if let position = positions.removeValue(forKey: identifier) {
            slots[position] = nil
            cachedObjects = nil
            if slots.count >= 64, positions.count < slots.count / 2 { compact() }
            // Added since the last save: nothing to take out of the store; else a stored member.
            if added.removeValue(forKey: identifier) == nil { removed[identifier] = object }
            return true
        }
        guard !isComplete, removed[identifier] == nil, isStored() else { return false }
        removed[identifier] = object
        return true
    }

    /// After a save wrote them: no change is pending.
    func forgetChanges() {
        added = [:]
        removed = [:]
        rewritesAll = false
    }

    private func append(_ object: ManagedObject) {
        let identifier = ObjectIdentifier(object)
        guard positions[identifier] == nil else { return }
        positions[identifier] = slots.count
        slots.append(object)
        cachedObjects = nil
    }

    /// Closes the holes removals left: amortized O(1) per removal, as each takes half the slots.
    private func compact() {
        slots = slots.filter { $0 != nil }
        for (position, object) in slots.enumerated() { positions[ObjectIdentifier(object!)] = position }
    }
}
