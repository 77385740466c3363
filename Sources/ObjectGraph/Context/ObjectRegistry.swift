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
    private var table = ProbingTable<ManagedObject?>()
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

    var count: Int { table.count + (run?.objects.count ?? 0) }
    var isEmpty: Bool { count == 0 }

    /// Every registered object, in no particular order.
    var values: [ManagedObject] { table.slots.compactMap { $0 } + (run?.objects ?? []) }

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
            guard !table.isEmpty else { return nil }
            return table[slot(for: key)]
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
            reserveCapacity(table.count + 1)
            table.set(object, at: slot(for: key))
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: ManagedObjectContext.ObjectKey) -> ManagedObject? {
        if let run, run.index(of: key) != nil { dissolveRun() }
        guard !table.isEmpty else { return nil }
        let index = slot(for: key)
        guard let removed = table[index] else { return nil }
        table.remove(at: index, home: Self.home)
        return removed
    }

    mutating func removeAll() {
        table.removeAll()
        run = nil
    }

    /// Unregisters every object `isRemoved` accepts by building the table again from the
    /// objects that stay: for a large share at once (a cascade's children), where removing
    /// each by its row probed and shifted its cluster, reading an object at every step.
    mutating func removeAll(where isRemoved: (ManagedObject) -> Bool) {
        let staying = values.filter { !isRemoved($0) }
        removeAll()
        reserveCapacity(staying.count)
        for object in staying { table.set(object, at: slot(for: object)) }
    }

    /// Grows the table (to a power of two) so `capacity` objects fit without growing again.
    mutating func reserveCapacity(_ capacity: Int) {
        dissolveRun()
        table.reserveCapacity(capacity, home: Self.home)
    }

    /// The slot of `object`'s own row.
    private func slot(for object: ManagedObject) -> Int {
        slot(for: ManagedObjectContext.ObjectKey(
            rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: object.registeredPrimaryKey))
    }

    /// The slot holding `key`, or the empty slot where it would go (the table has slots).
    private func slot(for key: ManagedObjectContext.ObjectKey) -> Int {
        table.index(home: Self.home(key.primaryKey)) {
            $0!.registeredPrimaryKey == key.primaryKey && $0!.entity.rootEntity.entityNumber == key.rootEntityNumber
        }
    }

    /// A hash of the primary key alone, so objects of several roots share the table.
    private static func home(_ primaryKey: Int64) -> Int {
        ProbingTable<ManagedObject?>.spread(UInt64(bitPattern: primaryKey))
    }
    private static func home(_ object: ManagedObject?) -> Int { home(object!.registeredPrimaryKey) }
}
