import Foundation
import MyStashKit
import CLinuxSupport
import StashCrypto
#if canImport(Glibc)
import Glibc
#endif

/// Talking to the person at the terminal: prompts without echo on /dev/tty, so that stdin
/// stays free for data, and progress on stderr.
enum Terminal {
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Asks on the controlling terminal without echo; nil when there is no terminal.
    static func readSecret(prompt: String) -> SecretBytes? {
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else { return nil }
        var hidden = settings
        hidden.c_lflag &= ~tcflag_t(ECHO)
        hidden.c_lflag |= tcflag_t(ECHONL)
        // A signal that ends or stops the process gives the shell its echo back (and a continue
        // hides the typing again and shows the prompt again, when the typing is hidden once more):
        // without it, what the person types next would not show.
        _ = prompt.withCString { ms_prompt_guard_begin(descriptor, &settings, &hidden, $0) }
        tcsetattr(descriptor, TCSANOW, &hidden)
        defer {
            tcsetattr(descriptor, TCSANOW, &settings)
            ms_prompt_guard_end()
        }
        _ = prompt.withCString { write(descriptor, $0, strlen($0)) }
        let line = SecretBytes(count: 4096)
        var length = 0
        line.withUnsafeMutableBytes { buffer in
            var byte: UInt8 = 0
            while length < buffer.count, read(descriptor, &byte, 1) == 1, byte != 10 {
                buffer[length] = byte
                length += 1
            }
            byte = 0
        }
        return line.withUnsafeBytes { SecretBytes(copying: $0.prefix(length).filter { $0 != 13 }) }
    }

    /// Asks twice and insists the answers match.
    static func readNewSecret(prompt: String, again: String) throws -> SecretBytes {
        guard let first = readSecret(prompt: prompt) else {
            throw CommandFailure(
                .usage,
                "no terminal to ask for the "
                    + "\(prompt.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: ": ")))"
            )
        }
        guard let second = readSecret(prompt: again), second == first else {
            throw CommandFailure(.usage, "the two entries did not match; nothing was changed")
        }
        guard first.count > 0 else {
            throw CommandFailure(.usage, "an empty secret is not allowed; nothing was changed")
        }
        return first
    }

    /// Asks a yes/no question on the terminal; false without a terminal.
    static func confirm(_ question: String) -> Bool {
        guard let handle = FileHandle(forUpdatingAtPath: "/dev/tty") else { return false }
        handle.write(Data("\(question) [y/N] ".utf8))
        var answer = Data()
        while let byte = try? handle.read(upToCount: 1), let first = byte.first, first != 10 { answer.append(first) }
        return ["y", "yes"].contains(
            String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased())
    }

    /// Everything on standard input, as text; bytes that are not UTF-8 are refused.
    static func readStandardInput() throws -> String {
        try UTF8Text.decode(FileHandle.standardInput.readDataToEndOfFile(), place: "standard input")
    }

    static func printError(_ text: String) {
        writeError(text + "\n")
    }

    /// Writes to stderr; when nothing reads it any more, the text is dropped and the command
    /// ends with its own status (Foundation's `FileHandle` would stop the process).
    static func writeError(_ text: String) {
        var text = text
        _ = text.withUTF8 { Output.writeAll(UnsafeRawBufferPointer($0), to: STDERR_FILENO) }
    }

    /// Draws `label done/total` on one line of stderr, only when stderr is a terminal.
    static func progress(_ label: String) -> MyStashKit.Progress? {
        guard stderrIsTerminal else { return nil }
        var last = -1
        return MyStashKit.Progress { done, total in
            let percent = total == 0 ? 100 : done * 100 / total
            guard percent != last || done == total else { return }
            last = percent
            writeError("\r\(label) \(done)/\(total) (\(percent)%)\(done == total ? "\n" : "")")
        }
    }
}
