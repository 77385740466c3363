import Foundation
import XCTest
@testable import StashCrypto

/// The sync log file and the wrapped sync key (SYNC.md) against vectors made by an independent
/// implementation (`Vectors/generate-sync-vectors.py`, Python `cryptography`), one scenario a file.
final class SyncEnvelopeTests: XCTestCase {
    func vectors(_ prefix: String) throws -> [[String: Any]] {
        let folder = Bundle.module.url(forResource: "Vectors", withExtension: nil)!.appendingPathComponent("sync")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasPrefix(prefix) }.sorted()
        return try names.map { try XCTUnwrap(try loadVectors("sync/\($0)") as? [String: Any]) }
    }

    func outcome(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "success"
        } catch let error as StashCryptoError {
            switch error.code {
            case .authenticationFailed: return "authentication-failed"
            case .invalidInput: return "invalid-input"
            case .unsupportedVersion: return "unsupported-version"
            default: return error.code.rawValue
            }
        } catch {
            return "\(error)"
        }
    }

    func testLogFileVectors() throws {
        let all = try vectors("log-")
        XCTAssertEqual(all.count, 9)
        for vector in all {
            let name = vector["scenario"] as! String
            let syncKey = SecretBytes(copying: hex(vector["syncKey"] as! String))
            let file = hex(vector["file"] as! String)
            let result = outcome {
                let (header, payload) = try SyncLogFile.open(file, logKey: try SyncKey.logKey(syncKey: syncKey))
                XCTAssertEqual(header, SyncLogHeader(device: hex(vector["device"] as! String), sequence: 3,
                                                     previousHash: hex(vector["previousHash"] as! String)), name)
                XCTAssertEqual(String(decoding: payload, as: UTF8.self), vector["payload"] as? String, name)
            }
            XCTAssertEqual(result, vector["expected"] as? String, name)
        }
    }

    func testWrappedSyncKeyVectorsAndTheDataKeyCheck() throws {
        let all = try vectors("wrap-")
        XCTAssertEqual(all.count, 4)
        for vector in all {
            let name = vector["scenario"] as! String
            let dataKey = SecretBytes(copying: hex(vector["dataKey"] as! String))
            let result = outcome {
                let key = try SyncKey.unwrap(hex(vector["wrapped"] as! String), dataKey: dataKey)
                XCTAssertEqual(key.bytes, hex(vector["syncKey"] as! String), name)
            }
            XCTAssertEqual(result, vector["expected"] as? String, name)
        }
        let check = try XCTUnwrap(try vectors("data-key-check").first)
        XCTAssertEqual(try SyncKey.dataKeyCheck(dataKey: SecretBytes(copying: hex(check["dataKey"] as! String))),
                       hex(check["check"] as! String))
    }

    func testWhatWeSealTheOtherImplementationsLayoutOpensAndEveryNonceIsNew() throws {
        let logKey = try SyncKey.logKey(syncKey: SecretBytes.random(count: 32))
        let header = SyncLogHeader(device: Array(repeating: 7, count: 16), sequence: 1,
                                   previousHash: Array(repeating: 0, count: 32))
        let first = try SyncLogFile.seal(Array("{}".utf8), header: header, logKey: logKey)
        let second = try SyncLogFile.seal(Array("{}".utf8), header: header, logKey: logKey)
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(try SyncLogFile.header(of: first), header)
        XCTAssertEqual(try SyncLogFile.open(second, logKey: logKey).1, Array("{}".utf8))
        XCTAssertThrowsError(try SyncLogFile.seal([], header: SyncLogHeader(device: [1], sequence: 1,
                                                                            previousHash: []), logKey: logKey))
    }
}
