import Foundation
import XCTest

/// The README's console examples run as shown: each block in new homes (one per machine its
/// prompts name, `laptop$`), after the set-up its prose describes, and every command must print
/// what the block shows after it. What the block adds for the reader is left out of the
/// comparison: prompts (answered here by the environment and standard input) and notes after
/// two spaces and `#`.
final class ReadmeExampleTests: CLITestCase {
    struct Example {
        var machine: String
        var command: String
        var output: [String]
    }

    static var readme: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md")
            .standardizedFileURL
    }

    /// What a reader types at a password prompt in these examples (standard input here).
    static let typedPassword = "example-password"
    /// Where the sync examples keep their remote.
    static let remotePath = "/srv/git/vault.git"

    /// The README's console blocks, each a list of commands with the lines shown after them.
    static func consoleBlocks() throws -> [[Example]] {
        var blocks: [[Example]] = []
        var current: [Example]?
        for line in try String(contentsOf: readme, encoding: .utf8).components(separatedBy: "\n") {
            if line == "```console" {
                current = []
            } else if line == "```", let block = current {
                blocks.append(block)
                current = nil
            } else if current != nil {
                if let prompt = line.firstMatch(of: /^([a-z]*)\$ (.*)$/) {
                    current!.append(Example(machine: String(prompt.1), command: String(prompt.2), output: []))
                } else if !current!.isEmpty {
                    current![current!.count - 1].output.append(line)
                }
            }
        }
        return blocks
    }

    static func block(startingWith command: String) throws -> [Example] {
        let blocks = try consoleBlocks()
        return try XCTUnwrap(blocks.first { $0.first?.command.hasPrefix(command) == true },
                             "no console block in the README starts with '\(command)'")
    }

    func testEveryConsoleBlockIsRunByATest() throws {
        let run = ["mystash init", "git config --global credential.helper", "mystash health --breaches",
                   "mystash sync --remote", "mystash sync", "objectgraph info"]
        for block in try Self.consoleBlocks() {
            let first = try XCTUnwrap(block.first, "an empty console block").command
            XCTAssertTrue(run.contains { first.hasPrefix($0) }, "no test runs the console block starting '\(first)'")
        }
    }

    // MARK: - Running a block

    /// Each machine's home, named as the README names it.
    private var homes: [String: URL] = [:]
    private let readmeHomes = ["": "/home/ada", "laptop": "/home/ada", "desktop": "/home/bea"]
    private var remote: URL { home.appendingPathComponent("remote/vault.git") }

    private func home(of machine: String) throws -> URL {
        if let known = homes[machine] { return known }
        let made = machine.isEmpty ? home! : home.appendingPathComponent("machine-\(machine)")
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        homes[machine] = made
        return made
    }

    /// Runs `script` as `machine` in its home (or `directory`), a password on standard input.
    @discardableResult
    private func run(_ script: String, as machine: String = "", in directory: URL? = nil,
                     environment: [String: String] = [:]) throws -> Result {
        let machineHome = try home(of: machine)
        let place = directory ?? machineHome
        return try shell(
            "cd \(shellQuoted(place.path)) && {\n\(script)\n} 2>&1 <<'EOF'\n\(Self.typedPassword)\nEOF",
            environment: ["HOME": machineHome.path, "TZ": "UTC"].merging(environment) { $1 }, bash: true)
    }

    /// Set-up the README's prose describes: fails the test if it does not run.
    private func setUp(_ script: String, as machine: String = "", environment: [String: String] = [:]) throws {
        let result = try run(script, as: machine, environment: environment)
        XCTAssertEqual(result.status, 0, "set-up '\(script)' failed:\n\(result.stdout)")
    }

    /// Runs every command of `block`, each as its machine, and compares what it prints.
    private func check(_ block: [Example], in directory: URL? = nil, environment: [String: String] = [:]) throws {
        XCTAssertFalse(block.isEmpty)
        for example in block {
            let command = example.command.replacingOccurrences(of: Self.remotePath, with: remote.path)
            let result = try run(command, as: example.machine, in: directory, environment: environment)
            if command.hasPrefix("mystash unlock"), result.status != 0 {
                throw XCTSkip("no kernel keyring here for 'mystash unlock': \(result.stdout)")
            }
            var printed = result.stdout.components(separatedBy: "\n")
            if printed.last == "" { printed.removeLast() }
            var shown = example.output.map(withoutNote).filter { !isPrompt($0) }
            if let length = command.firstMatch(of: /--generate --length (\d+)/).flatMap({ Int($0.1) }) {
                // A generated password: any of that length where the block shows one.
                let password = "^\\S{\(length)}$"
                XCTAssertEqual(printed.filter { $0.range(of: password, options: .regularExpression) != nil }.count, 1,
                               result.stdout)
                printed = printed.map { $0.range(of: password, options: .regularExpression) == nil ? $0 : "<password>" }
                shown = shown.map { $0.range(of: password, options: .regularExpression) == nil ? $0 : "<password>" }
            }
            let (actual, expected) = (printed.map(normalized), shown.map(normalized))
            guard actual != expected else { continue }
            // The first line that differs, not the whole of a long output.
            let line = (0..<min(actual.count, expected.count)).first { actual[$0] != expected[$0] }
                ?? min(actual.count, expected.count)
            XCTFail("""
                \(example.machine)$ \(example.command) (exit \(result.status)): line \(line + 1) of \(actual.count) printed \
                differs from the README's \(expected.count):
                printed: \(actual.dropFirst(line).prefix(3))
                shown:   \(expected.dropFirst(line).prefix(3))
                """)
        }
    }

    /// A line as the block shows it, without the reader's note (two spaces, then `#`).
    private func withoutNote(_ line: String) -> String {
        line.replacingOccurrences(of: #"\s{2,}# .*$"#, with: "", options: .regularExpression)
    }

    private func isPrompt(_ line: String) -> Bool {
        ["New master password:", "Repeat the new master password:", "Password:", "Repeat the password:"]
            .contains(line) || (line.hasPrefix("Master password for ") && line.hasSuffix(":"))
    }

    /// What differs from run to run made the same on both sides: homes, the remote, dates, days
    /// since a date, scrypt's calibrated cost.
    private func normalized(_ line: String) -> String {
        var line = line.replacingOccurrences(of: remote.path, with: Self.remotePath)
        // Longest first: the machines' homes lie inside the test's own.
        for (machine, path) in homes.sorted(by: { $0.value.path.count > $1.value.path.count }) {
            line = line.replacingOccurrences(of: path.path, with: readmeHomes[machine] ?? path.path)
        }
        for (pattern, stand) in [
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"#, "<date>"), (#"\d{4}-\d\d-\d\d \d\d:\d\d"#, "<date>"),
            (#"(<date>\s+)\d+$"#, "$1<days>"), (#"2\^\d+"#, "2^<cost>"),
        ] {
            line = line.replacingOccurrences(of: pattern, with: stand, options: .regularExpression)
        }
        return line
    }

    // MARK: - The blocks

    func testTheTour() throws {
        let clipboard = try fakeClipboard()
        try check(try Self.block(startingWith: "mystash init"),
                  environment: ["PATH": clipboard.bin.path + ":/usr/local/bin:/usr/bin:/bin", "DISPLAY": ":99"])
        XCTAssertEqual(try String(contentsOf: clipboard.store, encoding: .utf8), Self.typedPassword)
    }

    func testGitCredentialHelper() throws {
        try setUp("mystash init --kdf-cost 10")
        try check(try Self.block(startingWith: "git config --global credential.helper"))
    }

    func testPasswordHealth() throws {
        // The vault the block reports on: a look-alike common password seen in a breach, two
        // entries sharing one, a password with a year, one set in 2019; a cheap scrypt cost.
        let entries: [[String: String]] = [
            ["name": "Mail", "password": "p@ssw0rd1"],
            ["name": "Bank", "password": "tiger-Quartz-81-violet"],
            ["name": "Shop", "password": "tiger-Quartz-81-violet"],
            ["name": "Router", "password": "monkey1987"],
            ["name": "Forum", "password": "Lw7#pQz!9vRt2&kM", "createdAt": "2019-03-04T05:06:00Z",
             "updatedAt": "2019-03-04T05:06:00Z"],
        ]
        let export: [String: Any] = [
            "format": "mystash-json", "version": 2, "categories": [String](), "notes": [Any](), "passwords": entries,
        ]
        try JSONSerialization.data(withJSONObject: export).write(to: home.appendingPathComponent("vault.json"))
        let pwned = home.appendingPathComponent("pwned")
        try FileManager.default.createDirectory(at: pwned, withIntermediateDirectories: true)
        let hash = try XCTUnwrap(run("printf %s p@ssw0rd1 | sha1sum").stdout.split(separator: " ").first).uppercased()
        try "\(hash.dropFirst(5)):3118\n".write(
            to: pwned.appendingPathComponent(String(hash.prefix(5))), atomically: true, encoding: .utf8)
        try setUp("mystash init --kdf-cost 10 && mystash import vault.json")
        try check(try Self.block(startingWith: "mystash health --breaches"))
    }

    func testTwoMachinesSyncAndMergeConflictingEdits() throws {
        try setUp("git init -q --bare \(shellQuoted(remote.path))")
        try setUp("""
            mystash init --kdf-cost 10
            mystash password add GitHub --user ada --url https://github.com --category "Web Site"
            echo "door code 4711" | mystash note add Office
            """, as: "laptop")
        let blocks = try Self.consoleBlocks()
        let first = try Self.block(startingWith: "mystash sync --remote")
        try check(first)
        // The prose between the blocks: the laptop changes GitHub's user ID and password and the
        // note, then the desktop the same password, the URL and the note.
        try setUp("""
            mystash password edit GitHub --user ada.lovelace --new-password <<<laptop-password
            echo "door code 4712" | mystash note edit Office
            """, as: "laptop")
        try setUp("""
            mystash password edit GitHub --url https://github.com/login --new-password <<<desktop-password
            echo "door code 0815" | mystash note edit Office
            """, as: "desktop")
        let next = try XCTUnwrap(blocks.firstIndex { $0.first?.command == first.first?.command }) + 1
        XCTAssertEqual(blocks[next].first?.command, "mystash sync")
        try check(blocks[next])
    }

    func testObjectgraphOnAppleWrittenStores() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../ObjectGraphTests/Fixtures/CoreData/wibosco-migration-example").standardizedFileURL
        let copy = home.appendingPathComponent("wibosco-migration-example")
        try FileManager.default.copyItem(at: fixture, to: copy)
        try check(try Self.block(startingWith: "objectgraph info"), in: copy)
    }
}
