import Foundation
import GRDB
import XCTest

@testable import ObjectGraph

/// Bad models and predicates are thrown errors naming the file, entity and property or the
/// predicate's position; none crashes the process.
final class BadInputTests: ObjectGraphTestCase {
    func model(_ entities: String) throws -> ManagedObjectModel { try xmlModel(entities, name: "Blog") }

    static let blog = """
        <entity name="Post">
            <attribute name="title" optional="YES" attributeType="String"/>
            <attribute name="tags" optional="YES" attributeType="Transformable"/>
            <relationship name="sections" toMany="YES" deletionRule="Cascade" destinationEntity="Section" inverseName="post"/>
        </entity>
        <entity name="Section">
            <attribute name="index" optional="YES" attributeType="Integer 16"/>
            <relationship name="post" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Post" inverseName="sections"/>
        </entity>
        """

    func assertModelError(_ entities: String, _ expected: String, line: UInt = #line) {
        XCTAssertThrowsError(try model(entities), line: line) { error in
            XCTAssertEqual("\(error)", expected, line: line)
        }
    }

    func testDanglingDestinationsAndInversesNameFileEntityAndProperty() {
        let file = "Blog.xcdatamodeld/Blog.xcdatamodel/contents"
        assertModelError(
            Self.blog.replacingOccurrences(of: "destinationEntity=\"Section\"", with: "destinationEntity=\"Chapter\""),
            "invalid model (\(file): Post.sections): destination entity 'Chapter' does not exist")
        assertModelError(
            Self.blog.replacingOccurrences(of: "inverseName=\"post\"", with: "inverseName=\"article\""),
            "invalid model (\(file): Post.sections): inverse relationship 'Section.article' does not exist")
        // The inverse exists but its own destination does not: checked before it is followed.
        assertModelError(
            Self.blog.replacingOccurrences(of: "destinationEntity=\"Post\"", with: "destinationEntity=\"Article\""),
            "invalid model (\(file): Section.post): destination entity 'Article' does not exist")
    }

    func testAUniquenessConstraintOnAnUnknownAttributeNamesIt() {
        // The constraint goes at the end of Post, the first entity.
        var constrained = Self.blog
        if let end = constrained.range(of: "</entity>") {
            constrained.replaceSubrange(
                end, with: "<uniquenessConstraints><uniquenessConstraint><constraint value=\"slug\"/>"
                    + "</uniquenessConstraint></uniquenessConstraints></entity>")
        }
        XCTAssertNotEqual(constrained, Self.blog)
        assertModelError(
            constrained, "invalid model (Blog.xcdatamodeld/Blog.xcdatamodel/contents: Post.slug): "
                + "a uniqueness constraint names no stored, untransformed attribute 'slug'")
    }

