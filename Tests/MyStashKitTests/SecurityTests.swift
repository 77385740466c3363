import Foundation
import XCTest
@testable import MyStashKit
import StashPlatform
import StashCrypto

final class SecurityTests: VaultTestCase {
    private func filesContain(_ marker: String) throws -> [String] {
        let needle = Data(marker.utf8)
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { name in
            (try Data(contentsOf: directory.appendingPathComponent(name))).range(of: needle) != nil
        }
    }

    func testNoPlaintextReachesAnyFileAfterCommitOrRollback() throws {
        let marker = "MARKER-\(UUID().uuidString)"
        let vault = try makeVault()
        try vault.items.addNote(title: "title \(marker)", text: "text \(marker)")
        try vault.items.addEntry(name: "name \(marker)", password: "pw \(marker)", userId: "u\(marker)", url: "https://\(marker).example", category: nil, notes: "notes \(marker)")
        try vault.items.editNote("1", title: nil, text: "edited \(marker)")
        // A failing save (rolled back) must not leave plaintext behind either, including in a journal.
        XCTAssertThrowsError(try vault.items.addEntry(name: "", password: "pw \(marker)", userId: nil, url: "bad", category: nil, notes: marker))
        try vault.items.removeEntry("1")
        XCTAssertEqual(try filesContain(marker), [], "files of the vault holding the marker")
        XCTAssertEqual(try filesContain("Web Site").sorted(), ["Passwords.sqlite"], "the control: plain category names are found")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertTrue(names.allSatisfy { $0.hasPrefix("Notes.sqlite") || $0.hasPrefix("Passwords.sqlite") }, "\(names)")
    }

