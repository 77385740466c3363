import Foundation
import XCTest
@testable import StashCrypto

/// Loads a JSON vector file from the test bundle.
func loadVectors(_ path: String) throws -> Any {
    let url = Bundle.module.url(forResource: "Vectors", withExtension: nil)!.appendingPathComponent(path)
    return try JSONSerialization.jsonObject(with: Data(contentsOf: url))
}

func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

final class AESGCMKnownAnswerTests: XCTestCase {
    func testWycheproofAES256GCMVectors() throws {
        let document = try XCTUnwrap(try loadVectors("wycheproof-aes-256-gcm.json") as? [String: Any])
        let tests = try XCTUnwrap(document["tests"] as? [[String: Any]])
        XCTAssertGreaterThan(tests.count, 15)
        var invalidCount = 0
        for test in tests {
            let id = test["tcId"] as! Int
            let key = SecretBytes(copying: hex(test["key"] as! String))
            let nonce = hex(test["iv"] as! String), aad = hex(test["aad"] as! String)
            let message = hex(test["msg"] as! String)
            let box = AES256GCM.SealedBox(nonce: nonce, ciphertext: hex(test["ct"] as! String), tag: hex(test["tag"] as! String))
            if test["result"] as! String == "valid" {
                XCTAssertEqual(try AES256GCM.seal(message, key: key, nonce: nonce, associatedData: aad), box, "tcId \(id) seal")
                XCTAssertEqual(try AES256GCM.open(box, key: key, associatedData: aad).bytes, message, "tcId \(id) open")
            } else {
                invalidCount += 1
                XCTAssertThrowsError(try AES256GCM.open(box, key: key, associatedData: aad), "tcId \(id) must fail") { error in
                    XCTAssertEqual((error as? StashCryptoError)?.code, .authenticationFailed)
                }
            }
        }
        XCTAssertGreaterThan(invalidCount, 10)
    }

    func testWrongSizesAreRejectedWithAMessage() {
        XCTAssertThrowsError(try AES256GCM.seal([1], key: SecretBytes(count: 16))) { error in
            XCTAssertEqual((error as? StashCryptoError)?.code, .invalidInput)
            XCTAssertTrue("\(error)".contains("32-byte key"))
        }
        XCTAssertThrowsError(try AES256GCM.seal([1], key: SecretBytes(count: 32), nonce: [0, 1]))
    }

    func testSealUsesAFreshNonceEachTime() throws {
        let key = try SecretBytes.random(count: 32)
        let a = try AES256GCM.seal(Array("same".utf8), key: key)
        let b = try AES256GCM.seal(Array("same".utf8), key: key)
        XCTAssertNotEqual(a.nonce, b.nonce)
        XCTAssertNotEqual(a.ciphertext, b.ciphertext)
    }
}

final class ScryptKnownAnswerTests: XCTestCase {
    func testRFC7914Vectors() throws {
        let document = try XCTUnwrap(try loadVectors("rfc7914-scrypt.json") as? [String: Any])
        for test in try XCTUnwrap(document["tests"] as? [[String: Any]]) {
            let n = test["N"] as! Int
            if test["expensive"] as? Bool == true, ProcessInfo.processInfo.environment["MYSTASH_SKIP_EXPENSIVE_SCRYPT"] == "1" {
                print("Skipping the RFC 7914 N=\(n) vector (1 GiB): MYSTASH_SKIP_EXPENSIVE_SCRYPT=1")
                continue
            }
            let parameters = ScryptParameters(logN: UInt8(n.trailingZeroBitCount), r: UInt32(test["r"] as! Int), p: UInt32(test["p"] as! Int))
            let derived = try Scrypt.deriveKey(password: Array((test["password"] as! String).utf8), salt: Array((test["salt"] as! String).utf8),
                                               parameters: parameters, length: test["dkLen"] as! Int)
            XCTAssertEqual(derived.bytes, hex(test["derived"] as! String), "N=\(n)")
        }
    }

