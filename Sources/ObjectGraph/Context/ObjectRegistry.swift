/// A context's saved objects by row (root entity and primary key), as one open-addressed
/// table: 8 bytes a slot filled up to 4/5, where a `Dictionary` takes 24 bytes a slot
/// filled up to 3/4 (a 200k-row fetch registered 12.6 MB there, 2.1 MB here).
///
/// A slot keeps only the object: its row is its own (``ManagedObject/registeredPrimaryKey``
/// and its root entity), read while probing.
///
/// A save that numbered its new objects consecutively into an empty registry (a bulk insert
/// into a fresh context) registers them as a ``Run``: the save's own array, no table, until
/// anything else is registered or removed.
struct ObjectRegistry {
    private var objects: [ManagedObject?] = []
    private var tableCount = 0
    private var run: Run?

    /// Objects of one root entity whose primary keys count up from `firstKey`, in order.
    private struct Run {
        let rootEntityNumber: Int
        let firstKey: Int64
        let objects: [ManagedObject]

        func index(of key: ManagedObjectContext.ObjectKey) -> Int? {
            guard key.rootEntityNumber == rootEntityNumber else { return nil }
            let (offset, overflow) = key.primaryKey.subtractingReportingOverflow(firstKey)
            guard !overflow, offset >= 0, offset < objects.count else { return nil }
            return Int(offset)
        }
    }

    var count: Int { tableCount + (run?.objects.count ?? 0) }
    var isEmpty: Bool { count == 0 }

    /// Every registered object, in no particular order.
    var values: [ManagedObject] { objects.compactMap { $0 } + (run?.objects ?? []) }

    /// Registers objects a save just numbered: `objects[i]` has primary key `firstKey + i`, and
    /// all have the root entity numbered `rootEntityNumber`.
    mutating func register(consecutive saved: [ManagedObject], rootEntityNumber: Int, firstKey: Int64) {
        assert(saved.enumerated().allSatisfy { $1.registeredPrimaryKey == firstKey + Int64($0) })
        guard isEmpty, saved.count > 1 else {
            reserveCapacity(count + saved.count)
            for (offset, object) in saved.enumerated() {
                self[
                    ManagedObjectContext.ObjectKey(
                        rootEntityNumber: rootEntityNumber, primaryKey: firstKey + Int64(offset))] = object
            }
            return
        }
        run = Run(rootEntityNumber: rootEntityNumber, firstKey: firstKey, objects: saved)
    }

    /// Moves a run's objects into the table, before the registry changes in any other way.
    private mutating func dissolveRun() {
        guard let run else { return }
        self.run = nil
        reserveCapacity(run.objects.count)
        for (offset, object) in run.objects.enumerated() {
            self[
                ManagedObjectContext.ObjectKey(
                    rootEntityNumber: run.rootEntityNumber, primaryKey: run.firstKey + Int64(offset))] = object
        }
    }

    subscript(key: ManagedObjectContext.ObjectKey) -> ManagedObject? {
        get {
            if let run, let index = run.index(of: key) { return run.objects[index] }
            guard !objects.isEmpty else { return nil }
            return objects[slot(for: key)]
        }
        set {
            guard let object = newValue else {
                removeValue(forKey: key)
                return
            }
            if let run {
                if let index = run.index(of: key), run.objects[index] === object { return }
                dissolveRun()
            }
            // Probing reads each object's own number: one registered under another would be lost.
            precondition(object.registeredPrimaryKey == key.primaryKey, "An object is registered under its own row")
            if !objects.isEmpty, case let index = slot(for: key), objects[index] != nil {
                objects[index] = object
                return
            }
            reserveCapacity(tableCount + 1)
            objects[slot(for: key)] = object
            tableCount += 1
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: ManagedObjectContext.ObjectKey) -> ManagedObject? {
        if let run, run.index(of: key) != nil { dissolveRun() }
        guard !objects.isEmpty else { return nil }
        let index = slot(for: key)
        guard let removed = objects[index] else { return nil }
        objects[index] = nil
        tableCount -= 1
        // Backward-shift deletion: later slots of the same cluster move up, so lookups that stop
        // at the first empty slot still find them.
        let mask = objects.count - 1
        var hole = index
        var next = index
        while true {
            next = (next + 1) & mask
            guard let object = objects[next] else { break }
            let home = Self.home(object.registeredPrimaryKey, mask: mask)
            let staysPut = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            guard !staysPut else { continue }
            objects[hole] = object
            objects[next] = nil
            hole = next
        }
        return removed
    }

    mutating func removeAll() {
        objects = []
        tableCount = 0
        run = nil
    }

    /// Grows the table (to a power of two) so `capacity` objects fit without growing again.
    mutating func reserveCapacity(_ capacity: Int) {
        dissolveRun()
        var slots = max(objects.count, 16)
        while capacity > slots / 5 * 4 { slots *= 2 }
        guard slots > objects.count else { return }
        let oldObjects = objects
        objects = []
        objects = Array(repeating: nil, count: slots)
        let mask = slots - 1
        for case let object? in oldObjects {
            var index = Self.home(object.registeredPrimaryKey, mask: mask)
            while objects[index] != nil { index = (index + 1) & mask }
            objects[index] = object
        }
    }

    /// The slot holding `key`, or the empty slot where it would go (the table is not empty).
    private func slot(for key: ManagedObjectContext.ObjectKey) -> Int {
        let mask = objects.count - 1
        var index = Self.home(key.primaryKey, mask: mask)
        while let object = objects[index] {
            if object.registeredPrimaryKey == key.primaryKey,
                object.entity.rootEntity.entityNumber == key.rootEntityNumber
            {
                return index
            }
            index = (index + 1) & mask
        }
        return index
    }

    /// A slot from the primary key alone (splitmix64), so objects of several roots share the table.
    private static func home(_ primaryKey: Int64, mask: Int) -> Int {
        var bits = UInt64(bitPattern: primaryKey) &+ 0x9e3779b97f4a7c15
        bits = (bits ^ (bits >> 30)) &* 0xbf58476d1ce4e5b9
        bits = (bits ^ (bits >> 27)) &* 0x94d049bb133111eb
        return Int(truncatingIfNeeded: bits ^ (bits >> 31)) & mask
    }
}
