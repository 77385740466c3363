import Foundation
import XCTest
@testable import ObjectGraph

/// Binds each value to its place, as MyStash's encrypting transformer does: decoding at any
/// other place (another entity, attribute or row) fails.
final class PlaceBoundTransformer: ValueTransformer {
    static let name = "TestPlaceBound"

    static func prefix(_ place: ValuePlace) -> String {
        "\(place.entityName).\(place.attributeName)#\(place.primaryKey)|"
    }

    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        Data((Self.prefix(place) + (value as? String ?? "")).utf8)
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        let text = String(decoding: data, as: UTF8.self)
        guard text.hasPrefix(Self.prefix(place)) else {
            throw ObjectGraphError(code: .saveFailed, message: "value bound to another place than \(place)")
        }
        return String(text.dropFirst(Self.prefix(place).count))
    }
}

/// Runs `sqlite3` on a store, as a user would inspect it; returns its output lines.
func sqlite3(_ url: URL, _ sql: String) throws -> [String] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = [url.path, sql]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        .map(String.init)
}

class MigrationTestCase: ObjectGraphTestCase {
    func model(_ version: String, _ entities: [EntityDescription]) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: entities, versionIdentifier: version)
    }

    /// A store of `model` at `name`, filled by `fill` and saved.
    @discardableResult
    func makeStore(
        _ model: ManagedObjectModel, name: String = "store.sqlite",
        fill: (ManagedObjectContext) throws -> Void
    ) throws -> URL {
        let url = directory.appendingPathComponent(name)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        try fill(context)
        try context.save()
        try coordinator.close()
        return url
    }

    /// Opens `url` with the current version of `versions`, migrating it.
    func openMigrating(
        _ url: URL, _ versions: ModelVersions, steps: [EntityMigrationStep] = []
    ) throws
        -> (PersistentStoreCoordinator, ManagedObjectContext)
    {
        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        coordinator.migrationSteps = steps
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        options.mustExist = true
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        return (coordinator, ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter()))
    }

    /// Notes.sqlite (one note) and Passwords.sqlite (`entries` entries) of ``TwoStoreModels`` version 1.
    func makeTwoStores(entries: Int) throws -> (notes: URL, passwords: URL) {
        let coordinator = PersistentStoreCoordinator(
            managedObjectModel: try TwoStoreModels.model("V1", renamed: false))
        coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        let notes = directory.appendingPathComponent("Notes.sqlite")
        let passwords = directory.appendingPathComponent("Passwords.sqlite")
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Passwords", at: passwords)
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        context.insertNewObject(forEntityName: "Note")["text"] = "door code"
        for index in 0..<entries { context.insertNewObject(forEntityName: "Entry")["password"] = "hunter\(index)" }
        try context.save()
        try coordinator.close()
        return (notes, passwords)
    }

    func assertTwoStoresMigrated(
        _ coordinator: PersistentStoreCoordinator, entries: Int,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        XCTAssertEqual(try context.objects("Note").first?["body"] as? String, "door code", file: file, line: line)
        let stored = try context.objects("Entry")
        XCTAssertEqual(
            Set(stored.compactMap { $0["secret"] as? String }), Set((0..<entries).map { "hunter\($0)" }),
            file: file, line: line)
        XCTAssertTrue(stored.allSatisfy { $0["uses"] as? Int == 0 }, file: file, line: line)
    }

    func assertRefused(
        _ url: URL, _ versions: ModelVersions, code: ObjectGraphError.Code = .migrationCannotBeInferred,
        naming expected: [String], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let before = try Data(contentsOf: url)
        XCTAssertThrowsError(try openMigrating(url, versions), file: file, line: line) { error in
            guard let error = error as? ObjectGraphError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            for text in expected {
                XCTAssertTrue(
                    error.message.contains(text), "'\(text)' not in: \(error.message)", file: file, line: line)
            }
        }
        XCTAssertEqual(try Data(contentsOf: url), before, "the refused store changed", file: file, line: line)
        let sideFiles = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix("-journal")
        }
        XCTAssertEqual(sideFiles, [], file: file, line: line)
    }
}

final class MigrationTests: MigrationTestCase {
    // MARK: - Attributes and entities

    private func itemV1() throws -> ManagedObjectModel {
        try model(
            "V1",
            [
                EntityDescription(
                    name: "Item",
                    attributes: [
                        AttributeDescription(name: "name", type: .string),
                        AttributeDescription(name: "color", type: .string),
                        AttributeDescription(name: "size", type: .integer16),
                        AttributeDescription(name: "obsolete", type: .string),
                    ])
            ])
    }