    func fetch(_ format: String, entity: String = "Post", kind: StoreKind) throws -> [ManagedObject] {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(Self.blog))
        try coordinator.addPersistentStore(
            type: kind == .sqlite ? .sqlite : .inMemory, at: directory.appendingPathComponent("\(UUID()).sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator)
        let post = context.insertNewObject(forEntityName: "Post")
        post["title"] = "Hello"
        post["tags"] = ["a", "b"]
        let section = context.insertNewObject(forEntityName: "Section")
        section["post"] = post
        try context.save()
        return try context.fetch(
            FetchRequest<ManagedObject>(entityName: entity, predicate: try Predicate(format: format)))
    }

    func assertFetchError(_ format: String, entity: String = "Post", _ expected: String, line: UInt = #line) {
        for kind in StoreKind.allCases {
            XCTAssertThrowsError(try fetch(format, entity: entity, kind: kind), "[\(kind)] \(format)", line: line) {
                error in
                XCTAssertTrue("\(error)".contains(expected), "[\(kind)] \(error)", line: line)
            }
        }
    }

    func testUnknownKeysOnEitherSideAreErrors() {
        assertFetchError("author == 'x'", "keypath 'author' not found in entity Post")
        assertFetchError(
            "title == author", "keypath 'author' not found in entity Post (predicate 'title == author' at position 10)"
        )
        // A transformed attribute is compared in memory: the unknown key is still found first.
        assertFetchError("tags == author", "keypath 'author' not found in entity Post")
        assertFetchError("post.author == 'x'", entity: "Section", "keypath 'post.author' not found in entity Section")
    }

    func testAToManyWhereAToOneIsNeededIsAnError() {
        assertFetchError(
            "title == 'x' OR sections.index == 1",
            "invalid predicate at position 17: to-many key 'sections' not allowed here")
    }

    func testValidPredicatesStillWork() throws {
        for kind in StoreKind.allCases {
            XCTAssertEqual(try fetch("ANY sections.index == 0 OR title == 'Hello'", kind: kind).count, 1)
            XCTAssertEqual(try fetch("sections.@count == 1", kind: kind).count, 1)
            XCTAssertEqual(try fetch("post.title == 'Hello'", entity: "Section", kind: kind).count, 1)
        }
    }
}

/// Rows whose bookkeeping columns (Z_ENT, Z_OPT, a to-one's key) hold what Core Data never
/// writes, made with sqlite3: fetching them is an error naming the row, never a trap.
final class DamagedRowTests: ObjectGraphTestCase {
    func testDamagedBookkeepingColumnsAreErrors() throws {
        let damages = [
            "Z_ENT = NULL", "Z_ENT = 'x'", "Z_ENT = 99", "Z_OPT = NULL", "Z_OPT = 'x'", "Z_OPT = X'00'", "ZPOST = 'x'",
            "ZPOST = 1.5", "ZPOST = X'01'",
        ]
        let source = Self.fixturesURL.appendingPathComponent(
            "CoreData/wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        let model = try ManagedObjectModel(contentsOf: Self.fixturesURL.appendingPathComponent(
            "CoreData/wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/"
                + "CoreDataMigration_Example 3.xcdatamodel"))
        for damage in damages {
            let url = directory.appendingPathComponent("\(UUID().uuidString).sqlite")
            try FileManager.default.copyItem(at: source, to: url)
            _ = try runSQLite3([url.path, "UPDATE ZSECTION SET \(damage) WHERE Z_PK = 2"])
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            let request = FetchRequest<ManagedObject>(entityName: "Section")
            XCTAssertThrowsError(try context.fetch(request), damage) { error in
                XCTAssertTrue("\(error)".contains("of row 2 in store"), "\(damage): \(error)")
                XCTAssertFalse("\(error)".contains("Demesne"), "no stored value in the message")
            }
        }
    }

    /// Metadata another process damaged is an error on reload, not the old metadata kept.
    func testReloadingDamagedMetadataIsAnError() throws {
        let stack = try makeStack(.sqlite)
        let url = try XCTUnwrap(stack.notes.url)
        _ = try runSQLite3([url.path, "UPDATE Z_METADATA SET Z_PLIST = X'00'"])
        XCTAssertThrowsError(try stack.coordinator.reloadMetadata()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .damagedRow, "\(error)")
        }
    }

    func testARowDamagedByAnotherProcessIsAnErrorWhenMerged() throws {
        let source = Self.fixturesURL.appendingPathComponent(
            "CoreData/wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        let model = try ManagedObjectModel(contentsOf: Self.fixturesURL.appendingPathComponent(
            "CoreData/wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/"
                + "CoreDataMigration_Example 3.xcdatamodel"))
        for damage in ["Z_OPT = NULL", "Z_OPT = 'x'", "Z_OPT = X'00'"] {
            let url = directory.appendingPathComponent("\(UUID().uuidString).sqlite")
            try FileManager.default.copyItem(at: source, to: url)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            XCTAssertNotNil(try context.existingObject(entityName: "Section", primaryKey: 2))
            XCTAssertFalse(try context.mergeExternalChanges(), "the first check only records the stores' state")
            _ = try runSQLite3([url.path, "UPDATE ZSECTION SET \(damage) WHERE Z_PK = 2"])
            XCTAssertThrowsError(try context.mergeExternalChanges(), damage) { error in
                XCTAssertTrue("\(error)".contains("Section.Z_OPT of row 2 in store"), "\(damage): \(error)")
            }
        }
    }
}

