import Foundation
import XCTest
import GRDB
@testable import ObjectGraph

private final class BatchTestAuthenticator: RowAuthenticator {
    func authenticationCode(of message: [UInt8]) throws -> [UInt8] {
        (0..<4).flatMap { lane -> [UInt8] in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 &+ UInt64(lane) &* 0x9e37_79b9_7f4a_7c15
            for byte in message { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return withUnsafeBytes(of: hash.bigEndian) { Array($0) }
        }
    }
}

/// Batch requests keep the integrity record and the history as saves do: two SQLite stores,
/// both tracking history, with relationships across them and sub-entities.
final class BatchRequestIntegrityTests: ObjectGraphTestCase {
    var coordinator: PersistentStoreCoordinator!
    var context: ManagedObjectContext!
    var storeA: PersistentStore!
    var storeB: PersistentStore!
    var authentication: RowAuthentication!

    static func model() throws -> ManagedObjectModel {
        var name = AttributeDescription(name: "name", type: .string)
        name.preservesValueInHistoryOnDeletion = true
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Owner", attributes: [name], relationships: [
                RelationshipDescription(name: "pets", destination: "Animal", inverse: "owner", isToMany: true,
                                        deleteRule: .cascade),
                RelationshipDescription(name: "items", destination: "Item", inverse: "owner", isToMany: true,
                                        deleteRule: .nullify),
                RelationshipDescription(name: "boxes", destination: "Box", inverse: "owner", isToMany: true,
                                        deleteRule: .deny),
            ]),
            EntityDescription(name: "Animal", isAbstract: true, attributes: [name], relationships: [
                RelationshipDescription(name: "owner", destination: "Owner", inverse: "pets"),
            ]),
            EntityDescription(name: "Dog", parent: "Animal", attributes: [AttributeDescription(name: "bark", type: .string)]),
            EntityDescription(name: "Cat", parent: "Animal", attributes: [AttributeDescription(name: "meow", type: .string)]),
            EntityDescription(name: "Box", attributes: [name], relationships: [
                RelationshipDescription(name: "owner", destination: "Owner", inverse: "boxes"),
            ]),
            EntityDescription(name: "Group", attributes: [name], relationships: [
                RelationshipDescription(name: "items", destination: "Item", inverse: "group", isToMany: true,
                                        deleteRule: .nullify),
            ]),
            EntityDescription(name: "Item", attributes: [name], relationships: [
                RelationshipDescription(name: "group", destination: "Group", inverse: "items", deleteRule: .cascade),
                RelationshipDescription(name: "owner", destination: "Owner", inverse: "items"),
            ]),
        ], configurations: ["A": ["Owner", "Group", "Item", "Box"], "B": ["Animal", "Dog", "Cat"]])
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        let model = try Self.model()
        coordinator = PersistentStoreCoordinator(managedObjectModel: model, busyTimeout: 5)
        var options = StoreOptions()
        options.tracksPersistentHistory = true
        storeA = try coordinator.addPersistentStore(type: .sqlite, configuration: "A",
                                                    at: directory.appendingPathComponent("a.sqlite"), options: options)
        storeB = try coordinator.addPersistentStore(type: .sqlite, configuration: "B",
                                                    at: directory.appendingPathComponent("b.sqlite"), options: options)
        context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.transactionAuthor = "tests"
        let stores = [storeA!, storeB!].map { store in
            let roots = model.entities(forConfiguration: store.configurationName ?? "").filter { $0.superentity == nil }
            return RowAuthentication.Store(
                identifier: store.identifier, displayName: store.url?.lastPathComponent ?? "",
                tables: Dictionary(uniqueKeysWithValues: roots.map { ($0.tableName, $0.name) }))
        }
        authentication = RowAuthentication(
            authenticator: BatchTestAuthenticator(), stores: stores, model: model.versionIdentifier,
            tables: RowAuthenticationTests.tables)
        try coordinator.performWrite { try self.authentication.create(in: $0) }
        coordinator.writeObserver = authentication
    }

    func verify() throws -> [IntegrityProblem] {
        try XCTUnwrap(try coordinator.performRead { try self.authentication.verify(in: $0) })
    }

    func tamper(_ store: PersistentStore, _ sql: String) throws {
        let database = try DatabaseQueue(path: try XCTUnwrap(store.url).path)
        try database.write { try $0.execute(sql: sql) }
    }

    func insert(_ entity: String, _ name: String, _ values: [String: Any] = [:]) -> ManagedObject {
        let object = context.insertNewObject(forEntityName: entity)
        object["name"] = name
        for (key, value) in values { object[key] = value }
        return object
    }

    // MARK: - Integrity record

    func testCrossStoreCascadeSubEntitiesAndNullifyKeepTheRecord() throws {
        let owners = (0..<3).map { insert("Owner", "o\($0)") }
        for (index, owner) in owners.enumerated() {
            _ = insert("Dog", "dog \(index)", ["owner": owner])
            _ = insert("Cat", "cat \(index)", ["owner": owner])
            _ = insert("Item", "item \(index)", ["owner": owner])
        }
        try context.save()
        XCTAssertEqual(try verify(), [])
        let saved = try context.fetchHistory(after: nil).count
        let gone = try context.execute(BatchDeleteRequest(entityName: "Owner", predicate: try Predicate(format: "name != %@", "o0")))
        XCTAssertEqual(Set(gone.objectIDs.map(\.entityName)), ["Owner", "Dog", "Cat"])
        XCTAssertEqual(try verify(), [])
        let history = Array(try context.fetchHistory(after: nil).dropFirst(saved))
        XCTAssertEqual(history.count, 2, "one transaction per store")
        let changes = history.flatMap(\.changes)
        XCTAssertEqual(changes.filter { $0.changeType == .delete }.count, 2 + 4)
        XCTAssertEqual(Set(changes.filter { $0.changeType == .delete }.map(\.changedObjectID.entityName)), ["Owner", "Dog", "Cat"])
        XCTAssertEqual(changes.filter { $0.changeType == .update }.map(\.changedObjectID.entityName), ["Item", "Item"])
        XCTAssertEqual(Set(changes.compactMap { $0.tombstone?["name"] as? String }), ["o1", "o2", "dog 1", "dog 2", "cat 1", "cat 2"])
        // A batch update of sub-entities through the abstract parent.
        let renamed = try context.execute(BatchUpdateRequest(entityName: "Animal", propertiesToUpdate: ["name": "x"]))
        XCTAssertEqual(renamed.count, 2)
        XCTAssertEqual(try verify(), [])
        let last = try XCTUnwrap(try context.fetchHistory(after: nil).last)
        XCTAssertEqual(Set(last.changes.map(\.changedObjectID.entityName)), ["Dog", "Cat"])
        XCTAssertEqual(Set(last.changes.map(\.updatedProperties)), [["name"]])
    }

    /// A tampered row reached only through a cross-store cascade must be refused, not re-tagged.
    func testATamperedRowReachedByACrossStoreCascadeIsRefused() throws {
        let owner = insert("Owner", "o")
        let dog = insert("Dog", "d", ["owner": owner])
        try context.save()
        try tamper(storeB, "UPDATE ZANIMAL SET ZBARK = 'tampered' WHERE Z_PK = \(dog.objectID.primaryKey!)")
        XCTAssertFalse(try verify().isEmpty)
        XCTAssertThrowsError(try context.execute(BatchDeleteRequest(entityName: "Owner")))
        XCTAssertFalse(try verify().isEmpty, "still reported")
    }

    /// A tampered row a batch delete would nullify must be refused.
    func testATamperedRowANullifyReachesIsRefused() throws {
        let owner = insert("Owner", "o")
        let item = insert("Item", "i", ["owner": owner])
        try context.save()
        try tamper(storeA, "UPDATE ZITEM SET ZNAME = 'tampered' WHERE Z_PK = \(item.objectID.primaryKey!)")
        XCTAssertThrowsError(try context.execute(BatchDeleteRequest(entityName: "Owner")))
        XCTAssertFalse(try verify().isEmpty)
    }

    func testATamperedRowABatchUpdateReachesIsRefused() throws {
        let item = insert("Item", "i")
        try context.save()
        try tamper(storeA, "UPDATE ZITEM SET ZNAME = 'tampered' WHERE Z_PK = \(item.objectID.primaryKey!)")
        XCTAssertThrowsError(try context.execute(BatchUpdateRequest(entityName: "Item", propertiesToUpdate: ["name": "n"])))
        XCTAssertFalse(try verify().isEmpty)
    }

    /// The last item's row deleted outside, with the key counter put back so its key is handed
    /// out again.
    func deleteTheLastItemOutsideAndRewindItsKey() throws {
        _ = insert("Item", "first")
        let last = insert("Item", "last")
        try context.save()
        let key = try XCTUnwrap(last.objectID.primaryKey)
        let number = try XCTUnwrap(coordinator.managedObjectModel.entity(named: "Item")).entityNumber
        try tamper(storeA, "DELETE FROM ZITEM WHERE Z_PK = \(key); "
            + "UPDATE Z_PRIMARYKEY SET Z_MAX = \(key - 1) WHERE Z_ENT = \(number)")
        XCTAssertFalse(try verify().isEmpty, "the deletion is found")
    }

    /// A row deleted outside, its key handed out again: the insert must not launder the deletion.
    func testARowDeletedOutsideIsNotLaunderedByABatchInsertReusingItsKey() throws {
        try deleteTheLastItemOutsideAndRewindItsKey()
        XCTAssertThrowsError(try context.execute(BatchInsertRequest(entityName: "Item", objects: [["name": "new"]]))) {
            XCTAssertTrue($0 is RowAuthenticationFailure || "\($0)".contains("deleted outside"), "\($0)")
        }
        XCTAssertFalse(try verify().isEmpty, "the deletion is still found, not laundered into a fresh tag")
    }

    /// The same through a save.
    func testARowDeletedOutsideIsNotLaunderedByASaveReusingItsKey() throws {
        try deleteTheLastItemOutsideAndRewindItsKey()
        let fresh = insert("Item", "new")
        XCTAssertThrowsError(try context.save(), "the new row would take the deleted row's key")
        XCTAssertNil(fresh.objectID.primaryKey, "nothing was saved")
        XCTAssertFalse(try verify().isEmpty, "the deletion is still found, not laundered into a fresh tag")
    }

    /// A batch delete refused by Deny after a cross-store cascade ran: nothing is kept, nothing recorded.
    func testADeniedBatchDeleteLeavesNoHistoryAndAGoodRecord() throws {
        let owner = insert("Owner", "o")
        _ = insert("Dog", "d", ["owner": owner])
        _ = insert("Item", "i", ["owner": owner])
        _ = insert("Box", "b", ["owner": owner])
        try context.save()
        let saved = try context.fetchHistory(after: nil).count
        XCTAssertThrowsError(try context.execute(BatchDeleteRequest(entityName: "Owner")))
        XCTAssertEqual(try context.fetchHistory(after: nil).count, saved)
        XCTAssertEqual(try verify(), [])
        XCTAssertEqual(try context.objects("Animal").count, 1)
        owner["name"] = "o2"
        try context.save()
        XCTAssertEqual(try verify(), [])
    }

    // MARK: - History

    /// More than 500 items cascading to one group: the group is deleted once, recorded once.
    func testAGroupReachedFromTwoChunksIsDeletedAndRecordedOnce() throws {
        let group = insert("Group", "g")
        for number in 0..<501 { _ = insert("Item", "item \(number)", ["group": group]) }
        try context.save()
        let saved = try context.fetchHistory(after: nil).count
        let gone = try context.execute(BatchDeleteRequest(entityName: "Item"))
        XCTAssertEqual(try verify(), [])
        XCTAssertEqual(gone.objectIDs.filter { $0.entityName == "Group" }.count, 1, "the group once in the result")
        let changes = try context.fetchHistory(after: nil).dropFirst(saved).flatMap(\.changes)
        XCTAssertEqual(changes.filter { $0.changedObjectID == group.objectID }.count, 1, "the group's delete once")
        XCTAssertEqual(changes.filter { $0.changeType == .update }.count, 0,
                       "rows the same batch deletes are not also recorded as nullified")
    }

    /// Fewer than 500: no duplicate, but the items are recorded as updated (nullified) and deleted.
    func testItemsDeletedByTheSameBatchAreNotRecordedAsNullified() throws {
        let group = insert("Group", "g")
        for number in 0..<3 { _ = insert("Item", "item \(number)", ["group": group]) }
        try context.save()
        let saved = try context.fetchHistory(after: nil).count
        try context.execute(BatchDeleteRequest(entityName: "Item"))
        let changes = try context.fetchHistory(after: nil).dropFirst(saved).flatMap(\.changes)
        XCTAssertEqual(changes.map(\.changeType).filter { $0 == .update }.count, 0, "\(changes.map(\.changeType))")
        XCTAssertEqual(changes.count, 4)
    }

    // MARK: - The history covered

    /// The record made again with each store's history covered (`includingHistory()`).
    func coverHistory() throws {
        let stores = authentication.stores.map { $0.includingHistory() }
        authentication = RowAuthentication(
            authenticator: BatchTestAuthenticator(), stores: stores, model: coordinator.managedObjectModel.versionIdentifier,
            tables: RowAuthenticationTests.tables)
        try coordinator.performWrite { try self.authentication.create(in: $0) }
        coordinator.writeObserver = authentication
    }

    /// What a reader of the history finds wrong, checking every history row through the lookups.
    func historyProblems() throws -> [IntegrityProblem] {
        try coordinator.performRead { transaction in
            var rows: [StoredRowKey] = []
            for store in self.authentication.stores {
                for table in RowAuthentication.Store.historyTables.keys {
                    let qualified = try transaction.qualified(table, storeIdentifier: store.identifier)
                    for cells in try transaction.rows("SELECT Z_PK FROM \(qualified)") {
                        guard case .integer(let key) = cells.first else { continue }
                        rows.append(StoredRowKey(storeIdentifier: store.identifier, table: table, primaryKey: key))
                    }
                }
            }
            return try XCTUnwrap(try self.authentication.verify(
                rows: rows, lookups: self.authentication.stores.flatMap(\.historyLookups), in: transaction))
        }
    }

    /// Saves, batch requests and pruning keep the tags of the history they write; a history row
    /// deleted, changed or added outside is found by a whole check and by a reader of the history.
    func testACoveredHistoryIsTaggedByEveryWriteAndItsRowsChangedOutsideAreFound() throws {
        try coverHistory()
        let owner = insert("Owner", "o")
        for number in 0..<3 { _ = insert("Item", "item \(number)", ["owner": owner]) }
        _ = insert("Dog", "rex", ["owner": owner])
        try context.save()
        owner["name"] = "renamed"
        try context.save()
        _ = try context.execute(BatchInsertRequest(entityName: "Box", objects: [["name": "b"]]))
        _ = try context.execute(BatchDeleteRequest(entityName: "Animal"))
        let history = try context.fetchHistory(after: nil)
        XCTAssertGreaterThanOrEqual(history.count, 4)
        XCTAssertEqual(try verify(), [])
        XCTAssertEqual(try historyProblems(), [])
        let (tagged, rows) = try coordinator.performRead { transaction in
            let tags = try transaction.qualified(RowAuthenticationTests.tables.tags, storeIdentifier: self.storeA.identifier)
            return (try transaction.rows("SELECT COUNT(*) FROM \(tags) WHERE ZTABLE IN "
                        + "('ATRANSACTION', 'ACHANGE', 'ATRANSACTIONSTRING')"),
                    try transaction.rows("SELECT (SELECT COUNT(*) FROM ATRANSACTION) + (SELECT COUNT(*) FROM ACHANGE) "
                        + "+ (SELECT COUNT(*) FROM ATRANSACTIONSTRING)"))
        }
        XCTAssertEqual(tagged, rows, "a tag for each transaction, change and name of the history")
        XCTAssertNotEqual(rows.first?.first, .integer(0))
        // Pruning deletes rows and their tags together.
        try context.deleteHistory(before: history[1].token)
        XCTAssertEqual(try verify(), [])
        XCTAssertEqual(try historyProblems(), [])

        for (table, change) in [
            ("ACHANGE", "DELETE FROM ACHANGE WHERE Z_PK = (SELECT MAX(Z_PK) FROM ACHANGE)"),
            ("ATRANSACTION", "DELETE FROM ATRANSACTION WHERE Z_PK = (SELECT MAX(Z_PK) FROM ATRANSACTION)"),
            ("ACHANGE", "UPDATE ACHANGE SET ZCOLUMNS = x'00' WHERE Z_PK = (SELECT MIN(Z_PK) FROM ACHANGE)"),
            ("ATRANSACTIONSTRING",
             "UPDATE ATRANSACTIONSTRING SET ZNAME = 'someone else' WHERE Z_PK = (SELECT MIN(Z_PK) FROM ATRANSACTIONSTRING)"),
            ("ACHANGE", "INSERT INTO ACHANGE (Z_ENT, Z_OPT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID) "
                + "VALUES (16001, 1, 2, 1, 1, (SELECT MAX(Z_PK) FROM ATRANSACTION))"),
        ] {
            let copy = directory.appendingPathComponent("a-before.sqlite")
            try? FileManager.default.removeItem(at: copy)
            try FileManager.default.copyItem(at: try XCTUnwrap(storeA.url), to: copy)
            try tamper(storeA, change)
            let entity = RowAuthentication.Store.historyTables[table]
            XCTAssertTrue(try verify().contains { $0.entity == entity }, change)
            XCTAssertTrue(try historyProblems().contains { $0.entity == entity }, change)
            let database = try DatabaseQueue(path: try XCTUnwrap(storeA.url).path)
            try database.writeWithoutTransaction { db in
                try db.execute(sql: "ATTACH DATABASE ? AS saved", arguments: [copy.path])
                for table in ["ACHANGE", "ATRANSACTION", "ATRANSACTIONSTRING"] {
                    try db.execute(sql: "DELETE FROM main.\(table); INSERT INTO main.\(table) SELECT * FROM saved.\(table)")
                }
                try db.execute(sql: "DETACH DATABASE saved")
            }
            XCTAssertEqual(try verify(), [], "put back after \(change)")
        }
    }

    /// A transaction of more changes than the observer is told of at once is tagged whole.
    func testAHistoryTransactionLargerThanOnePartIsTaggedWhole() throws {
        try coverHistory()
        let count = ManagedObjectContext.historyRowsToldAtOnce + 50
        _ = try context.execute(BatchInsertRequest(
            entityName: "Box", objects: (0..<count).map { ["name": "box \($0)"] }))
        XCTAssertEqual(try context.fetchHistory(after: nil).last?.changes.count, count)
        XCTAssertEqual(try verify(), [])
        XCTAssertEqual(try historyProblems(), [])
    }

    /// A record that leaves the history out is not changed by the history's writes.
    func testAHistoryNotCoveredLeavesTheRecordAlone() throws {
        _ = insert("Owner", "o")
        try context.save()
        let generation = { try self.coordinator.performRead { transaction in
            try transaction.rows("SELECT ZGENERATION FROM \(try transaction.qualified(RowAuthenticationTests.tables.record, storeIdentifier: self.storeA.identifier))")
        } }
        let before = try generation()
        try context.deleteHistory(before: nil)
        XCTAssertEqual(try generation(), before, "pruning a history the record leaves out writes no record")
        XCTAssertEqual(try verify(), [])
    }
}

/// String order is byte order of the folded strings, as it was when each comparison copied
/// both into arrays.
final class StringOrderTests: XCTestCase {
    func testOrderIsTheByteOrderOfTheFoldedStrings() {
        let alphabet: [String] = ["a", "A", "é", "e\u{301}", "ß", "🙂", "\u{0}", "z", "Ω", "İ", "ﬁ", ""]
        var generator = SplitMix(seed: 19)
        for _ in 0..<20000 {
            let l = (0..<Int.random(in: 0...4, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            let r = (0..<Int.random(in: 0...4, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            for options: ObjectGraph.Predicate.Options in [ObjectGraph.Predicate.Options(), .caseInsensitive, .diacriticInsensitive, [.caseInsensitive, .diacriticInsensitive]] {
                let (a, b) = (Array(PredicateEvaluator.fold(l, options).utf8), Array(PredicateEvaluator.fold(r, options).utf8))
                let old = a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
                XCTAssertEqual(PredicateEvaluator.order(l, r, options), old, "\(l) \(r)")
            }
        }
    }
}

/// A seeded generator: the same sequence at every run, so a failure repeats.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
