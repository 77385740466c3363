import Foundation
import TestSupport
import XCTest

/// `mystash git-credential` as git's credential helper: the real `git` cloning and pushing
/// over HTTP from a loopback server that asks for Basic authentication, and `git credential
/// fill` for the matching rules.
final class GitCredentialTests: CLITestCase {
    static let user = "alice"
    static let password = "s3cret-Pa55"

    /// `git http-backend` behind Basic authentication, on a loopback port the server picks
    /// and prints once it listens.
    static let serverScript = #"""
    import base64, http.server, os, subprocess, sys

    root, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def serve(self):
            if self.headers.get("Authorization") != expected:
                sys.stderr.write(f"401 {self.command} {self.path}\n")
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
                   "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                   "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1",
                   "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                   "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "PATH": os.environ["PATH"]}
            output = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
            head, _, content = output.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode().split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            sys.stderr.write(f"{status} {self.command} {self.path}\n")
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = serve

        def log_message(self, *args):
            pass


    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """#

    private var server: Process?
    private var port = 0
    private var serverLog: URL { home.appendingPathComponent("server.log") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        for tool in ["/usr/bin/git", "/usr/bin/python3"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed (.ci/run installs it)")
        }
        try initVault()
        let gitConfig = """
        [user]
        \tname = Test
        \temail = test@example.com
        [init]
        \tdefaultBranch = main
        [credential]
        \thelper = !\(shellQuoted(Self.binary.path)) git-credential

        """
        try Data(gitConfig.utf8).write(to: home.appendingPathComponent(".gitconfig"))
    }

    override func tearDownWithError() throws {
        if let server, server.isRunning {
            server.terminate()
            server.waitUntilExit()
        }
        try super.tearDownWithError()
    }

    /// Starts the server over a new bare repository `repo.git`; returns once it printed its port.
    private func startServer() throws {
        let root = home.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try git(["init", "-q", "--bare", root.appendingPathComponent("repo.git").path])
        try git(["-C", root.appendingPathComponent("repo.git").path, "config", "http.receivepack", "true"])
        let script = home.appendingPathComponent("server.py")
        try Data(Self.serverScript.utf8).write(to: script)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, root.path, Self.user, Self.password]
        process.environment = baseEnvironment
        let output = Pipe()
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: serverLog.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: serverLog)
        try process.run()
        server = process
        // The first line is the port: the server listens before it prints it.
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line += byte
        }
        port = try XCTUnwrap(Int(String(decoding: line, as: UTF8.self)), "the server printed no port")
    }

    private var origin: String { "http://127.0.0.1:\(port)" }

    /// Runs git in the test HOME, never prompting: with no credential, it fails instead.
    @discardableResult
    private func git(_ arguments: [String], in directory: URL? = nil, stdin: String? = nil,
                     removing: [String] = []) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        var environment = baseEnvironment.merging(["GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"]) { $1 }
        removing.forEach { environment[$0] = nil }
        process.environment = environment
        process.currentDirectoryURL = directory ?? home
        return try execute(process, stdin: stdin)
    }

    private func entries() throws -> [[String: Any]] {
        try XCTUnwrap(try json(try runOK(["password", "list", "--json"]).stdout) as? [[String: Any]])
    }

    private func revealed(_ reference: String) throws -> [String: Any] {
        let shown = try runOK(["password", "show", reference, "--reveal", "--json"]).stdout
        return try XCTUnwrap(try json(shown) as? [String: Any])
    }

    private var serverStatuses: [String] {
        ((try? String(contentsOf: serverLog, encoding: .utf8)) ?? "").split(separator: "\n").map {
            String($0.prefix { $0 != " " })
        }
    }

    // MARK: - With a server

    func testCloneAndPushTakeTheCredentialFromTheVaultAndStoreNoDuplicate() throws {
        try startServer()
        try runOK(["password", "add", "build server", "--user", Self.user, "--url", origin + "/"],
                  stdin: Self.password + "\n")
        let clone = try git(["clone", origin + "/repo.git", "work"])
        XCTAssertEqual(clone.status, 0, clone.stderr)
        XCTAssertTrue(serverStatuses.contains("401"), "git never had to authenticate: \(serverStatuses)")
        let work = home.appendingPathComponent("work")
        try git(["commit", "-q", "--allow-empty", "-m", "first"], in: work)
        let push = try git(["push", "-q", "origin", "HEAD"], in: work)
        XCTAssertEqual(push.status, 0, push.stderr)
        // git approved the credential twice: the entry is the only one, unchanged.
        let list = try entries()
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(list.first?["name"] as? String, "build server")
        XCTAssertNil(try revealed("build server")["historyCount"])
        XCTAssertEqual(try git(["ls-remote", origin + "/repo.git"]).status, 0)
    }

    func testARefusedPasswordIsErasedIntoTheHistoryAndTheRightOneFillsTheSameEntry() throws {
        try startServer()
        try runOK(["password", "add", "build server", "--user", Self.user, "--url", origin],
                  stdin: "an-old-password\n")
        let clone = try git(["clone", origin + "/repo.git", "work"])
        XCTAssertNotEqual(clone.status, 0)
        XCTAssertTrue(clone.stderr.contains("cleared the refused password of entry 'build server'"), clone.stderr)
        let entry = try revealed("build server")
        XCTAssertEqual(entry["password"] as? String, "")
        XCTAssertEqual(entry["userId"] as? String, Self.user)
        let history = try runOK(["password", "history", "build server", "--reveal"]).stdout
        XCTAssertTrue(history.contains("an-old-password"), history)
        // An erased entry answers nothing: git asks (and, not allowed to, fails) without a 2nd try.
        let fill = try git(["credential", "fill"], stdin: "url=\(origin)/repo.git\n\n")
        XCTAssertNotEqual(fill.status, 0)
        XCTAssertFalse(fill.stdout.contains("password="), fill.stdout)
        // The right password, given once (here in the URL), fills the same entry again.
        let retry = try git(["clone", "-q", "http://\(Self.user):\(Self.password)@127.0.0.1:\(port)/repo.git", "work"])
        XCTAssertEqual(retry.status, 0, retry.stderr)
        XCTAssertTrue(retry.stderr.contains("stored the new password in entry 'build server'"), retry.stderr)
        XCTAssertEqual(try revealed("build server")["password"] as? String, Self.password)
        XCTAssertEqual(try entries().count, 1)
    }

    func testASuccessfulCloneWithTheCredentialInTheURLStoresItOnceAndLaterClonesUseIt() throws {
        try startServer()
        try runOK(["password", "add", "other site", "--user", "bob", "--url", "https://example.org"], stdin: "x\n")
        let withPassword = "http://\(Self.user):\(Self.password)@127.0.0.1:\(port)/repo.git"
        let first = try git(["clone", "-q", withPassword, "first"])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stderr.contains("stored the credential in new entry '127.0.0.1:\(port)'"), first.stderr)
        let stored = try revealed("127.0.0.1:\(port)")
        XCTAssertEqual(stored["password"] as? String, Self.password)
        XCTAssertEqual(stored["userId"] as? String, Self.user)
        XCTAssertEqual(stored["url"] as? String, origin)
        XCTAssertEqual(stored["category"] as? String, "Web Site")
        // Without the password in the URL, the vault answers; approving it again adds nothing.
        let second = try git(["clone", "-q", origin + "/repo.git", "second"])
        XCTAssertEqual(second.status, 0, second.stderr)
        let third = try git(["clone", "-q", "http://\(Self.user)@127.0.0.1:\(port)/repo.git", "third"])
        XCTAssertEqual(third.status, 0, third.stderr)
        XCTAssertEqual(try entries().count, 2)
    }

    func testAnUnlockedSessionServesGitWithoutAPassword() throws {
        try startServer()
        try runOK(["password", "add", "build server", "--user", Self.user, "--url", origin],
                  stdin: Self.password + "\n")
        let unlocked = try run(["unlock", "--timeout", "5m"])
        guard unlocked.status == 0 else { throw XCTSkip("no kernel keyring here: \(unlocked.stderr)") }
        defer { _ = try? run(["lock"]) }
        let clone = try git(["clone", "-q", origin + "/repo.git", "work"], removing: ["MYSTASH_PASSWORD"])
        XCTAssertEqual(clone.status, 0, clone.stderr)
    }

    // MARK: - Matching, through git credential fill

    private func fill(_ request: String, config: [String] = []) throws -> Result {
        try git(config + ["credential", "fill"], stdin: request + "\n\n")
    }

    func testFillMatchesProtocolHostPortPathAndUser() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com/"], stdin: "p1\n")
        try runOK(["password", "add", "forge team", "--user", "dave", "--url", "https://git.example.com/team"],
                  stdin: "p2\n")
        // More URLs come from imports: a Bitwarden login with two addresses.
        let export = """
        {"encrypted": false, "folders": [], "items": [{"type": 1, "name": "forge alt", "login": {"username": "erin",
         "password": "p3", "uris": [{"uri": "https://example.net"}, {"uri": "https://git.example.com:8443"}]}}]}
        """
        try runOK(["import", "--format", "bitwarden-json", "-"], stdin: export)
        try runOK(["password", "add", "plain http", "--user", "fay", "--url", "http://git.example.com"],
                  stdin: "p4\n")
        try runOK(["password", "add", "bare host", "--user", "gus", "--url", "Gitea.Example.org"], stdin: "p5\n")

        XCTAssertTrue(try fill("url=https://git.example.com/any.git").stdout.contains("username=carol\npassword=p1"))
        XCTAssertTrue(try fill("url=https://dave@git.example.com/x.git").stdout.contains("password=p2"))
        XCTAssertTrue(try fill("url=http://git.example.com/x.git").stdout.contains("username=fay\npassword=p4"))
        XCTAssertTrue(try fill("url=https://git.example.com:8443/x").stdout.contains("username=erin\npassword=p3"))
        // The default port is the same as none.
        XCTAssertTrue(try fill("url=https://git.example.com:443/x").stdout.contains("password=p1"))
        // A bare host, as exports hold them, serves http and https, in any case.
        XCTAssertTrue(try fill("url=https://gitea.example.org/x.git").stdout.contains("username=gus\npassword=p5"))
        XCTAssertTrue(try fill("url=http://GITEA.example.org/x.git").stdout.contains("username=gus\npassword=p5"))
        let usePath = ["-c", "credential.useHttpPath=true"]
        XCTAssertTrue(try fill("url=https://git.example.com/team/repo.git", config: usePath).stdout
            .contains("username=dave\npassword=p2"))
        XCTAssertTrue(try fill("url=https://git.example.com/other/repo.git", config: usePath).stdout
            .contains("username=carol\npassword=p1"))
        for unknown in ["url=https://nobody@git.example.com/", "url=https://git.example.org/",
                        "url=ftp://git.example.com/", "url=https://git.example.com:8080/",
                        "url=ssh://gitea.example.org/x.git"] {
            let result = try fill(unknown)
            XCTAssertNotEqual(result.status, 0, unknown)
            XCTAssertFalse(result.stdout.contains("password="), "\(unknown): \(result.stdout)")
        }
    }

    func testInstalledAsGitCredentialMystashItServesCredentialHelperMystash() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        let bin = home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            at: bin.appendingPathComponent("git-credential-mystash"), withDestinationURL: Self.binary)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-c", "credential.helper=", "-c", "credential.helper=mystash", "credential", "fill"]
        process.environment = baseEnvironment.merging(
            ["PATH": bin.path + ":" + baseEnvironment["PATH"]!, "GIT_TERMINAL_PROMPT": "0"]) { $1 }
        let result = try execute(process, stdin: "protocol=https\nhost=git.example.com\n\n")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("username=carol\npassword=p1"), result.stdout)
    }

    // MARK: - The helper alone

    func testBashCompletesTheActionsAndHealthsOptions() throws {
        func complete(_ words: [String]) throws -> String {
            let line = words.joined(separator: " ")
            let script = """
            eval "$(mystash --generate-completion-script bash)"
            COMP_WORDS=(\(words.map(shellQuoted).joined(separator: " "))); COMP_CWORD=\(words.count - 1)
            COMP_LINE=\(shellQuoted(line)); COMP_POINT=${#COMP_LINE}
            _mystash mystash \(shellQuoted(words.last!)) \(shellQuoted(words[words.count - 2]))
            printf '[%s]' "${COMPREPLY[@]}"
            """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", script]
            process.environment = baseEnvironment.merging(
                ["PATH": Self.binary.deletingLastPathComponent().path + ":" + baseEnvironment["PATH"]!]) { $1 }
            return try execute(process, stdin: nil).stdout
        }
        XCTAssertEqual(try complete(["mystash", "git-cr"]), "[git-credential]")
        XCTAssertEqual(try complete(["mystash", "git-credential", ""]), "[get][store][erase]")
        XCTAssertEqual(try complete(["mystash", "health", "--br"]), "[--breaches]")
    }

    func testNewerKeysAreIgnoredAndUnknownActionsDoNothing() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        let request = """
        capability[]=authtype
        capability[]=state
        protocol=https
        host=git.example.com
        wwwauth[]=Basic realm="forge"
        password_expiry_utc=1700000000
        oauth_refresh_token=abc
        state[]=x

        """
        let answer = try runOK(["git-credential", "get"], stdin: request)
        XCTAssertEqual(answer.stdout, "username=carol\npassword=p1\n")
        let unknown = try runOK(["git-credential", "frobnicate"], stdin: request)
        XCTAssertEqual(unknown.stdout, "")
        XCTAssertEqual(unknown.stderr, "")
    }

    func testMalformedRequestsAreRefusedWithStatus65AndNothingChanges() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        let cases: [(bytes: Data, message: String)] = [
            (Data("protocol=https\n\n".utf8), "names no host"),
            (Data("protocol=https\nhost=\n\n".utf8), "names no host"),
            (Data("protocol=https\nhost git.example.com\n\n".utf8), "line 2 of the credential request has no '='"),
            (Data("protocol=https\nhost=git.example.com\0\n\n".utf8), "has a NUL byte"),
            (Data("protocol=https\nhost=git.\u{FF}".utf8) + Data([0xFF, 0xFE, 0x0A]), "UTF-8"),
            // 3 MiB from a pipe the helper stops reading: its writer, not the test, meets the closed pipe.
            (Data(), "larger than 1048576 bytes"),
        ]
        for (bytes, message) in cases {
            for action in ["get", "store", "erase"] {
                let helper = process(["git-credential", action])
                if bytes.isEmpty {
                    let command = "head -c 3145728 /dev/zero | tr '\\0' a | exec \(shellQuoted(Self.binary.path)) "
                        + "git-credential \(action)"
                    helper.arguments = ["-c", command]
                    helper.executableURL = URL(fileURLWithPath: "/bin/sh")
                }
                let result = try execute(helper, bytes: bytes.isEmpty ? nil : bytes)
                XCTAssertEqual(result.status, 65, "\(action) \(message): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains(message), "\(action): \(result.stderr)")
                XCTAssertEqual(result.stdout, "")
            }
        }
        XCTAssertEqual(try revealed("forge")["password"] as? String, "p1")
        XCTAssertEqual(try entries().count, 1)
    }

    /// Requests cut, flipped and padded at random: each is answered (0) or refused (65), never a crash.
    func testRandomlyDamagedRequestsAreAnsweredOrRefusedNeverACrash() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        let valid = Array("protocol=https\nhost=git.example.com\nusername=carol\npath=a/b.git\n\n".utf8)
        let specials: [UInt8] = [0, 10, 13, 61, 0xFF, 0xC3, 0x80, 0xE2, 0x80, 0xAE]
        var random = SplitMix64(seed: 2024)
        var outcomes: [Int32: Int] = [:]
        for round in 0..<120 {
            var bytes = valid
            for _ in 0..<(1 + Int(random.next() % 6)) {
                let position = Int(random.next() % UInt64(bytes.count + 1))
                switch random.next() % 4 {
                case 0: bytes.insert(specials[Int(random.next() % UInt64(specials.count))], at: position)
                case 1 where position < bytes.count: bytes[position] = UInt8(truncatingIfNeeded: random.next())
                case 2: bytes = Array(bytes.prefix(position))
                default: bytes.insert(contentsOf: [UInt8](repeating: 61, count: Int(random.next() % 5000)), at: position)
                }
            }
            let result = try execute(process(["git-credential", "get"]), bytes: Data(bytes))
            XCTAssertTrue([0, 65].contains(result.status), "round \(round): \(result.status) \(result.stderr)")
            XCTAssertTrue(result.stdout.isEmpty || result.stdout == "username=carol\npassword=p1\n",
                          "round \(round): \(result.stdout)")
            outcomes[result.status, default: 0] += 1
        }
        // Both outcomes occur: the damage is neither always harmless nor always fatal.
        XCTAssertGreaterThan(outcomes[0] ?? 0, 5, "\(outcomes)")
        XCTAssertGreaterThan(outcomes[65] ?? 0, 5, "\(outcomes)")
    }

    func testALockedVaultWithoutATerminalSaysSoAndDoesNotPrompt() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        let result = try run(["git-credential", "get"], stdin: "protocol=https\nhost=git.example.com\n\n",
                             removing: ["MYSTASH_PASSWORD"])
        XCTAssertEqual(result.status, 77)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(result.stderr.contains("the vault is not unlocked"), result.stderr)
        // git goes on without it: here, not allowed to prompt, it fails.
        let fill = try git(["credential", "fill"], stdin: "protocol=https\nhost=git.example.com\n\n",
                           removing: ["MYSTASH_PASSWORD"])
        XCTAssertNotEqual(fill.status, 0)
        XCTAssertTrue(fill.stderr.contains("the vault is not unlocked"), fill.stderr)
    }

    func testALockedVaultAsksForTheMasterPasswordOnATerminal() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com"], stdin: "p1\n")
        var environment = baseEnvironment
        environment["MYSTASH_PASSWORD"] = nil
        let session = try TerminalSession(["git-credential", "get"], environment: environment)
        session.send("protocol=https")
        session.send("host=git.example.com")
        session.send("")
        session.expect("Master password for")
        session.send("pw")
        XCTAssertEqual(session.wait(), 0, session.transcript)
        XCTAssertTrue(session.transcript.contains("username=carol"), session.transcript)
    }

    func testStoreUpdatesTheMatchingEntryAndKeepsTheOldPasswordInItsHistory() throws {
        try runOK(["password", "add", "forge", "--user", "carol", "--url", "https://git.example.com/login"],
                  stdin: "old\n")
        let request = "protocol=https\nhost=git.example.com\nusername=carol\npassword=new\n\n"
        let stored = try runOK(["git-credential", "store"], stdin: request)
        XCTAssertTrue(stored.stderr.contains("stored the new password in entry 'forge'"), stored.stderr)
        XCTAssertEqual(try revealed("forge")["password"] as? String, "new")
        XCTAssertTrue(try runOK(["password", "history", "forge", "--reveal"]).stdout.contains("old"))
        // The same again writes nothing; another user of the host gets an entry of their own.
        XCTAssertEqual(try runOK(["git-credential", "store"], stdin: request).stderr, "")
        try runOK(["git-credential", "store"],
                  stdin: "protocol=https\nhost=git.example.com\nusername=dan\npassword=d\n\n")
        let names = try entries().compactMap { $0["name"] as? String }.sorted()
        XCTAssertEqual(names, ["forge", "git.example.com"])
        // An erase naming another password than the stored one leaves the entry alone.
        try runOK(["git-credential", "erase"],
                  stdin: "protocol=https\nhost=git.example.com\nusername=carol\npassword=stale\n\n")
        XCTAssertEqual(try revealed("forge")["password"] as? String, "new")
    }
}