    private func itemV2(nameType: AttributeType = .string, added: String? = "7") throws -> ManagedObjectModel {
        try model(
            "V2",
            [
                EntityDescription(
                    name: "Item",
                    attributes: [
                        AttributeDescription(
                            name: "name", type: nameType, isOptional: false, isIndexed: true,
                            defaultValueString: "unnamed"),
                        AttributeDescription(name: "hexColor", type: .string, elementID: "color"),
                        AttributeDescription(name: "size", type: .integer32),
                        AttributeDescription(
                            name: "added", type: .integer64, isOptional: false, defaultValueString: added),
                    ]),
                EntityDescription(name: "Label", attributes: [AttributeDescription(name: "text", type: .string)]),
            ])
    }

    private func fillItems(_ context: ManagedObjectContext) {
        for (name, color, size) in [("a", "red", 1), ("b", "blue", 2), (nil, "green", 3)] as [(String?, String, Int)] {
            let item = context.insertNewObject(forEntityName: "Item")
            item["name"] = name
            item["color"] = color
            item["size"] = size
            item["obsolete"] = name.map { "old \($0)" }
        }
    }

    func testMigrationAddsRemovesAndRenamesAttributesAndFillsRequiredDefaults() throws {
        let url = try makeStore(try itemV1(), fill: fillItems)
        let versions = ModelVersions(versions: [try itemV1()], current: try itemV2())
        let (coordinator, context) = try openMigrating(url, versions)
        let items = try context.objects("Item", sort: [FetchSortDescriptor(key: "size")])
        XCTAssertEqual(items.map { $0["name"] as? String }, ["a", "b", "unnamed"])
        XCTAssertEqual(items.map { $0["hexColor"] as? String }, ["red", "blue", "green"])
        XCTAssertEqual(items.map { $0["size"] as? Int }, [1, 2, 3])
        XCTAssertEqual(items.map { $0["added"] as? Int }, [7, 7, 7])
        XCTAssertEqual(try context.objects("Label").count, 0)

        let report = try XCTUnwrap(coordinator.migrationReports.first)
        XCTAssertEqual(report.hops.map { "\($0.from)→\($0.to)" }, ["V1→V2"])
        XCTAssertEqual(report.carried, ["Item": 3])
        XCTAssertEqual(report.dropped, ["2 values of Item.obsolete (attribute removed from the model)"])
        let changes = report.hops[0].changes.map(\.description)
        for expected in [
            "rename attribute Item.color to hexColor", "make Item.name required, empty values become unnamed",
            "index Item.name", "add attribute Item.added (default 7)", "remove attribute Item.obsolete and its values",
            "add entity Label", "change Item.size from Integer 16 to Integer 32",
        ] {
            XCTAssertTrue(changes.contains(expected), "\(expected) not in \(changes)")
        }
        // New objects continue the old primary keys; the store now fits V2 and reopens without a migration.
        let item = context.insertNewObject(forEntityName: "Item")
        item["name"] = "d"
        try context.save()
        XCTAssertEqual(item.objectID.primaryKey, 4)
        XCTAssertEqual(try coordinator.schemaProblems(), [], "a migrated store has the schema a new one would")
        try coordinator.close()
        XCTAssertEqual(
            try sqlite3(url, "SELECT name FROM sqlite_master WHERE name = 'ZITEM_ZNAME_INDEX'"), ["ZITEM_ZNAME_INDEX"])
        XCTAssertEqual(
            try sqlite3(url, "SELECT Z_NAME, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT"), ["Item|4", "Label|0"])
        XCTAssertEqual(try sqlite3(url, "SELECT name FROM sqlite_master WHERE name LIKE 'OGMIGRATING%'"), [])
        let (again, _) = try openMigrating(url, versions)
        XCTAssertEqual(again.migrationReports.count, 0)
        XCTAssertEqual(try StoreShape(contentsOf: url).differences(from: try itemV2()), [])
    }

    func testAChangeThatCannotBeInferredIsRefusedBeforeAnythingIsWritten() throws {
        let url = try makeStore(try itemV1(), fill: fillItems)
        try assertRefused(
            url, ModelVersions(versions: [try itemV1()], current: try itemV2(nameType: .date)),
            naming: ["Item.name changes from String to Date", "'V1' to 'V2'", "custom migration step"])
    }

