import Foundation
import XCTest
@testable import MyStashKit
import StashCrypto

final class RekeyTests: VaultTestCase {
    func testRekeyReencryptsEveryFieldSoTheOldDataKeyDecryptsNothing() throws {
        let vault = try makeVault()
        _ = try vault.addNote(title: "Wi-Fi", text: "the code is on the router")
        _ = try vault.addNote(title: "Empty", text: "")
        _ = try vault.addEntry(name: "mail", password: "hunter2", userId: "me", url: "https://mail.example",
                               category: "E-mail", notes: "old account")
        let before = try vault.exportJSON()
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
        XCTAssertEqual(try reopened.exportJSON(), before)
        XCTAssertEqual(try reopened.check(), [])

        // The old data key, as a process could have copied it out of the keyring: no row opens.
        reopened.transformer.dataKey = oldSession.dataKey
        reopened.context.reset()
        let problems = try reopened.check()
        XCTAssertEqual(problems.count, 3, "every row with encrypted fields fails: \(problems)")
        XCTAssertTrue(problems.allSatisfy { $0.message.contains("modified or moved") }, "\(problems)")
    }
}
