import Foundation
import StashCrypto
import XCTest

@testable import MyStashKit

/// A version-1 vault written by main's mystash (Fixtures/vault-v1, see its README) opens with
/// model version 2: migrated in place on open, everything kept, new fields usable.
final class VaultMigrationTests: VaultTestCase {
    func copyFixture() throws {
        let fixture = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
            .appendingPathComponent("vault-v1")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let target = directory.appendingPathComponent(store)
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(store), to: target)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        }
    }

    func testAVersion1VaultIsMigratedOnOpenKeepingEverything() throws {
        try copyFixture()
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM sqlite_master WHERE name = 'ZFIELD'"), "0")
        let vault = try Vault.open(at: directory)
        XCTAssertEqual(vault.migrations.map(\.store).sorted(), ["Notes.sqlite", "Passwords.sqlite"])
        XCTAssertEqual(Set(vault.migrations.map { "\($0.from)→\($0.to)" }), ["MyStash→MyStash 5"])
        try vault.unlock(password: .password("fixture-password"))

        XCTAssertEqual(try vault.items.entries().map(\.name), ["GitHub", "Mail", "Router"])
        let router = try vault.items.entry("Router", reveal: true)
        XCTAssertEqual(router.password, "p@ss w0rd é")
        XCTAssertEqual(router.userId, "admin")
        XCTAssertEqual(router.url, "http://192.168.1.1")
        XCTAssertEqual(router.category, "Home Lab")
        XCTAssertEqual(try vault.items.entry("GitHub", reveal: true).password, "hunter2")
        XCTAssertEqual(try vault.items.note("Office").text, "door code 4711\nsecond line ü")
        XCTAssertEqual(try vault.items.notes().map(\.title).sorted(), ["Empty note", "Office"])
        XCTAssertTrue(try vault.integrity.check().isEmpty)
        // Seeds keep upgrading: the version-5 categories arrive, the user's own stays.
        let categories = Set(try vault.items.categories().map(\.name))
        XCTAssertTrue(categories.isSuperset(of: ["Home Lab", "Payment Card", "Identity", "SSH Key", "Web Site"]))

        // The new fields work on a migrated entry, encrypted like the rest.
        var changes = EntryChanges()
        changes.totp = "JBSWY3DPEHPK3PXP"
        changes.fields = [FieldInfo(name: "PIN", value: "migrated-pin-4711", hidden: true)]
        changes.password = "new-router-password"
        try vault.items.editEntry("Router", changes)

        let again = try Vault.open(at: directory)
        XCTAssertTrue(again.migrations.isEmpty, "a migrated vault is current")
        try again.unlock(password: .password("fixture-password"))
        XCTAssertEqual(try again.items.fieldValue("PIN", of: "Router"), "migrated-pin-4711")
        XCTAssertEqual(try again.items.passwordHistory("Router", reveal: true).map(\.password), ["p@ss w0rd é"])
        XCTAssertEqual(try again.items.totpCode("Router").code.value.count, 6)
        XCTAssertEqual(try sqlite("Passwords.sqlite", "SELECT COUNT(*) FROM ZFIELD"), "1")
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let bytes = try Data(contentsOf: directory.appendingPathComponent(store))
            XCTAssertNil(bytes.range(of: Data("migrated-pin-4711".utf8)), "no plaintext in \(store)")
        }
    }

    func testAWrongPasswordAfterMigrationIsStillWrong() throws {
        try copyFixture()
        let vault = try Vault.open(at: directory)
        assertVaultError(.wrongPassword, { try vault.unlock(password: .password("not it")) })
    }
}
