import Foundation
import XCTest
import GRDB
@testable import ObjectGraph

/// A keyed 32-byte digest for the tests (not a MAC anyone should use: the mechanics are under
/// test, not the cryptography, which the application supplies).
private final class TestAuthenticator: RowAuthenticator {
    let key: UInt64
    init(key: UInt64) { self.key = key }

    func authenticationCode(of message: [UInt8]) throws -> [UInt8] {
        (0..<4).flatMap { lane -> [UInt8] in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ key &+ UInt64(lane) &* 0x9e37_79b9_7f4a_7c15
            for byte in message { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return withUnsafeBytes(of: hash.bigEndian) { Array($0) }
        }
    }
}

/// Row authentication on two SQLite stores: notes with attachments (kept in their note's
/// bucket), and the stores' other tables, kept by every save and checked whole or one read at a
/// time.
final class RowAuthenticationTests: ObjectGraphTestCase {
    static let tables = RowAuthentication.Tables(
        tags: "TEST_TAG", buckets: "TEST_BUCKET", record: "TEST_RECORD", bucketIndex: "TEST_TAG_BUCKET")

    var stack: Stack!
    var authentication: RowAuthentication!
    var notes: [ManagedObject] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        stack = try makeStack(.sqlite)
        let model = stack.coordinator.managedObjectModel
        let stores = [stack.notes, stack.passwords].map { store in
            let roots = model.entities(forConfiguration: store.configurationName ?? "").filter { $0.superentity == nil }
            return RowAuthentication.Store(
                identifier: store.identifier, displayName: store.url?.lastPathComponent ?? "",
                tables: Dictionary(uniqueKeysWithValues: roots.map { ($0.tableName, $0.name) }),
                bucketing: ["ZATTACHMENT": .parent(column: "ZNOTE", table: "ZNOTE"), "ZCATEGORY": .wholeTable])
        }
        authentication = RowAuthentication(
            authenticator: TestAuthenticator(key: 42), stores: stores, model: model.versionIdentifier,
            tables: Self.tables)
        try stack.coordinator.performWrite { try self.authentication.create(in: $0) }
        stack.coordinator.writeObserver = authentication
        for number in 0..<40 {
            let note = stack.context.insertNewObject(forEntityName: "Note")
            note["title"] = "note \(number)"
            for part in 0..<2 {
                let attachment = stack.context.insertNewObject(forEntityName: "Attachment")
                attachment["data"] = Data("note \(number) part \(part)".utf8)
                attachment["note"] = note
            }
            notes.append(note)
        }
        try stack.context.save()
    }

    func key(_ object: ManagedObject) throws -> StoredRowKey {
        StoredRowKey(storeIdentifier: try XCTUnwrap(object.objectID.storeIdentifier),
                     table: object.entity.tableName, primaryKey: try XCTUnwrap(object.objectID.primaryKey))
    }

    /// What a read of `note` and its attachments (by the note's bucket) finds wrong.
    func problems(readingNote note: ManagedObject) throws -> [IntegrityProblem] {
        let id = try XCTUnwrap(note.objectID.primaryKey)
        let rows = try [key(note)] + (try XCTUnwrap(note["attachments"] as? [ManagedObject])).map(key)
        let lookup = RowAuthentication.Lookup(
            storeIdentifier: stack.notes.identifier, bucket: RowAuthentication.bucket(table: "ZNOTE", primaryKey: id),
            table: "ZATTACHMENT", column: "ZNOTE", value: .integer(id))
        return try stack.coordinator.performRead {
            try XCTUnwrap(try self.authentication.verify(rows: rows, lookups: [lookup], in: $0))
        }
    }

    /// Two notes whose buckets differ.
    func notesInTwoBuckets() throws -> (ManagedObject, ManagedObject) {
        let first = notes[0]
        let bucket = { (note: ManagedObject) in
            RowAuthentication.bucket(table: "ZNOTE", primaryKey: note.objectID.primaryKey ?? 0)
        }
        return (first, try XCTUnwrap(notes.first { bucket($0) != bucket(first) }))
    }

    /// Runs SQL on a store from another connection, as someone editing the file would.
    func tamper(_ sql: String) throws {
        let database = try DatabaseQueue(path: try XCTUnwrap(stack.notes.url).path)
        try database.write { try $0.execute(sql: sql) }
    }

