import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform
import StashCrypto

/// A debug build takes a smaller snapshot interval from the tests; a release build never.
func applySnapshotIntervalForTesting() {
    #if DEBUG
    if let text = ProcessEnvironment.value("MYSTASH_TEST_SNAPSHOT_INTERVAL"), let files = Int(text) {
        Vault.setSnapshotIntervalForTesting(files)
    }
    #endif
}

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send this vault's changes to its remote and merge the other machines' changes.",
        discussion: """
        The remote is a git repository (a path or any URL git reaches, such as \
        ssh://host/srv/vault.git) or a plain folder kept in step by Syncthing or Nextcloud. It \
        holds an append-only log of encrypted, authenticated files, one writer per machine; it \
        never sees a name, a URL or a note. Edits to different fields of an entry on two \
        machines both survive; for the same field the later edit wins and the other stays in \
        the entry's password history (passwords) or in a copy of the note named for this \
        machine (note texts). The first sync names the remote with --remote; later ones \
        remember it.
        """)
    @OptionGroup var options: VaultOptions
    @Option(help: ArgumentHelp("Sync with this remote (remembered): a git URL or path, or a folder.",
                               valueName: "url|dir"), completion: .directory)
    var remote: String?
    @Option(help: ArgumentHelp("Name this machine in the others' reports and conflict copies (remembered; "
                                + "default: the host name).", valueName: "name"))
    var deviceName: String?
    @Flag(help: "Show what would be sent, received and resolved, and change nothing.") var dryRun = false
    @Flag(help: "Print the report as JSON.") var json = false

    func run() throws {
        try reportingErrors {
            applySnapshotIntervalForTesting()
            // Only the sync state is verified to find nothing to do; the whole vault is checked
            // before anything is merged or sent (see Vault.sync).
            let vault = try options.openUnlockedVault(verification: .reads)
            let report = try vault.sync(remote: remote, deviceName: deviceName, dryRun: dryRun)
            if json { return try Output.json(report) }
            printSyncReport(report)
        }
    }
}

struct Clone: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clone",
        abstract: "Make a vault on this machine from the remote another machine syncs to.",
        discussion: """
        Asks the master password of the vault being cloned (MYSTASH_PASSWORD for scripts); the \
        new vault opens with it and syncs with the remote from then on. It is built beside its \
        directory and renamed into place, so an interrupted clone leaves no vault.
        """)
    @Argument(help: "The remote: a git URL or path, or a folder.", completion: .directory) var remote: String
    @OptionGroup var options: VaultOptions
    @Option(help: ArgumentHelp("Name this machine in the others' reports and conflict copies (default: the host "
                                + "name).", valueName: "name"))
    var deviceName: String?
    @Flag(help: "Print the report as JSON.") var json = false

    func run() throws {
        try reportingErrors {
            let directory = options.directory
            let report: SyncReport
            do {
                report = try Vault.clone(from: remote, to: directory, deviceName: deviceName) { slot in
                    try unlockKeySlot(slot, directory: directory)
                }
            } catch let error as VaultError where error == .vaultExists(path: directory.path) {
                var failure = CommandFailure(vault: error)
                failure.hint = "sync it with 'mystash sync', or clone into another directory with --vault"
                throw failure
            }

            if json { return try Output.json(report) }
            let items = report.received.count
            Terminal.printError("Created a vault at \(directory.path) from \(report.remote) "
                                + "(\(items) item\(items == 1 ? "" : "s") from \(report.filesRead) log "
                                + "file\(report.filesRead == 1 ? "" : "s")).")
        }
    }

    /// The data key a remote's key slot wraps: MYSTASH_PASSWORD, else asked up to three times.
    private func unlockKeySlot(_ slot: KeySlot, directory: URL) throws -> SecretBytes {
        func open(_ password: SecretBytes) throws -> SecretBytes {
            do {
                return try slot.unlock(password: password)
            } catch {
                throw VaultError.wrapping(error)
            }
        }
        if let password = ProcessEnvironment.value("MYSTASH_PASSWORD") {
            return try open(.password(password))
        }
        for attempt in 1...VaultOptions.passwordTries {
            guard let typed = Terminal.readSecret(prompt: "Master password of the vault at \(remote): ") else {
                throw CommandFailure(.wrongPassword,
                                 "no master password: MYSTASH_PASSWORD is not set and there is no terminal to ask on",
                                 hint: "run 'mystash clone' in a terminal, or set MYSTASH_PASSWORD for scripts")
            }
            do {
                return try open(typed.withUnsafeBytes { .password(String(decoding: $0, as: UTF8.self)) })
            } catch let error as VaultError where error.kind == .wrongPassword && attempt < VaultOptions.passwordTries {
                Terminal.printError("Wrong master password; try again (\(VaultOptions.passwordTries - attempt) left).")
            }
        }
        throw CommandFailure(.wrongPassword, "wrong master password")
    }
}

/// Items a sync report lists by name before it counts the rest.
let syncReportLines = 50

/// A sync report as people read it: what was sent, received and resolved, one line each.
func printSyncReport(_ report: SyncReport) {
    func plural(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
    func describe(_ item: SyncReport.Item) -> String {
        let name = item.name.isEmpty ? (item.kind == "entry" ? "an entry" : "a \(item.kind)")
            : "\(item.kind) '\(Output.safe(item.name))'"
        let fields = item.fields.map { $0.isEmpty ? "" : " (\($0.joined(separator: ", ")))" } ?? ""
        let device = item.device.map { " from \(Output.safe($0))" } ?? ""
        return "  \(item.action) \(name)\(fields)\(device)"
    }
    let would = report.dryRun ? "Would " : ""
    if report.sent.isEmpty && report.received.isEmpty && report.conflicts.isEmpty && report.resent == 0 {
        Output.line("Nothing to send or receive: in step with \(Output.safe(report.remote)).")
    }
    // A first sync of a large vault sends every item: the list is cut, --json has it all.
    func list(_ items: [SyncReport.Item]) {
        items.prefix(syncReportLines).forEach { Output.line(describe($0)) }
        if items.count > syncReportLines {
            Output.line("  ... and \(items.count - syncReportLines) more (--json lists them all)")
        }
    }
    if !report.sent.isEmpty {
        Output.line("\(report.dryRun ? "Would send" : "Sent") \(plural(report.sent.count, "change")) to "
                    + "\(Output.safe(report.remote)):")
        list(report.sent)
    }
    if report.resent > 0 {
        Output.line("\(report.dryRun ? "Would also send" : "Also sent") \(plural(report.resent, "item")) unchanged "
                    + "since the last sync: a remote new to this machine gets the whole vault.")
    }
    if !report.received.isEmpty {
        Output.line("\(report.dryRun ? "Would receive" : "Received") \(plural(report.received.count, "change")):")
        list(report.received)
    }
    if !report.conflicts.isEmpty {
        Output.line("\(would.isEmpty ? "Resolved" : "Would resolve") \(plural(report.conflicts.count, "conflict")):")
        for conflict in report.conflicts {
            let field = conflict.field.map { ", \($0)" } ?? ""
            let name = Output.safe(conflict.name)
            Output.line("  \(conflict.kind) '\(name)'\(field): \(Output.safe(conflict.resolution))")
        }
    }
    report.notices.forEach { Output.line(Output.safe($0)) }
    if report.dryRun { Output.line("Dry run: nothing was changed here or on the remote.") }
}
