import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform
import TerminalUI

struct GeneratorOptions: ParsableArguments {
    @Option(help: "Make generated passwords this many characters long.") var length = 20
    @Flag(help: "Leave symbols out of generated passwords.") var noSymbols = false

    func generate() throws -> PasswordGenerator.Generated {
        try PasswordGenerator.password(length: length, symbols: !noSymbols)
    }
}

/// The password of an entry: generated, else standard input, else asked twice.
func readEntryPassword(generate: Bool, generator: GeneratorOptions) throws -> String {
    if generate {
        let generated = try generator.generate()
        Terminal.printError(String(format: "Generated a password of %.0f bits of entropy.", generated.entropyBits))
        return generated.value
    }
    if !Terminal.stdinIsTerminal {
        var text = try Terminal.readStandardInput()
        // No byte at all is a pipe that lost its password; an empty line is meant.
        guard !text.isEmpty else {
            throw CommandFailure(.invalidData, "standard input is empty, so there is no password; nothing was saved",
                             hint: "pipe the password in; an empty line (echo |) saves an empty password")
        }
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
    let secret = try Terminal.readNewSecret(prompt: "Password: ", again: "Repeat the password: ")
    return try secret.withUnsafeBytes { try UTF8Text.decode($0, place: "the typed password") }
}

struct PasswordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Add, list, show, edit, remove and search password entries.",
        subcommands: [Add.self, List.self, Show.self, Edit.self, Remove.self, Search.self, OTP.self, History.self,
                      Attach.self, Detach.self, AttachmentCommand.self],
        aliases: ["pw"]
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a password entry.",
            discussion:
                "The password is read from standard input when it is not a terminal, else asked twice without echo; it "
                    + "is never an argument. --generate makes one instead."
        )
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, such as the site or program.") var name: String
        @Option(name: .customLong("user"), help: "Record this user ID or login name.") var userId: String?
        @Option(help: "Record this address: scheme://host (see mystash(1) for the schemes) or a host: example.com.")
        var url: String?
        @Option(help: "File the entry under this category.", completion: .custom(completeCategoryNames)) var category:
            String?
        @Flag(help: "Write the entry's notes in $EDITOR, on a private file in memory (notes are never arguments).")
        var editNotes = false
        @Flag(help: "Create the category if the vault does not have it yet.") var createCategory = false
        @Flag(help: "Generate a random password instead of reading one, and print it.") var generate = false
        @Flag(name: [.customShort("c"), .long], help: "With --generate, copy the password instead of printing it.")
        var clip = false
        @Flag(help: "Ask for a TOTP secret (otpauth:// URI or base32) on the terminal.") var totp = false
        @Flag(help: "Mark the entry as a favourite.") var favorite = false
        @Flag(help: "Add the entry even if another one has the same name.") var allowDuplicate = false
        @OptionGroup var generator: GeneratorOptions

        func validate() throws {
            if editNotes { try requireTerminal(for: "--edit-notes") }
            if totp { try requireTerminal(for: "--totp") }
            if clip && !generate { throw ValidationError("'--clip' goes with '--generate'") }
        }

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let category = try categoryName(category, in: vault, creating: createCategory)
                var changes = EntryChanges(name: name, userId: userId, url: url, category: category)
                changes.password = try readEntryPassword(generate: generate, generator: generator)
                changes.notes = editNotes ? try Terminal.edit("") : nil
                changes.totp = totp ? try readTOTPSecret() : nil
                changes.favorite = favorite ? true : nil
                let id = try vault.items.addEntry(changes, allowDuplicate: allowDuplicate,
                                                  creatingCategory: createCategory)
                Terminal.printError("Added entry \(id).")
                if generate, let password = changes.password {
                    try showGenerated(password, of: name, clip: clip)
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the password entries (without passwords).", aliases: ["ls"])
        @OptionGroup var options: VaultOptions
        @Option(help: "Only list entries of this category.", completion: .custom(completeCategoryNames)) var category:
            String?
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                let category = category.map(ItemReference.init(argument:))
                let output = try options.readUnlockedVault {
                    preparedEntries(try $0.items.entries(category: category), json: json)
                }
                try output()
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show a password entry; the password and hidden fields are masked unless --reveal.",
            discussion: """
            --field prints one value alone, for scripts: password, user, url, otp (the current code), \
            notes, name, category, or the name of a custom field, as stored, control characters included \
            (--escape shows them as \\x1B-style escapes, for a terminal). --clip copies a value to the \
            clipboard instead (the password unless a field is named after it) and clears it after \
            \(Clipboard.defaultClearSeconds) seconds (MYSTASH_CLIP_TIME), if it still holds that value.
            """,
            aliases: ["get"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Argument(help: "With --clip, the field to copy (default: password).") var clipField: String?
        @Flag(help: "Show the password and hidden fields themselves.") var reveal = false
        @Flag(help: "Print JSON.") var json = false
        @Option(help: ArgumentHelp("Print only this field's value, as stored.", valueName: "field"),
                completion: .custom(completeFieldNames))
        var field: String?
        @Flag(help: "With --field, show control characters in the value as \\x1B-style escapes.") var escape = false
        @Flag(
            name: [.customShort("c"), .long],
            help: "Copy a field (default: the password) to the clipboard instead of printing.")
        var clip = false

        func validate() throws {
            if clipField != nil && !clip {
                throw ValidationError("A second argument names the field to copy; add '--clip'")
            }
            if clip && json { throw ValidationError("Use either '--clip' or '--json', not both") }
            if clipField != nil && field != nil {
                throw ValidationError("Name the field once: '--clip FIELD' or '--field FIELD'")
            }
            if escape && (field == nil || clip) { throw ValidationError("'--escape' goes with '--field FIELD'") }
        }

        func run() throws {
            try reportingErrors {
                if clip {
                    let name = clipField ?? field ?? "password"
                    let value = try options.readOneItem {
                        try $0.items.fieldValue(name, of: ItemReference(argument: entry))
                    }
                    try ClipboardCopy.copy(value, what: "the \(Output.safe(name)) of '\(Output.safe(entry))'")
                    return
                }
                if let field {
                    let value = try options.readOneItem {
                        try $0.items.fieldValue(field, of: ItemReference(argument: entry))
                    }
                    // As stored: a script asked for this value, and gets it byte for byte.
                    Output.write((escape ? Output.safe(value, keepingLines: true) : value) + "\n")
                    return
                }
                let info = try options.readOneItem {
                    try $0.items.entry(ItemReference(argument: entry), reveal: reveal)
                }
                if json { return try Output.json(info) }
                var fields: [(String, String?)] = [("ID", String(info.id)), ("Name", info.name), ("User", info.userId),
                                                   ("Password", info.password ?? "********"), ("URL", info.url)]
                for more in info.moreURLs ?? [] { fields.append(("URL", more)) }
                fields += [("Category", info.category), ("Favorite", info.favorite == true ? "yes" : nil),
                           ("TOTP", info.hasTOTP == true ? (info.totp ?? "yes ('mystash password otp')") : nil)]
                for custom in info.fields ?? [] { fields.append((custom.name, custom.value ?? "********")) }
                fields += [
                    ("Notes", info.notes),
                    ("History", info.historyCount.map { "\($0) earlier password(s) ('mystash password history')" })]
                for attachment in info.attachments ?? [] {
                    fields.append(("Attachment", "\(attachment.name) (\(Output.byteCount(attachment.size)))"))
                }
                fields.append(("Updated", Output.date(info.updatedAt)))
                // Labels (custom field names too) measured in terminal columns.
                let width = max(10, (fields.map { TextWidth.columns(of: Output.safe($0.0)) }.max() ?? 0) + 2)
                for (label, value) in fields {
                    guard let value else { continue }
                    // A value of several lines (notes) as lines, each under the first.
                    let lines = Output.safe(value, keepingLines: true)
                        .split(separator: "\n", omittingEmptySubsequences: false)
                    Output.write(
                        Output.padded(Output.safe(label) + ":", to: width)
                            + lines.joined(separator: "\n" + String(repeating: " ", count: width)) + "\n")
                }
            }
        }
    }

    struct OTP: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "otp",
            abstract: "Print the current TOTP code of an entry; the seconds it stays valid go to stderr.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Flag(name: [.customShort("c"), .long], help: "Copy the code to the clipboard instead of printing it.")
        var clip = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try reportingErrors {
                let (code, totp) = try options.readOneItem { try $0.items.totpCode(ItemReference(argument: entry)) }
                if json {
                    struct Shown: Encodable {
                        var code: String  // a string: its leading zeros count
                        var secondsLeft, digits, period: Int
                        var algorithm: String
                    }
                    return try Output.json(Shown(code: code.value, secondsLeft: code.secondsLeft, digits: totp.digits,
                                                 period: totp.period, algorithm: totp.algorithm.rawValue))
                }
                if clip {
                    try ClipboardCopy.copy(
                        code.value, what: "the code (valid for \(code.secondsLeft) s)", clearAfter: code.secondsLeft)
                    return
                }
                Output.write(code.value + "\n")
                Terminal.printError("Valid for \(code.secondsLeft) s.")
            }
        }
    }

    struct History: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "history",
            abstract: "List an entry's earlier passwords with when each was replaced (values only with --reveal).")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Flag(help: "Show the earlier passwords themselves.") var reveal = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try reportingErrors {
                let history = try options.readOneItem {
                    try $0.items.passwordHistory(ItemReference(argument: entry), reveal: reveal)
                }
                if json { return try Output.json(history) }
                Output.table(
                    ["REPLACED", "PASSWORD"], history.map { [Output.date($0.replacedAt), $0.password ?? "********"] },
                             empty: "No earlier passwords.")
            }
        }
    }

    struct Edit: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "edit", abstract: "Change a password entry.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Option(help: "Rename the entry.") var name: String?
        @Option(name: .customLong("user"), help: "Change the user ID ('' clears it).") var userId: String?
        @Option(help: "Change the address ('' clears it).") var url: String?
        @Option(help: "Move the entry to this category ('' for none).", completion: .custom(completeCategoryNames))
        var category: String?
        @Flag(help: "Create the category if the vault does not have it yet.") var createCategory = false
        @Flag(help: "Change the notes in $EDITOR, on a private file in memory (emptying them clears them).")
        var editNotes = false
        @Flag(help: "Read a new password (standard input, else asked twice).") var newPassword = false
        @Flag(help: "Generate a new random password, and print it.") var generate = false
        @Flag(name: [.customShort("c"), .long], help: "With --generate, copy the password instead of printing it.")
        var clip = false
        @Flag(help: "Ask for a new TOTP secret (otpauth:// URI or base32) on the terminal; an empty answer removes it.")
        var totp = false
        @Flag(inversion: .prefixedNo, help: "Mark or unmark the entry as a favourite.") var favorite: Bool?
        @Flag(help: "Rename the entry even if another one has the new name.") var allowDuplicate = false
        @OptionGroup var generator: GeneratorOptions

        func validate() throws {
            let changesNothing = name == nil && userId == nil && url == nil && category == nil && favorite == nil
                && !editNotes && !newPassword && !generate && !totp
            if changesNothing {
                throw ValidationError("Nothing to change: give at least one of --name, --user, --url, --category, "
                                      + "--edit-notes, --new-password, --generate, --totp, --favorite, --no-favorite")
            }
            if newPassword && generate {
                throw ValidationError("Use either '--new-password' or '--generate', not both")
            }
            if clip && !generate { throw ValidationError("'--clip' goes with '--generate'") }
            if createCategory && category == nil { throw ValidationError("'--create-category' goes with '--category'") }
            if editNotes { try requireTerminal(for: "--edit-notes") }
            if totp { try requireTerminal(for: "--totp") }
        }

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let category = try categoryName(category, in: vault, creating: createCategory)
                var changes = EntryChanges(name: name, userId: userId, url: url, category: category)
                changes.password =
                    newPassword || generate ? try readEntryPassword(generate: generate, generator: generator) : nil
                let reference = ItemReference(argument: entry)
                changes.notes =
                    editNotes ? try Terminal.edit(try vault.items.entry(reference, reveal: false).notes ?? "") : nil
                changes.totp = totp ? try readTOTPSecret(allowEmpty: true) : nil
                changes.favorite = favorite
                try vault.items.editEntry(reference, changes, allowDuplicate: allowDuplicate,
                                    creatingCategory: createCategory)
                Terminal.printError("Saved.")
                if generate, let password = changes.password {
                    try showGenerated(password, of: name ?? entry, clip: clip)
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a password entry.", aliases: ["remove", "delete"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Flag(name: .shortAndLong, help: "Remove without asking.") var force = false

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let info = try vault.items.entry(ItemReference(argument: entry), reveal: false)
                try confirmRemoval("entry \(info.id) '\(info.name)'", force: force)
                try vault.items.removeEntry(.id(info.id))
                Terminal.printError("Removed entry \(info.id).")
            }
        }
    }

    struct Search: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "search",
            abstract: "Find entries whose name, user, URL, notes or category contains a word (never the password).",
            aliases: ["find"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The text to look for.") var query: String
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                let output = try options.readUnlockedVault {
                    preparedEntries(try $0.items.searchEntries(query), json: json)
                }
                try output()
            }
        }
    }
}

