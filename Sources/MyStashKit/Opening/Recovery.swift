import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Finishes, before SQLite opens the stores, a commit that a killed process left in the vault
/// directory, deciding by what the directory holds rather than by the paths SQLite recorded.
///
/// A save writing both stores goes through SQLite's super-journal: each store's rollback
/// journal ends with the absolute path of a `Notes.sqlite-mj…` file, and the commit point is
/// that file's deletion. Once the vault is moved or restored elsewhere the recorded path no
/// longer exists, and SQLite would take every interrupted commit for a finished one, keeping
/// half-written pages. Here the super-journal is looked up by name in the vault directory:
/// - present: the commit did not happen; the pointer is cut off the store journals, which
///   SQLite then rolls back each on its own, and the super-journal is removed last;
/// - absent: the commit happened; the store journals are dead and removed.
/// Super-journals no journal names are dead too, and so is a store journal whose header was
/// never completed (SQLite leaves those behind). Nothing is done while another process
/// holds a store's write lock: its journals are live.
public enum Recovery {
    /// What the vault directory holds besides the stores.
    public struct Leftover: Equatable, CustomStringConvertible {
        public var fileName: String
        public var reason: String
        public var description: String { "'\(fileName)' \(reason)" }
    }

    static let storeNames = [Vault.notesFileName, Vault.passwordsFileName]
    static let journalMagic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
    /// SQLite's lock bytes (os_unix.c): writers take RESERVED, rollback takes PENDING.
    static let pendingByte: off_t = 0x4000_0000

    /// The files of an interrupted commit (`-journal`, `-mj…`) in `directory`.
    static func journalFiles(in directory: URL) -> [String] {
        // A directory that cannot be listed cannot be opened as a vault either: that open reports it.
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { name in
            storeNames.contains { name.hasPrefix($0 + "-journal") || name.hasPrefix($0 + "-mj") }
        }.sorted()
    }

    /// Settles interrupted commits; returns the files it removed or changed. Silent when the
    /// directory cannot be written (a reading command on a read-only vault).
    @discardableResult
    public static func recover(in directory: URL) -> [String] {
        let leftovers = journalFiles(in: directory)
        guard !leftovers.isEmpty, access(directory.path, W_OK) == 0 else { return [] }
        guard let locks = lockStores(in: directory) else { return [] }
        defer { for descriptor in locks { close(descriptor) } }
        var touched: [String] = []
        for store in storeNames {
            let journal = directory.appendingPathComponent(store + "-journal")
            guard let pointer = superJournalPointer(journal.path) else { continue }
            let name = (pointer.path as NSString).lastPathComponent
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path) {
                // Not committed: SQLite rolls the journal back on its own once the pointer is gone.
                guard truncate(journal.path, pointer.offset) == 0, syncFile(journal.path) else { return touched }
            } else {
                guard unlink(journal.path) == 0 else { return touched }
            }
            touched.append(journal.lastPathComponent)
        }
        for store in storeNames {
            // A journal whose header was never completed had no page of the store written under it.
            let journal = directory.appendingPathComponent(store + "-journal")
            guard FileManager.default.fileExists(atPath: journal.path),
                  !hasCompleteHeader(journal.path) else { continue }
            guard unlink(journal.path) == 0 else { return touched }
            touched.append(journal.lastPathComponent)
        }
        // Every journal naming a super-journal has been settled above: none is needed any more.
        for name in journalFiles(in: directory) where name.contains("-mj") {
            if unlink(directory.appendingPathComponent(name).path) == 0 { touched.append(name) }
        }
        if !touched.isEmpty { _ = syncFile(directory.path) }
        return touched
    }

    /// What `recover` could not settle, for `check` to report. None while another process is
    /// saving: its journals are live (the stores' write locks are held while listing, so no
    /// save starts meanwhile).
    public static func leftovers(in directory: URL) -> [Leftover] {
        guard let locks = lockStores(in: directory) else { return [] }
        defer { for descriptor in locks { close(descriptor) } }
        return journalFiles(in: directory).map { name in
            if name.hasSuffix("-journal") {
                return Leftover(fileName: name, reason: "is the journal of an unfinished save; "
                                    + "the next command that can write the vault rolls it back")
            }
            return Leftover(fileName: name, reason: "is the super-journal of an unfinished save; "
                                + "the next command that can write the vault settles it")
        }
    }

    /// Write locks on both stores' RESERVED bytes (open file description locks, so closing them
    /// never drops SQLite's own locks); nil when another connection is writing.
    private static func lockStores(in directory: URL) -> [Int32]? {
        var descriptors: [Int32] = []
        for store in storeNames {
            let descriptor = open(directory.appendingPathComponent(store).path, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            descriptors.append(descriptor)
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = pendingByte
            lock.l_len = 2
            let fOFDSetLock: Int32 = 37
            if fcntl(descriptor, fOFDSetLock, &lock) != 0 {
                for descriptor in descriptors { close(descriptor) }
                return nil
            }
        }
        return descriptors
    }

    /// The super-journal path recorded at the end of a rollback journal, and where that record
    /// starts (pager.c: page number, name, length, checksum, magic). Nil when the record cannot be
    /// read or does not check out: SQLite's pager then treats the journal as standing alone too.
    static func superJournalPointer(_ path: String) -> (path: String, offset: off_t)? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let size = try? handle.seekToEnd(), size >= 20 else { return nil }
        try? handle.seek(toOffset: size - 16)
        guard let trailer = try? handle.read(upToCount: 16), trailer.count == 16,
              Array(trailer[8..<16]) == journalMagic else { return nil }
        let length = trailer[0..<4].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let checksum = trailer[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard length > 0, length < 4096, length + 20 <= size else { return nil }
        try? handle.seek(toOffset: size - 16 - length)
        guard let name = try? handle.read(upToCount: Int(length)), name.count == Int(length),
              !name.contains(0) else { return nil }
        let sum = name.reduce(UInt32(0)) { $0 &+ UInt32(bitPattern: Int32(Int8(bitPattern: $1))) }
        guard sum == checksum else { return nil }
        return (String(decoding: name, as: UTF8.self), off_t(size - 20 - length))
    }

    /// Whether a rollback journal's header carries SQLite's magic, written only once the
    /// journal is synced and before any page of the store is overwritten. An empty journal has
    /// none; one that cannot be opened or read counts as complete, so it is kept for SQLite to judge
    /// rather than removed while it may be needed.
    static func hasCompleteHeader(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return true }
        defer { try? handle.close() }
        let header: Data?
        do { header = try handle.read(upToCount: 8) } catch { return true }
        return header.map { Array($0) == journalMagic } ?? false
    }

    private static func syncFile(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return fsync(descriptor) == 0
    }
}
