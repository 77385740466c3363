import Foundation

/// A reader of binary property lists (`bplist00`) that checks every offset, size and
/// reference, for bytes that come from files: store metadata (`Z_METADATA.Z_PLIST`) and
/// transformed values.
///
/// swift-corelibs-foundation's `PropertyListSerialization` traps instead of throwing on some
/// damaged binary property lists (a set holding a dictionary, a reference out of range), so
/// nothing read from a file goes to it before this reader accepted it: see
/// ``foundationPropertyList(from:)``. Values come back as Swift values: `String`, `Int`,
/// `Double`, `Bool`, `Date`, `Data`, `[Any]`, `[String: Any]`, and ``UID`` for a keyed
/// archive's references. Sets, which Foundation never writes in a property list, are refused.
enum BinaryPropertyList {
    /// A reference between a keyed archive's objects.
    struct UID: Equatable {
        var value: Int
    }

    struct Failure: Error, CustomStringConvertible {
        var reason: String
        var description: String { "damaged binary property list: \(reason)" }
    }

    /// True when `data` starts like a binary property list.
    static func isBinaryPropertyList(_ data: Data) -> Bool { data.starts(with: Array("bplist00".utf8)) }

    static func parse(_ data: Data) throws(Failure) -> Any {
        var reader = try Reader(bytes: [UInt8](data))
        return try reader.object(reader.topObject, depth: 0)
    }

    /// Foundation's reading of property-list bytes from a file: a binary property list only
    /// once ``parse(_:)`` accepted it, any other format (XML, as Xcode writes) directly.
    /// Foundation reads anything starting with "bplist" as binary, so all of it is checked.
    ///
    /// A binary list is given as Foundation gives it — numbers as `NSNumber`, booleans as
    /// `Bool` — from this reader's own values, without Foundation reading it again: every
    /// opening reads each store's metadata, and Foundation's reading (its bridging of each
    /// value above all) was a sixth of opening a vault. A list holding what the two read
    /// differently (a 16-byte integer, a keyed archive's reference, an empty UTF-16 string)
    /// goes to Foundation.
    static func foundationPropertyList(from data: Data) throws -> Any {
        if data.starts(with: Array("bplist".utf8)) {
            var reader = try Reader(bytes: [UInt8](data), numbersAsFoundationDoes: true)
            let value = try reader.object(reader.topObject, depth: 0)
            if !reader.sawValueFoundationReadsOtherwise { return value }
        }
        return try PropertyListSerialization.propertyList(from: data, format: nil)
    }

    /// A store's metadata (`Z_METADATA.Z_PLIST`) as a dictionary; nil when it is none. An
    /// opening reads each store's metadata three times (adding the store, finding its model
    /// version, reloading both in one read), most often the same bytes: the last few readings
    /// are kept by their bytes, and bytes seen before are not read again.
    static func metadata(from data: Data) -> [String: Any]? {
        if let known = metadataLock.withLock({ recentMetadata.first { $0.data == data }?.metadata }) { return known }
        guard let metadata = try? foundationPropertyList(from: data) as? [String: Any] else { return nil }
        metadataLock.withLock {
            recentMetadata.insert((data, metadata), at: 0)
            recentMetadata.removeLast(max(0, recentMetadata.count - 4))
        }
        return metadata
    }

    private static let metadataLock = NSLock()
    nonisolated(unsafe) private static var recentMetadata: [(data: Data, metadata: [String: Any])] = []

    private struct Reader {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let topObject: Int
        let offsetTable: Int
        var inProgress: Set<Int> = []
        var done: [Int: Any] = [:]
        /// Integers and reals as `NSNumber`, as `PropertyListSerialization` gives them.
        let numbersAsFoundationDoes: Bool
        /// A 16-byte integer (Foundation keeps all of it), a UID (Foundation's own type) or an
        /// empty UTF-16 string.
        private(set) var sawValueFoundationReadsOtherwise = false

