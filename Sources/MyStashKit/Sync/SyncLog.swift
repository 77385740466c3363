import Foundation
import ObjectGraph
import StashCrypto

/// A hybrid logical clock reading (Kulkarni et al.): wall-clock milliseconds, a counter for
/// events within one millisecond or behind a clock set back, and the device, so that any two
/// readings are ordered the same way on every machine and a change made after seeing another
/// is always later than it, whatever the machines' clocks say.
struct HybridClock: Hashable, Comparable, Codable, CustomStringConvertible {
    var milliseconds: Int64
    var counter: UInt32
    var device: String

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.milliseconds, lhs.counter, lhs.device) < (rhs.milliseconds, rhs.counter, rhs.device)
    }

    /// A reading before every other of `device`: what a value with no known clock is given.
    static func earliest(device: String) -> HybridClock {
        HybridClock(milliseconds: 0, counter: 0, device: device)
    }

    /// The next reading on `device` for an event at `wall`, after `last` (the latest reading
    /// this device made or received).
    static func tick(after last: HybridClock?, wall: Date, device: String) -> HybridClock {
        let now = Int64((wall.timeIntervalSince1970 * 1000).rounded(.down))
        guard let last, last.milliseconds >= now else {
            return HybridClock(milliseconds: now, counter: 0, device: device)
        }
        // A counter at its end moves on to the next millisecond rather than wrap.
        guard last.counter < UInt32.max else {
            return HybridClock(milliseconds: last.milliseconds + 1, counter: 0, device: device)
        }
        return HybridClock(milliseconds: last.milliseconds, counter: last.counter + 1, device: device)
    }

    var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    var description: String { "\(milliseconds).\(counter).\(device)" }

    // One string in JSON: a vault holds one per synced field.
    init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        let parts = text.split(separator: ".", maxSplits: 2)
        guard parts.count == 3, let milliseconds = Int64(parts[0]), let counter = UInt32(parts[1]) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a clock"))
        }
        self.init(milliseconds: milliseconds, counter: counter, device: String(parts[2]))
    }

    init(milliseconds: Int64, counter: UInt32, device: String) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.device = device
    }

    func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// The paths of a sync remote (SYNC.md, "Layout").
enum SyncLayout {
    static let markerPath = "MYSTASH-SYNC"
    static let marker = Array("mystash sync log, format 1\n".utf8)
    static let keySlotPath = "keyslot"
    static let keysFolder = "keys/"
    static let logFolder = "log/"

    static let snapshotFolder = "snapshots/"
    /// Log files between two snapshots (fewer in tests: ``Vault/setSnapshotIntervalForTesting(_:)``).
    nonisolated(unsafe) static var snapshotInterval = 100

    /// `snapshots/<device>-<sequence>-<files covered>`: written with the device's log file
    /// `sequence`, covering that many log files of all devices.
    static func snapshotPath(device: String, sequence: UInt64, covered: Int) -> String {
        snapshotFolder + device + "-" + String(format: "%010llu", sequence) + "-" + String(format: "%010d", covered)
    }

    static func parseSnapshotPath(_ path: String) -> (device: String, sequence: UInt64, covered: Int)? {
        guard path.hasPrefix(snapshotFolder) else { return nil }
        let parts = path.dropFirst(snapshotFolder.count).split(separator: "-")
        guard parts.count == 3, parts[0].count == 32, parts[0].allSatisfy(\.isHexDigit), parts[1].count == 10,
              let sequence = UInt64(parts[1]), parts[2].count == 10, let covered = Int(parts[2]) else { return nil }
        return (String(parts[0]), sequence, covered)
    }

    static func logPath(device: String, sequence: UInt64) -> String {
        logFolder + device + "/" + String(format: "%010llu", sequence)
    }

    /// Device and sequence of a log path, nil for anything else.
    static func parseLogPath(_ path: String) -> (device: String, sequence: UInt64)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "log", parts[1].count == 32,
              parts[1].allSatisfy(\.isHexDigit), parts[2].count == 10, let sequence = UInt64(parts[2]), sequence > 0
        else { return nil }
        return (String(parts[1]), sequence)
    }
}

