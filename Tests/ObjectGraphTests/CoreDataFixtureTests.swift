import Foundation
import XCTest
@testable import ObjectGraph

/// Stores written by Apple's Core Data (Fixtures/CoreData, see its README) opened with the
/// model version that wrote them; every value read is compared with what the `sqlite3`
/// command-line tool prints for the same row.
final class CoreDataFixtureTests: ObjectGraphTestCase {
    static var fixtures: URL { ObjectGraphTestCase.fixturesURL.appendingPathComponent("CoreData") }

    /// Each fixture store with the model version that wrote it.
    static let pairs: [(store: String, model: String)] = [
        ("wibosco-migration-example/CoreDataMigration_Example_1.sqlite",
         "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example.xcdatamodel"),
        ("wibosco-migration-example/CoreDataMigration_Example_2.sqlite",
         "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 2.xcdatamodel"),
        ("wibosco-migration-example/CoreDataMigration_Example_3.sqlite",
         "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel"),
        ("bnr-coredatastack/TestModel.sqlite", "bnr-coredatastack/Sample.xcdatamodeld/TestModel.xcdatamodel"),
        ("coredataplus-samplemodel/SampleModel_V1.sqlite", "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"),
        ("coredataplus-samplemodel/SampleModel_V2.sqlite", "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel2.xcdatamodel"),
    ]

    /// Copies a fixture store (and any side files) to the temporary directory: opening one
    /// may create WAL side files, and the fixtures stay untouched.
    func copyStore(_ relativePath: String) throws -> URL {
        let source = Self.fixtures.appendingPathComponent(relativePath)
        let target = directory.appendingPathComponent(UUID().uuidString + "-" + source.lastPathComponent)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: source.path + suffix) {
            try FileManager.default.copyItem(atPath: source.path + suffix, toPath: target.path + suffix)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        return target
    }

    func model(_ relativePath: String) throws -> ManagedObjectModel {
        try ManagedObjectModel(contentsOf: Self.fixtures.appendingPathComponent(relativePath))
    }

    /// Stores found in public repositories (Fixtures/CoreData/README.md names each one's source),
    /// each with the model version that wrote it.
    static let publicPairs: [(store: String, model: String)] = [
        ("easylife-todo/EasyLife 1.5.0.sqlite", "easylife-todo/EasyLife.xcdatamodeld/EasyLife 1.5.0.xcdatamodel"),
        ("easylife-projects/EasyLife.sqlite", "easylife-projects/EasyLife.xcdatamodeld/EasyLife 1.3.0.xcdatamodel"),
        ("easylife-projects/EasyLife 1.3.0.sqlite",
         "easylife-projects/EasyLife.xcdatamodeld/EasyLife 1.3.0.xcdatamodel"),
        ("objcio-moody/Moody.sqlite", "objcio-moody/Moody.xcdatamodeld/Moody.xcdatamodel"),
        ("objcio-moody/Moody 2.sqlite", "objcio-moody/Moody.xcdatamodeld/Moody 2.xcdatamodel"),
        ("objcio-moody/Moody 3.sqlite", "objcio-moody/Moody.xcdatamodeld/Moody 3.xcdatamodel"),
        ("objcio-moody/Moody 4.sqlite", "objcio-moody/Moody.xcdatamodeld/Moody 4.xcdatamodel"),
        ("objcio-moody/Moody 5.sqlite", "objcio-moody/Moody.xcdatamodeld/Moody 5.xcdatamodel"),
        ("bookmigration/Model1.sqlite", "bookmigration/Model.xcdatamodeld/Model1.xcdatamodel"),
        ("iqtodolist/IQToDoList.sqlite", "iqtodolist/IQToDoList.xcdatamodeld/IQToDoList.xcdatamodel"),
        ("coredataplus-samplemodel3/SampleModel3_V1.sqlite",
         "coredataplus-samplemodel3/SampleModel3.xcdatamodeld/SampleModel3.xcdatamodel"),
        ("flickrsearcher/starter_database.sqlite",
         "flickrsearcher/FlickrSearcher.xcdatamodeld/FlickrSearcher.xcdatamodel"),
    ]

