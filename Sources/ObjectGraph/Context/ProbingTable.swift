/// What a ``ProbingTable`` keeps in a slot: a value with one bit pattern meaning "empty".
protocol ProbingSlot {
    static var empty: Self { get }
    var isEmpty: Bool { get }
}

extension Optional: ProbingSlot where Wrapped: AnyObject {
    static var empty: Self { nil }
    var isEmpty: Bool { self == nil }
}

/// An open-addressed hash table with linear probing whose slots hold only values: each value
/// leads to its own key, read while probing, so a slot costs the value's size (8 bytes for an
/// object, 4 for a position) where a `Dictionary` keeps key and value, filled up to 3/4.
///
/// Callers give each value's hash (`home`) and say which value they look for (`matches`).
struct ProbingTable<Slot: ProbingSlot> {
    private(set) var slots: [Slot] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The slot holding the value `matches` accepts, or the empty slot where it would go.
    /// The table must have slots (``reserveCapacity(_:home:)``).
    func index(home: Int, where matches: (Slot) -> Bool) -> Int {
        let mask = slots.count - 1
        var index = home & mask
        while !slots[index].isEmpty {
            if matches(slots[index]) { return index }
            index = (index + 1) & mask
        }
        return index
    }

    subscript(index: Int) -> Slot { slots[index] }

    /// Puts a value into the empty slot a lookup ended at, or over the value it found.
    mutating func set(_ value: Slot, at index: Int) {
        if slots[index].isEmpty { count += 1 }
        slots[index] = value
    }

    /// Empties a slot. Backward-shift deletion: later values of the same cluster move up, so
    /// lookups that stop at the first empty slot still find them.
    mutating func remove(at index: Int, home: (Slot) -> Int) {
        guard !slots[index].isEmpty else { return }
        slots[index] = .empty
        count -= 1
        let mask = slots.count - 1
        var hole = index
        var next = index
        while true {
            next = (next + 1) & mask
            guard !slots[next].isEmpty else { break }
            let start = home(slots[next]) & mask
            let staysPut = hole <= next ? (start > hole && start <= next) : (start > hole || start <= next)
            guard !staysPut else { continue }
            slots[hole] = slots[next]
            slots[next] = .empty
            hole = next
        }
    }

    mutating func removeAll() {
        slots = []
        count = 0
    }

    /// Grows the table (to a power of two, filled up to 4/5) so `capacity` values fit without
    /// growing again.
    mutating func reserveCapacity(_ capacity: Int, home: (Slot) -> Int) {
        var size = max(slots.count, 16)
        while capacity > size / 5 * 4 { size *= 2 }
        guard size > slots.count else { return }
        let old = slots
        slots = []
        slots = Array(repeating: .empty, count: size)
        let mask = size - 1
        for value in old where !value.isEmpty {
            var index = home(value) & mask
            while !slots[index].isEmpty { index = (index + 1) & mask }
            slots[index] = value
        }
    }

    /// A well-spread hash of 64 bits (splitmix64's finalizer): keys that differ in a few low or
    /// high bits (row numbers, aligned addresses) land far apart.
    static func spread(_ key: UInt64) -> Int {
        var bits = key &+ 0x9e3779b97f4a7c15
        bits = (bits ^ (bits >> 30)) &* 0xbf58476d1ce4e5b9
        bits = (bits ^ (bits >> 27)) &* 0x94d049bb133111eb
        return Int(truncatingIfNeeded: bits ^ (bits >> 31))
    }
}
