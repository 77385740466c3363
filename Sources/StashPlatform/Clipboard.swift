import Foundation
import StashCrypto

/// The system clipboard through wl-copy (Wayland), xclip or xsel (X11), else OSC 52 on the
/// terminal. A copied secret is cleared by a detached helper after a while, but only if the
/// clipboard still holds it (the person may have copied something else since); what the
/// clipboard held before the copy is put back then, as pass does. Values go to the tools on
/// stdin, never as arguments; the helper gets only a digest of the secret (and, on its stdin,
/// the earlier contents).
public enum Clipboard {
    /// Why a value could not be copied.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Neither a display for a clipboard program nor a terminal for OSC 52.
        case noClipboard
        case toolFailed(String)
        case helperFailed

        public var description: String {
            switch self {
            case .noClipboard:
                "there is no clipboard: no display for wl-copy, xclip or xsel, and no terminal for OSC 52"
            case .toolFailed(let tool): "'\(tool)' could not copy to the clipboard"
            case .helperFailed: "cannot start the helper that clears the clipboard"
            }
        }
    }

    /// Seconds a copied secret stays on the clipboard unless the caller says otherwise.

    public static let defaultClearSeconds = 45
    /// The longest wait the clear helper accepts.
    public static let maximumClearSeconds = 3600

    /// A clipboard program: how to copy (value on stdin), read back, and clear.
    public struct Tool: Equatable, Sendable {
        /// The program's name, as people know it.
        public var name: String { copy[0] }
        var copy: [String]
        var paste: [String]
        var clear: [String]
    }

    /// Where a value went.
    public enum Destination: Equatable, Sendable {
        /// A clipboard program; `clearsAfter` seconds, or nil when nothing clears it.
        case tool(String, clearsAfter: Int?)
        /// The terminal emulator, through OSC 52; the terminal cannot be read back, so it is not cleared.
        case terminal
    }

    /// The first tool that can reach a running display.
    public static func tool(environment: [String: String] = ProcessInfo.processInfo.environment) -> Tool? {
        if environment["WAYLAND_DISPLAY"].map({ !$0.isEmpty }) == true, ChildProcess.find("wl-copy") != nil,
            ChildProcess.find("wl-paste") != nil
        {
            return Tool(copy: ["wl-copy"], paste: ["wl-paste", "--no-newline"], clear: ["wl-copy", "--clear"])
        }
        guard environment["DISPLAY"].map({ !$0.isEmpty }) == true else { return nil }
        if ChildProcess.find("xclip") != nil {
            return Tool(
                copy: ["xclip", "-selection", "clipboard", "-in"], paste: ["xclip", "-selection", "clipboard", "-out"],
                clear: ["xclip", "-selection", "clipboard", "-in"])
        }
        if ChildProcess.find("xsel") != nil {
            return Tool(
                copy: ["xsel", "--clipboard", "--input"], paste: ["xsel", "--clipboard", "--output"],
                clear: ["xsel", "--clipboard", "--clear"])
        }
        return nil
    }

    /// Copies `value`; when `clearAfter` is above 0, starts `clearHelper` (a program that calls
    /// ``runClearHelper(input:)``) detached in its own session, so it outlives this process.
    ///
    /// - throws: ``Failure/noClipboard`` when there is neither a display nor a terminal,
    ///   ``Failure/toolFailed(_:)`` or ``Failure/helperFailed`` when the tool or the helper fails.
    public static func copy(_ value: String, clearAfter seconds: Int, clearHelper: [String]) throws -> Destination {
        guard let tool = tool() else {
            try copyThroughTerminal(value)
            return .terminal
        }
        // What to put back when the copy is cleared: read before it is replaced.
        let earlier = seconds > 0 ? contents() : nil
        guard ChildProcess.run(tool.copy, input: Data(value.utf8)) != nil else {
            throw Failure.toolFailed(tool.name)
        }
        waitUntilClipboardHolds(value)
        guard seconds > 0 else { return .tool(tool.name, clearsAfter: nil) }
        let seconds = min(seconds, maximumClearSeconds)
        let restore = earlier.flatMap { $0.isEmpty || $0 == value ? nil : Data($0.utf8).base64EncodedString() }
        try startDetached(clearHelper, input: "\(seconds) \(try digest(value))\n" + (restore.map { $0 + "\n" } ?? ""))
        return .tool(tool.name, clearsAfter: seconds)
    }

    /// xclip and xsel take the selection from a background process after they return: waits
    /// (2 s at most) until the clipboard holds `value`, so a paste right away gets it.
    private static func waitUntilClipboardHolds(_ value: String) {
        let deadline = Date().addingTimeInterval(2)
        while contents() != value && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    }

    /// What the clipboard holds now, through the first tool (nil without one).
    public static func contents() -> String? {
        guard let tool = tool(), let data = ChildProcess.run(tool.paste, captureOutput: true) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// Empties the clipboard if it still holds the value whose digest is `expected`, or puts
    /// `earlier` back in it. Returns whether it did.
    @discardableResult
    public static func clear(ifDigest expected: String, restoring earlier: String? = nil) -> Bool {
        // What cannot be hashed cannot be known to be ours: it is left alone, as another value is.
        guard let tool = tool(), let current = contents(), let digest = try? digest(current),
            ConstantTime.equal(Array(digest.utf8), Array(expected.utf8))
        else { return false }
        if let earlier, !earlier.isEmpty {
            guard ChildProcess.run(tool.copy, input: Data(earlier.utf8)) != nil else { return false }
            waitUntilClipboardHolds(earlier)
            return true
        }
        guard ChildProcess.run(tool.clear) != nil else { return false }
        // The secret is gone when this returns, not some moments later.
        waitUntilClipboardHolds("")
        return true
    }

    /// The helper's work: reads `SECONDS DIGEST` from the first line of `input` and the earlier
    /// contents (base64) from an optional second, waits, then, if the clipboard still holds the
    /// value, puts the earlier contents back or clears it. Returns false on input it cannot read.
    @discardableResult
    public static func runClearHelper(input: FileHandle = .standardInput) -> Bool {
        let lines = String(decoding: input.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        let parts = lines.first?.trimmingCharacters(in: .whitespaces).split(separator: " ") ?? []
        guard parts.count == 2, let seconds = Int(parts[0]), (0...maximumClearSeconds).contains(seconds),
            parts[1].count == 64, lines.count <= 2
        else { return false }
        var earlier: String?
        if lines.count == 2 {
            guard let data = Data(base64Encoded: String(lines[1])) else { return false }
            earlier = String(decoding: data, as: UTF8.self)
        }
        Thread.sleep(forTimeInterval: TimeInterval(seconds))
        clear(ifDigest: String(parts[1]), restoring: earlier)
        return true
    }

    /// OSC 52 asks the terminal emulator itself to set the clipboard (also over ssh).
    private static func copyThroughTerminal(_ value: String) throws {
        let term = ProcessInfo.processInfo.environment["TERM"] ?? ""
        guard !term.isEmpty, term != "dumb", let tty = FileHandle(forWritingAtPath: "/dev/tty") else {
            throw Failure.noClipboard
        }
        tty.write(Data("\u{1B}]52;c;\(Data(value.utf8).base64EncodedString())\u{07}".utf8))
        try? tty.close()
    }

    /// - throws: when OpenSSL cannot hash (out of memory): a helper given no digest would
    ///   never find its value and leave the secret on the clipboard.
    static func digest(_ value: String) throws -> String {
        try SHA256Digest.hash(Array(value.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Starts `command` through `setsid -f` (a new session, not our child) with `input` on its
    /// stdin, our environment without secrets, and no output of ours.
    private static func startDetached(_ command: [String], input: String) throws {
        guard !command.isEmpty,
            ChildProcess.execute(
                ["setsid", "-f"] + command, input: Data(input.utf8),
                captureOutput: false)?.status == 0
        else {
            throw Failure.helperFailed
        }
    }
}
