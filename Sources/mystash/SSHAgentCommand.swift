import ArgumentParser
import CLinuxSupport
import Foundation
import MyStashKit
import StashPlatform
#if canImport(Glibc)
import Glibc
#endif

struct SSHAgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-agent", abstract: "Serve the vault's SSH keys to ssh, as ssh-agent does.",
        discussion: """
        Listens on a Unix socket (mode 0600) and prints the shell lines that point SSH_AUTH_SOCK at \
        it, for 'eval "$(mystash ssh-agent)"'. Keys are served only while the vault is unlocked \
        ('mystash unlock'): when the session is locked or times out, the agent drops the keys \
        from memory and lists none until the vault is unlocked again. It never asks for the \
        master password. Removing keys and locking the agent are refused; adding is refused \
        unless --allow-add.
        """)
    @OptionGroup var options: VaultOptions
    @Option(
        help: ArgumentHelp(
            "Listen on this socket (default: $XDG_RUNTIME_DIR/mystash/ssh-agent.sock).", valueName: "path"),
        completion: .file())
    var socket: String?
    @Flag(help: "Stay in the foreground and log requests to stderr (for service managers and tests).")
    var foreground = false
    @Flag(help: "Ask on the terminal before each signature (with --foreground, in a terminal).") var confirm = false
    @Flag(help: "Store keys that ssh-add adds as new entries of the \"SSH Key\" category.") var allowAdd = false

    func validate() throws {
        if confirm && !foreground {
            throw ValidationError(
                "--confirm needs --foreground: an agent in the background has no terminal to ask on")
        }
    }

    func run() throws {
        try reportingErrors {
            let path = try socket ?? Self.defaultSocketPath()
            // The vault must exist; whether it is unlocked is looked at on each request.
            let vault = try options.openVault()
            if confirm && FileHandle(forUpdatingAtPath: "/dev/tty") == nil {
                throw CommandFailure(.usage, "--confirm needs a terminal to ask on, and there is none")
            }
            if foreground {
                let server = try SSHAgentServer(path: path, vaultDirectory: vault.directory, confirm: confirm,
                                                allowAdd: allowAdd)
                Output.write(Self.shellLines(path: path, pid: getpid()))
                Terminal.printError("mystash ssh-agent: serving the keys of \(vault.directory.path) on \(path)")
                server.serve()
            } else {
                // Refused here, where the person sees why, rather than in the agent, which has no terminal.
                try SSHAgentServer.claim(path)
                try startInBackground(path: path)
            }
        }
    }

    /// Starts `ssh-agent --foreground` in a new session with no terminal, waits for its first
    /// line (it is listening), and prints the lines for the shell.
    private func startInBackground(path: String) throws {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        var arguments = [executable, "ssh-agent", "--foreground", "--socket", path,
                         "--vault", options.directory.path]
        if allowAdd { arguments.append("--allow-add") }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw CommandFailure(.unexpected, "cannot make a pipe to the agent") }
        // The agent outlives us: it must not keep our caller's pipes (or the vault's files) open.
        ChildProcess.keepDescriptorsFromChildren()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc's 0x80), which Swift's Glibc module leaves out: no terminal, no SIGHUP.
        posix_spawnattr_setflags(&attributes, 0x80)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = ChildProcess.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(ends[1])
        defer { close(ends[0]) }
        guard spawned == 0 else { throw CommandFailure(.unexpected, "cannot start the agent (error \(spawned))") }
        // The child prints its lines once it listens (and keeps serving); end of file first means
        // it failed.
        var received = Data()
        var byte: UInt8 = 0
        let lines = Self.shellLines(path: path, pid: pid).filter { $0 == "\n" }.count
        while received.filter({ $0 == 10 }).count < lines, read(ends[0], &byte, 1) == 1 { received.append(byte) }
        guard !received.isEmpty else {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw CommandFailure(
                .unexpected, "the agent did not start (exit status \((status >> 8) & 0xFF))",
                hint: "run 'mystash ssh-agent --foreground' to see why")
        }
        Output.write(received)
    }

    /// The lines `eval` runs, as ssh-agent prints them for sh.
    static func shellLines(path: String, pid: pid_t) -> String {
        let safe = path.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@".contains($0) }
        let quoted = safe ? path : "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return "SSH_AUTH_SOCK=\(quoted); export SSH_AUTH_SOCK;\nSSH_AGENT_PID=\(pid); export SSH_AGENT_PID;\n"
            + "echo Agent pid \(pid);\n"
    }

    /// `$XDG_RUNTIME_DIR/mystash/ssh-agent.sock`, else a private directory of this user's in /tmp.
    static func defaultSocketPath() throws -> String {
        let base: String
        if let runtime = ProcessEnvironment.value("XDG_RUNTIME_DIR"), !runtime.isEmpty {
            base = runtime + "/mystash"
        } else {
            base = "/tmp/mystash-\(getuid())"
        }
        if mkdir(base, 0o700) != 0 && errno != EEXIST {
            throw CommandFailure(.cannotCreate, "cannot create '\(base)' (\(String(cString: strerror(errno))))")
        }
        var info = stat()
        guard lstat(base, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid(),
              info.st_mode & 0o077 == 0
        else {
            throw CommandFailure(.permission, "'\(base)' is not a private directory of yours",
                             hint: "remove it, or name a socket with --socket")
        }
        return base + "/ssh-agent.sock"
    }
}

