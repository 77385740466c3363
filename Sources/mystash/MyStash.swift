import ArgumentParser
import CLinuxSupport
import Foundation
import MyStashKit
import StashPlatform
import StashCrypto
#if canImport(Glibc)
import Glibc
#endif

@main
struct MyStash: ParsableCommand {
    static var configuration: CommandConfiguration {
        skipsCompletionCheck ? configurationSkippingCompletionCheck : plainConfiguration
    }

    /// swift-argument-parser looks for a completion-script request in every parse, building two
    /// parsers for it (a fifth of what `--version` runs). A pseudo-command's parse skips that, so the root
    /// calls itself one while it parses arguments none of which could be such a request; help and
    /// errors are written after, as the root's own.
    nonisolated(unsafe) private static var skipsCompletionCheck = false
    private static let configurationSkippingCompletionCheck = {
        var configuration = plainConfiguration
        configuration._superCommandName = "mystash"
        return configuration
    }()

    private static let plainConfiguration = CommandConfiguration(
        commandName: "mystash",
        abstract: "An encrypted vault for notes and passwords.",
        discussion: """
        Notes and password entries live in two SQLite stores in the vault directory; every \
        title, text, name, user ID, password, URL and note is encrypted with AES-256-GCM under \
        a key protected by your master password (scrypt).

        Exit status: 0 ok, 1 unexpected, 64 usage, 65 invalid data (nothing saved), \
        66 not found, 73 cannot create, 75 busy or conflict (retry), 77 wrong master \
        password or unsafe permissions. See mystash(1).
        """,
        version: "1.0.0",
        subcommands: [Init.self, NoteCommand.self, PasswordCommand.self, CategoryCommand.self, Generate.self,
                      Passwd.self, Unlock.self, Lock.self, Export.self, Import.self, Check.self, SeedCommand.self,
                      Browse.self, ClipboardClear.self, GitCredential.self,
                      Health.self, SSHCommand.self, SSHAgentCommand.self, Sync.self, Clone.self]
    )

    static func main() {
        OpenSSLStart.withoutCleanupAtExit()
        // Secrets must never reach a core file, and files we create are private.
        _ = ms_disable_core_dumps()
        umask(0o077)
        for leftover in Terminal.removeEditorLeftovers() {
            Terminal.printError("mystash: removed '\(leftover)', plaintext left by an interrupted editor session")
        }
        // A closed pipe shows up as EPIPE on write, where Output ends quietly.
        signal(SIGPIPE, SIG_IGN)
        var arguments = Array(CommandLine.arguments.dropFirst())
        // Installed as git-credential-mystash, git runs it as `credential.helper mystash`.
        if CommandLine.arguments.first?.split(separator: "/").last == "git-credential-mystash" {
            arguments.insert(GitCredential.configuration.commandName!, at: 0)
        }
        if arguments.first?.hasPrefix("--generate-completion-script") == true, arguments.count <= 2 {
            // swift-argument-parser's script, completing aliases too.
            let named = arguments.first!.split(separator: "=", maxSplits: 1).dropFirst().first.map(String.init)
                ?? arguments.dropFirst().first
            if let shell = named.map(CompletionShell.init(rawValue:)) ?? CompletionShell.autodetected() {
                Output.write(completionScriptWithAliases(for: shell))
                return
            }
        }
        if let suggestion = CommandSuggestion.check(arguments, root: MyStash.self) {
            Terminal.printError("Error: \(suggestion)")
            Self.exit(withError: ExitCode(64))
        }
        do {
            var command = try parseSkippingCompletionCheck(arguments)
            try command.run()
        } catch {
            // Help and the version go through Output, so that a failed write is no success.
            if exitCode(for: error) == .success {
                let message = fullMessage(for: error)
                if !message.isEmpty { Output.write(message + "\n") }
                Self.exit()
            }
            exit(withError: error)
        }
    }
}

extension MyStash {
    /// ``parseAsRoot(_:)``, without its look for a completion-script request when no argument
    /// could make one.
    static func parseSkippingCompletionCheck(_ arguments: [String]) throws -> ParsableCommand {
        skipsCompletionCheck = !arguments.contains { $0.hasPrefix("--generate-completion-script") }
        defer { skipsCompletionCheck = false }
        return try parseAsRoot(arguments)
    }
}

/// Options every vault command takes.
struct VaultOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Use the vault in this directory (default: $MYSTASH_VAULT, else $XDG_DATA_HOME/mystash, else "
                + "~/.local/share/mystash).",
            valueName: "dir"),
            completion: .directory)
    var vault: String?

    var directory: URL { Self.directory(vault: vault) }

    /// The vault directory `--vault` names, else the environment's, else the default.
    static func directory(vault: String?) -> URL {
        if let vault { return URL(fileURLWithPath: vault) }
        if let fromEnvironment = ProcessEnvironment.value("MYSTASH_VAULT"), !fromEnvironment.isEmpty {
            return URL(fileURLWithPath: fromEnvironment)
        }
        return defaultDirectory()
    }

    /// `$XDG_DATA_HOME/mystash`, else `~/.local/share/mystash`.
    static func defaultDirectory(environment: (String) -> String? = ProcessEnvironment.value) -> URL {
        if let xdg = environment("XDG_DATA_HOME"), xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg).appendingPathComponent("mystash")
        }
        let home = environment("HOME") ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/share/mystash")
    }

    /// Tests set `MYSTASH_TEST_ALLOW_WEAK_KDF=1` to create vaults fast; only debug builds honour it.
    static var testAllowsWeakKDF: Bool { ProcessEnvironment.value("MYSTASH_TEST_ALLOW_WEAK_KDF") == "1" }

    /// How long to wait for another process's lock: `MYSTASH_BUSY_TIMEOUT` seconds, else the default.
    static func lockTimeout(environment: (String) -> String? = ProcessEnvironment.value) throws
        -> TimeInterval {
        guard let text = environment("MYSTASH_BUSY_TIMEOUT") else { return Vault.defaultLockTimeout }
        return try Vault.lockTimeout(parsing: text)
    }
}

