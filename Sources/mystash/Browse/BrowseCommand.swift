import ArgumentParser
import Foundation
import MyStashKit
import TerminalUI

struct Browse: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Browse, search and edit the vault in a full-screen view.",
        discussion: """
        Two tabs, Notes and Passwords; type to filter, F1 for the keys. The view follows \
        changes other mystash processes make, and locks itself after a spell without a key \
        press. It draws on the terminal's alternate screen, so nothing it showed stays in \
        the scrollback after it exits.
        """)

    enum StartTab: String, ExpressibleByArgument, CaseIterable {
        case notes, passwords
    }

    @OptionGroup var options: VaultOptions
    @Option(help: "Open on this tab (notes or passwords).") var tab: StartTab = .passwords
    @Option(name: .customLong("idle-lock"),
            help: ArgumentHelp("Lock the view after this many seconds without a key press (0: never).",
                               valueName: "seconds"))
    var idleLock = 300

    func validate() throws {
        if idleLock < 0 { throw ValidationError("'--idle-lock' must be 0 or a number of seconds, not '\(idleLock)'") }
    }

    func run() throws {
        try reportingErrors {
            // The vault is checked on a second connection while the first tab's items load;
            // nothing is shown before the check has passed.
            let vault = try options.openUnlockedVault(verification: .concurrent)
            let results = BrowseResults(vault: vault)
            let startTab: Browser.Tab = tab == .notes ? .notes : .passwords
            try vault.integrity.readWhileVerifying { try results.fetch(startTab) }
            // Commits made since the check began are checked too, before the first frame.
            try vault.followExternalChanges()
            // After the check, whose seeding is no change of the person's to take back.
            vault.recordChangesForUndo()
            let screen: TerminalScreen
            do {
                screen = try TerminalScreen()
            } catch let error as TerminalError {
                throw CommandFailure(.usage, error.description,
                                 hint: "run 'mystash browse' in a terminal; scripts can use the other commands")
            }
            defer { screen.restore() }
            let browser = Browser(vault: vault, results: results, screen: screen, tab: startTab,
                                  idleLimit: idleLock == 0 ? nil : TimeInterval(idleLock),
                                  environment: ProcessInfo.processInfo.environment)
            try browser.run()
        }
    }
}
