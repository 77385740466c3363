import Foundation
import XCTest

/// Runs the built `mystash` binary in a temporary HOME with a clean environment.
class CLITestCase: XCTestCase {
    var home: URL!
    var vaultDirectory: URL { home.appendingPathComponent(".local/share/mystash") }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var binary: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("mystash")
    }

    override func setUpWithError() throws {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("home-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw XCTSkip("mystash is not built beside the tests (run 'swift build' first)")
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: home)
    }

    /// The environment every run gets: nothing from the caller's vault settings.
    var baseEnvironment: [String: String] {
        ["HOME": home.path, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
         "MYSTASH_TEST_ALLOW_WEAK_KDF": "1", "MYSTASH_PASSWORD": "pw", "MYSTASH_NEW_PASSWORD": "pw"]
    }

    func process(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) -> Process {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        var env = baseEnvironment.merging(environment) { _, new in new }
        removing.forEach { env[$0] = nil }
        process.environment = env
        return process
    }

    @discardableResult
    func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], removing: [String] = [],
        terminal: Bool = false
    ) throws -> Result {
        let process = process(arguments, environment: environment, removing: removing)
        guard terminal else { return try execute(process, stdin: stdin) }
        try giveTerminal(to: process, stdin: stdin)
        return try execute(process, stdin: nil)
    }

    /// Reruns `process` under util-linux `script`, so that it has a controlling terminal (as
    /// `--edit-notes` requires) while its standard input comes from `stdin` and its output and
    /// errors go where the caller points the returned process's. `script -e` reports a death
    /// by signal N as exit status 128 + N.
    func giveTerminal(to process: Process, stdin: String?) throws {
        var input = "/dev/null"
        if let stdin {
            let file = home.appendingPathComponent("stdin-\(UUID().uuidString)")
            try Data(stdin.utf8).write(to: file)
            input = file.path
        }
        let command = ([process.executableURL!.path] + (process.arguments ?? [])).map(shellQuoted).joined(separator: " ")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        // $PPID is script itself: its output and errors are the pipes the caller reads.
        process.arguments = [
            "-qefc", "exec \(command) <\(shellQuoted(input)) >/proc/$PPID/fd/1 2>/proc/$PPID/fd/2", "/dev/null",
        ]
        process.standardInput = FileHandle.nullDevice
    }

    /// Runs `process` to its end with `stdin`, collecting what it writes (stdout to `stdout` when given).
    func execute(_ process: Process, stdin: String?, stdout: FileHandle? = nil) throws -> Result {
        try execute(process, bytes: stdin.map { Data($0.utf8) }, stdout: stdout)
    }

    /// Runs `process` to its end with `bytes` (which need not be text) on its standard input.
    func execute(_ process: Process, bytes stdin: Data?, stdout: FileHandle? = nil) throws -> Result {
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = stdout ?? out
        process.standardError = err
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            // A command may end before reading its input (a refusal needs none): SIGPIPE is held
            // back from this thread meanwhile (children keep theirs), so the write fails instead.
            var pipeSignal = sigset_t()
            var previous = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
            try? input.fileHandleForWriting.write(contentsOf: stdin)
            var pending = sigset_t()
            sigpending(&pending)
            var taken: Int32 = 0
            if sigismember(&pending, SIGPIPE) == 1 { sigwait(&pipeSignal, &taken) }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
            try input.fileHandleForWriting.close()
        }
        // Read both pipes fully before waiting, so a large output cannot block the child.
        nonisolated(unsafe) var errData = Data()  // written by one thread, read after group.wait()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            errData = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outData = stdout == nil ? out.fileHandleForReading.readDataToEndOfFile() : Data()
        group.wait()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
    }

    @discardableResult
    func runOK(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], terminal: Bool = false,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> Result {
        let result = try run(arguments, stdin: stdin, environment: environment, terminal: terminal)
        XCTAssertEqual(result.status, 0, "mystash \(arguments.joined(separator: " ")): \(result.stderr)", file: file, line: line)
        return result
    }

    func initVault() throws {
        try runOK(["init", "--kdf-cost", "10"])
    }

    func json(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8))
    }
}

/// `word` as one word of a POSIX shell command.
func shellQuoted(_ word: String) -> String {
    "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// `environment` as `NAME='value'` words of a shell command, in name order (for `env -i`).
func shellAssignments(_ environment: [String: String]) -> String {
    environment.sorted { $0.key < $1.key }.map { "\($0.key)=\(shellQuoted($0.value))" }.joined(separator: " ")
}

/// A command on a pseudo-terminal (util-linux `script`), answered at its prompts.
final class TerminalSession: @unchecked Sendable {  // the buffer is read and written under the lock
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = ""
    private let lock = NSLock()
    private let arrived = DispatchSemaphore(value: 0)

    init(_ arguments: [String], environment: [String: String]) throws {
        let command = ([CLITestCase.binary.path] + arguments).map(shellQuoted).joined(separator: " ")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qfec", command, "/dev/null"]
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.buffer += String(decoding: data, as: UTF8.self) }
            self.arrived.signal()
        }
        try process.run()
    }

    /// Waits (up to `timeout` seconds) until `text` has appeared on the terminal (`times` times).
    func expect(_ text: String, times: Int = 1, timeout: TimeInterval = 20, file: StaticString = #filePath,
                line: UInt = #line) {
        let deadline = Date().addingTimeInterval(timeout)
        while lock.withLock({ buffer.components(separatedBy: text).count - 1 }) < times {
            if arrived.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .timedOut {
                XCTFail("'\(text)' did not appear; the terminal shows: \(transcript)", file: file, line: line)
                return
            }
        }
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    var transcript: String { lock.withLock { buffer } }

    /// Waits for the command to end and returns its exit status.
    func wait() -> Int32 {
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        return process.terminationStatus
    }
}