    func testANewRequiredAttributeWithoutDefaultIsRefusedWhenObjectsExist() throws {
        let url = try makeStore(try itemV1(), fill: fillItems)
        try assertRefused(
            url, ModelVersions(versions: [try itemV1()], current: try itemV2(added: nil)),
            naming: ["Item.added is required and has no default value, but 3 objects would have none"])
        // An empty store has no object to lack it.
        let empty = try makeStore(try itemV1(), name: "empty.sqlite") { _ in }
        let (_, context) = try openMigrating(
            empty, ModelVersions(versions: [try itemV1()], current: try itemV2(added: nil)))
        XCTAssertEqual(try context.objects("Item").count, 0)
    }

    func testAStoreOfAnUnknownVersionIsRefusedUnchanged() throws {
        let url = try makeStore(try itemV1(), fill: fillItems)
        try assertRefused(
            url, ModelVersions(versions: [], current: try itemV2()),
            naming: ["fits none of the model's versions ('V2')"])
    }

    func testANewerStoreIsNotMigratedBackwards() throws {
        let url = try makeStore(try itemV2()) { _ in }
        try assertRefused(
            url, ModelVersions(versions: [try itemV2()], current: try itemV1()),
            naming: ["made with model version 'V2', which is newer than the current 'V1'"])
    }

    // MARK: - Transformed values

    private func secretModel(
        _ version: String, entity: String, attribute: String, renamed: Bool
    ) throws -> ManagedObjectModel {
        try model(
            version,
            [
                EntityDescription(
                    name: entity,
                    attributes: [
                        AttributeDescription(name: "label", type: .string),
                        AttributeDescription(
                            name: attribute, type: .transformable, valueTransformerName: PlaceBoundTransformer.name,
                            elementID: renamed ? "code" : nil),
                    ], elementID: renamed ? "Secret" : nil)
            ])
    }

    func testATransformedValueIsDecodedAtItsOldPlaceAndEncodedAtItsNewOneOnRename() throws {
        let v1 = try secretModel("V1", entity: "Secret", attribute: "code", renamed: false)
        let url = try makeStore(v1) { context in
            for (label, code) in [("door", "4711"), ("bike", "0815")] {
                let secret = context.insertNewObject(forEntityName: "Secret")
                secret["label"] = label
                secret["code"] = code
            }
        }
        XCTAssertEqual(
            try sqlite3(url, "SELECT CAST(ZCODE AS TEXT) FROM ZSECRET ORDER BY Z_PK"),
            ["Secret.code#1|4711", "Secret.code#2|0815"])
        let v2 = try secretModel("V2", entity: "Credential", attribute: "pin", renamed: true)
        let (coordinator, context) = try openMigrating(url, ModelVersions(versions: [v1], current: v2))
        let credentials = try context.objects("Credential", sort: [FetchSortDescriptor(key: "label")])
        XCTAssertEqual(credentials.map { $0["pin"] as? String }, ["0815", "4711"])
        XCTAssertTrue(
            coordinator.migrationReports[0].hops[0].changes.map(\.description).contains(
                "re-encode Credential.pin (its place moved, and a transformer may bind values to it)"))
        try coordinator.close()
        XCTAssertEqual(
            try sqlite3(url, "SELECT CAST(ZPIN AS TEXT) FROM ZCREDENTIAL ORDER BY Z_PK"),
            ["Credential.pin#1|4711", "Credential.pin#2|0815"])
    }

    func testAValueThatCannotBeDecodedFailsTheMigrationAndLeavesTheStore() throws {
        let v1 = try secretModel("V1", entity: "Secret", attribute: "code", renamed: false)
        let url = try makeStore(v1) { context in context.insertNewObject(forEntityName: "Secret")["code"] = "4711" }
        _ = try sqlite3(url, "UPDATE ZSECRET SET ZCODE = CAST('Secret.code#9|moved' AS BLOB)")
        let v2 = try secretModel("V2", entity: "Credential", attribute: "pin", renamed: true)
        try assertRefused(
            url, ModelVersions(versions: [v1], current: v2), code: .migrationFailed,
            naming: ["cannot decode Secret.code of object 1"])
    }

    // MARK: - Relationships and inheritance

