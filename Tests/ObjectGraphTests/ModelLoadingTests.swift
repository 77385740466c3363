import Foundation
import XCTest
@testable import ObjectGraph

final class ModelLoadingTests: ObjectGraphTestCase {
    /// The older versions left until needed are the same versions, the current one among them,
    /// and a damaged older version is reported when they are needed.
    func testOlderVersionsParsedWhenNeededAreTheSameAndTheirErrorsComeThen() throws {
        let folder = Self.fixturesURL.appendingPathComponent("Shop.xcdatamodeld")
        var files: [String: Data] = [".xccurrentversion": try Data(contentsOf: folder.appendingPathComponent(
            ".xccurrentversion"))]
        for version in ["Shop", "Shop 2"] {
            let path = "\(version).xcdatamodel/contents"
            files[path] = try Data(contentsOf: folder.appendingPathComponent(path))
        }
        let eager = try ModelVersions(xcdatamodeldFiles: files, modelName: "Shop.xcdatamodeld")
        let lazy = try ModelVersions(
            xcdatamodeldFiles: files, modelName: "Shop.xcdatamodeld", parsingOlderVersionsWhenNeeded: true)
        XCTAssertEqual(lazy.current.versionIdentifier, "Shop 2")
        XCTAssertEqual(lazy.versions.map(\.versionIdentifier), eager.versions.map(\.versionIdentifier))
        XCTAssertEqual(lazy.versions.map(\.entityShapes), eager.versions.map(\.entityShapes))
        XCTAssertTrue(lazy.versions.contains { $0 === lazy.current })

        files["Shop.xcdatamodel/contents"] = Data("<model><entity".utf8)
        XCTAssertThrowsError(try ModelVersions(xcdatamodeldFiles: files, modelName: "Shop.xcdatamodeld"))
        let damaged = try ModelVersions(
            xcdatamodeldFiles: files, modelName: "Shop.xcdatamodeld", parsingOlderVersionsWhenNeeded: true)
        XCTAssertEqual(damaged.current.versionIdentifier, "Shop 2")
        XCTAssertThrowsError(try damaged.allVersions()) { error in
            XCTAssertTrue("\(error)".contains("Shop.xcdatamodel/contents"), "\(error)")
        }
    }

    func testLoadsTheCurrentVersionWithEveryAttributeType() throws {
        let model = try Self.shopModel()
        XCTAssertEqual(model.versionIdentifier, "Shop 2", ".xccurrentversion picks the second version")
        let everything = try XCTUnwrap(model.entity(named: "Everything"))
        let types = Dictionary(uniqueKeysWithValues: everything.attributes.map { ($0.name, $0.type) })
        XCTAssertEqual(Set(types.values), Set(AttributeType.allCases))
        XCTAssertEqual(everything.attribute(named: "int16")?.minValueString, "-5")
        XCTAssertEqual(everything.attribute(named: "int16")?.defaultValue as? Int, 7)
        XCTAssertEqual(everything.attribute(named: "flag")?.defaultValue as? Bool, true)
        XCTAssertEqual(everything.attribute(named: "double")?.defaultValue as? Double, 1.5)
        XCTAssertTrue(everything.attribute(named: "scratch")!.isTransient)
        XCTAssertTrue(everything.attribute(named: "int64")!.isIndexed)
        XCTAssertEqual(everything.userInfo["displayName"], "Everything Entity")

        let system = try XCTUnwrap(model.entity(named: "System"))
        let userId = try XCTUnwrap(system.attribute(named: "userId"))
        XCTAssertFalse(userId.isOptional)
        XCTAssertEqual(userId.regularExpression, "[A-Za-z0-9]*")
        XCTAssertEqual(userId.userInfo["note"], "the book's rules")
        XCTAssertEqual(system.attribute(named: "password")?.valueTransformerName, "TestReversing")
        XCTAssertTrue(system.attribute(named: "password")!.isSecret)
        XCTAssertEqual(model.entity(named: "Note")?.attribute(named: "title")?.elementID, "noteTitle")

        let systems = try XCTUnwrap(model.entity(named: "Category")?.relationship(named: "systems"))
        XCTAssertTrue(systems.isToMany)
        XCTAssertEqual(systems.deleteRule, .deny)
        XCTAssertEqual(systems.maxCount, 3)
        XCTAssertEqual(systems.inverseName, "category")
        XCTAssertEqual(model.entity(named: "Note")?.relationship(named: "attachments")?.deleteRule, .cascade)

        XCTAssertTrue(model.entity(named: "Animal")!.isAbstract)
        XCTAssertEqual(model.entity(named: "Dog")?.superentity?.name, "Animal")
        XCTAssertEqual(Set(model.entity(named: "Dog")!.attributes.map(\.name)), ["name", "breed"])
        XCTAssertEqual(Set(model.configurations["Passwords"] ?? []), ["Category", "System", "Tag"])
    }

