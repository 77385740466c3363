/// The names of an entity's properties in a fixed order (attributes as in
/// `EntityDescription.attributes`, then relationships), shared by all its objects' values,
/// and where each one's cell lies in a value's buffer.
final class PropertyLayout: Sendable {
    let keys: [String]
    /// `keys.count`, one load away from a value's buffer.
    let count: Int
    /// For each key, its cell's first word, shifted left once; the low bit set for a text cell.
    private let cells: [Int]
    /// The buffer's length in words: a cell takes one, a text cell two.
    let wordCount: Int
    let hasTextCells: Bool

    /// `textKeys` (String attributes) get a cell of two words holding their text itself: a box
    /// for it took 48 bytes more per value, the commonest kind.
    init(keys: [String], textKeys: Set<String> = []) {
        self.keys = keys
        count = keys.count
        var cells: [Int] = []
        var offset = 0
        for key in keys {
            let isText = textKeys.contains(key)
            cells.append(offset << 1 | (isText ? 1 : 0))
            offset += isText ? 2 : 1
        }
        self.cells = cells
        wordCount = offset
        hasTextCells = offset > keys.count
    }

    static let empty = PropertyLayout(keys: [])

    func index(of key: String) -> Int? { keys.firstIndex(of: key) }

    /// Where the cell of the key at `index` starts, and whether it is a text cell.
    @inline(__always)
    func cell(_ index: Int) -> (offset: Int, isText: Bool) {
        hasTextCells ? (cells[index] >> 1, cells[index] & 1 == 1) : (index, false)
    }

    var textKeys: Set<String> { Set((0..<count).filter { cell($0).isText }.map { keys[$0] }) }

    func appending(_ key: String) -> PropertyLayout { PropertyLayout(keys: keys + [key], textKeys: textKeys) }
}

/// One property value as read from or written to ``PropertyValues``: numbers, objects and text
/// inline, anything else boxed.
enum PropertySlot {
    case absent
    case int(Int)
    case double(Double)
    case bool(Bool)
    case object(ManagedObject)
    case fault(Int64)
    case text(String)
    case boxed(AnyBox)

    final class AnyBox {
        let value: Any
        init(_ value: Any) { self.value = value }
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
        case let text as String: self = .text(text)
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
        case .text(let text): return text
        case .boxed(let box): return box.value
        }
    }

    var isAbsent: Bool {
        if case .absent = self { return true }
        return false
    }
}

/// An object's property values by name, stored in the order of a shared ``PropertyLayout``:
/// one buffer holding the layout and a cell a key, so a row of numbers, text, flags and
/// to-one faults costs a single allocation (an object keeps two values: current and committed).
///
/// A text cell holds its `String?` in two words. Any other cell is one word, 0 when absent;
/// otherwise its low bits say what the rest holds (``PropertyWord``): an integer of 63 bits, a
/// flag, a fault's primary key, a double, or a retained reference to a destination object or a
/// box. A side array of other values (and its count) made every buffer two words longer and a
/// size class larger.
///
/// A text cell given something other than text turns the buffer into a ``PlainPropertyStorage``,
/// where every cell is a word. (`setValue` refuses another type for a String attribute, as Core
/// Data does; only a write of values as they are, such as a merge's, could bring one.)
struct PropertyValues: Sequence {
    private var storage: PropertyStorage

    var layout: PropertyLayout { storage.header }

    init() { storage = PropertyStorage.empty }

    /// Values in `layout`'s order, all absent.
    init(layout: PropertyLayout) {
        storage = layout === PropertyLayout.empty ? PropertyStorage.empty : PropertyStorage.make(layout: layout)
    }

    private var count: Int { storage.header.count }

    /// Whether both are one buffer (so one holds what the other does, whatever they hold).
    func sharesStorage(with other: PropertyValues) -> Bool { storage === other.storage }
    /// Whether this is ``init()``'s buffer, never written.
    var isUnwritten: Bool { storage === PropertyStorage.empty }

    /// Makes the buffer this value's own.
    private mutating func prepareForWrite() {
        if isKnownUniquelyReferenced(&storage) { return }
        storage = storage.copy()
    }

