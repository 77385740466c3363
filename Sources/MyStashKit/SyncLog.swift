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
struct SyncState: Codable {
    struct Head: Codable, Equatable {
        var sequence: UInt64
        /// SHA-256 of the file, hex.
        var hash: String
    }

    /// This device's random identity, 32 hex digits.
    var device: String
    var deviceName: String
    var remote: String?
    /// The history this device has sent (or received) up to.
    var token: PersistentHistoryToken?
    /// The latest clock reading this device made or received.
    var clock: HybridClock?
    /// Item identity → field → clock of its current value.
    var fields: [String: [String: HybridClock]] = [:]
    /// Items deleted: identity → clock of the delete.
    var deleted: [String: HybridClock] = [:]
    /// The last file of each device's log this device has read or written.
    var heads: [String: Head] = [:]
    /// The key slot this device published or adopted last, base64, with its clock.
    var keySlot: String?
    var keySlotClock: HybridClock?
    /// The other devices' names, as their files last gave them.
    var deviceNames: [String: String]?

    /// The latest clock of any field of an item.
    func latestClock(of id: String) -> HybridClock? { fields[id]?.values.max() }
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
}
