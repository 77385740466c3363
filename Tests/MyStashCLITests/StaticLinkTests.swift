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
}
