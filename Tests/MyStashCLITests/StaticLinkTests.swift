import Foundation
import XCTest

/// mystash carries the Swift runtime and Foundation inside it (see FoundationBridging.swift).
final class StaticLinkTests: CLITestCase {
    /// Each conformance by which Foundation bridges Swift values and its classes is found only by
    /// the runtime, at a cast: a static link drops the ones nothing names, and then a property
    /// list holding an array cannot be written and a keyed archive comes out empty.
    func testTheBinaryCarriesFoundationAndEveryBridgeItDeclares() throws {
        let bridges = "_ObjectiveCBridgeable|_StructTypeBridgeable|_SwiftBridgeable|_NSBridgeable"
            + "|_HasCustomAnyHashableRepresentation"
        let script = """
            set -e
            toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swiftc)")")")
            archives=$toolchain/lib/swift_static/linux
            ldd \(shellQuoted(Self.binary.path)) > libraries
            if grep -F "$toolchain/" libraries; then exit 3; fi
            nm -g --defined-only "$archives"/libFoundation.a "$archives"/libFoundationEssentials.a \
                "$archives"/libFoundationInternationalization.a 2>/dev/null | awk '/ R .*Mc$/ {print $3}' \
                | sort -u > declared
            swift demangle --compact < declared | paste declared - \
                | grep -E 'conformance descriptor for .* : [A-Za-z.]*(\(bridges)) in ' | cut -f1 > bridging
            nm \(shellQuoted(Self.binary.path)) | awk '{print $NF}' | sort -u > linked
            echo "$(wc -l < bridging) bridging conformances"
            comm -23 bridging linked | swift demangle --compact
            """
        let directory = home.appendingPathComponent("symbols")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let result = try shell(
            "cd \(shellQuoted(directory.path)) && " + script,
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"], bash: true)
        // 3: a library of the toolchain (the Swift runtime, Foundation, Dispatch…) loaded at run time.
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        var lines = result.stdout.split(separator: "\n").map(String.init)
        let count = lines.isEmpty ? 0 : Int(lines.removeFirst().split(separator: " ")[0]) ?? 0
        // Swift 6.3's Foundation declares 121; far fewer means the symbols were not read.
        XCTAssertGreaterThan(count, 50, result.stdout + result.stderr)
        XCTAssertEqual(lines, [], "bridging conformances missing from mystash")
    }

    /// libxml2 (with ICU, liblzma and the C++ library it brings) is loaded when a command reads
    /// XML, not at every start: the model the binary embeds is compiled at build time.
    func testCommandsThatReadNoXMLNeverLoadLibxml2AndAnXMLImportStillDoes() throws {
        func loaded(_ arguments: [String], stdin: String? = nil) throws -> [String] {
            let result = try run(arguments, stdin: stdin, environment: ["LD_DEBUG": "files"])
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr.suffix(2000))")
            // "file=libc.so.6 [0];  needed by …", "file=libxml2.so.2 [0];  dynamically loaded by …"
            return result.stderr.split(separator: "\n").filter { $0.contains("needed by") || $0.contains("loaded by") }
                .map(String.init)
        }
        XCTAssertFalse(try loaded(["--version"]).joined().contains("libxml2"))
        try initVault()
        for arguments in [["password", "add", "Mail", "--user", "ada"], ["password", "show", "Mail", "--field", "password"],
                          ["password", "list"], ["password", "search", "ada"], ["check"]] {
            let libraries = try loaded(arguments, stdin: arguments.contains("add") ? "mail-secret" : nil)
            XCTAssertFalse(libraries.isEmpty, "LD_DEBUG printed no library for \(arguments)")
            XCTAssertFalse(libraries.joined().contains("libxml2"), "\(arguments): \(libraries)")
        }
        let xml = home.appendingPathComponent("export.xml")
        try Data(("<KeePassFile><Root><Group><Name>Root</Name><Entry><String><Key>Title</Key><Value>A &amp; B</Value>"
            + "</String><String><Key>Password</Key><Value>x</Value></String></Entry></Group></Root></KeePassFile>").utf8)
            .write(to: xml)
        let imported = try loaded(["import", xml.path, "--format", "keepassxc-xml"])
        XCTAssertTrue(imported.joined().contains("libxml2"), "\(imported)")
        XCTAssertEqual(try runOK(["password", "show", "A & B", "--field", "password"]).stdout, "x\n")
    }

    /// libxml2 that cannot be loaded is said as such (a missing library, exit 66), not blamed on
    /// the file; an empty file is said to be one.
    func testAnXMLImportWithoutLibxml2NamesTheLibraryAndAnEmptyFileIsSaidEmpty() throws {
        try initVault()
        let libraries = home.appendingPathComponent("broken-libraries")
        try FileManager.default.createDirectory(at: libraries, withIntermediateDirectories: true)
        try Data("not a library".utf8).write(to: libraries.appendingPathComponent("libxml2.so.2"))
        let xml = home.appendingPathComponent("export.xml")
        try Data(("<KeePassFile><Root><Group><Name>Root</Name><Entry><String><Key>Title</Key><Value>Mail</Value>"
            + "</String></Entry></Group></Root></KeePassFile>").utf8).write(to: xml)
        let result = try run(["import", xml.path, "--format", "keepassxc-xml"],
                             environment: ["LD_LIBRARY_PATH": libraries.path])
        XCTAssertEqual(result.status, 66, result.stderr)
        XCTAssertTrue(result.stderr.contains("libxml2 could not be loaded (is it installed?)"), result.stderr)
        XCTAssertTrue(result.stderr.contains("apt install libxml2"), result.stderr)
        try runOK(["import", xml.path, "--format", "keepassxc-xml"])
        XCTAssertEqual(try runOK(["password", "list", "--json"]).stdout.components(separatedBy: "\"Mail\"").count, 2)
        try Data(" \n".utf8).write(to: xml)
        let empty = try run(["import", xml.path, "--format", "keepassxc-xml"])
        XCTAssertEqual(empty.status, 65, empty.stderr)
        XCTAssertTrue(empty.stderr.contains("no <KeePassFile> element (the file is empty)"), empty.stderr)
    }
}
