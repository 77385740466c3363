import CLinuxSupport
import Foundation
import StashCrypto

/// An unlocked session: the vault's data key (never the password) kept in the Linux
/// kernel's user keyring under `mystash:<vault id>`, expiring after a timeout. Nothing is
/// written to disk.
public enum KeyringSession {
    public struct Contents {
        public var slotIdentifier: [UInt8]
        public var dataKey: SecretBytes
    }

    static func keyName(_ vaultIdentifier: String) -> String { "mystash:\(vaultIdentifier)" }

    /// Keeps the data key until `timeout` seconds from now.
    ///
    /// - throws: ``VaultError`` when the kernel keyring is unavailable here.
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

    private static func unavailable(_ code: Int) -> VaultError {
        VaultError(.unexpected, "the kernel keyring is unavailable here (\(String(cString: strerror(Int32(code)))))",
                   hint: "commands will ask for the master password instead")
    }
}
