import Foundation
import XCTest
@testable import MyStashKit
import StashCrypto

final class RekeyTests: VaultTestCase {
    func testRekeyReencryptsEveryFieldSoTheOldDataKeyDecryptsNothing() throws {
        let vault = try makeVault()
        _ = try vault.items.addNote(title: "Wi-Fi", text: "the code is on the router")
        _ = try vault.items.addNote(title: "Empty", text: "")
        _ = try vault.items.addEntry(name: "mail", password: "hunter2", userId: "me", url: "https://mail.example",
                               category: "E-mail", notes: "old account")
        let before = try vault.transfer.exportJSON()
        let oldSession = try vault.sessionContents()
        let ciphertextsBefore = try sqlite(Vault.notesFileName, "SELECT hex(ZTITLE) || hex(ZTEXT) FROM ZNOTE")
            + sqlite(Vault.passwordsFileName, "SELECT hex(ZNAME) || hex(ZPASSWORD) FROM ZSYSTEM")

        try vault.rekey(to: .password("a new master password"), parameters: cheap)

        let ciphertextsAfter = try sqlite(Vault.notesFileName, "SELECT hex(ZTITLE) || hex(ZTEXT) FROM ZNOTE")
            + sqlite(Vault.passwordsFileName, "SELECT hex(ZNAME) || hex(ZPASSWORD) FROM ZSYSTEM")
        XCTAssertNotEqual(ciphertextsAfter, ciphertextsBefore)
        let reopened = try Vault.open(at: directory)
        assertVaultError(.wrongPassword) { try reopened.unlock(password: self.password) }
        XCTAssertFalse(try reopened.unlock(session: oldSession), "a session from before the rekey must be refused")
        try reopened.unlock(password: .password("a new master password"))
        XCTAssertEqual(try reopened.transfer.exportJSON(), before)
        XCTAssertEqual(try reopened.integrity.check(), [])

        // The old data key, as a process could have copied it out of the keyring: no row opens.
        reopened.transformer.dataKey = oldSession.dataKey
        reopened.context.reset()
        let problems = try reopened.integrity.check()
        XCTAssertEqual(problems.count, 3, "every row with encrypted fields fails: \(problems)")
        XCTAssertTrue(problems.allSatisfy { $0.message.contains("modified or moved") }, "\(problems)")
    }

    /// Two changes of the master password from vaults unlocked with the same old one (two
    /// processes): the second is refused, and the password of the one that succeeded opens the vault.
    func testASecondPasswordChangeFromTheSameOldPasswordIsRefused() throws {
        _ = try makeVault()
        let first = try reopen()
        let second = try reopen()
        try first.changePassword(to: .password("first"), parameters: cheap)
        assertVaultError(.busy, { try second.changePassword(to: .password("second"), parameters: cheap) }) {
            XCTAssertTrue($0.message.contains("changed the master password or the vault's key"), $0.message)
        }
        let reopened = try Vault.open(at: directory)
        assertVaultError(.wrongPassword) { try reopened.unlock(password: .password("second")) }
        try reopened.unlock(password: .password("first"))
        XCTAssertEqual(try reopened.integrity.check(), [])
    }

    /// A rekey and a password change from the same old password: whichever comes second is
    /// refused, as a password change would wrap the old data key that no value is under any more.
    func testAPasswordChangeAfterAnotherProcessRekeyedIsRefused() throws {
        _ = try makeVault()
        let rekeying = try reopen()
        let changing = try reopen()
        try rekeying.rekey(to: .password("rekeyed"), parameters: cheap)
        assertVaultError(.busy) { try changing.changePassword(to: .password("changed"), parameters: cheap) }
        assertVaultError(.busy) { try changing.rekey(to: .password("changed"), parameters: cheap) }
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: .password("rekeyed"))
        XCTAssertEqual(try reopened.integrity.check(), [])
    }

    /// A vault that checked its stores before another process rekeyed them, then reads a row the
    /// rekey wrote, holds the old data key for it: the field that does not open is a key change
    /// to retry, not tampering (an import racing a rekey said the vault was tampered with).
    func testARowRewrittenByAnotherProcesssRekeyIsAKeyChangeNotTampering() throws {
        let vault = try makeVault()
        let id = try vault.items.addEntry(EntryChanges(name: "mail", userId: "me", password: "hunter2"))
        let stale = try reopen()
        // A list checks the whole store: reads after it trust what it checked.
        XCTAssertEqual(try stale.items.entries().map(\.name), ["mail"])
        try reopen().rekey(to: .password("rekeyed"), parameters: cheap)
        stale.context.reset()
        assertVaultError(.busy, { _ = try stale.items.entry(.id(id), reveal: true) }) {
            XCTAssertTrue($0.message.contains("changed the vault's key"), $0.message)
        }
    }

    /// A vault unlocked before another process rekeyed it holds the old data key: its change is
    /// refused as a key change to retry, not reported as tampering, and writes nothing under the old key.
    func testAChangeUnderAKeyAnotherProcessReplacedIsRefusedAsAKeyChange() throws {
        let vault = try makeVault()
        _ = try vault.items.addNote(title: "kept", text: "text")
        let stale = try reopen()
        try reopen().rekey(to: .password("rekeyed"), parameters: cheap)
        assertVaultError(.busy, { _ = try stale.items.addNote(title: "lost", text: "under the old key") }) {
            XCTAssertTrue($0.message.contains("changed the vault's key"), $0.message)
        }
        let reopened = try Vault.open(at: directory)
        try reopened.unlock(password: .password("rekeyed"))
        XCTAssertEqual(try reopened.items.notes().map(\.title), ["kept"])
        XCTAssertEqual(try reopened.integrity.check(), [])
    }

    /// A vault still open with the data key from before another process rekeyed it (a browse
    /// view, an unlocked session): re-checking it says the key changed, not that it was tampered with.
    func testReadingUnderAKeyAnotherProcessReplacedAsksToUnlockAgain() throws {
        let vault = try makeVault()
        _ = try vault.items.addNote(title: "kept", text: "text")
        let stale = try reopen()
        try reopen().rekey(to: .password("rekeyed"), parameters: cheap)
        assertVaultError(.busy, { _ = try stale.integrity.check() }) {
            XCTAssertTrue($0.message.contains("changed the vault's key"), $0.message)
            XCTAssertFalse($0.message.contains("outside mystash"), $0.message)
        }
        // Unlocked again (as browse does after locking its view) with the password of now.
        try stale.unlock(password: .password("rekeyed"))
        XCTAssertEqual(try stale.integrity.check(), [])
        XCTAssertEqual(try stale.items.notes().map(\.title), ["kept"])
    }
}
