import Foundation
import XCTest
@testable import MyStashKit
import ObjectGraph
import StashCrypto

/// MyStash's encrypted fields are bound to their entity and attribute: a migration that
/// renames either must decrypt at the old place and encrypt at the new one.
final class EncryptedFieldMigrationTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("enc-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func model(_ version: String, entity: String, attribute: String) throws -> ManagedObjectModel {
        let renamed = version != "V1"
        return try ManagedObjectModel(
            entities: [
                EntityDescription(
                    name: entity,
                    attributes: [
                        AttributeDescription(name: "kind", type: .string),
                        AttributeDescription(
                            name: attribute, type: .transformable, valueTransformerName: EncryptingTransformer.name,
                            elementID: renamed ? "password" : nil),
                    ], elementID: renamed ? "System" : nil)
            ], versionIdentifier: version)
    }

    private func coordinator(_ versions: ModelVersions, key: SecretBytes) -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        let transformer = EncryptingTransformer()
        transformer.dataKey = key
        coordinator.valueTransformers.register(transformer, forName: EncryptingTransformer.name)
        return coordinator
    }

    func testRenamingAnEncryptedAttributeAndItsEntityReEncryptsForTheNewPlace() throws {
        let key = try SecretBytes.random(count: 32)
        let url = directory.appendingPathComponent("Passwords.sqlite")
        let v1 = try model("V1", entity: "System", attribute: "password")
        let old = coordinator(ModelVersions(versions: [], current: v1), key: key)
        let store = try old.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: old)
        for secret in ["hunter2", "correct horse"] {
            context.insertNewObject(forEntityName: "System")["password"] = secret
        }
        try context.save()
        let identifier = store.identifier
        try old.close()

        let v2 = try model("V2", entity: "Login", attribute: "secret")
        let new = coordinator(ModelVersions(versions: [v1], current: v2), key: key)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        try new.addPersistentStore(type: .sqlite, at: url, options: options)
        let logins = try ManagedObjectContext(coordinator: new).fetch(FetchRequest<ManagedObject>(entityName: "Login"))
        XCTAssertEqual(Set(logins.compactMap { $0["secret"] as? String }), ["hunter2", "correct horse"])
        try new.close()

        // Each stored ciphertext opens at its new place only: it was encrypted again, not copied.
        let queue = try SQLite3Reader(url)
        for (primaryKey, sealed) in try queue.rows("SELECT Z_PK, ZSECRET FROM ZLOGIN") {
            let newPlace = FieldContext(
                storeIdentifier: identifier, entity: "Login", attribute: "secret", primaryKey: primaryKey)
            let oldPlace = FieldContext(
                storeIdentifier: identifier, entity: "System", attribute: "password", primaryKey: primaryKey)
            XCTAssertNoThrow(try FieldEnvelope.open(sealed, key: key, context: newPlace))
            XCTAssertThrowsError(try FieldEnvelope.open(sealed, key: key, context: oldPlace))
        }
    }

    func testWithoutTheKeyTheMigrationFailsAndTheStoreIsUnchanged() throws {
        let key = try SecretBytes.random(count: 32)
        let url = directory.appendingPathComponent("Passwords.sqlite")
        let v1 = try model("V1", entity: "System", attribute: "password")
        let old = coordinator(ModelVersions(versions: [], current: v1), key: key)
        try old.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: old)
        context.insertNewObject(forEntityName: "System")["password"] = "hunter2"
        try context.save()
        try old.close()
        let before = try Data(contentsOf: url)

        let new = coordinator(
            ModelVersions(versions: [v1], current: try model("V2", entity: "Login", attribute: "secret")),
            key: try SecretBytes.random(count: 32))
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        XCTAssertThrowsError(try new.addPersistentStore(type: .sqlite, at: url, options: options)) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .migrationFailed, "\(error)")
            XCTAssertTrue("\(error)".contains("cannot decode System.password of object 1"), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: url), before)
    }
}