    func testParametersBeyondTheCapsAreRefusedWithoutDeriving() {
        for parameters in [ScryptParameters(logN: 21), ScryptParameters(logN: 20, r: 16), ScryptParameters(logN: 10, r: 33), ScryptParameters(logN: 10, p: 17), ScryptParameters(logN: 0)] {
            XCTAssertThrowsError(try Scrypt.deriveKey(password: [1], salt: [1], parameters: parameters, length: 32), "\(parameters)") { error in
                XCTAssertEqual((error as? StashCryptoError)?.code, .parametersRejected)
            }
        }
    }
}

final class FieldEnvelopeVectorTests: XCTestCase {
    /// Each file under Vectors/field is one scenario with its expected outcome.
    func testEveryScenarioFile() throws {
        let folder = Bundle.module.url(forResource: "Vectors", withExtension: nil)!.appendingPathComponent("field")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 12)
        var outcomes: Set<String> = []
        for file in files {
            let vector = try XCTUnwrap(try loadVectors("field/\(file)") as? [String: Any])
            let expected = vector["expected"] as! String
            outcomes.insert(expected)
            let key = SecretBytes(copying: hex(vector["key"] as! String))
            let context = FieldContext(storeIdentifier: vector["store"] as! String, entity: vector["entity"] as! String,
                                       attribute: vector["attribute"] as! String, primaryKey: Int64(vector["primaryKey"] as! Int))
            let envelope = hex(vector["envelope"] as! String)
            do {
                let plaintext = try FieldEnvelope.open(envelope, key: key, context: context)
                XCTAssertEqual(expected, "success", file)
                XCTAssertEqual(plaintext, vector["plaintext"] as? String, file)
                // Our own seal with the vector's nonce gives the same bytes.
                XCTAssertEqual(try FieldEnvelope.seal(plaintext, key: key, context: context, nonce: Array(envelope[1..<13])), envelope, file)
            } catch let error as StashCryptoError {
                let codes: [String: StashCryptoError.Code] = ["authentication-failed": .authenticationFailed, "truncated": .invalidInput,
                                                              "unsupported-version": .unsupportedVersion]
                XCTAssertEqual(error.code, codes[expected], "\(file): \(error)")
            }
        }
        XCTAssertEqual(outcomes, ["success", "authentication-failed", "truncated", "unsupported-version"])
    }

    /// A key set up once opens every scenario as a fresh one does, in turn, whatever the one
    /// before it did (a failed tag leaves nothing behind for the next field).
    func testAKeySetUpOnceOpensEachScenarioAsAFreshKeyDoes() throws {
        let folder = Bundle.module.url(forResource: "Vectors", withExtension: nil)!.appendingPathComponent("field")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        var keyed: [String: AES256GCM.KeyedContext] = [:]
        var failures = 0
        for file in files + files.reversed() {
            let vector = try XCTUnwrap(try loadVectors("field/\(file)") as? [String: Any])
            let keyHex = vector["key"] as! String
            let key = SecretBytes(copying: hex(keyHex))
            let context = FieldContext(storeIdentifier: vector["store"] as! String, entity: vector["entity"] as! String,
                                       attribute: vector["attribute"] as! String, primaryKey: Int64(vector["primaryKey"] as! Int))
            let envelope = hex(vector["envelope"] as! String)
            let reused = try keyed[keyHex] ?? AES256GCM.KeyedContext(forDecryptingWith: key)
            keyed[keyHex] = reused
            let fresh = Result { try FieldEnvelope.open(envelope, key: key, context: context) }
            let once = Result { try FieldEnvelope.open(envelope, with: reused, context: context) }
            switch (fresh, once) {
            case (.success(let a), .success(let b)): XCTAssertEqual(a, b, file)
            case (.failure(let a as StashCryptoError), .failure(let b as StashCryptoError)):
                XCTAssertEqual(a.code, b.code, file)
                failures += 1
            default: XCTFail("\(file): \(fresh) against \(once)")
            }
        }
        XCTAssertGreaterThan(failures, 2)
    }
}

final class KeySlotTests: XCTestCase {
    let cheap = ScryptParameters(logN: 10)

