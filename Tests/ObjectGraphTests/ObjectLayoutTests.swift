import Foundation
import XCTest
@testable import ObjectGraph

/// glibc's, from `<malloc.h>`, which Swift's Glibc module does not bring.
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int

/// An object keeps its entity in its ID scope, its ID's number, row version, pending key and flags
/// in one word, and its values with what it tracks in another: three words, malloc's 48-byte
/// chunks, where it took 64 (16 bytes of every object fetched or inserted).
final class ObjectLayoutTests: BoardTestCase {
    /// The smallest chunk of each kind of object: malloc may hand out a larger free chunk than
    /// asked for, never a smaller one.
    func testAnObjectFitsInFortyEightBytes() throws {
        let context = try makeBoard(.sqlite, name: "layout")
        let saved = (0..<50).map { number in
            let object = context.insertNewObject(forEntityName: "Item")
            object["name"] = "item \(number)"
            return object
        }
        try context.save()
        let inserted = (0..<50).map { _ in context.insertNewObject(forEntityName: "Item") }
        let fetched = try ManagedObjectContext(coordinator: context.coordinator)
            .fetch(FetchRequest<ManagedObject>(entityName: "Item"))
        for (kind, objects) in [("saved", saved), ("inserted", inserted), ("fetched", fetched)] {
            let smallest = objects.map { mallocUsableSize(Unmanaged.passUnretained($0).toOpaque()) }.min()
            XCTAssertLessThanOrEqual(try XCTUnwrap(smallest), 40, "\(kind): malloc's 48-byte chunk with its header")
        }
    }

    /// The version, the pending key and every flag in random orders, against plain variables.
    func testTheSharedWordKeepsEachPartApart() throws {
        let entity = EntityDescription(name: "Thing", attributes: [AttributeDescription(name: "n", type: .integer64)])
        _ = try ManagedObjectModel(entities: [entity])
        let object = ManagedObject(entity: entity)
        var generator = SystemRandomNumberGenerator()
        var version: Int64 = 0, pendingKey: Int64?, isFault = false, isPendingInsert = false
        var isPrepared = false, hasJoined = false, memberships: ObjectSet.Membership = []
        var objectID = object.objectID
        let largest = ManagedObject.largestRowNumber
        // Both ends of what the shared word holds in place, and of what it holds at all.
        let edges: [Int64] = [-largest - 1, -largest, -1, 0, 1, 2, 1 << 23 - 1, 1 << 23, 1 << 29 - 2, 1 << 29 - 1,
                              1 << 29, largest - 1, largest]
        for step in 0..<20_000 {
            let number = switch Int.random(in: 0..<3, using: &generator) {
            case 0: edges.randomElement(using: &generator)!
            case 1: Int64.random(in: 0..<1 << 31, using: &generator)
            default: Int64.random(in: -largest - 1...largest, using: &generator)
            }
            switch Int.random(in: 0..<8, using: &generator) {
            case 0 where step % 2 == 0:
                // The ID's number shares the word: a key or a temporary number, in range or not.
                let identity = Bool.random(using: &generator)
                    ? ObjectID(entityName: "Thing", storeIdentifier: "S", primaryKey: number & Int64.max,
                               temporaryNumber: nil)
                    : ObjectID(entityName: "Thing", storeIdentifier: nil, primaryKey: nil,
                               temporaryNumber: Int(number & Int64.max))
                (object.pendingPrimaryKey, pendingKey, version) = (nil, nil, 0)
                (object.objectID, objectID) = (identity, identity)
            case 0: (object.version, version, pendingKey) = (number, number, nil)
            case 1:
                // A permanent ID's pending key is its own.
                let key = objectID.primaryKey ?? number & largest
                (object.pendingPrimaryKey, pendingKey) = (key, key)
            case 2: (object.pendingPrimaryKey, pendingKey, version) = (nil, nil, 0)  // the word held no version
            case 3: isFault.toggle(); object.isFault = isFault
            case 4: isPendingInsert.toggle(); object.isPendingInsert = isPendingInsert
            case 5: isPrepared.toggle(); object.isPreparedForDeletion = isPrepared
            case 6: hasJoined.toggle(); object.hasJoinedToMany = hasJoined
            default:
                memberships = ObjectSet.Membership(rawValue: UInt8.random(in: 0...0x3F, using: &generator))
                object.memberships = memberships
            }
            if pendingKey != nil { version = 0 }
            XCTAssertEqual(object.version, version, "step \(step)")
            XCTAssertEqual(object.pendingPrimaryKey, pendingKey, "step \(step)")
            XCTAssertEqual(object.isFault, isFault, "step \(step)")
            XCTAssertEqual(object.isPendingInsert, isPendingInsert, "step \(step)")
            XCTAssertEqual(object.isPreparedForDeletion, isPrepared, "step \(step)")
            XCTAssertEqual(object.hasJoinedToMany, hasJoined, "step \(step)")
            XCTAssertEqual(object.memberships, memberships, "step \(step)")
            XCTAssertEqual(object.objectID, objectID, "step \(step)")
            XCTAssertEqual(object.objectID.primaryKey, objectID.primaryKey, "step \(step)")
            XCTAssertTrue(object.entity === entity)
            if object.version != version { break }
        }
    }

