import ArgumentParser
import Foundation
import MyStashKit

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
        var text = Terminal.readStandardInput()
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
    let secret = try Terminal.readNewSecret(prompt: "Password: ", again: "Repeat the password: ")
    return secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

struct PasswordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Add, list, show, edit, remove and search password entries.",
        subcommands: [Add.self, List.self, Show.self, Edit.self, Remove.self, Search.self],
        aliases: ["pw"]
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a password entry.",
            discussion: "The password is read from standard input when it is not a terminal, else asked twice without echo; it is never an argument. --generate makes one instead.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, such as the site or program.") var name: String
        @Option(name: .customLong("user"), help: "Record this user ID or login name.") var userId: String?
        @Option(help: "Record this address (scheme://...).") var url: String?
        @Option(help: "File the entry under this category.") var category: String?
        @Flag(help: "Write the entry's notes in $EDITOR, on a private file in memory (notes are never arguments).")
        var editNotes = false
        @Flag(help: "Generate a random password instead of reading one.") var generate = false
        @OptionGroup var generator: GeneratorOptions

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let password = try readEntryPassword(generate: generate, generator: generator)
                let notes = editNotes ? try Terminal.edit("") : nil
                let id = try vault.addEntry(name: name, password: password, userId: userId, url: url, category: category, notes: notes)
                Terminal.printError("Added entry \(id).")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the password entries (without passwords).", aliases: ["ls"])
        @OptionGroup var options: VaultOptions
        @Option(help: "Only list entries of this category.") var category: String?
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors { try printEntries(try options.openUnlockedVault().entries(category: category), json: json) }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a password entry; the password is masked unless --reveal.", aliases: ["get"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's ID or name.") var entry: String
        @Flag(help: "Show the password itself.") var reveal = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try reportingErrors {
                let info = try options.openUnlockedVault().entry(entry, reveal: reveal)
                if json { return try Output.json(info) }
                let fields: [(String, String?)] = [("ID", String(info.id)), ("Name", info.name), ("User", info.userId), ("Password", info.password ?? "********"),
                                                   ("URL", info.url), ("Category", info.category), ("Notes", info.notes), ("Updated", Output.date(info.updatedAt))]
                for (label, value) in fields where value != nil { Output.line("\((label + ":").padding(toLength: 10, withPad: " ", startingAt: 0))\(value!)") }
            }
        }
    }

    struct Edit: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a password entry.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's ID or name.") var entry: String
        @Option(help: "Rename the entry.") var name: String?
        @Option(name: .customLong("user"), help: "Change the user ID ('' clears it).") var userId: String?
        @Option(help: "Change the address ('' clears it).") var url: String?
        @Option(help: "Move the entry to this category ('' for none).") var category: String?
        @Flag(help: "Change the notes in $EDITOR, on a private file in memory (emptying them clears them).")
        var editNotes = false
        @Flag(help: "Read a new password (standard input, else asked twice).") var newPassword = false
        @Flag(help: "Generate a new random password.") var generate = false
        @OptionGroup var generator: GeneratorOptions

        func validate() throws {
            if newPassword && generate { throw ValidationError("Use either '--new-password' or '--generate', not both") }
        }

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let password = newPassword || generate ? try readEntryPassword(generate: generate, generator: generator) : nil
                let notes = editNotes ? try Terminal.edit(try vault.entry(entry, reveal: false).notes ?? "") : nil
                try vault.editEntry(entry, EntryChanges(name: name, userId: userId, url: url, category: category, password: password, notes: notes))
                Terminal.printError("Saved.")
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a password entry.", aliases: ["remove", "delete"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's ID or name.") var entry: String
        @Flag(name: .shortAndLong, help: "Remove without asking.") var force = false

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let info = try vault.entry(entry, reveal: false)
                try confirmRemoval("entry \(info.id) '\(info.name)'", force: force)
                try vault.removeEntry(String(info.id))
                Terminal.printError("Removed entry \(info.id).")
            }
        }
    }

    struct Search: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Find entries whose name, user, URL, notes or category contains a word (never the password).", aliases: ["find"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The text to look for.") var query: String
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors { try printEntries(try options.openUnlockedVault().searchEntries(query), json: json) }
        }
    }
}

func printEntries(_ entries: [EntryInfo], json: Bool) throws {
    if json { return try Output.json(entries) }
    Output.table(["ID", "NAME", "USER", "CATEGORY", "URL"],
                 entries.map { [String($0.id), Output.cell($0.name, width: 30), Output.cell($0.userId, width: 30), $0.category ?? "", Output.cell($0.url, width: 40)] },
                 empty: "No entries.")
}
