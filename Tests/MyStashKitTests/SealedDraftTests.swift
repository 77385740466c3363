import Foundation
import XCTest
@testable import MyStashKit

/// What browse keeps of an open form while locked: sealed under a key only an unlock brings back.
final class SealedDraftTests: VaultTestCase {
    func testADraftOpensOnlyWhileUnlockedAndUnaltered() throws {
        let vault = try makeVault()
        let draft = Array("{\"title\":\"Groceries\"}".utf8)
        let sealed = try vault.sealDraft(draft)
        XCTAssertNil(Data(sealed).range(of: Data("Groceries".utf8)), "no plaintext in the sealed bytes")
        XCTAssertNotEqual(try vault.sealDraft(draft), sealed, "a new nonce each time")
        vault.lock()
        assertVaultError(.wrongPassword, { _ = try vault.openSealedDraft(sealed) })
        assertVaultError(.wrongPassword, { _ = try vault.sealDraft(draft) })
        try vault.unlock(password: password)
        XCTAssertEqual(try vault.openSealedDraft(sealed).bytes, draft)
        var altered = sealed
        altered[altered.count / 2] ^= 1
        assertVaultError(.invalidData, { _ = try vault.openSealedDraft(altered) })
        // Another vault's key does not open it.
        let other = try Vault.create(at: directory.appendingPathComponent("other"), password: password, parameters: cheap)
        assertVaultError(.invalidData, { _ = try other.openSealedDraft(sealed) })
    }
}