    func testEveryFixtureStoreOpensWithItsModelAndEveryValueEqualsSQLite3() throws {
        let (rowsCompared, valuesCompared) = try compareEveryValue(Self.pairs)
        XCTAssertGreaterThan(rowsCompared, 300)
        print("Core Data fixtures: \(Self.pairs.count) stores opened, \(rowsCompared) rows and \(valuesCompared) values equal to sqlite3's")
    }

    func testEveryPublicStoreOpensWithItsModelAndEveryValueEqualsSQLite3() throws {
        let missing = Set(Self.publicPairs.map { String($0.store.prefix { $0 != "/" }) })
            .filter { !FileManager.default.fileExists(atPath: Self.fixtures.appendingPathComponent($0).path) }
        guard missing.isEmpty else {
            throw XCTSkip("not in this checkout: \(missing.sorted().joined(separator: ", ")) (see Fixtures/CoreData/README.md)")
        }
        let (rowsCompared, valuesCompared) = try compareEveryValue(Self.publicPairs)
        XCTAssertGreaterThan(rowsCompared, 300)
        print("Public Core Data stores: \(Self.publicPairs.count) opened, \(rowsCompared) rows and \(valuesCompared) values equal to sqlite3's")
    }

    /// Opens each store with its model version and compares every row with sqlite3's.
    private func compareEveryValue(_ pairs: [(store: String, model: String)]) throws -> (rows: Int, values: Int) {
        var valuesCompared = 0
        var rowsCompared = 0
        for (storePath, modelPath) in pairs {
            let url = try copyStore(storePath)
            let model = try model(modelPath)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            // An app's own transformers are not here: their values are compared as the bytes stored.
            for attribute in model.entities.flatMap(\.attributes) where attribute.type == .transformable {
                if let name = attribute.valueTransformerName, coordinator.valueTransformers.transformer(named: name) == nil {
                    coordinator.valueTransformers.register(StoredBytesTransformer(), forName: name)
                }
            }
            var options = StoreOptions()
            options.mustExist = true
            XCTAssertNoThrow(try coordinator.addPersistentStore(type: .sqlite, at: url, options: options), storePath)
            let context = ManagedObjectContext(coordinator: coordinator)
            for root in model.entities where root.superentity == nil {
                let rows = try sqlite3Rows(url, root: root, model: model)
                let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: root.name))
                XCTAssertEqual(objects.count, rows.count, "\(storePath) \(root.name)")
                let byKey = Dictionary(uniqueKeysWithValues: objects.compactMap { object in object.objectID.primaryKey.map { ($0, object) } })
                for row in rows {
                    let key = (row["Z_PK"] as? NSNumber)?.int64Value ?? -1
                    guard let object = byKey[key] else { XCTFail("\(storePath): \(root.name) row \(key) not fetched"); continue }
                    XCTAssertEqual(object.entity.entityNumber, (row["Z_ENT"] as? NSNumber)?.intValue, "\(storePath) row \(key)")
                    // Core Data keeps an entity's old name (the model's elementID) after a renaming migration.
                    XCTAssertTrue([object.entity.name, object.entity.elementID].contains(row["ENTITY_NAME"] as? String),
                                  "\(storePath) row \(key): \(object.entity.name) vs \(row["ENTITY_NAME"] ?? "-")")
                    valuesCompared += try compare(object, with: row, place: "\(storePath) \(root.name) row \(key)")
                    rowsCompared += 1
                }
            }
            try coordinator.close()
        }
        return (rowsCompared, valuesCompared)
    }

    func testAStoreThatDoesNotFitNamesEveryDifferingEntityAndProperty() throws {
        // The bnr store was written by TestModel; the current version adds Publisher and Book.publisher.
        let url = try copyStore("bnr-coredatastack/TestModel.sqlite")
        let current = try model("bnr-coredatastack/Sample.xcdatamodeld")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: current)
        XCTAssertThrowsError(try coordinator.addPersistentStore(type: .sqlite, at: url)) { error in
            guard let error = error as? ObjectGraphError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.code, .incompatibleVersionHash)
            XCTAssertTrue(error.message.contains("entity Publisher is in the model but not in the store"), error.message)
            XCTAssertTrue(error.message.contains("Book.publisher is in the model (to-one relationship to Publisher) but not in the store"), error.message)
            XCTAssertFalse(error.message.contains("added"), error.message)
            XCTAssertFalse(error.message.contains("Author"), error.message)
        }
        // The file is left as it was: no table was created.
        let tables = String(decoding: try runSQLite3(["-readonly", url.path, ".tables"]), as: UTF8.self)
        XCTAssertFalse(tables.contains("ZPUBLISHER"), tables)
    }

    func testEveryWiboscoStoreFitsOnlyItsOwnModelVersion() throws {
        let folder = "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/"
        let versions = ["CoreDataMigration_Example", "CoreDataMigration_Example 2", "CoreDataMigration_Example 3", "CoreDataMigration_Example 4"]
        let models = try versions.map { try model(folder + $0 + ".xcdatamodel") }
        for number in 1...3 {
            let url = try copyStore("wibosco-migration-example/CoreDataMigration_Example_\(number).sqlite")
            let shape = try StoreShape(contentsOf: url)
            let fitting = models.indices.filter { shape.differences(from: models[$0]).isEmpty }
            XCTAssertEqual(fitting, [number - 1], "store \(number)")
        }
        // Store 1 against version 2: color was renamed hexColor (the column ZCOLOR stays, ZHEXCOLOR is missing).
        let first = try StoreShape(contentsOf: try copyStore("wibosco-migration-example/CoreDataMigration_Example_1.sqlite"))
        XCTAssertEqual(first.differences(from: models[1]).map(\.description), [
            "Post.hexColor is in the model (attribute String) but not in the store",
            "Post.color is in the store (column ZCOLOR of ZPOST) but not in the model",
        ])
        // Store 3 against version 4: softDeleted is new.
        let third = try StoreShape(contentsOf: try copyStore("wibosco-migration-example/CoreDataMigration_Example_3.sqlite"))
        XCTAssertEqual(third.differences(from: models[3]).map(\.description),
                       ["Post.softDeleted is in the model (attribute Boolean) but not in the store"])
    }

    func testIgnoringVersioningOpensAStoreThatDoesNotFit() throws {
        let url = try copyStore("wibosco-migration-example/CoreDataMigration_Example_1.sqlite")
        let later = try model("wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 2.xcdatamodel")
        var options = StoreOptions()
        options.ignoresVersioning = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: later)
        XCTAssertNoThrow(try coordinator.addPersistentStore(type: .sqlite, at: url, options: options))
        // Reading then meets the missing column as a store error, not a crash.
        let context = ManagedObjectContext(coordinator: coordinator)
        XCTAssertThrowsError(try context.fetch(FetchRequest<ManagedObject>(entityName: "Post"))) { error in
            XCTAssertTrue("\(error)".contains("ZHEXCOLOR"), "\(error)")
        }
        let strict = PersistentStoreCoordinator(managedObjectModel: later)
        XCTAssertThrowsError(try strict.addPersistentStore(type: .sqlite, at: try copyStore("wibosco-migration-example/CoreDataMigration_Example_1.sqlite")))
    }

    /// Compares every stored attribute and to-one relationship of `object` with the row as
    /// sqlite3 printed it; returns how many values were compared.
    private func compare(_ object: ManagedObject, with row: [String: Any], place: String) throws -> Int {
        var compared = 0
        for attribute in object.entity.attributes where !attribute.isTransient {
            let printed = row[attribute.columnName]
            let value = object.value(forKey: attribute.name)
            let what = "\(place) \(attribute.name)"
            guard let printed, !(printed is NSNull) else {
                XCTAssertNil(value, what)
                compared += 1
                continue
            }
            switch attribute.type {
            case .string, .uri:
                XCTAssertEqual(value as? String ?? (value as? URL)?.absoluteString, printed as? String, what)
            case .integer16, .integer32, .integer64:
                XCTAssertEqual((value as? Int).map(Int64.init), (printed as? NSNumber)?.int64Value, what)
            case .boolean:
                XCTAssertEqual(value as? Bool, (printed as? NSNumber).map { $0.int64Value != 0 }, what)
            case .double, .float:
                XCTAssertEqual((value as? Double) ?? (value as? Float).map(Double.init), Double(printed as? String ?? ""), what)
            case .date:
                XCTAssertEqual((value as? Date)?.timeIntervalSinceReferenceDate, Double(printed as? String ?? ""), what)
            case .decimal:
                XCTAssertEqual(value as? Decimal, Decimal(string: printed as? String ?? ""), what)
            case .uuid:
                XCTAssertEqual((value as? UUID).map { withUnsafeBytes(of: $0.uuid) { hex(Data($0)) } }, printed as? String, what)
            case .binary:
                XCTAssertEqual((value as? Data).map(hex), printed as? String, what)
            case .transformable:
                guard let bytes = value as? Data else { continue }
                XCTAssertEqual(hex(bytes), printed as? String, what)
            }
            compared += 1
        }
        for relationship in object.entity.relationships where !relationship.isToMany {
            let destination = object.value(forKey: relationship.name) as? ManagedObject
            XCTAssertEqual(destination?.objectID.primaryKey, (row[relationship.columnName] as? NSNumber)?.int64Value, "\(place) \(relationship.name)")
            compared += 1
        }
        return compared
    }

    /// The rows of a root entity's table as sqlite3 prints them (JSON mode), each column in
    /// an exact text form: reals with 17 significant digits, blobs in hex.
    private func sqlite3Rows(_ url: URL, root: EntityDescription, model: ManagedObjectModel) throws -> [[String: Any]] {
        var selections = ["t.Z_PK", "t.Z_ENT", "(SELECT Z_NAME FROM Z_PRIMARYKEY p WHERE p.Z_ENT = t.Z_ENT) AS ENTITY_NAME"]
        for attribute in root.tableAttributes {
            let column = "t.\(attribute.columnName)"
            switch attribute.type {
            case .double, .float, .date:
                selections.append("CASE WHEN \(column) IS NULL THEN NULL ELSE printf('%!.17g', \(column)) END AS \(attribute.columnName)")
            case .decimal:
                selections.append("CAST(\(column) AS TEXT) AS \(attribute.columnName)")
            case .binary, .uuid, .transformable:
                selections.append("CASE WHEN \(column) IS NULL THEN NULL ELSE hex(\(column)) END AS \(attribute.columnName)")
            default:
                selections.append(column)
            }
        }
        selections += root.tableToOneRelationships.map { "t.\($0.columnName)" }
        let sql = "SELECT \(selections.joined(separator: ", ")) FROM \(root.tableName) t ORDER BY t.Z_PK"
        let output = try runSQLite3(["-readonly", "-json", url.path, sql])
        guard !output.isEmpty else { return [] }
        return try JSONSerialization.jsonObject(with: output) as? [[String: Any]] ?? []
    }
}

func runSQLite3(_ arguments: [String]) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw NSError(domain: "sqlite3", code: Int(process.terminationStatus), userInfo: [NSLocalizedDescriptionKey: "sqlite3 \(arguments) failed"])
    }
    return data
}

/// Hands the stored bytes over as they are, for an app's transformer that is not available.
final class StoredBytesTransformer: ValueTransformer {
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data { value as? Data ?? Data() }
    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any { data }
}

func hex(_ data: Data) -> String { data.map { String(format: "%02X", $0) }.joined() }
