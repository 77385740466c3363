import Foundation
import MyStashKit
import StashPlatform
import XCTest

/// `mystash ssh` and `mystash ssh-agent` with the real OpenSSH tools: ssh-keygen makes the keys,
/// ssh-add lists and adds, `ssh-keygen -Y` signs and verifies, ssh logs in to a local sshd.
final class SSHAgentTests: CLITestCase {
    private var agents: [(session: TerminalSession, pid: pid_t)] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        for tool in ["ssh-keygen", "ssh-add", "ssh"] where ChildProcess.find(tool) == nil {
            throw XCTSkip("\(tool) is not installed (CI installs openssh-client)")
        }
        try initVault()
    }

    override func tearDownWithError() throws {
        for agent in agents {
            kill(agent.pid, SIGTERM)
            _ = agent.session.wait()
        }
        try super.tearDownWithError()
    }

    private var socketPath: String { home.appendingPathComponent("agent.sock").path }

    /// Makes a key with ssh-keygen in HOME; returns its path.
    @discardableResult
    private func keygen(_ name: String, _ type: String, bits: String? = nil, passphrase: String = "",
                        cipher: String? = nil) throws -> String {
        let path = home.appendingPathComponent(name).path
        var arguments = ["-q", "-t", type, "-N", passphrase, "-C", "\(name)@test", "-f", path]
        if let bits { arguments += ["-b", bits] }
        if let cipher { arguments += ["-Z", cipher] }
        try tool("ssh-keygen", arguments, expecting: 0)
        return path
    }

    /// Makes a key with ssh-keygen and moves it into the vault: only its public key stays on disk,
    /// so whatever signs with it afterwards is the agent.
    private func vaultKey(_ name: String, _ type: String, bits: String? = nil) throws {
        let path = try keygen(name, type, bits: bits)
        try runOK(["ssh", "add", name, path])
        try FileManager.default.removeItem(atPath: path)
    }

    /// Runs an OpenSSH tool with SSH_AUTH_SOCK pointing at the test's agent.
    @discardableResult
    private func tool(_ name: String, _ arguments: [String], stdin: String? = nil, expecting status: Int32? = nil,
                      file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try XCTUnwrap(ChildProcess.find(name)))
        process.arguments = arguments
        process.environment = ["HOME": home.path, "PATH": "/usr/bin:/bin", "SSH_AUTH_SOCK": socketPath]
        let result = try execute(process, stdin: stdin)
        if let status {
            XCTAssertEqual(result.status, status, "\(name) \(arguments): \(result.stderr)", file: file, line: line)
        }
        return result
    }

    /// Starts `ssh-agent --foreground` on a terminal, once it has printed its lines.
    @discardableResult
    private func startAgent(_ options: [String] = []) throws -> TerminalSession {
        var environment = baseEnvironment
        environment["MYSTASH_PASSWORD"] = nil
        let session = try TerminalSession(["ssh-agent", "--foreground", "--socket", socketPath] + options,
                                          environment: environment)
        session.expect("echo Agent pid")
        let transcript = session.transcript
        let pidText = try XCTUnwrap(transcript.components(separatedBy: "SSH_AGENT_PID=").dropFirst().first?
            .prefix { $0.isNumber })
        XCTAssertTrue(transcript.contains("SSH_AUTH_SOCK=\(socketPath); export SSH_AUTH_SOCK;"), transcript)
        agents.append((session, try XCTUnwrap(pid_t(pidText))))
        return session
    }

    private func unlock() throws {
        guard try run(["unlock", "--timeout", "10m"]).status == 0 else { throw XCTSkip("no kernel keyring here") }
    }

    /// Every key type, plain and encrypted (aes256-ctr and aes256-gcm): stored with the fingerprint
    /// and public key ssh-keygen gives, listed by ssh-add, and signing what `ssh-keygen -Y verify` accepts.
    func testEveryKeyTypeIsStoredListedAndSignsForSSHKeygen() throws {
        let kinds: [(String, String, String?)] = [
            ("ed", "ed25519", nil), ("p256", "ecdsa", "256"), ("p384", "ecdsa", "384"), ("p521", "ecdsa", "521"),
            ("rsa", "rsa", "2048"),
        ]
        var names: [String] = []
        for (name, type, bits) in kinds {
            try keygen(name, type, bits: bits)
            try keygen("\(name)-ctr", type, bits: bits, passphrase: "pass phrase")
            try keygen("\(name)-gcm", type, bits: bits, passphrase: "pass phrase", cipher: "aes256-gcm@openssh.com")
            names += [name, "\(name)-ctr", "\(name)-gcm"]
        }
        for name in names {
            let path = home.appendingPathComponent(name).path
            let added = try runOK(["ssh", "add", name, path], environment: ["MYSTASH_SSH_PASSPHRASE": "pass phrase"])
            let fingerprint = try tool("ssh-keygen", ["-l", "-f", path + ".pub"], expecting: 0).stdout
            XCTAssertEqual(added.stderr, "Added SSH key '\(name)' (#\(names.firstIndex(of: name)! + 1)): "
                           + fingerprint.trimmingCharacters(in: .newlines) + ".\n")
            XCTAssertEqual(try runOK(["ssh", "export-public", name]).stdout, try String(contentsOfFile: path + ".pub"))
        }
        let privateKey = try String(contentsOfFile: home.appendingPathComponent("ed").path)
        for name in names { try FileManager.default.removeItem(atPath: home.appendingPathComponent(name).path) }
        let listed = try XCTUnwrap(try json(try runOK(["ssh", "list", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(listed.map { $0["name"] as? String }, names.sorted())
        // The private key is kept only encrypted: neither store holds it, or its public key, in plaintext.
        let body = privateKey.split(separator: "\n")[1]
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let bytes = try Data(contentsOf: vaultDirectory.appendingPathComponent(store))
            XCTAssertNil(bytes.range(of: Data(body.utf8)), store)
            XCTAssertNil(bytes.range(of: Data("ed@test".utf8)), store)
        }

        try unlock()
        try startAgent()
        let expected = try names.map { try tool("ssh-keygen", ["-l", "-f", home.path + "/\($0).pub"]).stdout }
        XCTAssertEqual(Set(try tool("ssh-add", ["-l"], expecting: 0).stdout.split(separator: "\n").map(String.init)),
                       Set(expected.joined().split(separator: "\n").map(String.init)))
        let publicKeys = try tool("ssh-add", ["-L"], expecting: 0).stdout
        let message = home.appendingPathComponent("message").path
        try "a message to sign\n".write(toFile: message, atomically: false, encoding: .utf8)
        for name in names {
            let publicKey = try String(contentsOfFile: home.path + "/\(name).pub")
            XCTAssertTrue(publicKeys.contains(publicKey), name)
            // -Y sign with only the public key file: the private key comes from the agent.
            try tool("ssh-keygen", ["-Y", "sign", "-f", home.path + "/\(name).pub", "-n", "file", message],
                     expecting: 0)
            let signers = home.appendingPathComponent("allowed").path
            try "\(name)@test \(publicKey)".write(toFile: signers, atomically: false, encoding: .utf8)
            let verified = try tool("ssh-keygen", ["-Y", "verify", "-f", signers, "-I", "\(name)@test", "-n", "file",
                                                   "-s", message + ".sig"], stdin: "a message to sign\n", expecting: 0)
            XCTAssertTrue(verified.stdout.hasPrefix("Good \"file\" signature for \(name)@test"), verified.stdout)
            // The same signature does not verify another message.
            try tool("ssh-keygen", ["-Y", "verify", "-f", signers, "-I", "\(name)@test", "-n", "file",
                                    "-s", message + ".sig"], stdin: "another message\n", expecting: 255)
            try FileManager.default.removeItem(atPath: message + ".sig")
        }
    }

    func testAWrongOrMissingPassphraseStoresNothing() throws {
        let path = try keygen("enc", "ed25519", passphrase: "right")
        let wrong = try run(["ssh", "add", "enc", path], environment: ["MYSTASH_SSH_PASSPHRASE": "wrong"])
        XCTAssertEqual(wrong.status, 77)
        XCTAssertEqual(
            wrong.stderr, "Error: wrong passphrase for the key\nhint: type the passphrase the key was saved with\n")
        let none = try run(["ssh", "add", "enc", path])
        XCTAssertEqual(none.status, 64)
        XCTAssertTrue(none.stderr.contains("no terminal to ask for its passphrase"), none.stderr)
        let publicKey = try run(["ssh", "add", "enc", path + ".pub"])
        XCTAssertEqual(publicKey.status, 65)
        XCTAssertTrue(publicKey.stderr.contains("this is a public key"), publicKey.stderr)
        XCTAssertEqual(try runOK(["ssh", "list"]).stderr, "No SSH keys; add one with 'mystash ssh add NAME KEYFILE'.\n")
        // On a terminal, the passphrase is asked for.
        let session = try TerminalSession(["ssh", "add", "enc", path], environment: baseEnvironment)
        session.expect("Enter passphrase for \(path): ")
        session.send("right")
        XCTAssertEqual(session.wait(), 0, session.transcript)
        XCTAssertEqual(try runOK(["ssh", "export-public", "enc"]).stdout, try String(contentsOfFile: path + ".pub"))
    }

    /// Locking the session makes the agent list no keys and sign nothing; unlocking brings them back.
    func testExportPublicCompletesSSHKeyNamesOnly() throws {
        try vaultKey("laptop key", "ed25519")
        try runOK(["password", "add", "laptop login"], stdin: "pw")
        try unlock()
        let query = ["---completion", "ssh", "export-public", "--", "positional@0", "3", "2", "mystash", "ssh",
                     "export-public", "lap"]
        XCTAssertEqual(try run(query).stdout, "laptop key\n")
    }

    /// A key attached to a KeePassXC entry (encrypted, its passphrase the entry's password, as
    /// KeePassXC's agent keeps it) and a Bitwarden SSH key item land as `ssh add` stores keys.
    func testImportedKeysFromKeePassXCAndBitwardenAreServedLikeAddedOnes() throws {
        guard let keepassxc = ChildProcess.find("keepassxc-cli") else {
            throw XCTSkip("keepassxc-cli is not installed (CI installs keepassxc)")
        }
        let attached = try keygen("attached", "ed25519", passphrase: "entry password")
        let database = home.appendingPathComponent("keys.kdbx").path
        for (arguments, input) in [
            (["db-create", "-p", database], "pw\npw\n"),
            (["add", "-p", database, "deploy", "-u", "git"], "pw\nentry password\n"),
            (["attachment-import", database, "deploy", "id_ed25519", attached], "pw\n"),
        ] {
            let result = try XCTUnwrap(ChildProcess.execute([keepassxc] + arguments, input: Data(input.utf8)))
            XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
        }
        let exported = try XCTUnwrap(ChildProcess.execute([keepassxc, "export", "-f", "xml", database],
                                                          input: Data("pw\n".utf8)))
        let xml = home.appendingPathComponent("keys.xml")
        try exported.output.write(to: xml)
        try runOK(["import", "--format", "keepassxc-xml", xml.path])

        let itemKey = try keygen("item", "ecdsa", bits: "256")
        let item: [String: Any] = [
            "type": 5, "name": "build server",
            "sshKey": ["privateKey": try String(contentsOfFile: itemKey), "publicKey": "ssh-ecdsa AAAA-stale",
                       "keyFingerprint": "SHA256:stale"],
        ]
        let export = home.appendingPathComponent("bitwarden.json")
        try JSONSerialization.data(withJSONObject: ["encrypted": false, "items": [item]]).write(to: export)
        try runOK(["import", "--format", "bitwarden-json", export.path])
        // The same files again change nothing: a key is kept as the same text each time.
        for (format, path) in [("keepassxc-xml", xml.path), ("bitwarden-json", export.path)] {
            let again = try runOK(["import", "--dry-run", "--format", format, path]).stderr
            XCTAssertTrue(again.contains("would update 0;"), again)
        }
        for path in [attached, itemKey] { try FileManager.default.removeItem(atPath: path) }

        let keys = try XCTUnwrap(try json(try runOK(["ssh", "list", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(keys.map { $0["name"] as? String }, ["build server", "deploy"])
        for (name, path) in [("build server", itemKey), ("deploy", attached)] {
            let shown = try runOK(["password", "show", name, "--json"]).stdout
            let entry = try XCTUnwrap(try json(shown) as? [String: Any])
            XCTAssertEqual(entry["category"] as? String, "SSH Key")
            XCTAssertEqual(try runOK(["ssh", "export-public", name]).stdout, try String(contentsOfFile: path + ".pub"))
        }
        try unlock()
        try startAgent()
        let listed = try tool("ssh-add", ["-l"], expecting: 0).stdout
        for path in [attached, itemKey] {
            XCTAssertTrue(listed.contains(try tool("ssh-keygen", ["-l", "-f", path + ".pub"]).stdout), listed)
        }
    }

    func testLockingTheSessionHidesTheKeysUntilUnlocked() throws {
        try vaultKey("work", "ed25519")
        let path = home.appendingPathComponent("work").path
        try unlock()
        let agent = try startAgent()
        XCTAssertTrue(try tool("ssh-add", ["-l"], expecting: 0).stdout.contains("work@test (ED25519)"))
        try runOK(["lock"])
        // The agent notices within a second, without a request, and drops the keys.
        agent.expect("the vault is locked; its keys are dropped")
        let listed = try tool("ssh-add", ["-l"], expecting: 1)
        XCTAssertEqual(listed.stdout, "The agent has no identities.\n")
        let message = home.appendingPathComponent("message").path
        try "text".write(toFile: message, atomically: false, encoding: .utf8)
        try tool("ssh-keygen", ["-Y", "sign", "-f", path + ".pub", "-n", "file", message], expecting: 255)
        try unlock()
        XCTAssertTrue(try tool("ssh-add", ["-l"], expecting: 0).stdout.contains("work@test (ED25519)"))
    }

    func testSSHLogsInToALocalSSHDWithEachKindOfVaultKey() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd") else {
            throw XCTSkip("sshd is not installed (CI installs openssh-server)")
        }
        for (name, type, bits) in [("ed", "ed25519", nil), ("ec", "ecdsa", "384"), ("rsa", "rsa", "3072")] {
            try vaultKey(name, type, bits: bits)
        }
        try unlock()
        let agent = try startAgent()
        let sshd = try LocalSSHD(home: home)
        defer { sshd.stop() }
        let user = String(cString: getpwuid(getuid()).pointee.pw_name)
        for (index, name) in ["ed", "ec", "rsa"].enumerated() {
            // Only this key is authorized: ssh offers each key of the agent until the server accepts one.
            try runOK(["ssh", "export-public", name]).stdout.write(to: sshd.authorizedKeys, atomically: false,
                                                                     encoding: .utf8)
            let login = try tool(
                "ssh", ["-F", "/dev/null", "-p", String(sshd.port), "-o", "StrictHostKeyChecking=no",
                        "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no",
                        "-o", "LogLevel=ERROR", "\(user)@127.0.0.1", "echo logged in with a vault key"],
                expecting: 0)
            XCTAssertEqual(login.stdout, "logged in with a vault key\n")
            agent.expect("signed with '\(name)'", times: 1)
            XCTAssertEqual(agent.transcript.components(separatedBy: "signed with").count - 1, index + 1)
        }
    }

    func testAddingAndRemovingAreRefusedUnlessAddingIsAllowed() throws {
        try vaultKey("stored", "ed25519")
        let stored = home.appendingPathComponent("stored").path
        let extra = try keygen("extra", "ecdsa", bits: "256")
        try unlock()
        let agent = try startAgent()
        XCTAssertEqual(try tool("ssh-add", [extra]).status, 1)
        XCTAssertEqual(try tool("ssh-add", ["-d", stored + ".pub"]).status, 1)
        XCTAssertEqual(try tool("ssh-add", ["-D"]).status, 1)
        XCTAssertEqual(try tool("ssh-add", ["-x"], stdin: nil).status, 1)
        agent.expect("refused to add a key")
        agent.expect("refused to remove keys")
        XCTAssertEqual(try tool("ssh-add", ["-l"], expecting: 0).stdout.split(separator: "\n").count, 1)
        kill(agents.removeLast().pid, SIGTERM)
        _ = agent.wait()

        let allowing = try startAgent(["--allow-add"])
        try tool("ssh-add", [extra], expecting: 0)
        allowing.expect("added SHA256:")
        let keys = try XCTUnwrap(try json(try runOK(["ssh", "list", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(keys.map { $0["name"] as? String }, ["extra@test", "stored"])
        XCTAssertEqual(try runOK(["ssh", "export-public", "extra@test"]).stdout,
                       try String(contentsOfFile: extra + ".pub"))
        // A lifetime cannot be kept for a key stored in the vault: refused.
        let timed = try keygen("timed", "ed25519")
        XCTAssertEqual(try tool("ssh-add", ["-t", "60", timed]).status, 1)
        XCTAssertEqual(try tool("ssh-add", ["-l"], expecting: 0).stdout.split(separator: "\n").count, 2)
    }

    func testConfirmAsksOnTheTerminalBeforeEachSignature() throws {
        try vaultKey("asked", "ed25519")
        let path = home.appendingPathComponent("asked").path
        try unlock()
        let agent = try startAgent(["--confirm"])
        let message = home.appendingPathComponent("message").path
        try "text".write(toFile: message, atomically: false, encoding: .utf8)
        for (answer, status) in [("n", Int32(255)), ("y", 0)] {
            let signing = Process()
            signing.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-keygen")
            signing.arguments = ["-Y", "sign", "-f", path + ".pub", "-n", "file", message]
            signing.environment = ["HOME": home.path, "SSH_AUTH_SOCK": socketPath]
            signing.standardOutput = FileHandle.nullDevice
            signing.standardError = FileHandle.nullDevice
            try signing.run()
            agent.expect("Allow a signature with 'asked'", times: answer == "n" ? 1 : 2)
            agent.send(answer)
            signing.waitUntilExit()
            XCTAssertEqual(signing.terminationStatus, status, "answered \(answer)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: message + ".sig"))
        agent.expect("not confirmed")
    }

    /// A frame announcing more than the limit ends the connection; a cut frame is waited for;
    /// the agent serves the next client either way. Its socket is the user's alone.
    func testOversizedAndCutFramesDoNotStopTheAgent() throws {
        try vaultKey("k", "ed25519")
        try unlock()
        let agent = try startAgent()
        var info = stat()
        XCTAssertEqual(lstat(socketPath, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        for bytes: [UInt8] in [[0xFF, 0xFF, 0xFF, 0xFF, 11], [0x00, 0x04, 0x00, 0x01], [0, 0, 0, 9, 13, 0, 0]] {
            let client = try connectToAgent()
            defer { close(client) }
            _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if bytes[0] == 0xFF || bytes[1] == 0x04 {
                var byte: UInt8 = 0
                XCTAssertEqual(read(client, &byte, 1), 0, "the agent closes the connection")
            }
        }
        agent.expect("closed a connection that announced a message over 262144 bytes")
        // A complete but meaningless request gets the failure answer on an open connection.
        let client = try connectToAgent()
        defer { close(client) }
        let request: [UInt8] = [0, 0, 0, 3, 13, 0, 0]
        _ = request.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        var answer = [UInt8](repeating: 0, count: 5)
        XCTAssertEqual(read(client, &answer, 5), 5)
        XCTAssertEqual(answer, [0, 0, 0, 1, 5])
        XCTAssertTrue(try tool("ssh-add", ["-l"], expecting: 0).stdout.contains("k@test"))
    }

    func testInTheBackgroundItPrintsTheLinesForEval() throws {
        let started = try runOK(["ssh-agent", "--socket", socketPath])
        let pidLine = try XCTUnwrap(started.stdout.split(separator: "\n").dropFirst().first)
        let pid = try XCTUnwrap(pid_t(pidLine.dropFirst("SSH_AGENT_PID=".count).prefix { $0.isNumber }))
        defer { kill(pid, SIGTERM) }
        XCTAssertEqual(started.stdout, """
            SSH_AUTH_SOCK=\(socketPath); export SSH_AUTH_SOCK;
            SSH_AGENT_PID=\(pid); export SSH_AGENT_PID;
            echo Agent pid \(pid);

            """)
        // Locked (no session): listed, but no keys.
        XCTAssertEqual(try tool("ssh-add", ["-l"], expecting: 1).stdout, "The agent has no identities.\n")
        let again = try run(["ssh-agent", "--socket", socketPath])
        XCTAssertEqual(again.status, 75)
        XCTAssertTrue(again.stderr.contains("an agent is already listening on '\(socketPath)'"), again.stderr)
        let confirmWithoutForeground = try run(["ssh-agent", "--confirm"])
        XCTAssertEqual(confirmWithoutForeground.status, 64)
    }

    private func connectToAgent() throws -> Int32 {
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socketPath.utf8.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(connected, 0)
        return client
    }
}

struct SSHDFailure: Error {
    var output: String
}

/// sshd on a free loopback port, run as the current user (or root, in CI) with its own host
/// key and an authorized_keys file in the test's HOME.
final class LocalSSHD {
    let port: Int
    let authorizedKeys: URL
    private var pid: pid_t = 0
    private var errors: Int32 = -1

    init(home: URL) throws {
        authorizedKeys = home.appendingPathComponent("authorized_keys")
        try Data().write(to: authorizedKeys)
        let hostKey = home.appendingPathComponent("host_key").path
        guard ChildProcess.execute(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey])?.status == 0 else {
            throw SSHDFailure(output: "ssh-keygen could not make a host key")
        }
        port = try Self.freePort()
        let config = home.appendingPathComponent("sshd_config")
        try """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(hostKey)
            AuthorizedKeysFile \(authorizedKeys.path)
            StrictModes no
            PidFile none
            UsePAM no
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            PubkeyAuthentication yes
            PermitRootLogin prohibit-password

            """.write(to: config, atomically: false, encoding: .utf8)
        // As root, sshd wants its privilege separation directory.
        if getuid() == 0 {
            try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        }
        // Spawned and reaped directly: Foundation's Process, waiting on a daemon that outlives
        // the commands run after it, held up their ends.
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SSHDFailure(output: "no pipe") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        errors = ends[0]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
        let words: [String] = ["/usr/sbin/sshd", "-D", "-e", "-f", config.path]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let spawned = posix_spawn(&pid, "/usr/sbin/sshd", &actions, nil, argv, environ)
        close(ends[1])
        guard spawned == 0 else { throw SSHDFailure(output: "posix_spawn: \(spawned)") }
        // Ready once it says it listens; its later lines wait in the pipe, which stays open.
        var said = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !said.contains("Server listening on 127.0.0.1 port \(port)") {
            let count = read(errors, &buffer, buffer.count)
            guard count > 0 else { throw SSHDFailure(output: said) }
            said += String(decoding: buffer[0..<count], as: UTF8.self)
        }
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(errors)
    }

    /// A port the kernel says is free now.
    private static func freePort() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, length) == 0 && getsockname(probe, $0, &length) == 0
            }
        }
        guard bound else { throw XCTSkip("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
