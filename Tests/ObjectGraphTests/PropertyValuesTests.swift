import Foundation
import XCTest
@testable import ObjectGraph

/// The packed value storage against a plain dictionary, over random sets, overwrites and
/// removals of every kind of value (small and extreme integers, reals, text, objects).
final class PropertyValuesTests: XCTestCase {
    func testPackedValuesBehaveAsADictionary() {
        let keys = (0..<12).map { "k\($0)" }
        let layout = PropertyLayout(keys: Array(keys.prefix(8)))
        let object = ManagedObject(entity: EntityDescription(name: "Thing", attributes: []))
        // Each kind of word, and each value just inside and just outside what fits in one.
        let candidates: [Any?] = [nil, 0, 1, -1, Int.max, Int.min, Int.max >> 1, Int.min >> 1, (Int.max >> 1) + 1,
                                  (Int.min >> 1) - 1, 2.5, 0.1, -0.0, Double.greatestFiniteMagnitude, -Double.infinity,
                                  Double.leastNonzeroMagnitude, true, false, "text", "text longer than a small string",
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
            let copy = values
            values["k0"] = 42   // copy-on-write: the copy keeps its own value
            for key in keys {
                XCTAssertEqual(copy[key].map { "\($0)" }, model[key].map { "\($0)" }, "trial \(trial) key \(key)")
            }
            XCTAssertEqual(Set(copy.map(\.key)), Set(model.keys), "trial \(trial)")
            XCTAssertEqual(copy.isEmpty, model.isEmpty)
            XCTAssertEqual(values["k0"] as? Int, 42)
        }
    }

    /// Objects and boxes held by values live exactly as long as some value holds them.
    func testReferencedValuesLiveAsLongAsAValueHoldsThem() {
        final class Payload {}
        let layout = PropertyLayout(keys: ["object", "box", "wide"])
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