/// What one log file carries (its plaintext, JSON): a device's changes since its previous file.
struct SyncPayload: Codable {
    /// The writing device's name, for reports and conflict copies.
    var deviceName: String
    var changes: [SyncChange]
    /// The device's key slot when it changed (the master password changed there).
    var keySlot: KeySlotRecord?
}

extension SyncPayload {
    func json() throws -> [UInt8] {
        var rest = self
        rest.changes = []
        return try jsonSplicing(rest, key: "changes", elements: changes)
    }
}

extension SyncSnapshot {
    func json() throws -> [UInt8] {
        var rest = self
        rest.items = []
        return try jsonSplicing(rest, key: "items", elements: items)
    }
}

/// `value` as JSON (keys sorted) with `elements` as the array under its top-level `key`, which
/// `value` holds empty: each element encoded alone, since encoding a whole first sync at once
/// builds a tree of every value of the vault before writing a byte.
private func jsonSplicing<Value: Encodable, Element: Encodable>(_ value: Value, key: String, elements: [Element])
    throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let whole = [UInt8](try encoder.encode(value))
    // A quote inside a string is escaped, so only the key itself reads `"key":[]`.
    let empty = Array("\"\(key)\":[]".utf8)
    guard let start = whole.indices.first(where: { whole[$0...].starts(with: empty) }) else {
        preconditionFailure("'\(key)' is not an empty array at the top of the value")
    }
    // Encoded twice, to measure and then to write into a buffer of the exact size: one grown by
    // doubling, or the elements kept encoded, held up to twice a first sync's payload.
    var size = whole.count + max(elements.count - 1, 0)
    for element in elements { size += try encoder.encode(element).count }
    var json: [UInt8] = []
    json.reserveCapacity(size)
    json += whole[..<(start + empty.count - 1)]
    for (index, element) in elements.enumerated() {
        if index > 0 { json.append(UInt8(ascii: ",")) }
        json += try encoder.encode(element)
    }
    json += whole[(start + empty.count - 1)...]
    return json
}

/// What a snapshot carries: every item with its fields' clocks, and where each device's log
/// stood when it was made (SYNC.md, "Snapshot").
struct SyncSnapshot: Codable {
    var deviceName: String
    var heads: [String: SyncState.Head]
    var deleted: [String: HybridClock]
    var items: [SyncChange]
    var device: String
}

struct KeySlotRecord: Codable {
    /// The serialized key slot, base64.
    var slot: String
    /// ``SyncKey/dataKeyCheck(dataKey:)`` of the data key the slot wraps, base64.
    var dataKeyCheck: String
    var clock: HybridClock
}

/// A change of one note, entry or category, named by its stable identity.
struct SyncChange: Codable {
    enum Kind: String, Codable {
        /// Fields set (a new item carries them all).
        case put
        /// The item kept against a delete: all its fields, to bring it back where it was deleted.
        case revive
        case delete
    }

    var entity: String
    var id: String
    var kind: Kind
    /// For put and revive: field → value with its clock.
    var fields: [String: SyncFieldValue]?
    /// For an entry: its earlier passwords (a set: receivers add those they lack).
    var history: [HistoryInfo]?
    /// For a delete: when, and the latest clock of the item the deleting device knew.
    var clock: HybridClock?
    var seen: HybridClock?
}

struct SyncFieldValue: Codable {
    var clock: HybridClock
    /// The clock of the value this one replaced where it was made: equal to the receiver's,
    /// the writer saw the receiver's value; else the two edits were concurrent.
    var base: HybridClock?
    /// nil clears an optional field.
    var value: String?
}

