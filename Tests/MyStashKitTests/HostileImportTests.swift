import Foundation
import XCTest

@testable import MyStashKit

/// Import files made to hurt: nested without end, holding bytes that are not text, and
/// large where a real export is small. None may crash the process or save half of it.
final class HostileImportTests: VaultTestCase {
    /// A KeePass XML file whose groups nest `depth` deep.
    func keePassXML(groupsNested depth: Int) -> Data {
        Data(
            ("<KeePassFile><Root><Group><Name>Root</Name>" + String(repeating: "<Group>", count: depth)
                + String(repeating: "</Group>", count: depth) + "</Group></Root></KeePassFile>").utf8)
    }

    func testKeePassXMLNestedAMillionDeepIsRefusedNamingTheLimit() throws {
        let vault = try makeVault()
        let deep = keePassXML(groupsNested: 1_000_000)
        assertVaultError(.invalidData, { _ = try vault.importItems(deep, format: .keepassxcXML) }) {
            XCTAssertTrue(
                $0.message.contains("nested more than \(KeePassXMLTreeBuilder.maximumDepth) deep"), $0.message)
            XCTAssertNotNil($0.hint)
        }
        XCTAssertEqual(try vault.entries().count, 0)
    }

    func testKeePassXMLJustWithinTheDepthLimitReads() throws {
        // Root group, the groups inside it, <KeePassFile> and <Root>: the limit exactly.
        let source = try Vault.read(
            keePassXML(groupsNested: KeePassXMLTreeBuilder.maximumDepth - 3), format: .keepassxcXML)
        XCTAssertEqual(source.document.passwords.count, 0)
        XCTAssertThrowsError(
            try Vault.read(keePassXML(groupsNested: KeePassXMLTreeBuilder.maximumDepth - 2), format: .keepassxcXML))
    }
}