    func testUnlockWithTheRightPasswordOnly() throws {
        let (slot, dataKey) = try KeySlot.create(password: .password("correct horse"), parameters: cheap)
        let reread = try KeySlot(serialized: slot.serialized)
        XCTAssertEqual(try reread.unlock(password: .password("correct horse")), dataKey)
        XCTAssertThrowsError(try reread.unlock(password: .password("wrong horse"))) { error in
            XCTAssertEqual((error as? StashCryptoError)?.code, .wrongPassword)
        }
    }

    func testPasswordsAreNormalizedToNFC() throws {
        let (slot, dataKey) = try KeySlot.create(password: .password("caf\u{E9}"), parameters: cheap)
        XCTAssertEqual(try slot.unlock(password: .password("cafe\u{301}")), dataKey)
    }

    func testRewrappingKeepsTheDataKeyAndChangesTheSlot() throws {
        let (slot, dataKey) = try KeySlot.create(password: .password("old"), parameters: cheap)
        let rewrapped = try KeySlot.wrapping(dataKey, password: .password("new"), parameters: cheap)
        XCTAssertNotEqual(slot.slotIdentifier, rewrapped.slotIdentifier)
        XCTAssertNotEqual(slot.salt, rewrapped.salt)
        XCTAssertEqual(try rewrapped.unlock(password: .password("new")), dataKey)
        XCTAssertThrowsError(try rewrapped.unlock(password: .password("old")))
    }

    func testDamageIsToldApartFromAWrongPassword() throws {
        let (slot, _) = try KeySlot.create(password: .password("pw"), parameters: cheap)
        for index in [5, 6, 20, 60, 100, 120] {
            var bytes = slot.serialized
            bytes[index] ^= 0x40
            XCTAssertThrowsError(try KeySlot(serialized: bytes), "byte \(index)") { error in
                XCTAssertEqual((error as? StashCryptoError)?.code, .damagedKeySlot, "byte \(index)")
            }
        }
        XCTAssertThrowsError(try KeySlot(serialized: Array(slot.serialized.dropLast()))) { error in
            XCTAssertEqual((error as? StashCryptoError)?.code, .damagedKeySlot)
        }
    }

    /// Version 2's flag that the vault has an integrity record is under the wrapping's tag:
    /// cleared (with a fixed checksum), the slot no longer opens.
    func testTheIntegrityRecordFlagCannotBeClearedWithoutThePassword() throws {
        let (slot, _) = try KeySlot.create(password: .password("pw"), parameters: cheap)
        XCTAssertEqual(slot.serialized.count, 140)
        XCTAssertTrue(slot.requiresIntegrityRecord)
        var bytes = slot.serialized
        bytes[47] = 0
        bytes.replaceSubrange(108..<140, with: try SHA256Digest.hash(Array(bytes[0..<108])))
        let cleared = try KeySlot(serialized: bytes)
        XCTAssertFalse(cleared.requiresIntegrityRecord)
        XCTAssertThrowsError(try cleared.unlock(password: .password("pw"))) { error in
            XCTAssertEqual((error as? StashCryptoError)?.code, .wrongPassword)
        }
    }

    /// A version 1 slot (139 bytes, no flags) still opens, and becomes a version 2 slot that
    /// requires the record, with the same identity (sessions stay valid), salt and password.
    func testAVersion1SlotOpensAndIsMadeToRequireTheRecord() throws {
        let dataKey = try SecretBytes.random(count: 32)
        let old = try KeySlot.wrapping(dataKey, password: .password("pw"), parameters: cheap, version: 1)
        XCTAssertEqual(old.serialized.count, 139)
        let reread = try KeySlot(serialized: old.serialized)
        XCTAssertFalse(reread.requiresIntegrityRecord)
        let (opened, requiring) = try reread.unlockRequiringIntegrityRecord(password: .password("pw"))
        XCTAssertEqual(opened, dataKey)
        let upgraded = try KeySlot(serialized: try XCTUnwrap(requiring).serialized)
        XCTAssertTrue(upgraded.requiresIntegrityRecord)
        XCTAssertEqual(upgraded.version, 2)
        XCTAssertEqual(upgraded.slotIdentifier, old.slotIdentifier)
        XCTAssertEqual(upgraded.salt, old.salt)
        XCTAssertEqual(try upgraded.unlock(password: .password("pw")), dataKey)
        XCTAssertNil(try upgraded.unlockRequiringIntegrityRecord(password: .password("pw")).requiring)
    }

