import Foundation
import XCTest

@testable import MyStashKit
@testable import ObjectGraph

final class IntegrityRecordTests: VaultTestCase {
    /// After a migration (a new model version) rows are rewritten: the record is renewed
    /// under the new version instead of reporting every row as changed.
    func testARecordFromAnotherModelVersionIsRenewed() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        let stale = try IntegrityRecord(
            dataKey: try vault.sessionContents().dataKey, keySlot: vault.keySlot,
            stores: vault.integrityStores, modelVersion: "MyStash 0")
        try vault.coordinator.performWrite { try stale.create(in: $0) }
        // Rows changed as a migration would change them.
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1")
        let reopened = try reopen()
        XCTAssertEqual(try reopened.items.notes().map(\.title), ["kept"])
        XCTAssertEqual(try reopened.integrity.check(), [])
        XCTAssertEqual(
            try sqlite("Notes.sqlite", "SELECT ZMODEL FROM MYSTASH_RECORD"),
            reopened.coordinator.managedObjectModel.versionIdentifier + IntegrityRecord.historyCoverage)
    }

    /// A save may name a row twice (the observer no longer deduplicates a copy of every key):
    /// its tag is counted once, so the vault still checks clean.
    func testARowNamedTwiceInOneSaveIsCountedOnce() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        let record = try IntegrityRecord(
            dataKey: try vault.sessionContents().dataKey, keySlot: vault.keySlot,
            stores: vault.integrityStores,
            modelVersion: vault.coordinator.managedObjectModel.versionIdentifier)
        let notes = try XCTUnwrap(vault.integrityStores.first { $0.displayName == "Notes.sqlite" })
        let row = StoredRowKey(storeIdentifier: notes.identifier, table: "ZNOTE", primaryKey: 1)
        try vault.coordinator.performWrite { try record.rows.rowsDidChange([row, row, row], in: $0) }
        XCTAssertEqual(try reopen().integrity.check(), [])
        // And a change made outside mystash afterwards is still caught.
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1")
        assertVaultError(.invalidData, { _ = try reopen() })
    }

    /// A record of the current version is not renewed: a change made outside mystash stays visible.
    func testTheCurrentRecordIsNeverRenewedOverAChange() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1")
        assertVaultError(.invalidData, { _ = try reopen() }) { error in
            XCTAssertTrue(
                error.message.contains("Notes.sqlite, Note row 1: the row was changed outside mystash"), error.message)
        }
    }

    /// Without the data key the record cannot be kept current: a locked vault is not changed.
    /// A one-item read is one state of the stores. Read as separate reads, a password changed by
    /// another process after the read took the entry's history and before it checked it made
    /// the check find a history row the read had left out: a change made outside mystash (exit
    /// 65) where there was none. Now the change waits for the read (here past its lock timeout).
    func testAChangeCommittedDuringAOneItemReadIsNotTakenForTampering() throws {
        let vault = try makeVault()
        let id = try vault.items.addEntry(EntryChanges(name: "site", password: "first"))
        let reader = try reopen(verification: .reads)
        let writer = try Vault.open(at: directory, lockTimeout: 0.2)
        try writer.unlock(password: password)
        var writerError: Error?
        let entry = try reader.find(PasswordEntry.self, .id(id), kind: .entry, extent: { entry in
            let extent = try reader.entryExtent(entry)
            do {
                try writer.items.editEntry(.id(id), EntryChanges(password: "second"))
            } catch {
                writerError = error
            }
            return extent
        }, describe: { Candidate(id: $0.id, summary: $0.name) })
        XCTAssertEqual(entry.password, "first")
        XCTAssertEqual((writerError as? VaultError)?.kind, .busy, "the change waited for the read: \(String(describing: writerError))")
        // Once the read is over, the change goes through; the reader follows it and shows it.
        try writer.items.editEntry(.id(id), EntryChanges(password: "second"))
        XCTAssertTrue(try reader.followExternalChanges())
        XCTAssertEqual(try reader.items.fieldValue("password", of: .id(id)), "second")
    }

    func testALockedVaultWithARecordIsNotChanged() throws {
        _ = try makeVault()
        let locked = try Vault.open(at: directory)
        assertVaultError(.wrongPassword, { try locked.items.addCategory("Travel") }) { error in
            XCTAssertTrue(error.message.contains("locked"), error.message)
        }
        XCTAssertFalse(try reopen().items.categories().contains { $0.name == "Travel" })
    }

    /// A list read with a concurrent check runs while its store is checked on a second
    /// connection: the read itself goes on, its result is refused once the check names the
    /// tampering, and no change is written after that verdict.
    func testAConcurrentCheckReportsTamperingAndHoldsBackEveryChange() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        try vault.items.addNote(title: "other", text: "text")
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1 WHERE Z_PK = 2")
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: password, verification: .concurrent)
        var readMeanwhile: Int?
        assertVaultError(.invalidData, {
            _ = try reopened.integrity.readWhileVerifying {
                let notes = try reopened.items.notes()
                XCTAssertNotNil(reopened.pendingVerification, "the check runs on its own connection")
                readMeanwhile = notes.count
                return notes
            }
        }) { error in
            XCTAssertTrue(
                error.message.contains("Notes.sqlite, Note row 2: the row was changed outside mystash"), error.message)
        }
        XCTAssertEqual(readMeanwhile, 2, "reading goes on meanwhile")
        assertVaultError(.invalidData, { try reopened.items.addCategory("Travel") })
        assertVaultError(.invalidData, { try reopened.items.addCategory("Travel") })  // the verdict stands
        XCTAssertFalse(
            try sqlite("Passwords.sqlite", "SELECT ZNAME FROM ZCATEGORY").contains("Travel"), "nothing was written")
    }

    /// A list of one store checks that store in full and the other's record only: tampering
    /// in the notes does not hold back a list of entries, but any read of the notes, and every
    /// change, still finds it.
    func testAListChecksTheStoreItReadsAndLeavesTheOtherToLaterReads() throws {
        let vault = try makeVault()
        try vault.items.addEntry(EntryChanges(name: "Bank", password: "secret"))
        try vault.items.addNote(title: "kept", text: "text")
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1 WHERE Z_PK = 1")
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: password, verification: .concurrent)
        let entries = try reopened.integrity.readWhileVerifying { try reopened.items.entries() }
        XCTAssertEqual(entries.map(\.name), ["Bank"])
        XCTAssertNil(reopened.pendingVerification)
        for read in [{ _ = try reopened.items.notes() }, { _ = try reopened.items.note(.name("kept")) }] {
            assertVaultError(.invalidData, read) { error in
                XCTAssertTrue(
                    error.message.contains("Notes.sqlite, Note row 1: the row was changed outside mystash"),
                    error.message)
            }
        }
        assertVaultError(.invalidData, { try reopened.items.addCategory("Travel") })
        XCTAssertFalse(try sqlite("Passwords.sqlite", "SELECT ZNAME FROM ZCATEGORY").contains("Travel"))
        // The same tampering in the store a list reads is refused by that list.
        let again = try Vault.open(at: directory)
        try again.unlock(password: password, verification: .concurrent)
        assertVaultError(.invalidData, { _ = try again.integrity.readWhileVerifying { try again.items.notes() } })
    }

    func testAConcurrentCheckOfAnIntactVaultPasses() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: password, verification: .concurrent)
        XCTAssertEqual(try reopened.integrity.readWhileVerifying { try reopened.items.notes() }.map(\.title), ["kept"])
        XCTAssertNil(reopened.pendingVerification)
        try reopened.awaitVerification()
        try reopened.items.addCategory("Travel")
        XCTAssertTrue(try reopen().items.categories().contains { $0.name == "Travel" })
    }

    /// An older copy of a store in place while the vault opens, the current one put back before
    /// the check: the check must read the files the vault has open, not what the paths name now.
    func testAConcurrentCheckReadsTheFilesTheVaultOpenedNotTheirPaths() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "v1", text: "text")
        let notes = directory.appendingPathComponent("Notes.sqlite")
        let (older, current) = (directory.appendingPathComponent("older"), directory.appendingPathComponent("current"))
        try FileManager.default.copyItem(at: notes, to: older)
        try vault.items.addNote(title: "v2", text: "text")
        XCTAssertEqual(rename(notes.path, current.path), 0)
        XCTAssertEqual(rename(older.path, notes.path), 0)
        let reopened = try Vault.open(at: directory)
        XCTAssertEqual(rename(current.path, notes.path), 0)
        assertVaultError(.invalidData, {
            try reopened.unlock(password: password, verification: .concurrent)
            try reopened.awaitVerification()
        }) { error in
            XCTAssertTrue(error.message.contains("Notes.sqlite: it is an older or foreign copy"), error.message)
        }
    }

    /// A record this process has checked cannot vanish: dropping both record tables while the
    /// vault is open is tampering, not a vault from before the record.
    func testARecordRemovedWhileTheVaultIsOpenIsTampering() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "kept", text: "text")
        let reopened = try reopen()
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            _ = try sqlite(store, "DROP TABLE MYSTASH_RECORD; DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_BUCKET")
        }
        _ = try sqlite("Notes.sqlite", "UPDATE ZNOTE SET Z_OPT = Z_OPT + 1")
        assertVaultError(.invalidData, { try reopened.followExternalChanges() }) { error in
            XCTAssertTrue(error.message.contains("its integrity record was removed outside mystash"), error.message)
        }
    }

    /// The key slot says the vault has a record: dropping both record tables is tampering,
    /// where before it made the vault one from before the record, trusted as it was.
    func testRemovingTheRecordOfAVaultWhoseSlotRequiresOneIsTampering() throws {
        let vault = try makeVault()
        _ = try vault.items.addNote(title: "kept", text: "text")
        XCTAssertTrue(vault.keySlot.requiresIntegrityRecord)
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            try sqlite(store, "DROP TABLE MYSTASH_ROW_TAG; DROP TABLE MYSTASH_RECORD; DROP TABLE MYSTASH_BUCKET")
        }
        assertVaultError(.invalidData, { _ = try reopen() }) {
            XCTAssertTrue($0.message.contains("its integrity record was removed outside mystash"), $0.message)
        }
        let checking = try Vault.open(at: directory)
        try checking.unlock(password: password, verification: .skipped)
        XCTAssertEqual(try checking.integrity.check().map(\.message), Array(
            repeating: "its integrity record was removed outside mystash", count: 2))
    }

    /// A vault from before the record (a version 1 slot) gets the record at its next change and,
    /// at the next unlock with the master password, the slot that requires it.
    func testAnOlderVaultsSlotComesToRequireTheRecordOnceItHasOne() throws {
        let vault = try makeVault()
        _ = try vault.items.addNote(title: "kept", text: "text")
        try dropIntegrityRecord()
        XCTAssertFalse(try Vault.open(at: directory).keySlot.requiresIntegrityRecord)
        let older = try reopen()
        _ = try older.items.addNote(title: "second", text: "text")
        let session = try older.sessionContents()
        let upgraded = try reopen()
        XCTAssertTrue(upgraded.keySlot.requiresIntegrityRecord)
        XCTAssertEqual(upgraded.keySlot.slotIdentifier, session.slotIdentifier, "sessions stay valid")
        XCTAssertTrue(try Vault.open(at: directory).unlock(session: session))
        XCTAssertEqual(try upgraded.integrity.check(), [])
    }

    /// A trigger planted while a vault is open (its schema checked at open): the next save checks
    /// the schema again before computing its tags, so what the trigger wrote is never tagged.
    func testATriggerPlantedWhileTheVaultIsOpenStopsTheNextSave() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "Bank", password: "old-secret", userId: nil, url: nil, category: nil, notes: nil)
        try vault.items.editEntry("Bank", EntryChanges(password: "new-secret"))
        let old = try sqlite("Passwords.sqlite", "SELECT hex(ZPASSWORD) FROM ZPASSWORDHISTORY LIMIT 1")
        try sqlite("Passwords.sqlite", "CREATE TRIGGER KEEP_OLD AFTER UPDATE ON ZSYSTEM BEGIN "
                   + "UPDATE ZSYSTEM SET ZPASSWORD = X'\(old)' WHERE Z_PK = NEW.Z_PK; END")
        assertVaultError(.invalidData, { try vault.items.editEntry("Bank", EntryChanges(password: "newest-secret")) }) {
            XCTAssertTrue($0.message.contains("trigger 'KEEP_OLD' on ZSYSTEM was added outside ObjectGraph"),
                          $0.message)
        }
        try sqlite("Passwords.sqlite", "DROP TRIGGER KEEP_OLD")
        let reopened = try reopen()
        XCTAssertEqual(try reopened.integrity.check(), [])
        XCTAssertEqual(try reopened.items.entry("Bank", reveal: true).password, "new-secret")
    }

    /// Each store of a vault, the first record layout's tables included, is of the shape whose
    /// definitions are foreseen from the statements' text, so that opening it runs no statement
    /// to know its schema; and the foresight is SQLite's word.
    func testAVaultsSchemaIsForeseenAsSQLiteKeepsIt() throws {
        let vault = try makeVault()
        let own = try vault.ownSchema()
        let layouts = vault.coordinator.persistentStores.flatMap { store in
            [own[store.identifier] ?? [], FirstLayoutRecord.tableDefinitions].map { (store, $0) }
        }
        for (store, extra) in layouts {
            let statements = vault.coordinator.expectedStatements(of: store, extraObjects: extra)
            let foreseen = try XCTUnwrap(SchemaObject.predictedDefinitions(
                required: statements.required, optional: statements.optional), store.displayName)
            let sqlite = try vault.coordinator.expectedSchema(statements)
            XCTAssertEqual(foreseen.definitions, sqlite.definitions)
            XCTAssertEqual(foreseen.required, sqlite.required)
            XCTAssertGreaterThan(foreseen.definitions.count, 10)
        }
        XCTAssertEqual(layouts.count, 4)
    }
}