        init(bytes: [UInt8], numbersAsFoundationDoes: Bool = false) throws(Failure) {
            self.numbersAsFoundationDoes = numbersAsFoundationDoes
            guard bytes.count >= 40, bytes.starts(with: Array("bplist00".utf8)) else {
                throw Failure(reason: "no bplist00 header")
            }
            self.bytes = bytes
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw Failure(reason: "bad trailer sizes")
            }
            let count = Self.unsigned(bytes, at: trailer + 8, size: 8)
            let top = Self.unsigned(bytes, at: trailer + 16, size: 8)
            let table = Self.unsigned(bytes, at: trailer + 24, size: 8)
            guard count <= UInt64(bytes.count), top < count, table >= 8, table <= UInt64(trailer),
                UInt64(trailer) - table >= count * UInt64(offsetSize)
            else {
                throw Failure(reason: "trailer points outside the data")
            }
            // As Foundation refuses: the offset table runs up to the trailer, and its offsets
            // and the references are wide enough for what they must reach.
            guard UInt64(trailer) - table == count * UInt64(offsetSize),
                offsetSize == 8 || table >> (8 * offsetSize) == 0,
                referenceSize == 8 || (count - 1) >> (8 * referenceSize) == 0
            else {
                throw Failure(reason: "an offset table that does not fit its trailer")
            }
            objectCount = Int(count)
            topObject = Int(top)
            offsetTable = Int(table)
        }

        static func unsigned(_ bytes: [UInt8], at offset: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<(offset + size) { value = value << 8 | UInt64(bytes[index]) }
            return value
        }

        /// Reads `size` bytes of an object at `offset` as a big-endian unsigned integer, checking
        /// that they end before the offset table.
        func unsigned(at offset: Int, size: Int) throws(Failure) -> UInt64 {
            guard offset >= 0, size >= 0, size <= 8, offset <= offsetTable - size else {
                throw Failure(reason: "read past the end")
            }
            return Self.unsigned(bytes, at: offset, size: size)
        }

        func offset(of object: Int) throws(Failure) -> Int {
            guard object >= 0, object < objectCount else {
                throw Failure(reason: "object reference \(object) out of range")
            }
            // Within the table: the trailer's sizes were checked against it.
            let offset = Self.unsigned(bytes, at: offsetTable + object * offsetSize, size: offsetSize)
            guard offset >= 8, offset < UInt64(offsetTable) else {
                throw Failure(reason: "object offset out of range")
            }
            return Int(offset)
        }

        /// The length of a variable-size object (its marker's low nibble, or a following integer)
        /// and where its content starts.
        func length(marker: UInt8, at offset: Int) throws(Failure) -> (count: Int, start: Int) {
            let nibble = Int(marker & 0x0F)
            guard nibble == 0x0F else { return (nibble, offset + 1) }
            let intMarker = try unsigned(at: offset + 1, size: 1)
            guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else { throw Failure(reason: "bad length") }
            let size = 1 << Int(intMarker & 0x0F)
            let count = try unsigned(at: offset + 2, size: size)
            guard count <= UInt64(bytes.count) else { throw Failure(reason: "length beyond the data") }
            return (Int(count), offset + 2 + size)
        }

        func slice(_ start: Int, _ count: Int) throws(Failure) -> ArraySlice<UInt8> {
            guard start >= 0, count >= 0, start <= offsetTable, count <= offsetTable - start else {
                throw Failure(reason: "content past its end")
            }
            return bytes[start..<(start + count)]
        }

        func references(_ start: Int, _ count: Int) throws(Failure) -> [Int] {
            let (size, overflow) = count.multipliedReportingOverflow(by: referenceSize)
            guard !overflow else { throw Failure(reason: "too many references") }
            _ = try slice(start, size)
            // Clamped: a reference beyond Int's range is out of range like any other too large one.
            return (0..<count).map {
                Int(clamping: Self.unsigned(bytes, at: start + $0 * referenceSize, size: referenceSize))
            }
        }

