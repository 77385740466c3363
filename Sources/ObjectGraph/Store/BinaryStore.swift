import Foundation
import GRDB

/// An atomic store in one binary file (store type ``StoreType/binary``): the metadata and
/// every object, read whole when the store is added and rewritten whole at each save.
///
/// The format is ObjectGraph's own, little-endian and length-prefixed: the magic
/// `OGBSTORE`, a version byte (1), the metadata as an XML property list, then each object's
/// entity, identity, attributes (kind byte: 0 integer, 1 real, 2 text, 3 bytes) and
/// relationships (lists of identities). Foundation's binary property-list reader is not
/// used: on Linux it crashes on some damaged files, and a damaged file must only be refused.
public final class BinaryStore: AtomicStore {
    static let magic = Array("OGBSTORE".utf8)

    /// Reads the whole file; a damaged one is refused with the byte where it went wrong.
    public override func load() throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw damaged("cannot be read (\(error.localizedDescription))")
        }
        var reader = Reader(bytes: [UInt8](data))
        guard (try? reader.bytes(Self.magic.count)) == Self.magic, (try? reader.byte()) == 1 else {
            throw damaged("not a binary store of version 1")
        }
        do {
            let metadataBytes = try reader.blob()
            guard
                let metadata = try? PropertyListSerialization.propertyList(from: Data(metadataBytes), format: nil)
                    as? [String: Any]
            else {
                throw damaged("its metadata is not a property list")
            }
            self.metadata = metadata
            var records: [AtomicRecord] = []
            for _ in 0..<(try reader.count()) {
                var record = AtomicRecord(
                    entityName: try reader.string(), identity: try reader.string(), attributes: [:], relationships: [:]
                )
                for _ in 0..<(try reader.count()) {
                    let name = try reader.string()
                    switch try reader.byte() {
                    case 0: record.attributes[name] = Int64(bitPattern: try reader.word()).databaseValue
                    case 1: record.attributes[name] = Double(bitPattern: try reader.word()).databaseValue
                    case 2: record.attributes[name] = try reader.string().databaseValue
                    case 3: record.attributes[name] = Data(try reader.blob()).databaseValue
                    default: throw damaged("\(record.identity).\(name) has a value of unknown kind")
                    }
                }
                for _ in 0..<(try reader.count()) {
                    let name = try reader.string()
                    record.relationships[name] = try (0..<(try reader.count())).map { _ in try reader.string() }
                }
                records.append(record)
            }
            guard reader.isAtEnd else { throw damaged("unexpected bytes after the last object") }
            try addCacheNodes(from: records)
        } catch is Reader.Truncated {
            throw damaged("truncated at byte \(reader.offset)")
        }
    }

    /// Writes the whole file atomically.
    public override func save() throws {
        var writer = Writer()
        writer.bytes += Self.magic + [1]
        do {
            writer.blob(
                [UInt8](try PropertyListSerialization.data(fromPropertyList: metadata, format: .xml, options: 0)))
        } catch {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "cannot encode the metadata of '\(url.lastPathComponent)': \(error.localizedDescription)")
        }
        let records = records()
        writer.count(records.count)
        for record in records {
            writer.string(record.entityName)
            writer.string(record.identity)
            writer.count(record.attributes.count)
            for (name, value) in record.attributes.sorted(by: { $0.key < $1.key }) {
                writer.string(name)
                switch value.storage {
                case .int64(let number):
                    writer.bytes.append(0)
                    writer.word(UInt64(bitPattern: number))
                case .double(let number):
                    writer.bytes.append(1)
                    writer.word(number.bitPattern)
                case .string(let text):
                    writer.bytes.append(2)
                    writer.string(text)
                case .blob(let data):
                    writer.bytes.append(3)
                    writer.blob([UInt8](data))
                case .null:
                    writer.bytes.append(3)
                    writer.blob([])
                }
            }
            writer.count(record.relationships.count)
            for (name, identities) in record.relationships.sorted(by: { $0.key < $1.key }) {
                writer.string(name)
                writer.count(identities.count)
                for identity in identities { writer.string(identity) }
            }
        }
        try writeAtomically(Data(writer.bytes), to: url)
    }

    private struct Writer {
        var bytes: [UInt8] = []
        mutating func word(_ value: UInt64) {
            for shift in stride(from: 0, to: 64, by: 8) {
                bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            }
        }
        mutating func count(_ value: Int) {
            for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        mutating func blob(_ value: [UInt8]) {
            count(value.count)
            bytes += value
        }
        mutating func string(_ value: String) { blob(Array(value.utf8)) }
    }

    /// Reads with every length checked against what is left, so no damaged length can trap
    /// or allocate more than the file holds.
    private struct Reader {
        struct Truncated: Error {}
        let bytes: [UInt8]
        var offset = 0
        var isAtEnd: Bool { offset == bytes.count }

        mutating func bytes(_ count: Int) throws -> [UInt8] {
            guard count >= 0, count <= bytes.count - offset else { throw Truncated() }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func byte() throws -> UInt8 { try bytes(1)[0] }

        mutating func word() throws -> UInt64 {
            try bytes(8).enumerated().reduce(0) { $0 | UInt64($1.element) << UInt64($1.offset * 8) }
        }

        /// A count of following items; each takes at least one byte, so a larger one is damage.
        mutating func count() throws -> Int {
            let value = try bytes(4).enumerated().reduce(0) { $0 | Int($1.element) << ($1.offset * 8) }
            guard value <= bytes.count - offset else { throw Truncated() }
            return value
        }

        mutating func blob() throws -> [UInt8] { try bytes(try count()) }

        mutating func string() throws -> String {
            let raw = try blob()
            guard let text = String(validating: raw, as: UTF8.self) else { throw Truncated() }
            return text
        }
    }
}