/// The version-1 vault fixture, written by the first release, migrates in place to a second
/// model version that renames an encrypted attribute and adds a required one: the vault's
/// own key re-encrypts every password for its new place.
final class VaultFixtureMigrationTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vault-v1-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let fixture = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures/vault-v1", withExtension: nil))
        for name in ["Notes.sqlite", "Passwords.sqlite"] {
            try FileManager.default.copyItem(
                at: fixture.appendingPathComponent(name), to: directory.appendingPathComponent(name))
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// The shipped model plus a second version: System.password renamed secret, System.favorite added.
    private func versions() throws -> ModelVersions {
        // The build embeds each version compiled; its XML is in the source tree.
        var files = Resources.folder("MyStash.xcdatamodeld")
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config/MyStash.xcdatamodeld/MyStash.xcdatamodel/contents")
        let first = try String(contentsOf: source, encoding: .utf8)
        files["MyStash.xcdatamodel/contents"] = Data(first.utf8)
        let renamed = "<attribute name=\"secret\" elementID=\"password\" attributeType=\"Transformable\""
        let second =
            first
            .replacingOccurrences(of: "<attribute name=\"password\" attributeType=\"Transformable\"", with: renamed)
            .replacingOccurrences(
                of: "<relationship name=\"category\"",
                with: """
                    <attribute name="favorite" attributeType="Boolean" defaultValueString="NO"
                        usesScalarValueType="YES"/>
                    <relationship name="category"
                    """)
        XCTAssertNotEqual(first, second)
        files["MyStash 2.xcdatamodel/contents"] = Data(second.utf8)
        files[".xccurrentversion"] = try PropertyListSerialization.data(
            fromPropertyList: ["_XCCurrentVersionName": "MyStash 2.xcdatamodel"], format: .xml, options: 0)
        return try ModelVersions(xcdatamodeldFiles: files, modelName: "MyStash.xcdatamodeld")
    }

    func testTheFirstReleasesVaultMigratesWithItsKeyReEncryptingTheRenamedField() throws {
        let versions = try versions()
        let passwords = directory.appendingPathComponent("Passwords.sqlite")
        XCTAssertEqual(
            try versions.sourceVersion(ofStoreAt: passwords, configuration: "Passwords")?.versionIdentifier, "MyStash")
        // The application reads its key slot before adding the stores, then lets the migration run.
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(at: passwords)
        let slot = try KeySlot(serialized: Array(try XCTUnwrap(metadata[Vault.keySlotKey] as? Data)))
        let key = try slot.unlock(password: SecretBytes.password("fixture-password"))

        let coordinator = PersistentStoreCoordinator(modelVersions: versions)
        let transformer = EncryptingTransformer()
        transformer.dataKey = key
        coordinator.valueTransformers.register(transformer, forName: EncryptingTransformer.name)
        var options = StoreOptions()
        options.mustExist = true
        options.migratesAutomatically = true
        options.infersMappingModel = true
        try coordinator.addPersistentStore(
            type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("Notes.sqlite"),
            options: options)
        try coordinator.addPersistentStore(type: .sqlite, configuration: "Passwords", at: passwords, options: options)
        // Notes.sqlite's entities did not change: only the version it records does.
        XCTAssertEqual(coordinator.migrationReports.map(\.storeName), ["Notes.sqlite", "Passwords.sqlite"])
        XCTAssertEqual(coordinator.migrationReports[1].carried["System"], 3)
        let context = ManagedObjectContext(coordinator: coordinator)
        let systems = try context.fetch(FetchRequest<ManagedObject>(entityName: "System"))
        let byName = Dictionary(uniqueKeysWithValues: systems.map { ($0["name"] as? String ?? "", $0) })
        XCTAssertEqual(
            byName.mapValues { $0["secret"] as? String },
            ["GitHub": "hunter2", "Router": "p@ss w0rd é", "Mail": "mail-secret"])
        XCTAssertEqual(
            byName.mapValues { ($0["category"] as? ManagedObject)?["name"] as? String },
            ["GitHub": "Web Site", "Router": "Home Lab", "Mail": "E-mail"])
        XCTAssertTrue(systems.allSatisfy { $0["favorite"] as? Bool == false })
        let notes = try context.fetch(FetchRequest<ManagedObject>(entityName: "Note")).compactMap {
            $0["title"] as? String
        }
        XCTAssertEqual(Set(notes), ["Office", "Empty note"])
    }
}

/// Reads rows through the sqlite3 tool (no ObjectGraph involved).
private struct SQLite3Reader {
    let url: URL
    init(_ url: URL) throws { self.url = url }

    func rows(_ sql: String) throws -> [(Int64, [UInt8])] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [url.path, sql.replacingOccurrences(of: "ZSECRET", with: "hex(ZSECRET)")]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return output.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "|")
            guard parts.count == 2, let key = Int64(parts[0]) else { return nil }
            let hex = Array(parts[1].utf8)
            let bytes = stride(from: 0, to: hex.count - 1, by: 2).compactMap {
                UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)
            }
            return (key, bytes)
        }
    }
}
