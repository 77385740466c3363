import Foundation
import XCTest
@testable import ObjectGraph

/// The packed value storage against a plain dictionary, over random sets, overwrites and
/// removals of every kind of value (small and extreme integers, reals, text, objects), in
/// word cells and in text cells (which turn the buffer plain when given something else).
final class PropertyValuesTests: XCTestCase {
    func testPackedValuesBehaveAsADictionary() {
        checkPackedValuesBehaveAsADictionary(textKeys: [])
    }

    func testPackedValuesWithTextCellsBehaveAsADictionary() {
        checkPackedValuesBehaveAsADictionary(textKeys: ["k0", "k1", "k4", "k7"])
    }

    private func checkPackedValuesBehaveAsADictionary(textKeys: Set<String>) {
        let keys = (0..<12).map { "k\($0)" }
        let layout = PropertyLayout(keys: Array(keys.prefix(8)), textKeys: textKeys)
        let object = ManagedObject(entity: EntityDescription(name: "Thing", attributes: []))
        // Each kind of word, and each value just inside and just outside what fits in one.
        let candidates: [Any?] = [nil, 0, 1, -1, Int.max, Int.min, Int.max >> 1, Int.min >> 1, (Int.max >> 1) + 1,
                                  (Int.min >> 1) - 1, 2.5, 0.1, -0.0, Double.greatestFiniteMagnitude, -Double.infinity,
                                  Double.leastNonzeroMagnitude, true, false, "text", "text longer than a small string",
                                  "", "é\u{0}ü", "text", "text longer than a small string",
                                  Data([1, 2]), object, ["a"],
                                  FaultReference(primaryKey: 7), FaultReference(primaryKey: Int64.max >> 4),
                                  FaultReference(primaryKey: (Int64.max >> 4) + 1), FaultReference(primaryKey: Int64.min),
                                  FaultReference(primaryKey: Int64.min >> 4)]
        var random = FetchPowerTests.Generator(state: 11)
        for trial in 0..<200 {
            var values = PropertyValues(layout: layout)
            var model: [String: Any] = [:]
            for _ in 0..<50 {
                let key = keys[random.next(keys.count)]
                let value = candidates[random.next(candidates.count)]
                values[key] = value
                model[key] = value
                let position = layout.index(of: key)
                if let position, random.next(2) == 0 { values[slot: position] = value }
            }
            if random.next(4) == 0 { values.removeAll(layout: layout); model = [:] }
            let copy = values
            values["k0"] = 42   // copy-on-write: the copy keeps its own value
            values["k1"] = "changed"
            for key in keys {
                XCTAssertEqual(copy[key].map { "\($0)" }, model[key].map { "\($0)" }, "trial \(trial) key \(key)")
            }
            XCTAssertEqual(Set(copy.map(\.key)), Set(model.keys), "trial \(trial)")
            XCTAssertEqual(copy.isEmpty, model.isEmpty)
            XCTAssertEqual(values["k0"] as? Int, 42)
            XCTAssertEqual(values["k1"] as? String, "changed")
            for key in keys.dropFirst(2) {
                XCTAssertEqual(values[key].map { "\($0)" }, model[key].map { "\($0)" }, "trial \(trial) key \(key)")
            }
        }
    }

    /// Objects and boxes held by values live exactly as long as some value holds them.
    func testReferencedValuesLiveAsLongAsAValueHoldsThem() {
        checkReferencedValuesLiveAsLongAsAValueHoldsThem(textKeys: [])
    }

    /// The same when the object and the box go into text cells, which turns the buffer plain.
    func testReferencedValuesInTextCellsLiveAsLongAsAValueHoldsThem() {
        checkReferencedValuesLiveAsLongAsAValueHoldsThem(textKeys: ["object", "box"])
    }

    private func checkReferencedValuesLiveAsLongAsAValueHoldsThem(textKeys: Set<String>) {
        final class Payload {}
        let layout = PropertyLayout(keys: ["object", "box", "wide"], textKeys: textKeys)
        weak var heldObject: ManagedObject?
        weak var heldPayload: Payload?
        var copy: PropertyValues?
        do {
            let object = ManagedObject(entity: EntityDescription(name: "Thing", attributes: []))
            let payload = Payload()
            (heldObject, heldPayload) = (object, payload)
            var values = PropertyValues(layout: layout)
            values["object"] = object
            values["box"] = payload
            values["wide"] = Int.max
            copy = values
            values["object"] = nil
            values.removeAll(layout: layout)
        }
        XCTAssertNotNil(heldObject, "the copy still holds the object")
        XCTAssertNotNil(heldPayload, "the copy still holds the box")
        XCTAssert(copy?["object"] as? ManagedObject === heldObject)
        XCTAssertEqual(copy?["wide"] as? Int, Int.max)
        copy?["box"] = 1
        XCTAssertNil(heldPayload, "overwriting the last value holding a box releases it")
        copy = nil
        XCTAssertNil(heldObject, "the last value holding an object releases it")
    }
}

/// Text held in text cells is released with the last value holding it: 2,000 values with 8 KB
/// of text each, copied, changed, cleared and dropped (24 MB at once), twice: the second round
/// reuses what the first freed, where a leak would add its 24 MB to the resident pages.
final class PropertyValuesTextLifetimeTests: XCTestCase {
    func testTextInCellsIsReleased() {
        let layout = PropertyLayout(keys: ["name", "note", "count"], textKeys: ["name", "note"])
        func residentBytes() -> Int {
            let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
            return (Int(statm.split(separator: " ")[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
        }
        func churn() {
            var kept: [PropertyValues] = []
            for number in 0..<2_000 {
                var values = PropertyValues(layout: layout)
                values["name"] = String(repeating: "n", count: 4_000) + "\(number)"
                values["note"] = String(repeating: "o", count: 4_000) + "\(number)"
                var copy = values
                copy["name"] = String(repeating: "c", count: 4_000) + "\(number)"
                if number % 3 == 0 { copy["note"] = Data([1]) }   // the copy turns plain
                if number % 5 == 0 { values.removeAll(layout: layout) }
                kept.append(values)
                kept.append(copy)
            }
            XCTAssertEqual((kept[2]["name"] as? String)?.suffix(1), "1")
        }
        churn()   // settles what the first use allocates once
        let before = residentBytes()
        churn()
        XCTAssertLessThan(residentBytes() - before, 8_000_000, "24 MB of text went through; none of it may stay")
    }
}

/// A model gives each String attribute of an entity a text cell of two words, and nothing else one.
final class PropertyLayoutTests: XCTestCase {
    func testAModelsStringAttributesGetTextCells() throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(
            name: "Item",
            attributes: [
                AttributeDescription(name: "number", type: .integer64), AttributeDescription(name: "name", type: .string),
                AttributeDescription(name: "data", type: .binary), AttributeDescription(name: "note", type: .string),
            ])])
        let layout = try XCTUnwrap(model.entity(named: "Item")).propertyLayout
        let textCells = layout.keys.indices.filter { layout.cell($0).isText }.map { layout.keys[$0] }
        XCTAssertEqual(textCells, ["name", "note"])
        XCTAssertEqual(layout.wordCount, layout.count + 2)
        XCTAssertEqual(layout.keys.indices.map { layout.cell($0).offset }, [0, 1, 3, 4])
    }
}
