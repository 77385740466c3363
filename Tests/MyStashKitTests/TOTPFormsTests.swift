import Foundation
import XCTest

@testable import MyStashKit
import StashPlatform

/// Every way password managers write a TOTP secret, imported through the tools that write it
/// (keepassxc-cli, pass with gpg), each code checked against oathtool's at the same instant.
final class TOTPFormsTests: VaultTestCase {
    let instant = Date(timeIntervalSince1970: 1_612_325_106)  // 2021-02-03 04:05:06 UTC

    /// Skips the test without oathtool: asked first, as a skip thrown inside an assertion's
    /// argument counts as a failure.
    func requireOathtool() throws {
        try XCTSkipUnless(ChildProcess.find("oathtool") != nil, "oathtool is not installed (apt-get install oathtool)")
    }

    /// oathtool's code at ``instant`` for `key` (base32 unless `hex`).
    func oathtool(_ key: String, hex: Bool = false, algorithm: String = "sha1", digits: Int = 6, period: Int = 30)
        throws -> String
    {
        try requireOathtool()
        let tool = try XCTUnwrap(ChildProcess.find("oathtool"))
        let result = try XCTUnwrap(
            ChildProcess.execute(
                [tool, "--totp=\(algorithm)"] + (hex ? [] : ["--base32"])
                    + ["--digits=\(digits)", "--time-step-size=\(period)s", "--now=2021-02-03 04:05:06 UTC", key]))
        XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
        return String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func code(_ vault: Vault, _ entry: String) throws -> String { try vault.items.totpCode(.name(entry), at: instant).code.value }

    /// A KeePass XML entry with these attributes.
    func keepassEntry(_ title: String, _ attributes: [(String, String)]) -> String {
        let strings = ([("Title", title), ("Password", "pw")] + attributes).map { key, value in
            "<String><Key>\(key)</Key><Value>\(value)</Value></String>"
        }
        return "<Entry><UUID>\(Data(title.utf8.prefix(16)).base64EncodedString())</UUID>\(strings.joined())</Entry>"
    }

    func testKeePassAndKeePassXCFormsThroughKeePassXC() throws {
        try requireOathtool()
        let entries = [
            keepassEntry("Legacy seed", [("TOTP Seed", "jbsw y3dp ehpk 3pxp"), ("TOTP Settings", "60;8")]),
            keepassEntry("Legacy seed, default settings", [("TOTP Seed", "JBSWY3DPEHPK3PXP")]),
            keepassEntry(
                "TimeOtp base32",
                [("TimeOtp-Secret-Base32", "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"), ("TimeOtp-Length", "7"),
                 ("TimeOtp-Period", "45"), ("TimeOtp-Algorithm", "HMAC-SHA-256")]),
            keepassEntry(
                "TimeOtp hex",
                [("TimeOtp-Secret-Hex", "3132333435363738393031323334353637383930"),
                 ("TimeOtp-Algorithm", "HMAC-SHA-512")]),
            keepassEntry("TimeOtp base64", [("TimeOtp-Secret-Base64", "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA=")]),
            keepassEntry("TimeOtp text", [("TimeOtp-Secret", "12345678901234567890"), ("TimeOtp-Length", "8")]),
            keepassEntry("KeeOTP", [("otp", "key=JBSWY3DPEHPK3PXP&amp;step=30&amp;size=6&amp;otpHashMode=SHA256")]),
            keepassEntry("URI", [("otp", "otpauth://totp/Site?secret=JBSWY3DP%20EHPK3PXP&amp;digits=8")]),
            keepassEntry("Steam", [("TOTP Seed", "JBSWY3DPEHPK3PXP"), ("TOTP Settings", "30;S")]),
        ]
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <KeePassFile><Meta><Generator>test</Generator></Meta><Root><Group>
            <UUID>cm9vdGdyb3VwdXVpZDAwMQ==</UUID><Name>Root</Name>\(entries.joined(separator: "\n"))
            </Group></Root></KeePassFile>
            """
        let file = directory.deletingLastPathComponent().appendingPathComponent("totp-\(UUID().uuidString).xml")
        try Data(xml.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let vault = try makeVault()
        let report = try vault.transfer.importItems(try keepassxcExport("xml", xml: file), format: .keepassxcXML)

        let rfcKey = "12345678901234567890"
        let rfcHex = rfcKey.utf8.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(try code(vault, "Legacy seed"), try oathtool("JBSWY3DPEHPK3PXP", digits: 8, period: 60))
        XCTAssertEqual(try code(vault, "Legacy seed, default settings"), try oathtool("JBSWY3DPEHPK3PXP"))
        XCTAssertEqual(
            try code(vault, "TimeOtp base32"),
            try oathtool("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ", algorithm: "sha256", digits: 7, period: 45))
        XCTAssertEqual(try code(vault, "TimeOtp hex"), try oathtool(rfcHex, hex: true, algorithm: "sha512"))
        XCTAssertEqual(try code(vault, "TimeOtp base64"), try oathtool(rfcHex, hex: true))
        XCTAssertEqual(try code(vault, "TimeOtp text"), try oathtool(rfcHex, hex: true, digits: 8))
        XCTAssertEqual(try code(vault, "KeeOTP"), try oathtool("JBSWY3DPEHPK3PXP", algorithm: "sha256"))
        XCTAssertEqual(try code(vault, "URI"), try oathtool("JBSWY3DPEHPK3PXP", digits: 8))
        for name in ["Legacy seed", "TimeOtp base32", "TimeOtp hex", "KeeOTP"] {
            XCTAssertNil(try vault.items.entry(.name(name), reveal: true).fields, "\(name): the TOTP attributes are the secret")
        }
        // Steam's codes use their own alphabet: kept as the attributes they were, and reported.
        XCTAssertEqual(try vault.items.entry("Steam", reveal: true).hasTOTP, nil)
        XCTAssertEqual(try vault.items.entry("Steam", reveal: true).fields?.map(\.name), ["TOTP Seed", "TOTP Settings"])
        XCTAssertEqual(report.warnings.map(\.title), ["Steam"], "\(report.warnings)")
    }

    func testGopassTOTPKeyAndOtpauthLinesThroughPass() throws {
        try requireOathtool()
        guard ChildProcess.find("pass") != nil else { throw XCTSkip("pass is not installed (apt-get install pass)") }
        try withTestGPGKey { recipient in try withPassStore(for: recipient) { store in
            // gopass's layout: the password, a YAML marker, then keys.
            try must(
                ["pass", "insert", "-m", "web/gopass"], Data("pw\n---\ntotp: jbsw y3dp ehpk 3pxp\nuser: ada\n".utf8))
            try must(
                ["pass", "insert", "-m", "web/gopass-uri"],
                Data("pw\n---\ntotp: otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=8&algorithm=SHA512\n".utf8))
            try must(["pass", "insert", "-m", "web/pass-otp"],
                     Data("pw\notpauth://totp/x?secret=JBSWY3DPEHPK3PXP&period=60\nnote\n".utf8))
            let vault = try makeVault()
            _ = try vault.transfer.importPasswordStore(at: store)
            XCTAssertEqual(try code(vault, "gopass"), try oathtool("JBSWY3DPEHPK3PXP"))
            XCTAssertEqual(try vault.items.entry("gopass", reveal: true).userId, "ada")
            XCTAssertNil(try vault.items.entry("gopass", reveal: true).notes, "the YAML marker is no note")
            XCTAssertEqual(
                try code(vault, "gopass-uri"), try oathtool("JBSWY3DPEHPK3PXP", algorithm: "sha512", digits: 8))
            XCTAssertEqual(try code(vault, "pass-otp"), try oathtool("JBSWY3DPEHPK3PXP", period: 60))
            XCTAssertEqual(try vault.items.entry("pass-otp", reveal: true).notes, "note")
        } }
    }

    func testBitwardenBase32WithSpacesAndLowercaseAndURIsWithRawSpaces() throws {
        try requireOathtool()
        let export = #"""
            {"encrypted": false, "items": [
              {"type": 1, "name": "Grouped", "login": {"password": "p", "totp": "jbsw y3dp ehpk 3pxp"}},
              {"type": 1, "name": "Raw space", "login": {"password": "p",
               "totp": "otpauth://totp/Site:ada?secret=JBSWY3DP EHPK3PXP&digits=8&period=60"}}]}
            """#
        let vault = try makeVault()
        let report = try vault.transfer.importItems(Data(export.utf8), format: .bitwardenJSON)
        XCTAssertEqual(report.warnings, [])
        XCTAssertEqual(try code(vault, "Grouped"), try oathtool("JBSWY3DPEHPK3PXP"))
        XCTAssertEqual(try code(vault, "Raw space"), try oathtool("JBSWY3DPEHPK3PXP", digits: 8, period: 60))
    }

    func testBase32EncodingRoundTrips() throws {
        for length in 0...40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            if length == 0 { continue }
            XCTAssertEqual(try TOTP.base32Decode(TOTP.base32Encode(bytes)), bytes)
        }
    }
}