    private func library(_ version: String, manyAuthors: Bool, publisher: Bool = false) throws -> ManagedObjectModel {
        var book = [
            RelationshipDescription(
                name: manyAuthors ? "authors" : "author", destination: "Author", inverse: "books",
                isToMany: manyAuthors, elementID: manyAuthors ? "author" : "authors")
        ]
        var entities: [EntityDescription] = []
        if publisher {
            book.append(RelationshipDescription(name: "publisher", destination: "Publisher", inverse: "books"))
            entities.append(
                EntityDescription(
                    name: "Publisher", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "books", destination: "Book",
                            inverse: "publisher", isToMany: true)
                    ]))
        }
        return try model(
            version,
            entities + [
                EntityDescription(
                    name: "Author", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "books", destination: "Book",
                            inverse: manyAuthors ? "authors" : "author", isToMany: true)
                    ]),
                EntityDescription(
                    name: "Book", attributes: [AttributeDescription(name: "title", type: .string)], relationships: book
                ),
            ])
    }

    func testToOneBecomesToManyAndBackAndANewRelationshipStartsEmpty() throws {
        let v1 = try library("V1", manyAuthors: false)
        let url = try makeStore(v1) { context in
            for (name, titles) in [("Ada", ["Notes", "Engine"]), ("Alan", ["Machines"])] {
                let author = context.insertNewObject(forEntityName: "Author")
                author["name"] = name
                for title in titles {
                    let book = context.insertNewObject(forEntityName: "Book")
                    book["title"] = title
                    book["author"] = author
                }
            }
        }
        let v2 = try library("V2", manyAuthors: true, publisher: true)
        var (coordinator, context) = try openMigrating(url, ModelVersions(versions: [v1], current: v2))
        func authorsByTitle() throws -> [String: [String]] {
            Dictionary(
                uniqueKeysWithValues: try context.objects("Book").map { book in
                    (
                        book["title"] as? String ?? "",
                        (try context.relatedObjects(book, "authors")).compactMap { $0["name"] as? String }.sorted()
                    )
                })
        }
        XCTAssertEqual(try authorsByTitle(), ["Notes": ["Ada"], "Engine": ["Ada"], "Machines": ["Alan"]])
        XCTAssertTrue(try context.objects("Book").allSatisfy { $0["publisher"] == nil })
        XCTAssertEqual(try context.objects("Publisher").count, 0)
        try coordinator.close()
        XCTAssertEqual(try sqlite3(url, "SELECT COUNT(*) FROM Z_1BOOKS"), ["3"])

        // Back to to-one: fine while each book has one author, refused once one has two.
        let v3 = try library("V3", manyAuthors: false)
        let copy = directory.appendingPathComponent("copy.sqlite")
        try FileManager.default.copyItem(at: url, to: copy)
        (coordinator, context) = try openMigrating(url, ModelVersions(versions: [v1, v2], current: v3))
        let machines = try XCTUnwrap(try context.objects("Book", "title == 'Machines'").first)
        XCTAssertEqual((machines["author"] as? ManagedObject)?["name"] as? String, "Alan")
        try coordinator.close()

        _ = try sqlite3(
            copy,
            "INSERT INTO Z_1BOOKS SELECT a.Z_PK, b.Z_PK FROM ZAUTHOR a, ZBOOK b "
                + "WHERE a.ZNAME = 'Ada' AND b.ZTITLE = 'Machines'"
        )
        try assertRefused(
            copy, ModelVersions(versions: [v1, v2], current: v3),
            naming: ["Book.author is to-one but object 3 has several"])
    }

    func testANewRequiredToOneRelationshipIsRefusedWhileObjectsWouldPointNowhere() throws {
        let v1 = try model(
            "V1",
            [
                EntityDescription(name: "Author", attributes: [AttributeDescription(name: "name", type: .string)]),
                EntityDescription(name: "Book", attributes: [AttributeDescription(name: "title", type: .string)]),
            ])
        let v2 = try model(
            "V2",
            [
                EntityDescription(
                    name: "Author", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "books", destination: "Book", inverse: "author",
                            isToMany: true)
                    ]),
                EntityDescription(
                    name: "Book", attributes: [AttributeDescription(name: "title", type: .string)],
                    relationships: [
                        RelationshipDescription(
                            name: "author", destination: "Author", inverse: "books",
                            isOptional: false)
                    ]),
            ])
        let url = try makeStore(v1) { context in
            for title in ["Notes", "Engine"] { context.insertNewObject(forEntityName: "Book")["title"] = title }
        }
        try assertRefused(
            url, ModelVersions(versions: [v1], current: v2),
            naming: ["Book.author is required, but 2 objects would point nowhere"])
    }

    func testACustomStepSeesToManyRelationshipsAndCoversARequiredAttributeWithoutDefault() throws {
        let v1 = try library("V1", manyAuthors: false)
        let url = try makeStore(v1) { context in
            for (name, count) in [("Ada", 2), ("Alan", 1), ("Grace", 0)] {
                let author = context.insertNewObject(forEntityName: "Author")
                author["name"] = name
                for index in 0..<count {
                    let book = context.insertNewObject(forEntityName: "Book")
                    book["title"] = "\(name) \(index)"
                    book["author"] = author
                }
            }
        }
        let v2 = try model(
            "V2",
            [
                EntityDescription(
                    name: "Author",
                    attributes: [
                        AttributeDescription(name: "name", type: .string),
                        AttributeDescription(name: "bookCount", type: .integer32, isOptional: false),
                    ],
                    relationships: [
                        RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true)
                    ]),
                EntityDescription(
                    name: "Book", attributes: [AttributeDescription(name: "title", type: .string)],
                    relationships: [RelationshipDescription(name: "author", destination: "Author", inverse: "books")]),
            ])
        let versions = ModelVersions(versions: [v1], current: v2)
        try assertRefused(
            url, versions, naming: ["Author.bookCount is required and has no default value, but 3 objects"])
        let count = EntityMigrationStep(entity: "Author", from: "V1") { author, _ in
            author["bookCount"] = (author.sourceValues["books"] as? [Int64])?.count
        }
        let (_, context) = try openMigrating(url, versions, steps: [count])
        let counts = Dictionary(
            uniqueKeysWithValues: try context.objects("Author").map {
                ($0["name"] as? String ?? "", $0["bookCount"] as? Int)
            })
        XCTAssertEqual(counts, ["Ada": 2, "Alan": 1, "Grace": 0])
    }

    private func tasks(_ version: String, inherited: Bool) throws -> ManagedObjectModel {
        let title = AttributeDescription(name: "title", type: .string)
        let done = AttributeDescription(name: "done", type: .boolean)
        let project = EntityDescription(
            name: "Project", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [
                RelationshipDescription(name: "tasks", destination: "Task", inverse: "project", isToMany: true)
            ])
        let toProject = RelationshipDescription(name: "project", destination: "Project", inverse: "tasks")
        guard inherited else {
            return try model(
                version,
                [
                    project, EntityDescription(name: "Note", attributes: [title]),
                    EntityDescription(name: "Task", attributes: [title, done], relationships: [toProject]),
                ])
        }
        return try model(
            version,
            [
                project, EntityDescription(name: "Entry", isAbstract: true, attributes: [title]),
                EntityDescription(name: "Note", parent: "Entry"),
                EntityDescription(name: "Task", parent: "Entry", attributes: [done], relationships: [toProject]),
            ])
    }

    func testEntitiesMovedUnderANewParentKeepTheirValuesAndLinks() throws {
        let v1 = try tasks("V1", inherited: false)
        let url = try makeStore(v1) { context in
            let project = context.insertNewObject(forEntityName: "Project")
            project["name"] = "house"
            for (index, title) in ["paint", "clean"].enumerated() {
                let task = context.insertNewObject(forEntityName: "Task")
                task["title"] = title
                task["done"] = index == 0
                task["project"] = project
            }
            for title in ["milk", "eggs", "flour"] { context.insertNewObject(forEntityName: "Note")["title"] = title }
        }
        let v2 = try tasks("V2", inherited: true)
        let (coordinator, context) = try openMigrating(url, ModelVersions(versions: [v1], current: v2))
        XCTAssertEqual(
            Set(try context.objects("Entry").compactMap { $0["title"] as? String }),
            ["paint", "clean", "milk", "eggs", "flour"])
        let project = try XCTUnwrap(try context.objects("Project").first)
        let tasks = try context.relatedObjects(project, "tasks")
        XCTAssertEqual(Set(tasks.compactMap { $0["title"] as? String }), ["paint", "clean"])
        XCTAssertEqual(
            Set(tasks.compactMap { task in (task["done"] as? Bool).map { "\(task["title"]!) \($0)" } }),
            ["paint true", "clean false"])
        XCTAssertTrue(
            coordinator.migrationReports[0].hops[0].changes.map(\.description).contains(
                "move entity Task from parent (none) to Entry"), "\(coordinator.migrationReports[0].hops[0].changes)")
        // Keys were made disjoint, and new ones continue after them.
        let note = context.insertNewObject(forEntityName: "Note")
        note["title"] = "sugar"
        try context.save()
        XCTAssertEqual(Set(try context.objects("Entry").compactMap(\.objectID.primaryKey)).count, 6)
    }

    func testEntitiesLeavingTheirParentGetTablesOfTheirOwn() throws {
        let inherited = try tasks("A", inherited: true)
        let url = try makeStore(inherited) { context in
            let project = context.insertNewObject(forEntityName: "Project")
            project["name"] = "garden"
            let task = context.insertNewObject(forEntityName: "Task")
            task["title"] = "mow"
            task["project"] = project
            context.insertNewObject(forEntityName: "Note")["title"] = "seeds"
        }
        let flat = try tasks("B", inherited: false)
        let (coordinator, context) = try openMigrating(url, ModelVersions(versions: [inherited], current: flat))
        XCTAssertEqual(try context.objects("Note").compactMap { $0["title"] as? String }, ["seeds"])
        let task = try XCTUnwrap(try context.objects("Task").first)
        XCTAssertEqual(task["title"] as? String, "mow")
        XCTAssertEqual((task["project"] as? ManagedObject)?["name"] as? String, "garden")
        XCTAssertTrue(
            coordinator.migrationReports[0].hops[0].changes.map(\.description).contains(
                "remove entity Entry and its objects"))
        try coordinator.close()
        XCTAssertEqual(
            try sqlite3(url, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%' ORDER BY name"),
            ["ZNOTE", "ZPROJECT", "ZTASK", "Z_METADATA", "Z_PRIMARYKEY"])
    }

    func testAVersionThatOnlyMakesAnAttributeRequiredIsFoundByTheRecordedIdentifier() throws {
        let optional = try model(
            "V1", [EntityDescription(name: "Item", attributes: [AttributeDescription(name: "name", type: .string)])])
        let required = try model(
            "V2",
            [
                EntityDescription(
                    name: "Item",
                    attributes: [
                        AttributeDescription(
                            name: "name", type: .string, isOptional: false, defaultValueString: "unnamed")
                    ])
            ])
        // Their stores look the same; the identifier recorded in the store tells them apart.
        XCTAssertEqual(optional.entityVersionHashesByName, required.entityVersionHashesByName)
        let url = try makeStore(optional) { context in
            context.insertNewObject(forEntityName: "Item")["name"] = "kept"
            context.insertNewObject(forEntityName: "Item")
        }
        let (coordinator, context) = try openMigrating(url, ModelVersions(versions: [optional], current: required))
        XCTAssertEqual(Set(try context.objects("Item").compactMap { $0["name"] as? String }), ["kept", "unnamed"])
        XCTAssertEqual(
            coordinator.migrationReports.first?.hops.first?.changes.map(\.description),
            ["make Item.name required, empty values become unnamed"])
    }

    func testStoresOfTwoConfigurationsMigrateOnOneCoordinator() throws {
        let (notes, passwords) = try makeTwoStores(entries: 1)
        let migrating = PersistentStoreCoordinator(modelVersions: try TwoStoreModels.versions)
        migrating.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        try migrating.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes, options: options)
        // The second store is attached to the first one's connection: its migration runs there.
        try migrating.addPersistentStore(type: .sqlite, configuration: "Passwords", at: passwords, options: options)
        XCTAssertEqual(migrating.migrationReports.map(\.storeName), ["Notes.sqlite", "Passwords.sqlite"])
        try assertTwoStoresMigrated(migrating, entries: 1)
        XCTAssertEqual(try sqlite3(notes, "SELECT name FROM sqlite_master WHERE name = 'ZENTRY'"), [])
        XCTAssertEqual(try sqlite3(passwords, "SELECT name FROM sqlite_master WHERE name = 'ZNOTE'"), [])
    }

    func testStoresThatBelongTogetherMigrateInOneTransaction() throws {
        let (notes, passwords) = try makeTwoStores(entries: 3)
        let coordinator = PersistentStoreCoordinator(modelVersions: try TwoStoreModels.versions)
        coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        let reports = try coordinator.migrateStores([("Notes", notes), ("Passwords", passwords)])
        XCTAssertEqual(reports.map(\.storeName), ["Notes.sqlite", "Passwords.sqlite"])
        XCTAssertEqual(reports.map(\.carried), [["Note": 1], ["Entry": 3]])
        // Both fit the current version now: adding them needs no migration.
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Notes", at: notes)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Passwords", at: passwords)
        try assertTwoStoresMigrated(coordinator, entries: 3)
        XCTAssertEqual(try coordinator.migrateStores([("Notes", notes), ("Passwords", passwords)]).count, 0)
    }

    func testWhenOneStoreCannotBeMigratedNeitherIs() throws {
        let (notes, passwords) = try makeTwoStores(entries: 2)
        _ = try sqlite3(
            passwords, "UPDATE ZENTRY SET ZPASSWORD = CAST('Entry.password#9|moved' AS BLOB) WHERE Z_PK = 2")
        let before = (try Data(contentsOf: notes), try Data(contentsOf: passwords))
        let coordinator = PersistentStoreCoordinator(modelVersions: try TwoStoreModels.versions)
        coordinator.valueTransformers.register(PlaceBoundTransformer(), forName: PlaceBoundTransformer.name)
        XCTAssertThrowsError(try coordinator.migrateStores([("Notes", notes), ("Passwords", passwords)])) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .migrationFailed, "\(error)")
            XCTAssertTrue("\(error)".contains("cannot decode Entry.password of object 2"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: notes), before.0)
        XCTAssertEqual(try Data(contentsOf: passwords), before.1)
        XCTAssertEqual(coordinator.migrationReports.count, 0)
    }

    func testRowsOfNoKnownEntityAreReportedDropped() throws {
        let url = try makeStore(try itemV1(), fill: fillItems)
        _ = try sqlite3(url, "UPDATE ZITEM SET Z_ENT = 42 WHERE ZNAME = 'b'")
        let (coordinator, context) = try openMigrating(
            url, ModelVersions(versions: [try itemV1()], current: try itemV2()))
        XCTAssertEqual(try context.objects("Item").count, 2)
        XCTAssertTrue(
            coordinator.migrationReports[0].dropped.contains(
                "1 rows of ZITEM (no entity of the model has their Z_ENT)"),
            "\(coordinator.migrationReports[0].dropped)")
    }

    func testKeysOfAnotherKindAreRefusedNamingStoreEntityRowAndColumn() throws {
        let versions = ModelVersions(versions: [try itemV1()], current: try itemV2())
        for (index, (value, kind)) in [("'x'", "TEXT"), ("1.5", "a REAL"), ("X'02'", "a BLOB")].enumerated() {
            let url = try makeStore(try itemV1(), name: "items\(index).sqlite", fill: fillItems)
            _ = try sqlite3(url, "UPDATE ZITEM SET Z_ENT = \(value) WHERE ZNAME = 'b'")
            try assertRefused(
                url, versions, code: .damagedRow,
                naming: ["items\(index).sqlite, Item row 2: column Z_ENT holds \(kind) where an integer belongs"])
        }
        let v1 = try library("V1", manyAuthors: false)
        let url = try makeStore(v1, name: "library.sqlite") { context in
            let author = context.insertNewObject(forEntityName: "Author")
            for title in ["Notes", "Engine"] {
                let book = context.insertNewObject(forEntityName: "Book")
                book["title"] = title
                book["author"] = author
            }
        }
        _ = try sqlite3(url, "UPDATE ZBOOK SET ZAUTHOR = 'x' WHERE ZTITLE = 'Engine'")
        let row = try XCTUnwrap(try sqlite3(url, "SELECT Z_PK FROM ZBOOK WHERE ZTITLE = 'Engine'").first)
        try assertRefused(
            url, ModelVersions(versions: [v1], current: try library("V2", manyAuthors: true)), code: .damagedRow,
            naming: ["library.sqlite, Book row \(row): column ZAUTHOR holds TEXT"])
    }

    // MARK: - Versions from an .xcdatamodeld, Apple's stores, custom steps

    static var wibosco: URL { fixturesURL.appendingPathComponent("CoreData/wibosco-migration-example") }

    static func wiboscoVersions() throws -> ModelVersions {
        try ModelVersions(contentsOf: wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld"))
    }

    /// The example app's own v2→v3 step: each paragraph of a post's content becomes a Section.
    nonisolated(unsafe) static let sectionsFromContent = EntityMigrationStep(entity: "Post", from: "CoreDataMigration_Example 2") {
        post, writer in
        guard let content = post.sourceValues["content"] as? String else { return }
        let paragraphs = content.components(separatedBy: "\n\n").filter {
            !$0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        }
        for (index, body) in paragraphs.enumerated() {
            try writer.insert(
                entity: "Section",
                values: [
                    "body": body, "index": index, "title": String(body.prefix(4)) + "...",
                    "post": post.primaryKey,
                ])
        }
    }

    func testTheWiboscoStoresOfEveryVersionMigrateToTheLastVersion() throws {
        let versions = try ModelVersions(
            contentsOf: Self.wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld"))
        XCTAssertEqual(
            versions.versions.map(\.versionIdentifier),
            [
                "CoreDataMigration_Example", "CoreDataMigration_Example 2",
                "CoreDataMigration_Example 3", "CoreDataMigration_Example 4",
            ])
        XCTAssertEqual(versions.current.versionIdentifier, "CoreDataMigration_Example 4")
        for number in 1...3 {
            let url = directory.appendingPathComponent("wibosco-\(number).sqlite")
            try FileManager.default.copyItem(
                at: Self.wibosco.appendingPathComponent("CoreDataMigration_Example_\(number).sqlite"), to: url)
            XCTAssertEqual(
                try versions.sourceVersion(ofStoreAt: url)?.versionIdentifier,
                versions.versions[number - 1].versionIdentifier)
            let colorColumn = number == 1 ? "ZCOLOR" : "ZHEXCOLOR"
            let posts = try sqlite3(url, "SELECT Z_PK, \(colorColumn), ZPOSTID, ZDATE FROM ZPOST ORDER BY Z_PK")
            let contents = number == 3 ? [] : try sqlite3(url, "SELECT COUNT(*) FROM ZPOST WHERE ZCONTENT IS NOT NULL")
            let sectionsBefore =
                number == 3 ? try sqlite3(url, "SELECT Z_PK, ZPOST, ZINDEX, ZTITLE FROM ZSECTION ORDER BY Z_PK") : []

            let (coordinator, context) = try openMigrating(url, versions, steps: [Self.sectionsFromContent])
            let report = try XCTUnwrap(coordinator.migrationReports.first)
            XCTAssertEqual(report.hops.count, 4 - number)
            XCTAssertEqual(report.carried["Post"], posts.count)
            XCTAssertTrue(try context.objects("Post").allSatisfy { $0["softDeleted"] as? Bool == false })
            try coordinator.close()
            // Every post's row is what sqlite3 showed before, under the new column names.
            XCTAssertEqual(try sqlite3(url, "SELECT Z_PK, ZHEXCOLOR, ZPOSTID, ZDATE FROM ZPOST ORDER BY Z_PK"), posts)
            if number == 3 {
                XCTAssertEqual(
                    try sqlite3(url, "SELECT Z_PK, ZPOST, ZINDEX, ZTITLE FROM ZSECTION ORDER BY Z_PK"), sectionsBefore)
            } else {
                XCTAssertEqual(contents, ["10"])
                XCTAssertEqual(try sqlite3(url, "SELECT COUNT(DISTINCT ZPOST) FROM ZSECTION"), ["10"])
                XCTAssertEqual(
                    try sqlite3(url, "SELECT COUNT(*) FROM ZSECTION WHERE ZBODY IS NULL OR ZPOST IS NULL"), ["0"])
            }
            XCTAssertEqual(try StoreShape(contentsOf: url).differences(from: versions.current), [])
        }
    }

    func testWithoutACustomStepTheContentIsReportedDropped() throws {
        let versions = try ModelVersions(
            contentsOf: Self.wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld"))
        let url = directory.appendingPathComponent("wibosco.sqlite")
        try FileManager.default.copyItem(
            at: Self.wibosco.appendingPathComponent("CoreDataMigration_Example_2.sqlite"), to: url)
        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        let plans = try coordinator.migrationPlans(forStoreAt: url)
        XCTAssertEqual(
            plans.map(\.destination.versionIdentifier), ["CoreDataMigration_Example 3", "CoreDataMigration_Example 4"])
        XCTAssertEqual(
            plans[0].changes.map(\.description),
            [
                "remove attribute Post.content and its values", "add relationship Post.sections", "add entity Section",
            ])
        XCTAssertEqual(plans[1].changes.map(\.description), ["add attribute Post.softDeleted (default NO)"])
        let (migrated, _) = try openMigrating(url, versions)
        XCTAssertEqual(
            migrated.migrationReports[0].dropped, ["10 values of Post.content (attribute removed from the model)"])
    }
}

extension ManagedObjectContext {
    /// The objects of a to-many relationship.
    func relatedObjects(_ object: ManagedObject, _ key: String) throws -> [ManagedObject] {
        object[key] as? [ManagedObject] ?? []
    }
}

/// A model split in two configurations, as MyStash's: version 2 renames the notes' encoded
/// text and the entries' encoded password, and adds a required attribute to the entries.
enum TwoStoreModels {
    static func model(_ version: String, renamed: Bool) throws -> ManagedObjectModel {
        /// An encoded attribute named `old` in version 1 and `new` after.
        func encoded(_ old: String, _ new: String) -> AttributeDescription {
            AttributeDescription(
                name: renamed ? new : old, type: .transformable, valueTransformerName: PlaceBoundTransformer.name,
                elementID: renamed ? old : nil)
        }
        let uses = AttributeDescription(name: "uses", type: .integer32, isOptional: false, defaultValueString: "0")
        return try ManagedObjectModel(
            entities: [
                EntityDescription(name: "Note", attributes: [encoded("text", "body")]),
                EntityDescription(
                    name: "Entry", attributes: [encoded("password", "secret")] + (renamed ? [uses] : [])),
            ], configurations: ["Notes": ["Note"], "Passwords": ["Entry"]], versionIdentifier: version)
    }

    static var versions: ModelVersions {
        get throws {
            ModelVersions(versions: [try model("V1", renamed: false)], current: try model("V2", renamed: true))
        }
    }
}
