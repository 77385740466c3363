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

    /// The members in the order they came, and until the next compaction the entries of
    /// members that left.
    private var entries: [ManagedObject] = []
    /// For each object that left since the last compaction, how many of its first entries are
    /// of a stay that ended: a removal leaves its entry, so removing one of n costs O(1), not a
    /// search of the n (an upsert adopting 16,000 stored rows took 14 s). Counted here, not read
    /// from the object's bit, which another context sets once the object is its own.
    private var left: [ObjectIdentifier: Int] = [:]
    private var leftCount = 0
    private let membership: Membership

    init(_ membership: Membership) { self.membership = membership }

    var isEmpty: Bool { count == 0 }
    var count: Int { entries.count - leftCount }

    /// The members, in the order they came (one that left and came back, where it came back).
    var objects: [ManagedObject] {
        mutating get {
            compact()
            return entries
        }
    }

    func contains(_ object: ManagedObject) -> Bool { object.memberships.contains(membership) }

    @discardableResult
    mutating func insert(_ object: ManagedObject) -> Bool {
        guard !contains(object) else { return false }
        object.memberships.insert(membership)
        entries.append(object)
        return true
    }

    mutating func remove(_ object: ManagedObject) {
        guard contains(object) else { return }
        object.memberships.remove(membership)
        recordLeaving(object)
        // Amortized O(1): each compaction takes at least half the entries away.
        if leftCount > entries.count / 2, entries.count >= 64 { compact() }
    }

    /// Removes each of `objects` that is here, in one pass over the set.
    mutating func remove(_ objects: [ManagedObject]) {
        for object in objects where contains(object) {
            object.memberships.remove(membership)
            recordLeaving(object)
        }
        compact()
    }

    mutating func removeAll() {
        compact()
        for object in entries { object.memberships.remove(membership) }
        entries = []
    }

    private mutating func recordLeaving(_ object: ManagedObject) {
        left[ObjectIdentifier(object), default: 0] += 1
        leftCount += 1
    }

    /// Drops the entries of stays that ended.
    private mutating func compact() {
        guard leftCount > 0 else { return }
        var kept: [ManagedObject] = []
        kept.reserveCapacity(count)
        for object in entries {
            let identifier = ObjectIdentifier(object)
            if let ended = left[identifier] {
                left[identifier] = ended > 1 ? ended - 1 : nil
                continue
            }
            kept.append(object)
        }
        entries = kept
        left = [:]
        leftCount = 0
    }
}
