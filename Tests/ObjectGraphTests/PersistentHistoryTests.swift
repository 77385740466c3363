import Foundation
import XCTest
@testable import ObjectGraph

/// Persistent history in Core Data's shape: a store option records each save as a transaction
/// (author, context name, timestamp, process) with its changes, in the save's own transaction;
/// fetched after a token, deleted before one; other connections' commits announced with the token.
final class PersistentHistoryTests: BoardTestCase {
    /// The board model with the item's name kept in the history when an item is deleted.
    static func historyModel() throws -> ManagedObjectModel {
        let model = try boardModel()
        let group = model.entity(named: "Group")!.declaredAttributes
        var item = model.entity(named: "Item")!.declaredAttributes
        item[0].preservesValueInHistoryOnDeletion = true
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Group", attributes: group,
                              relationships: model.entity(named: "Group")!.declaredRelationships),
            EntityDescription(name: "Item", attributes: item,
                              relationships: model.entity(named: "Item")!.declaredRelationships),
        ])
    }

    func makeTracked(_ kind: StoreKind, tracks: Bool = true, watches: Bool = false,
                     coordinator existing: PersistentStoreCoordinator? = nil) throws -> ManagedObjectContext {
        let coordinator = try existing ?? {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.historyModel(), busyTimeout: 30)
            var options = StoreOptions()
            options.tracksPersistentHistory = tracks
            options.postsRemoteChangeNotifications = watches
            try coordinator.addPersistentStore(type: kind == .sqlite ? .sqlite : .inMemory,
                                               at: directory.appendingPathComponent("history.sqlite"), options: options)
            return coordinator
        }()
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.transactionAuthor = "tests"
        context.name = "main"
        return context
    }

    private func sqlite3(_ sql: String) throws -> String {
        let output = try runSQLite3([directory.appendingPathComponent("history.sqlite").path, sql])
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A group "g" with `count` items named "item 0", "item 1", …, not saved.
    func insertGroup(withItems count: Int, into context: ManagedObjectContext) -> (ManagedObject, [ManagedObject]) {
        let group = context.insertNewObject(forEntityName: "Group")
        group["name"] = "g"
        let items = (0..<count).map { number -> ManagedObject in
            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = "item \(number)"
            item["group"] = group
            return item
        }
        return (group, items)
    }

    /// Three saves: a group with two items; one item renamed; the other deleted.
    @discardableResult
    func makeThreeSaves(_ context: ManagedObjectContext) throws -> (group: ManagedObject, items: [ManagedObject]) {
        let group = context.insertNewObject(forEntityName: "Group")
        group["name"] = "g"
        let items = ["a", "b"].map { name -> ManagedObject in
            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = name
            item["group"] = group
            return item
        }
        try context.save()
        items[0]["name"] = "a2"
        try context.save()
        context.delete(items[1])
        try context.save()
        return (group, items)
    }

    func testEachSaveIsOneTransactionWithItsChanges() {
        forEachStoreKind { kind in
            let context = try makeTracked(kind)
            let (group, items) = try makeThreeSaves(context)
            let history = try context.fetchHistory(after: nil)
            XCTAssertEqual(history.count, 3, "[\(kind)]")
            XCTAssertEqual(history.map(\.author), ["tests", "tests", "tests"])
            XCTAssertEqual(history.map(\.contextName), ["main", "main", "main"])
            XCTAssertEqual(history[0].processID, String(getpid()))
            XCTAssertEqual(history.map(\.transactionNumber), history.map(\.transactionNumber).sorted())

            let inserted = history[0].changes
            XCTAssertEqual(inserted.map(\.changeType), [.insert, .insert, .insert])
            XCTAssertEqual(Set(inserted.map(\.changedObjectID)), Set([group.objectID] + items.map(\.objectID)))

            XCTAssertEqual(history[1].changes.count, 1)
            XCTAssertEqual(history[1].changes[0].changeType, .update)
            XCTAssertEqual(history[1].changes[0].changedObjectID, items[0].objectID)
            XCTAssertEqual(history[1].changes[0].updatedProperties, ["name"])

            // The deleted item; its group's to-many changed too.
            let deletion = try XCTUnwrap(history[2].changes.first { $0.changeType == .delete })
            XCTAssertEqual(deletion.changedObjectID, items[1].objectID)
            XCTAssertEqual(deletion.tombstone?["name"] as? String, "b", "[\(kind)] the preserved attribute")
            let groupUpdate = try XCTUnwrap(history[2].changes.first { $0.changedObjectID == group.objectID })
            XCTAssertEqual(groupUpdate.updatedProperties, ["items"])
        }
    }

    /// A save of more changes than one statement writes: every change is recorded once, with
    /// its own type, properties and tombstone.
    func testALargeSaveRecordsEveryChange() {
        forEachStoreKind { kind in
            let context = try makeTracked(kind)
            let (group, items) = insertGroup(withItems: 250, into: context)
            try context.save()
            for item in items[0..<120] { item["name"] = "renamed \(item["name"]!)" }
            for item in items[120..<230] { item["group"] = nil }
            for item in items[230...] { context.delete(item) }
            try context.save()

            let history = try context.fetchHistory(after: nil)
            XCTAssertEqual(history.map(\.changes.count), [251, 251], "[\(kind)]")
            XCTAssertEqual(Set(history[0].changes.map(\.changedObjectID)),
                           Set(([group] + items).map(\.objectID)), "[\(kind)]")
            let changes = Dictionary(history[1].changes.map { ($0.changedObjectID, $0) }, uniquingKeysWith: { a, _ in a })
            XCTAssertEqual(changes.count, 251, "[\(kind)] each object once")
            for item in items[0..<120] { XCTAssertEqual(changes[item.objectID]?.updatedProperties, ["name"]) }
            for item in items[120..<230] { XCTAssertEqual(changes[item.objectID]?.updatedProperties, ["group"]) }
            for (offset, item) in items[230...].enumerated() {
                XCTAssertEqual(changes[item.objectID]?.changeType, .delete)
                XCTAssertEqual(changes[item.objectID]?.tombstone?["name"] as? String, "item \(230 + offset)")
            }
            XCTAssertEqual(changes[group.objectID]?.updatedProperties, ["items"])
        }
    }

    /// Batch requests write rows without objects; their changes are history all the same, or
    /// whoever follows the history (a sync) would never learn of them.
    func testBatchRequestsAreRecordedRowByRow() throws {
        let context = try makeTracked(.sqlite)
        let group = context.insertNewObject(forEntityName: "Group")
        group["name"] = "g"
        try context.save()
        let saved = try context.fetchHistory(after: nil).count

        let inserted = try context.execute(BatchInsertRequest(
            entityName: "Item", objects: (0..<600).map { ["name": "item \($0)"] }))
        let renamed = try context.execute(BatchUpdateRequest(
            entityName: "Item", predicate: try Predicate(format: "name BEGINSWITH %@", "item 1"),
            propertiesToUpdate: ["name": "renamed"]))
        let gone = try context.execute(BatchDeleteRequest(
            entityName: "Item", predicate: try Predicate(format: "name != %@", "renamed")))

        let history = Array(try context.fetchHistory(after: nil).dropFirst(saved))
        XCTAssertEqual(history.count, 3, "one transaction a request")
        guard history.count == 3 else { return }
        XCTAssertEqual(history.map(\.author), ["tests", "tests", "tests"])
        XCTAssertEqual(history[0].changes.map(\.changeType), Array(repeating: .insert, count: 600))
        XCTAssertEqual(Set(history[0].changes.map(\.changedObjectID)), Set(inserted.objectIDs))
        XCTAssertEqual(renamed.count, 111, "item 1 and item 100…199")
        XCTAssertEqual(Set(history[1].changes.map(\.changedObjectID)), Set(renamed.objectIDs))
        XCTAssertEqual(Set(history[1].changes.map(\.updatedProperties)), [["name"]])
        XCTAssertEqual(gone.count, 600 - 111)
        XCTAssertEqual(Set(history[2].changes.map(\.changedObjectID)), Set(gone.objectIDs))
        XCTAssertEqual(Set(history[2].changes.map(\.changeType)), [.delete])
        let names = Set(history[2].changes.compactMap { $0.tombstone?["name"] as? String })
        XCTAssertEqual(names.count, 600 - 111, "each deleted row's preserved name")
        XCTAssertTrue(names.contains("item 599"))
        XCTAssertFalse(names.contains("renamed"))
    }

    /// A batch delete's Nullify rule changes the rows that pointed at the deleted ones.
    func testABatchDeleteRecordsTheRowsItNullified() throws {
        let context = try makeTracked(.sqlite)
        let (group, items) = insertGroup(withItems: 3, into: context)
        try context.save()
        let saved = try context.fetchHistory(after: nil).count
        try context.execute(BatchDeleteRequest(entityName: "Group"))
        let changes = try XCTUnwrap(try context.fetchHistory(after: nil).dropFirst(saved).first).changes
        XCTAssertEqual(changes.first { $0.changeType == .delete }?.changedObjectID, group.objectID)
        let updates = changes.filter { $0.changeType == .update }
        XCTAssertEqual(Set(updates.map(\.changedObjectID)), Set(items.map(\.objectID)))
        XCTAssertEqual(Set(updates.map(\.updatedProperties)), [["group"]])
    }

    func testFetchingAfterATokenReturnsOnlyWhatCameLater() {
        forEachStoreKind { kind in
            let context = try makeTracked(kind)
            try makeThreeSaves(context)
            let all = try context.fetchHistory(after: nil)
            let token = try JSONDecoder().decode(
                PersistentHistoryToken.self, from: try JSONEncoder().encode(all[0].token))
            XCTAssertEqual(try context.fetchHistory(after: token).map(\.transactionNumber),
                           all.dropFirst().map(\.transactionNumber), "[\(kind)] a token survives encoding")
            let current = try context.coordinator.currentPersistentHistoryToken()
            XCTAssertEqual(current, all[2].token)
            XCTAssertTrue(try context.fetchHistory(after: current).isEmpty)
        }
    }

    /// A name (author, context, process) only deleted transactions used goes with them, so a
    /// history pruned as it is read does not keep a name for every process that ever saved.
    func testDeletingHistoryDropsTheNamesOnlyDeletedTransactionsUsed() throws {
        let context = try makeTracked(.sqlite)
        for author in ["first", "second"] {
            context.transactionAuthor = author
            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = author
            try context.save()
        }
        let names = {
            try context.coordinator.performRead { transaction in
                try transaction.rows("SELECT ZNAME FROM ATRANSACTIONSTRING ORDER BY ZNAME").compactMap { cells -> String? in
                    if case .text(let name) = cells.first { return name }
                    return nil
                }
            }
        }
        XCTAssertEqual(try names(), ["first", "main", "second", String(getpid())].sorted(), "the context is named main")
        let all = try context.fetchHistory(after: nil)
        try context.deleteHistory(before: all[0].token)
        XCTAssertEqual(try names(), ["main", "second", String(getpid())].sorted())
        XCTAssertEqual(try context.fetchHistory(after: nil).map(\.author), ["second"])
        try context.deleteHistory(before: nil)
        XCTAssertEqual(try names(), [])
        context.transactionAuthor = "first"
        context.insertNewObject(forEntityName: "Item")["name"] = "again"
        try context.save()
        XCTAssertEqual(try context.fetchHistory(after: nil).map(\.author), ["first"], "a name interned again")
    }

    /// Kept newest, the transaction numbers go on past it even with SQLite's key counter put back.
    func testDeletingHistoryKeepingTheNewestKeepsTheNumberingGoing() throws {
        let context = try makeTracked(.sqlite)
        try makeThreeSaves(context)
        let all = try context.fetchHistory(after: nil)
        XCTAssertEqual(try context.deleteHistory(before: all[1].token, keepingNewestUpTo: all[1].token), 1)
        XCTAssertEqual(try context.fetchHistory(after: nil).map(\.transactionNumber),
                       [all[1].transactionNumber, all[2].transactionNumber])
        XCTAssertEqual(try context.fetchHistory(after: nil).first?.changes.count, 0, "kept without its changes")
        // Up to a later token than the one kept up to: the newest up to that one stays.
        XCTAssertEqual(try context.deleteHistory(before: nil, keepingNewestUpTo: all[2].token), 1)
        XCTAssertEqual(try context.fetchHistory(after: nil).map(\.transactionNumber), [all[2].transactionNumber])
        try context.coordinator.performWrite { try $0.execute("DELETE FROM sqlite_sequence") }
        context.insertNewObject(forEntityName: "Item")["name"] = "later"
        try context.save()
        XCTAssertEqual(try context.fetchHistory(after: all[2].token).map(\.transactionNumber),
                       [all[2].transactionNumber + 1], "numbered past the kept transaction")
        XCTAssertEqual(try context.deleteHistory(before: nil, keepingNewestUpTo: all[0].token), 2)
        XCTAssertTrue(try context.fetchHistory(after: nil).isEmpty, "none up to that token left to keep")
    }

    func testDeletingHistoryKeepsLaterTransactionsAndNeverReusesANumber() {
        forEachStoreKind { kind in
            let context = try makeTracked(kind)
            try makeThreeSaves(context)
            let all = try context.fetchHistory(after: nil)
            XCTAssertEqual(try context.deleteHistory(before: all[1].token), 2)
            XCTAssertEqual(try context.fetchHistory(after: nil).map(\.transactionNumber), [all[2].transactionNumber])
            XCTAssertEqual(try context.deleteHistory(before: nil), 1)
            XCTAssertTrue(try context.fetchHistory(after: nil).isEmpty)

            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = "later"
            try context.save()
            let later = try context.fetchHistory(after: nil)
            XCTAssertEqual(later.count, 1)
            XCTAssertGreaterThan(later[0].transactionNumber, all[2].transactionNumber, "[\(kind)]")
            XCTAssertEqual(try context.fetchHistory(after: all[2].token).count, 1, "an old token still works")
        }
    }

    func testAStoreWithoutTheOptionRecordsNothing() throws {
        let context = try makeTracked(.sqlite, tracks: false)
        try makeThreeSaves(context)
        XCTAssertTrue(try context.fetchHistory(after: nil).isEmpty)
        let tables = try sqlite3("SELECT name FROM sqlite_master WHERE name LIKE 'A%'")
        XCTAssertEqual(tables, "")
    }

    func testTrackingTurnedOffRecordsNothingUntilTurnedOnAgain() {
        forEachStoreKind { kind in
            let context = try makeTracked(kind)
            let store = try XCTUnwrap(context.coordinator.persistentStores.first)
            store.setTracksHistory(false)
            try makeThreeSaves(context)
            XCTAssertTrue(try context.fetchHistory(after: nil).isEmpty)
            XCTAssertEqual(try context.coordinator.currentPersistentHistoryToken(), PersistentHistoryToken())
            store.setTracksHistory(true)
            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = "c"
            try context.save()
            let history = try context.fetchHistory(after: nil)
            XCTAssertEqual(history.count, 1)
            XCTAssertEqual(history.first?.changes.map(\.changeType), [.insert])
        }
    }

    func testAFailedSaveLeavesNoTransaction() throws {
        let context = try makeTracked(.sqlite)
        let (_, items) = try makeThreeSaves(context)
        let other = try makeTracked(.sqlite, coordinator: context.coordinator)
        let copy = try other.existingObject(with: items[0].objectID)
        copy["name"] = "theirs"
        try other.save()
        items[0]["name"] = "mine"
        XCTAssertThrowsError(try context.save(), "a merge conflict")
        XCTAssertEqual(try context.fetchHistory(after: nil).count, 4, "three saves and theirs, not the failed one")
    }

    func testHistoryTablesAreCoreData() throws {
        let context = try makeTracked(.sqlite)
        try makeThreeSaves(context)
        // Core Data's query for what one transaction touched works as it does on Apple's stores.
        let touched = try sqlite3("""
            SELECT p.Z_NAME, c.ZCHANGETYPE, COUNT(*) FROM ACHANGE c JOIN Z_PRIMARYKEY p ON p.Z_ENT = c.ZENTITY
            WHERE c.ZTRANSACTIONID = (SELECT MIN(Z_PK) FROM ATRANSACTION) GROUP BY 1, 2 ORDER BY 1
            """)
        XCTAssertEqual(touched, "Group|0|1\nItem|0|2")
        let author = try sqlite3("""
            SELECT a.ZNAME FROM ATRANSACTION t JOIN ATRANSACTIONSTRING a ON a.Z_PK = t.ZAUTHORTS LIMIT 1
            """)
        XCTAssertEqual(author, "tests")
    }

    /// A deletion written into the history of a row the store still holds (a primary key is
    /// never handed out twice) is named by the integrity check; the real deletion is not.
    func testTheIntegrityCheckNamesAHistoryDeletionOfARowStillHere() throws {
        let context = try makeTracked(.sqlite)
        let items = try makeThreeSaves(context).items
        XCTAssertEqual(try context.coordinator.checkIntegrity(), [])
        let key = try XCTUnwrap(items[0].objectID.primaryKey)
        _ = try sqlite3("""
            INSERT INTO ACHANGE (Z_ENT, Z_OPT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID)
            SELECT 16001, 1, 2, Z_ENT, \(key), (SELECT MAX(Z_PK) FROM ATRANSACTION) FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item'
            """)
        let problems = try context.coordinator.checkIntegrity()
        XCTAssertEqual(problems.map(\.primaryKey), [key])
        XCTAssertEqual(problems.first?.entity, "Item")
        XCTAssertTrue(problems.first?.message.hasPrefix("the history records its deletion") == true, "\(problems)")
    }

    func testAnotherConnectionsCommitIsAnnouncedWithItsToken() throws {
        let watching = try makeTracked(.sqlite, watches: true)
        try makeThreeSaves(watching)
        // A second coordinator: its own connection to the file, as another process has.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.historyModel(), busyTimeout: 30)
        var options = StoreOptions()
        options.tracksPersistentHistory = true
        try coordinator.addPersistentStore(type: .sqlite, at: directory.appendingPathComponent("history.sqlite"),
                                           options: options)
        let writer = try makeTracked(.sqlite, coordinator: coordinator)
        writer.transactionAuthor = "elsewhere"

        // Its own three saves may still be announced: wait for the one after them.
        let before = try watching.coordinator.currentPersistentHistoryToken()
        let store = try XCTUnwrap(before.transactionNumbers.keys.first)
        let announcedToken = UncheckedToken()
        let announced = expectation(forNotification: PersistentStoreCoordinator.remoteChangeNotification,
                                    object: watching.coordinator) { notification in
            guard let token = notification.userInfo?[PersistentStoreCoordinator.remoteChangeHistoryTokenKey]
                    as? PersistentHistoryToken,
                  notification.userInfo?[PersistentStoreCoordinator.remoteChangeStoreIdentifierKey] as? String == store,
                  token.transactionNumbers[store, default: 0] > before.transactionNumbers[store, default: 0]
            else { return false }
            announcedToken.set(token)
            return true
        }
        let item = writer.insertNewObject(forEntityName: "Item")
        item["name"] = "from elsewhere"
        try writer.save()
        wait(for: [announced], timeout: 20)
        let last = try XCTUnwrap(try watching.fetchHistory(after: nil).last)
        XCTAssertEqual(last.author, "elsewhere")
        XCTAssertEqual(announcedToken.get(), last.token, "the notification carries the commit's token")
    }

    func testPreserveAfterDeletionIsReadFromTheModelFile() throws {
        let folder = directory.appendingPathComponent("Kept.xcdatamodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Thing" representedClassName="Thing" syncable="YES">
                    <attribute name="kept" optional="YES" attributeType="String" preserveAfterDeletion="YES"/>
                    <attribute name="dropped" optional="YES" attributeType="String"/>
                </entity>
            </model>
            """.write(to: folder.appendingPathComponent("contents"), atomically: true, encoding: .utf8)
        let thing = try XCTUnwrap(try ManagedObjectModel(contentsOf: folder).entity(named: "Thing"))
        XCTAssertEqual(thing.attributes.filter(\.preservesValueInHistoryOnDeletion).map(\.name), ["kept"])
    }
}

/// The token a notification handler saw, read on the test's thread.
private final class UncheckedToken: @unchecked Sendable {
    private let lock = NSLock()
    private var token: PersistentHistoryToken?
    func set(_ value: PersistentHistoryToken) { lock.withLock { token = value } }
    func get() -> PersistentHistoryToken? { lock.withLock { token } }
}
