import Foundation
import XCTest

/// A command running in a tmux pane of a private tmux server: keys go in with send-keys,
/// the screen comes out with capture-pane, as a person at a terminal would see it.
final class TmuxSession {
    let socket = "mystash-test-\(UUID().uuidString.prefix(8))"

    /// Starts `command` (run by sh) in a pane of `columns`×`rows`; the pane stays after the
    /// command ends so its last screen and the shell's output can be read.
    init(_ command: String, columns: Int = 100, rows: Int = 24) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") else {
            throw XCTSkip("tmux is not installed (CI installs it)")
        }
        try tmux(["-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", String(columns), "-y", String(rows),
                  "sh", "-c", command])
        try tmux(["set-option", "-t", "main", "remain-on-exit", "on"])
    }

    deinit {
        _ = try? tmux(["kill-server"])
    }

    /// Runs tmux on this session's server and returns what it printed. Spawned and reaped
    /// directly: the server it forks keeps inherited descriptors open, which Foundation's
    /// Process would wait on.
    @discardableResult
    func tmux(_ arguments: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("tmux-\(UUID().uuidString)").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let home = "HOME=" + FileManager.default.temporaryDirectory.path
        let words: [String] = ["tmux", "-L", socket] + arguments
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let environment: [String] = ["PATH=/usr/bin:/bin", "TERM=xterm-256color", home]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/tmux", &actions, nil, argv, envp)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    /// Types keys: tmux key names (`C-n`, `Enter`, `Down`) or, with `literally`, text.
    func send(_ keys: String..., literally: Bool = false) {
        _ = try? tmux(["send-keys", "-t", "main"] + (literally ? ["-l"] : []) + keys)
    }

    func type(_ text: String) { send(text, literally: true) }

    /// The screen as text; with `history`, the scrollback above it too; with `escapes`, the
    /// colours and attributes as escape sequences.
    func screen(history: Bool = false, escapes: Bool = false) -> String {
        (try? tmux(["capture-pane", "-p", "-t", "main"] + (history ? ["-S", "-"] : []) + (escapes ? ["-e"] : []))) ?? ""
    }

    /// Waits until the screen satisfies `condition` (polling it; never a fixed sleep).
    @discardableResult
    func wait(for description: String, timeout: TimeInterval = 20, file: StaticString = #filePath, line: UInt = #line,
              _ condition: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if condition(screen()) { return true }
            usleep(20_000)
        } while Date() < deadline
        XCTFail("timed out waiting for \(description); the screen shows:\n\(screen())", file: file, line: line)
        return false
    }

    @discardableResult
    func expect(_ text: String, timeout: TimeInterval = 20,
                file: StaticString = #filePath, line: UInt = #line) -> Bool {
        wait(for: "'\(text)'", timeout: timeout, file: file, line: line) { $0.contains(text) }
    }

    func expectGone(_ text: String, timeout: TimeInterval = 20, file: StaticString = #filePath, line: UInt = #line) {
        wait(for: "'\(text)' to go", timeout: timeout, file: file, line: line) { !$0.contains(text) }
    }

    /// The process ids of the pane's shell's children (the command under test).
    func commandProcessIDs() -> [Int32] {
        guard let shell = Int32((try? tmux(["display-message", "-p", "-t", "main", "#{pane_pid}"]))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else { return [] }
        let children = (try? String(contentsOfFile: "/proc/\(shell)/task/\(shell)/children", encoding: .utf8)) ?? ""
        return children.split(separator: " ").compactMap { Int32($0) }
    }

    func resize(columns: Int, rows: Int) {
        _ = try? tmux(["resize-window", "-t", "main", "-x", String(columns), "-y", String(rows)])
    }
}
