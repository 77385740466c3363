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
/// object, 4 for a position) and a byte of its hash, where a `Dictionary` keeps key and value,
/// filled up to 3/4.
///
/// Callers give each value's hash (`home`) and say which value they look for (`matches`).
/// A probe compares the hash bytes, side by side in memory, and reads a value only where its
/// byte matches: reading each value it passed cost a cache miss, and a lookup of a key not
/// there passed about nine at the table's fullest (a cascade's 100,000 new rows).
struct ProbingTable<Slot: ProbingSlot> {
    private(set) var slots: [Slot] = []
    /// Each slot's hash byte (``fingerprint(_:)``, never 0); 0 where the slot is empty.
    private var fingerprints: [UInt8] = []
    private(set) var count = 0

    /// Where a lookup ended: the slot it found, or the empty one where the value would go.
    struct Place {
        fileprivate let index: Int
        fileprivate let fingerprint: UInt8
    }

    var isEmpty: Bool { count == 0 }

    /// The place of the value `matches` accepts, or the empty slot where it would go.
    /// The table must have slots (``reserveCapacity(_:home:)``).
    func place(home: Int, where matches: (Slot) -> Bool) -> Place {
        let mask = slots.count - 1
        let fingerprint = Self.fingerprint(home)
        var index = home & mask
        while fingerprints[index] != 0 {
            if fingerprints[index] == fingerprint, matches(slots[index]) { break }
            index = (index + 1) & mask
        }
        return Place(index: index, fingerprint: fingerprint)
    }

    subscript(place: Place) -> Slot { slots[place.index] }

    /// Puts a value into the empty slot a lookup ended at, or over the value it found.
    mutating func set(_ value: Slot, at place: Place) {
        if fingerprints[place.index] == 0 { count += 1 }
        slots[place.index] = value
        fingerprints[place.index] = place.fingerprint
    }

    /// Empties a slot. Backward-shift deletion: later values of the same cluster move up, so
    /// lookups that stop at the first empty slot still find them.
    mutating func remove(at place: Place, home: (Slot) -> Int) {
        guard fingerprints[place.index] != 0 else { return }
        slots[place.index] = .empty
        fingerprints[place.index] = 0
        count -= 1
        let mask = slots.count - 1
        var hole = place.index
        var next = place.index
        while true {
            next = (next + 1) & mask
            guard fingerprints[next] != 0 else { break }
            let start = home(slots[next]) & mask
            let staysPut = hole <= next ? (start > hole && start <= next) : (start > hole || start <= next)
            guard !staysPut else { continue }
            slots[hole] = slots[next]
            fingerprints[hole] = fingerprints[next]
            slots[next] = .empty
            fingerprints[next] = 0
            hole = next
        }
    }

    mutating func removeAll() {
        slots = []
        fingerprints = []
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
        fingerprints = []
        slots = Array(repeating: .empty, count: size)
        fingerprints = Array(repeating: 0, count: size)
        let mask = size - 1
        for value in old where !value.isEmpty {
            let hash = home(value)
            var index = hash & mask
            while fingerprints[index] != 0 { index = (index + 1) & mask }
            slots[index] = value
            fingerprints[index] = Self.fingerprint(hash)
        }
    }

    /// The top byte of a hash, never 0 (which marks an empty slot); the slot's index comes from
    /// its low bits.
    private static func fingerprint(_ home: Int) -> UInt8 {
        let byte = UInt8(truncatingIfNeeded: UInt(bitPattern: home) >> 56)
        return byte == 0 ? 1 : byte
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