    func testEverySaveKeepsTheTagsAndBucketsAndNothingIsFound() throws {
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        notes[3]["title"] = "renamed"
        stack.context.delete(notes[4])
        try stack.context.save()
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        XCTAssertEqual(try problems(readingNote: notes[3]), [])
        let tags = try stack.coordinator.performRead { try $0.rows("SELECT COUNT(*) FROM TEST_TAG") }
        XCTAssertEqual(tags.first?.first, .integer(39 + 78), "one tag per row: 39 notes, 78 attachments")
    }

    /// Whole-store verification reads rows in place; saves and the record's creation tag rows
    /// from copied values. Both must encode every kind of stored value alike, the odd ones too:
    /// text holding a NUL (whole) or invalid UTF-8 (repaired), other text, reals, the largest
    /// integer, an empty blob, NULL.
    func testTagsOfRowsReadInPlaceAgreeWithTagsOfCopiedValuesForEveryKindOfValue() throws {
        let values = [
            "CAST(X'61620063' AS TEXT)", "CAST(X'66FF6F' AS TEXT)", "'café ☕'", "-0.0", "2.5",
            "9223372036854775807", "X''", "NULL",
        ]
        for (offset, value) in values.enumerated() {
            try tamper("UPDATE ZATTACHMENT SET ZDATA = \(value) WHERE Z_PK = \(offset + 1)")
        }
        try tamper("UPDATE ZNOTE SET ZTITLE = CAST(X'6E6F00746521' AS TEXT) WHERE Z_PK = 1")
        try tamper("UPDATE ZNOTE SET ZTITLE = CAST(X'C3' AS TEXT) WHERE Z_PK = 2")
        let changed = try XCTUnwrap(try stack.coordinator.performRead { try self.authentication.verify(in: $0) })
        XCTAssertEqual(changed.count, values.count + 2, "\(changed)")
        // Trusting the rows as they are, from copied values: read in place, they agree.
        try stack.coordinator.performWrite { try self.authentication.create(in: $0) }
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
    }

    /// GRDB reads text up to its first NUL, and so does anything shown from it; bytes put after
    /// a NUL are still a change to the row, found by a whole check and by a read of the row.
    func testBytesPutAfterANulInTextAreFoundThoughWhatIsReadIsUnchanged() throws {
        let note = notes[3]
        let id = try XCTUnwrap(note.objectID.primaryKey)
        try tamper("UPDATE ZNOTE SET ZTITLE = ZTITLE || CAST(X'00206576696C' AS TEXT) WHERE Z_PK = \(id)")
        let stored = try DatabaseQueue(path: try XCTUnwrap(stack.notes.url).path).read { database in
            (try String.fetchOne(database, sql: "SELECT ZTITLE FROM ZNOTE WHERE Z_PK = ?", arguments: [id]),
             try Int.fetchOne(database, sql: "SELECT length(CAST(ZTITLE AS BLOB)) FROM ZNOTE WHERE Z_PK = ?",
                              arguments: [id]))
        }
        XCTAssertEqual(stored.0, "note 3", "GRDB's reading stops at the NUL")
        XCTAssertEqual(stored.1, "note 3".utf8.count + 6)
        let whole = try XCTUnwrap(try stack.coordinator.performRead { try self.authentication.verify(in: $0) })
        XCTAssertEqual(whole.map(\.primaryKey), [id], "\(whole)")
        XCTAssertEqual(try problems(readingNote: note).map(\.primaryKey), [id])
    }