    func testACiphertextMovedToAnotherRowOrColumnIsReportedAsTampering() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "first", password: "first-secret", userId: "alice", url: nil, category: nil, notes: nil)
        try vault.items.addEntry(name: "second", password: "second-secret", userId: "bob", url: nil, category: nil, notes: nil)
        // Copy row 2's password over row 1's.
        try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZPASSWORD = (SELECT ZPASSWORD FROM ZSYSTEM WHERE Z_PK = 2) WHERE Z_PK = 1")
        assertVaultError(.invalidData, { _ = try reopen(verification: .skipped).items.entry("1", reveal: true) }) { error in
            XCTAssertTrue(error.message.contains("Passwords.sqlite, System row 1, field password"), error.message)
            XCTAssertFalse(error.message.contains("second-secret"))
        }
        XCTAssertEqual(try reopen(verification: .skipped).items.entry("2", reveal: true).password, "second-secret",
                       "the untouched row still opens")
        // Now move row 2's password into row 2's user ID column (same row, other attribute).
        try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZPASSWORD = NULL WHERE Z_PK = 1; UPDATE ZSYSTEM SET ZUSERID = ZPASSWORD WHERE Z_PK = 2")
        assertVaultError(.invalidData, { _ = try reopen(verification: .skipped).items.entry("2", reveal: false) }) { error in
            XCTAssertTrue(error.message.contains("System row 2, field userId"), error.message)
            XCTAssertFalse(error.message.contains("second-secret"))
        }
        try sqlite("Passwords.sqlite", "UPDATE ZSYSTEM SET ZUSERID = NULL WHERE Z_PK = 2; UPDATE ZSYSTEM SET ZUSERID = (SELECT ZPASSWORD FROM ZSYSTEM WHERE Z_PK = 2) WHERE Z_PK = 1")
        assertVaultError(.invalidData, { _ = try reopen(verification: .skipped).items.entries() }) { error in
            XCTAssertTrue(error.message.contains("System row 1, field userId"), error.message)
            XCTAssertFalse(error.message.contains("second-secret"))
        }
        let checked = try reopen(verification: .skipped)
        let problems = try checked.integrity.check()
        XCTAssertEqual(Set(problems.map { "\($0.store) \($0.entity ?? "") \($0.primaryKey ?? 0)" }),
                       ["Passwords.sqlite System 1", "Passwords.sqlite System 2"], "\(problems)")
        XCTAssertTrue(problems.contains { $0.primaryKey == 1 && $0.message.contains("field userId") }, "\(problems)")
        // The integrity record names both rows changed outside mystash, also where a field still decrypts.
        XCTAssertTrue(problems.contains { $0.primaryKey == 2 && $0.message.contains("changed outside mystash") },
                      "\(problems)")
        assertVaultError(.invalidData, { _ = try reopen() }) { error in
            XCTAssertTrue(error.message.contains("Passwords.sqlite, System row 1: the row was changed outside mystash"),
                          error.message)
        }
    }

    func testAnotherVaultsCiphertextDoesNotOpen() throws {
        let vault = try makeVault()
        try vault.items.addNote(title: "mine", text: "x")
        let other = directory.appendingPathComponent("../other-\(UUID().uuidString)").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: other) }
        let otherVault = try Vault.create(at: other, password: password, parameters: cheap)
        try otherVault.items.addNote(title: "theirs", text: "y")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [directory.appendingPathComponent("Notes.sqlite").path,
                             "ATTACH '\(other.appendingPathComponent("Notes.sqlite").path)' AS o; UPDATE ZNOTE SET ZTITLE = (SELECT ZTITLE FROM o.ZNOTE)"]
        try process.run()
        process.waitUntilExit()
        assertVaultError(.invalidData, { _ = try reopen().items.notes() })
    }

    /// A part of check that cannot run (the categories cannot be read) is a problem, never a pass.
    func testCheckReportsTheCategoryComparisonItCouldNotMake() throws {
        _ = try makeVault()
        try sqlite("Passwords.sqlite", "UPDATE ZCATEGORY SET Z_OPT = 'x' WHERE Z_PK = 1")
        let problems = try reopen(verification: .skipped).integrity.check()
        XCTAssertTrue(problems.contains {
            $0.entity == "Category" && $0.primaryKey == nil && $0.message.hasPrefix("category names could not be checked: ")
        }, "\(problems)")
    }

    func testKDFDefaultsAreStrongAndTheFloorNeedsTheTestSwitch() throws {
        let calibrated = try KDFPolicy.parameters(logN: nil)
        XCTAssertGreaterThanOrEqual(calibrated.logN, 15)
        XCTAssertLessThanOrEqual(calibrated.logN, 20)
        XCTAssertEqual(calibrated.r, 8)
        XCTAssertEqual(calibrated.p, 1)
        XCTAssertThrowsError(try KDFPolicy.parameters(logN: 10)) { error in
            XCTAssertEqual(error as? VaultError, .settingOutOfRange(.kdfCost, value: "10", allowed: 15...20))
        }
        #if DEBUG
        XCTAssertTrue(KDFPolicy.honoursWeakSwitch)
        XCTAssertEqual(try KDFPolicy.parameters(logN: 10, allowingWeak: true).logN, 10)
        #else
        // A release build refuses the weak cost even when the caller allows it, and says why.
        XCTAssertFalse(KDFPolicy.honoursWeakSwitch)
        XCTAssertThrowsError(try KDFPolicy.parameters(logN: 10, allowingWeak: true)) {
            XCTAssertEqual($0 as? VaultError, .weakKDFRefused(10, allowed: 15...20))
        }
        #endif
        XCTAssertEqual(try KDFPolicy.parameters(logN: 16).logN, 16)
        XCTAssertThrowsError(try KDFPolicy.parameters(logN: 21, allowingWeak: true))

    }

    func testChangingThePasswordRewrapsOnlyTheKey() throws {
        let vault = try makeVault()
        try vault.items.addEntry(name: "a", password: "pw", userId: nil, url: nil, category: nil, notes: nil)
        let before = try sqlite("Passwords.sqlite", "SELECT hex(ZPASSWORD) FROM ZSYSTEM")
        try vault.changePassword(to: .password("new one"), parameters: cheap)
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT hex(ZPASSWORD) FROM ZSYSTEM"), before, "fields are not re-encrypted")
        assertVaultError(.wrongPassword, { try Vault.open(at: directory).unlock(password: password) })
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: .password("new one"))
        XCTAssertEqual(try reopened.items.entry("a", reveal: true).password, "pw")
    }

    func testSessionsKeepTheKeyInTheKernelKeyringAndGoStaleOnPasswordChange() throws {
        let vault = try makeVault()
        do {
            try KeyringSession.store(try vault.sessionContents(), vaultIdentifier: vault.identifier, timeout: 60)
        } catch let error as KeyringSession.Unavailable {
            throw XCTSkip("\(error)")
        }
        defer { KeyringSession.revoke(vaultIdentifier: vault.identifier) }
        let session = try XCTUnwrap(KeyringSession.load(vaultIdentifier: vault.identifier))
        XCTAssertEqual(session.dataKey, try vault.sessionContents().dataKey)
        let reopened = try Vault.open(at: directory)
        XCTAssertTrue(try reopened.unlock(session: session))
        XCTAssertNoThrow(try reopened.items.notes())

        try reopened.changePassword(to: .password("changed"), parameters: cheap)
        XCTAssertNil(KeyringSession.load(vaultIdentifier: vault.identifier), "passwd ends the session")
        // A session taken before the change elsewhere is stale: refused and dropped.
        try KeyringSession.store(session, vaultIdentifier: vault.identifier, timeout: 60)
        let third = try Vault.open(at: directory)
        XCTAssertFalse(try third.unlock(session: session))
        XCTAssertFalse(third.isUnlocked)
        XCTAssertNil(KeyringSession.load(vaultIdentifier: vault.identifier))
    }
}

