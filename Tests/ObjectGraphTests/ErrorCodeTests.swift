import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

/// Every error code is defined once, in `ErrorCodes.swift`, and no two share a number; store
/// failures reach callers by name, not by SQLite's number.
final class ErrorCodeTests: ObjectGraphTestCase {
    static let sourcesURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/ObjectGraph").standardizedFileURL

    func testNoTwoCodesShareANumber() {
        let numbers = ObjectGraphError.Code.allCases.map(\.rawValue) + ValidationError.Code.allCases.map(\.rawValue)
        let shared = Dictionary(grouping: numbers, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        XCTAssertEqual(shared, [], "codes defined more than once")
        // The regression behind this test: an unsorted fetched-results request read as a damaged value.
        XCTAssertNotEqual(ObjectGraphError.Code.invalidRequest, .undecodableValue)
    }

    /// `allCases` lists every code `ErrorCodes.swift` defines, and no other file defines one.
    func testEveryCodeIsDefinedInErrorCodesAndListed() throws {
        let file = Self.sourcesURL.appendingPathComponent("Support/ErrorCodes.swift")
        let text = try String(contentsOf: file, encoding: .utf8)
        let definition = try NSRegularExpression(pattern: #"public static let \w+ = Self\(rawValue: (\d+)\)"#)
        let defined = definition.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            Int(text[Range($0.range(at: 1), in: text)!])!
        }
        let listed = ObjectGraphError.Code.allCases.map(\.rawValue) + ValidationError.Code.allCases.map(\.rawValue)
        XCTAssertEqual(defined.sorted(), listed.sorted(), "ErrorCodes.swift's definitions and allCases differ")

        let elsewhere = try NSRegularExpression(pattern: #"(Code|Self)\(rawValue: *\d+\)|extension \w+\.Code\b"#)
        let files = FileManager.default.enumerator(at: Self.sourcesURL, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" && $0.lastPathComponent != "ErrorCodes.swift" }
        XCTAssertGreaterThan(files.count, 10, "the sources were found")
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            XCTAssertNil(elsewhere.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
                         "\(file.lastPathComponent) defines an error code outside ErrorCodes.swift")
        }
    }

    func testSQLiteResultCodesAreNamed() {
        typealias Failure = ObjectGraphError.StoreFailure
        let expected: [(ResultCode, Failure)] = [
            (.SQLITE_BUSY, .busy), (.SQLITE_LOCKED, .busy), (.SQLITE_FULL, .full), (.SQLITE_READONLY, .readOnly),
            (.SQLITE_PERM, .permission), (.SQLITE_AUTH, .permission), (.SQLITE_CORRUPT, .corrupt),
            (.SQLITE_NOTADB, .corrupt), (.SQLITE_CANTOPEN, .cannotOpen), (.SQLITE_CONSTRAINT, .constraint),
            (.SQLITE_IOERR, .ioError), (.SQLITE_ERROR, .other), (.SQLITE_MISMATCH, .other),
            // Extended codes are named by their primary code.
            (.SQLITE_BUSY_SNAPSHOT, .busy), (.SQLITE_CONSTRAINT_UNIQUE, .constraint), (.SQLITE_IOERR_WRITE, .ioError),
        ]
        for (code, failure) in expected {
            XCTAssertEqual(Failure(code), failure, "\(code)")
            let error = ObjectGraphError(code: .saveFailed, message: "m", underlyingError: DatabaseError(resultCode: code))
            XCTAssertEqual(error.storeFailure, failure, "\(code)")
        }
        XCTAssertNil(ObjectGraphError(code: .saveFailed, message: "no SQLite error").storeFailure)
    }

    func testAMissingStoreIsNamedMissing() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
        var options = StoreOptions()
        options.mustExist = true
        XCTAssertThrowsError(try coordinator.addPersistentStore(
            type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("absent.sqlite"),
            options: options)) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .storeOpenFailed)
            XCTAssertEqual(error?.storeFailure, .missing)
        }
    }

    func testAFileThatIsNoDatabaseIsNamedCorrupt() throws {
        let url = directory.appendingPathComponent("garbage.sqlite")
        try Data(repeating: 0x5A, count: 4096).write(to: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
        XCTAssertThrowsError(try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: url)) {
            XCTAssertEqual(($0 as? ObjectGraphError)?.storeFailure, .corrupt, "\($0)")
        }
    }
}
