/// An object's property values by name. Entities have few properties with short names, so a
/// linear scan over inline strings beats hashing them: reading rows builds one of these per
/// object, and every property access looks one up.
struct PropertyValues: Sequence {
    private var keys: [String] = []
    private var entries: [Any] = []

    init() {}

    init(minimumCapacity: Int) {
        keys.reserveCapacity(minimumCapacity)
        entries.reserveCapacity(minimumCapacity)
    }

    var isEmpty: Bool { keys.isEmpty }

    subscript(key: String) -> Any? {
        get {
            guard let index = keys.firstIndex(of: key) else { return nil }
            return entries[index]
        }
        set {
            if let index = keys.firstIndex(of: key) {
                if let newValue {
                    entries[index] = newValue
                } else {
                    keys.remove(at: index)
                    entries.remove(at: index)
                }
            } else if let newValue {
                keys.append(key)
                entries.append(newValue)
            }
        }
    }

    func makeIterator() -> AnyIterator<(key: String, value: Any)> {
        var index = 0
        return AnyIterator {
            guard index < keys.count else { return nil }
            defer { index += 1 }
            return (keys[index], entries[index])
        }
    }

    func filter(_ isIncluded: (String) -> Bool) -> PropertyValues {
        var result = PropertyValues()
        for (key, value) in self where isIncluded(key) { result[key] = value }
        return result
    }

    mutating func merge(_ other: PropertyValues) {
        for (key, value) in other { self[key] = value }
    }
}