    var isEmpty: Bool { (0..<count).allSatisfy { slot($0).isAbsent } }

    /// Clears every value for `layout`, reusing the buffer when nothing else holds it.
    mutating func removeAll(layout: PropertyLayout) {
        guard layout !== PropertyLayout.empty, isKnownUniquelyReferenced(&storage), storage.header === layout,
              !storage.isPlain
        else {
            self = PropertyValues(layout: layout)
            return
        }
        storage.clear()
    }

    subscript(key: String) -> Any? {
        get { layout.index(of: key).flatMap { slot($0).value } }
        set {
            if let index = layout.index(of: key) {
                setSlot(index, newValue.map(PropertySlot.init) ?? .absent)
            } else if let newValue {
                var grown = PropertyValues(layout: layout.appending(key))
                for index in 0..<count { grown.setSlot(index, slot(index)) }
                grown.setSlot(count, PropertySlot(newValue))
                self = grown
            }
        }
    }

    /// The value at a position of `layout` (for callers that looked the key up once).
    subscript(slot index: Int) -> Any? {
        get { slot(index).value }
        set { setSlot(index, newValue.map(PropertySlot.init) ?? .absent) }
    }

    /// Sets a value by its position when the values have `layout`, by its key otherwise: one
    /// access for an object's write.
    mutating func setValue(_ value: Any?, forKey key: String, at index: Int, ifLayoutIs layout: PropertyLayout) {
        if self.layout === layout {
            self[slot: index] = value
        } else {
            self[key] = value
        }
    }

    /// The slot at a position of `layout`, read without building an `Any`.
    func slot(_ index: Int) -> PropertySlot { storage.slot(index) }

