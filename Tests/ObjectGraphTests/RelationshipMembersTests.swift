import XCTest
@testable import ObjectGraph

/// A to-many's members (a probing table of slots, a bit per member added since the save)
/// against a plain model of them, over random joins, leaves, replacements and saves, enough
/// of them that the table grows, shifts clusters on removal and compacts its holes.
final class RelationshipMembersTests: XCTestCase {
    /// Members read from the store are kept in the array read (no copy); a repeat counts once.
    func testReadMembersKeepTheirOrderAndCountARepeatOnce() throws {
        let entity = try XCTUnwrap(try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: [])])
            .entity(named: "A"))
        let (a, b, c) = (ManagedObject(entity: entity), ManagedObject(entity: entity), ManagedObject(entity: entity))
        let read = [a, b, c]
        XCTAssertEqual(
            RelationshipMembers(complete: read).objects.withUnsafeBufferPointer { $0.baseAddress },
            read.withUnsafeBufferPointer { $0.baseAddress }, "the array read is the members, not a copy")
        let members = RelationshipMembers(complete: [a, b, a, c])
        XCTAssertEqual(members.count, 3)
        XCTAssert(members.objects.elementsEqual([a, b, c], by: ===))
        XCTAssertTrue(members.remove(b, isStored: { false }))
        XCTAssert(members.objects.elementsEqual([a, c], by: ===))
        XCTAssertFalse(members.contains(b))
        XCTAssertTrue(members.insert(b, isStored: { false }))
        XCTAssert(members.objects.elementsEqual([a, c, b], by: ===))
        XCTAssertEqual(members.added.count, 0, "b was stored: taking it out and back is no change")
        XCTAssertTrue(members.removed.isEmpty)
    }

    /// An object that never joined a to-many joins without a look-up, so members only ever added
    /// new (an import into one category) take no index; a later join of any of them, here or to
    /// another to-many, still looks it up and never lists it twice.
    func testNewObjectsJoinWithoutAnIndexAndNeverTwice() throws {
        let entity = try XCTUnwrap(try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: [])])
            .entity(named: "A"))
        let pool = (0..<1_000).map { _ in ManagedObject(entity: entity) }
        let first = RelationshipMembers(complete: [])
        for object in pool { XCTAssertTrue(first.insert(object, isStored: { false })) }
        XCTAssertEqual(first.count, 1_000)
        XCTAssertEqual(first.indexedCount, 0, "new members are not indexed")
        XCTAssertFalse(first.insert(pool[500], isStored: { false }), "a member already")
        XCTAssertEqual(first.indexedCount, 1_000, "the first look-up indexed them all")
        let second = RelationshipMembers(complete: [])
        for object in pool.prefix(300) { XCTAssertTrue(second.insert(object, isStored: { false })) }
        for object in pool.prefix(300) { XCTAssertFalse(second.insert(object, isStored: { false })) }
        XCTAssertEqual(second.count, 300)
        XCTAssertTrue(first.remove(pool[7], isStored: { false }))
        XCTAssertTrue(first.insert(pool[7], isStored: { false }), "back after leaving")
        XCTAssertFalse(first.insert(pool[7], isStored: { false }))
        XCTAssertEqual(first.count, 1_000)
        XCTAssert(first.objects.elementsEqual(pool.filter { $0 !== pool[7] } + [pool[7]], by: ===))
        XCTAssertEqual(first.added.count, 1_000)
    }

    func testMembersBehaveAsAnOrderedListWithItsChanges() throws {
        let entity = try XCTUnwrap(try ManagedObjectModel(entities: [EntityDescription(name: "A", attributes: [])])
            .entity(named: "A"))
        let pool = (0..<600).map { _ in ManagedObject(entity: entity) }
        for seed in [1, 2, 3] as [UInt64] {
            var random = FetchPowerTests.Generator(state: seed)
            // One seed starts from members read as distinct, indexed at the first lookup.
            let read = seed == 3 ? Array(pool.prefix(200)) : []
            let members = seed == 3 ? RelationshipMembers(distinct: read) : RelationshipMembers(complete: [])
            var expected: [ManagedObject] = read
            var added = Set<ObjectIdentifier>()
            var removed = Set<ObjectIdentifier>()
            for step in 0..<20_000 {
                let object = pool[random.next(pool.count)]
                let identifier = ObjectIdentifier(object)
                switch random.next(100) {
                case 0..<55:
                    let isNew = !expected.contains { $0 === object }
                    XCTAssertEqual(members.insert(object, isStored: { XCTFail("asked"); return false }), isNew)
                    if isNew {
                        expected.append(object)
                        if removed.remove(identifier) == nil { added.insert(identifier) }
                    }
                case 55..<98:
                    let index = expected.firstIndex { $0 === object }
                    XCTAssertEqual(members.remove(object, isStored: { XCTFail("asked"); return false }), index != nil)
                    if let index {
                        expected.remove(at: index)
                        if added.remove(identifier) == nil { removed.insert(identifier) }
                    }
                case 98:
                    members.forgetChanges()
                    (added, removed) = ([], [])
                default:
                    // Shuffled by the generator: a replacement keeps added only the members that stay.
                    var replacement = expected.filter { _ in random.next(3) != 0 }
                    replacement += pool.filter { _ in random.next(40) == 0 }
                    var seen = Set<ObjectIdentifier>()
                    replacement = replacement.filter { seen.insert(ObjectIdentifier($0)).inserted }
                    members.replaceAll(with: replacement)
                    added.formIntersection(seen)
                    expected = replacement
                }
                guard step % 97 == 0 || step == 19_999 else { continue }
                XCTAssertEqual(members.count, expected.count, "seed \(seed), step \(step)")
                XCTAssert(members.objects.elementsEqual(expected, by: ===), "seed \(seed), step \(step): order")
                XCTAssertEqual(Set(members.added.map(ObjectIdentifier.init)), added, "seed \(seed), step \(step)")
                XCTAssertEqual(Set(members.removed.keys), removed, "seed \(seed), step \(step)")
                for candidate in pool.prefix(50) {
                    XCTAssertEqual(members.contains(candidate), expected.contains { $0 === candidate })
                }
            }
        }
    }
}