/// The agent's socket and its clients, served one request at a time by one thread.
final class SSHAgentServer {
    private let listener: Int32
    private let path: String
    private let keys: AgentKeys
    private let agent: SSHAgent
    private var clients: [Int32: SSHAgent.FrameReader] = [:]
    /// The socket path, for the signal handler to remove.
    nonisolated(unsafe) private static var socketPath: UnsafeMutablePointer<CChar>?

    init(path: String, vaultDirectory: URL, confirm: Bool, allowAdd: Bool) throws {
        self.path = path
        keys = AgentKeys(vaultDirectory: vaultDirectory)
        listener = try Self.listen(at: path)
        let keys = keys
        agent = SSHAgent(
            identities: { keys.identities() },
            confirmSignature: confirm ? { identity in
                Terminal.confirm(
                    "Allow a signature with '\(Output.safe(identity.name))' (\(identity.key.fingerprint))?")
            } : nil,
            addKey: allowAdd ? { try keys.add($0) } : nil,
            report: { Terminal.printError("mystash ssh-agent: \(Output.safe($0))") })
    }

    /// Serves until SIGTERM, SIGINT or SIGHUP, which remove the socket.
    func serve() -> Never {
        Self.socketPath = strdup(path)
        for signalNumber in [SIGTERM, SIGINT, SIGHUP] {
            signal(signalNumber) { number in
                if let path = SSHAgentServer.socketPath { unlink(path) }
                _exit(128 + number)
            }
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var descriptors = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
                + clients.keys.sorted().map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            // Woken at least each second, to drop the keys soon after the session ends.
            let ready = poll(&descriptors, nfds_t(descriptors.count), 1_000)
            keys.dropIfLocked()
            guard ready > 0 else { continue }
            for descriptor in descriptors where descriptor.revents != 0 {
                if descriptor.fd == listener {
                    accept()
                } else {
                    serve(descriptor.fd, buffer: &buffer)
                }
            }
        }
    }

    private func accept() {
        let client = Glibc.accept(listener, nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        // Only this user (and root) may use the keys, whatever the socket's mode.
        var uid: UInt32 = 0
        guard ms_socket_peer_uid(client, &uid) == 0, uid == getuid() || uid == 0 else {
            Terminal.printError("mystash ssh-agent: refused a connection from another user (uid \(uid))")
            close(client)
            return
        }
        // A client that stops reading must not hold the agent up for long.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        clients[client] = SSHAgent.FrameReader()
    }

    private func serve(_ client: Int32, buffer: inout [UInt8]) {
        let count = read(client, &buffer, buffer.count)
        guard count > 0 else {
            if count == 0 || errno != EINTR { disconnect(client) }
            return
        }
        clients[client]?.append(buffer[0..<count])
        while let next = clients[client]?.next() {
            switch next {
            case .incomplete:
                return
            case .tooLarge:
                Terminal.printError("mystash ssh-agent: closed a connection that announced a message over "
                                    + "\(SSHAgent.maximumMessageSize) bytes")
                return disconnect(client)
            case .message(let request):
                guard send(SSHAgent.frame(agent.answer(to: request)), to: client) else { return disconnect(client) }
            }
        }
    }

    private func send(_ bytes: [UInt8], to client: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    private func disconnect(_ client: Int32) {
        close(client)
        clients[client] = nil
    }

    /// A listening socket at `path`, created with mode 0600. A socket left there by an agent that
    /// died is replaced; a live one, or a file of another kind, is not.
    private static func listen(at path: String) throws -> Int32 {
        var address = try claim(path)
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw CommandFailure(.unexpected, "cannot make a socket") }
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previous)
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(descriptor, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw CommandFailure(.cannotCreate, "cannot listen on '\(path)' (\(reason))",
                             hint: "check that its directory exists and is yours")
        }
        return descriptor
    }

