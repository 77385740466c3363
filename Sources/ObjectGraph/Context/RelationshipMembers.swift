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
    /// Members in the order they joined (a relationship of 100,000 held 4.2 MB of a dictionary
    /// index before these). Members known distinct when they came (``init(distinct:)``, a
    /// cascade's faults, objects that never joined a to-many) are indexed when something first
    /// looks one up.
    private var slots = ObjectSlots()
    /// Which slots hold a member added since the last save, a bit each: all of them for an
    /// object never saved, where a dictionary of them doubled the relationship's memory.
    private var addedSlots = SlotBits()
    /// Removed since the last save. The objects are held, so an identifier is never reused.
    private(set) var removed: [ObjectIdentifier: ManagedObject] = [:]
    /// Replaced as a whole since the last save (or put back by undo): a save writes every member.
    private(set) var rewritesAll = false
    /// The members as an array, made on first read after a change that left holes.
    private var cachedObjects: [ManagedObject]?

    /// Members that are all there, in their order; a repeat is a hole (the first one counts).
    init(complete objects: [ManagedObject]) {
        isComplete = true
        for object in objects { object.hasJoinedToMany = true }
        slots = ObjectSlots(indexing: objects)
    }

    /// Members that are all there and known to be distinct (rows of a one-to-many, an object a
    /// row): nothing is indexed until something looks one up.
    init(distinct objects: [ManagedObject]) {
        isComplete = true
        for object in objects { object.hasJoinedToMany = true }
        slots = ObjectSlots(distinct: objects)
    }

    /// A fault: the store's list of members, not read yet, and no change made to it.
    init() { isComplete = false }

    /// The members the store lists, with the changes made while they were not read applied.
    func completed(withStored stored: [ManagedObject]) -> RelationshipMembers {
        let members = RelationshipMembers(complete: [])
        members.reserveCapacity(stored.count + count)
        for object in stored where removed[ObjectIdentifier(object)] == nil { members.append(object) }
        for position in slots.slots.indices where slots[position] !== ObjectSlots.hole {
            guard let joined = members.append(slots[position]) else { continue }
            if addedSlots[position] { members.addedSlots[joined] = true }
        }
        members.removed = removed
        return members
    }

    /// The same members and changes, in storage of its own (for an undo snapshot).
    func copy() -> RelationshipMembers {
        let copy = RelationshipMembers()
        copy.isComplete = isComplete
        copy.slots = slots
        copy.addedSlots = addedSlots
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
        for object in added {
            if let joined = fault.append(object) { fault.addedSlots[joined] = true }
        }
        fault.removed = removed
        return fault
    }

    /// Makes `objects` (without repeats, in their order) the members; a save writes them all.
    func replaceAll(with objects: [ManagedObject]) {
        // Still added since the last save: the members that stay.
        let stillAdded = Set(added.map(ObjectIdentifier.init))
        slots.removeAll()
        addedSlots = SlotBits()
        for object in objects {
            if let joined = append(object), stillAdded.contains(ObjectIdentifier(object)) { addedSlots[joined] = true }
        }
        cachedObjects = nil
        isComplete = true
        rewritesAll = true
    }

    /// Put back by undo: the members differ from the store's in ways no change list records.
    func markRewritesAll() { rewritesAll = isComplete }

    var count: Int { slots.count }
    /// How many members are in the index (the first ones); the rest go in at the next look-up.
    var indexedCount: Int { slots.indexedCount }

    var objects: [ManagedObject] {
        if !slots.hasHoles { return slots.slots }
        if let cachedObjects { return cachedObjects }
        let objects = slots.objects
        cachedObjects = objects
        return objects
    }

    /// Added since the last save, in the order they joined.
    var added: [ManagedObject] { addedSlots.positions.map { slots[$0] } }

    var hasUnsavedChanges: Bool { rewritesAll || !addedSlots.isEmpty || !removed.isEmpty }

    /// Whether `object` is a member; unknown for an object not added while a fault.
    func contains(_ object: ManagedObject) -> Bool { position(of: object) != nil }

    /// Adds `object` at the end; false when it is a member already. While a fault, `isStored`
    /// says whether the store lists it (asked only when nothing here tells).
    @discardableResult
    func insert(_ object: ManagedObject, isStored: () -> Bool) -> Bool {
        let identifier = ObjectIdentifier(object)
        guard !object.hasJoinedToMany || position(of: object) == nil else { return false }
        let wasRemoved = removed.removeValue(forKey: identifier) != nil
        // A member the store lists is no change: recording it would make a later removal cancel it.
        if !wasRemoved, !isComplete, isStored() { return false }
        let joined = append(object)
        if !wasRemoved, let joined { addedSlots[joined] = true }
        return true
    }

    /// Removes `object`; false when it was not a member. While a fault, `isStored` says
    /// whether the store lists it (asked only when nothing here tells).
    @discardableResult
    func remove(_ object: ManagedObject, isStored: () -> Bool) -> Bool {
        let identifier = ObjectIdentifier(object)
        if let position = position(of: object) {
            cachedObjects = nil
            slots.remove(object)
            // Added since the last save: nothing to take out of the store; else a stored member.
            if addedSlots[position] { addedSlots[position] = false } else { removed[identifier] = object }
            if slots.isSparse { compact() }
            return true
        }
        guard !isComplete, removed[identifier] == nil, isStored() else { return false }
        removed[identifier] = object
        return true
    }

    /// Takes back the removal of `object` since the last save, as if it had not left (for a
    /// fault: a complete relationship would then be missing it). False when it had not left.
    @discardableResult
    func forgetRemoval(of object: ManagedObject) -> Bool {
        removed.removeValue(forKey: ObjectIdentifier(object)) != nil
    }

    /// After a save wrote them: no change is pending.
    func forgetChanges() {
        addedSlots = SlotBits()
        removed = [:]
        rewritesAll = false
    }

    /// The slot `object` now holds; nil when it was a member already.
    @discardableResult
    private func append(_ object: ManagedObject) -> Int? {
        // Before the append: a cache still sharing the array would make the append copy it.
        cachedObjects = nil
        guard object.hasJoinedToMany else {
            object.hasJoinedToMany = true
            return slots.appendDistinct(object)
        }
        return slots.append(object)
    }

    private func reserveCapacity(_ capacity: Int) { slots.reserveCapacity(capacity) }

    /// The member's slot, or nil.
    private func position(of object: ManagedObject) -> Int? { slots.position(of: object) }

    /// Closes the holes removals left: amortized O(1) per removal, as each takes half the slots.
    private func compact() {
        let oldAdded = addedSlots
        addedSlots = SlotBits()
        slots.compact { from, to in if oldAdded[from] { addedSlots[to] = true } }
    }
}

