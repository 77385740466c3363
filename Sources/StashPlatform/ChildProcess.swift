import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Running helper programs (gpg, clipboard tools) without handing them our secrets.
///
/// Spawned with posix_spawn and reaped with waitpid rather than Foundation's `Process`,
/// which waits until every holder of an internal pipe has gone: a tool that leaves a
/// daemon behind (xclip keeps serving the selection) would hang it.
public enum ChildProcess {
    /// Variables that may hold a master password; never passed on to a child.
    static let secretVariables: Set<String> = ["MYSTASH_PASSWORD", "MYSTASH_NEW_PASSWORD", "MYSTASH_SSH_PASSPHRASE"]

    /// What a finished program left: its exit status (-1 when killed by a signal) and output.
    public struct Result: Sendable {
        public var status: Int32
        public var output: Data
        public var errors: Data
    }

    /// This process's environment without the variables that may hold secrets.
    public static var environment: [String: String] {
        ProcessInfo.processInfo.environment.filter { !secretVariables.contains($0.key) }
    }

    /// Marks every descriptor above standard error close-on-exec, so that a child has none of
    /// ours: a caller's pipe kept by a child that outlives us (the clipboard's clearer, the SSH
    /// agent) kept whoever reads our output waiting until that child ended.
    public static func keepDescriptorsFromChildren() {
        for name in DirectoryEntries.names(in: "/proc/self/fd") ?? [] {
            guard let descriptor = Int32(name), descriptor > 2 else { continue }
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// The path of `program` on PATH, if it is there.
    public static func find(_ program: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(program)" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// Runs `arguments` with `input` on stdin; returns its stdout, or nil if it failed.
    @discardableResult
    public static func run(_ arguments: [String], input: Data = Data(), captureOutput: Bool = false) -> Data? {
        guard let result = execute(arguments, input: input, captureOutput: captureOutput), result.status == 0 else {
            return nil
        }
        return result.output
    }

    /// Runs `arguments` to the end; nil when the program cannot be started. Output not
    /// captured goes to /dev/null, so a daemon the program leaves cannot hold our pipes open.
    /// `extraEnvironment` is added to the (secret-free) environment the program gets.
    public static func execute(_ arguments: [String], input: Data = Data(), captureOutput: Bool = true,
                               extraEnvironment: [String: String] = [:]) -> Result? {
        guard let first = arguments.first, let executable = first.hasPrefix("/") ? first : find(first) else {
            return nil
        }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        var stderrPipe: [Int32] = [-1, -1]
        guard privatePipe(&stdinPipe) else { return nil }
        defer { [stdinPipe[0], stdinPipe[1]].filter { $0 >= 0 }.forEach { close($0) } }
        if captureOutput {
            guard privatePipe(&stdoutPipe), privatePipe(&stderrPipe) else { return nil }
        }
        defer { (stdoutPipe + stderrPipe).filter { $0 >= 0 }.forEach { close($0) } }

        keepDescriptorsFromChildren()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
            posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        let argv = ([executable] + arguments.dropFirst()).map { strdup($0) } + [nil]
        let envp = environment.merging(extraEnvironment) { _, extra in extra }.map { strdup("\($0.key)=\($0.value)") }
            + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 else { return nil }

        close(stdinPipe[0])
        stdinPipe[0] = -1
        if captureOutput {
            close(stdoutPipe[1])
            stdoutPipe[1] = -1
            close(stderrPipe[1])
            stderrPipe[1] = -1
        }
        // A program that exits without reading its input must not kill us with SIGPIPE.
        let previous = signal(SIGPIPE, SIG_IGN)
        input.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let written = write(stdinPipe[1], base + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }
                offset += written
            }
        }
        signal(SIGPIPE, previous)
        close(stdinPipe[1])
        stdinPipe[1] = -1

        var output = Data()
        var errors = Data()
        if captureOutput { readBoth(stdoutPipe[0], into: &output, stderrPipe[0], into: &errors) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7F == 0
        return Result(status: exited ? (status >> 8) & 0xFF : -1, output: output, errors: errors)
    }

    /// A pipe whose ends are closed on exec, so only the dup2'd copies reach the child.
    private static func privatePipe(_ ends: inout [Int32]) -> Bool {
        guard pipe(&ends) == 0 else { return false }
        ends.forEach { _ = fcntl($0, F_SETFD, FD_CLOEXEC) }
        return true
    }

    /// Reads two descriptors to their ends at once, so neither can fill up and block the child.
    private static func readBoth(
        _ first: Int32, into firstData: inout Data, _ second: Int32, into secondData: inout Data
    ) {
        var fds = [
            pollfd(fd: first, events: Int16(POLLIN), revents: 0), pollfd(fd: second, events: Int16(POLLIN), revents: 0),
        ]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while fds.contains(where: { $0.fd >= 0 }) {
            guard poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { return }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let count = read(fds[index].fd, &buffer, buffer.count)
                if count > 0 {
                    if index == 0 {
                        firstData.append(contentsOf: buffer[0..<count])
                    } else {
                        secondData.append(contentsOf: buffer[0..<count])
                    }
                } else if count == 0 || errno != EINTR {
                    fds[index].fd = -1
                }
            }
        }
    }
}
