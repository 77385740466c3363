/// The names of an entity's properties in a fixed order (attributes as in
/// `EntityDescription.attributes`, then relationships), shared by all its objects' values.
final class PropertyLayout: Sendable {
    let keys: [String]

    init(keys: [String]) { self.keys = keys }

    static let empty = PropertyLayout(keys: [])

    func index(of key: String) -> Int? { keys.firstIndex(of: key) }

    func appending(_ key: String) -> PropertyLayout { PropertyLayout(keys: keys + [key]) }
}

/// One property value in 16 bytes: numbers and objects inline, anything else boxed; what
/// ``PropertyValues`` keeps beside its words for values that are not small integers.
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
/// building one per fetched row allocates only its words.
///
/// Each position is one 8-byte word: 0 when absent, an integer of 63 bits shifted left with
/// the low bit set, or (index + 1) << 1 into `others` for any other value. A row of integer
/// attributes so costs 8 bytes a value and no second allocation.
struct PropertyValues: Sequence {
    private(set) var layout: PropertyLayout
    private var words: ContiguousArray<UInt64>
    private var others: ContiguousArray<PropertySlot>

    init() {
        layout = .empty
        words = []
        others = []
    }

    /// Values in `layout`'s order; the words are allocated at the first value set.
    init(layout: PropertyLayout) {
        self.layout = layout
        words = []
        others = []
    }

    private mutating func ensureWords() {
        guard words.count < layout.keys.count else { return }
        words.append(contentsOf: repeatElement(0, count: layout.keys.count - words.count))
    }

    var isEmpty: Bool { !words.contains { $0 != 0 } }

    subscript(key: String) -> Any? {
        get { layout.index(of: key).flatMap { slot($0).value } }
        set {
            if let index = layout.index(of: key) {
                setSlot(index, newValue.map(PropertySlot.init) ?? .absent)
            } else if let newValue {
                ensureWords()
                layout = layout.appending(key)
                words.append(0)
                setSlot(words.count - 1, PropertySlot(newValue))
            }
        }
    }

    /// The value at a position of `layout` (for callers that looked the key up once).
    subscript(slot index: Int) -> Any? {
        get { slot(index).value }
        set { setSlot(index, newValue.map(PropertySlot.init) ?? .absent) }
    }

    /// The slot at a position of `layout`, read without building an `Any`.
    func slot(_ index: Int) -> PropertySlot {
        guard index < words.count else { return .absent }
        let word = words[index]
        if word == 0 { return .absent }
        if word & 1 == 1 { return .int(Int(truncatingIfNeeded: Int64(bitPattern: word) >> 1)) }
        return others[Int(word >> 1) - 1]
    }

    /// Sets a slot directly, skipping the dynamic casts of `PropertySlot.init`.
    mutating func setSlot(_ index: Int, _ slot: PropertySlot) {
        ensureWords()
        let old = words[index]
        let otherIndex = old != 0 && old & 1 == 0 ? Int(old >> 1) - 1 : nil
        switch slot {
        case .absent:
            if let otherIndex { others[otherIndex] = .absent }
            words[index] = 0
        case .int(let number) where number >= Int.min >> 1 && number <= Int.max >> 1:
            if let otherIndex { others[otherIndex] = .absent }
            words[index] = UInt64(bitPattern: Int64(number) << 1) | 1
        default:
            if let otherIndex {
                others[otherIndex] = slot
            } else {
                others.append(slot)
                words[index] = UInt64(others.count) << 1
            }
        }
    }

    func makeIterator() -> AnyIterator<(key: String, value: Any)> {
        var index = 0
        return AnyIterator {
            while index < words.count {
                defer { index += 1 }
                if let value = slot(index).value { return (layout.keys[index], value) }
            }
            return nil
        }
    }

    func filter(_ isIncluded: (String) -> Bool) -> PropertyValues {
        var result = PropertyValues(layout: layout)
        for index in words.indices where isIncluded(layout.keys[index]) { result.setSlot(index, slot(index)) }
        return result
    }

    mutating func merge(_ other: PropertyValues) {
        for (key, value) in other { self[key] = value }
    }
}
