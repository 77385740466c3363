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
        let candidates: [Any?] = [nil, 0, 1, -1, Int.max, Int.min, Int.max >> 1, Int.min >> 1, (Int.max >> 1) + 1,
                                  (Int.min >> 1) - 1, 2.5, true, "text", Data([1, 2]), object, ["a"]]
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
}
