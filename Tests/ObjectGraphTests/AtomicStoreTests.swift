import Foundation
import XCTest

@testable import ObjectGraph

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The book's CustomStore (chapter 3 of Pro Core Data for iOS) on the public atomic-store
/// API: objects in a `.txt` file, one per line, and the metadata in a `.plist` beside it.
/// Reference objects are UUID strings, as in the book.
final class CustomStore: AtomicStore {
    var metadataURL: URL { url.deletingPathExtension().appendingPathExtension("plist") }

    override func newReferenceObject(for entity: EntityDescription, primaryKey: Int64) -> AnyHashable {
        AnyHashable(UUID().uuidString)
    }

    override func load() throws {
        guard let plist = try? Data(contentsOf: metadataURL),
            let metadata = try? PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any]
        else {
            throw damaged("no readable metadata in \(metadataURL.lastPathComponent)")
        }
        self.metadata = metadata
        var nodes: [String: (AtomicStoreCacheNode, [String: String])] = [:]
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        for (number, line) in lines.enumerated() {
            // Entity <TAB> reference <TAB> key=value <TAB> ...
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 2, let entity = entity(named: fields[0]) else {
                throw damaged("line \(number + 1) names no entity")
            }
            let node = AtomicStoreCacheNode(objectID: objectID(for: entity, referenceObject: AnyHashable(fields[1])))
            var links: [String: String] = [:]
            for field in fields.dropFirst(2) {
                guard let separator = field.firstIndex(of: "="),
                    let value = String(field[field.index(after: separator)...]).removingPercentEncoding
                else {
                    throw damaged("line \(number + 1) has a field without '='")
                }
                let key = String(field[..<separator])
                if entity.relationship(named: key) != nil {
                    links[key] = value
                } else if let attribute = entity.attribute(named: key) {
                    switch attribute.type {
                    case .string: node.propertyCache[key] = value
                    case .integer16, .integer32, .integer64: node.propertyCache[key] = Int(value)
                    case .transformable, .binary: node.propertyCache[key] = Data(base64Encoded: value)
                    default: throw damaged("line \(number + 1): this store keeps no \(attribute.type.rawValue) values")
                    }
                } else {
                    throw damaged("line \(number + 1): \(entity.name) has no property '\(key)'")
                }
            }
            nodes["\(entity.name):\(fields[1])"] = (node, links)
        }
        for (node, links) in nodes.values {
            guard let entity = entity(named: node.objectID.entityName) else { continue }
            for (key, value) in links {
                let targets = value.split(separator: "|").compactMap { nodes[String($0)]?.0 }
                node.propertyCache[key] = entity.relationship(named: key)!.isToMany ? targets : targets.first
            }
        }
        addCacheNodes(nodes.values.map(\.0).sorted { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) })
    }

    override func save() throws {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: " -_."))
        func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
        var lines: [String] = []
        for node in cacheNodes() {
            guard let reference = referenceObject(for: node.objectID)?.base as? String else { continue }
            var fields = [node.objectID.entityName, reference]
            for (key, value) in node.propertyCache.sorted(by: { $0.key < $1.key }) {
                let text: String
                switch value {
                case let string as String: text = escape(string)
                case let number as Int: text = String(number)
                case let data as Data: text = escape(data.base64EncodedString())
                case let node as AtomicStoreCacheNode: text = escape(link(node))
                case let nodes as [AtomicStoreCacheNode]: text = escape(nodes.map(link).joined(separator: "|"))
                default: continue
                }
                fields.append("\(key)=\(text)")
            }
            lines.append(fields.joined(separator: "\t"))
        }
        try writeAtomically(Data((lines.joined(separator: "\n") + "\n").utf8), to: url)
        try writeAtomically(
            try PropertyListSerialization.data(fromPropertyList: metadata, format: .xml, options: 0), to: metadataURL)
    }

    private func link(_ node: AtomicStoreCacheNode) -> String {
        "\(node.objectID.entityName):\(referenceObject(for: node.objectID)?.base as? String ?? "")"
    }
}