    /// The values and what the object tracks in random orders, against plain variables: the
    /// committed values stay what was last given, whatever one buffer the object keeps for both.
    func testTheValuesAndWhatIsTrackedKeepEachPartApart() throws {
        let entity = EntityDescription(name: "Thing", attributes: [AttributeDescription(name: "n", type: .integer64)])
        _ = try ManagedObjectModel(entities: [entity])
        let object = ManagedObject(entity: entity)
        var generator = SystemRandomNumberGenerator()
        var values: Int?, committed: Int?, committedUnwritten = true
        var loaded: Set<String> = [], changed: Set<String> = []
        let place = ValuePlace(attribute: .init(storeIdentifier: "S", entityName: "Thing", attributeName: "n"),
                               primaryKey: 1)
        for step in 0..<20_000 {
            let number = Int.random(in: 0..<4, using: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0: (object.values["n"], values) = (number, number)
            case 1: (object.committedValues["n"], committed, committedUnwritten) = (number, number, false)
            case 2:
                (object.committedValues, committed) = (object.values, values)
                committedUnwritten = object.values.isUnwritten
            case 3: (object.committedValues, committed, committedUnwritten) = (PropertyValues(), nil, true)
            case 4:
                var stored = PropertyValues(layout: entity.propertyLayout)
                stored["n"] = number
                object.setStoredValues(stored)
                (values, committed, committedUnwritten) = (number, number, false)
            case 5:
                // As a read decodes a value: in the committed values too when they hold it encoded.
                let encoded = EncodedValue(data: Data([UInt8(number)]), place: place)
                if Bool.random(using: &generator) {
                    object.values["n"] = encoded
                } else {
                    var stored = PropertyValues(layout: entity.propertyLayout)
                    stored["n"] = encoded
                    object.setStoredValues(stored)
                    (committed, committedUnwritten) = (number, false)
                }
                object.replaceEncoded("n", with: number)
                values = number
            case 6: (object.values, values) = (object.committedValues, committed)
            case 7:
                let key = ["a", "b"].randomElement(using: &generator)!
                if loaded.remove(key) == nil { loaded.insert(key) }
                object.loadedToMany = loaded
            case 8:
                let key = ["a", "b"].randomElement(using: &generator)!
                if changed.remove(key) == nil { changed.insert(key) }
                object.changedKeys.formSymmetricDifference([key])
            default:
                let version = Int64.random(in: 0..<1 << 24, using: &generator)
                object.version = version
                XCTAssertEqual(object.version, version, "step \(step)")
            }
            XCTAssertEqual(object.values["n"] as? Int, values, "step \(step)")
            XCTAssertEqual(object.committedValues["n"] as? Int, committed, "step \(step)")
            XCTAssertEqual(object.committedValues.isUnwritten, committedUnwritten, "step \(step)")
            XCTAssertEqual(object.loadedToMany, loaded, "step \(step)")
            XCTAssertEqual(object.changedKeys, changed, "step \(step)")
            if object.values["n"] as? Int != values { break }
        }
    }

    /// Two models with an entity of one name: objects outside any context share no scope that
    /// would give one of them the other's entity.
    func testObjectsOfSameNamedEntitiesKeepTheirOwn() throws {
        let first = EntityDescription(name: "Thing", attributes: [AttributeDescription(name: "a", type: .string)])
        let second = EntityDescription(name: "Thing", attributes: [AttributeDescription(name: "b", type: .integer64)])
        _ = try ManagedObjectModel(entities: [first])
        _ = try ManagedObjectModel(entities: [second])
        let one = ManagedObject(entity: first)
        let other = ManagedObject(entity: second)
        XCTAssertTrue(one.entity === first)
        XCTAssertTrue(other.entity === second)
        XCTAssertEqual(one.objectID, other.objectID, "IDs compare by entity name, as before")
        one["a"] = "text"
        other["b"] = 7
        XCTAssertEqual(one["a"] as? String, "text")
        XCTAssertEqual(other["b"] as? Int, 7)
    }