/// A member's slot in a ``ProbingTable``, stored plus one so that 0 means empty.
struct SlotNumber: ProbingSlot {
    private let stored: UInt32
    init(_ position: Int) { stored = UInt32(position + 1) }
    private init(stored: UInt32) { self.stored = stored }
    var position: Int { Int(stored) - 1 }
    static var empty: SlotNumber { SlotNumber(stored: 0) }
    var isEmpty: Bool { stored == 0 }
}

/// A set of slot positions, a bit each.
struct SlotBits {
    private var words: [UInt64] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    subscript(position: Int) -> Bool {
        get {
            let word = position >> 6
            return word < words.count && words[word] & (1 << UInt64(position & 63)) != 0
        }
        set {
            guard newValue != self[position] else { return }
            let word = position >> 6
            if word >= words.count { words.append(contentsOf: repeatElement(0, count: word + 1 - words.count)) }
            words[word] ^= 1 << UInt64(position & 63)
            count += newValue ? 1 : -1
        }
    }

    /// The positions in the set, in order.
    var positions: [Int] {
        var result: [Int] = []
        result.reserveCapacity(count)
        for (index, word) in words.enumerated() where word != 0 {
            var rest = word
            while rest != 0 {
                result.append(index << 6 | rest.trailingZeroBitCount)
                rest &= rest - 1
            }
        }
        return result
    }
}
