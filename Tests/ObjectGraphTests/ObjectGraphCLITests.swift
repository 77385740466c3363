import Foundation
import XCTest

/// Runs the built `objectgraph` binary on copies of Apple's stores and checks what it
/// prints against what `sqlite3` shows.
final class ObjectGraphCLITests: ObjectGraphTestCase {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] {
            stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        }
    }

    static var binary: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("objectgraph")
    }

    static var wibosco: URL { fixturesURL.appendingPathComponent("CoreData/wibosco-migration-example") }
    var model: String { Self.wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld").path }

    func run(_ arguments: String...) throws -> Run { try Self.run(arguments, in: directory) }

    /// Runs the built `objectgraph` with `arguments` in `directory`.
    static func run(_ arguments: [String], in directory: URL) throws -> Run {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// A copy of the wibosco store of `version` in the test's directory.
    func store(_ version: Int) throws -> URL {
        let url = directory.appendingPathComponent("store-\(version).sqlite")
        try FileManager.default.copyItem(
            at: Self.wibosco.appendingPathComponent("CoreDataMigration_Example_\(version).sqlite"), to: url)
        return url
    }

    func testInfoNamesTheStoreItsEntitiesRowsAndVersionWithoutWritingAnything() throws {
        let url = try store(3)
        let before = try Data(contentsOf: url)
        let uuid = try sqlite3(url, "SELECT Z_UUID FROM Z_METADATA")[0]
        let posts = try sqlite3(url, "SELECT COUNT(*) FROM ZPOST")[0]
        let sections = try sqlite3(url, "SELECT COUNT(*) FROM ZSECTION")[0]
        let result = try run("info", "--model", model, url.lastPathComponent)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(
            result.lines,
            [
                "store: store-3.sqlite", "type: SQLite", "uuid: \(uuid)", "recorded versions: (none)",
                "model version: CoreDataMigration_Example 3", "entities:", "  Post     \(posts)",
                "  Section  \(sections)",
            ])
        XCTAssertEqual(try Data(contentsOf: url), before)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), ["store-3.sqlite"])
    }

    func testInfoAsJSONWithoutAModelGivesTheRowsSqlite3Counts() throws {
        let url = try store(2)
        let result = try run("info", "--json", url.path)
        XCTAssertEqual(result.status, 0, result.stderr)
        let info = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(info["type"] as? String, "SQLite")
        XCTAssertEqual(info["uuid"] as? String, try sqlite3(url, "SELECT Z_UUID FROM Z_METADATA").first)
        XCTAssertNil(info["modelVersion"])
        let entities = try XCTUnwrap(info["entities"] as? [[String: Any]])
        XCTAssertEqual(entities.map { $0["name"] as? String }, ["Post"])
        XCTAssertEqual(entities.first?["rows"] as? Int, Int(try sqlite3(url, "SELECT COUNT(*) FROM ZPOST")[0]))
    }

    /// Core Data stores dates as doubles to the microsecond: dump prints them to the microsecond,
    /// and with --raw as stored.
    func testDumpPrintsDatesAtTheirFullPrecision() throws {
        let url = try store(3)
        let iso = try run("dump", "--model", model, "--json", url.path)
        let raw = try run("dump", "--model", model, "--json", "--raw", url.path)
        XCTAssertEqual(iso.status, 0, iso.stderr)
        XCTAssertEqual(raw.status, 0, raw.stderr)
        func dates(_ output: String) throws -> [Int: Any] {
            let objects = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]])
            return Dictionary(uniqueKeysWithValues: objects.filter { $0["entity"] as? String == "Post" }.compactMap {
                object in
                (object["primaryKey"] as? Int).map { ($0, (object["values"] as? [String: Any])?["date"] ?? NSNull()) }
            })
        }
        let isoDates = try dates(iso.stdout)
        let rawDates = try dates(raw.stdout)
        let stored = try sqlite3(url, "SELECT Z_PK, ZDATE FROM ZPOST WHERE ZDATE IS NOT NULL")
        XCTAssertFalse(stored.isEmpty)
        for line in stored {
            let fields = line.split(separator: "|").map(String.init)
            let key = try XCTUnwrap(Int(fields[0]))
            XCTAssertEqual(rawDates[key] as? Double, Double(fields[1]), line)
            // sqlite3 prints the double to the microsecond here: the same digits after the point.
            let fraction = fields[1].split(separator: ".").last.map(String.init) ?? ""
            let text = try XCTUnwrap(isoDates[key] as? String, line)
            XCTAssertTrue(text.hasSuffix(".\(fraction)Z"), "\(text) for \(fields[1])")
        }
    }

    func testDumpPrintsWhatItCanReadAndNamesEachDanglingLink() throws {
        let url = try store(3)
        let post = try XCTUnwrap(try sqlite3(url, "SELECT ZPOST FROM ZSECTION WHERE ZPOST IS NOT NULL LIMIT 1").first)
        _ = try sqlite3(url, "DELETE FROM ZPOST WHERE Z_PK = \(post)")
        let result = try run("dump", "--model", model, url.path)
        XCTAssertEqual(result.status, 65, result.stderr)
        let sections = try sqlite3(url, "SELECT COUNT(*) FROM ZSECTION")[0]
        XCTAssertEqual(result.lines.filter { $0.hasPrefix("Section ") }.count, Int(sections), "every row is printed")
        XCTAssertTrue(result.stdout.contains("dangling: Section.post of row"), result.stdout)
        XCTAssertTrue(result.stderr.contains("refers to Post row \(post), which does not exist"), result.stderr)
    }

    /// Rows holding a cell that cannot be decoded are reported where they are, naming the cell;
    /// every other row is printed, and the exit status says something was not read.
    func testDumpReportsUndecodableCellsInPlaceAndGoesOn() throws {
        let url = try store(3)
        let posts = try sqlite3(url, "SELECT Z_PK FROM ZPOST ORDER BY Z_PK")
        XCTAssertGreaterThan(posts.count, 2)
        _ = try sqlite3(url, "UPDATE ZPOST SET ZDATE = X'00FF' WHERE Z_PK = \(posts[0]); "
                        + "UPDATE ZPOST SET ZDATE = 'soon' WHERE Z_PK = \(posts[1])")
        let result = try run("dump", "--model", model, url.path)
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.lines.filter { $0.hasPrefix("Post ") }.count, posts.count, result.stdout)
        for key in posts.prefix(2) {
            let after = try XCTUnwrap(result.stdout.components(separatedBy: "Post \(key)\n").last)
            XCTAssertTrue(after.hasPrefix("  unreadable: cannot read Post.date of row \(key)"), result.stdout)
        }
        // The two rows, and the links of sections to them.
        XCTAssertTrue(result.stderr.contains("4 values could not be read"), result.stderr)
    }

    func testDumpPrintsEveryObjectDecodedThroughTheModelAsSqlite3ShowsIt() throws {
        let url = try store(3)
        let result = try run("dump", "--model", model, "--json", url.path)
        XCTAssertEqual(result.status, 0, result.stderr)
        let objects = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        func rows(_ entity: String) -> [Int: [String: Any]] {
            Dictionary(
                uniqueKeysWithValues: objects.filter { $0["entity"] as? String == entity }.compactMap { object in
                    (object["primaryKey"] as? Int).map { ($0, object["values"] as? [String: Any] ?? [:]) }
                })
        }
        let posts = rows("Post")
        for line in try sqlite3(url, "SELECT Z_PK, ZHEXCOLOR, ZPOSTID FROM ZPOST") {
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let post = try XCTUnwrap(posts[Int(fields[0]) ?? 0], line)
            XCTAssertEqual(post["hexColor"] as? String, fields[1])
            XCTAssertEqual(post["postID"] as? String, fields[2])
            let sections = try sqlite3(url, "SELECT Z_PK FROM ZSECTION WHERE ZPOST = \(fields[0]) ORDER BY Z_PK")
                .compactMap { Int($0) }
            XCTAssertEqual(post["sections"] as? [Int], sections)
        }
        let sections = rows("Section")
        let sectionRows = try sqlite3(url, "SELECT Z_PK, ZPOST, ZINDEX, ZTITLE FROM ZSECTION")
        XCTAssertEqual(sections.count, sectionRows.count)
        for line in sectionRows {
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let section = try XCTUnwrap(sections[Int(fields[0]) ?? 0], line)
            XCTAssertEqual(section["post"] as? Int, Int(fields[1]))
            XCTAssertEqual(section["index"] as? Int, Int(fields[2]))
            XCTAssertEqual(section["title"] as? String, fields[3])
        }
        XCTAssertEqual(posts.count + sections.count, objects.count)

        let onlySections = try run("dump", "--model", model, "--entity", "Section", url.path)
        XCTAssertEqual(onlySections.status, 0, onlySections.stderr)
        XCTAssertEqual(onlySections.lines.filter { !$0.hasPrefix(" ") }.count, sectionRows.count)
        XCTAssertTrue(onlySections.lines.allSatisfy { $0.hasPrefix(" ") || $0.hasPrefix("Section ") })

        let unknown = try run("dump", "--model", model, "--entity", "Comment", url.path)
        XCTAssertEqual(unknown.status, 66)
        XCTAssertTrue(
            unknown.stderr.hasPrefix(
                "Error: the model 'CoreDataMigration_Example 3' has no entity 'Comment'\nhint: entities: "),
            unknown.stderr)
    }

    func testMigrateDryRunPrintsTheInferredStepsThenMigrateMakesThem() throws {
        let url = try store(1)
        let before = try Data(contentsOf: url)
        let dryRun = try run("migrate", "--model", model, "--dry-run", url.path)
        XCTAssertEqual(dryRun.status, 0, dryRun.stderr)
        XCTAssertEqual(
            dryRun.lines,
            [
                "CoreDataMigration_Example → CoreDataMigration_Example 2:",
                "  rename attribute Post.color to hexColor",
                "CoreDataMigration_Example 2 → CoreDataMigration_Example 3:",
                "  remove attribute Post.content and its values",
                "  add relationship Post.sections", "  add entity Section",
                "CoreDataMigration_Example 3 → CoreDataMigration_Example 4:",
                "  add attribute Post.softDeleted (default NO)",
                "On a copy of the store, the migration would have:", "  carried 10 Post",
                "  dropped 10 values of Post.content (attribute removed from the model)",
                "Migrating drops what is listed above: it needs --allow-loss.",
            ])
        XCTAssertEqual(try Data(contentsOf: url), before)

        let colors = try sqlite3(url, "SELECT Z_PK, ZCOLOR FROM ZPOST ORDER BY Z_PK")
        XCTAssertEqual(try run("migrate", "--model", model, url.path).status, 65)
        XCTAssertEqual(try Data(contentsOf: url), before)
        let migrated = try run("migrate", "--model", model, "--allow-loss", url.path)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertTrue(migrated.lines.contains("  carried 10 Post"), migrated.stdout)
        XCTAssertTrue(
            migrated.lines.contains("  dropped 10 values of Post.content (attribute removed from the model)"),
            migrated.stdout)
        XCTAssertEqual(try sqlite3(url, "SELECT Z_PK, ZHEXCOLOR FROM ZPOST ORDER BY Z_PK"), colors)
        let check = try run("check", "--model", model, url.path)
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertEqual(check.lines, ["ok: 10 objects of model version 'CoreDataMigration_Example 4' read back"])
        let again = try run("migrate", "--model", model, url.path)
        XCTAssertEqual(again.lines, ["The store already fits 'CoreDataMigration_Example 4'; nothing to migrate."])
    }

    func testADryRunOnAStoreInWALModeLeavesNoFileBehind() throws {
        let url = try store(2)
        XCTAssertEqual(try sqlite3(url, "PRAGMA journal_mode"), ["wal"])
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
        where name != url.lastPathComponent {
            try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
        let before = try Data(contentsOf: url)
        let result = try run("migrate", "--dry-run", "--model", model, url.path)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.lines.contains("  carried 10 Post"), result.stdout)
        XCTAssertEqual(try Data(contentsOf: url), before)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), [url.lastPathComponent])
    }

    func testAMigrationThatCannotBeInferredExitsWith65AndLeavesTheStore() throws {
        // The model with a fifth version that turns postID into a date.
        let folder = directory.appendingPathComponent("Model.xcdatamodeld")
        try FileManager.default.copyItem(atPath: model, toPath: folder.path)
        let fourth = folder.appendingPathComponent("CoreDataMigration_Example 4.xcdatamodel/contents")
        let fifth = folder.appendingPathComponent("CoreDataMigration_Example 5.xcdatamodel")
        try FileManager.default.createDirectory(at: fifth, withIntermediateDirectories: true)
        let contents = try String(contentsOf: fourth, encoding: .utf8).replacingOccurrences(
            of: "<attribute name=\"postID\" optional=\"YES\" attributeType=\"String\"",
            with: "<attribute name=\"postID\" optional=\"YES\" attributeType=\"Date\"")
        try contents.write(to: fifth.appendingPathComponent("contents"), atomically: true, encoding: .utf8)
        let current = try String(contentsOf: folder.appendingPathComponent(".xccurrentversion"), encoding: .utf8)
        try current.replacingOccurrences(of: "Example 4.xcdatamodel", with: "Example 5.xcdatamodel")
            .write(to: folder.appendingPathComponent(".xccurrentversion"), atomically: true, encoding: .utf8)

        let url = try store(3)
        let before = try Data(contentsOf: url)
        let result = try run("migrate", "--model", folder.path, url.path)
        XCTAssertEqual(result.status, 65)
        XCTAssertTrue(result.stderr.contains("Post.postID changes from String to Date"), result.stderr)
        XCTAssertTrue(result.stderr.hasSuffix("hint: the store was left as it was\n"), result.stderr)
        XCTAssertEqual(try Data(contentsOf: url), before)
    }

    func testCheckListsADanglingLinkAndExitsWith65() throws {
        let url = try store(3)
        let good = try run("check", "--model", model, url.path)
        XCTAssertEqual(good.status, 0, good.stderr)
        XCTAssertEqual(
            good.lines,
            [
                "ok: 26 objects of model version 'CoreDataMigration_Example 3' read back",
                "note: the current version is 'CoreDataMigration_Example 4'; "
                    + "'objectgraph migrate' would bring the store to it",
            ])
        _ = try sqlite3(url, "UPDATE ZSECTION SET ZPOST = 99 WHERE Z_PK = 1")
        let bad = try run("check", "--model", model, url.path)
        XCTAssertEqual(bad.status, 65)
        XCTAssertTrue(bad.stderr.hasPrefix("Error: 1 problems in '\(url.path)':\n  "), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("Section row 1"), bad.stderr)
    }

    func testMissingFilesAndUsageErrorsHaveTheirExitCodes() throws {
        let url = try store(3)
        let noStore = try run("info", "missing.sqlite")
        XCTAssertEqual(noStore.status, 66)
        XCTAssertEqual(noStore.stderr, "Error: no store file at 'missing.sqlite'\n")
        let noModel = try run("dump", "--model", "Missing.xcdatamodeld", url.path)
        XCTAssertEqual(noModel.status, 66)
        XCTAssertTrue(noModel.stderr.hasPrefix("Error: no model folder at 'Missing.xcdatamodeld'\n"), noModel.stderr)
        XCTAssertEqual(try run("dump", url.path).status, 64)
        XCTAssertEqual(try run("migrate", "--model", model).status, 64)
        let notAStore = directory.appendingPathComponent("plain.sqlite")
        _ = try sqlite3(notAStore, "CREATE TABLE t (x)")
        let plain = try run("info", notAStore.path)
        XCTAssertEqual(plain.status, 65)
        XCTAssertTrue(plain.stderr.contains("is a SQLite database but not a store"), plain.stderr)
    }

    func testTheManPageDocumentsEveryCommandAndOption() throws {
        let manPage = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../man/objectgraph.1").standardizedFileURL, encoding: .utf8)
        for command in ["info", "dump", "migrate", "check"] {
            XCTAssertTrue(manPage.contains(".BR \(command) "), "command \(command)")
            let help = try run(command, "--help")
            XCTAssertEqual(help.status, 0)
            let options = help.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
                .filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != "=" && $0 != "<" }) }
            XCTAssertFalse(options.isEmpty)
            for option in Set(options) {
                XCTAssertTrue(
                    manPage.contains(option.replacingOccurrences(of: "-", with: "\\-")), "\(command) \(option)")
            }
        }
    }
}
