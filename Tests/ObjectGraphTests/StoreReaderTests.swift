import Foundation
import GRDBSQLite
import XCTest
@testable import ObjectGraph

/// A second, read-only connection reads the coordinator's stores on another thread, while
/// the coordinator's own connection is in a transaction.
final class StoreReaderTests: ObjectGraphTestCase {
    private static func titles(_ reader: StoreReader, notesStore: String, passwordsStore: String) throws -> [String] {
        try reader.performRead { transaction in
            let notes = try transaction.qualified("ZNOTE", storeIdentifier: notesStore)
            let categories = try transaction.qualified("ZCATEGORY", storeIdentifier: passwordsStore)
            return try transaction.rows("SELECT ZTITLE FROM \(notes) UNION ALL SELECT ZNAME FROM \(categories)")
                .compactMap { if case .text(let text)? = $0.first { return text } else { return nil } }
        }
    }

    /// SQLite's memory statistics take one process-wide mutex at every allocation, which a reader
    /// and the coordinator's connection on two threads waited on (a tenth of a list's time):
    /// they are off before any connection opens, so SQLite counts none of its memory.
    func testSQLiteKeepsNoProcessWideMemoryCount() throws {
        let stack = try makeStack(.sqlite)
        for number in 0..<200 { stack.context.insertNewObject(forEntityName: "Note")["title"] = "note \(number)" }
        try stack.context.save()
        let reader = try XCTUnwrap(try stack.coordinator.makeReader())
        let notes = stack.notes.identifier
        let count = try reader.performRead { transaction in
            try transaction.rows("SELECT COUNT(*) FROM \(try transaction.qualified("ZNOTE", storeIdentifier: notes))")
        }
        XCTAssertEqual(count.first?.first, .integer(200))
        XCTAssertEqual(sqlite3_memory_used(), 0, "SQLite counted its allocations, under its global mutex")
    }

    func testAReaderOnAnotherThreadSeesWhatIsCommittedInBothStores() throws {
        let stack = try makeStack(.sqlite)
        stack.context.insertNewObject(forEntityName: "Note")["title"] = "groceries"
        stack.context.insertNewObject(forEntityName: "Category")["name"] = "Banking"
        try stack.context.save()
        let reader = try XCTUnwrap(try stack.coordinator.makeReader())
        let (notesStore, passwordsStore) = (stack.notes.identifier, stack.passwords.identifier)

        let done = DispatchSemaphore(value: 0)
        let result = LockedResult()
        // The coordinator's connection is inside a read transaction all the while.
        try stack.coordinator.performRead { _ in
            DispatchQueue.global().async {
                result.set(Result { try Self.titles(reader, notesStore: notesStore, passwordsStore: passwordsStore) })
                done.signal()
            }
            done.wait()
        }
        XCTAssertEqual(try result.get().sorted(), ["Banking", "groceries"])

        stack.context.insertNewObject(forEntityName: "Note")["title"] = "later"
        try stack.context.save()
        XCTAssertEqual(try Self.titles(reader, notesStore: notesStore, passwordsStore: passwordsStore).sorted(),
                       ["Banking", "groceries", "later"],
                       "each read sees the latest commit")
    }

    func testTheReaderWritesNothing() throws {
        let stack = try makeStack(.sqlite)
        stack.context.insertNewObject(forEntityName: "Note")["title"] = "keep me"
        try stack.context.save()
        let reader = try XCTUnwrap(try stack.coordinator.makeReader())
        XCTAssertThrowsError(try reader.performRead { transaction in
            let notes = try transaction.qualified("ZNOTE", storeIdentifier: stack.notes.identifier)
            try transaction.execute("DELETE FROM \(notes)")
        }) { error in
            XCTAssertTrue("\(error)".contains("readonly"), "\(error)")
        }
        XCTAssertEqual(
            try Self.titles(reader, notesStore: stack.notes.identifier, passwordsStore: stack.passwords.identifier),
            ["keep me"])
    }

    /// A store file replaced since the coordinator opened it: a reader opening the path would
    /// read another file than the coordinator's, so there is none.
    func testNoReaderWhenAStorePathNamesAnotherFileThanTheOneOpen() throws {
        let stack = try makeStack(.sqlite)
        stack.context.insertNewObject(forEntityName: "Note")["title"] = "open"
        try stack.context.save()
        XCTAssertNotNil(try stack.coordinator.makeReader())
        let path = try XCTUnwrap(stack.notes.url)
        let copy = directory.appendingPathComponent("copy.sqlite")
        try FileManager.default.copyItem(at: path, to: copy)
        XCTAssertEqual(rename(copy.path, path.path), 0)
        XCTAssertNil(try stack.coordinator.makeReader())
    }

    func testStoresThatLiveInTheConnectionOnlyHaveNoReader() throws {
        let stack = try makeStack(.inMemory)
        XCTAssertNil(try stack.coordinator.makeReader())
    }
}

/// A result handed from another thread, read after it signalled.
private final class LockedResult: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<[String], Error>?

    func set(_ value: Result<[String], Error>) { lock.withLock { result = value } }
    func get() throws -> [String] { try lock.withLock { try XCTUnwrap(result) }.get() }
}
