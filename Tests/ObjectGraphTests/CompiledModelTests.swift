import Foundation
import XCTest
@testable import ObjectGraph

/// Apple's store metadata kept through what ObjectGraph writes, and the version hashes of a
/// compiled model (`.momd`) recorded, so the app that wrote a store still recognizes it.
///
/// The `.momd` is assembled from Apple's own bytes: each version's `.mom` is the keyed archive
/// Core Data kept in the fixture store of that version (`Z_MODELCACHE`, the same archive Xcode
/// compiles into a `.mom`), and `VersionInfo.plist` declares, per version, the hashes Core Data
/// recorded in that store's `Z_METADATA`.
extension CoreDataFixtureTests {
    static let wiboscoVersions = [
        (store: "wibosco-migration-example/CoreDataMigration_Example_1.sqlite", name: "CoreDataMigration_Example"),
        (store: "wibosco-migration-example/CoreDataMigration_Example_2.sqlite", name: "CoreDataMigration_Example 2"),
        (store: "wibosco-migration-example/CoreDataMigration_Example_3.sqlite", name: "CoreDataMigration_Example 3"),
    ]

    static func appleHashes(_ store: String) throws -> [String: Data] {
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(
            at: Self.fixtures.appendingPathComponent(store))
        return try XCTUnwrap(metadata[StoreMetadataKey.versionHashes] as? [String: Data])
    }

    /// A `.momd` of the wibosco model's versions 1 to 3, version 3 current, in `directory`.
    static func wiboscoMomd(in directory: URL, swapping swap: Bool = false) throws -> URL {
        let momd = directory.appendingPathComponent(UUID().uuidString + ".momd")
        try FileManager.default.createDirectory(at: momd, withIntermediateDirectories: false)
        var hashes: [String: [String: Data]] = [:]
        let versions = Self.wiboscoVersions
        for (index, version) in versions.enumerated() {
            // Swapped: the first two .mom files hold each other's model.
            let source = swap && index < 2 ? versions[1 - index].store : version.store
            let archive = try RawDeflate.inflate(
                try compressedModelCache(of: Self.fixtures.appendingPathComponent(source)),
                limit: ModelCache.inflatedLimit)
            try archive.write(to: momd.appendingPathComponent(version.name + ".mom"))
            hashes[version.name] = try Self.appleHashes(version.store)
        }
        let info: [String: Any] = [
            "NSManagedObjectModel_CurrentVersionName": "CoreDataMigration_Example 3",
            "NSManagedObjectModel_VersionHashes": hashes,
        ]
        try PropertyListSerialization.data(fromPropertyList: info, format: .binary, options: 0)
            .write(to: momd.appendingPathComponent("VersionInfo.plist"))
        return momd
    }

    private func migrate(_ url: URL, with versions: ModelVersions) throws {
        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        options.mustExist = true
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        try coordinator.close()
    }

    func testACompiledModelLoadsEveryVersionWithTheHashesItDeclares() throws {
        let versions = try ModelVersions(contentsOf: try Self.wiboscoMomd(in: directory))
        XCTAssertEqual(versions.versions.map(\.versionIdentifier), Self.wiboscoVersions.map(\.name))
        XCTAssertEqual(versions.current.versionIdentifier, "CoreDataMigration_Example 3")
        let xcode = try ModelVersions(
            contentsOf: Self.fixtures.appendingPathComponent(
                "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld"))
        for (store, name) in Self.wiboscoVersions {
            let compiled = try XCTUnwrap(versions.version(named: name))
            XCTAssertEqual(compiled.compiledVersionHashes, try Self.appleHashes(store))
            XCTAssertEqual(compiled.entityShapes, xcode.version(named: name)?.entityShapes)
        }
    }

