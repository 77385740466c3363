import Foundation
import TestSupport
import XCTest

@testable import ObjectGraph

/// Core Data's value formats: keyed archives for Transformable attributes (archives written
/// independently of Foundation by Fixtures/KeyedArchives/make-archives.py), exact decimals,
/// and errors that name the store, entity, attribute and row of a value that cannot be read.
final class ValueFormatTests: ObjectGraphTestCase {
    static var archivesURL: URL { fixturesURL.appendingPathComponent("KeyedArchives") }

    func itemModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(
                name: "Item",
                attributes: [
                    AttributeDescription(
                        name: "secure", type: .transformable, valueTransformerName: "NSSecureUnarchiveFromData"),
                    AttributeDescription(
                        name: "keyed", type: .transformable, valueTransformerName: "NSKeyedUnarchiveFromData"),
                    AttributeDescription(name: "plain", type: .transformable),
                    AttributeDescription(name: "price", type: .decimal),
                    AttributeDescription(name: "id", type: .uuid),
                    AttributeDescription(name: "link", type: .uri),
                    AttributeDescription(name: "when", type: .date),
                ])
        ])
    }

    /// A store at `url` with `count` empty Items (primary keys 1...count).
    func makeItemStore(_ url: URL, count: Int) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try itemModel())
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        for _ in 0..<count { context.insertNewObject(forEntityName: "Item") }
        try context.save()
        try coordinator.close()
    }

    func openItems(_ url: URL) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try itemModel())
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return (coordinator, ManagedObjectContext(coordinator: coordinator))
    }

    func sqlite3(_ url: URL, _ sql: String) throws -> String {
        String(decoding: try runSQLite3([url.path, sql]), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    func expectedValues() throws -> [(name: String, tagged: [Any])] {
        let data = try Data(contentsOf: Self.archivesURL.appendingPathComponent("expected.json"))
        let cases = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: [Any]])
        return cases.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    func testKeyedArchivesReadThroughEveryCoreDataTransformerName() throws {
        let cases = try expectedValues()
        let url = directory.appendingPathComponent("items.sqlite")
        try makeItemStore(url, count: cases.count)
        for (offset, (name, _)) in cases.enumerated() {
            let bytes = hex(try Data(contentsOf: Self.archivesURL.appendingPathComponent("\(name).archive")))
            _ = try sqlite3(
                url,
                "UPDATE ZITEM SET ZSECURE = X'\(bytes)', ZKEYED = X'\(bytes)', ZPLAIN = X'\(bytes)' "
                    + "WHERE Z_PK = \(offset + 1)"
            )
        }
        let (_, context) = try openItems(url)
        for (offset, (name, tagged)) in cases.enumerated() {
            let item = try XCTUnwrap(try context.existingObject(entityName: "Item", primaryKey: Int64(offset + 1)))
            for key in ["secure", "keyed", "plain"] {
                XCTAssertTrue(matches(item[key], tagged), "\(name) via \(key): \(String(describing: item[key]))")
            }
        }
    }

    func testValuesWrittenAsKeyedArchivesReadBackEqual() throws {
        let cases = try expectedValues()
        let url = directory.appendingPathComponent("written.sqlite")
        do {
            let (coordinator, context) = try openItems(url)
            for (_, tagged) in cases {
                let item = context.insertNewObject(forEntityName: "Item")
                item["secure"] = swiftValue(tagged)
                item["keyed"] = swiftValue(tagged)
            }
            try context.save()
            try coordinator.close()
        }
        // What is stored is a keyed archive, as Core Data's transformers expect.
        for line in try sqlite3(url, "SELECT hex(ZSECURE) FROM ZITEM ORDER BY Z_PK").split(separator: "\n") {
            let plist =
                try PropertyListSerialization.propertyList(from: dataFromHex(String(line)), format: nil)
                as? [String: Any]
            XCTAssertEqual(plist?["$archiver"] as? String, "NSKeyedArchiver")
        }
        let (_, context) = try openItems(url)
        for (offset, (name, tagged)) in cases.enumerated() {
            let item = try XCTUnwrap(try context.existingObject(entityName: "Item", primaryKey: Int64(offset + 1)))
            XCTAssertTrue(matches(item["secure"], tagged), "\(name): \(String(describing: item["secure"]))")
            XCTAssertTrue(matches(item["keyed"], tagged), "\(name): \(String(describing: item["keyed"]))")
        }
    }

    /// Mutated archives are refused with an error or read; none may crash the process
    /// (swift-corelibs-foundation traps on some malformed archives when given them unchecked).
    func testDamagedKeyedArchivesNeverCrash() throws {
        let names = try expectedValues().map(\.name)
        let archives = try names.map { try Data(contentsOf: Self.archivesURL.appendingPathComponent("\($0).archive")) }
        let cases = Int(ProcessInfo.processInfo.environment["OG_ARCHIVE_FUZZ_CASES"] ?? "") ?? 1500
        var random = SplitMix64(
            seed: UInt64(ProcessInfo.processInfo.environment["OG_ARCHIVE_FUZZ_SEED"] ?? "") ?? 0x5EED)
        let keyed = KeyedArchiveTransformer()
        let plain = PropertyListTransformer()
        let place = ValuePlace(storeIdentifier: "fuzz", entityName: "Item", attributeName: "secure", primaryKey: 1)
        var refused = 0
        for _ in 0..<cases {
            var bytes = [UInt8](archives[Int(random.next() % UInt64(archives.count))])
            for _ in 0...(random.next() % 4) {
                bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: random.next())
            }
            if random.next() % 8 == 0 { bytes.removeLast(Int(random.next() % UInt64(bytes.count))) }
            do { _ = try keyed.reverseTransformedValue(Data(bytes), at: place) } catch { refused += 1 }
            _ = try? plain.reverseTransformedValue(Data(bytes), at: place)
            _ = try? BinaryPropertyList.foundationPropertyList(from: Data(bytes))
        }
        XCTAssertGreaterThan(refused, cases / 2)
        print("keyed archives: \(cases) damaged archives decoded without a crash, \(refused) refused with an error")
    }

    func testDecimalsAreExactAndCoreDataRealsReadAsTheirDecimal() throws {
        let url = directory.appendingPathComponent("decimals.sqlite")
        let values = ["12345678901234567890.123456789", "0.1", "-3.14159265358979323846264338", "1e-30", "100"]
        do {
            let (coordinator, context) = try openItems(url)
            for text in values { context.insertNewObject(forEntityName: "Item")["price"] = Decimal(string: text) }
            try context.save()
            try coordinator.close()
        }
        // Core Data writes a Decimal as a REAL: one written so by sqlite3 reads as the decimal written.
        _ = try sqlite3(url, "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZPRICE) VALUES (99, 1, 1, 0.3)")
        let (_, context) = try openItems(url)
        for (offset, text) in values.enumerated() {
            let item = try XCTUnwrap(try context.existingObject(entityName: "Item", primaryKey: Int64(offset + 1)))
            XCTAssertEqual(item["price"] as? Decimal, Decimal(string: text), text)
        }
        XCTAssertEqual(
            try context.existingObject(entityName: "Item", primaryKey: 99)?["price"] as? Decimal,
            Decimal(string: "0.3"))
        // A decimal SQLite's NUMERIC affinity would round is kept as text in a BLOB.
        XCTAssertEqual(try sqlite3(url, "SELECT typeof(ZPRICE) FROM ZITEM WHERE Z_PK = 1"), "blob")
        XCTAssertEqual(try sqlite3(url, "SELECT typeof(ZPRICE) FROM ZITEM WHERE Z_PK = 2"), "real")
    }

    func testAValueThatCannotBeReadNamesStoreEntityAttributeAndRow() throws {
        let url = directory.appendingPathComponent("damaged.sqlite")
        try makeItemStore(url, count: 3)
        _ = try sqlite3(url, "UPDATE ZITEM SET ZID = X'00112233445566778899AABBCCDDEE' WHERE Z_PK = 2")
        _ = try sqlite3(url, "UPDATE ZITEM SET ZSECURE = X'0102030405' WHERE Z_PK = 3")
        let (_, context) = try openItems(url)
        XCTAssertThrowsError(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .undecodableValue)
            XCTAssertEqual(
                error?.message.contains("Item.id of row 2 in store 'damaged.sqlite'"), true, error?.message ?? "")
            XCTAssertEqual(error?.message.contains("15-byte BLOB"), true, error?.message ?? "")
        }
        _ = try sqlite3(url, "UPDATE ZITEM SET ZID = NULL WHERE Z_PK = 2")
        let (_, fresh) = try openItems(url)
        XCTAssertThrowsError(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Item"))) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .undecodableValue)
            XCTAssertEqual(
                error?.message.contains("Item.secure of row 3 in store 'damaged.sqlite'"), true, error?.message ?? "")
        }
    }

    // MARK: - Tagged expected values (see make-archives.py)

    func swiftValue(_ tagged: [Any]) -> Any {
        let payload = tagged[1]
        switch tagged[0] as? String {
        case "int": return (payload as? NSNumber)?.intValue ?? 0
        case "real": return (payload as? NSNumber)?.doubleValue ?? 0
        case "bool": return (payload as? NSNumber)?.boolValue ?? false
        case "data", "mutabledata": return dataFromHex(payload as? String ?? "")
        case "date": return Date(timeIntervalSinceReferenceDate: (payload as? NSNumber)?.doubleValue ?? 0)
        case "url": return URL(string: payload as? String ?? "") as Any
        case "uuid": return UUID(uuidString: payload as? String ?? "") as Any
        case "array": return (payload as? [[Any]] ?? []).map(swiftValue)
        case "dictionary": return (payload as? [String: [Any]] ?? [:]).mapValues(swiftValue)
        default: return payload as? String ?? ""
        }
    }

    func matches(_ value: Any?, _ tagged: [Any]) -> Bool {
        let expected = swiftValue(tagged)
        switch (value, expected) {
        case (let value as String, let expected as String): return value == expected
        case (let value as Bool, let expected as Bool): return value == expected && tagged[0] as? String == "bool"
        case (let value as Int, let expected as Int): return value == expected
        case (let value as Double, let expected as Double): return value == expected
        case (let value as Data, let expected as Data): return value == expected
        case (let value as Date, let expected as Date): return value == expected
        case (let value as URL, let expected as URL): return value.absoluteString == expected.absoluteString
        case (let value as UUID, let expected as UUID): return value == expected
        case (let value as [Any], _):
            let elements = tagged[1] as? [[Any]] ?? []
            return value.count == elements.count && zip(value, elements).allSatisfy { matches($0, $1) }
        case (let value as [String: Any], _):
            let entries = tagged[1] as? [String: [Any]] ?? [:]
            return Set(value.keys) == Set(entries.keys) && entries.allSatisfy { matches(value[$0.key], $0.value) }
        default: return false
        }
    }
}


func dataFromHex(_ text: String) -> Data {
    var data = Data()
    var index = text.startIndex
    while index < text.endIndex, let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex) {
        if let byte = UInt8(text[index..<next], radix: 16) { data.append(byte) }
        index = next
    }
    return data
}