/// This machine's sync bookkeeping, kept in the vault (SyncState row) and saved in the same
/// transaction as the changes a sync applies.
///
/// The clocks of every field and delete grow with the vault (a dozen per item) and a sync with
/// nothing to send or receive never needs them: they are stored apart from the rest
/// (``stored()``) and read only when a sync has something to merge (``readClocks()``).
struct SyncState: Codable {
    struct Head: Codable, Equatable {
        var sequence: UInt64
        /// SHA-256 of the file, hex.
        var hash: String
        /// The remote's name for the file's contents when it was read (``RemoteListing/versions``):
        /// while the remote still names it so, it need not be read again to check it.
        var version: String?
    }

    /// This device's random identity, 32 hex digits.
    var device: String
    var deviceName: String
    var remote: String?
    /// The history this device has sent (or received) up to.
    var token: PersistentHistoryToken?
    /// The latest clock reading this device made or received.
    var clock: HybridClock?
    /// The last file of each device's log this device has read or written.
    var heads: [String: Head] = [:]
    /// The key slot this device published or adopted last, base64, with its clock.
    var keySlot: String?
    var keySlotClock: HybridClock?
    /// The other devices' names, as their files last gave them.
    var deviceNames: [String: String]?

    private var clocks = SyncClocks()
    /// The stored clocks while they are not read yet.
    private var unreadClocks: [UInt8]?

    private enum CodingKeys: String, CodingKey {
        case device, deviceName, remote, token, clock, heads, keySlot, keySlotClock, deviceNames
    }

    init(device: String, deviceName: String, remote: String? = nil) {
        self.device = device
        self.deviceName = deviceName
        self.remote = remote
    }

    /// Item identity → field → clock of its current value.
    var fields: [String: [String: HybridClock]] {
        get { readClocksFirst(); return clocks.fields }
        _modify { readClocksFirst(); yield &clocks.fields }
    }

    /// Items deleted: identity → clock of the delete.
    var deleted: [String: HybridClock] {
        get { readClocksFirst(); return clocks.deleted }
        _modify { readClocksFirst(); yield &clocks.deleted }
    }

    private func readClocksFirst() {
        precondition(unreadClocks == nil, "the sync state's clocks are used before readClocks()")
    }

    /// Reads the stored clocks, before a sync merges or sends anything.
    mutating func readClocks() throws {
        guard let bytes = unreadClocks else { return }
        do {
            clocks = try SyncClocks(stored: bytes)
        } catch {
            throw Vault.damagedSyncState()
        }
        unreadClocks = nil
    }

    /// The latest clock of any field of an item.
    func latestClock(of id: String) -> HybridClock? { fields[id]?.values.max() }

    // MARK: - Stored form

    private static let storedVersion: UInt8 = 2

    /// `2 || u32be(length) || the rest as JSON || the clocks` (``SyncClocks``); the clocks not
    /// read are written back as they were.
    func stored() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var writer = SSHWriter()
        writer.byte(Self.storedVersion)
        writer.string(try encoder.encode(self))
        writer.raw(unreadClocks ?? clocks.stored())
        return Data(writer.bytes)
    }

    /// The state as ``stored()`` wrote it, its clocks not read yet; or the whole state as JSON,
    /// as the first release of sync stored it.
    init(stored data: Data) throws {
        guard data.first == Self.storedVersion else {
            self = try JSONDecoder().decode(Self.self, from: data)
            clocks = try JSONDecoder().decode(SyncClocks.self, from: data)
            return
        }
        let bytes = [UInt8](data)
        let (header, rest) = try bytes.withUnsafeBytes { buffer in
            var reader = SSHReader(buffer)
            _ = try reader.byte()
            let header = Data(try reader.string())
            return (header, Array(try reader.raw(reader.remaining)))
        }
        self = try JSONDecoder().decode(Self.self, from: header)
        unreadClocks = rest
    }
}

/// The clock of every synced field of every item, and of every delete.
struct SyncClocks: Codable {
    var fields: [String: [String: HybridClock]] = [:]
    var deleted: [String: HybridClock] = [:]

    init() {}

