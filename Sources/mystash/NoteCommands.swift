import ArgumentParser
import Foundation
import MyStashKit

struct NoteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "note",
        abstract: "Add, list, show, edit, remove and search notes.",
        subcommands: [Add.self, List.self, Show.self, Edit.self, Remove.self, Search.self]
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a note.",
            discussion: "The text is read from standard input when it is not a terminal; otherwise $EDITOR opens "
                + "on a private file in memory ($XDG_RUNTIME_DIR, else /dev/shm) that is wiped afterwards.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The note's title.") var title: String

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let text = Terminal.stdinIsTerminal ? try Terminal.edit("") : try Terminal.readStandardInput()
                let id = try vault.items.addNote(title: title, text: text)
                Terminal.printError("Added note \(id).")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the notes.", aliases: ["ls"])
        @OptionGroup var options: VaultOptions
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors { try printNotes(try options.readUnlockedVault { try $0.items.notes() }, json: json) }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show a note's title and text.", aliases: ["get"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The note's title, or #ID.", completion: .custom(completeNoteNames)) var note: String
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try reportingErrors {
                let info = try options.readOneItem { try $0.items.note(ItemReference(argument: note)) }
                if json { return try Output.json(info) }
                Output.line("# \(info.title)")
                if let folder = info.folder { Output.line("Folder: \(folder)") }
                Output.line("")
                Output.line(info.text ?? "")
            }
        }
    }

    struct Edit: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "edit",
            abstract: "Rename a note, or change its text.",
            discussion: """
            With --title, only the title changes; the text is left alone. Otherwise the new text is \
            read from standard input when it is not a terminal, else $EDITOR opens on the current \
            text. Empty new text is refused unless --allow-empty, so a stray </dev/null erases nothing.
            """)
        @OptionGroup var options: VaultOptions
        @Argument(help: "The note's title, or #ID.", completion: .custom(completeNoteNames)) var note: String
        @Option(help: "Give the note this title (its text is not touched).") var title: String?
        @Flag(help: "Allow the new text to be empty (clears the note's text).") var allowEmpty = false

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                var text: String?
                if title == nil {
                    text = Terminal.stdinIsTerminal
                        ? try Terminal.edit(try vault.items.note(ItemReference(argument: note)).text ?? "")
                        : try Terminal.readStandardInput()
                    if text?.isEmpty == true && !allowEmpty {
                        throw CommandFailure(
                            .usage, "the new text is empty; nothing was saved",
                            hint: "add --allow-empty to clear the note's text")
                    }
                }
                try vault.items.editNote(ItemReference(argument: note), title: title, text: text)
                Terminal.printError("Saved.")
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a note.", aliases: ["remove", "delete"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The note's title, or #ID.", completion: .custom(completeNoteNames)) var note: String
        @Flag(name: .shortAndLong, help: "Remove without asking.") var force = false

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let info = try vault.items.note(ItemReference(argument: note))
                try confirmRemoval("note \(info.id) '\(info.title)'", force: force)
                try vault.items.removeNote(.id(info.id))
                Terminal.printError("Removed note \(info.id).")
            }
        }
    }

    struct Search: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "search",
            abstract: "Find notes whose title or text contains a word, ignoring case and accents.", aliases: ["find"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The text to look for.") var query: String
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                try printNotes(try options.readUnlockedVault { try $0.items.searchNotes(query) }, json: json)
            }
        }
    }
}

func printNotes(_ notes: [NoteInfo], json: Bool) throws {
    if json { return try Output.json(notes) }
    Output.table(
        ["ID", "UPDATED", "TITLE"],
        notes.map { [String($0.id), Output.date($0.updatedAt), Output.cell($0.title, width: 60)] }, empty: "No notes.")
}

/// Asks before a removal on a terminal; elsewhere requires --force.
func confirmRemoval(_ what: String, force: Bool) throws {
    guard !force else { return }
    guard Terminal.stdinIsTerminal else {
        throw CommandFailure(.usage, "refusing to remove \(what) without confirmation", hint: "add --force")
    }
    guard Terminal.confirm("Remove \(what)?") else { throw CommandFailure(.usage, "nothing was removed") }
}