/// Binds each encoded value to its place, store identity included, and refuses to decode it anywhere else, as the
/// vault's encrypting transformer does.
final class StoreBoundTransformer: ValueTransformer {
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        Data("\(place)|\(value as! String)".utf8)
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        let text = String(decoding: data, as: UTF8.self)
        guard text.hasPrefix("\(place)|") else {
            throw ObjectGraphError(code: .objectNotFound, message: "value moved from its place")
        }
        return String(text.dropFirst("\(place)|".count))
    }
}

final class AtomicStoreTests: ObjectGraphTestCase {
    static let customType = StoreType(rawValue: "CustomStore")

    override func setUpWithError() throws {
        try super.setUpWithError()
        PersistentStoreCoordinator.registerStoreClass(CustomStore.self, forStoreType: Self.customType)
    }

    private func coordinator(_ model: ManagedObjectModel? = nil) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? Self.shopModel(), busyTimeout: 5)
        coordinator.valueTransformers.register(StoreBoundTransformer(), forName: "TestReversing")
        return coordinator
    }

    /// Categories, systems with secrets, tags (many-to-many); notes with attachments; dogs and cats; every attribute
    /// type.
    private func populate(_ context: ManagedObjectContext) throws {
        var tags: [ManagedObject] = []
        for name in ["red", "blue", "green"] {
            let tag = context.insertNewObject(forEntityName: "Tag")
            tag["name"] = name
            tags.append(tag)
        }
        for (index, name) in ["Web", "Desktop", "Wi-Fi"].enumerated() {
            let category = context.insertNewObject(forEntityName: "Category")
            category["name"] = name
            for number in 0..<index + 1 {
                let system = context.insertNewObject(forEntityName: "System")
                system["name"] = "\(name) \(number) \u{e9}\u{1F511}\ttab"
                system["userId"] = "user\(index)\(number)"
                system["rank"] = index * 10 + number
                system["password"] = "pw \(index)/\(number) <&>"
                system["category"] = category
                system["tags"] = Array(tags.prefix(number + 1))
            }
        }
        let orphan = context.insertNewObject(forEntityName: "System")
        orphan["userId"] = "orphan"
        guard context.model.entity(named: "Note").flatMap(context.coordinator.persistentStore(for:)) != nil else {
            try context.save()
            return
        }
        for title in ["first", "  spaced  ", "line\nbreak\u{1}ctrl", ""] {
            let note = context.insertNewObject(forEntityName: "Note")
            note["title"] = title
            note["body"] = "body of \(title)"
            for byte in 0..<2 {
                context.insertNewObject(forEntityName: "Attachment").setValues([
                    "data": Data([UInt8(byte), 0, 255]), "note": note,
                ])
            }
        }
        let dog = context.insertNewObject(forEntityName: "Dog")
        dog["name"] = "Rex"
        dog["breed"] = "collie"
        context.insertNewObject(forEntityName: "Cat")["name"] = "Tom"
        let everything = context.insertNewObject(forEntityName: "Everything")
        everything.setValues([
            "int16": 100, "int32": Int(Int32.min), "int64": Int.max,
            "decimal": Decimal(string: "12345.678901234567890")!,
            "double": 0.1 + 0.2, "float": Float(1.25), "string": "", "flag": false,
            "date": Date(timeIntervalSinceReferenceDate: 123_456_789.125), "blob": Data(),
            "uuid": UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
            "uri": URL(string: "https://example.com/a?b=c#d")!, "list": ["a", "b"], "scratch": "not stored",
        ])
        let empty = context.insertNewObject(forEntityName: "Everything")
        empty.setValues([
            "int16": nil, "int32": nil, "decimal": nil, "double": -1e308, "float": nil, "string": nil, "flag": nil,
        ])
        try context.save()
    }

    /// Every object of the stores by URI: attribute values and relationship destinations' URIs.
    private func dump(_ coordinator: PersistentStoreCoordinator) throws -> [String: String] {
        let context = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        var result: [String: String] = [:]
        for store in coordinator.persistentStores {
            for entity in store.entities where entity.superentity == nil {
                for object in try context.fetch(FetchRequest<ManagedObject>(entityName: entity.name)) {
                    var fields: [String] = [object.entity.name]
                    for attribute in object.entity.attributes.sorted(by: { $0.name < $1.name })
                    where !attribute.isTransient {
                        let value = object[attribute.name]
                        fields.append(
                            "\(attribute.name)="
                                + ((value as? Data)?.base64EncodedString() ?? value.map { "\($0)" } ?? "nil"))
                    }
                    for relationship in object.entity.relationships.sorted(by: { $0.name < $1.name }) {
                        let destinations =
                            relationship.isToMany
                            ? object[relationship.name] as! [ManagedObject]
                            : (object[relationship.name] as? ManagedObject).map { [$0] } ?? []
                        fields.append(
                            "\(relationship.name)->"
                                + destinations.map(\.objectID.uriRepresentation.absoluteString).sorted().joined(
                                    separator: ","))
                    }
                    result[object.objectID.uriRepresentation.absoluteString] = fields.joined(separator: "; ")
                }
            }
        }
        return result
    }

    // MARK: - The book's custom store

    func testBooksCustomStoreKeepsObjectsInATextFileAndMetadataInAPlistBesideIt() throws {
        let url = directory.appendingPathComponent("Passwords.txt")
        let first = try coordinator()
        let store = try first.addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
        let context = ManagedObjectContext(coordinator: first)
        try populate(context)
        let expected = try dump(first)
        XCTAssertEqual(expected.count, 3 + 3 + 6 + 1)

        let text = try String(contentsOf: url, encoding: .utf8)
        XCTAssertEqual(text.split(separator: "\n").count, 13, "one line per object")
        XCTAssertTrue(text.contains("name=Wi-Fi"))
        XCTAssertFalse(text.contains("pw 1"), "Transformable values are stored encoded")
        let plist =
            try PropertyListSerialization.propertyList(
                from: Data(contentsOf: directory.appendingPathComponent("Passwords.plist")),
                format: nil) as? [String: Any]
        XCTAssertEqual(plist?[StoreMetadataKey.storeType] as? String, "CustomStore")
        XCTAssertEqual(plist?[StoreMetadataKey.storeUUID] as? String, store.identifier)
        XCTAssertNotNil(plist?[StoreMetadataKey.versionHashes])
        first.setMetadata("3.1", forKey: "AppVersion", in: store)
        try first.saveMetadata()
        let written =
            try PropertyListSerialization.propertyList(
                from: Data(contentsOf: directory.appendingPathComponent("Passwords.plist")),
                format: nil) as? [String: Any]
        XCTAssertEqual(written?["AppVersion"] as? String, "3.1")

        // Reopened: the same objects, IDs, relationships and metadata; queries run as on SQLite.
        let second = try coordinator()
        let reopened = try second.addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
        XCTAssertEqual(reopened.metadata["AppVersion"] as? String, "3.1")
        try second.reloadMetadata()
        XCTAssertEqual(reopened.metadata["AppVersion"] as? String, "3.1")
        XCTAssertEqual(reopened.identifier, store.identifier)
        XCTAssertEqual(try dump(second), expected)
        let other = ManagedObjectContext(coordinator: second)
        XCTAssertEqual(
            try other.names("System", "category.name == 'Wi-Fi' AND ANY tags.name == 'green'"),
            ["Wi-Fi 2 \u{e9}\u{1F511}\ttab"])
        XCTAssertEqual(try other.names("Category", "systems.@sum.rank > 30"), ["Wi-Fi"])

        // Changes rewrite the file; a new object gets a UUID reference like the others.
        let web = try other.objects("Category", "name == 'Web'")[0]
        web["name"] = "Web Sites"
        other.delete(try other.objects("System", "userId == 'orphan'")[0])
        let added = other.insertNewObject(forEntityName: "Tag")
        added["name"] = "new"
        try other.save()
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 13)
        XCTAssertTrue(lines.contains { $0.hasPrefix("Tag\t") && $0.contains("name=new") })
        XCTAssertTrue(lines.allSatisfy { UUID(uuidString: String($0.split(separator: "\t")[1])) != nil })
        XCTAssertFalse(lines.contains { $0.contains("orphan") })
        XCTAssertEqual(
            try ManagedObjectContext(
                coordinator: try {
                    let third = try coordinator()
                    try third.addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
                    return third
                }()
            ).names("Category"), ["Desktop", "Web Sites", "Wi-Fi"])
    }

    func testAFailedFileWriteSavesNothingAndKeepsTheChanges() throws {
        let folder = directory.appendingPathComponent("vanishing")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent("Passwords.txt")
        let coordinator = try coordinator()
        try coordinator.addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        try populate(context)
        let before = try dump(coordinator)
        try FileManager.default.removeItem(at: folder)
        let tag = context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "lost?"
        XCTAssertThrowsError(try context.save())
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(try dump(coordinator), before, "the store's rows rolled back with the failed file write")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try context.save()
        XCTAssertTrue(try String(contentsOf: url, encoding: .utf8).contains("name=lost%3F"))
    }

    func testDamagedCustomStoreFilesAreRefusedWithTheirLine() throws {
        let url = directory.appendingPathComponent("Passwords.txt")
        let coordinator = try coordinator()
        try coordinator.addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
        try populate(ManagedObjectContext(coordinator: coordinator))
        let good = try String(contentsOf: url, encoding: .utf8)
        for (bad, reason) in [
            (good + "Planet\tx\n", "line 14"), (good.replacingOccurrences(of: "rank=", with: "colour="), "colour"),
            (good + "Tag\tz\tname\n", "without '='"),
        ] {
            try Data(bad.utf8).write(to: url)
            XCTAssertThrowsError(
                try self.coordinator().addPersistentStore(type: Self.customType, configuration: "Passwords", at: url)
            ) { error in
                XCTAssertEqual((error as? ObjectGraphError)?.code, .storeOpenFailed)
                XCTAssertTrue("\(error)".contains(reason) && "\(error)".contains("Passwords.txt"), "\(error)")
            }
        }
    }

    // MARK: - Binary and XML stores

    func testBinaryAndXMLStoresKeepEveryValueAndRelationship() throws {
        for type in [StoreType.binary, .xml] {
            let notes = directory.appendingPathComponent("Notes.\(type.rawValue)")
            let passwords = directory.appendingPathComponent("Passwords.\(type.rawValue)")
            let first = try coordinator()
            try first.addPersistentStore(type: type, configuration: "Notes", at: notes)
            try first.addPersistentStore(type: type, configuration: "Passwords", at: passwords)
            try populate(ManagedObjectContext(coordinator: first))
            let expected = try dump(first)
            XCTAssertEqual(expected.count, 13 + 4 + 8 + 2 + 2, "\(type)")
            let second = try coordinator()
            try second.addPersistentStore(type: type, configuration: "Notes", at: notes)
            try second.addPersistentStore(type: type, configuration: "Passwords", at: passwords)
            XCTAssertEqual(try dump(second), expected, "\(type)")
            let everything = try ManagedObjectContext(coordinator: second).objects(
                "Everything", "int64 == %@", Int.max)
            XCTAssertEqual(everything.first?["list"] as? [String], ["a", "b"], "\(type)")
            XCTAssertEqual(everything.first?["double"] as? Double, 0.1 + 0.2, "\(type)")
            let attributes = try FileManager.default.attributesOfItem(atPath: passwords.path)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, "\(type)")
        }
        // The XML file is plain XML that another tool can read.
        let xml = try XMLDocument(contentsOf: directory.appendingPathComponent("Passwords.XML"), options: [])
        XCTAssertEqual(try xml.nodes(forXPath: "//object[@entity='System']").count, 7)
        XCTAssertEqual(try xml.nodes(forXPath: "//object[@entity='Tag']/relationship[@name='systems']").count, 3)
    }

    func testDamagedBinaryAndXMLFilesAreRefusedWithoutCrashing() throws {
        var random = FetchPowerTests.Generator(state: 2026)
        var counts: [String: (opened: Int, refused: Int)] = [:]
        for type in [StoreType.binary, .xml] {
            let url = directory.appendingPathComponent("Passwords-\(type.rawValue)")
            let coordinator = try coordinator()
            try coordinator.addPersistentStore(type: type, configuration: "Passwords", at: url)
            try populate(ManagedObjectContext(coordinator: coordinator))
            let good = try Data(contentsOf: url)
            for _ in 0..<150 {
                var bytes = [UInt8](good)
                switch random.next(3) {
                case 0: bytes.removeLast(1 + random.next(bytes.count - 1))
                case 1: for _ in 0..<(1 + random.next(4)) { bytes[random.next(bytes.count)] = UInt8(random.next(256)) }
                default:
                    bytes.insert(
                        contentsOf: Array("<object entity=\"Tag\" id=\"Tag/p1\"/>".utf8), at: random.next(bytes.count))
                }
                try Data(bytes).write(to: url)
                do {
                    let fresh = try self.coordinator()
                    try fresh.addPersistentStore(type: type, configuration: "Passwords", at: url)
                    _ = try dump(fresh)
                    counts[type.rawValue, default: (0, 0)].opened += 1
                } catch let error as ObjectGraphError {
                    XCTAssertTrue(
                        "\(error)".contains("Passwords-\(type.rawValue)") || error.code != .storeOpenFailed, "\(error)"
                    )
                    counts[type.rawValue, default: (0, 0)].refused += 1
                } catch {
                    counts[type.rawValue, default: (0, 0)].refused += 1
                }
            }
        }
        XCTAssertGreaterThan(counts["Binary"]?.refused ?? 0, 50)
        XCTAssertGreaterThan(counts["XML"]?.refused ?? 0, 50)
        print("damaged atomic files:", counts)
    }

    func testExtremeIdentitiesAndNullColumnsDoNotTrap() throws {
        // Two sibling entities (one table, one key space) both named with the largest key.
        let url = directory.appendingPathComponent("Notes.xml")
        let first = try coordinator()
        try first.addPersistentStore(type: .xml, configuration: "Notes", at: url)
        let context = ManagedObjectContext(coordinator: first)
        context.insertNewObject(forEntityName: "Dog")["name"] = "Rex"
        context.insertNewObject(forEntityName: "Cat")["name"] = "Tom"
        try context.save()
        let largest = String(Int64.max)
        let text = try String(contentsOf: url, encoding: .utf8)
            .replacingOccurrences(of: "\"Dog/p1\"", with: "\"Dog/p\(largest)\"")
            .replacingOccurrences(of: "\"Cat/p2\"", with: "\"Cat/p\(largest)\"")
        XCTAssertEqual(text.components(separatedBy: largest).count, 3)
        try Data(text.utf8).write(to: url)
        let second = try coordinator()
        try second.addPersistentStore(type: .xml, configuration: "Notes", at: url)
        XCTAssertEqual(try ManagedObjectContext(coordinator: second).names("Animal"), ["Rex", "Tom"])

        // A SQLite row whose entity column or link is NULL is named as damaged, never trapped on
        // and never read as something it does not say.
        let sqliteURL = directory.appendingPathComponent("Passwords.sqlite")
        let third = try coordinator()
        try third.addPersistentStore(type: .sqlite, configuration: "Passwords", at: sqliteURL)
        try populate(ManagedObjectContext(coordinator: third))
        try third.close()
        _ = try runSQLite3([sqliteURL.path, "UPDATE ZTAG SET Z_ENT = NULL WHERE Z_PK = 1; UPDATE Z_8TAGS SET Z_9TAGS = NULL WHERE Z_8SYSTEMS = 1"])
        XCTAssertEqual(try runSQLite3([sqliteURL.path, "SELECT count(*) FROM Z_8TAGS WHERE Z_9TAGS IS NULL"]), Data("1\n".utf8))
        let fourth = try coordinator()
        let store = try fourth.addPersistentStore(type: .sqlite, configuration: "Passwords", at: sqliteURL)
        let other = ManagedObjectContext(coordinator: fourth)
        XCTAssertThrowsError(try other.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Tag"))) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .undecodableValue)
            XCTAssertTrue("\(error)".contains("Tag.Z_ENT of row 1"), "\(error)")
        }
        // A batch update checks every row before writing any.
        let rename = BatchUpdateRequest(entityName: "Tag", propertiesToUpdate: ["name": "x"])
        XCTAssertThrowsError(try other.execute(rename)) {
            XCTAssertTrue("\($0)".contains("Tag.Z_ENT of row 1"), "\($0)")
        }
        XCTAssertEqual(
            try runSQLite3([sqliteURL.path, "SELECT count(*) FROM ZTAG WHERE ZNAME = 'x'"]), Data("0\n".utf8))
        let binaryURL = directory.appendingPathComponent("Passwords.bin")
        XCTAssertThrowsError(try fourth.migratePersistentStore(store, to: binaryURL, type: .binary)) { error in
            XCTAssertTrue("\(error)".contains("Tag.Z_ENT of row 1"), "\(error)")
        }
        _ = try runSQLite3([sqliteURL.path, "UPDATE ZTAG SET Z_ENT = (SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Tag')"])
        XCTAssertEqual(try other.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Tag")).count, 3)
        XCTAssertThrowsError(try fourth.migratePersistentStore(store, to: binaryURL, type: .binary)) { error in
            XCTAssertTrue("\(error)".contains("Z_9TAGS"), "\(error)")
        }
        _ = try runSQLite3([sqliteURL.path, "DELETE FROM Z_8TAGS WHERE Z_9TAGS IS NULL"])
        try fourth.migratePersistentStore(store, to: binaryURL, type: .binary)
        XCTAssertEqual(try ManagedObjectContext(coordinator: fourth).objects("Tag").count, 3)
    }

    // MARK: - Migrating between store types

    func testMigrateRoundTripSQLiteBinaryXMLSQLiteKeepsEveryObjectAndRelationship() throws {
        let coordinator = try coordinator()
        var notes = try coordinator.addPersistentStore(
            type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("Notes.sqlite"))
        var passwords = try coordinator.addPersistentStore(
            type: .sqlite, configuration: "Passwords",
            at: directory.appendingPathComponent("Passwords.sqlite"))
        let context = ManagedObjectContext(coordinator: coordinator)
        try populate(context)
        coordinator.setMetadata("kept", forKey: "AppKey", in: passwords)
        try coordinator.saveMetadata()
        let expected = try dump(coordinator)
        let identifiers = (notes.identifier, passwords.identifier)

        let steps: [(StoreType, String)] = [(.binary, "bin"), (.xml, "xml"), (.inMemory, ""), (.sqlite, "sqlite")]
        for (type, suffix) in steps {
            let url = type == .inMemory ? nil : directory.appendingPathComponent("Passwords-2.\(suffix)")
            passwords = try coordinator.migratePersistentStore(passwords, to: url, type: type)
            notes = try coordinator.migratePersistentStore(
                notes, to: url.map { _ in directory.appendingPathComponent("Notes-2.\(suffix)") },
                type: type)
            XCTAssertEqual(passwords.type, type)
            XCTAssertEqual(try dump(coordinator), expected, "after migrating to \(type)")
            XCTAssertEqual(passwords.metadata["AppKey"] as? String, "kept")
            XCTAssertEqual((notes.identifier, passwords.identifier).0, identifiers.0)
            XCTAssertEqual(passwords.identifier, identifiers.1)
        }
        // The objects the first context holds still save into the migrated store.
        let system = try context.objects("System", "userId == 'orphan'")[0]
        system["name"] = "renamed"
        try context.save()

        // A fresh coordinator on the final SQLite files sees everything, secrets decoded in place.
        let reopened = try self.coordinator()
        try reopened.addPersistentStore(
            type: .sqlite, configuration: "Notes", at: directory.appendingPathComponent("Notes-2.sqlite"))
        let final = try reopened.addPersistentStore(
            type: .sqlite, configuration: "Passwords", at: directory.appendingPathComponent("Passwords-2.sqlite"))
        XCTAssertEqual(final.metadata["AppKey"] as? String, "kept")
        XCTAssertEqual(final.metadata[StoreMetadataKey.storeType] as? String, "SQLite")
        var wanted = expected
        let key = system.objectID.uriRepresentation.absoluteString
        wanted[key] = wanted[key]?.replacingOccurrences(of: "name=nil", with: "name=renamed")
        XCTAssertEqual(try dump(reopened), wanted)
        XCTAssertEqual(
            try ManagedObjectContext(coordinator: reopened).objects("System", "rank == 21").first?["password"]
                as? String, "pw 2/1 <&>")

        // Migrating onto an existing file is refused and leaves the store in place.
        XCTAssertThrowsError(
            try coordinator.migratePersistentStore(
                passwords, to: directory.appendingPathComponent("Passwords.sqlite"), type: .xml))
        XCTAssertTrue(coordinator.persistentStores.contains { $0 === passwords })
        XCTAssertEqual(try dump(coordinator).count, expected.count)
    }
}

extension ManagedObject {
    fileprivate func setValues(_ values: [String: Any?]) {
        for (key, value) in values { self[key] = value ?? nil }
    }
}
