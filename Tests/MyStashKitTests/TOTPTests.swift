import Foundation
import XCTest
@testable import MyStashKit
import StashCrypto

final class TOTPTests: XCTestCase {
    func testRFC6238Vectors() throws {
        let data = try Data(contentsOf: VaultTestCase.fixtures.appendingPathComponent("rfc6238.json"))
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let seeds = try XCTUnwrap(root["seeds"] as? [String: String])
        let vectors = try XCTUnwrap(root["vectors"] as? [[String: Any]])
        var checked = 0
        for vector in vectors {
            let time = try XCTUnwrap(vector["time"] as? Int)
            for algorithm in HMAC.Algorithm.allCases {
                let totp = TOTP(secret: Array(try XCTUnwrap(seeds[algorithm.rawValue]).utf8), algorithm: algorithm, digits: 8, period: 30)
                let code = try totp.code(at: Date(timeIntervalSince1970: TimeInterval(time)))
                XCTAssertEqual(code.value, vector[algorithm.rawValue] as? String, "\(algorithm) at \(time)")
                checked += 1
            }
        }
        XCTAssertEqual(checked, 18)
    }

    func testParsesOtpauthURIsAndBareSecrets() throws {
        let uri = try TOTP(parsing: "otpauth://totp/ACME:ada@example.org?secret=JBSWY3DPEHPK3PXP&issuer=ACME&algorithm=SHA256&digits=8&period=60")
        XCTAssertEqual(uri.algorithm, .sha256)
        XCTAssertEqual(uri.digits, 8)
        XCTAssertEqual(uri.period, 60)
        XCTAssertEqual(uri.secret, [0x48, 0x65, 0x6C, 0x6C, 0x6F, 0x21, 0xDE, 0xAD, 0xBE, 0xEF])
        let bare = try TOTP(parsing: "jbsw y3dp ehpk 3pxp")
        XCTAssertEqual(bare.secret, uri.secret)
        XCTAssertEqual(bare.algorithm, .sha1)
        XCTAssertEqual(bare.digits, 6)
        XCTAssertEqual(bare.period, 30)
        for bad in ["", "not base32!", "otpauth://hotp/x?secret=JBSWY3DP", "otpauth://totp/x?secret=JBSWY3DP&digits=9",
                    "otpauth://totp/x?secret=JBSWY3DP&algorithm=MD5", "otpauth://totp/x?secret=JBSWY3DP&period=0", "otpauth://totp/x"] {
            XCTAssertThrowsError(try TOTP(parsing: bad), bad)
        }
    }

    func testSecondsLeftCountDownWithinThePeriod() throws {
        let totp = TOTP(secret: Array("12345678901234567890".utf8), period: 45)
        XCTAssertEqual(try totp.code(at: Date(timeIntervalSince1970: 90)).secondsLeft, 45)
        XCTAssertEqual(try totp.code(at: Date(timeIntervalSince1970: 134)).secondsLeft, 1)
    }

    /// Random secrets, algorithms, digit counts, periods and times, checked against oathtool.
    func testAgreesWithOathtool() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/oathtool") else {
            throw XCTSkip("oathtool is not installed (apt-get install oathtool)")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<40 {
            let secret = (0..<Int.random(in: 10...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let algorithm = HMAC.Algorithm.allCases.randomElement(using: &generator)!
            let digits = Int.random(in: 6...8, using: &generator)
            let period = [15, 30, 45, 60, 90].randomElement(using: &generator)!
            let time = Int.random(in: 0...4_000_000_000, using: &generator)
            let base32 = TOTP.base32Encode(secret)
            let totp = try TOTP(parsing: "otpauth://totp/x?secret=\(base32)&algorithm=\(algorithm.rawValue)&digits=\(digits)&period=\(period)")
            let ours = try totp.code(at: Date(timeIntervalSince1970: TimeInterval(time))).value
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/oathtool")
            process.arguments = ["--totp=\(algorithm.rawValue.lowercased())", "-d", String(digits), "-s", "\(period)s",
                                 "-N", "@\(time)", "--base32", base32]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            XCTAssertEqual(ours, output.trimmingCharacters(in: .whitespacesAndNewlines), "\(algorithm) \(digits) \(period)s at \(time)")
        }
    }
}
