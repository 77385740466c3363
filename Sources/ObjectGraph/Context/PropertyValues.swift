/// The names of an entity's properties in a fixed order (attributes as in
/// `EntityDescription.attributes`, then relationships), shared by all its objects' values.
final class PropertyLayout: Sendable {
    let keys: [String]

    init(keys: [String]) { self.keys = keys }

    static let empty = PropertyLayout(keys: [])

    func index(of key: String) -> Int? { keys.firstIndex(of: key) }

    func appending(_ key: String) -> PropertyLayout { PropertyLayout(keys: keys + [key]) }
}

/// One property value in 16 bytes: numbers and objects inline, anything else boxed. Reading
/// 200k rows keeps 10 of these per object instead of 10 keys and 10 32-byte `Any`s.
enum PropertySlot {
    case absent
    case int(Int)
    case double(Double)
    case bool(Bool)
    case object(ManagedObject)
    case fault(Int64)
    case boxed(AnyBox)

    final class AnyBox {
        let value: Any
        init(_ value: Any) { self.value = value }
    }

    init(_ value: Any) {
        switch value {
        case let number as Int: self = .int(number)
        case let number as Double: self = .double(number)
        case let flag as Bool: self = .bool(flag)
        case let object as ManagedObject: self = .object(object)
        case let fault as FaultReference: self = .fault(fault.primaryKey)
        default: self = .boxed(AnyBox(value))
        }
    }

    var value: Any? {
        switch self {
        case .absent: return nil
        case .int(let number): return number
        case .double(let number): return number
        case .bool(let flag): return flag
        case .object(let object): return object
        case .fault(let key): return FaultReference(primaryKey: key)
        case .boxed(let box): return box.value
        }
    }

    var isAbsent: Bool {
        if case .absent = self { return true }
        return false
    }
}

/// An object's property values by name, stored in the order of a shared ``PropertyLayout``:
/// building one per fetched row allocates only its slots.
struct PropertyValues: Sequence {
    private(set) var layout: PropertyLayout
    private var slots: ContiguousArray<PropertySlot>

    init() {
        layout = .empty
        slots = []
    }

    /// Values in `layout`'s order; the slots are allocated at the first value set.
    init(layout: PropertyLayout) {
        self.layout = layout
        slots = []
    }

    private mutating func ensureSlots() {
        guard slots.count < layout.keys.count else { return }
        slots.append(contentsOf: repeatElement(.absent, count: layout.keys.count - slots.count))
    }

    var isEmpty: Bool { !slots.contains { !$0.isAbsent } }

    subscript(key: String) -> Any? {
        get { layout.index(of: key).flatMap { $0 < slots.count ? slots[$0].value : nil } }
        set {
            if let index = layout.index(of: key) {
                ensureSlots()
                slots[index] = newValue.map(PropertySlot.init) ?? .absent
            } else if let newValue {
                ensureSlots()
                layout = layout.appending(key)
                slots.append(PropertySlot(newValue))
            }
        }
    }

    /// The value at a position of `layout` (for callers that looked the key up once).
    subscript(slot index: Int) -> Any? {
        get { index < slots.count ? slots[index].value : nil }
        set {
            ensureSlots()
            slots[index] = newValue.map(PropertySlot.init) ?? .absent
        }
    }

    /// The slot at a position of `layout`, read without building an `Any`.
    func slot(_ index: Int) -> PropertySlot { index < slots.count ? slots[index] : .absent }

    /// Sets a slot directly, skipping the dynamic casts of `PropertySlot.init`.
    mutating func setSlot(_ index: Int, _ slot: PropertySlot) {
        ensureSlots()
        slots[index] = slot
    }

    func makeIterator() -> AnyIterator<(key: String, value: Any)> {
        var index = 0
        return AnyIterator {
            while index < slots.count {
                defer { index += 1 }
                if let value = slots[index].value { return (layout.keys[index], value) }
            }
            return nil
        }
    }

    func filter(_ isIncluded: (String) -> Bool) -> PropertyValues {
        var result = PropertyValues(layout: layout)
        for index in slots.indices where isIncluded(layout.keys[index]) { result.setSlot(index, slots[index]) }
        return result
    }

    mutating func merge(_ other: PropertyValues) {
        for (key, value) in other { self[key] = value }
    }
}
