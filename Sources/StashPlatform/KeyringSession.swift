import CLinuxSupport
import Foundation
import StashCrypto

/// An unlocked session: the vault's data key (never the password) kept in the Linux
/// kernel's user keyring under `mystash:<vault id>`, expiring after a timeout. Nothing is
/// written to disk.
public enum KeyringSession {
    /// The kernel keyring refused: what it said.
    public struct Unavailable: Error, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { "the kernel keyring is unavailable here (\(reason))" }
    }

    public struct Contents {
        public var slotIdentifier: [UInt8]
        public var dataKey: SecretBytes

        public init(slotIdentifier: [UInt8], dataKey: SecretBytes) {
            self.slotIdentifier = slotIdentifier
            self.dataKey = dataKey
        }
    }

    static func keyName(_ vaultIdentifier: String) -> String { "mystash:\(vaultIdentifier)" }

    /// Keeps the data key until `timeout` seconds from now.
    ///
    /// - throws: ``Unavailable`` when the kernel keyring is unavailable here.
    public static func store(_ contents: Contents, vaultIdentifier: String, timeout: UInt32) throws {
        let payload = SecretBytes(copying: contents.slotIdentifier + contents.dataKey.bytes)
        let serial = payload.withUnsafeBytes {
            ms_keyring_add_user_key(keyName(vaultIdentifier), $0.baseAddress, $0.count)
        }
        guard serial > 0 else { throw unavailable(-Int(serial)) }
        let result = ms_keyring_set_timeout(serial, timeout)
        guard result == 0 else {
            _ = ms_keyring_revoke(serial)
            throw unavailable(-Int(result))
        }
    }

    /// The session of a vault, or nil when there is none (expired, locked, or no keyring).
    public static func load(vaultIdentifier: String) -> Contents? {
        let serial = ms_keyring_search_user_key(keyName(vaultIdentifier))
        guard serial > 0 else { return nil }
        let buffer = SecretBytes(count: 48)
        let length = buffer.withUnsafeMutableBytes { ms_keyring_read(serial, $0.baseAddress, $0.count) }
        guard length == 48 else { return nil }
        return buffer.withUnsafeBytes { bytes in
            Contents(slotIdentifier: Array(bytes[0..<16]), dataKey: SecretBytes(copying: bytes[16..<48]))
        }
    }

    /// Ends a vault's session; returns whether there was one.
    @discardableResult
    public static func revoke(vaultIdentifier: String) -> Bool {
        let serial = ms_keyring_search_user_key(keyName(vaultIdentifier))
        guard serial > 0 else { return false }
        return ms_keyring_revoke(serial) == 0
    }

    /// How long the vault's session has left, as the kernel reports it in `/proc/keys`
    /// (whole seconds, minutes, hours, days or weeks, rounded down); nil when there is no
    /// session or the kernel does not say, `.infinity` for a session without a timeout.
    public static func remainingLifetime(vaultIdentifier: String) -> TimeInterval? {
        let serial = ms_keyring_search_user_key(keyName(vaultIdentifier))
        guard serial > 0, let table = try? String(contentsOfFile: "/proc/keys", encoding: .utf8) else { return nil }
        let wanted = String(format: "%08x", UInt32(bitPattern: serial))
        for line in table.split(separator: "\n") {
            let columns = line.split(separator: " ", omittingEmptySubsequences: true)
            guard columns.count > 3, columns[0] == wanted else { continue }
            let expiry = columns[3]
            if expiry == "perm" { return .infinity }
            let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
            guard let unit = expiry.last.flatMap({ units[$0] }), let value = TimeInterval(expiry.dropLast()) else {
                return nil
            }
            return value * unit
        }
        return nil
    }

    private static func unavailable(_ code: Int) -> Unavailable {
        Unavailable(reason: String(cString: strerror(Int32(code))))
    }
}