    /// A deleted object leaves its context with its entity; a fetched sub-entity object keeps
    /// its own entity, not its root's.
    func testAnObjectKeepsItsEntityThroughItsLife() throws {
        let context = try makeBoard(.sqlite, name: "life")
        let item = context.insertNewObject(forEntityName: "Item")
        item["name"] = "a"
        let entity = item.entity
        try context.save()
        XCTAssertTrue(item.entity === entity)
        context.delete(item)
        try context.save()
        XCTAssertNil(item.managedObjectContext)
        XCTAssertTrue(item.entity === entity)
        XCTAssertEqual(item.entity.name, "Item")
    }

    private func itemStore(after sql: String) throws -> (URL, ManagedObjectContext) {
        let context = try makeBoard(.sqlite, name: "bounds")
        context.insertNewObject(forEntityName: "Item")["name"] = "a"
        try context.save()
        let url = directory.appendingPathComponent("bounds.sqlite")
        _ = try runSQLite3([url.path, sql])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: context.model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return (url, ManagedObjectContext(coordinator: coordinator))
    }

    /// A row version an object keeps is written back as it was read, a negative one too.
    func testANegativeRowVersionIsKeptAsItIs() throws {
        for stored in [Int64(-1), ManagedObject.rowVersions.lowerBound] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent("bounds.sqlite"))
            let (url, context) = try itemStore(after: "UPDATE ZITEM SET Z_OPT = \(stored)")
            let item = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).first)
            item["name"] = "b"
            try context.save()
            let row = try runSQLite3([url.path, "SELECT Z_OPT || ' ' || ZNAME FROM ZITEM"])
            XCTAssertEqual(String(decoding: row, as: UTF8.self), "\(stored + 1) b\n")
        }
    }

    /// A row version out of what an object keeps (only a damaged store has one) still reads,
    /// and an update of the row is refused under every merge policy, never retried for ever nor
    /// written over another version; a policy that overwrites may still delete the row.
    func testARowVersionOutOfRangeReadsAndIsNeverUpdated() throws {
        let largest = ManagedObject.largestRowNumber
        let policies: [MergePolicy] = [.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite,
                                       .rollback]
        for stored in ["\(largest)", "\(largest + 1)", "9223372036854775807", "\(-largest - 2)",
                       "-9223372036854775808"] {
            for policy in policies {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent("bounds.sqlite"))
                let (url, context) = try itemStore(after: "UPDATE ZITEM SET Z_OPT = \(stored)")
                context.mergePolicy = policy
                let item = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).first)
                XCTAssertEqual(item["name"] as? String, "a", stored)
                item["name"] = "b"
                XCTAssertThrowsError(try context.save(), "\(stored) \(policy)") {
                    XCTAssertTrue("\($0)".contains("cannot grow"), "\($0)")
                }
                let row = try runSQLite3([url.path, "SELECT Z_OPT || ' ' || ZNAME FROM ZITEM"])
                XCTAssertEqual(String(decoding: row, as: UTF8.self), "\(stored) a\n", "\(stored) \(policy)")
                guard policy == .overwrite else { continue }
                context.rollback()
                context.delete(item)
                try context.save()
                XCTAssertEqual(try runSQLite3([url.path, "SELECT count(*) FROM ZITEM"]), Data("0\n".utf8))
            }
        }
    }

    /// New keys up to the largest an object keeps are given; beyond it, the save is refused.
    func testNewKeysStopAtTheLargestAnObjectKeeps() throws {
        let largest = ManagedObject.largestRowNumber
        let (_, context) = try itemStore(after: "UPDATE Z_PRIMARYKEY SET Z_MAX = \(largest - 1) WHERE Z_NAME = 'Item'")
        let last = context.insertNewObject(forEntityName: "Item")
        last["name"] = "last"
        try context.save()
        XCTAssertEqual(last.objectID.primaryKey, largest)
        context.insertNewObject(forEntityName: "Item")["name"] = "beyond"
        XCTAssertThrowsError(try context.save()) {
            XCTAssertTrue("\($0)".contains("no primary key is left to allocate"), "\($0)")
        }
        XCTAssertTrue(try context.coordinator.checkIntegrity().contains {
            $0.description.contains("no primary key is left to allocate")
        })
    }
}