    /// Tags whose key is not an integer are damaged entries; a whole page of them (4,096, more
    /// than one read of tags takes) must be passed over, not read again and again.
    func testAPageOfTagsWithTextKeysIsReportedNotLoopedOn() throws {
        try tamper("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4100)
            INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) SELECT 'ZNOTE', 'k' || i, 7, randomblob(32) FROM n
            """)
        let problems = try XCTUnwrap(try stack.coordinator.performRead { try self.authentication.verify(in: $0) })
        XCTAssertEqual(problems.filter { $0.message == "its table of row tags holds a damaged entry" }.count, 4100,
                       "\(problems.prefix(3))")
        XCTAssertFalse(problems.contains { $0.primaryKey != nil }, "every row keeps its own tag: \(problems.prefix(3))")
    }

    /// Found by an outside review: the pages of a table's tags started above the smallest
    /// integer, so a tag keyed at it (or at a real below it) was read by no pass.
    func testTagsKeyedAtOrBelowTheSmallestIntegerAreRead() throws {
        try tamper("INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) "
            + "VALUES ('ZNOTE', -9223372036854775808, 7, randomblob(32)), ('ZNOTE', -1e300, 'seven', X'00')")
        let problems = try stack.coordinator.performRead { try self.authentication.verify(in: $0) } ?? []
        let messages = problems.map(\.message)
        XCTAssertTrue(problems.contains { $0.primaryKey == Int64.min && $0.message.contains("deleted outside") },
                      "\(messages)")
        XCTAssertEqual(messages.filter { $0 == "its table of row tags holds a damaged entry" }.count, 1, "\(messages)")
    }

    /// Found by an outside review (and missed before the pages were summed too): a row deleted
    /// and its own tag given a key that is no integer still added up in its bucket, naming no
    /// row. Such a key is a damaged entry now.
    func testARowDeletedWithItsTagGivenAKeyThatIsNoIntegerIsFound() throws {
        let keys: [(Int64) -> String] = [{ _ in "'gone'" }, { "\($0) + 0.5" }]
        for (index, key) in keys.enumerated() {
            let part = try XCTUnwrap((notes[5 + index]["attachments"] as? [ManagedObject])?.first)
            let id = try XCTUnwrap(part.objectID.primaryKey)
            try tamper("DELETE FROM ZATTACHMENT WHERE Z_PK = \(id); "
                + "UPDATE TEST_TAG SET ZPK = \(key(id)) WHERE ZTABLE = 'ZATTACHMENT' AND ZPK = \(id)")
            let messages = (try stack.coordinator.performRead { try self.authentication.verify(in: $0) } ?? [])
                .map(\.message)
            XCTAssertTrue(messages.contains("its table of row tags holds a damaged entry"), "\(key(id)): \(messages)")
            XCTAssertFalse(try problems(readingNote: notes[5 + index]).isEmpty, key(id))
        }
    }

    /// A whole check reads each table's tags with its rows, and the others only when the count
    /// of tags says some were not read: each damaged entry is named once, a tag of a table the
    /// store does not have is named and counted in its bucket, whichever table's pages hold it.
    func testDamagedTagsAndTagsOfNoTableAreEachNamedOnce() throws {
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        try tamper("""
            INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES ('ZNOTE', 999999, 7, randomblob(31));
            INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES ('ZATTACHMENT', 999999, 'seven', randomblob(32));
            INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES (CAST('ZNOTE' AS BLOB), 5, 9, randomblob(32));
            INSERT INTO TEST_TAG (ZTABLE, ZPK, ZBUCKET, ZTAG) VALUES ('ZELSEWHERE', 1, 11, randomblob(32));
            """)
        let problems = try XCTUnwrap(try stack.coordinator.performRead { try self.authentication.verify(in: $0) })
        let messages = problems.map(\.message)
        XCTAssertEqual(messages.filter { $0 == "its table of row tags holds a damaged entry" }.count, 3, "\(messages)")
        XCTAssertEqual(messages.filter { $0 == "its table of row tags names a table it does not cover" }.count, 1,
                       "\(messages)")
        // Only the whole tag of no table is summed: its bucket, and no other, no longer adds up.
        let buckets = messages.filter { $0.hasPrefix("rows and their tags were removed or replaced together") }
        XCTAssertEqual(buckets.count, 1, "\(messages)")
        XCTAssertTrue(buckets.first?.contains("(bucket 11:") == true, "\(messages)")
        XCTAssertFalse(problems.contains { $0.primaryKey != nil }, "every row keeps its own tag: \(problems)")
    }

    /// Batch requests write rows in SQL, not through a save: the record follows them all the
    /// same, cascades and nullified rows included, so nothing they did reads as tampering.
    func testBatchRequestsKeepTheTagsAndBucketsAndNothingIsFound() throws {
        let context = stack.context
        try context.execute(BatchInsertRequest(entityName: "Note", objects: (0..<30).map { ["title": "batch \($0)"] }))
        try context.execute(BatchUpdateRequest(
            entityName: "Note", predicate: try Predicate(format: "title BEGINSWITH %@", "note 1"),
            propertiesToUpdate: ["title": "renamed"]))
        let gone = try context.execute(BatchDeleteRequest(
            entityName: "Note", predicate: try Predicate(format: "title BEGINSWITH %@", "note 2")))
        XCTAssertEqual(gone.objectIDs.filter { $0.entityName == "Attachment" }.count, 22, "11 notes' attachments")
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        XCTAssertEqual(try problems(readingNote: notes[1]), [])
        let tags = try stack.coordinator.performRead { try $0.rows("SELECT COUNT(*) FROM TEST_TAG") }
        XCTAssertEqual(tags.first?.first, .integer(40 - 11 + 30 + 80 - 22), "one tag per row left")
    }

    func testAChangedAttachmentIsFoundByItsNotesReadAndNotByAnotherNotes() throws {
        let (changed, other) = try notesInTwoBuckets()
        let part = try XCTUnwrap((changed["attachments"] as? [ManagedObject])?.first)
        try tamper("UPDATE ZATTACHMENT SET ZDATA = X'00' WHERE Z_PK = \(try XCTUnwrap(part.objectID.primaryKey))")
        XCTAssertEqual(try problems(readingNote: other), [])
        let found = try problems(readingNote: changed)
        XCTAssertEqual(found.map(\.entity), ["Attachment"])
        XCTAssertEqual(found.first?.primaryKey, part.objectID.primaryKey)
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }?.count, 1)
        // A save that would change the altered row is refused, not laundered into a new tag.
        part["data"] = Data("x".utf8)
        XCTAssertThrowsError(try stack.context.save()) { XCTAssertTrue($0 is RowAuthenticationFailure, "\($0)") }
    }

    func testAnAttachmentDeletedWithItsTagOrLeftOutOfTheReadIsFound() throws {
        let note = notes[7]
        let parts = try XCTUnwrap(note["attachments"] as? [ManagedObject])
        let first = try XCTUnwrap(parts[0].objectID.primaryKey)
        try tamper("DELETE FROM ZATTACHMENT WHERE Z_PK = \(first); "
            + "DELETE FROM TEST_TAG WHERE ZTABLE = 'ZATTACHMENT' AND ZPK = \(first)")
        XCTAssertTrue(try problems(readingNote: note).contains {
            $0.message.hasPrefix("rows and their tags were removed or replaced together")
        })

        // A read that showed one attachment of two (an index hid the other) is told so.
        let second = try XCTUnwrap(parts[1].objectID.primaryKey)
        let id = try XCTUnwrap(note.objectID.primaryKey)
        let lookup = RowAuthentication.Lookup(
            storeIdentifier: stack.notes.identifier, bucket: RowAuthentication.bucket(table: "ZNOTE", primaryKey: id),
            table: "ZATTACHMENT", column: "ZNOTE", value: .integer(id))
        let partial = try stack.coordinator.performRead {
            try self.authentication.verify(rows: [try self.key(note)], lookups: [lookup], in: $0)
        }
        let leftOut = partial?.contains { $0.primaryKey == second && $0.message.contains("left out of a read") }
        XCTAssertEqual(leftOut, true,
                      "\(partial ?? [])")
    }

    func testAnOlderCopyOfABucketWithItsTagsIsRefusedByTheRecord() throws {
        let note = notes[9]
        let id = try XCTUnwrap(note.objectID.primaryKey)
        let saved = directory.appendingPathComponent("saved.sqlite").path
        try tamper("ATTACH '\(saved)' AS saved; CREATE TABLE saved.note AS SELECT * FROM ZNOTE WHERE Z_PK = \(id); "
            + "CREATE TABLE saved.tag AS SELECT * FROM TEST_TAG WHERE ZTABLE = 'ZNOTE' AND ZPK = \(id); "
            + "CREATE TABLE saved.bucket AS SELECT * FROM TEST_BUCKET")
        note["title"] = "newer"
        try stack.context.save()
        try tamper("ATTACH '\(saved)' AS saved; DELETE FROM ZNOTE WHERE Z_PK = \(id); "
            + "INSERT INTO ZNOTE SELECT * FROM saved.note; "
            + "DELETE FROM TEST_TAG WHERE ZTABLE = 'ZNOTE' AND ZPK = \(id); "
            + "INSERT INTO TEST_TAG SELECT * FROM saved.tag; "
            + "DELETE FROM TEST_BUCKET; INSERT INTO TEST_BUCKET SELECT * FROM saved.bucket")
        let found = try problems(readingNote: note)
        XCTAssertTrue(
            found.contains { $0.message.contains("integrity record or its buckets were altered") }, "\(found)")
    }

    /// A new instance, with nothing verified yet (another process opening the stores).
    func freshAuthentication() -> RowAuthentication {
        RowAuthentication(
            authenticator: TestAuthenticator(key: 42), stores: authentication.stores, model: authentication.model,
            tables: Self.tables)
    }

    /// The group a note's bucket is sealed in.
    func group(of note: ManagedObject) -> Int {
        let bucket = RowAuthentication.bucket(table: "ZNOTE", primaryKey: note.objectID.primaryKey ?? 0)
        return bucket / RowAuthentication.groupSize
    }

    func testABucketChangedInOneGroupIsFoundByTheReadsOfThatGroupAloneAndByAWholeCheck() throws {
        let first = notes[0]
        let other = try XCTUnwrap(notes.first { group(of: $0) != group(of: first) })
        let bucket = RowAuthentication.bucket(table: "ZNOTE", primaryKey: try XCTUnwrap(other.objectID.primaryKey))
        try tamper("UPDATE TEST_BUCKET SET ZCOUNT = ZCOUNT + 1 WHERE ZBUCKET = \(bucket)")
        authentication = freshAuthentication()
        XCTAssertEqual(try problems(readingNote: first), [], "another group's buckets are not read")
        let found = try problems(readingNote: other)
        XCTAssertTrue(found.contains { $0.message.contains("group \(group(of: other)) does not match its seal") },
                      "\(found)")
        let whole = try stack.coordinator.performRead { try self.authentication.verify(in: $0) } ?? []
        XCTAssertTrue(whole.contains { $0.message.contains("does not match its seal") }, "\(whole)")
    }

    func testAnAlteredOrMovedSealIsRefusedByTheRecordForEveryRead() throws {
        let note = notes[0]
        let seal = RowAuthentication.bucketCount + group(of: note)
        let other = try XCTUnwrap(notes.first { group(of: $0) != group(of: note) })
        let otherSeal = RowAuthentication.bucketCount + group(of: other)
        try tamper("UPDATE TEST_BUCKET SET ZBUCKET = -1 WHERE ZBUCKET = \(seal); "
            + "UPDATE TEST_BUCKET SET ZBUCKET = \(seal) WHERE ZBUCKET = \(otherSeal); "
            + "UPDATE TEST_BUCKET SET ZBUCKET = \(otherSeal) WHERE ZBUCKET = -1")
        authentication = freshAuthentication()
        for read in [note, other, notes[1]] {
            let found = try problems(readingNote: read)
            XCTAssertTrue(found.contains { $0.message.contains("integrity record or its buckets were altered") },
                          "\(found)")
        }
    }

    /// A record as the release before wrote it: no seals, its MAC over every bucket.
    func rewriteAsVersion2() throws {
        let version2 = try stack.coordinator.performRead { transaction in
            try self.authentication.stores.map { store in
                let record = try XCTUnwrap(
                    try self.authentication.record(of: store, loading: RowAuthentication.allGroups, in: transaction))
                return (store, try self.authentication.mac(of: record, store: store, version: 2))
            }
        }
        for (store, mac) in version2 {
            let database = try DatabaseQueue(path: try XCTUnwrap(
                [stack.notes, stack.passwords].first { $0.identifier == store.identifier }?.url).path)
            try database.write {
                try $0.execute(sql: "DELETE FROM TEST_BUCKET WHERE ZBUCKET >= \(RowAuthentication.bucketCount)")
                try $0.execute(sql: "UPDATE TEST_RECORD SET ZMAC = ?", arguments: [Data(mac)])
            }
        }
        authentication = freshAuthentication()
    }

    /// The seal rows of each store, notes then passwords.
    func sealRows() throws -> [Int] {
        try [stack.notes, stack.passwords].map { store in
            let database = try DatabaseQueue(path: try XCTUnwrap(store.url).path)
            return try database.read {
                try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM TEST_BUCKET WHERE ZBUCKET >= ?",
                                 arguments: [RowAuthentication.bucketCount]) ?? 0
            }
        }
    }

    /// A save, made by the instance that keeps the record.
    func renameNote(_ index: Int) throws {
        stack.coordinator.writeObserver = authentication
        notes[index]["title"] = "renamed \(index)"
        try stack.context.save()
    }

    /// Records are written as version 4; one of version 3 (its MAC's label the only difference:
    /// the release before refuses version 4 instead of renewing it) is read as it is, and the
    /// next save writes it as version 4.
    func testAVersion3RecordIsReadAndTheNextSaveWritesVersion4() throws {
        let files = try [stack.notes, stack.passwords].map { try DatabaseQueue(path: try XCTUnwrap($0.url).path) }
        func stored() throws -> [[UInt8]] {
            try files.map { try $0.read { [UInt8](try Data.fetchOne($0, sql: "SELECT ZMAC FROM TEST_RECORD") ?? Data()) } }
        }
        func macs(version: Int) throws -> [[UInt8]] {
            try stack.coordinator.performRead { transaction in
                try self.authentication.stores.map { store in
                    let record = try XCTUnwrap(try self.authentication.record(of: store, in: transaction))
                    return try self.authentication.mac(of: record, store: store, version: version)
                }
            }
        }
        XCTAssertEqual(try stored(), try macs(version: 4))
        let version3 = try macs(version: 3)
        XCTAssertNotEqual(try stored(), version3)
        for (file, mac) in zip(files, version3) {
            try file.write { try $0.execute(sql: "UPDATE TEST_RECORD SET ZMAC = ?", arguments: [Data(mac)]) }
        }
        authentication = freshAuthentication()
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        try renameNote(1)
        XCTAssertEqual(try stored(), try macs(version: 4))
    }

    func testARecordOfTheLastVersionIsReadWholeThenSealedByASaveWithoutTrustingAChange() throws {
        try rewriteAsVersion2()
        XCTAssertEqual(try stack.coordinator.performRead { try self.authentication.verify(in: $0) }, [])
        XCTAssertEqual(try problems(readingNote: notes[5]), [])
        XCTAssertEqual(try sealRows(), [0, 0], "reads write nothing")
        let id = try XCTUnwrap(notes[7].objectID.primaryKey)
        try tamper("UPDATE ZNOTE SET Z_OPT = Z_OPT + 1 WHERE Z_PK = \(id)")
        try renameNote(1)
        XCTAssertGreaterThan(try sealRows()[0], 0, "the notes are sealed in groups (the other store is empty)")
        authentication = freshAuthentication()
        XCTAssertEqual(try problems(readingNote: notes[5]), [])
        XCTAssertEqual(try problems(readingNote: notes[1]), [])
        let found = try problems(readingNote: notes[7])
        XCTAssertTrue(found.contains { $0.primaryKey == id && $0.message.contains("changed outside") }, "\(found)")
    }

    func testABucketChangedInARecordOfTheLastVersionIsRefusedAndNotSealed() throws {
        try rewriteAsVersion2()
        let bucket = RowAuthentication.bucket(table: "ZNOTE", primaryKey: try XCTUnwrap(notes[2].objectID.primaryKey))
        try tamper("UPDATE TEST_BUCKET SET ZCOUNT = ZCOUNT + 1 WHERE ZBUCKET = \(bucket)")
        XCTAssertThrowsError(try renameNote(1))
        XCTAssertEqual(try sealRows(), [0, 0])
        let found = try problems(readingNote: notes[30])
        XCTAssertTrue(found.contains { $0.message.contains("integrity record or its buckets were altered") },
                      "\(found)")
    }

    func testABucketCountNearTheLimitIsASealMismatchNotACrash() throws {
        let note = notes[0]
        let bucket = RowAuthentication.bucket(table: "ZNOTE", primaryKey: try XCTUnwrap(note.objectID.primaryKey))
        let neighbour = bucket % RowAuthentication.groupSize == 0 ? bucket + 1 : bucket - 1
        try tamper("INSERT OR REPLACE INTO TEST_BUCKET (ZBUCKET, ZCOUNT, ZSUM) VALUES "
            + "(\(neighbour), \(Int64.max), zeroblob(32))")
        authentication = freshAuthentication()
        let found = try problems(readingNote: note)
        XCTAssertTrue(found.contains { $0.message.contains("does not match its seal") }, "\(found)")
        let whole = try stack.coordinator.performRead { try self.authentication.verify(in: $0) } ?? []
        XCTAssertTrue(whole.contains { $0.message.contains("does not match its seal") }, "\(whole)")
    }

    func testARowNumberedBelowTheBucketsIsFoundByAWholeCheck() throws {
        try tamper("INSERT INTO TEST_BUCKET (ZBUCKET, ZCOUNT, ZSUM) VALUES (-7, 1, zeroblob(32))")
        authentication = freshAuthentication()
        let whole = try stack.coordinator.performRead { try self.authentication.verify(in: $0) } ?? []
        XCTAssertTrue(whole.contains { $0.message.contains("holds a row numbered below 0") }, "\(whole)")
    }
}
