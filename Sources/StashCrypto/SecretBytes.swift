internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Secret bytes (keys, passwords) in memory that is locked out of swap where the system
/// allows it, and zeroed with `OPENSSL_cleanse` when released.
///
/// Compare with `==`, which runs in constant time.
///
/// ```swift
/// let key = try SecretBytes.random(count: 32)
/// key.withUnsafeBytes { bytes in ... }
/// ```
public final class SecretBytes: Equatable, @unchecked Sendable {
    // Never empty, so there is always an address to lock and clear; `count` may be 0.
    private let buffer: UnsafeMutableRawBufferPointer
    public let count: Int

    private let locked: Bool

    /// Zero-filled secret bytes.
    ///
    /// - parameter lockingMemory: keep the bytes out of swap (`mlock`); false for short-lived
    ///   buffers on hot paths whose contents become ordinary strings anyway.
    public init(count: Int, lockingMemory: Bool = true) {
        self.count = count
        self.locked = lockingMemory
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        if lockingMemory { _ = mlock(buffer.baseAddress, buffer.count) }
    }

    /// Copies `bytes`; the caller remains responsible for clearing its own copy.
    public convenience init<Bytes: Collection>(copying bytes: Bytes, lockingMemory: Bool = true)
    where Bytes.Element == UInt8 {
        self.init(count: bytes.count, lockingMemory: lockingMemory)
        for (index, byte) in bytes.enumerated() { buffer[index] = byte }
    }

    /// Fresh bytes from OpenSSL's CSPRNG.
    public static func random(count: Int) throws -> SecretBytes {
        let secret = SecretBytes(count: count)
        try secret.withUnsafeMutableBytes { try SecureRandom.fill($0) }
        return secret
    }

    deinit {
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
        if locked { _ = munlock(buffer.baseAddress, buffer.count) }
        buffer.deallocate()
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
    }

    /// The bytes as an array: only for values that are about to leave as ciphertext or to a
    /// channel that needs them (a keyring payload, a test).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in ConstantTime.equal(a, b) } }
    }
}

/// Comparisons whose time does not depend on where the inputs differ.
public enum ConstantTime {
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0 else { return true }
        return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
    }

    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in equal(x, y) } }
    }
}

/// Random bytes from OpenSSL's CSPRNG (seeded by the operating system).
public enum SecureRandom {
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0 else { return }
        try check(
            RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)), "RAND_bytes")
    }

    public static func bytes(count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        try result.withUnsafeMutableBytes { try fill($0) }
        return result
    }

    /// A uniformly random integer in `0..<upperBound`, without modulo bias.
    public static func uniform(below upperBound: UInt32) throws -> UInt32 {
        precondition(upperBound > 0)
        let limit = UInt32.max - UInt32.max % upperBound
        while true {
            let value = try bytes(count: 4).withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            if value < limit { return value % upperBound }
        }
    }
}
