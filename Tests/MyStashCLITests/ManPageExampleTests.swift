import Foundation
import XCTest

/// The man page says what the program does: its EXAMPLES are run, one after the other in one
/// vault, and must print what the page shows; its SYNOPSIS names every command and alias.
final class ManPageExampleTests: CLITestCase {
    static var manPage: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../man/mystash.1")
            .standardizedFileURL
    }

    /// The page's text in a section, as roff source with its escapes for `-` and `\` undone.
    func section(_ name: String) throws -> [String] {
        let lines = try String(contentsOf: Self.manPage, encoding: .utf8).components(separatedBy: "\n")
        let start = try XCTUnwrap(lines.firstIndex(of: ".SH \(name)"), "no section \(name)") + 1
        let end = lines[start...].firstIndex { $0.hasPrefix(".SH ") } ?? lines.count
        return lines[start..<end].map {
            $0.replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\e", with: "\\")
        }
    }

    /// What varies from run to run, made the same on both sides: the home directory, dates,
    /// the calibrated scrypt cost.
    func normalized(_ line: String) -> String {
        var line = line.replacingOccurrences(of: home.path, with: "/home/ada")
        for (pattern, stand) in [
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"#, "<date>"), (#"\d{4}-\d\d-\d\d \d\d:\d\d"#, "<date>"),
            (#"N=2\^\d+"#, "N=2^<cost>"),
        ] {
            line = line.replacingOccurrences(of: pattern, with: stand, options: .regularExpression)
        }
        return line
    }

    /// Prompts go to the terminal, which these runs have not: the environment answers them.
    func isPrompt(_ line: String) -> Bool {
        ["New master password:", "Repeat the new master password:", "Password:", "Repeat the password:"]
            .contains(line) || (line.hasPrefix("Master password for ") && line.hasSuffix(":"))
    }

    func testEveryExampleRunsAndPrintsWhatThePageShows() throws {
        let body = try section("EXAMPLES")
        let start = try XCTUnwrap(body.firstIndex(of: ".nf")) + 1
        let end = try XCTUnwrap(body.firstIndex(of: ".fi"))
        var examples: [(command: String, output: [String])] = []
        for line in body[start..<end] {
            if line.hasPrefix("$ ") {
                examples.append((String(line.dropFirst(2)), []))
            } else {
                examples[examples.count - 1].output.append(line)
            }
        }
        XCTAssertGreaterThan(examples.count, 10)
        let work = home.appendingPathComponent("work")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { _ = try? run(["lock"]) }
        for (command, output) in examples {
            // Standard input, for a command that reads a password from it, is a pipe here.
            let result = try shell(
                "cd \(shellQuoted(work.path)) && {\n\(command)\n} 2>&1 <<'EOF'\nexample-password\nEOF",
                bash: true)
            if command.hasPrefix("mystash unlock"), result.status != 0 {
                throw XCTSkip("no kernel keyring here for 'mystash unlock': \(result.stdout)")
            }
            var printed = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if printed.last == "" { printed.removeLast() }
            var shown = output.filter { !isPrompt($0) }
            if let words = command.firstMatch(of: /^mystash generate --words (\d+)$/).flatMap({ Int($0.1) }),
                let first = printed.first
            {
                // Random words: the page shows as many as were asked for.
                let pattern = "^[a-z-]+( [a-z-]+){\(words - 1)}$"
                XCTAssertNotNil(first.range(of: pattern, options: .regularExpression), first)
                XCTAssertNotNil(shown.first?.range(of: pattern, options: .regularExpression), "the page's words")
                printed[0] = "<words>"
                shown[0] = "<words>"
            }
            XCTAssertEqual(
                printed.map(normalized), shown.map(normalized),
                "'\(command)' (exit \(result.status)) printed:\n\(result.stdout)")
        }
    }

    func testTheSynopsisNamesEveryCommandAndAlias() throws {
        let dump = try runOK(["--experimental-dump-help"]).stdout
        let root = try XCTUnwrap(try json(dump) as? [String: Any])["command"] as? [String: Any]
        let synopsis = try section("SYNOPSIS").joined(separator: " ")
        // The words of the synopsis, whatever roff puts between them.
        let words = Set(synopsis.split { " {}|/\"[]".contains($0) }.map(String.init))
        var checked = 0
        func walk(_ command: [String: Any]) {
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                guard sub["shouldDisplay"] as? Bool != false, let name = sub["commandName"] as? String, name != "help"
                else { continue }
                for word in [name] + (sub["aliases"] as? [String] ?? []) {
                    XCTAssertTrue(words.contains(word), "the SYNOPSIS lacks '\(word)'")
                    checked += 1
                }
                walk(sub)
            }
        }
        walk(try XCTUnwrap(root))
        XCTAssertGreaterThan(checked, 40)
    }
}