extension ObjectGraphTestCase {
    /// A one-version model from the XML of its entities and configurations.
    func xmlModel(_ body: String, name: String = "M") throws -> ManagedObjectModel {
        let xml = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">\(body)</model>
            """
        return try ManagedObjectModel(
            xcdatamodeldFiles: ["\(name).xcdatamodel/contents": Data(xml.utf8)], modelName: "\(name).xcdatamodeld")
    }
}

/// A store whose metadata or Z_PRIMARYKEY rows hold what Core Data never writes is refused
/// with an error when it is opened, never a trap.
final class DamagedStoreTests: ObjectGraphTestCase {
    func testDamagedMetadataAndPrimaryKeyRowsAreRefused() throws {
        let folder = "CoreData/wibosco-migration-example/"
        let source = Self.fixturesURL.appendingPathComponent(folder + "CoreDataMigration_Example_3.sqlite")
        let model = try ManagedObjectModel(contentsOf: Self.fixturesURL.appendingPathComponent(
            folder + "CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel"))
        let damages = [
            "UPDATE Z_METADATA SET Z_UUID = 5", "UPDATE Z_METADATA SET Z_UUID = NULL",
            "UPDATE Z_METADATA SET Z_PLIST = X'62706C6973743030FFFF'", "UPDATE Z_METADATA SET Z_PLIST = 'text'",
            "UPDATE Z_PRIMARYKEY SET Z_SUPER = 'x'", "UPDATE Z_PRIMARYKEY SET Z_NAME = NULL WHERE Z_NAME = 'Post'",
            "UPDATE Z_PRIMARYKEY SET Z_NAME = 7", "DELETE FROM Z_METADATA",
        ]
        var refused = 0
        for damage in damages {
            let url = directory.appendingPathComponent("\(UUID().uuidString).sqlite")
            try FileManager.default.copyItem(at: source, to: url)
            _ = try runSQLite3([url.path, damage])
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            do {
                try coordinator.addPersistentStore(type: .sqlite, at: url)
            } catch let error as ObjectGraphError {
                XCTAssertTrue([.storeOpenFailed, .incompatibleVersionHash].contains(error.code), "\(damage): \(error)")
                refused += 1
            }
        }
        XCTAssertGreaterThanOrEqual(refused, 6)
    }
}

/// Text another program wrote into a String column (not UTF-8, a NUL inside, empty) reads as
/// GRDB reads the same cell, whichever path the read takes.
final class StoredTextTests: ObjectGraphTestCase {
    func testTextWrittenBySQLite3ReadsAsGRDBReadsIt() throws {
        let model = try xmlModel(#"<entity name="Post"><attribute name="title" attributeType="String"/></entity>"#)
        let url = directory.appendingPathComponent("text.sqlite")
        let cells = ["X'C328'", "X'610062'", "X'F09F9880'", "X'FF'", "X''", "X'E282'", "'plain'"]
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(coordinator: coordinator)
            for _ in cells { context.insertNewObject(forEntityName: "Post")["title"] = "placeholder" }
            try context.save()
        }
        for (offset, cell) in cells.enumerated() {
            _ = try runSQLite3([url.path, "UPDATE ZPOST SET ZTITLE = CAST(\(cell) AS TEXT) WHERE Z_PK = \(offset + 1)"])
        }
        let expected = try DatabaseQueue(path: url.path).read { db in
            try (1...cells.count).map { key in
                try String.fetchOne(db, sql: "SELECT ZTITLE FROM ZPOST WHERE Z_PK = ?", arguments: [key])
            }
        }
        XCTAssertEqual(expected[1], "a", "GRDB reads text up to its first NUL")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let titles = try context.fetch(FetchRequest<ManagedObject>(entityName: "Post"))
            .sorted { $0.objectID.primaryKey! < $1.objectID.primaryKey! }
            .map { $0["title"] as? String }
        XCTAssertEqual(titles, expected)
    }
}

/// A String attribute holding a NUL would be stored cut short at it (SQLite is given the text
/// up to there): the save refuses it, naming the attribute, and the store keeps what it had.
final class NulTextTests: ObjectGraphTestCase {
    func testTextHoldingANulIsRefusedAtSave() throws {
        let model = try xmlModel("""
            <entity name="Post"><attribute name="title" attributeType="String"/>
            <attribute name="draft" optional="YES" transient="YES" attributeType="String"/></entity>
            """)
        let url = directory.appendingPathComponent("nul.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let post = context.insertNewObject(forEntityName: "Post")
        post["title"] = "before"
        post["draft"] = "a transient is never stored: \u{0} is fine"
        try context.save()
        post["title"] = "cut\u{0}short"
        XCTAssertThrowsError(try context.save()) { error in
            let failure = error as? ValidationError
            XCTAssertEqual(failure?.code, .generic)
            XCTAssertEqual(failure?.key, "title")
            XCTAssertEqual(failure?.constraint, .custom(ValidationConstraint.holdsNul))
            XCTAssertFalse("\(error)".contains("short"), "no value in the description")
        }
        let reader = ManagedObjectContext(coordinator: coordinator)
        let stored = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Post"))
        XCTAssertEqual(stored.map { $0["title"] as? String }, ["before"])
        post["title"] = "whole"
        try context.save()
        XCTAssertEqual(try ManagedObjectContext(coordinator: coordinator).fetch(
            FetchRequest<ManagedObject>(entityName: "Post")).map { $0["title"] as? String }, ["whole"])
    }
}
