import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform
import StashCrypto

struct SSHCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh", abstract: "Keep SSH private keys in the vault, for 'mystash ssh-agent'.",
        discussion: """
        Keys are entries of the "SSH Key" category, with the private key (hidden), the public key \
        and the fingerprint as fields, as Bitwarden's SSH key items have them; imported SSH keys \
        land there too.
        """,
        subcommands: [Add.self, List.self, ExportPublic.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Store an OpenSSH private key file in a new entry.",
            discussion: """
            Reads Ed25519, ECDSA (nistp256, nistp384, nistp521) and RSA keys in OpenSSH's format, \
            or PEM (PKCS #1, SEC 1, PKCS #8). \
            An encrypted key is decrypted with its passphrase (MYSTASH_SSH_PASSPHRASE, else asked on \
            the terminal) and stored without it, under the vault's encryption.
            """)
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name.") var name: String
        @Argument(help: "The private key file ('-' for standard input).", completion: .file()) var keyFile: String

        func run() throws {
            try reportingErrors {
                let key = try SSHCommand.readKey(keyFile)
                let vault = try options.openUnlockedVault()
                let id = try vault.items.addSSHKey(key, name: name)
                Terminal.printError("Added SSH key '\(Output.safe(name))' (#\(id)): \(SSHCommand.describe(key)).")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List the SSH keys with their fingerprints and comments.")
        @OptionGroup var options: VaultOptions
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                let keys = try options.readUnlockedVault { try $0.items.sshKeyInfos() }
                if json { return try Output.json(keys) }
                Output.table(
                    ["NAME", "KEY", "FINGERPRINT", "COMMENT"],
                    keys.map { key in
                        guard let type = key.type, let bits = key.bits, let fingerprint = key.fingerprint else {
                            return [Output.cell(key.name), "-", "-", "(cannot be read: \(key.problem ?? "?"))"]
                        }
                        return [Output.cell(key.name), "\(type) \(bits)", fingerprint, Output.cell(key.comment)]
                    },
                    empty: "No SSH keys; add one with 'mystash ssh add NAME KEYFILE'.")
            }
        }
    }

    struct ExportPublic: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-public", abstract: "Print a key's public key line, as authorized_keys takes it.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name or #id.", completion: .custom(completeSSHKeyNames)) var name: String

        func run() throws {
            try reportingErrors {
                let entry = try options.readUnlockedVault { try $0.items.sshKey(ItemReference(argument: name)) }
                Output.line(entry.key?.publicKeyLine ?? "")
            }
        }
    }

    /// Reads a key file, asking for its passphrase only if it is encrypted.
    static func readKey(_ path: String) throws -> SSHPrivateKey {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw CommandFailure(.notFound, "cannot read '\(path)'", hint: "check the path and its permissions")
            }
            data = contents
        }
        let text = try UTF8Text.decode(data, place: path == "-" ? "standard input" : "'\(path)'")
        return try SSHPrivateKey(keyFile: text) {
            if let passphrase = ProcessEnvironment.value("MYSTASH_SSH_PASSPHRASE") {
                return .password(passphrase)
            }
            let shown = path == "-" ? "the key" : path
            guard let typed = Terminal.readSecret(prompt: "Enter passphrase for \(shown): ") else {
                throw CommandFailure(.usage, "the key is encrypted and there is no terminal to ask for its passphrase",
                                 hint: "run the command in a terminal, or set MYSTASH_SSH_PASSPHRASE for scripts")
            }
            return typed
        }
    }

    /// A key as `ssh-keygen -l` shows it: bits, fingerprint, comment, algorithm.
    static func describe(_ key: SSHPrivateKey) -> String {
        let comment = key.comment.isEmpty ? "no comment" : Output.safe(key.comment)
        return "\(key.bits) \(key.fingerprint) \(comment) (\(key.algorithmName))"
    }
}
