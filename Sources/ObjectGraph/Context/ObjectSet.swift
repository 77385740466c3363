/// Objects by identity, in insertion order.
///
/// Membership is a bit on the object, not a hash set beside the array: a context's six sets
/// hold every object inserted or changed since the last save, and a `Set<ObjectIdentifier>`
/// per set doubled the memory of inserting many objects.
struct ObjectSet {
    /// Which set of its context an object is in, one bit each (six at most: the object keeps them
    /// in six bits of a word).
    struct Membership: OptionSet {
        let rawValue: UInt8
        static let inserted = Membership(rawValue: 1 << 0)
        static let updated = Membership(rawValue: 1 << 1)
        static let deleted = Membership(rawValue: 1 << 2)
        static let unprocessedInserted = Membership(rawValue: 1 << 3)
        static let unprocessedUpdated = Membership(rawValue: 1 << 4)
        static let unprocessedDeleted = Membership(rawValue: 1 << 5)
    }

    /// The members in the order they came. A new object is added without a look-up, so a set
    /// only added to (an import's inserted objects) has no index; a removal other than of the
    /// last member builds it once (an upsert adopting 16,000 stored rows took 14 s when each
    /// removal searched the set).
    private var members = ObjectSlots()
    private let membership: Membership

    init(_ membership: Membership) { self.membership = membership }

    var isEmpty: Bool { count == 0 }
    var count: Int { members.count }

    /// The members, in the order they came (one that left and came back, where it came back).
    var objects: [ManagedObject] {
        mutating get {
            if members.hasHoles { members.compact() }
            return members.slots
        }
    }

    func contains(_ object: ManagedObject) -> Bool { object.memberships.contains(membership) }

    @discardableResult
    mutating func insert(_ object: ManagedObject) -> Bool {
        guard !contains(object) else { return false }
        object.memberships.insert(membership)
        members.appendDistinct(object)
        return true
    }

    /// Removes `object` if it is here; its bit alone may be another context's set's, whose
    /// object it became.
    mutating func remove(_ object: ManagedObject) {
        guard contains(object), members.remove(object) else { return }
        object.memberships.remove(membership)
        if members.isSparse { members.compact() }
    }

    /// Removes each of `objects` that is here, in one pass over the set.
    mutating func remove(_ objects: [ManagedObject]) {
        let leaving = Set(objects.lazy.filter(contains).map(ObjectIdentifier.init))
        guard !leaving.isEmpty else { return }
        members.removeAll { object in
            guard leaving.contains(ObjectIdentifier(object)) else { return false }
            object.memberships.remove(membership)
            return true
        }
    }

    mutating func removeAll() {
        for object in members.slots where object !== ObjectSlots.hole { object.memberships.remove(membership) }
        members.removeAll()
    }
}