    func testMigratingWithACompiledModelRecordsTheHashesCoreDataRecordedForThatVersion() throws {
        let url = try copyStore("wibosco-migration-example/CoreDataMigration_Example_1.sqlite")
        let before = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        try migrate(url, with: try ModelVersions(contentsOf: try Self.wiboscoMomd(in: directory)))
        let after = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        // What Apple's Core Data itself wrote in a store of version 3.
        XCTAssertEqual(
            after[StoreMetadataKey.versionHashes] as? [String: Data],
            try Self.appleHashes("wibosco-migration-example/CoreDataMigration_Example_3.sqlite"))
        // Every key ObjectGraph does not own is as Core Data left it.
        let owned: Set<String> = [
            StoreMetadataKey.versionHashes, StoreMetadataKey.versionIdentifiers, StoreMetadataKey.entityShapes,
        ]
        for (key, value) in before where !owned.contains(key) {
            XCTAssertEqual(after[key].map { "\($0)" }, "\(value)", key)
        }
        XCTAssertNotNil(before["NSPersistenceFrameworkVersion"])
        // The model cache now holds version 3's compiled model, as Core Data's own store of version 3 does.
        let store3 = Self.fixtures.appendingPathComponent(Self.wiboscoVersions[2].store)
        XCTAssertEqual(
            try RawDeflate.inflate(try compressedModelCache(of: url), limit: ModelCache.inflatedLimit),
            try RawDeflate.inflate(try compressedModelCache(of: store3), limit: ModelCache.inflatedLimit))
        // Compatibility is decided by shapes: the Xcode model of version 3 opens it without the hashes.
        let version3 = try model(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: version3)
        var options = StoreOptions()
        options.mustExist = true
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        XCTAssertEqual(try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")).count, 10)
        try coordinator.close()
    }

    func testAdoptingHashesFromAMomdWhoseVersionDiffersIsRefused() throws {
        let xcode = try ModelVersions(
            contentsOf: Self.fixtures.appendingPathComponent(
                "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld"))
        let swapped = try Self.wiboscoMomd(in: directory, swapping: true)
        XCTAssertThrowsError(try xcode.adoptVersionHashes(ofCompiledModelAt: swapped)) {
            XCTAssertTrue("\($0)".contains("differs from the model's version of that name"), "\($0)")
        }
        XCTAssertNil(xcode.version(named: "CoreDataMigration_Example")?.compiledVersionHashes)
        try xcode.adoptVersionHashes(ofCompiledModelAt: try Self.wiboscoMomd(in: directory))
        XCTAssertEqual(
            xcode.version(named: "CoreDataMigration_Example 2")?.compiledVersionHashes,
            try Self.appleHashes("wibosco-migration-example/CoreDataMigration_Example_2.sqlite"))
        // Version 4 is not in the .momd: it keeps ObjectGraph's own hashes.
        XCTAssertNil(xcode.current.compiledVersionHashes)
    }

    func testAMigrationDropsApplesStaleDigestAndKeepsItsOtherKeys() throws {
        let url = try copyStore("coredataplus-samplemodel/SampleModel_V1.sqlite")
        let before = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        XCTAssertNotNil(before["NSStoreModelVersionHashesDigest"])
        let bundle = Self.fixtures.appendingPathComponent("coredataplus-samplemodel/SampleModel.xcdatamodeld")
        let version2 = try ModelVersions(
            versions: [try model("coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel")],
            current: try ManagedObjectModel(contentsOf: bundle.appendingPathComponent("SampleModel2.xcdatamodel")))
        try migrate(url, with: version2)
        let after = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        XCTAssertNil(after["NSStoreModelVersionHashesDigest"])
        for key in ["NSPersistenceFrameworkVersion", "_NSAutoVacuumLevel", StoreMetadataKey.storeType] {
            XCTAssertEqual(after[key].map { "\($0)" }, before[key].map { "\($0)" }, key)
        }
        XCTAssertEqual(after[StoreMetadataKey.versionIdentifiers] as? [String], ["SampleModel2"])
        // Without the compiled model of the new version, the cache that described the old one is gone.
        XCTAssertEqual(try runSQLite3([url.path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'Z_MODELCACHE'"]),
                       Data("0\n".utf8))
        XCTAssertNil(try ManagedObjectModel.cachedModel(ofStoreAt: url))
    }

    func testEditingAnAppleStoreLeavesItsMetadataAsCoreDataWroteIt() throws {
        let url = try copyStore("wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        let plist = { try runSQLite3([url.path, "SELECT hex(Z_PLIST) FROM Z_METADATA"]) }
        let before = try plist()
        let coordinator = PersistentStoreCoordinator(
            managedObjectModel: try model(Self.pairs[2].model))
        var options = StoreOptions()
        options.mustExist = true
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        let post = context.insertNewObject(forEntityName: "Post")
        post["postID"] = "added by ObjectGraph"
        let section = context.insertNewObject(forEntityName: "Section")
        section["title"] = "a post has at least one section"
        section["post"] = post
        try context.save()
        try coordinator.close()
        XCTAssertEqual(
            try runSQLite3([url.path, "SELECT COUNT(*) FROM ZPOST WHERE ZPOSTID = 'added by ObjectGraph'"]),
            Data("1\n".utf8))
        XCTAssertEqual(try plist(), before)
    }
}

extension ObjectGraphCLITests {
    func testMigrateWithACompiledModelRecordsTheHashesCoreDataRecordedForTheVersion() throws {
        let momd = try CoreDataFixtureTests.wiboscoMomd(in: directory)
        let appleVersion3 = try CoreDataFixtureTests.appleHashes(CoreDataFixtureTests.wiboscoVersions[2].store)
        func recordedHashes(_ url: URL) throws -> [String: Data]? {
            try PersistentStoreCoordinator.metadataForPersistentStore(at: url)[StoreMetadataKey.versionHashes]
                as? [String: Data]
        }
        // The app's .xcdatamodeld at version 3, beside the .momd built from it.
        let bundle = try bundle(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld",
            without: "CoreDataMigration_Example 4.xcdatamodel")
        let plain = try store(1)
        XCTAssertEqual(try run("migrate", "--model", bundle.path, "--allow-loss", plain.path).status, 0)
        XCTAssertNotEqual(try recordedHashes(plain), appleVersion3)
        let paired = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_1.sqlite")
        let migrated = try run(
            "migrate", "--model", bundle.path, "--compiled-model", momd.path, "--allow-loss", paired.path)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertEqual(try recordedHashes(paired), appleVersion3)
        // The .momd alone as the model does the same.
        let alone = try store(2)
        XCTAssertEqual(try run("migrate", "--model", momd.path, "--allow-loss", alone.path).status, 0)
        XCTAssertEqual(try recordedHashes(alone), appleVersion3)
        let check = try run("check", "--model", bundle.path, alone.path)
        XCTAssertEqual(check.status, 0, check.stderr)
        let missing = try run("migrate", "--model", model, "--compiled-model", "nowhere.momd", plain.path)
        XCTAssertEqual(missing.status, 66, missing.stderr)
    }
}
