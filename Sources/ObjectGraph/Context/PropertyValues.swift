/// The names of an entity's properties in a fixed order (attributes as in
/// `EntityDescription.attributes`, then relationships), shared by all its objects' values.
final class PropertyLayout: Sendable {
    let keys: [String]
    /// `keys.count`, one load away from a value's buffer.
    let count: Int

    init(keys: [String]) {
        self.keys = keys
        count = keys.count
    }

    static let empty = PropertyLayout(keys: [])

    func index(of key: String) -> Int? { keys.firstIndex(of: key) }

    func appending(_ key: String) -> PropertyLayout { PropertyLayout(keys: keys + [key]) }
}

/// One property value as read from or written to ``PropertyValues``: numbers and objects
/// inline, text in a box of its own, anything else boxed.
enum PropertySlot {
    case absent
    case int(Int)
    case double(Double)
    case bool(Bool)
    case object(ManagedObject)
    case fault(Int64)
    case text(TextBox)
    case boxed(AnyBox)

    final class AnyBox {
        let value: Any
        init(_ value: Any) { self.value = value }
    }

    /// Text, the commonest value (decrypted names, notes, passwords): a box of 32 bytes where
    /// an `AnyBox` takes 48.
    final class TextBox {
        let value: String
        init(_ value: String) { self.value = value }
    }

    init(_ value: Any) {
        // A class instance (an object, a relationship's members) fails each value-type cast
        // below only after trying to bridge, several times the cost of this check.
        // (Other classes, such as NSString and NSNumber, go on to the casts that bridge them.)
        if type(of: value) is AnyClass {
            if let object = value as? ManagedObject {
                self = .object(object)
                return
            }
            if value is RelationshipMembers {
                self = .boxed(AnyBox(value))
                return
            }
        }
        switch value {
        // Checked before the casts below, which try bridging.
        case let text as String: self = .text(TextBox(text))
        case let number as Int: self = .int(number)
        case let number as Double: self = .double(number)
        case let flag as Bool: self = .bool(flag)
        case let fault as FaultReference: self = .fault(fault.primaryKey)
        default: self = .boxed(AnyBox(value))
        }
    }

    /// A value as ``StoredValues`` reads a column of `type`: of a kind known from the type, so
    /// the dates, data and identifiers of every row fetched are boxed without a failing cast each.
    init(stored value: Any, type: AttributeType) {
        switch type {
        case .date, .binary, .uuid, .uri, .decimal: self = .boxed(AnyBox(value))
        default: self.init(value)
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
        case .text(let box): return box.value
        case .boxed(let box): return box.value
        }
    }

    var isAbsent: Bool {
        if case .absent = self { return true }
        return false
    }
}

/// An object's property values by name, stored in the order of a shared ``PropertyLayout``:
/// one buffer holding the layout and one 8-byte word a key, so a row of numbers, flags and
/// to-one faults costs a single allocation (an object keeps two values: current and committed).
///
/// A word is 0 when absent; otherwise its low bits say what the rest holds (``PropertyWord``):
/// an integer of 63 bits, a flag, a fault's primary key, a double, or a retained reference to
/// a destination object or a box. A side array of other values (and its count) made every
/// buffer two words longer and a size class larger.
struct PropertyValues: Sequence {
    private var storage: PropertyStorage

    var layout: PropertyLayout { storage.header }

    init() { storage = PropertyStorage.empty }

    /// Values in `layout`'s order, all absent.
    init(layout: PropertyLayout) {
        storage =
            layout === PropertyLayout.empty ? PropertyStorage.empty : PropertyStorage.make(layout: layout, copying: nil)
    }

    private var count: Int { storage.header.count }

    /// Makes the buffer this value's own.
    private mutating func prepareForWrite() {
        if isKnownUniquelyReferenced(&storage) { return }
        storage = PropertyStorage.make(layout: layout, copying: storage)
    }

    private func word(_ index: Int) -> UInt64 { storage.withUnsafeMutablePointerToElements { $0[index] } }

    var isEmpty: Bool { !(0..<count).contains { word($0) != 0 } }

    /// Clears every value for `layout`, reusing the buffer when nothing else holds it.
    mutating func removeAll(layout: PropertyLayout) {
        guard layout !== PropertyLayout.empty, isKnownUniquelyReferenced(&storage), storage.header === layout else {
            self = PropertyValues(layout: layout)
            return
        }
        storage.withUnsafeMutablePointerToElements { words in
            for index in 0..<layout.count { PropertyWord.release(words[index]) }
            words.update(repeating: 0, count: layout.count)
        }
    }

