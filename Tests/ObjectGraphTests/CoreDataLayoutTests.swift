import Foundation
import TestSupport
import XCTest
@testable import ObjectGraph

/// How Apple's Core Data lays out what ObjectGraph used to misread, and that a store is never
/// taken for a model version it is not: it is read exactly, or refused (exit 65) naming why.
final class CoreDataLayoutTests: MigrationTestCase {
    static var coreData: URL { fixturesURL.appendingPathComponent("CoreData") }

    // MARK: - Join tables

    /// Apple's naming, read from real stores: EasyLife's TodoItem.blockedBy/blocking is
    /// `Z_2BLOCKING (Z_2BLOCKEDBY, Z_2BLOCKING)` (Fixtures/CoreData/easylife-todo), and Photos'
    /// Album.assets/Asset.albums is `Z_26ASSETS (Z_26ALBUMS, Z_3ASSETS)` with Asset entity 3:
    /// the relationship whose name sorts last names the table, whatever the entity numbers.
    func testAJoinTableIsNamedAfterTheRelationshipWhoseNameSortsLast() throws {
        let model = try ManagedObjectModel(
            entities: [
                EntityDescription(
                    name: "Asset", attributes: [AttributeDescription(name: "title", type: .string)],
                    relationships: [
                        RelationshipDescription(name: "albums", destination: "PhotoAlbum", inverse: "assets", isToMany: true)
                    ]),
                EntityDescription(
                    name: "PhotoAlbum", attributes: [AttributeDescription(name: "title", type: .string)],
                    relationships: [
                        RelationshipDescription(name: "assets", destination: "Asset", inverse: "albums", isToMany: true)
                    ]),
                EntityDescription(
                    name: "TodoItem", attributes: [AttributeDescription(name: "name", type: .string)],
                    relationships: [
                        RelationshipDescription(name: "blockedBy", destination: "TodoItem", inverse: "blocking", isToMany: true),
                        RelationshipDescription(name: "blocking", destination: "TodoItem", inverse: "blockedBy", isToMany: true),
                    ]),
            ], versionIdentifier: "V1")
        let url = try makeStore(model) { context in
            let (holiday, beach) = (context.insertNewObject(forEntityName: "PhotoAlbum"),
                                    context.insertNewObject(forEntityName: "Asset"))
            holiday["title"] = "Holiday"
            beach["title"] = "Beach"
            holiday.add(beach, toRelationship: "assets")
            let (call, pay) = (context.insertNewObject(forEntityName: "TodoItem"),
                               context.insertNewObject(forEntityName: "TodoItem"))
            call["name"] = "call landlord"
            pay["name"] = "pay rent"
            call.add(pay, toRelationship: "blocking")
        }
        XCTAssertEqual(try sqlite3(url, "SELECT sql FROM sqlite_master WHERE name LIKE 'Z\\_%' ESCAPE '\\' "
                                    + "AND type = 'table' AND name GLOB 'Z_[0-9]*' ORDER BY name"), [
            "CREATE TABLE Z_2ASSETS ( Z_2ALBUMS INTEGER, Z_1ASSETS INTEGER, PRIMARY KEY (Z_2ALBUMS, Z_1ASSETS) )",
            "CREATE TABLE Z_3BLOCKING ( Z_3BLOCKEDBY INTEGER, Z_3BLOCKING INTEGER, PRIMARY KEY (Z_3BLOCKEDBY, Z_3BLOCKING) )",
        ])
        // As in Photos, the owner's column holds the object whose set the table stores.
        XCTAssertEqual(try sqlite3(url, "SELECT a.ZTITLE, b.ZTITLE FROM Z_2ASSETS j JOIN ZPHOTOALBUM a ON "
                                    + "a.Z_PK = j.Z_2ALBUMS JOIN ZASSET b ON b.Z_PK = j.Z_1ASSETS"), ["Holiday|Beach"])
        XCTAssertEqual(try sqlite3(url, "SELECT a.ZNAME, b.ZNAME FROM Z_3BLOCKING j JOIN ZTODOITEM a ON "
                                    + "a.Z_PK = j.Z_3BLOCKEDBY JOIN ZTODOITEM b ON b.Z_PK = j.Z_3BLOCKING"),
                       ["call landlord|pay rent"])
    }