/// Entries as a list prints them, to be printed by calling the result: the table is formatted
/// while the vault is still being checked (inside the read), and printed only once it passed.
func preparedEntries(_ entries: [EntryInfo], json: Bool) -> () throws -> Void {
    if json { return { try Output.json(entries) } }
    let table = Output.formattedTable(["ID", "NAME", "USER", "CATEGORY", "URL"],
        entries.map {
            [
                String($0.id), Output.cell($0.name, width: 30), Output.cell($0.userId, width: 30), $0.category ?? "",
                Output.cell($0.url, width: 40),
            ]
        },
        empty: "No entries.")
    return table.write
}

/// The name of the category `argument` names (a name or `#ID`; "" for none). A category the
/// vault lacks is refused, unless a name is to be created: before any password is asked or generated.
func categoryName(_ argument: String?, in vault: Vault, creating: Bool) throws -> String? {
    guard let argument, !argument.isEmpty else { return argument }
    let reference = ItemReference(argument: argument)
    do {
        return try vault.items.categoryName(reference)
    } catch let error as VaultError where error.kind == .notFound {
        if creating, case .name = reference { return argument }
        if creating { throw error }
        throw CommandFailure(.notFound, "no category named '\(argument)'; nothing was saved",
                             hint: "add '--create-category' to create it, or see 'mystash category list'")
    }
}

/// A generated password, printed on stdout as pass does, or copied to the clipboard.
func showGenerated(_ password: String, of entry: String, clip: Bool) throws {
    if clip {
        try ClipboardCopy.copy(password, what: "the new password of '\(Output.safe(entry))'")
    } else {
        Output.write(password + "\n")
    }
}

/// Usage error for an option that needs a person at a terminal (stdin may still carry data).
func requireTerminal(for option: String) throws {
    let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC)
    guard descriptor >= 0 else { throw ValidationError("'\(option)' needs a terminal, and there is none") }
    close(descriptor)
}

/// A TOTP secret or otpauth:// URI, asked without echo (it is a secret, never an argument).
func readTOTPSecret(allowEmpty: Bool = false) throws -> String {
    guard let secret = Terminal.readSecret(prompt: "TOTP secret or otpauth:// URI: ") else {
        throw CommandFailure(.usage, "no terminal to ask for the TOTP secret")
    }
    let text = try secret.withUnsafeBytes { try UTF8Text.decode($0, place: "the typed TOTP secret") }
        .trimmingCharacters(in: .whitespaces)
    if text.isEmpty && !allowEmpty { throw CommandFailure(.usage, "no TOTP secret was given; nothing was saved") }
    return text
}
