import Foundation
import StashCrypto
import StashPlatform
#if canImport(Glibc)
import Glibc
#endif

/// A copy of Have I Been Pwned's "Pwned Passwords" that the user downloaded, read offline
/// and never sent anything: either a directory of k-anonymity range files (the API's
/// `range/ABCDE` answers, as PwnedPasswordsDownloader saves them: one file per first five
/// hex digits of the SHA-1, named `ABCDE` or `ABCDE.txt`, lines `SUFFIX:COUNT`), or one
/// file of every `SHA1:COUNT` line ordered by hash, searched by bisection without reading it whole.
public struct BreachList {
    public enum Layout: String, Codable, Sendable { case rangeDirectory, sortedFile }

    public let url: URL
    public let layout: Layout

    /// The largest range file read; the real ones are under 64 KiB.
    static let maximumRangeFileBytes = 16 << 20

    /// Opens the list at `url`, a directory of range files or one sorted file.
    ///
    /// - throws: ``VaultError`` `.notFound` when nothing is there, `.invalidData` when it is
    ///   neither layout (a directory without range files, a file without `SHA1:COUNT` lines
    ///   or not ordered by hash).
    public init(at url: URL) throws {
        self.url = url
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw VaultError.breachList(path: url.path, .missing)
        }
        layout = isDirectory.boolValue ? .rangeDirectory : .sortedFile
        switch layout {
        case .rangeDirectory: try checkRangeDirectory()
        case .sortedFile: try checkSortedFile()
        }
    }

    /// How many times the password appears in the breaches the list counts; 0 when it does not.
    public func occurrences(of password: String) throws -> Int {
        let hex = try SHA1Digest.hash(Array(password.utf8)).map { String(format: "%02X", $0) }.joined()
        return try occurrences(ofSHA1: Array(hex.utf8))
    }

    /// The count of a SHA-1 given as 40 uppercase hex digits.
    func occurrences(ofSHA1 hash: [UInt8]) throws -> Int {
        switch layout {
        case .rangeDirectory: return try rangeOccurrences(String(decoding: hash, as: UTF8.self))
        case .sortedFile: return try sortedOccurrences(hash)
        }
    }

    // MARK: - Range files

    private static func isRangeFileName(_ name: String) -> Bool {
        let stem = name.hasSuffix(".txt") ? name.dropLast(4) : Substring(name)
        return stem.count == 5 && stem.allSatisfy(\.isHexDigit)
    }

    private func checkRangeDirectory() throws {
        guard let directory = opendir(url.path) else {
            throw VaultError.breachList(path: url.path, .unreadable(reason: String(cString: strerror(errno))))
        }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = DirectoryEntries.name(of: entry)
            if Self.isRangeFileName(name) { return }
        }
        throw VaultError.breachList(path: url.path, .noRangeFiles)
    }

    private func rangeOccurrences(_ hex: String) throws -> Int {
        let prefix = String(hex.prefix(5))
        let names = [prefix, prefix + ".txt", prefix.lowercased(), prefix.lowercased() + ".txt"]
        guard let file = names.lazy.map({ url.appendingPathComponent($0) })
            .first(where: { FileManager.default.fileExists(atPath: $0.path) }) else { return 0 }
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let data = try handle.read(upToCount: Self.maximumRangeFileBytes + 1) ?? Data()
        guard data.count <= Self.maximumRangeFileBytes else {
            throw VaultError.breachList(path: file.path, .rangeFileTooLarge)
        }
        let suffix = Array(hex.dropFirst(5).utf8)
        for (number, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
            guard let (hash, count) = Self.parse(Array(line), hashLength: 35) else {
                throw Self.malformed(file, line: number + 1, expected: "SUFFIX:COUNT with 35 hex digits")
            }
            if hash == suffix { return count }
        }
        return 0
    }

    // MARK: - One sorted file

    /// Lines are at most this long: 40 hex digits, a colon, a count, CR LF.
    private static let longestLine = 128

    private func checkSortedFile() throws {
        let handle = try open()
        defer { try? handle.close() }
        let head = try handle.read(upToCount: 2 * Self.longestLine) ?? Data()
        let lines = head.split(separator: UInt8(ascii: "\n")).prefix(2).map(Array.init)
        guard let first = lines.first, let parsed = Self.parse(first, hashLength: 40) else {
            let ntlm = lines.first.flatMap { Self.parse($0, hashLength: 32) } != nil
            throw Self.malformed(url, line: 1, expected: ntlm
                ? "SHA-1 hashes, not NTLM ones (download the SHA-1 list)" : "HASH:COUNT with 40 hex digits")
        }
        if lines.count == 2, let second = Self.parse(lines[1], hashLength: 40), second.hash.lexicographicallyPrecedes(
            parsed.hash) {
            throw VaultError.breachList(path: url.path, .notOrdered)
        }
    }

    private func open() throws -> FileHandle {
        do { return try FileHandle(forReadingFrom: url) } catch {
            throw VaultError.breachList(path: url.path, .unreadable(reason: nil))
        }
    }

    /// Bisects the file by byte offset: `low` is always the start of a line not after the
    /// wanted one, `high` a point no line from which can be it.
    private func sortedOccurrences(_ hash: [UInt8]) throws -> Int {
        let handle = try open()
        defer { try? handle.close() }
        var low: UInt64 = 0
        var high = try handle.seekToEnd()
        while high > low {
            let middle = low + (high - low) / 2
            let (start, line) = try lineStarting(atOrAfter: middle, low: low, in: handle)
            guard let line, start < high else {
                high = middle
                continue
            }
            guard let (key, count) = Self.parse(line, hashLength: 40) else {
                throw Self.malformed(url, byte: start, expected: "HASH:COUNT with 40 hex digits")
            }
            if key == hash { return count }
            if key.lexicographicallyPrecedes(hash) {
                low = start + UInt64(line.count) + 1
            } else {
                high = start
            }
        }
        return 0
    }

    /// The first whole line starting at `offset` or after (at `low`, which starts a line, itself).
    private func lineStarting(atOrAfter offset: UInt64, low: UInt64, in handle: FileHandle) throws
        -> (UInt64, [UInt8]?) {
        var start = offset
        if offset > low {
            try handle.seek(toOffset: offset - 1)
            let bytes = Array(try handle.read(upToCount: Self.longestLine) ?? Data())
            guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
                if bytes.count < Self.longestLine { return (offset, nil) }
                throw Self.malformed(url, byte: offset, expected: "lines shorter than \(Self.longestLine) bytes")
            }
            start = offset - 1 + UInt64(newline) + 1
        }
        try handle.seek(toOffset: start)
        let bytes = Array(try handle.read(upToCount: Self.longestLine) ?? Data())
        guard !bytes.isEmpty else { return (start, nil) }
        return (start, Array(bytes.prefix { $0 != UInt8(ascii: "\n") }))
    }

    // MARK: - Lines

    /// `HASH:COUNT` (an optional CR at the end), the hash uppercased; nil when malformed.
    static func parse(_ line: [UInt8], hashLength: Int) -> (hash: [UInt8], count: Int)? {
        var line = line[...]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        guard line.count > hashLength + 1, line[line.startIndex + hashLength] == UInt8(ascii: ":") else { return nil }
        let hash = line.prefix(hashLength).map { $0 >= UInt8(ascii: "a") ? $0 - 32 : $0 }
        guard hash.allSatisfy({ (48...57).contains($0) || (65...70).contains($0) }) else { return nil }
        let digits = line.dropFirst(hashLength + 1)
        guard digits.count <= 18, digits.allSatisfy({ (48...57).contains($0) }),
              let count = Int(String(decoding: digits, as: UTF8.self)) else { return nil }
        return (hash, count)
    }

    private static func malformed(_ file: URL, line: Int, expected: String) -> VaultError {
        .breachList(path: file.path, .malformedLine(line, expected: expected))
    }

    private static func malformed(_ file: URL, byte: UInt64, expected: String) -> VaultError {
        .breachList(path: file.path, .malformedAt(byte: byte, expected: expected))

    }
}