/// Reports a failure as `Error: ...` with its details and `hint:` on stderr, and exits
/// with the documented code.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch let error as CleanExit {
        throw error
    } catch {
        let failure = CommandFailure(error)
        errorLines(failure).forEach(Terminal.printError)
        throw ExitCode(failure.status.code)
    }
}

/// A failure as the CLI words it: `Error: ...`, the lines behind it, `hint: ...`. Messages quote
/// names and values from files and the vault, so control characters in them are shown escaped.
func errorLines(_ error: Error) -> [String] {
    let error = CommandFailure(error)
    return ["Error: \(Output.safe(error.message))"]
        + error.details.map { "  " + Output.safe($0.trimmingCharacters(in: .whitespaces)) }
        + (error.hint.map { ["hint: \(Output.safe($0))"] } ?? [])
}

extension VaultOptions {
    /// Opens the vault without unlocking it.
    /// Opens the vault; one line on stderr says when this open migrated it to a newer model.
    func openVault(refusingChangedSchema: Bool = true) throws -> Vault {
        let vault = try Vault.open(at: directory, lockTimeout: try Self.lockTimeout(),
                                   refusingChangedSchema: refusingChangedSchema)

        if let last = vault.migrations.last {
            Terminal.printError("Upgraded the vault from model '\(last.from)' to '\(last.to)' "
                                + "(\(vault.migrations.map(\.store).joined(separator: ", "))).")
        }
        return vault
    }

    /// Opens and unlocks the vault: with an unlocked session, else MYSTASH_PASSWORD, else a
    /// prompt on the terminal. Changes made outside mystash are an error, checked as
    /// `verification` says (check lists them instead).
    func openUnlockedVault(verification: Vault.Verification = .immediate) throws -> Vault {
        // Only a check (which skips verifying, to list problems instead) opens a changed schema.
        let vault = try openVault(refusingChangedSchema: verification != .skipped)
        var sessionIsStale = false
        if let session = KeyringSession.load(vaultIdentifier: vault.identifier) {
            if try vault.unlock(session: session, verification: verification) { return vault }
            sessionIsStale = true
        }
        do {
            try unlockWithMasterPassword(vault, verification: verification)
        } catch let error as VaultError where sessionIsStale && error.kind == .wrongPassword {
            throw CommandFailure(
                .wrongPassword,

                "the unlocked session ended: the master password or the vault's key was changed since; "
                    + error.message,
                hint: "run 'mystash unlock' with the master password now in use")
        }
        return vault
    }

    /// Opens and unlocks the vault to read from it: the integrity check runs on a second
    /// connection while `read` runs, and what `read` returns is handed back only once the
    /// check has passed (see ``Vault/readWhileVerifying(_:)``).
    func readUnlockedVault<T>(_ read: (Vault) throws -> T) throws -> T {
        let vault = try openUnlockedVault(verification: .concurrent)
        return try vault.integrity.readWhileVerifying { try read(vault) }
    }

    /// Opens and unlocks the vault to read one note or entry: only the records are checked at
    /// the unlock, then the buckets of what the read finds (see ``Vault/Verification/reads``),
    /// so the cost does not grow with the vault.
    func readOneItem<T>(_ read: (Vault) throws -> T) throws -> T {
        try read(try openUnlockedVault(verification: .reads))
    }

    /// How many times a person at the terminal may type the master password.
    static let passwordTries = 3

    /// Unlocks with MYSTASH_PASSWORD, else asks on the terminal up to three times.
    func unlockWithMasterPassword(_ vault: Vault, verification: Vault.Verification = .immediate) throws {
        if let password = ProcessEnvironment.value("MYSTASH_PASSWORD") {
            return try vault.unlock(password: .password(password), verification: verification)
        }
        for attempt in 1...Self.passwordTries {
            guard let typed = Terminal.readSecret(prompt: "Master password for \(vault.directory.path): ") else {
                throw CommandFailure(
                    .wrongPassword,
                    "no master password: the vault is not unlocked, MYSTASH_PASSWORD is not set, and there is no "
                        + "terminal to ask on",
                                 hint: "run 'mystash unlock' in a terminal first, or set MYSTASH_PASSWORD for scripts")
            }
            do {
                return try vault.unlock(
                    password: typed.withUnsafeBytes { .password(String(decoding: $0, as: UTF8.self)) },
                    verification: verification)
            } catch let error as VaultError where error.kind == .wrongPassword && attempt < Self.passwordTries {
                Terminal.printError("Wrong master password; try again (\(Self.passwordTries - attempt) left).")
            }
        }
    }
}

/// A new master password: MYSTASH_NEW_PASSWORD, else asked twice on the terminal.
func newMasterPassword() throws -> SecretBytes {
    if let password = ProcessEnvironment.value("MYSTASH_NEW_PASSWORD") {
        guard !password.isEmpty else { throw CommandFailure(.usage, "MYSTASH_NEW_PASSWORD is empty") }
        return .password(password)
    }
    let typed = try Terminal.readNewSecret(prompt: "New master password: ", again: "Repeat the new master password: ")
    return typed.withUnsafeBytes { .password(String(decoding: $0, as: UTF8.self)) }
}
