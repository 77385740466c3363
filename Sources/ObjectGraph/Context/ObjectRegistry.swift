/// A context's saved objects by row (root entity and primary key), as one open-addressed
/// table: 8 bytes a slot filled up to 4/5, where a `Dictionary` takes 24 bytes a slot
/// filled up to 3/4 (a 200k-row fetch registered 12.6 MB there, 2.1 MB here).
///
/// A slot keeps only the object: its row is its own (``ManagedObject/registeredPrimaryKey``
/// and its root entity), read while probing.
///
/// A save into an empty registry whose new objects fall into a few runs of one root entity
/// numbered consecutively (a bulk insert: a category, then its 100,000 entries) registers them
/// as ``Run``s: slices of the save's own array, no table, until anything else is registered or
/// removed.
struct ObjectRegistry {
    private var table = ProbingTable<ManagedObject?>()
    private var runs: [Run] = []

    /// At most this many runs stand in for the table: each lookup tries each run first.
    private static let maximumRuns = 8

    /// Objects of one root entity whose primary keys count up from `firstKey`, in order.
    private struct Run {
        let rootEntityNumber: Int
        let firstKey: Int64
        let objects: ArraySlice<ManagedObject>

        func index(of key: ManagedObjectContext.ObjectKey) -> Int? {
            guard key.rootEntityNumber == rootEntityNumber else { return nil }
            let (offset, overflow) = key.primaryKey.subtractingReportingOverflow(firstKey)
            guard !overflow, offset >= 0, offset < objects.count else { return nil }
            return objects.startIndex + Int(offset)
        }
    }

    var count: Int { table.count + runs.reduce(0) { $0 + $1.objects.count } }
    var isEmpty: Bool { count == 0 }

    /// Every registered object, in no particular order.
    var values: [ManagedObject] { table.slots.compactMap { $0 } + runs.flatMap(\.objects) }

    func contains(where matches: (ManagedObject) -> Bool) -> Bool {
        table.slots.contains { $0.map(matches) ?? false } || runs.contains { $0.objects.contains(where: matches) }
    }

    /// Registers the objects a save just numbered, each under its own row.
    mutating func register(saved: [ManagedObject]) {
        if isEmpty, saved.count > 1, let runs = Self.runs(of: saved) {
            self.runs = runs
            return
        }
        reserveCapacity(count + saved.count)
        for object in saved { self[key(of: object)] = object }
    }

    /// `objects` cut where the root entity changes or a key does not follow the one before,
    /// or nil when that makes more than ``maximumRuns``.
    private static func runs(of objects: [ManagedObject]) -> [Run]? {
        var runs: [Run] = []
        var start = objects.startIndex
        for index in objects.indices {
            let next = index + 1
            if next < objects.endIndex, objects[next].entity.rootEntity === objects[index].entity.rootEntity,
               objects[next].registeredPrimaryKey == objects[index].registeredPrimaryKey &+ 1 { continue }
            guard runs.count < maximumRuns else { return nil }
            runs.append(Run(
                rootEntityNumber: objects[start].entity.rootEntity.entityNumber,
                firstKey: objects[start].registeredPrimaryKey, objects: objects[start..<next]))
            start = next
        }
        return runs
    }

    /// Moves the runs' objects into the table, before the registry changes in any other way.
    private mutating func dissolveRuns() {
        guard !runs.isEmpty else { return }
        let dissolved = runs
        runs = []
        reserveCapacity(dissolved.reduce(0) { $0 + $1.objects.count })
        for run in dissolved {
            for object in run.objects { table.set(object, at: place(of: object)) }
        }
    }

    private func key(of object: ManagedObject) -> ManagedObjectContext.ObjectKey {
        ManagedObjectContext.ObjectKey(
            rootEntityNumber: object.entity.rootEntity.entityNumber, primaryKey: object.registeredPrimaryKey)
    }

    private func run(holding key: ManagedObjectContext.ObjectKey) -> (run: Run, index: Int)? {
        for run in runs { if let index = run.index(of: key) { return (run, index) } }
        return nil
    }

    subscript(key: ManagedObjectContext.ObjectKey) -> ManagedObject? {
        get {
            if let found = run(holding: key) { return found.run.objects[found.index] }
            guard !table.isEmpty else { return nil }
            return table[place(of: key)]
        }
        set {
            guard let object = newValue else {
                removeValue(forKey: key)
                return
            }
            if !runs.isEmpty {
                if let found = run(holding: key), found.run.objects[found.index] === object { return }
                dissolveRuns()
            }
            // Probing reads each object's own number: one registered under another would be lost.
            precondition(object.registeredPrimaryKey == key.primaryKey, "An object is registered under its own row")
            reserveCapacity(table.count + 1)
            table.set(object, at: place(of: key))
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: ManagedObjectContext.ObjectKey) -> ManagedObject? {
        if run(holding: key) != nil { dissolveRuns() }
        guard !table.isEmpty else { return nil }
        let place = place(of: key)
        guard let removed = table[place] else { return nil }
        table.remove(at: place, home: Self.home)
        return removed
    }

    mutating func removeAll() {
        table.removeAll()
        runs = []
    }

    /// Unregisters every object `isRemoved` accepts by building the table again from the
    /// objects that stay: for a large share at once (a cascade's children), where removing
    /// each by its row probed and shifted its cluster, reading an object at every step.
    mutating func removeAll(where isRemoved: (ManagedObject) -> Bool) {
        // Read in place: `values` made an array of every object (1.6 MB after a cascade of 100,000,
        // at the save's peak) to keep a few.
        var staying: [ManagedObject] = []
        for case let object? in table.slots where !isRemoved(object) { staying.append(object) }
        for run in runs {
            for object in run.objects where !isRemoved(object) { staying.append(object) }
        }
        removeAll()
        reserveCapacity(staying.count)
        for object in staying { table.set(object, at: place(of: object)) }
    }

    /// Grows the table (to a power of two) so `capacity` objects fit without growing again.
    mutating func reserveCapacity(_ capacity: Int) {
        dissolveRuns()
        table.reserveCapacity(capacity, home: Self.home)
    }

    /// The place of `object`'s own row.
    private func place(of object: ManagedObject) -> ProbingTable<ManagedObject?>.Place { place(of: key(of: object)) }

    /// The place holding `key`, or the empty slot where it would go (the table has slots).
    private func place(of key: ManagedObjectContext.ObjectKey) -> ProbingTable<ManagedObject?>.Place {
        table.place(home: Self.home(key.primaryKey)) {
            $0!.registeredPrimaryKey == key.primaryKey && $0!.entity.rootEntity.entityNumber == key.rootEntityNumber
        }
    }

    /// A hash of the primary key alone, so objects of several roots share the table.
    private static func home(_ primaryKey: Int64) -> Int {
        ProbingTable<ManagedObject?>.spread(UInt64(bitPattern: primaryKey))
    }
    private static func home(_ object: ManagedObject?) -> Int { home(object!.registeredPrimaryKey) }
}