    subscript(key: String) -> Any? {
        get { layout.index(of: key).flatMap { slot($0).value } }
        set {
            if let index = layout.index(of: key) {
                setSlot(index, newValue.map(PropertySlot.init) ?? .absent)
            } else if let newValue {
                let grown = layout.appending(key)
                storage = PropertyStorage.make(layout: grown, copying: storage)
                setSlot(grown.count - 1, PropertySlot(newValue))
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
        return PropertyWord.slot(word(index))
    }

    /// Sets a slot directly, skipping the dynamic casts of `PropertySlot.init`.
    mutating func setSlot(_ index: Int, _ slot: PropertySlot) {
        prepareForWrite()
        let newWord = PropertyWord.make(slot)
        storage.withUnsafeMutablePointerToElements { words in
            let old = words[index]
            words[index] = newWord
            PropertyWord.release(old)
        }
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

/// How a ``PropertySlot`` is packed into one word of ``PropertyStorage``, by its low four bits
/// (references are 16-byte aligned, so those bits of a reference are free):
/// `xxx1` an integer of 63 bits; `0000` absent (0) or a retained `AnyBox`; `1000` a retained
/// object; `0010` a fault's primary key of 60 bits; `0100` a flag; `0110` a double whose low four
/// bits are zero; `1010` a retained ``SlotBox`` for a number too wide for its word; `1100` a
/// retained `TextBox`.
enum PropertyWord {
    private static let tagMask: UInt64 = 0xF
    private static let objectTag: UInt64 = 0b1000
    private static let faultTag: UInt64 = 0b0010
    private static let flagTag: UInt64 = 0b0100
    private static let doubleTag: UInt64 = 0b0110
    private static let wideTag: UInt64 = 0b1010
    private static let textTag: UInt64 = 0b1100

    /// A number too wide for its word.
    final class SlotBox {
        let slot: PropertySlot
        init(_ slot: PropertySlot) { self.slot = slot }
    }

    static func make(_ slot: PropertySlot) -> UInt64 {
        switch slot {
        case .absent: return 0
        case .int(let number) where number >= Int.min >> 1 && number <= Int.max >> 1:
            return UInt64(bitPattern: Int64(number) << 1) | 1
        case .bool(let flag): return (flag ? 1 << 4 : 0) | flagTag
        case .fault(let key) where key >= Int64.min >> 4 && key <= Int64.max >> 4:
            return UInt64(bitPattern: key << 4) | faultTag
        case .double(let number) where number.bitPattern & tagMask == 0:
            return number.bitPattern | doubleTag
        case .object(let object): return reference(object) | objectTag
        case .text(let box): return reference(box) | textTag
        case .boxed(let box): return reference(box)
        case .int, .fault, .double: return reference(SlotBox(slot)) | wideTag
        }
    }

    static func slot(_ word: UInt64) -> PropertySlot {
        if word & 1 == 1 { return .int(Int(truncatingIfNeeded: Int64(bitPattern: word) >> 1)) }
        switch word & tagMask {
        case 0: return word == 0 ? .absent : .boxed(object(word, as: PropertySlot.AnyBox.self))
        case objectTag: return .object(object(word, as: ManagedObject.self))
        case faultTag: return .fault(Int64(bitPattern: word) >> 4)
        case flagTag: return .bool(word & (1 << 4) != 0)
        case doubleTag: return .double(Double(bitPattern: word & ~tagMask))
        case textTag: return .text(object(word, as: PropertySlot.TextBox.self))
        default: return object(word, as: SlotBox.self).slot
        }
    }

    /// Whether the word holds a reference (retained by the buffer that holds the word).
    private static func isReference(_ word: UInt64) -> Bool {
        let tag = word & tagMask
        return word != 0 && (tag == 0 || tag == objectTag || tag == wideTag || tag == textTag)
    }

    static func retain(_ word: UInt64) {
        guard isReference(word) else { return }
        _ = Unmanaged<AnyObject>.fromOpaque(pointer(word)).retain()
    }

    static func release(_ word: UInt64) {
        guard isReference(word) else { return }
        Unmanaged<AnyObject>.fromOpaque(pointer(word)).release()
    }

    private static func reference(_ object: AnyObject) -> UInt64 {
        let bits = UInt64(UInt(bitPattern: Unmanaged.passRetained(object).toOpaque()))
        precondition(bits & tagMask == 0, "heap objects are 16-byte aligned")
        return bits
    }

    private static func pointer(_ word: UInt64) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(bitPattern: UInt(word & ~tagMask))!
    }

    private static func object<T: AnyObject>(_ word: UInt64, as type: T.Type) -> T {
        Unmanaged<T>.fromOpaque(pointer(word)).takeUnretainedValue()
    }
}

/// The buffer behind ``PropertyValues``: its layout, then one word per key of the layout.
final class PropertyStorage: ManagedBuffer<PropertyLayout, UInt64> {
    /// Shared by every empty value of the empty layout; never written (never uniquely held).
    nonisolated(unsafe) static let empty = make(layout: .empty, copying: nil)

    /// A buffer for `layout`, all absent, or with `source`'s values for the keys they share.
    static func make(layout: PropertyLayout, copying source: PropertyStorage?) -> PropertyStorage {
        let count = layout.count
        let buffer = create(minimumCapacity: count) { _ in layout }
        let storage = unsafeDowncast(buffer, to: PropertyStorage.self)
        storage.withUnsafeMutablePointerToElements { words in
            words.initialize(repeating: 0, count: count)
            if let source {
                let copied = min(count, source.header.count)
                source.withUnsafeMutablePointerToElements { words.update(from: $0, count: copied) }
                for index in 0..<copied { PropertyWord.retain(words[index]) }
            }
        }
        return storage
    }

    deinit {
        let count = header.count
        withUnsafeMutablePointerToElements { words in
            for index in 0..<count { PropertyWord.release(words[index]) }
        }
    }
}