    /// Sets a slot directly, skipping the dynamic casts of `PropertySlot.init`.
    mutating func setSlot(_ index: Int, _ slot: PropertySlot) {
        prepareForWrite()
        if !storage.set(index, slot) {
            storage = storage.plainCopy()
            _ = storage.set(index, slot)
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

    /// Text in a word of a ``PlainPropertyStorage`` (a text cell holds its text itself).
    final class TextBox {
        let value: String
        init(_ value: String) { self.value = value }
    }

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
        case .text(let text): return reference(TextBox(text)) | textTag
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
        case textTag: return .text(object(word, as: TextBox.self).value)
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

/// The buffer behind ``PropertyValues``: its layout, then its cells as the layout places them;
/// a text cell holds a `String?`.
class PropertyStorage: ManagedBuffer<PropertyLayout, UInt64> {
    /// Shared by every empty value of the empty layout; never written (never uniquely held).
    nonisolated(unsafe) static let empty = make(layout: .empty)

    /// A buffer for `layout`, all absent.
    static func make(layout: PropertyLayout) -> PropertyStorage {
        let storage = unsafeDowncast(
            create(minimumCapacity: layout.wordCount) { _ in layout }, to: PropertyStorage.self)
        storage.withUnsafeMutablePointerToElements { words in
            words.initialize(repeating: 0, count: layout.wordCount)
            guard layout.hasTextCells else { return }
            for index in 0..<layout.count where layout.cell(index).isText {
                withText(words, layout.cell(index).offset) { $0.initialize(to: nil) }
            }
        }
        return storage
    }

    /// Whether every cell is a word, text cells included (the class says so: no room is taken).
    final var isPlain: Bool { type(of: self) == PlainPropertyStorage.self }

    /// Whether every cell is a word: a plain buffer, or a layout without text cells.
    private var isWordsOnly: Bool { !header.hasTextCells || isPlain }

    /// A text cell's two words as the `String?` they hold.
    @inline(__always)
    private static func withText<Result>(
        _ words: UnsafeMutablePointer<UInt64>, _ offset: Int, _ body: (UnsafeMutablePointer<String?>) -> Result
    ) -> Result {
        (words + offset).withMemoryRebound(to: String?.self, capacity: 1, body)
    }

    // The header is read through its pointer: `header` is a class's stored property, and each
    // read of it was a dynamic exclusivity check, a tenth of a fetch's time.

    /// The value at `index`, absent past the layout's end.
    final func slot(_ index: Int) -> PropertySlot {
        withUnsafeMutablePointers { layout, words in
            guard index < layout.pointee.count else { return .absent }
            let cell = layout.pointee.cell(index)
            if cell.isText, !isPlain {
                return Self.withText(words, cell.offset) { $0.pointee.map { .text($0) } ?? .absent }
            }
            return PropertyWord.slot(words[cell.offset])
        }
    }

    /// Sets a cell; false, changing nothing, when a text cell is given something else.
    final func set(_ index: Int, _ slot: PropertySlot) -> Bool {
        withUnsafeMutablePointers { layout, words in
            let cell = layout.pointee.cell(index)
            if cell.isText, !isPlain {
                switch slot {
                case .absent: Self.withText(words, cell.offset) { $0.pointee = nil }
                case .text(let text): Self.withText(words, cell.offset) { $0.pointee = text }
                default: return false
                }
                return true
            }
            let old = words[cell.offset]
            words[cell.offset] = PropertyWord.make(slot)
            PropertyWord.release(old)
            return true
        }
    }

    /// A buffer of the same kind holding the same values.
    final func copy() -> PropertyStorage {
        let layout = header
        let copy = unsafeDowncast(
            type(of: self).create(minimumCapacity: layout.wordCount) { _ in layout }, to: PropertyStorage.self)
        let wordsOnly = isWordsOnly
        withUnsafeMutablePointerToElements { source in
            copy.withUnsafeMutablePointerToElements { words in
                if wordsOnly {
                    words.initialize(from: source, count: layout.wordCount)
                    for offset in 0..<layout.wordCount { PropertyWord.retain(words[offset]) }
                    return
                }
                words.initialize(repeating: 0, count: layout.wordCount)
                for index in 0..<layout.count {
                    let cell = layout.cell(index)
                    if cell.isText {
                        let text = Self.withText(source, cell.offset) { $0.pointee }
                        Self.withText(words, cell.offset) { $0.initialize(to: text) }
                    } else {
                        words[cell.offset] = source[cell.offset]
                        PropertyWord.retain(words[cell.offset])
                    }
                }
            }
        }
        return copy
    }

    /// The same values in a buffer whose text cells are words (their text boxed).
    final func plainCopy() -> PropertyStorage {
        let layout = header
        let copy = unsafeDowncast(
            PlainPropertyStorage.create(minimumCapacity: layout.wordCount) { _ in layout }, to: PropertyStorage.self)
        copy.withUnsafeMutablePointerToElements { $0.initialize(repeating: 0, count: layout.wordCount) }
        for index in 0..<layout.count { _ = copy.set(index, slot(index)) }
        return copy
    }

    /// Every cell absent again.
    final func clear() {
        let layout = header
        let wordsOnly = isWordsOnly
        withUnsafeMutablePointerToElements { words in
            if wordsOnly {
                for offset in 0..<layout.wordCount { PropertyWord.release(words[offset]) }
                words.update(repeating: 0, count: layout.wordCount)
                return
            }
            for index in 0..<layout.count {
                let cell = layout.cell(index)
                if cell.isText {
                    Self.withText(words, cell.offset) { $0.pointee = nil }
                } else {
                    PropertyWord.release(words[cell.offset])
                    words[cell.offset] = 0
                }
            }
        }
    }

    deinit {
        let layout = header
        let wordsOnly = isWordsOnly
        withUnsafeMutablePointerToElements { words in
            if wordsOnly {
                for offset in 0..<layout.wordCount { PropertyWord.release(words[offset]) }
                return
            }
            for index in 0..<layout.count {
                let cell = layout.cell(index)
                if cell.isText {
                    Self.withText(words, cell.offset) { _ = $0.deinitialize(count: 1) }
                } else {
                    PropertyWord.release(words[cell.offset])
                }
            }
        }
    }
}

/// A ``PropertyStorage`` whose text cells hold words, as every other cell: made when a text cell
/// is given something other than text.
final class PlainPropertyStorage: PropertyStorage {}