        mutating func object(_ index: Int, depth: Int) throws(Failure) -> Any {
            if let value = done[index] { return value }
            guard depth < 256, inProgress.insert(index).inserted else {
                throw Failure(reason: "nested too deeply or in a cycle")
            }
            defer { inProgress.remove(index) }
            let offset = try offset(of: index)
            let marker = bytes[offset]
            let value: Any
            switch marker >> 4 {
            case 0x0:
                switch marker {
                case 0x08: value = false
                case 0x09: value = true
                default: throw Failure(reason: "unsupported marker \(marker)")
                }
            case 0x1:
                let size = 1 << Int(marker & 0x0F)
                guard size <= 16 else { throw Failure(reason: "bad integer size") }
                // 16-byte integers hold a 64-bit value in their low half.
                let raw = try unsigned(at: offset + 1 + max(0, size - 8), size: min(size, 8))
                let number = size >= 8 ? Int(Int64(bitPattern: raw)) : Int(raw)
                if size > 8 { sawValueFoundationReadsOtherwise = true }
                value = numbersAsFoundationDoes ? NSNumber(value: number) : number
            case 0x2:
                switch marker & 0x0F {
                case 2:
                    let single = Float(bitPattern: UInt32(try unsigned(at: offset + 1, size: 4)))
                    // Foundation keeps a finite 4-byte real as one (it prints and saves so).
                    value = !numbersAsFoundationDoes ? Double(single)
                        : single.isFinite ? NSNumber(value: single) : NSNumber(value: Double(single))
                case 3:
                    let real = Double(bitPattern: try unsigned(at: offset + 1, size: 8))
                    value = numbersAsFoundationDoes ? NSNumber(value: real) : real
                default: throw Failure(reason: "bad real size")
                }
            case 0x3:
                guard marker == 0x33 else { throw Failure(reason: "bad date") }
                value = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try unsigned(at: offset + 1, size: 8)))
            case 0x4:
                let (count, start) = try length(marker: marker, at: offset)
                value = Data(try slice(start, count))
            case 0x5:
                let (count, start) = try length(marker: marker, at: offset)
                let ascii = try slice(start, count)
                guard ascii.allSatisfy({ $0 < 0x80 }) else {
                    throw Failure(reason: "an ASCII string with a byte above 127")
                }
                value = String(decoding: ascii, as: UTF8.self)
            case 0x6:
                let (count, start) = try length(marker: marker, at: offset)
                let (size, overflow) = count.multipliedReportingOverflow(by: 2)
                guard !overflow else { throw Failure(reason: "string too long") }
                let units = try slice(start, size)
                // Foundation refuses an empty one on Linux.
                if count == 0 { sawValueFoundationReadsOtherwise = true }
                let utf16 = stride(from: units.startIndex, to: units.endIndex, by: 2).map {
                    UInt16(units[$0]) << 8 | UInt16(units[$0 + 1])
                }
                value = String(decoding: utf16, as: UTF16.self)
            case 0x8:
                sawValueFoundationReadsOtherwise = true
                value = UID(value: Int(try unsigned(at: offset + 1, size: Int(marker & 0x0F) + 1) & 0xFFFF_FFFF))
            case 0xA:
                let (count, start) = try length(marker: marker, at: offset)
                var elements: [Any] = []
                for reference in try references(start, count) {
                    elements.append(try object(reference, depth: depth + 1))
                }
                value = elements
            case 0xD:
                let (count, start) = try length(marker: marker, at: offset)
                let (keyBytes, overflow) = count.multipliedReportingOverflow(by: referenceSize)
                guard !overflow else { throw Failure(reason: "dictionary too large") }
                let keys = try references(start, count)
                let values = try references(start + keyBytes, count)
                var dictionary: [String: Any] = [:]
                for (key, element) in zip(keys, values) {
                    guard let name = try object(key, depth: depth + 1) as? String else {
                        throw Failure(reason: "a dictionary key that is not a string")
                    }
                    let read = try object(element, depth: depth + 1)
                    // A key written twice keeps its first value, as Foundation reads it.
                    if dictionary[name] == nil { dictionary[name] = read }
                }
                value = dictionary
            default:
                throw Failure(reason: "unknown marker \(marker)")
            }
            done[index] = value
            return value
        }
    }
}
