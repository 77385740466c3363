import Foundation
import StashPlatform

/// The members of a ZIP archive (PKWARE's APPNOTE, the subset exports write: stored or
/// deflated members, no encryption, no ZIP64), read from memory. Every offset and length is
/// checked against the bytes there are: a damaged or hostile archive is refused, never read past.
struct ZipArchive {
    struct Member {
        var name: String
        fileprivate var method: UInt16
        fileprivate var crc: UInt32
        fileprivate var compressed: Range<Int>
        var size: Int
    }

    struct Damaged: Error {
        var reason: String
    }

    let data: Data
    let members: [Member]

    /// Whether `data` starts as a ZIP archive does (a local file header).
    static func looksLikeArchive(_ data: Data) -> Bool { data.starts(with: [0x50, 0x4B, 0x03, 0x04]) }

    init(_ data: Data) throws {
        let bytes = Data(data)  // indices from 0
        self.data = bytes
        // The end of central directory record: 22 bytes, then a comment of up to 65,535.
        let lowest = max(0, bytes.count - 22 - 0xFFFF)
        guard bytes.count >= 22,
              let end = stride(from: bytes.count - 22, through: lowest, by: -1).first(where: {
                  Self.uint32(bytes, $0) == 0x0605_4B50
              })
        else { throw Damaged(reason: "no end of central directory record") }
        let count = Int(Self.uint16(bytes, end + 10) ?? 0)
        guard let directorySize = Self.uint32(bytes, end + 12), let directoryStart = Self.uint32(bytes, end + 16),
              directorySize != 0xFFFF_FFFF, directoryStart != 0xFFFF_FFFF
        else { throw Damaged(reason: "a ZIP64 archive, which is not read") }
        var offset = Int(directoryStart)
        var members: [Member] = []
        for index in 0..<count {
            guard Self.uint32(bytes, offset) == 0x0201_4B50, let flags = Self.uint16(bytes, offset + 8),
                  let method = Self.uint16(bytes, offset + 10), let crc = Self.uint32(bytes, offset + 16),
                  let compressedSize = Self.uint32(bytes, offset + 20), let size = Self.uint32(bytes, offset + 24),
                  let nameLength = Self.uint16(bytes, offset + 28), let extraLength = Self.uint16(bytes, offset + 30),
                  let commentLength = Self.uint16(bytes, offset + 32), let local = Self.uint32(bytes, offset + 42),
                  offset + 46 + Int(nameLength) <= bytes.count
            else { throw Damaged(reason: "entry \(index + 1) of the central directory is damaged") }
            let name = String(decoding: bytes[(offset + 46)..<(offset + 46 + Int(nameLength))], as: UTF8.self)
            guard flags & 1 == 0 else { throw Damaged(reason: "'\(name)' is encrypted") }
            guard method == 0 || method == 8 else {
                throw Damaged(
                    reason: "'\(name)' is compressed with method \(method) (only stored and deflated are read)")
            }
            guard compressedSize != 0xFFFF_FFFF, size != 0xFFFF_FFFF else {
                throw Damaged(reason: "'\(name)' is a ZIP64 member, which is not read")
            }
            // The data starts after the local header, whose name and extra field may differ in length.
            let header = Int(local)
            guard Self.uint32(bytes, header) == 0x0403_4B50, let localName = Self.uint16(bytes, header + 26),
                  let localExtra = Self.uint16(bytes, header + 28)
            else { throw Damaged(reason: "the local header of '\(name)' is damaged") }
            let start = header + 30 + Int(localName) + Int(localExtra)
            guard start + Int(compressedSize) <= bytes.count else {
                throw Damaged(reason: "'\(name)' runs past the end of the archive")
            }
            members.append(Member(name: name, method: method, crc: crc,
                                  compressed: start..<(start + Int(compressedSize)), size: Int(size)))
            offset += 46 + Int(nameLength) + Int(extraLength) + Int(commentLength)
        }
        self.members = members
    }

    /// A member's bytes, checked against the size and CRC-32 the archive records.
    func contents(of member: Member) throws -> Data {
        let stored = data.subdata(in: member.compressed)
        guard member.method == 8 else {
            guard stored.count == member.size else { throw Damaged(reason: "'\(member.name)' has the wrong size") }
            return stored
        }
        // Foundation has no inflate on Linux: the raw deflate stream goes to gzip in a gzip
        // member's frame, whose trailer (CRC-32, size) is the zip's own, so gzip checks both.
        var framed = Data([0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03])
        framed += stored
        for value in [member.crc, UInt32(truncatingIfNeeded: member.size)] {
            withUnsafeBytes(of: value.littleEndian) { framed += $0 }
        }
        guard let inflated = ChildProcess.run(["gzip", "-dc"], input: framed, captureOutput: true),
              inflated.count == member.size
        else { throw Damaged(reason: "'\(member.name)' cannot be decompressed (damaged, or gzip is missing)") }
        return inflated
    }

    private static func uint16(_ data: Data, _ offset: Int) -> UInt16? {
        guard offset >= 0, offset + 2 <= data.count else { return nil }
        return UInt16(data[offset]) | UInt16(data[offset + 1]) << 8
    }

    private static func uint32(_ data: Data, _ offset: Int) -> UInt32? {
        guard offset >= 0, offset + 4 <= data.count else { return nil }
        return (0..<4).reduce(0) { $0 | UInt32(data[offset + $1]) << (8 * $1) }
    }
}