    func testAnEditedCostBeyondTheCapsIsRefusedEvenWithAValidChecksum() throws {
        let (slot, _) = try KeySlot.create(password: .password("pw"), parameters: cheap)
        var bytes = slot.serialized
        bytes[6] = 30 // log2(N) = 30: hours and 128 GiB
        bytes.replaceSubrange(108..<140, with: try SHA256Digest.hash(Array(bytes[0..<108])))
        XCTAssertThrowsError(try KeySlot(serialized: bytes)) { error in
            XCTAssertEqual((error as? StashCryptoError)?.code, .parametersRejected)
        }
    }
}

final class SecretBytesTests: XCTestCase {
    func testConstantTimeEqualityAndRandomness() throws {
        XCTAssertEqual(SecretBytes(copying: [1, 2, 3]), SecretBytes(copying: [1, 2, 3]))
        XCTAssertNotEqual(SecretBytes(copying: [1, 2, 3]), SecretBytes(copying: [1, 2, 4]))
        XCTAssertNotEqual(SecretBytes(copying: [1, 2]), SecretBytes(copying: [1, 2, 3]))
        XCTAssertNotEqual(try SecretBytes.random(count: 32), try SecretBytes.random(count: 32))
        XCTAssertEqual(SecretBytes(count: 0).count, 0)
    }

    func testOpenSSLFailuresCarryOpenSSLsOwnText() {
        // OpenSSL refuses scrypt when the memory limit is below what N and r need.
        XCTAssertThrowsError(try Scrypt.derive(password: [1], salt: [1], parameters: ScryptParameters(logN: 14), length: 32, memoryLimit: 1024)) { error in
            let error = error as? StashCryptoError
            XCTAssertEqual(error?.code, .library)
            XCTAssertTrue(error?.message.hasPrefix("EVP_PBE_scrypt failed: error:") ?? false, error?.message ?? "")
            XCTAssertTrue(error?.message.contains("memory limit exceeded") ?? false, error?.message ?? "")
        }
    }

    func testUniformRandomStaysInRange() throws {
        var seen = Set<UInt32>()
        for _ in 0..<500 { seen.insert(try SecureRandom.uniform(below: 10)) }
        XCTAssertEqual(seen, Set(0..<10))
    }
}

final class HKDFKnownAnswerTests: XCTestCase {
    func testRFC5869Vectors() throws {
        let document = try XCTUnwrap(try loadVectors("rfc5869-hkdf-sha256.json") as? [String: Any])
        for test in try XCTUnwrap(document["tests"] as? [[String: Any]]) {
            let okm = try HKDF.sha256(key: SecretBytes(copying: hex(test["ikm"] as! String)),
                                      salt: hex(test["salt"] as! String),
                                      info: hex(test["info"] as! String), length: test["length"] as! Int)
            XCTAssertEqual(okm.bytes, hex(test["okm"] as! String))
        }
    }
}

/// Known answers computed with Python's `hmac` module.
final class HMACKnownAnswerTests: XCTestCase {
    let vectors: [(key: String, message: String, mac: String)] = [
        ("", "", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"),
        ("key", "The quick brown fox jumps over the lazy dog",
         "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"),
        ("key", "", "5d5d139563c95b5967b9bd9a8c9b233a9dedb45072794cd232dc1b74832607d0"),
    ]

    func testOneShotAndAKeyUsedForManyMessagesGiveTheKnownAnswers() throws {
        for vector in vectors {
            let mac = try HMAC.authenticationCode(.sha256, key: Array(vector.key.utf8), message: Array(vector.message.utf8))
            XCTAssertEqual(mac, hex(vector.mac), "key '\(vector.key)'")
        }
        // One key, several messages in a row: each starts afresh under the same key.
        let key = try HMAC.Key(.sha256, bytes: Array("key".utf8))
        for vector in vectors.dropFirst() + vectors.dropFirst() {
            XCTAssertEqual(try key.authenticationCode(of: Array(vector.message.utf8)), hex(vector.mac))
        }
    }
}
