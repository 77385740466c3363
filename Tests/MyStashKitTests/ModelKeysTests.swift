import Foundation
import ObjectGraph
import XCTest

@testable import MyStashKit

/// Each entity's `Key` names exactly the properties the model gives it: a key the model does
/// not have would trap at run time, a property without a key would be reached by a string.
final class ModelKeysTests: XCTestCase {
    private func assertKeys<Entity: EntityKeys>(_ type: Entity.Type, match model: ManagedObjectModel,
                                                file: StaticString = #filePath, line: UInt = #line) {
        guard let entity = model.entity(named: Entity.entityName) else {
            return XCTFail("the model has no entity \(Entity.entityName)", file: file, line: line)
        }
        let modelled = Set(entity.attributes.map(\.name) + entity.relationships.map(\.name))
        let keys = Entity.Key.allCases.map(\.rawValue)
        XCTAssertEqual(keys.count, Set(keys).count, "\(Entity.entityName) names a key twice", file: file, line: line)
        XCTAssertEqual(Set(keys), modelled, "\(Entity.entityName)'s keys against the model", file: file, line: line)
    }

    func testEveryEntityNamesExactlyTheModelsProperties() throws {
        let model = try Resources.modelVersions().current
        assertKeys(Note.self, match: model)
        assertKeys(PasswordEntry.self, match: model)
        assertKeys(CustomField.self, match: model)
        assertKeys(PasswordHistoryItem.self, match: model)
        assertKeys(MyStashKit.Category.self, match: model)
        assertKeys(Attachment.self, match: model)
        assertKeys(AttachmentChunk.self, match: model)
        assertKeys(SeedList.self, match: model)
        assertKeys(SyncStateRow.self, match: model)
        // Every entity of the model has its typed class, so none is left to string keys.
        let typed: Set = [
            Note.entityName, PasswordEntry.entityName, CustomField.entityName, PasswordHistoryItem.entityName,
            MyStashKit.Category.entityName, Attachment.entityName, AttachmentChunk.entityName, SeedList.entityName,
            SyncStateRow.entityName,
        ]
        XCTAssertEqual(Set(model.entities.map(\.name)), typed)
    }

    /// The keys code uses for several entities at once (sync's identity, the name index, the
    /// category's name through an entry) are the ones each entity names.
    func testKeysSharedAcrossEntitiesAreEachEntitysOwn() throws {
        let model = try Resources.modelVersions().current
        XCTAssertEqual(
            Set(Vault.syncedEntities), [Note.entityName, PasswordEntry.entityName, MyStashKit.Category.entityName])
        XCTAssertEqual(Note.syncIdentityAttribute.rawValue, SyncKeys.uuid)
        XCTAssertEqual(PasswordEntry.syncIdentityAttribute.rawValue, SyncKeys.uuid)
        XCTAssertEqual(MyStashKit.Category.syncIdentityAttribute.rawValue, SyncKeys.uuid)
        XCTAssertEqual(Note.nameIndexAttribute.rawValue, Vault.nameKeyAttribute)
        XCTAssertEqual(PasswordEntry.nameIndexAttribute.rawValue, Vault.nameKeyAttribute)
        let category = model.entity(named: PasswordEntry.entityName)?
            .relationship(named: PasswordEntry.Key.category.rawValue)
        XCTAssertEqual(category?.destinationEntityName, MyStashKit.Category.entityName)
        XCTAssertEqual(PasswordEntry.categoryName, "category.name")
    }

    /// The vault's model defers compiling its patterns to the first save that validates them;
    /// every pattern of every version must therefore compile, which is checked here instead.
    func testEveryPatternOfEveryModelVersionCompiles() throws {
        var patterns: [String] = []
        for model in try Resources.modelVersions().versions {
            for entity in model.entities {
                patterns += entity.attributes.compactMap(\.regularExpression)
            }
        }
        XCTAssertGreaterThanOrEqual(Set(patterns).count, 3)
        for pattern in patterns {
            XCTAssertNoThrow(try NSRegularExpression(pattern: pattern), pattern)
        }
    }
}
