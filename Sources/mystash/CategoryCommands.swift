import ArgumentParser
import Foundation
import MyStashKit

struct CategoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "category",
        abstract: "List, add, rename and remove the categories of password entries.",
        subcommands: [List.self, Add.self, Rename.self, Remove.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the categories with their number of entries.", aliases: ["ls"])
        @OptionGroup var options: VaultOptions
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() throws {
            try reportingErrors {
                // Names are plain, but a store changed outside mystash must not be shown: unlocked to
                // check it, and to load newer seed categories before they are listed.
                let categories = try options.openUnlockedVault().items.categories()
                if json { return try Output.json(categories) }
                Output.table(
                    ["ID", "ENTRIES", "NAME"], categories.map { [String($0.id), String($0.entries), $0.name] },
                    empty: "No categories.")
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a category.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The category's name: up to 64 printable characters.") var name: String

        func run() throws {
            try reportingErrors {
                let id = try options.openUnlockedVault().items.addCategory(name)
                Terminal.printError("Added category \(id).")
            }
        }
    }

    struct Rename: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a category.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The category's current name, or #ID.", completion: .custom(completeCategoryNames)) var old:
            String
        @Argument(help: "Its new name.") var new: String

        func run() throws {
            try reportingErrors {
                try options.openUnlockedVault().items.renameCategory(ItemReference(argument: old), to: new)
                Terminal.printError("Renamed.")
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a category that no entry uses.", aliases: ["remove", "delete"])
        @OptionGroup var options: VaultOptions
        @Argument(help: "The category's name, or #ID.", completion: .custom(completeCategoryNames)) var name: String

        func run() throws {
            try reportingErrors {
                // Deny needs to see the entries that use the category, which are encrypted.
                try options.openUnlockedVault().items.removeCategory(ItemReference(argument: name))
                Terminal.printError("Removed.")
            }
        }
    }
}
