import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

/// An eleventh outside review, of c31c616: kept deletions taking back a one-to-many replaced
/// whole, and new objects at the other end of a kept object's Nullify rule. That commit's
/// branches for an ordered one-to-many and for new objects were taken out again: findings 1 to 3
/// are what they broke, kept as guards; finding 4 is an older hole, closed for an unordered
/// one-to-many.
final class EleventhReviewTests: ObjectGraphTestCase {

    private func one(_ entity: String, _ context: ManagedObjectContext, _ name: String) throws -> ManagedObject {
        try XCTUnwrap(try fetch(entity, context, "name == %@", name).first, "no \(entity) \(name)")
    }

    private func touchElsewhere(_ entity: String, _ name: String, _ url: URL, _ model: ManagedObjectModel) throws {
        let other = try elsewhere(url, model)
        try one(entity, other, name)["note"] = "changed elsewhere"
        try other.save()
    }

    private func names(_ objects: Any?) -> [String] {
        ((objects as? [ManagedObject]) ?? []).compactMap { $0["name"] as? String }
    }

    private func name(_ object: Any?) -> String? { (object as? ManagedObject)?["name"] as? String }

    /// Parent —children (nullify)→ Child —parent (nullify)→ Parent, as KeptLinkReviewTests'.
    private func family(_ children: KeyValuePairs<String, [String]>, ordered: Bool = false)
        throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let parent = EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string),
                                         AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "children", destination: "Child", inverse: "parent",
                                                    isToMany: true, deleteRule: .nullify, isOrdered: ordered)])
        let child = EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "name", type: .string),
                                        AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children",
                                                    deleteRule: .nullify)])
        return try seededStore([parent, child]) { writer in
            for (name, members) in children {
                let owner = writer.insertNewObject(forEntityName: "Parent")
                owner["name"] = name
                owner["children"] = members.map { member -> ManagedObject in
                    let object = writer.insertNewObject(forEntityName: "Child")
                    object["name"] = member
                    return object
                }
            }
        }
    }

    /// Person —passport (nullify)→ Passport —owner (nullify)→ Person: one-to-one, a column on each side.
    private func people(_ seed: @escaping (ManagedObjectContext) throws -> Void)
        throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let person = EntityDescription(
            name: "Person", attributes: [AttributeDescription(name: "name", type: .string),
                                         AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "passport", destination: "Passport", inverse: "owner",
                                                    deleteRule: .nullify)])
        let passport = EntityDescription(
            name: "Passport", attributes: [AttributeDescription(name: "name", type: .string),
                                           AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "owner", destination: "Person", inverse: "passport",
                                                    deleteRule: .nullify)])
        return try seededStore([person, passport], seed: seed)
    }

    // MARK: - Finding 1 (regression): an ordered one-to-many replaced whole takes back a child whose row moved

    /// p's ordered children [a, c] are replaced whole ([c, a]); c is deleted; another process moves
    /// c to q (bumping c's row). Rollback keeps c with its row: under q. The new ordered branch
    /// appends c to p.children without asking where c's row is, so c.parent is q while p.children
    /// holds c (and q, read fresh, holds it too). At c31c616^ p.children was left as given: [a].
    func testAnOrderedReplacedWholeToManyDoesNotTakeBackAChildWhoseRowMovedElsewhere() throws {
        let (coordinator, url, model) = try family(["p": ["a", "c"], "q": ["d"]], ordered: true)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let p = try one("Parent", context, "p"), a = try one("Child", context, "a"), c = try one("Child", context, "c")
        XCTAssertEqual(names(p["children"]), ["a", "c"])
        p["children"] = [c, a]
        context.delete(c)
        context.processPendingChanges()
        let other = try elsewhere(url, model)
        try one("Child", other, "c")["parent"] = try one("Parent", other, "q")
        try other.save()
        try context.save()
        XCTAssertFalse(c.isDeleted, "the policy kept c")
        XCTAssertEqual(name(c["parent"]), "q", "c takes its row: under q")
        XCTAssertEqual(names(p["children"]), ["a"], "p.children must not hold c, whose row and to-one name q")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(names(try one("Parent", fresh, "p")["children"]), ["a"])
    }

    // MARK: - Finding 2 (regression): a new object at a one-to-one's other end

    /// Stored person x, new passport n given to x; x is deleted (its rule clears n.owner), changed
    /// elsewhere, and kept by rollback with its row: passport empty. The new branch gives n its
    /// owner x back, so n is inserted naming x while x (and x's row) names no passport: the
    /// one-to-one disagrees with itself, in memory and in the store.
    func testANewPassportIsNotGivenToAKeptOwnerWhoseRowNamesNoPassport() throws {
        let (coordinator, url, model) = try people { writer in
            writer.insertNewObject(forEntityName: "Person")["name"] = "x"
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let x = try one("Person", context, "x")
        let n = context.insertNewObject(forEntityName: "Passport")
        n["name"] = "n"
        n["owner"] = x
        context.processPendingChanges()
        XCTAssertTrue(x["passport"] as? ManagedObject === n)
        context.delete(x)
        context.processPendingChanges()
        XCTAssertNil(n["owner"])
        try touchElsewhere("Person", "x", url, model)
        try context.save()
        XCTAssertFalse(x.isDeleted, "the policy kept x")
        XCTAssertEqual(name(n["owner"]) != nil, name(x["passport"]) == "n",
                       "n names x exactly when x names n: n.owner \(name(n["owner"]) ?? "nil"), "
                           + "x.passport \(name(x["passport"]) ?? "nil")")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        let storedOwner = name(try one("Passport", fresh, "n")["owner"])
        let storedPassport = name(try one("Person", fresh, "x")["passport"])
        XCTAssertEqual(storedOwner != nil, storedPassport == "n",
                       "the store agrees with itself: n.owner \(storedOwner ?? "nil"), x.passport \(storedPassport ?? "nil")")
    }

    /// Stored x holds stored passport o; the app gives x a new passport n (o.owner cleared), then
    /// deletes x; x is kept with its row (passport o). The old branch gives o its owner back (its
    /// committed value); the new one gives n its owner too: two passports name x.
    func testAKeptOwnerIsNotGivenBackToTwoPassports() throws {
        let (coordinator, url, model) = try people { writer in
            let x = writer.insertNewObject(forEntityName: "Person")
            x["name"] = "x"
            let o = writer.insertNewObject(forEntityName: "Passport")
            o["name"] = "o"
            x["passport"] = o
        }
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let x = try one("Person", context, "x"), o = try one("Passport", context, "o")
        XCTAssertTrue(o["owner"] as? ManagedObject === x)
        let n = context.insertNewObject(forEntityName: "Passport")
        n["name"] = "n"
        x["passport"] = n
        context.processPendingChanges()
        XCTAssertNil(o["owner"])
        context.delete(x)
        context.processPendingChanges()
        try touchElsewhere("Person", "x", url, model)
        try context.save()
        XCTAssertFalse(x.isDeleted, "the policy kept x")
        XCTAssertEqual(name(x["passport"]), "o", "x takes its row")
        XCTAssertEqual([o, n].filter { $0["owner"] as? ManagedObject === x }.compactMap { name($0) }, ["o"],
                       "only x's passport names x")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertEqual(try fetch("Passport", fresh).filter { name($0["owner"]) == "x" }.compactMap { name($0) }, ["o"],
                       "only one passport row names x")
    }

    // MARK: - Finding 3 (regression for new objects): a child the app moved away and cleared

    /// New child n under stored p; p is deleted (the rule clears n.parent, leaving n in p's
    /// deleted to-many), then the app moves n to q and clears it again. p is kept: the new branch
    /// finds n "still among p's members with its to-one empty" and gives it p back, undoing the
    /// app's own last write. The premise "moved or cleared by the app, it would have left them"
    /// is false: setting a to-one from nil never touches the deleted p's to-many.
    func testANewChildTheAppMovedAndClearedAfterTheDeletionIsNotGivenBackItsParent() throws {
        let (coordinator, url, model) = try family(["p": ["a"], "q": []])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let p = try one("Parent", context, "p"), q = try one("Parent", context, "q")
        let n = context.insertNewObject(forEntityName: "Child")
        n["name"] = "n"
        n["parent"] = p
        context.processPendingChanges()
        context.delete(p)
        context.processPendingChanges()
        n["parent"] = q
        n["parent"] = nil
        context.processPendingChanges()
        try touchElsewhere("Parent", "p", url, model)
        try context.save()
        XCTAssertFalse(p.isDeleted, "the policy kept p")
        XCTAssertNil(n["parent"], "n stays where the app left it: no parent")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        XCTAssertNil(try one("Child", fresh, "n")["parent"])
    }

    // MARK: - Finding 4 (old): the replacement itself dropped the child later deleted

    /// p.children [a, c] replaced whole by [a] (c.parent cleared with it), then c deleted, changed
    /// elsewhere and kept by rollback: c's row, and c, name p again. `replaceAll` records no
    /// removal of c, so `takeBackUnlink` returns at `members.removed[c] == nil`: p.children
    /// (complete) lacks c while c.parent is p and the store lists c under p.
    func testAKeptChildTheReplacementDroppedIsBackAmongItsParentsChildren() throws {
        let (coordinator, url, model) = try family(["p": ["a", "c"]])
        let context = ManagedObjectContext(coordinator: coordinator)
        context.mergePolicy = .rollback
        let p = try one("Parent", context, "p"), a = try one("Child", context, "a"), c = try one("Child", context, "c")
        XCTAssertEqual(Set(names(p["children"])), ["a", "c"])
        p["children"] = [a]
        XCTAssertNil(c["parent"])
        context.delete(c)
        context.processPendingChanges()
        try touchElsewhere("Child", "c", url, model)
        try context.save()
        XCTAssertFalse(c.isDeleted, "the policy kept c")
        let fresh = ManagedObjectContext(coordinator: coordinator)
        let stored = Set(names(try one("Parent", fresh, "p")["children"]))
        XCTAssertEqual(name(c["parent"]), "p", "c takes its row: under p")
        XCTAssertEqual(Set(names(p["children"])), stored, "p.children agrees with c.parent and the store \(stored)")
    }
}
