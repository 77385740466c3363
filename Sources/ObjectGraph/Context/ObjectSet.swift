/// Objects by identity, in insertion order.
struct ObjectSet {
    private(set) var objects: [ManagedObject] = []
    private var members: Set<ObjectIdentifier> = []

    var isEmpty: Bool { objects.isEmpty }
    var count: Int { objects.count }

    func contains(_ object: ManagedObject) -> Bool { members.contains(ObjectIdentifier(object)) }

    @discardableResult
    mutating func insert(_ object: ManagedObject) -> Bool {
        guard members.insert(ObjectIdentifier(object)).inserted else { return false }
        objects.append(object)
        return true
    }

    mutating func remove(_ object: ManagedObject) {
        guard members.remove(ObjectIdentifier(object)) != nil else { return }
        objects.removeAll { $0 === object }
    }

    mutating func removeAll() {
        objects = []
        members = []
    }
}
