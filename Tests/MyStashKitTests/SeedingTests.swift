import Foundation
import XCTest
@testable import MyStashKit

final class SeedingTests: VaultTestCase {
    func testANewVaultGetsEveryVersion() throws {
        let vault = try makeVault()
        let expected = Set(Vault.seedCategories.map(\.name))
        XCTAssertTrue(expected.isSuperset(of: ["Web Site", "Desktop Software", "Credit Card PIN"]))
        XCTAssertEqual(Set(try vault.items.categories().map(\.name)), expected)
        let status = try vault.seedStatus()
        XCTAssertEqual(status, [SeedStatus(list: "category", loaded: Vault.seedCategories.map(\.version).max()!, available: Vault.seedCategories.map(\.version).max()!)])
    }

    func testOpeningAgainAddsNothing() throws {
        _ = try makeVault()
        let count = try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZCATEGORY")
        for _ in 0..<3 { _ = try reopen() }
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZCATEGORY"), count)
    }

    func testAnOldVaultGetsOnlyTheMissingVersionsAndNothingTheUserChangedComesBack() throws {
        let vault = try makeVault()
        // The user renames a version-1 category and deletes another.
        try vault.items.renameCategory("Desktop Software", to: "Apps")
        try vault.items.removeCategory("Web Site")
        // Pretend the vault was made when only version 1 existed.
        let newer = Vault.seedCategories.filter { $0.version > 1 }.map { "'\($0.name)'" }.joined(separator: ",")
        try sqlite("Passwords.sqlite", "DELETE FROM ZCATEGORY WHERE ZNAME IN (\(newer)); UPDATE ZLIST SET ZVERSION = 1")
        try dropIntegrityRecord()
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT ZVERSION FROM ZLIST WHERE ZNAME = 'category'"), "1")

        let reopened = try reopen()
        let names = Set(try reopened.items.categories().map(\.name))
        XCTAssertTrue(names.contains("Credit Card PIN"), "version 2 was added")
        XCTAssertTrue(names.contains("Apps"))
        XCTAssertFalse(names.contains("Desktop Software"), "a renamed seed is not re-added")
        XCTAssertFalse(names.contains("Web Site"), "a deleted seed is not re-added")
        XCTAssertEqual(try reopened.seedStatus().first?.loaded, Vault.seedCategories.map(\.version).max())
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZCATEGORY"), String(names.count), "no duplicates")
    }

    /// A one-item read runs in one read transaction; an ID naming nothing makes it check the
    /// whole store, and the seeding after that check is a write, which must run outside it.
    func testAOneItemReadThatEndsInSeedingSeedsOutsideItsTransaction() throws {
        _ = try makeVault()
        try sqlite("Passwords.sqlite", "DELETE FROM ZCATEGORY WHERE ZNAME = 'Wi-Fi'; UPDATE ZLIST SET ZVERSION = 2")
        try dropIntegrityRecord()
        let vault = try reopen(verification: .reads)
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZCATEGORY WHERE ZNAME = 'Wi-Fi'"), "0",
                       "a one-item read does not seed at the unlock")
        XCTAssertThrowsError(try vault.items.fieldValue("password", of: .id(99_999))) { error in
            XCTAssertEqual((error as? VaultError)?.kind, .notFound, "\(error)")
        }
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZCATEGORY WHERE ZNAME = 'Wi-Fi'"), "1")
        let entry = try vault.items.addEntry(EntryChanges(name: "after", password: "pw"))
        XCTAssertEqual(try vault.items.fieldValue("password", of: .id(entry)), "pw", "the vault reads on")
    }

    func testANewSeedNameTheUserAlreadyHasIsNotDuplicated() throws {
        let vault = try makeVault()
        try sqlite("Passwords.sqlite", "DELETE FROM ZCATEGORY WHERE ZNAME = 'Wi-Fi'; UPDATE ZLIST SET ZVERSION = 2")
        try dropIntegrityRecord()
        try vault.items.addCategory("wi-fi")
        let reopened = try reopen()
        XCTAssertEqual(try reopened.items.categories().filter { $0.name.lowercased() == "wi-fi" }.count, 1)
    }
}
