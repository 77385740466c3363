/// Objects in the order they came, each once, found by identity in O(1): the storage of a
/// to-many's members and of a context's object sets.
///
/// A removal leaves a hole (``hole``, so the removed object is not held) until the next
/// compaction; without holes `slots` is the objects themselves, read without a copy. The index
/// from object to slot takes 4 bytes an object, where a `[ObjectIdentifier: Int]` took 42, and
/// is built as things are looked up: objects known distinct when they come (``appendDistinct(_:)``)
/// go in when something first looks one up, so a set only ever added to has no index at all.
struct ObjectSlots {
    /// What a removed object's slot holds: one object of no entity, never a member.
    nonisolated(unsafe) static let hole = ManagedObject(entity: EntityDescription(name: "", attributes: []))

    /// The objects, and holes where some were removed.
    private(set) var slots: [ManagedObject] = []
    /// Each indexed object's slot. Only `slots[..<indexedCount]` are in it; holes never are
    /// (a removal looks its object up, so indexes it first).
    private var positions = ProbingTable<SlotNumber>()
    private(set) var indexedCount = 0

    init() {}

    /// Objects known to be distinct: nothing is indexed until something looks one up.
    init(distinct objects: [ManagedObject]) { slots = objects }

    /// The objects in their order, indexed, in the array given (no copy); a repeat is a hole
    /// (the first one counts).
    init(indexing objects: [ManagedObject]) {
        slots = objects
        positions.reserveCapacity(objects.count, home: slotHome())
        for (position, object) in objects.enumerated() {
            let place = place(of: object)
            if positions[place].isEmpty {
                positions.set(SlotNumber(position), at: place)
            } else {
                slots[position] = Self.hole
            }
        }
        indexedCount = slots.count
    }

    var count: Int { positions.count + slots.count - indexedCount }
    var hasHoles: Bool { slots.count != count }
    /// Holes take more than half the slots: compacting now costs O(1) amortized per removal.
    var isSparse: Bool { slots.count >= 64 && count < slots.count / 2 }

    /// The objects without the holes (a copy only while holes are left).
    var objects: [ManagedObject] { hasHoles ? slots.filter { $0 !== Self.hole } : slots }

    /// The object at a slot, or ``hole``.
    subscript(position: Int) -> ManagedObject { slots[position] }

    /// The object's slot, or nil.
    mutating func position(of object: ManagedObject) -> Int? {
        indexPending()
        guard !positions.isEmpty else { return nil }
        let found = positions[place(of: object)]
        return found.isEmpty ? nil : found.position
    }

    /// Adds `object` at the end and returns its slot; nil when it is here already.
    @discardableResult
    mutating func append(_ object: ManagedObject) -> Int? {
        guard position(of: object) == nil else { return nil }
        let position = appendDistinct(object)
        positions.reserveCapacity(positions.count + 1, home: slotHome())
        positions.set(SlotNumber(position), at: place(of: object))
        indexedCount = slots.count
        return position
    }

    /// Adds an object the caller knows is not here, without looking it up.
    @discardableResult
    mutating func appendDistinct(_ object: ManagedObject) -> Int {
        precondition(slots.count < Int(UInt32.max), "Fewer than 2^32 objects")
        slots.append(object)
        return slots.count - 1
    }

    /// Removes `object`; false when it is not here. The last object goes without a look-up.
    @discardableResult
    mutating func remove(_ object: ManagedObject) -> Bool {
        if slots.last === object, indexedCount < slots.count {
            slots.removeLast()
            return true
        }
        guard let position = position(of: object) else { return false }
        let place = place(of: object)
        // Before the table's removal, whose look-ups hold the slots: after it, this would copy them.
        slots[position] = Self.hole
        positions.remove(at: place, home: slotHome())
        return true
    }

    /// Removes the objects `leaves` picks, in one pass over the slots.
    mutating func removeAll(where leaves: (ManagedObject) -> Bool) {
        rebuild(keeping: { !leaves($0) }, moved: { _, _ in })
    }

    mutating func removeAll() {
        slots = []
        positions.removeAll()
        indexedCount = 0
    }

    mutating func reserveCapacity(_ capacity: Int) {
        slots.reserveCapacity(capacity)
        positions.reserveCapacity(capacity, home: slotHome())
    }

    /// Closes the holes; `moved` hears each object's old and new slot.
    mutating func compact(_ moved: (_ from: Int, _ to: Int) -> Void = { _, _ in }) {
        rebuild(keeping: { _ in true }, moved: moved)
    }

    /// Keeps the objects `keeps` accepts, in order, without holes; the index is built again on
    /// the next look-up.
    private mutating func rebuild(keeping keeps: (ManagedObject) -> Bool, moved: (Int, Int) -> Void) {
        let old = slots
        let kept = count
        removeAll()
        slots.reserveCapacity(kept)
        for (position, object) in old.enumerated() where object !== Self.hole && keeps(object) {
            moved(position, slots.count)
            slots.append(object)
        }
    }

    /// Puts the objects not indexed yet into the table: each once, so O(1) an object.
    private mutating func indexPending() {
        guard indexedCount < slots.count else { return }
        positions.reserveCapacity(count, home: slotHome())
        for position in indexedCount..<slots.count {
            positions.set(SlotNumber(position), at: place(of: slots[position]))
        }
        indexedCount = slots.count
    }

    /// Where the table keeps `object`'s slot, or would (the table has slots).
    private func place(of object: ManagedObject) -> ProbingTable<SlotNumber>.Place {
        positions.place(home: Self.home(object)) { slots[$0.position] === object }
    }

    private static func home(_ object: ManagedObject) -> Int {
        ProbingTable<SlotNumber>.spread(UInt64(UInt(bitPattern: ObjectIdentifier(object))))
    }

    /// The hash of the object a slot number names. It holds the slots alone: a method of this
    /// struct would hold a copy of the table too, and every removal from it copied the table.
    private func slotHome() -> (SlotNumber) -> Int {
        let slots = slots
        return { Self.home(slots[$0.position]) }
    }
}