    /// The address of `path`, once a socket an agent that died left there is removed.
    ///
    /// - throws: ``CommandFailure`` `.busy` when an agent listens there, `.cannotCreate` when it is
    ///   another kind of file, `.usage` when the path is too long for a socket.
    @discardableResult
    static func claim(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            throw CommandFailure(.usage, "the socket path '\(path)' is longer than \(capacity - 1) bytes",
                             hint: "choose a shorter path with --socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw CommandFailure(.cannotCreate, "'\(path)' exists and is not a socket",
                                     hint: "choose another --socket")
            }
            if connects(to: &address) {
                throw CommandFailure(.busy, "an agent is already listening on '\(path)'",
                                 hint: "stop it first, or choose another --socket")
            }
            unlink(path)
        }
        return address
    }

    private static func connects(to address: inout sockaddr_un) -> Bool {
        let probe = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}

/// The keys the agent serves: read from the vault while its session is unlocked, dropped (and
/// wiped, with the vault's data key) as soon as it is not.
final class AgentKeys {
    private let vaultDirectory: URL
    private var vault: Vault?
    private var loaded: [SSHAgent.Identity] = []
    private var vaultIdentifier: String?

    init(vaultDirectory: URL) { self.vaultDirectory = vaultDirectory }

    /// The keys of the vault now: read again at each request, so keys added or removed since
    /// are seen; none while it is locked.
    func identities() -> [SSHAgent.Identity] {
        guard let vault = unlockedVault() else { return [] }
        do {
            loaded = try vault.items.sshKeys().compactMap { entry in
                entry.key.map { SSHAgent.Identity(key: $0, comment: $0.comment.isEmpty ? entry.name : $0.comment,
                                                  name: entry.name) }
            }
        } catch {
            Terminal.printError("mystash ssh-agent: cannot read the keys: \(CommandFailure(error).message)")
            drop()
        }
        return loaded
    }

    /// Stores a key ssh-add sent, named by its comment (or fingerprint).
    func add(_ key: SSHPrivateKey) throws {
        guard let vault = unlockedVault() else {
            throw CommandFailure(.wrongPassword, "the vault is locked", hint: "run 'mystash unlock'")
        }
        let name = key.comment.isEmpty ? key.fingerprint : key.comment
        let taken = Set(try vault.items.names(of: .entries).map { $0.lowercased() })
        try vault.items.addSSHKey(key, name: taken.contains(name.lowercased()) ? "\(name) \(key.fingerprint)" : name)
    }

    /// Drops the keys and the vault once the session has ended.
    func dropIfLocked() {
        guard vault != nil, let identifier = vaultIdentifier else { return }
        if KeyringSession.load(vaultIdentifier: identifier) == nil { drop() }
    }

    private func drop() {
        if vault != nil { Terminal.printError("mystash ssh-agent: the vault is locked; its keys are dropped") }
        loaded = []
        vault = nil
    }

    /// A fresh unlocked vault while the session lasts (a vault open for long would not see
    /// other processes' changes), else nil.
    private func unlockedVault() -> Vault? {
        do {
            let opened = try Vault.open(at: vaultDirectory)
            vaultIdentifier = opened.identifier
            guard let session = KeyringSession.load(vaultIdentifier: opened.identifier),
                  try opened.unlock(session: session, verification: .immediate)
            else {
                drop()
                return nil
            }
            vault = opened
            return opened
        } catch {
            Terminal.printError("mystash ssh-agent: cannot open the vault: \(CommandFailure(error).message)")
            drop()
            return nil
        }
    }
}
