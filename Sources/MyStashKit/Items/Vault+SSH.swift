import Foundation
import StashCrypto

/// An entry of the "SSH Key" category and the key it holds.
public struct SSHKeyEntry {
    public var id: Int64
    public var name: String
    /// Nil when the entry's private key cannot be read (``problem`` says why).
    public var key: SSHPrivateKey?
    public var problem: String?
}

/// What `ssh list` shows of a key: never the private key.
public struct SSHKeyInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    public var type: String?
    public var bits: Int?
    public var fingerprint: String?
    public var comment: String?
    public var problem: String?
}

extension Vault {
    /// The seed category SSH keys go to (Config/Seeds/categories.csv, version 5), from
    /// `ssh add`, an agent's add request and imports alike.
    static let sshKeyCategory = "SSH Key"

    /// The fields of an SSH key entry, as Bitwarden's SSH key items name them.
    enum SSHKeyField {
        static let privateKey = "Private key"
        static let publicKey = "Public key"
        static let fingerprint = "Fingerprint"
    }

    static func sshKeyFields(_ key: SSHPrivateKey) throws -> [FieldInfo] {
        [FieldInfo(name: SSHKeyField.privateKey, value: try key.openSSHText(), hidden: true),
         FieldInfo(name: SSHKeyField.publicKey, value: key.publicKeyLine, hidden: false),
         FieldInfo(name: SSHKeyField.fingerprint, value: key.fingerprint, hidden: false)]
    }

}

// MARK: - Imported SSH keys

extension ImportSource {
    /// Gives an imported SSH key entry the shape `ssh add` gives: the "SSH Key" category and
    /// the private key (decrypted with `passphrase` when it is encrypted), public key and
    /// fingerprint read from the key itself, its other fields kept. A key that cannot be read
    /// is kept as it came, with a warning: the agent will not serve it.
    mutating func shapeSSHKeyEntry(_ entry: inout ExportDocument.Entry, privateKey text: String,
                                   passphrase: String?) {
        entry.category = Vault.sshKeyCategory
        let keyFields: Set<String> = [Vault.SSHKeyField.privateKey, Vault.SSHKeyField.publicKey,
                                      Vault.SSHKeyField.fingerprint].reduce(into: []) { $0.insert($1.lowercased()) }
        let others = (entry.fields ?? []).filter { !keyFields.contains($0.name.lowercased()) }
        do {
            let key = try SSHPrivateKey(keyFile: text) {
                guard let passphrase, !passphrase.isEmpty else {
                    throw VaultError.sshKey(.passphraseIsNotEntryPassword)

                }
                return .password(passphrase)
            }
            entry.fields = try Vault.sshKeyFields(key) + others
        } catch {
            let privateKeyName = Vault.SSHKeyField.privateKey.lowercased()
            if !(entry.fields ?? []).contains(where: { $0.name.lowercased() == privateKeyName }) {
                entry.fields = [FieldInfo(name: Vault.SSHKeyField.privateKey, value: text, hidden: true)] + others
            }
            let reason = (error as? VaultError)?.message ?? "\(error)"
            warnings.append(
                .init(kind: "entry", title: entry.name,
                      reason: "its SSH key cannot be read (\(reason)); kept as it is, not served by the agent"))
        }
    }
}

extension Vault.Items {
    /// Stores `key` as a new entry of the "SSH Key" category: its private key (as an unencrypted
    /// OpenSSH key file, hidden, under the vault's encryption), public key line and fingerprint.
    ///
    /// - throws: ``VaultError`` `.invalidData` when an entry has the name already, or the key
    ///   is stored already (naming the entry).
    @discardableResult
    public func addSSHKey(_ key: SSHPrivateKey, name: String) throws -> Int64 {
        if let stored = try sshKeys().first(where: { $0.key?.publicKeyBlob == key.publicKeyBlob }) {
            throw VaultError.sshKeyStored(name: stored.name, id: stored.id)
        }
        if try !categories().contains(where: { $0.name.lowercased() == Vault.sshKeyCategory.lowercased() }) {
            try addCategory(Vault.sshKeyCategory)
        }
        var changes = EntryChanges(name: name, category: Vault.sshKeyCategory, password: "")
        changes.fields = try Vault.sshKeyFields(key)
        return try addEntry(changes)
    }

    /// Every entry of the "SSH Key" category with its key, in name order. An entry whose
    /// private key is missing, encrypted or damaged is listed with the problem.
    public func sshKeys() throws -> [SSHKeyEntry] {
        guard try categories().contains(where: { $0.name.lowercased() == Vault.sshKeyCategory.lowercased() }) else {
            return []
        }
        return try entries(category: .name(Vault.sshKeyCategory)).map { listed in
            let entry = try self.entry(.id(listed.id), reveal: true)
            let text = entry.fields?.first { $0.name.lowercased() == Vault.SSHKeyField.privateKey.lowercased() }?.value
            guard let text, !text.isEmpty else {
                return SSHKeyEntry(id: entry.id, name: entry.name,
                                   problem: "no '\(Vault.SSHKeyField.privateKey)' field")
            }
            do {
                let key = try SSHPrivateKey(keyFile: text) {
                    throw VaultError.sshKey(.encryptedWithPassphrase)
                }
                return SSHKeyEntry(id: entry.id, name: entry.name, key: key)
            } catch {
                return SSHKeyEntry(id: entry.id, name: entry.name, problem: VaultError.wrapping(error).message)
            }
        }
    }

    /// ``sshKeys()`` as ``SSHKeyInfo``: what can be shown.
    public func sshKeyInfos() throws -> [SSHKeyInfo] {
        try sshKeys().map { entry in
            SSHKeyInfo(id: entry.id, name: entry.name, type: entry.key?.type, bits: entry.key?.bits,
                       fingerprint: entry.key?.fingerprint, comment: entry.key?.comment, problem: entry.problem)
        }
    }

    /// The key of one entry of the "SSH Key" category (by name, ignoring case, or by ID).
    ///
    /// - throws: ``VaultError`` `.notFound` when no SSH key entry has that name,
    ///   `.invalidData` when its key cannot be read.
    public func sshKey(_ reference: ItemReference) throws -> SSHKeyEntry {
        let keys = try sshKeys()
        let found = keys.first {
            switch reference {
            case .id(let id): $0.id == id
            case .name(let name): $0.name.caseInsensitiveCompare(name) == .orderedSame
            }
        }
        guard let entry = found else { throw VaultError.notFound(.sshKey, reference) }
        if let problem = entry.problem {
            throw VaultError.storedSSHKeyUnreadable(name: entry.name, problem: problem)
        }
        return entry
    }
}
