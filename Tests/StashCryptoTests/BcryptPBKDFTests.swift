import XCTest
@testable import StashCrypto

/// OpenBSD's own regression vectors for bcrypt_pbkdf (the reference implementation).
final class BcryptPBKDFTests: XCTestCase {
    func testOpenBSDVectors() throws {
        let document = try XCTUnwrap(try loadVectors("openbsd-bcrypt-pbkdf.json") as? [String: Any])
        let tests = try XCTUnwrap(document["tests"] as? [[String: Any]])
        XCTAssertEqual(tests.count, 9)
        for test in tests {
            let expected = hex(try XCTUnwrap(test["output"] as? String))
            let key = try BcryptPBKDF.derive(
                password: SecretBytes(copying: hex(try XCTUnwrap(test["password"] as? String))),
                salt: hex(try XCTUnwrap(test["salt"] as? String)), rounds: try XCTUnwrap(test["rounds"] as? Int),
                count: expected.count)
            XCTAssertEqual(key.bytes, expected, "rounds \(test["rounds"] ?? "")")
        }
    }

    func testCostsOutOfRangeAreRefusedBeforeAnyWork() {
        let password = SecretBytes(copying: Array("password".utf8))
        for (rounds, count) in [(0, 32), (BcryptPBKDF.maximumRounds + 1, 32), (Int.max, 32), (16, 0), (16, 1_025)] {
            XCTAssertThrowsError(try BcryptPBKDF.derive(password: password, salt: [1], rounds: rounds, count: count)) {
                XCTAssertEqual(($0 as? StashCryptoError)?.code, .parametersRejected)
            }
        }
        XCTAssertThrowsError(try BcryptPBKDF.derive(password: password, salt: [], rounds: 1, count: 32))
    }
}
