import Foundation
import MyStashKit
import StashCrypto
import XCTest

/// Observing the vault's items through its public surface alone (no `@testable`): the first
/// list, each change made here, another process's once followed, and the end of an observation.
final class ItemObservationTests: VaultTestCase {
    /// Every list `onChange` was given, in order.
    final class Received<Item> {
        var lists: [[Item]] = []
        var errors: [Error] = []
    }

    func testEntriesComeInCategoryOrderAndFollowEachChangeMadeThroughTheVault() throws {
        let vault = try makeVault()
        try vault.items.addEntry(EntryChanges(name: "zebra", userId: "z@example.org", category: "Banking", password: "p1"))
        try vault.items.addEntry(EntryChanges(name: "Apple", url: "https://apple.example", category: "banking",
                                        password: "p2"))
        try vault.items.addEntry(EntryChanges(name: "loose", password: "p3"))
        try vault.items.addEntry(EntryChanges(name: "mail", category: "E-mail", password: "p4"))
        let received = Received<EntrySummary>()
        let observation = try vault.observeEntries(onError: { received.errors.append($0) }) {
            received.lists.append($0)
        }
        XCTAssertEqual(received.lists.count, 1, "the first list comes at once")
        let first = try XCTUnwrap(received.lists.last)
        // Without a category first, then by category and name, ignoring case.
        XCTAssertEqual(first.map(\.name), ["loose", "Apple", "zebra", "mail"])
        XCTAssertEqual(first.map(\.category), [nil, "Banking", "Banking", "E-mail"])
        XCTAssertEqual(first[1].url, "https://apple.example")
        XCTAssertEqual(first[2].userId, "z@example.org")

        let added = try vault.items.addEntry(EntryChanges(name: "bank card", category: "Banking", password: "p5"))
        XCTAssertEqual(received.lists.last?.map(\.name), ["loose", "Apple", "bank card", "zebra", "mail"])
        XCTAssertEqual(received.lists.last?.first { $0.id == added }?.category, "Banking")

        try vault.items.editEntry(.id(added), EntryChanges(name: "card", userId: "me", category: "E-mail"))
        let edited = try XCTUnwrap(received.lists.last?.first { $0.id == added })
        XCTAssertEqual([edited.name, edited.userId, edited.url, edited.category], ["card", "me", nil, "E-mail"])
        XCTAssertEqual(received.lists.last?.map(\.name), ["loose", "Apple", "zebra", "card", "mail"])

        try vault.items.removeEntry("zebra")
        XCTAssertEqual(received.lists.last?.map(\.name), ["loose", "Apple", "card", "mail"])
        XCTAssertEqual(received.lists.count, 4, "one list for each change")
        XCTAssertTrue(received.errors.isEmpty)
        withExtendedLifetime(observation) {}
    }

    func testNotesComeMostRecentFirstAndAnUndoIsAChange() throws {
        let vault = try makeVault()
        vault.recordChangesForUndo()
        try vault.items.addNote(title: "older", text: "one")
        let received = Received<NoteSummary>()
        let observation = try vault.observeNotes(onError: { received.errors.append($0) }) {
            received.lists.append($0)
        }
        XCTAssertEqual(received.lists.last?.map(\.title), ["older"])
        XCTAssertEqual(received.lists.last?.map(\.text), ["one"])

        let newer = try vault.items.addNote(title: "newer", text: "two")
        XCTAssertEqual(received.lists.last?.map(\.title), ["newer", "older"])
        XCTAssertEqual(received.lists.last?.first?.id, newer)

        try vault.undoLastChange()
        XCTAssertEqual(received.lists.last?.map(\.title), ["older"], "the undone add is gone from the list")
        XCTAssertTrue(received.errors.isEmpty)
        withExtendedLifetime(observation) {}
    }

    func testUndoingARemovedEntryBringsBackItsFieldsAndHistory() throws {
        let vault = try makeVault()
        vault.recordChangesForUndo()
        var changes = EntryChanges(name: "bank", category: "Banking", password: "first")
        changes.fields = [FieldInfo(name: "PIN", value: "1234", hidden: true),
                          FieldInfo(name: "branch", value: "north", hidden: false)]
        try vault.items.addEntry(changes)
        try vault.items.editEntry(.name("bank"), EntryChanges(password: "second"))
        try vault.items.removeEntry(.name("bank"))
        XCTAssertThrowsError(try vault.items.entry(.name("bank"), reveal: true))

        let undone = try vault.undoLastChange()
        XCTAssertEqual(undone?.kind, .broughtBack)
        let entry = try vault.items.entry(.name("bank"), reveal: true)
        XCTAssertEqual(entry.password, "second")
        XCTAssertEqual(entry.fields, changes.fields, "the entry's fields came back with it")
        XCTAssertEqual(entry.historyCount, 1, "and its earlier password")
        // As saved: a reopened vault reads the same.
        let reopened = try reopen().items.entry(.name("bank"), reveal: true)
        XCTAssertEqual(reopened.fields, changes.fields)
        XCTAssertEqual(reopened.historyCount, 1)
    }

    func testAnotherProcesssCommitIsToldOnlyOnceFollowed() throws {
        let vault = try makeVault()
        let received = Received<NoteSummary>()
        let observation = try vault.observeNotes(onError: { received.errors.append($0) }) {
            received.lists.append($0)
        }
        XCTAssertEqual(received.lists, [[]])

        let other = try reopen()
        let id = try other.items.addNote(title: "from elsewhere", text: "hello")
        XCTAssertEqual(received.lists.count, 1, "nothing is told before the vault follows other processes")

        XCTAssertTrue(try vault.followExternalChanges())
        XCTAssertEqual(received.lists.last?.map(\.id), [id])
        XCTAssertEqual(received.lists.last?.map(\.title), ["from elsewhere"])
        XCTAssertFalse(try vault.followExternalChanges(), "nothing new the second time")
        XCTAssertEqual(received.lists.count, 2)
        withExtendedLifetime(observation) {}
    }

    func testLockingCancellingOrReleasingEndsAnObservation() throws {
        let vault = try makeVault()
        let received = Received<EntrySummary>()
        let observe = {
            try vault.observeEntries(onError: { received.errors.append($0) }) { received.lists.append($0) }
        }

        let cancelled = try observe()
        cancelled.cancel()
        try vault.items.addEntry(EntryChanges(name: "after cancel", password: "p"))
        XCTAssertEqual(received.lists.count, 1, "a cancelled observation is told nothing")

        _ = try observe()
        try vault.items.addEntry(EntryChanges(name: "after release", password: "p"))
        XCTAssertEqual(received.lists.count, 2, "a released observation is told nothing")

        let locked = try observe()
        vault.lock()
        try vault.unlock(password: password)
        try vault.items.addEntry(EntryChanges(name: "after lock", password: "p"))
        XCTAssertEqual(received.lists.count, 3, "the lock ended the observation")
        XCTAssertTrue(received.errors.isEmpty)

        // Observed again once unlocked: every entry, those added meanwhile with them.
        let again = try observe()
        XCTAssertEqual(received.lists.last?.map(\.name), ["after cancel", "after lock", "after release"])
        withExtendedLifetime((locked, again)) {}
    }
}
