import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform
import StashCrypto

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a new vault.",
        discussion:
            "Creates the vault directory (mode 0700) with its two stores (mode 0600) and the seed categories, built "
                + "beside it and renamed into place (it must be new or empty). The master password comes from "
                + "MYSTASH_NEW_PASSWORD, else it is asked twice."
    )
    @OptionGroup var options: VaultOptions
    @Option(
        help: ArgumentHelp(
            "Set scrypt's cost to 2^N (default: calibrated to about 0.5 s here; at least \(KDFPolicy.minimumLogN)).",
            valueName: "N"))
    var kdfCost: Int?

    func run() throws {
        try reportingErrors {
            let parameters = try KDFPolicy.parameters(logN: kdfCost, allowingWeak: VaultOptions.testAllowsWeakKDF)
            let password = try newMasterPassword()
            let vault = try Vault.create(at: options.directory, password: password, parameters: parameters)
            Terminal.printError("Created a vault at \(vault.directory.path) (scrypt \(parameters)).")
        }
    }
}

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Print a random password or passphrase; its entropy goes to stderr.")
    @OptionGroup var generator: GeneratorOptions
    @Option(help: "Make a passphrase of this many words (EFF long word list) instead.") var words: Int?

    func run() throws {
        try reportingErrors {
            let generated = try words.map { try PasswordGenerator.passphrase(words: $0) } ?? generator.generate()
            Output.line(generated.value)
            Terminal.printError(String(format: "Entropy: %.1f bits", generated.entropyBits))
        }
    }
}

struct Passwd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Change the master password.",
        discussion:
            "Re-wraps the vault's data key under the new password in both stores at once; no entry is re-encrypted. "
                + "With --rekey, every field is re-encrypted under a new data key in the same single transaction, so a "
                + "data key copied earlier (from an unlocked session) decrypts nothing afterwards. The current "
                + "password is asked for even in an unlocked session; the new one comes from MYSTASH_NEW_PASSWORD, "
                + "else it is asked twice."
    )
    @OptionGroup var options: VaultOptions
    @Option(help: ArgumentHelp("Set scrypt's cost for the new password to 2^N (default: calibrated).", valueName: "N"))
    var kdfCost: Int?
    @Flag(help: "Also replace the data key: re-encrypt every field under a new one, in one transaction.") var rekey =
        false

    func run() throws {
        try reportingErrors {
            let vault = try options.openVault()
            try options.unlockWithMasterPassword(vault)
            let parameters = try KDFPolicy.parameters(logN: kdfCost, allowingWeak: VaultOptions.testAllowsWeakKDF)
            if rekey {
                try vault.rekey(to: try newMasterPassword(), parameters: parameters)
                Terminal.printError("Changed the master password and re-encrypted every field under a new data key.")
                if let remote = try vault.syncRemote() {
                    Terminal.printError(
                        "This vault syncs with \(Output.safe(remote)): what it sends there stays readable to whoever "
                            + "holds the old data key and that remote. To cut that off, sync to a new, empty remote "
                            + "('mystash sync --remote NEW') and clone it on the other machines.")
                }
            } else {
                try vault.changePassword(to: try newMasterPassword(), parameters: parameters)
                Terminal.printError("Changed the master password.")
            }
        }
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Keep the vault unlocked for a while, so later commands do not ask.",
        discussion:
            "The data key (never the password) is kept in the Linux kernel's user keyring, where it expires after the "
                + "timeout. Nothing is written to disk."
    )
    @OptionGroup var options: VaultOptions
    @Option(
        help: ArgumentHelp(
            "Stay unlocked this long, such as 90s, 15m, 2h or 1h30m (at most 24h).", valueName: "duration"))
    var timeout = "15m"

    func validate() throws {
        guard Unlock.seconds(timeout) != nil else {
            throw ValidationError("Invalid duration '\(timeout)'; use forms such as 90s, 15m, 2h or 1h30m, at most 24h")
        }
    }

    /// A session lasts at most a day: a forgotten unlock must not last for weeks.
    static let maximumSeconds: UInt64 = 86_400

    static func seconds(_ text: String) -> UInt32? {
        if let plain = UInt64(text) { return plain > 0 && plain <= maximumSeconds ? UInt32(plain) : nil }
        var total: UInt64 = 0
        var number = ""
        for character in text {
            if character.isNumber { number.append(character); continue }
            let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
            guard let unit = units[character], let value = UInt64(number) else { return nil }
            total += value * unit
            number = ""
        }
        guard number.isEmpty, total > 0, total <= maximumSeconds else { return nil }
        return UInt32(total)
    }

    func run() throws {
        try reportingErrors {
            let vault = try options.openVault()
            try options.unlockWithMasterPassword(vault)
            try KeyringSession.store(
                try vault.sessionContents(), vaultIdentifier: vault.identifier, timeout: Unlock.seconds(timeout)!)
            Terminal.printError("Unlocked for \(timeout).")
        }
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "End the unlocked session now.")
    @OptionGroup var options: VaultOptions

    func run() throws {
        try reportingErrors {
            let vault = try options.openVault()
            Terminal.printError(
                KeyringSession.revoke(vaultIdentifier: vault.identifier) ? "Locked." : "The vault was not unlocked.")
        }
    }
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Write everything in the vault to stdout, in plaintext.")
    enum Format: String, ExpressibleByArgument, CaseIterable { case json, csv }
    @OptionGroup var options: VaultOptions
    @Option(help: "Write this format: json (mystash-json) or csv.") var format: Format = .json

    func run() throws {
        try reportingErrors {
            let vault = try options.openUnlockedVault()
            Terminal.printError(
                "Warning: the export is plaintext; keep it out of shared and backed-up places, and delete it when done."
            )
            switch format {
            case .json:
                try vault.transfer.exportJSON(progress: Terminal.progress("Exporting")) {
                    $0.withUnsafeBytes(Output.write)
                }
            case .csv:
                let leftOut = try vault.transfer.exportCSV(progress: Terminal.progress("Exporting")) {
                    $0.withUnsafeBytes(Output.write)
                }
                if !leftOut.isEmpty {
                    Terminal.printError("Warning: CSV has no column for " + leftOut.joined(separator: " and ")
                                        + "; they are not in this export (export as json to keep them).")
                }
            }
        }
    }
}

