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
        // Decrypted text is the commonest value: boxed before the casts below, which try bridging.
        case is String: self = .boxed(AnyBox(value))
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
/// attributes so costs 8 bytes a value and no second allocation. The layout, the other values
/// and the words share one buffer, so a value is a single reference (an object keeps two:
/// its values and its committed values).
struct PropertyValues: Sequence {
    private var storage: PropertyStorage

    var layout: PropertyLayout { storage.header.layout }

    init() { storage = PropertyStorage.empty }

    /// Values in `layout`'s order, all absent.
    init(layout: PropertyLayout) {
        storage = layout === PropertyLayout.empty ? PropertyStorage.empty : PropertyStorage.make(layout: layout, copying: nil)
    }

    private var count: Int { storage.header.count }

    /// Makes the buffer this value's own, with a word for every key of the layout.
    private mutating func prepareForWrite() {
        if isKnownUniquelyReferenced(&storage), storage.header.count == layout.keys.count { return }
        storage = PropertyStorage.make(layout: layout, copying: storage)
    }

    private func word(_ index: Int) -> UInt64 { storage.withUnsafeMutablePointerToElements { $0[index] } }

    var isEmpty: Bool { !(0..<count).contains { word($0) != 0 } }

    /// Clears every value for `layout`, reusing the buffer when nothing else holds it.
    mutating func removeAll(layout: PropertyLayout) {
        guard layout !== PropertyLayout.empty, isKnownUniquelyReferenced(&storage), storage.header.layout === layout,
              storage.header.count == layout.keys.count
        else {
            self = PropertyValues(layout: layout)
            return
        }
        storage.withUnsafeMutablePointerToElements { $0.update(repeating: 0, count: layout.keys.count) }
        storage.header.others = []
    }

    subscript(key: String) -> Any? {
        get { layout.index(of: key).flatMap { slot($0).value } }
        set {
            if let index = layout.index(of: key) {
                setSlot(index, newValue.map(PropertySlot.init) ?? .absent)
            } else if let newValue {
                let grown = layout.appending(key)
                storage = PropertyStorage.make(layout: grown, copying: storage)
                setSlot(grown.keys.count - 1, PropertySlot(newValue))
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
        guard index < count else { return .absent }
        let word = word(index)
        if word == 0 { return .absent }
        if word & 1 == 1 { return .int(Int(truncatingIfNeeded: Int64(bitPattern: word) >> 1)) }
        return storage.header.others[Int(word >> 1) - 1]
    }

    /// Sets a slot directly, skipping the dynamic casts of `PropertySlot.init`.
    mutating func setSlot(_ index: Int, _ slot: PropertySlot) {
        prepareForWrite()
        let old = word(index)
        let otherIndex = old != 0 && old & 1 == 0 ? Int(old >> 1) - 1 : nil
        let newWord: UInt64
        switch slot {
        case .absent:
            if let otherIndex { storage.header.others[otherIndex] = .absent }
            newWord = 0
        case .int(let number) where number >= Int.min >> 1 && number <= Int.max >> 1:
            if let otherIndex { storage.header.others[otherIndex] = .absent }
            newWord = UInt64(bitPattern: Int64(number) << 1) | 1
        default:
            if let otherIndex {
                storage.header.others[otherIndex] = slot
                newWord = old
            } else {
                storage.header.others.append(slot)
                newWord = UInt64(storage.header.others.count) << 1
            }
        }
        storage.withUnsafeMutablePointerToElements { $0[index] = newWord }
    }

    func makeIterator() -> AnyIterator<(key: String, value: Any)> {
        var index = 0
        return AnyIterator {
            while index < count {
                defer { index += 1 }
                if let value = slot(index).value { return (layout.keys[index], value) }
            }
            return nil
        }
    }

    func filter(_ isIncluded: (String) -> Bool) -> PropertyValues {
        var result = PropertyValues(layout: layout)
        for index in 0..<count where isIncluded(layout.keys[index]) { result.setSlot(index, slot(index)) }
        return result
    }

    mutating func merge(_ other: PropertyValues) {
        for (key, value) in other { self[key] = value }
    }
}

struct PropertyStorageHeader {
    var layout: PropertyLayout
    var others: ContiguousArray<PropertySlot>
    /// The words in the buffer: the layout's key count, or 0 for the shared empty buffer.
    var count: Int
}

/// The buffer behind ``PropertyValues``: its header, then one word per key of the layout.
final class PropertyStorage: ManagedBuffer<PropertyStorageHeader, UInt64> {
    /// Shared by every empty value of the empty layout; never written (never uniquely held).
    nonisolated(unsafe) static let empty = make(layout: .empty, copying: nil)

    /// A buffer for `layout`, all absent, or with `source`'s words and other values.
    static func make(layout: PropertyLayout, copying source: PropertyStorage?) -> PropertyStorage {
        let count = layout.keys.count
        let buffer = create(minimumCapacity: count) { _ in
            PropertyStorageHeader(layout: layout, others: source?.header.others ?? [], count: count)
        }
        let storage = unsafeDowncast(buffer, to: PropertyStorage.self)
        storage.withUnsafeMutablePointerToElements { words in
            words.initialize(repeating: 0, count: count)
            if let source {
                let copied = min(count, source.header.count)
                source.withUnsafeMutablePointerToElements { words.update(from: $0, count: copied) }
            }
        }
        return storage
    }
}