    /// SSH's wire encoding (RFC 4251): the devices and the field names once each, then the
    /// items (identity, then per field its name's and its clock's device's numbers), then
    /// the deletes; a clock is milliseconds (two uint32), counter, device number.
    func stored() -> [UInt8] {
        var devices: [String: UInt32] = [:]
        var keys: [String: UInt32] = [:]
        var body = SSHWriter()
        func number(_ name: String, in table: inout [String: UInt32]) -> UInt32 {
            if let number = table[name] { return number }
            table[name] = UInt32(table.count)
            return UInt32(table.count - 1)
        }
        func write(_ clock: HybridClock) {
            let milliseconds = UInt64(bitPattern: clock.milliseconds)
            body.uint32(UInt32(milliseconds >> 32))
            body.uint32(UInt32(milliseconds & 0xFFFF_FFFF))
            body.uint32(clock.counter)
            body.uint32(number(clock.device, in: &devices))
        }
        body.uint32(UInt32(fields.count))
        for (id, clocks) in fields {
            body.string(id)
            body.uint32(UInt32(clocks.count))
            for (key, clock) in clocks {
                body.uint32(number(key, in: &keys))
                write(clock)
            }
        }
        body.uint32(UInt32(deleted.count))
        for (id, clock) in deleted {
            body.string(id)
            write(clock)
        }
        var writer = SSHWriter()
        for table in [devices, keys] {
            writer.uint32(UInt32(table.count))
            for (name, _) in table.sorted(by: { $0.value < $1.value }) { writer.string(name) }
        }
        writer.raw(body.bytes)
        return writer.bytes
    }

    init(stored bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            var reader = SSHReader(buffer)
            // Each element takes a byte at least: a count beyond what is left is a lie.
            func count() throws -> Int {
                let count = Int(try reader.uint32())
                guard count <= reader.remaining else { throw SSHFormatError("a count goes past its end") }
                return count
            }
            func names() throws -> [String] { try (0..<count()).map { _ in try reader.text() } }
            let devices = try names()
            let keys = try names()
            func name(_ table: [String]) throws -> String {
                let number = Int(try reader.uint32())
                guard number < table.count else { throw SSHFormatError("a name's number is out of range") }
                return table[number]
            }
            func clock() throws -> HybridClock {
                let milliseconds = UInt64(try reader.uint32()) << 32 | UInt64(try reader.uint32())
                return HybridClock(milliseconds: Int64(bitPattern: milliseconds), counter: try reader.uint32(),
                                   device: try name(devices))
            }
            for _ in 0..<(try count()) {
                let id = try reader.text()
                var clocks: [String: HybridClock] = [:]
                for _ in 0..<(try count()) {
                    let key = try name(keys)
                    clocks[key] = try clock()
                }
                fields[id] = clocks
            }
            for _ in 0..<(try count()) {
                let id = try reader.text()
                deleted[id] = try clock()
            }
            guard reader.isAtEnd else { throw SSHFormatError("bytes follow its end") }
        }
    }
}

/// What a sync did or, with `dryRun`, would do.
public struct SyncReport: Codable, Equatable {
    /// One note, entry or category sent or received.
    public struct Item: Codable, Equatable {
        /// note, entry or category.
        public var kind: String
        public var name: String
        /// added, changed or removed.
        public var action: String
        /// The fields changed (for changed).
        public var fields: [String]?
        /// The device it came from (received items).
        public var device: String?
    }

    /// A conflict and how it was resolved.
    public struct Conflict: Codable, Equatable {
        public var kind: String
        public var name: String
        public var field: String?
        public var resolution: String
    }

    public var remote: String
    public var dryRun: Bool
    public var sent: [Item] = []
    public var received: [Item] = []
    public var conflicts: [Conflict] = []
    /// Log files written (0 or 1) and read.
    public var filesWritten = 0
    public var filesRead = 0
    /// Pushes answered by non-fast-forward and retried after merging.
    public var retries = 0
    /// Notices (a key slot adopted, a rekey elsewhere).
    public var notices: [String] = []
    /// Items sent unchanged, as they stand, to a remote new to this machine (not in `sent`).
    public var resent = 0
}