    /// The EasyLife 1.5.0 store, linked with sqlite3 as Core Data links (the table it made),
    /// reads back both ways; before, ObjectGraph looked for `Z_2BLOCKEDBY` and took the store
    /// for version 1.3.0, whose layout has no join table at all.
    func testASelfReferentialManyToManyOfARealStoreReadsBothWays() throws {
        let folder = try publicFixture("easylife-todo")
        let url = directory.appendingPathComponent("EasyLife.sqlite")
        try FileManager.default.copyItem(at: folder.appendingPathComponent("EasyLife 1.5.0.sqlite"), to: url)
        let versions = try ModelVersions(contentsOf: folder.appendingPathComponent("EasyLife.xcdatamodeld"))
        XCTAssertEqual(try versions.sourceVersion(ofStoreAt: url)?.versionIdentifier, "EasyLife 1.5.0")
        let shape = try StoreShape(contentsOf: url)
        XCTAssertEqual(
            shape.differences(from: try XCTUnwrap(versions.version(named: "EasyLife 1.3.0"))).map(\.description),
            ["table Z_2BLOCKING is in the store but the model stores nothing there: its rows would go unread"])
        // "call landlord" (1) blocks "phone mum" (2) and "send letter" (3).
        _ = try sqlite3(url, "INSERT INTO Z_2BLOCKING (Z_2BLOCKEDBY, Z_2BLOCKING) VALUES (1, 2), (1, 3)")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: versions.current)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        func names(_ item: String, _ key: String) throws -> [String] {
            let object = try XCTUnwrap(try context.objects("TodoItem", "name == %@", item).first)
            return try context.relatedObjects(object, key).compactMap { $0["name"] as? String }.sorted()
        }
        XCTAssertEqual(try names("call landlord", "blocking"), ["phone mum", "send letter"])
        XCTAssertEqual(try names("phone mum", "blockedBy"), ["call landlord"])
        XCTAssertEqual(try names("fix bike", "blocking"), [])
        try coordinator.close()
    }

    // MARK: - Sibling sub-entities and ordered relationships

    /// Sibling sub-entities share their root's table; the second one to declare a property of
    /// a name already stored gets a numbered column (`ZTITLE1`), as Core Data lays them out.
    func testSiblingSubEntitiesWithAPropertyOfTheSameNameGetNumberedColumns() throws {
        let model = try ManagedObjectModel(
            entities: [
                EntityDescription(name: "Media", isAbstract: true,
                                  attributes: [AttributeDescription(name: "added", type: .date)]),
                EntityDescription(name: "Book", parent: "Media", attributes: [
                    AttributeDescription(name: "title", type: .string), AttributeDescription(name: "pages", type: .integer32),
                ]),
                EntityDescription(name: "Film", parent: "Media", attributes: [
                    AttributeDescription(name: "title", type: .string), AttributeDescription(name: "minutes", type: .integer32),
                ]),
                EntityDescription(name: "Series", parent: "Media", attributes: [AttributeDescription(name: "title", type: .string)]),
            ], versionIdentifier: "V1")
        let url = try makeStore(model) { context in
            for (entity, title) in [("Book", "Dune"), ("Film", "Alien"), ("Series", "Dark")] {
                context.insertNewObject(forEntityName: entity)["title"] = title
            }
        }
        XCTAssertEqual(try sqlite3(url, "SELECT name FROM pragma_table_info('ZMEDIA') ORDER BY name"),
                       ["ZADDED", "ZMINUTES", "ZPAGES", "ZTITLE", "ZTITLE1", "ZTITLE2", "Z_ENT", "Z_OPT", "Z_PK"])
        XCTAssertEqual(try sqlite3(url, "SELECT Z_ENT, ZTITLE, ZTITLE1, ZTITLE2 FROM ZMEDIA ORDER BY Z_ENT"),
                       ["2|Dune||", "3||Alien|", "4|||Dark"])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try context.objects("Film").compactMap { $0["title"] as? String }, ["Alien"])
        XCTAssertEqual(try context.objects("Series", "title == 'Dark'").count, 1)
        try coordinator.close()
    }

    /// A model with ordered relationships, as Xcode writes it; `pinned` only in version 2.
    func orderedModel(_ version: String, pinned: Bool = false) throws -> ManagedObjectModel {
        let pinnedAttribute = pinned ? "<attribute name=\"pinned\" optional=\"YES\" attributeType=\"Boolean\"/>" : ""
        let xml = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="Asset"><attribute name="title" optional="YES" attributeType="String"/>
              <relationship name="albums" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="PhotoAlbum" inverseName="assets" inverseEntity="PhotoAlbum"/></entity>
            <entity name="Playlist"><attribute name="name" optional="YES" attributeType="String"/>\(pinnedAttribute)
              <relationship name="songs" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="Song" inverseName="playlist" inverseEntity="Song"/></entity>
            <entity name="PhotoAlbum"><attribute name="title" optional="YES" attributeType="String"/>
              <relationship name="assets" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="Asset" inverseName="albums" inverseEntity="Asset"/></entity>
            <entity name="Song"><attribute name="title" optional="YES" attributeType="String"/>
              <relationship name="playlist" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Playlist" inverseName="songs" inverseEntity="Playlist"/></entity>
            </model>
            """
        return try ManagedObjectModel(
            xcdatamodeldFiles: ["\(version).xcdatamodel/contents": Data(xml.utf8)], modelName: "Ordered.xcdatamodeld")
    }

    /// Ordered relationships laid out as Core Data lays them (Reminders' `ZPARENTLIST` beside
    /// `Z_FOK_PARENTLIST`, Photos' `Z_26ASSETS (Z_26ALBUMS, Z_3ASSETS, Z_FOK_3ASSETS)`), read in
    /// their order, written, reordered, grown from a context that read nothing, and migrated.
    func testOrderedRelationshipsReadWriteReorderAndMigrateInOrder() throws {
        let model = try orderedModel("V1")
        let url = try makeStore(model) { context in
            let playlist = context.insertNewObject(forEntityName: "Playlist")
            playlist["name"] = "Road trip"
            let album = context.insertNewObject(forEntityName: "PhotoAlbum")
            album["title"] = "Holiday"
            for title in ["Cecilia", "America", "Boxer"] {
                let song = context.insertNewObject(forEntityName: "Song")
                song["title"] = title
                playlist.add(song, toRelationship: "songs")
                let asset = context.insertNewObject(forEntityName: "Asset")
                asset["title"] = title
                album.add(asset, toRelationship: "assets")
            }
        }
        XCTAssertEqual(try sqlite3(url, "SELECT sql FROM sqlite_master WHERE name IN ('ZSONG', 'Z_2ASSETS') ORDER BY name"), [
            "CREATE TABLE ZSONG ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZPLAYLIST INTEGER, "
                + "Z_FOK_PLAYLIST INTEGER, ZTITLE VARCHAR )",
            "CREATE TABLE Z_2ASSETS ( Z_2ALBUMS INTEGER, Z_1ASSETS INTEGER, Z_FOK_1ASSETS INTEGER, "
                + "PRIMARY KEY (Z_2ALBUMS, Z_1ASSETS) )",
        ])
        func stored() throws -> [String] {
            try sqlite3(url, "SELECT ZTITLE FROM ZSONG WHERE ZPLAYLIST IS NOT NULL ORDER BY Z_FOK_PLAYLIST") + ["|"]
                + sqlite3(url, "SELECT a.ZTITLE FROM Z_2ASSETS j JOIN ZASSET a ON a.Z_PK = j.Z_1ASSETS "
                          + "ORDER BY j.Z_FOK_1ASSETS")
        }
        XCTAssertEqual(try stored(), ["Cecilia", "America", "Boxer", "|", "Cecilia", "America", "Boxer"])

        func open(_ model: ManagedObjectModel) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            return (coordinator, ManagedObjectContext(coordinator: coordinator))
        }
        func titles(_ context: ManagedObjectContext, _ entity: String, _ key: String) throws -> [String] {
            let owner = try XCTUnwrap(try context.objects(entity).first)
            return try context.relatedObjects(owner, key).compactMap { $0["title"] as? String }
        }
        // Core Data spaces its order values and they need not follow the rows' keys.
        _ = try sqlite3(url, "UPDATE ZSONG SET Z_FOK_PLAYLIST = 4096 - 1024 * Z_PK; "
                            + "UPDATE Z_2ASSETS SET Z_FOK_1ASSETS = 4096 - 1024 * Z_1ASSETS")
        var (coordinator, context) = try open(model)
        XCTAssertEqual(try titles(context, "Playlist", "songs"), ["Boxer", "America", "Cecilia"])
        XCTAssertEqual(try titles(context, "PhotoAlbum", "assets"), ["Boxer", "America", "Cecilia"])

        // Reordered whole, then grown by a context that read no member.
        let playlist = try XCTUnwrap(try context.objects("Playlist").first)
        let songs = try context.relatedObjects(playlist, "songs")
        playlist["songs"] = [songs[1], songs[2], songs[0]]
        let album = try XCTUnwrap(try context.objects("PhotoAlbum").first)
        let assets = try context.relatedObjects(album, "assets")
        album["assets"] = [assets[2], assets[0], assets[1]]
        try context.save()
        try coordinator.close()
        XCTAssertEqual(try stored(), ["America", "Cecilia", "Boxer", "|", "Cecilia", "Boxer", "America"])
        (coordinator, context) = try open(model)
        let song = context.insertNewObject(forEntityName: "Song")
        song["title"] = "Kathy"
        song["playlist"] = try XCTUnwrap(try context.objects("Playlist").first)
        try context.save()
        try coordinator.close()
        XCTAssertEqual(try stored(), ["America", "Cecilia", "Boxer", "Kathy", "|", "Cecilia", "Boxer", "America"])

        // A lightweight migration keeps both orders.
        (coordinator, context) = try openMigrating(url, ModelVersions(versions: [model], current: try orderedModel("V2", pinned: true)))
        XCTAssertEqual(try titles(context, "Playlist", "songs"), ["America", "Cecilia", "Boxer", "Kathy"])
        XCTAssertEqual(try titles(context, "PhotoAlbum", "assets"), ["Cecilia", "Boxer", "America"])
        try coordinator.close()
        XCTAssertEqual(try stored(), ["America", "Cecilia", "Boxer", "Kathy", "|", "Cecilia", "Boxer", "America"])
    }

    /// Reminders' own store has `ZPARENTLIST, ZPARENTLIST1, Z_FOK_PARENTLIST, Z_FOK_PARENTLIST1`
    /// in one table: two sibling sub-entities each with a to-one `parentList` whose inverse is
    /// ordered. The numbered key column carries a numbered order column.
    func testSiblingToOnesWithOrderedInversesGetNumberedKeyAndOrderColumns() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="BaseList" isAbstract="YES"><attribute name="name" optional="YES" attributeType="String"/></entity>
            <entity name="Group" parentEntity="BaseList">
              <relationship name="lists" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="TaskList" inverseName="parentList" inverseEntity="TaskList"/>
              <relationship name="smartLists" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="SmartList" inverseName="parentList" inverseEntity="SmartList"/></entity>
            <entity name="SmartList" parentEntity="BaseList">
              <relationship name="parentList" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Group" inverseName="smartLists" inverseEntity="Group"/></entity>
            <entity name="TaskList" parentEntity="BaseList">
              <relationship name="parentList" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Group" inverseName="lists" inverseEntity="Group"/></entity>
            </model>
            """
        let model = try ManagedObjectModel(
            xcdatamodeldFiles: ["Lists.xcdatamodel/contents": Data(xml.utf8)], modelName: "Lists.xcdatamodeld")
        let url = try makeStore(model) { context in
            let group = context.insertNewObject(forEntityName: "Group")
            group["name"] = "Home"
            for name in ["Groceries", "Chores"] {
                let list = context.insertNewObject(forEntityName: "TaskList")
                list["name"] = name
                group.add(list, toRelationship: "lists")
            }
            let smart = context.insertNewObject(forEntityName: "SmartList")
            smart["name"] = "Today"
            group.add(smart, toRelationship: "smartLists")
        }
        XCTAssertEqual(try sqlite3(url, "SELECT name FROM pragma_table_info('ZBASELIST') WHERE name LIKE '%PARENTLIST%' "
                                    + "ORDER BY name"),
                       ["ZPARENTLIST", "ZPARENTLIST1", "Z_FOK_PARENTLIST", "Z_FOK_PARENTLIST1"])
        // SmartList (entity 3) comes before TaskList (4): it keeps the plain names.
        let group = try sqlite3(url, "SELECT Z_PK FROM ZBASELIST WHERE ZNAME = 'Home'")[0]
        XCTAssertEqual(try sqlite3(url, "SELECT ZNAME, ZPARENTLIST, Z_FOK_PARENTLIST, ZPARENTLIST1, Z_FOK_PARENTLIST1 "
                                    + "FROM ZBASELIST WHERE ZNAME <> 'Home' ORDER BY ZNAME"),
                       ["Chores|||\(group)|2", "Groceries|||\(group)|1", "Today|\(group)|1||"])
    }

    /// Every kind of store keeps an ordered relationship's order across contexts and saves.
    func testEveryStoreTypeKeepsTheOrderOfAnOrderedRelationship() throws {
        let model = try orderedModel("V1")
        for type in [StoreType.sqlite, .inMemory, .binary, .xml] {
            let url = directory.appendingPathComponent("ordered-\(type.rawValue)")
            var coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: type, at: url)
            let writer = ManagedObjectContext(coordinator: coordinator)
            let playlist = writer.insertNewObject(forEntityName: "Playlist")
            for title in ["Cecilia", "America", "Boxer"] {
                let song = writer.insertNewObject(forEntityName: "Song")
                song["title"] = title
                playlist.add(song, toRelationship: "songs")
            }
            try writer.save()
            func titles() throws -> [String] {
                let reader = ManagedObjectContext(coordinator: coordinator)
                let owner = try XCTUnwrap(try reader.objects("Playlist").first)
                return try reader.relatedObjects(owner, "songs").compactMap { $0["title"] as? String }
            }
            XCTAssertEqual(try titles(), ["Cecilia", "America", "Boxer"], type.rawValue)
            let songs = try writer.relatedObjects(playlist, "songs")
            playlist["songs"] = [songs[2], songs[0], songs[1]]
            try writer.save()
            XCTAssertEqual(try titles(), ["Boxer", "Cecilia", "America"], type.rawValue)
            guard type != .inMemory else { continue }
            try coordinator.close()
            coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: type, at: url)
            XCTAssertEqual(try titles(), ["Boxer", "Cecilia", "America"], "\(type.rawValue), reopened")
            try coordinator.close()
        }
    }

    /// A store with an ordered to-many relationship (Core Data's `Z_FOK_` order columns) is
    /// refused naming the relationship and its order column, not as an unknown entity.
    func testAnOrderColumnIsNamedAsTheOrderOfAnOrderedRelationship() throws {
        let store = try fixtureCopy("wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        _ = try sqlite3(store, "ALTER TABLE ZSECTION ADD COLUMN Z_FOK_POST INTEGER")
        let model = Self.coreData.appendingPathComponent(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel")
        let result = try runTool("dump", "--model", model.path, store.path)
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertTrue(result.stderr.contains("Section.post: column Z_FOK_POST of ZSECTION keeps the order of an "
                                             + "ordered to-many relationship, but the model's relationship is not "
                                             + "ordered"), result.stderr)
        XCTAssertFalse(result.stderr.contains("is in the store but not in the model"), result.stderr)
    }

    // MARK: - Never a silent wrong answer

    func testAStoreThatFitsSeveralVersionsIsRefusedNamingThem() throws {
        // Two versions that lay out the same tables: which one made the store cannot be told.
        let source = Self.coreData.appendingPathComponent(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example.xcdatamodel")
        let bundle = directory.appendingPathComponent("Twins.xcdatamodeld")
        for name in ["Twin", "Twin 2"] {
            try FileManager.default.createDirectory(
                at: bundle.appendingPathComponent("\(name).xcdatamodel"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: source.appendingPathComponent("contents"),
                to: bundle.appendingPathComponent("\(name).xcdatamodel/contents"))
        }
        let plist = try PropertyListSerialization.data(
            fromPropertyList: ["_XCCurrentVersionName": "Twin 2.xcdatamodel"], format: .xml, options: 0)
        try plist.write(to: bundle.appendingPathComponent(".xccurrentversion"))
        let store = try fixtureCopy("wibosco-migration-example/CoreDataMigration_Example_1.sqlite")
        let result = try runTool("dump", "--model", bundle.path, store.path)
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(result.stderr.contains("fits several versions of the model ('Twin', 'Twin 2')"), result.stderr)
    }

    func testAStoreThatFitsNoVersionIsRefusedNamingHowItDiffersFromTheClosest() throws {
        let store = try fixtureCopy("wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        _ = try sqlite3(store, "ALTER TABLE ZPOST ADD COLUMN ZSUBTITLE VARCHAR")
        let model = Self.coreData.appendingPathComponent(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld").path
        let result = try runTool("dump", "--model", model, store.path)
        XCTAssertEqual(result.status, 65, result.stderr)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(result.stderr.contains("against the closest, 'CoreDataMigration_Example 3':"), result.stderr)
        XCTAssertTrue(result.stderr.contains("Post.subtitle is in the store (column ZSUBTITLE of ZPOST) but not in "
                                             + "the model"), result.stderr)
    }

    func testAMigrationThatWouldLeaveATableUnreadIsRefusedAndChangesNothing() throws {
        let v1 = try model("V1", [EntityDescription(name: "Note", attributes: [
            AttributeDescription(name: "title", type: .string)])])
        let v2 = try model("V2", [EntityDescription(name: "Note", attributes: [
            AttributeDescription(name: "title", type: .string), AttributeDescription(name: "pinned", type: .boolean)])])
        let url = try makeStore(v1) { context in
            context.insertNewObject(forEntityName: "Note")["title"] = "groceries"
        }
        // A table of someone else's (a join table named after a side this model does not pick).
        _ = try sqlite3(url, "CREATE TABLE Z_1LINKS (Z_1NOTES INTEGER, Z_1LINKS INTEGER); "
                            + "INSERT INTO Z_1LINKS VALUES (1, 1)")
        let before = try sqlite3(url, "SELECT name, sql FROM sqlite_master ORDER BY name")
        XCTAssertThrowsError(try openMigrating(url, ModelVersions(versions: [v1], current: v2))) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .migrationFailed)
            XCTAssertTrue(error?.message.contains("would leave table Z_1LINKS unread") == true, "\(String(describing: error))")
        }
        XCTAssertEqual(try sqlite3(url, "SELECT name, sql FROM sqlite_master ORDER BY name"), before)
        XCTAssertEqual(try sqlite3(url, "SELECT * FROM Z_1LINKS"), ["1|1"])
        XCTAssertEqual(try sqlite3(url, "SELECT ZTITLE FROM ZNOTE"), ["groceries"])
    }

    /// Random tables and columns added, renamed and dropped on copies of real stores: `dump`
    /// with the version that made the store either prints exactly what it printed for the
    /// untouched store (the change touched nothing it reads) or fails with exit 65.
    func testFuzzedLayoutsOfRealStoresGiveExit65OrExactlyTheOriginalData() throws {
        var cases: [(store: String, model: String)] = [
            ("wibosco-migration-example/CoreDataMigration_Example_1.sqlite",
             "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example.xcdatamodel"),
            ("wibosco-migration-example/CoreDataMigration_Example_3.sqlite",
             "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example 3.xcdatamodel"),
            ("bnr-coredatastack/TestModel.sqlite", "bnr-coredatastack/Sample.xcdatamodeld/TestModel.xcdatamodel"),
            ("coredataplus-samplemodel/SampleModel_V2.sqlite",
             "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel2.xcdatamodel"),
        ]
        if FileManager.default.fileExists(atPath: Self.coreData.appendingPathComponent("easylife-todo").path) {
            cases.append(("easylife-todo/EasyLife 1.5.0.sqlite",
                          "easylife-todo/EasyLife.xcdatamodeld/EasyLife 1.5.0.xcdatamodel"))
        }
        var generator = SplitMix64(seed: 0x21_0002)
        var outcomes: [String: Int] = [:]
        for (index, pair) in cases.enumerated() {
            let model = Self.coreData.appendingPathComponent(pair.model).path
            let pristine = try runTool("dump", "--model", model, try fixtureCopy(pair.store).path)
            XCTAssertEqual(pristine.status, 0, "\(pair.store): \(pristine.stderr)")
            for round in 0..<12 {
                let store = try fixtureCopy(pair.store, as: "fuzz-\(index)-\(round).sqlite")
                let change = try mutate(store, using: &generator)
                let result = try runTool("dump", "--model", model, store.path)
                let place = "\(pair.store) after \(change)"
                switch result.status {
                case 0:
                    XCTAssertEqual(result.stdout, pristine.stdout, "wrong data with exit 0: \(place)")
                    outcomes["exact", default: 0] += 1
                case 65:
                    XCTAssertTrue(result.stderr.hasPrefix("Error: "), "\(place): \(result.stderr)")
                    outcomes["refused", default: 0] += 1
                default:
                    XCTFail("\(place): exit \(result.status): \(result.stderr)")
                }
            }
        }
        // Both outcomes occur, so the comparison above was exercised both ways.
        XCTAssertGreaterThan(outcomes["exact"] ?? 0, 0, "\(outcomes)")
        XCTAssertGreaterThan(outcomes["refused"] ?? 0, 0, "\(outcomes)")
        print("fuzzed layouts: \(outcomes)")
    }

    // MARK: - Helpers

    /// One random change to the layout of the store at `url`, described.
    private func mutate(_ url: URL, using generator: inout SplitMix64) throws -> String {
        let tables = try sqlite3(url, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        let table = tables.randomElement(using: &generator) ?? "Z_METADATA"
        let columns = try sqlite3(url, "SELECT name FROM pragma_table_info('\(table)')")
        let column = columns.randomElement(using: &generator) ?? "Z_PK"
        let fresh = "Z" + String((0..<6).map { _ in "ABCDEFGHIJKLMNOPQRSTUVWXYZ".randomElement(using: &generator)! })
        let changes = [
            "CREATE TABLE \(fresh) (Z_PK INTEGER PRIMARY KEY, ZVALUE VARCHAR); INSERT INTO \(fresh) VALUES (1, 'x')",
            "CREATE TABLE Z_1\(fresh.dropFirst()) (Z_1A INTEGER, Z_2B INTEGER)",
            "ALTER TABLE \(table) ADD COLUMN \(fresh) INTEGER",
            "ALTER TABLE \(table) RENAME COLUMN \(column) TO \(fresh)",
            "ALTER TABLE \(table) DROP COLUMN \(column)",
            "ALTER TABLE \(table) RENAME TO \(fresh)",
            "DROP TABLE \(table)",
            "CREATE TABLE fuzz\(fresh) (a, b)",
        ]
        // A change SQLite refuses (dropping a key column) is replaced by adding a table.
        for change in [changes.randomElement(using: &generator)!, changes[0]] {
            if (try? sqlite3Checked(url, change)) != nil { return change }
        }
        return "nothing"
    }

    private func sqlite3Checked(_ url: URL, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [url.path, sql]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown) }
    }

    private func fixtureCopy(_ path: String, as name: String? = nil) throws -> URL {
        let url = directory.appendingPathComponent(name ?? UUID().uuidString + ".sqlite")
        try FileManager.default.copyItem(at: Self.coreData.appendingPathComponent(path), to: url)
        return url
    }

    /// A fixture folder taken from a public repository (see Fixtures/CoreData/README.md).
    private func publicFixture(_ name: String) throws -> URL {
        let url = Self.coreData.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw XCTSkip("Fixtures/CoreData/\(name) is not in this checkout (see the README's list)")
        }
        return url
    }

    private func runTool(_ arguments: String...) throws -> ObjectGraphCLITests.Run {
        try ObjectGraphCLITests.run(arguments, in: directory)
    }
}
