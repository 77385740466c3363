import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform

/// The CLI's side of the clipboard: the delay from MYSTASH_CLIP_TIME, the helper command,
/// and what to tell the person.
enum ClipboardCopy {
    /// Seconds until a copied value is cleared: MYSTASH_CLIP_TIME (0 = never), capped.
    static func clearSeconds(environment: (String) -> String? = ProcessEnvironment.value) throws -> Int {
        guard let text = environment("MYSTASH_CLIP_TIME") else { return Clipboard.defaultClearSeconds }
        guard let seconds = Int(text), (0...Clipboard.maximumClearSeconds).contains(seconds) else {
            throw CommandFailure(
                .usage,
                "MYSTASH_CLIP_TIME must be a number of seconds from 0 to "
                    + "\(Clipboard.maximumClearSeconds), not '\(text)'"
            )
        }
        return seconds
    }

    /// Copies `value` (named `what` in the message), cleared after `seconds` or MYSTASH_CLIP_TIME,
    /// and says so on standard error.
    static func copy(_ value: String, what: String, clearAfter seconds: Int? = nil) throws {
        Terminal.printError(try copyReporting(value, what: what, clearAfter: seconds))
    }

    /// Copies as ``copy(_:what:clearAfter:)`` does and returns what to tell the person.
    static func copyReporting(_ value: String, what: String, clearAfter seconds: Int? = nil) throws -> String {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let destination: Clipboard.Destination
        do {
            destination = try Clipboard.copy(
                value, clearAfter: try seconds ?? clearSeconds(),
                clearHelper: [executable, ClipboardClear.configuration.commandName ?? ""])
        } catch Clipboard.Failure.noClipboard {
            var failure = CommandFailure(Clipboard.Failure.noClipboard)
            failure.hint = "print the value with --field instead, or run under a graphical session"
            throw failure
        }

        switch destination {
        case .tool(_, let clearsAfter?):
            let unit = clearsAfter == 1 ? "second" : "seconds"
            return "Copied \(what) to the clipboard; it is cleared in \(clearsAfter) \(unit)."
        case .tool:
            return "Copied \(what) to the clipboard."
        case .terminal:
            return "Sent \(what) to the terminal's clipboard (OSC 52); it is not cleared automatically."
        }
    }
}

/// The detached helper `--clip` starts; not for people.
struct ClipboardClear: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clipboard-clear",
        abstract: "Clear the clipboard after a delay if it still holds a value (used by --clip).",
        shouldDisplay: false)

    func run() throws {
        guard Clipboard.runClearHelper() else { throw ExitCode(64) }
    }
}
