import Foundation
import XCTest

@testable import MyStashKit
@testable import StashPlatform

/// The clipboard on a real X server (Xvfb) through xclip, as a desktop session has it.
final class ClipboardTests: XCTestCase {
    private var server: Process?
    private var savedDisplay: String?

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb"), ChildProcess.find("xclip") != nil else {
            throw XCTSkip("Xvfb and xclip are not installed (apt-get install xvfb xclip)")
        }
        // Xvfb writes its display number to stdout once it accepts clients.
        let ready = Pipe()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        server.arguments = ["-displayfd", "1", "-nolisten", "tcp"]
        server.standardOutput = ready
        server.standardError = FileHandle.nullDevice
        server.standardInput = FileHandle.nullDevice
        try server.run()
        self.server = server
        var number = Data()
        while !number.contains(UInt8(ascii: "\n")) {
            let chunk = ready.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            number += chunk
        }
        let display = String(decoding: number, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !display.isEmpty else { throw XCTSkip("Xvfb did not start") }
        savedDisplay = ProcessInfo.processInfo.environment["DISPLAY"]
        setenv("DISPLAY", ":\(display)", 1)
    }

    override func tearDown() {
        if let savedDisplay { setenv("DISPLAY", savedDisplay, 1) } else { unsetenv("DISPLAY") }
        server?.terminate()
        server?.waitUntilExit()
    }

    func testCopiesThroughXclipAndClearsOnlyItsOwnValue() throws {
        XCTAssertEqual(Clipboard.tool()?.name, "xclip")
        let secret = "s3cret \u{e9} \"quoted\""
        XCTAssertEqual(try Clipboard.copy(secret, clearAfter: 0, clearHelper: []), .tool("xclip", clearsAfter: nil))
        XCTAssertEqual(Clipboard.contents(), secret)

        XCTAssertFalse(Clipboard.clear(ifDigest: try Clipboard.digest("something else")))
        XCTAssertEqual(Clipboard.contents(), secret, "a value that is not ours stays")
        XCTAssertTrue(Clipboard.clear(ifDigest: try Clipboard.digest(secret)))
        XCTAssertEqual(Clipboard.contents(), "")
    }

    func testTheHelperReadsDelayAndDigestFromItsInput() throws {
        _ = try Clipboard.copy("mine", clearAfter: 0, clearHelper: [])
        func helper(_ line: String) -> Bool {
            let pipe = Pipe()
            pipe.fileHandleForWriting.write(Data(line.utf8))
            try? pipe.fileHandleForWriting.close()
            return Clipboard.runClearHelper(input: pipe.fileHandleForReading)
        }
        XCTAssertFalse(helper("soon \(try Clipboard.digest("mine"))\n"))
        XCTAssertFalse(helper("\(Clipboard.maximumClearSeconds + 1) \(try Clipboard.digest("mine"))\n"))
        XCTAssertEqual(Clipboard.contents(), "mine")
        _ = try Clipboard.copy("theirs", clearAfter: 0, clearHelper: [])
        XCTAssertTrue(helper("0 \(try Clipboard.digest("mine"))\n"))
        XCTAssertEqual(Clipboard.contents(), "theirs", "the person copied something else since: left alone")
        XCTAssertTrue(helper("0 \(try Clipboard.digest("theirs"))\n"))
        XCTAssertEqual(Clipboard.contents(), "")
    }

    func testTheHelperPutsBackWhatTheClipboardHeldBefore() throws {
        _ = try Clipboard.copy("a link I copied", clearAfter: 0, clearHelper: [])
        _ = try Clipboard.copy("the secret", clearAfter: 0, clearHelper: [])
        let pipe = Pipe()
        let earlier = Data("a link I copied".utf8).base64EncodedString()
        pipe.fileHandleForWriting.write(Data("0 \(try Clipboard.digest("the secret"))\n\(earlier)\n".utf8))
        try pipe.fileHandleForWriting.close()
        XCTAssertTrue(Clipboard.runClearHelper(input: pipe.fileHandleForReading))
        XCTAssertEqual(Clipboard.contents(), "a link I copied")
    }

    func testNoDisplayMeansNoTool() {
        XCTAssertNil(Clipboard.tool(environment: [:]))
        XCTAssertNil(Clipboard.tool(environment: ["DISPLAY": ""]))
    }
}
