import Foundation
import XCTest

/// Rules about the source text itself that the compiler cannot check: nothing above ObjectGraph
/// classifies an error by SQLite's numbers or by its message text, and no line in Sources/ is over
/// 120 characters.
final class SourceRulesTests: XCTestCase {
    static let sourcesURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources").standardizedFileURL
    /// The targets that reach the store only through ObjectGraph's typed errors.
    static let aboveObjectGraph = ["MyStashKit", "mystash", "objectgraph", "stash-bench"]
    static let maximumLineLength = 120

    /// Patterns that classify an error by number or by text, each with a line it must catch.
    static let forbidden: [(pattern: String, why: String, examples: [String])] = [
        (#"\b(sqliteResultCode|resultCode|extendedResultCode|ResultCode|DatabaseError)\b"#,
         "SQLite's result codes stay inside ObjectGraph: match ObjectGraphError.storeFailure",
         ["switch error.sqliteResultCode {", "(underlyingError as? DatabaseError)?.resultCode"]),
        (#"\bSQLITE_(BUSY|LOCKED|FULL|READONLY|PERM|AUTH|CORRUPT|NOTADB|CANTOPEN|CONSTRAINT|IOERR|ERROR)\b"#,
         "SQLite's result codes stay inside ObjectGraph: match ObjectGraphError.storeFailure",
         ["if code == SQLITE_BUSY {"]),
        (#"\b(isBusy|code|rawValue|Code)\b\s*(==|!=|~=)\s*-?\d"#,
         "an error's code is matched by name, never by number",
         ["if error.code.rawValue == 134060 {", "where code == 5 || code == 6"]),
        (#"Code\(rawValue:\s*\d"#,
         "error codes are defined in ObjectGraph's ErrorCodes.swift",
         ["let code = ObjectGraphError.Code(rawValue: 134080)"]),
        (#"\b(message|description|localizedDescription|debugDescription|hint|details|reason)\b[\w.!?\[\]]*"#
            + #"\s*\.\s*(contains|hasPrefix|hasSuffix|starts|range|firstRange|components)\("#,
         "an error is classified by its type, code or storeFailure, never by its text",
         [#"where error.message.contains("does not exist")"#, #"message.range(of: "row \(row): ")"#]),
        (#"(\"\\\((error|failure)\)\"|String\(describing: *(error|failure)\))"#
            + #"\s*\.\s*(contains|hasPrefix|hasSuffix|range)\("#,
         "an error is classified by its type, code or storeFailure, never by its text",
         [#"if "\(error)".contains("locked") {"#, #"String(describing: error).hasPrefix("SQLite")"#]),
    ]

    static func swiftFiles(under folder: URL) -> [URL] {
        (FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? [])
            .filter { $0.pathExtension == "swift" }.sorted { $0.path < $1.path }
    }

    func testEachRuleCatchesItsExample() throws {
        for rule in Self.forbidden {
            let regex = try NSRegularExpression(pattern: rule.pattern)
            for line in rule.examples {
                XCTAssertNotNil(regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)), line)
            }
        }
    }

    func testNothingAboveObjectGraphMatchesSQLiteCodesOrErrorText() throws {
        let rules = try Self.forbidden.map { (try NSRegularExpression(pattern: $0.pattern), $0.why) }
        var checked = 0
        var violations: [String] = []
        for target in Self.aboveObjectGraph {
            for file in Self.swiftFiles(under: Self.sourcesURL.appendingPathComponent(target)) {
                checked += 1
                let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
                for (number, line) in lines.enumerated()
                where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    for (regex, why) in rules
                    where regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                        violations.append("\(target)/\(file.lastPathComponent):\(number + 1): \(why)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 30, "the sources were found at \(Self.sourcesURL.path)")
        XCTAssertEqual(violations, [])
    }

    /// The command line speaks to the vault, never to the object graph under it.
    func testTheCommandLineDoesNotImportObjectGraph() throws {
        let importsObjectGraph = try Regex(#"^\s*(@\w+\s+)*(\w+\s+)?import\s+(\w+\s+)?ObjectGraph(\.|\s|$)"#)
        for example in ["import ObjectGraph", "@testable import ObjectGraph", "internal import ObjectGraph",
                        "import class ObjectGraph.ManagedObject"] {
            XCTAssertNotNil(example.firstMatch(of: importsObjectGraph), example)
        }
        let files = Self.swiftFiles(under: Self.sourcesURL.appendingPathComponent("mystash"))
        XCTAssertGreaterThan(files.count, 10, "the sources were found at \(Self.sourcesURL.path)")
        let importing = try files.filter { file in
            try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
                .contains { $0.firstMatch(of: importsObjectGraph) != nil }
        }
        XCTAssertEqual(importing.map(\.lastPathComponent), [])
    }

    func testNoSourceLineIsLongerThan120Characters() throws {
        let files = (FileManager.default.enumerator(at: Self.sourcesURL, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL } ?? [])
            .filter { ["swift", "c", "h", "modulemap", "md"].contains($0.pathExtension) }
        XCTAssertGreaterThan(files.count, 100, "the sources were found at \(Self.sourcesURL.path)")
        var long: [String] = []
        for file in files {
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (number, line) in lines.enumerated() where line.count > Self.maximumLineLength {
                long.append("\(file.path.dropFirst(Self.sourcesURL.path.count + 1)):\(number + 1) (\(line.count))")
            }
        }
        XCTAssertEqual(long, [], "\(long.count) lines over \(Self.maximumLineLength) characters")
    }

    /// ObjectGraph documents its public surface as GRDB does its own: at least 70% of its public
    /// declarations carry a `///` comment (the DocC catalog, built by scripts/build-docs, links them).
    func testMostOfObjectGraphsPublicDeclarationsAreDocumented() throws {
        var declarations = 0
        var undocumented: [String] = []
        let declaration = try Regex(#"^\s*(@[\w()]+\s+)*(public|open)\s"#)
        for file in Self.swiftFiles(under: Self.sourcesURL.appendingPathComponent("ObjectGraph")) {
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() where line.firstMatch(of: declaration) != nil {
                declarations += 1
                var above = index - 1
                while above >= 0, lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("@") { above -= 1 }
                if above < 0 || !lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("///") {
                    undocumented.append("\(file.lastPathComponent):\(index + 1)")
                }
            }
        }
        XCTAssertGreaterThan(declarations, 300, "the scan finds ObjectGraph's declarations")
        let share = Double(declarations - undocumented.count) / Double(declarations)
        XCTAssertGreaterThanOrEqual(share, 0.7, "\(undocumented.count) of \(declarations) undocumented, such as "
                                    + undocumented.prefix(10).joined(separator: ", "))
    }

    /// The vault library speaks its domain: flags, commands, exit statuses, the environment and
    /// the terminal belong to the command line (Sources/mystash), which words the library's errors.
    static func commandLineSpeech() throws -> [(pattern: String, why: String, examples: [String])] {
        // mystash's own flags, as its man page lists them (git's and gpg's flags the library passes are not).
        let manPage = try String(contentsOf: sourcesURL.appendingPathComponent("../man/mystash.1").standardizedFileURL,
                                 encoding: .utf8).replacingOccurrences(of: "\\-", with: "-")
        let flags = Set(manPage.matches(of: try Regex(#"--[a-z][a-z0-9-]*[a-z0-9]"#)).map { String(manPage[$0.range]) })
        XCTAssertGreaterThan(flags.count, 30, "the man page's flags were read")
        let flagPattern = flags.sorted().map(NSRegularExpression.escapedPattern(for:)).joined(separator: "|")
        return [
            ("(?<![\\w-])(" + flagPattern + ")(?![\\w-])", "a mystash flag is the command line's word",
             ["hint: \"choose another directory with --vault\"", "/// Parameters for `--kdf-cost LOG2N`"]),
            (#"['`:] ?mystash [a-z]"#, "a mystash command is the command line's word",
             [#"hint: "'mystash check' lists every problem""#, #"hint: "name one: mystash sync --remote URL""#]),
            (#"\b(exit\(|[Ee]xit[Cc]ode|ExitCode|EX_[A-Z]+)"#, "exit statuses belong to the command line",
             ["public let exitCode: Int32", "exit(64)"]),
            (#"\b(getenv|setenv)\(|environment\[|processInfo\.environment"#,
             "settings come from the caller, not the environment",
             [#"environment["MYSTASH_BUSY_TIMEOUT"]"#, #"getenv("HOME")"#]),
            (#"/dev/tty|isatty\("#, "the terminal belongs to the command line",
             [#"FileHandle(forWritingAtPath: "/dev/tty")"#]),
        ]
    }

    func testTheVaultLibrarySpeaksNoCommandLine() throws {
        let rules = try Self.commandLineSpeech().map { (regex: try NSRegularExpression(pattern: $0.pattern), $0.why,
                                                        $0.examples) }
        var violations: [String] = []
        for (regex, _, examples) in rules {
            for line in examples {
                XCTAssertNotNil(regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)), line)
            }
        }
        let files = Self.swiftFiles(under: Self.sourcesURL.appendingPathComponent("MyStashKit"))
        XCTAssertGreaterThan(files.count, 30, "the sources were found at \(Self.sourcesURL.path)")
        for file in files {
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (number, line) in lines.enumerated() {
                for (regex, why, _) in rules
                where regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                    violations.append("\(file.lastPathComponent):\(number + 1): \(why)")
                }
            }
        }
        XCTAssertEqual(violations, [])
    }
}
