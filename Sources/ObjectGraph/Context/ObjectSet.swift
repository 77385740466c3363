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

    private(set) var objects: [ManagedObject] = []
    private let membership: Membership

    init(_ membership: Membership) { self.membership = membership }

    var isEmpty: Bool { objects.isEmpty }
    var count: Int { objects.count }

    func contains(_ object: ManagedObject) -> Bool { object.memberships.contains(membership) }

    @discardableResult
    mutating func insert(_ object: ManagedObject) -> Bool {
        guard !contains(object) else { return false }
        object.memberships.insert(membership)
        objects.append(object)
        return true
    }

    mutating func remove(_ object: ManagedObject) {
        guard contains(object) else { return }
        object.memberships.remove(membership)
        objects.removeAll { $0 === object }
    }

    /// Removes each of `objects` that is here, in one pass over the set.
    mutating func remove(_ objects: [ManagedObject]) {
        var leaving = false
        for object in objects where contains(object) {
            object.memberships.remove(membership)
            leaving = true
        }
        let membership = membership
        if leaving { self.objects.removeAll { !$0.memberships.contains(membership) } }
    }

    mutating func removeAll() {
        for object in objects { object.memberships.remove(membership) }
        objects = []
    }
}