extension ImportFormat: ExpressibleByArgument {}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add the notes, passwords and categories of an export, all or nothing.",
        discussion: """
        Items already in the vault unchanged are skipped, so importing the same file again adds \
        nothing. An item the vault has is merged: the values the file holds update the vault's \
        (an old password goes to its history), and what the file lacks stays (custom fields, TOTP \
        secret, URLs, notes, the category unless the file names one); with --replace, the file's \
        item replaces the vault's instead. Every import ends with a report on stderr (with --json, \
        on stdout): what was imported, updated (each changed value, secrets masked) and skipped, \
        each skipped item with its reason. The mappings of every format are in mystash(1).
        """)
    @OptionGroup var options: VaultOptions
    @Argument(help: "The file to read ('-' for standard input); for --format pass, the store directory.",
              completion: .file()) var file: String
    @Option(help: ArgumentHelp("Read this format: mystash-json, bitwarden-json, bitwarden-zip, keepassxc-csv, "
                + "keepassxc-xml or pass "
                + "(default: told by the file's content; pass for a directory)."))
    var format: ImportFormat?
    @Flag(help: "Check everything and show the report, but save nothing.") var dryRun = false
    @Flag(help: "Remove from an item the vault has the values the file lacks (else they are kept).")
    var replace = false
    @Flag(help: "Accept text that is not UTF-8, each invalid sequence becoming U+FFFD (else it is refused).")
    var lossy = false
    @Flag(help: "Print the report as JSON on stdout.") var json = false

    func run() throws {
        try reportingErrors {
            do {
                try importFile()
            } catch let error as VaultError where error.kind == .invalidText {
                var failure = CommandFailure(vault: error)
                failure.hint = "convert it to UTF-8 first, or add '--lossy' to import each bad sequence as U+FFFD"
                throw failure
            }
        }
    }

    private var merge: ImportMerge { replace ? .replacingValues : .keepingValues }

    private func importFile() throws {
        let vault: Vault
        let report: ImportReport
        let progress = Terminal.progress("Importing")
        var isDirectory: ObjCBool = false
        let isStore = file != "-" && FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory)
            && isDirectory.boolValue
        if format == .pass || (format == nil && isStore) {
            vault = try options.openUnlockedVault()
            report = try vault.transfer.importPasswordStore(
                at: URL(fileURLWithPath: file), dryRun: dryRun, merge: merge, replacingInvalidUTF8: lossy,
                progress: progress)
        } else {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: file) else {
                    throw CommandFailure(.notFound, "cannot read '\(file)'", hint: "check the path")
                }
                data = contents
            }
            let format = try self.format ?? Import.detectFormat(data)
            vault = try options.openUnlockedVault()
            // Handed over, so the file is freed once read.
            report = try vault.transfer.importItems(consume data, format: format, dryRun: dryRun, merge: merge,
                                           replacingInvalidUTF8: lossy, progress: progress)
        }
        if json { return try Output.json(report) }
        for line in Import.describe(report) { Terminal.printError(line) }
    }

    static func detectFormat(_ data: Data) throws -> ImportFormat {
        do {
            return try ImportFormat.detect(in: data)
        } catch let error as VaultError {
            var failure = CommandFailure(vault: error)
            // A file of a known format, damaged or cut short: naming the format does not help.
            guard case .unknownFormat = error else { throw failure }
            failure.hint = "name it with '--format' ("
                + ImportFormat.allCases.map(\.rawValue).joined(separator: ", ") + ")"
            throw failure
        }
    }

    /// The report for people: a summary line, then one line per skipped item and warning.
    static func describe(_ report: ImportReport) -> [String] {
        func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }
        let imported = [
            count(report.importedCount("entry"), "entry").replacingOccurrences(of: "entrys", with: "entries"),
                        count(report.importedCount("note"), "note"), count(report.importedCount("category"), "category")
                            .replacingOccurrences(of: "categorys", with: "categories")]
            + (report.importedCount("attachment") > 0 ? [count(report.importedCount("attachment"), "attachment")] : [])
        var lines = ["\(report.dryRun ? "Would import" : "Imported") \(imported.joined(separator: ", ")); "
                + "\(report.dryRun ? "would update" : "updated") \(report.updated.count); "
                + "skipped \(report.skipped.count)."
        ]
        // Titles and reasons quote the file (a reason can carry gpg's own words about it).
        func described(_ item: ImportReport.Item) -> String {
            "\(item.kind) '\(Output.safe(item.title))'" + (item.reason.map { ": " + Output.safe($0) } ?? "")
        }
        for item in report.updated {
            lines.append("  \(report.dryRun ? "would update" : "updated") \(described(item))"
                         + (item.changes?.isEmpty == false ? ":" : ""))
            for change in item.changes ?? [] {
                func shown(_ value: String?, _ absent: String) -> String {
                    guard let value else { return absent }
                    return value == ImportReport.Change.masked ? value : "'\(Output.safe(value))'"
                }
                let kept = change.field == "password" && change.old != nil ? " (the old one kept in the history)" : ""
                lines.append("    \(Output.safe(change.field)): \(shown(change.old, "(none)")) -> "
                             + shown(change.new, "(removed)") + kept)
            }
        }
        for item in report.skipped { lines.append("  skipped \(described(item))") }
        for item in report.warnings { lines.append("  note: \(described(item))") }
        if report.dryRun { lines.append("Nothing was saved (--dry-run).") }
        return lines
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Decrypt every field and verify every relationship and both stores' metadata.")
    @OptionGroup var options: VaultOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try reportingErrors {
            let vault = try options.openUnlockedVault(verification: .skipped)
            let problems = try vault.integrity.check(progress: Terminal.progress("Checking"))
            if !problems.isEmpty { Output.brokenPipeStatus = CommandFailure.Status.invalidData.code }
            if json { try Output.json(problems) } else { problems.forEach { Output.line($0.description) } }
            guard problems.isEmpty else {
                throw CommandFailure(
                    .invalidData, "the vault has \(problems.count) problem\(problems.count == 1 ? "" : "s")",
                    hint: "restore the damaged store from a backup")
            }
            if !json { Terminal.printError("All is well.") }
        }
    }
}

struct SeedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seed", abstract: "Show the versions of the seed lists.", subcommands: [Status.self])

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show each seed list's loaded and available versions.")
        @OptionGroup var options: VaultOptions
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                // Checked and seeded first, so the versions shown are those now loaded.
                let status = try options.openUnlockedVault().seedStatus()
                if json { return try Output.json(status) }
                Output.table(
                    ["LIST", "LOADED", "AVAILABLE"], status.map { [$0.list, String($0.loaded), String($0.available)] },
                    empty: "No seed lists.")
            }
        }
    }
}