    func testEntityNumbersAreRootsAlphabeticallyThenSubentitiesDepthFirst() throws {
        let model = try Self.shopModel()
        XCTAssertEqual(model.entities.map(\.name), ["Animal", "Cat", "Dog", "Attachment", "Category", "Everything", "Note", "System", "Tag"])
        XCTAssertEqual(model.entities.map(\.entityNumber), Array(1...9))
    }

    func testReadsTheFixturesWrittenByXcode() throws {
        for name in ["bnr-coredatastack/Sample.xcdatamodeld", "coredataplus-samplemodel/SampleModel.xcdatamodeld",
                     "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld"] {
            let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../../shared/coredata-fixtures/\(name)").standardizedFileURL
            guard FileManager.default.fileExists(atPath: url.path) else { throw XCTSkip("shared/coredata-fixtures is not beside the project") }
            XCTAssertNoThrow(try ManagedObjectModel(contentsOf: url), name)
        }
    }

    private func loadBroken(_ body: String, configurations: String = "") throws -> ModelError {
        let folder = directory.appendingPathComponent("Broken.xcdatamodeld/Broken.xcdatamodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try "<?xml version=\"1.0\"?><model>\(body)\(configurations)</model>".write(to: folder.appendingPathComponent("contents"), atomically: true, encoding: .utf8)
        do {
            _ = try ManagedObjectModel(contentsOf: directory.appendingPathComponent("Broken.xcdatamodeld"))
        } catch let error as ModelError {
            return error
        }
        XCTFail("the broken model loaded")
        return ModelError(reason: "")
    }

    func testUnknownAttributeTypeNamesFileEntityAndProperty() throws {
        let error = try loadBroken(#"<entity name="Note"><attribute name="title" attributeType="Text"/></entity>"#)
        XCTAssertEqual(error.entity, "Note")
        XCTAssertEqual(error.property, "title")
        XCTAssertTrue(error.description.contains("Broken.xcdatamodeld/Broken.xcdatamodel/contents"), error.description)
        XCTAssertTrue(error.description.contains("Note.title"), error.description)
        XCTAssertTrue(error.description.contains("unknown attribute type 'Text'"), error.description)
    }

    func testDanglingDestinationAndInverseAreRefused() throws {
        let destination = try loadBroken(#"<entity name="Note"><relationship name="owner" maxCount="1" destinationEntity="Person"/></entity>"#)
        XCTAssertEqual(destination.property, "owner")
        XCTAssertTrue(destination.description.contains("destination entity 'Person' does not exist"), destination.description)

        let inverse = try loadBroken(#"<entity name="Note"><relationship name="tags" toMany="YES" destinationEntity="Tag" inverseName="notes"/></entity><entity name="Tag"/>"#)
        XCTAssertEqual(inverse.entity, "Note")
        XCTAssertTrue(inverse.description.contains("inverse relationship 'Tag.notes' does not exist"), inverse.description)
    }

    func testEntityOutsideEveryConfigurationIsRefused() throws {
        let error = try loadBroken(#"<entity name="Note"/><entity name="Tag"/>"#, configurations: #"<configuration name="Notes"><memberEntity name="Note"/></configuration>"#)
        XCTAssertEqual(error.entity, "Tag")
        XCTAssertTrue(error.description.contains("in no configuration"), error.description)
    }

    func testMalformedXMLNamesTheFile() throws {
        let folder = directory.appendingPathComponent("Bad.xcdatamodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try "<model><entity name=\"A\">".write(to: folder.appendingPathComponent("contents"), atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try ManagedObjectModel(contentsOf: folder)) { error in
            XCTAssertTrue("\(error)".contains("Bad.xcdatamodel/contents"), "\(error)")
        }
    }

    func testModelBuiltInCodeWorksLikeALoadedOne() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", attributes: [AttributeDescription(name: "name", type: .string, isOptional: false)],
                              relationships: [RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true, deleteRule: .cascade)]),
            EntityDescription(name: "Book", attributes: [AttributeDescription(name: "title", type: .string)],
                              relationships: [RelationshipDescription(name: "author", destination: "Author", inverse: "books")]),
        ])
        forEachStoreKind { kind in
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: kind == .sqlite ? .sqlite : .inMemory, at: directory.appendingPathComponent("code-\(kind).sqlite"))
            let context = ManagedObjectContext(coordinator: coordinator)
            let author = context.insertNewObject(forEntityName: "Author")
            author["name"] = "Le Guin"
            let book = context.insertNewObject(forEntityName: "Book")
            book["title"] = "The Dispossessed"
            book["author"] = author
            try context.save()
            let other = ManagedObjectContext(coordinator: coordinator)
            let fetched = try other.objects("Author")
            XCTAssertEqual((fetched.first?["books"] as? [ManagedObject])?.first?["title"] as? String, "The Dispossessed")
        }
    }
}
