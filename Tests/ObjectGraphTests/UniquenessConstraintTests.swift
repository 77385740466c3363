import Foundation
import XCTest
import GRDB

@testable import ObjectGraph

/// Uniqueness constraints from the model (`<uniquenessConstraints>`), checked at save, on
/// Apple's coredataplus store (Car.numberPlate; Person.firstName + lastName; SportCar and
/// ExpensiveSportCar inherit Car's).
final class UniquenessConstraintTests: ObjectGraphTestCase {
    static let folder = "CoreData/coredataplus-samplemodel/"

    func openStore(_ name: String = "cars") throws -> (URL, ManagedObjectContext) {
        let url = directory.appendingPathComponent("\(name).sqlite")
        try FileManager.default.copyItem(
            at: Self.fixturesURL.appendingPathComponent(Self.folder + "SampleModel_V1.sqlite"), to: url)
        let model = try ManagedObjectModel(
            contentsOf: Self.fixturesURL.appendingPathComponent(
                Self.folder + "SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return (url, ManagedObjectContext(coordinator: coordinator))
    }

    func count(_ url: URL, _ sql: String) throws -> String {
        String(decoding: try runSQLite3([url.path, sql]), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    func newPerson(_ context: ManagedObjectContext, _ first: String, _ last: String) -> ManagedObject {
        let person = context.insertNewObject(forEntityName: "Person")
        person["firstName"] = first
        person["lastName"] = last
        person["id"] = UUID()
        person["updatedAt"] = Date()
        return person
    }

    /// A new Person that takes a stored row's identity (the same names) lists the cars the row
    /// has and the one it gained, under every policy, whether or not it read its cars first.
    func testAnAdoptedRowListsItsStoredToManyAndWhatItGained() throws {
        for policy: MergePolicy in [.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite] {
            for readFirst in [false, true] {
                let label = "\(policy), read before the save: \(readFirst)"
                let (url, context) = try openStore("adopt-\(policy)-\(readFirst)")
                context.mergePolicy = policy
                let stored = Int(try count(url, "SELECT COUNT(*) FROM ZCAR WHERE ZOWNER = 17"))!
                let person = newPerson(context, "Theodora", "Stone")
                if readFirst { XCTAssertEqual((person["cars"] as? [ManagedObject])?.count, 0, label) }
                let car = context.insertNewObject(forEntityName: "Car")
                car["numberPlate"] = "NEW-\(policy)-\(readFirst)"
                car["owner"] = person
                try context.save()
                XCTAssertEqual(person.objectID.primaryKey, 17, label)
                XCTAssertEqual(try count(url, "SELECT COUNT(*) FROM ZCAR WHERE ZOWNER = 17"), String(stored + 1), label)
                XCTAssertEqual((person["cars"] as? [ManagedObject])?.count, stored + 1, label)
                XCTAssertTrue((person["cars"] as? [ManagedObject])?.contains { $0 === car } == true, label)
            }
        }
    }

    func testAnInsertedObjectWithAStoredRowsValuesIsRefusedNamingIt() throws {
        let (url, context) = try openStore()
        let plate = try count(url, "SELECT ZNUMBERPLATE FROM ZCAR WHERE Z_PK = 3")
        let before = try count(url, "SELECT COUNT(*) FROM ZCAR")
        // A sub-entity inherits Car's constraint.
        let car = context.insertNewObject(forEntityName: "SportCar")
        car["numberPlate"] = plate
        XCTAssertThrowsError(try context.save()) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .constraintConflict)
            XCTAssertEqual(
                error?.message,
                "a new SportCar has the same numberPlate as the stored Car row 3 "
                    + "(uniqueness constraint of Car)")
            XCTAssertTrue(error?.objects.first === car)
            XCTAssertFalse(error?.message.contains(plate) == true, "no value in the message")
        }
        XCTAssertEqual(try count(url, "SELECT COUNT(*) FROM ZCAR"), before)
        car["numberPlate"] = "NEW-PLATE-1"
        XCTAssertNoThrow(try context.save())
        XCTAssertEqual(try count(url, "SELECT COUNT(*) FROM ZCAR WHERE ZNUMBERPLATE = 'NEW-PLATE-1'"), "1")
    }

    func testTwoObjectsOfOneSaveConflictOnTheWholeConstraintOnly() throws {
        let (url, context) = try openStore()
        _ = newPerson(context, "Ada", "Lovelace")
        _ = newPerson(context, "Ada", "Byron")  // one attribute of two in common: no conflict
        XCTAssertNoThrow(try context.save())
        _ = newPerson(context, "Grace", "Hopper")
        _ = newPerson(context, "Grace", "Hopper")
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict)
            XCTAssertTrue("\(error)".contains("firstName, lastName as another Person of this save"), "\(error)")
        }
        XCTAssertEqual(try count(url, "SELECT COUNT(*) FROM ZPERSON WHERE ZFIRSTNAME = 'Grace'"), "0")
    }

    func testARowMovingOffItsValuesFreesThemInTheSameSave() throws {
        let (_, context) = try openStore()
        let car = try XCTUnwrap(try context.existingObject(entityName: "Car", primaryKey: 3))
        let plate = try XCTUnwrap(car["numberPlate"] as? String)
        car["numberPlate"] = "MOVED-1"
        let other = context.insertNewObject(forEntityName: "Car")
        other["numberPlate"] = plate
        XCTAssertNoThrow(try context.save())
        // An unchanged row keeps its values taken.
        let third = context.insertNewObject(forEntityName: "Car")
        third["numberPlate"] = "MOVED-1"
        XCTAssertThrowsError(try context.save())
    }

    func testNewStoresGetCoreDataNamedUniqueIndexes() throws {
        let model = try ManagedObjectModel(
            contentsOf: Self.fixturesURL.appendingPathComponent(
                Self.folder + "SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        let url = directory.appendingPathComponent("new.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        try coordinator.close()
        let sql = "SELECT sql FROM sqlite_master WHERE name LIKE 'Z\\_%\\_UNIQUE\\_%' ESCAPE '\\' ORDER BY name"
        let fixture = Self.fixturesURL.appendingPathComponent(Self.folder + "SampleModel_V1.sqlite")
        XCTAssertEqual(
            try count(url, sql),
            String(decoding: try runSQLite3(["-readonly", fixture.path, sql]), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertTrue(try count(url, sql).contains("Z_Person_UNIQUE_firstName_lastName"))
    }

    func testDeletingARowAndInsertingItsUniqueValuesInOneSaveSucceeds() throws {
        // Apple's store has a UNIQUE index on ZNUMBERPLATE: the delete must reach it before the insert.
        let (url, context) = try openStore()
        let car = try XCTUnwrap(try context.existingObject(entityName: "Car", primaryKey: 3))
        let plate = try XCTUnwrap(car["numberPlate"] as? String)
        context.delete(car)
        let replacement = context.insertNewObject(forEntityName: "Car")
        replacement["numberPlate"] = plate
        replacement["maker"] = "Tesla"
        try context.save()
        XCTAssertEqual(
            try count(url, "SELECT Z_PK != 3, ZMAKER FROM ZCAR WHERE ZNUMBERPLATE = '\(plate)'"), "1|Tesla")
    }

    /// Inserts a Car with stored row 3's number plate (FIAT Panda, no deletion date) under a policy.
    func conflictWithRow3(
        _ policy: MergePolicy
    ) throws -> (url: URL, context: ManagedObjectContext, car: ManagedObject, result: Result<Void, Error>) {
        let (url, context) = try openStore("\(policy)")
        context.mergePolicy = policy
        let plate = try count(url, "SELECT ZNUMBERPLATE FROM ZCAR WHERE Z_PK = 3")
        let car = context.insertNewObject(forEntityName: "Car")
        car["numberPlate"] = plate
        car["maker"] = "Tesla"
        car["markedForDeletionAsOf"] = Date(timeIntervalSinceReferenceDate: 1000)
        return (url, context, car, Result { try context.save() })
    }

    func testEachMergePolicySettlesAnInsertedObjectWithAStoredRowsUniqueValues() throws {
        let row3 = "SELECT Z_OPT, ZMAKER, ZMODEL, ZMARKEDFORDELETIONASOF, ZOWNER FROM ZCAR WHERE Z_PK = 3"
        let expected: [(MergePolicy, row: String, maker: String)] = [
            // The object's values win where it has them; the row keeps its model and owner.
            (.mergeByPropertyObjectTrump, "2|Tesla|Panda|1000|17", "Tesla"),
            // The object's attributes replace the row's; its relationships stay.
            (.overwrite, "2|Tesla||1000|17", "Tesla"),
            // The stored values win; the object keeps what the row lacks (the deletion date).
            (.mergeByPropertyStoreTrump, "2|FIAT|Panda|1000|17", "FIAT"),
            // The stored row wins entirely: nothing is written.
            (.rollback, "1|FIAT|Panda||17", "FIAT"),
        ]
        for (policy, row, maker) in expected {
            let (url, context, car, result) = try conflictWithRow3(policy)
            XCTAssertNoThrow(try result.get(), "\(policy)")
            let plateCount =
                "SELECT COUNT(*) FROM ZCAR WHERE ZNUMBERPLATE = (SELECT ZNUMBERPLATE FROM ZCAR WHERE Z_PK = 3)"
            XCTAssertEqual(try count(url, plateCount), "1", "\(policy): no duplicate")
            XCTAssertEqual(try count(url, row3), row, "\(policy)")
            XCTAssertEqual(car.objectID.primaryKey, 3, "\(policy): the object took the row's identity")
            XCTAssertEqual(car["maker"] as? String, maker, "\(policy)")
            XCTAssertFalse(context.hasChanges, "\(policy)")
            XCTAssertTrue(context.registeredObjects.contains { $0 === car }, "\(policy)")
        }
        let (url, context, car, result) = try conflictWithRow3(.error)
        XCTAssertThrowsError(try result.get()) { error in
            let error = error as? ObjectGraphError
            XCTAssertEqual(error?.code, .constraintConflict)
            XCTAssertEqual(
                error?.message,
                "a new Car has the same numberPlate as the stored Car row 3 (uniqueness constraint of Car)")
            XCTAssertTrue(error?.objects.first === car)
        }
        XCTAssertEqual(try count(url, row3), "1|FIAT|Panda||17")
        XCTAssertTrue(context.insertedObjects.contains { $0 === car })
    }

    func testAPolicyDoesNotTurnAnObjectIntoARowOfAnotherEntity() throws {
        let (url, context) = try openStore()
        context.mergePolicy = .mergeByPropertyObjectTrump
        let car = context.insertNewObject(forEntityName: "SportCar")
        car["numberPlate"] = try count(url, "SELECT ZNUMBERPLATE FROM ZCAR WHERE Z_PK = 3")
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict)
        }
        XCTAssertTrue(car.isInserted)
    }

    func testARegisteredUnchangedRowGivesWayAndAChangedOneConflicts() throws {
        let (url, context) = try openStore()
        context.mergePolicy = .mergeByPropertyObjectTrump
        let stored = try XCTUnwrap(try context.existingObject(entityName: "Car", primaryKey: 3))
        let plate = try XCTUnwrap(stored["numberPlate"] as? String)
        stored["model"] = "Tipo"
        let car = context.insertNewObject(forEntityName: "Car")
        car["numberPlate"] = plate
        car["maker"] = "Tesla"
        // Two live objects with unsaved changes cannot become one row.
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .constraintConflict)
        }
        try context.refresh(stored, mergeChanges: false)
        try context.save()
        XCTAssertEqual(car.objectID.primaryKey, 3)
        XCTAssertNil(stored.managedObjectContext, "the row's former object left the context")
        XCTAssertTrue(try context.existingObject(entityName: "Car", primaryKey: 3) === car)
        XCTAssertEqual(try count(url, "SELECT ZMAKER, ZMODEL FROM ZCAR WHERE Z_PK = 3"), "Tesla|Panda")
    }

    /// After a new Car takes a stored car's row by its number plate, the owners' loaded cars list
    /// the new object, not the one the row was taken from (which has left the context): kept by
    /// the row's owner when the new car names none or names it, moved to the owner it names.
    func testAnAdoptedRowReplacesItsFormerObjectInTheOwnersLoadedToMany() throws {
        for named in ["none", "the same", "another"] {
            let label = "the new car names as its owner: \(named)"
            let namesAnOwner = named == "another"
            let (url, context) = try openStore("adopted-member-\(named)")
            context.mergePolicy = .mergeByPropertyObjectTrump
            let former = try XCTUnwrap(try context.existingObject(entityName: "Car", primaryKey: 3))
            let owner = try XCTUnwrap(former["owner"] as? ManagedObject)
            let other = try XCTUnwrap(try context.existingObject(entityName: "Person", primaryKey: 11))
            let ownersCars = try XCTUnwrap(owner["cars"] as? [ManagedObject]).count
            let othersCars = try XCTUnwrap(other["cars"] as? [ManagedObject]).count
            XCTAssertTrue((owner["cars"] as? [ManagedObject])?.contains { $0 === former } == true, label)
            let car = context.insertNewObject(forEntityName: "Car")
            car["numberPlate"] = former["numberPlate"]
            car["maker"] = "Tesla"
            if named != "none" { car["owner"] = namesAnOwner ? other : owner }
            try context.save()
            XCTAssertEqual(car.objectID.primaryKey, 3, label)
            XCTAssertNil(former.managedObjectContext, label)
            let nowOwners = try XCTUnwrap(owner["cars"] as? [ManagedObject])
            let nowOthers = try XCTUnwrap(other["cars"] as? [ManagedObject])
            XCTAssertFalse(nowOwners.contains { $0 === former } || nowOthers.contains { $0 === former }, label)
            XCTAssertEqual(nowOwners.filter { $0 === car }.count, namesAnOwner ? 0 : 1, label)
            XCTAssertEqual(nowOthers.filter { $0 === car }.count, namesAnOwner ? 1 : 0, label)
            XCTAssertEqual(nowOwners.count, namesAnOwner ? ownersCars - 1 : ownersCars, label)
            XCTAssertEqual(nowOthers.count, namesAnOwner ? othersCars + 1 : othersCars, label)
            XCTAssertTrue(car["owner"] as? ManagedObject === (namesAnOwner ? other : owner), label)
            XCTAssertEqual(try count(url, "SELECT ZOWNER FROM ZCAR WHERE Z_PK = 3"), namesAnOwner ? "11" : "17", label)
        }
    }

    /// The other way: the cars of a Person whose row a new Person took name the new one as their
    /// owner (they named the former, which has left the context).
    func testTheMembersOfAnAdoptedRowsFormerObjectNameTheNewObject() throws {
        let (url, context) = try openStore("adopted-owner")
        context.mergePolicy = .mergeByPropertyObjectTrump
        let former = try XCTUnwrap(try context.existingObject(entityName: "Person", primaryKey: 17))
        let cars = try XCTUnwrap(former["cars"] as? [ManagedObject])
        XCTAssertTrue(cars.allSatisfy { $0["owner"] as? ManagedObject === former })
        let person = newPerson(
            context, try XCTUnwrap(former["firstName"] as? String), try XCTUnwrap(former["lastName"] as? String))
        try context.save()
        XCTAssertEqual(person.objectID.primaryKey, 17)
        XCTAssertNil(former.managedObjectContext)
        XCTAssertTrue(cars.allSatisfy { $0["owner"] as? ManagedObject === person })
        XCTAssertEqual((person["cars"] as? [ManagedObject])?.count, cars.count)
        XCTAssertFalse(context.hasChanges, "reading the owner again changes nothing")
        XCTAssertEqual(try count(url, "SELECT COUNT(*) FROM ZCAR WHERE ZOWNER = 17"), String(cars.count))
    }

    // MARK: - Values met in one save

    /// Equal values in two different constraints of one entity are no conflict: the values met in
    /// a save were keyed by entity and values alone, so an email equal to another object's
    /// username failed the save.
    func testEqualValuesInTwoConstraintsOfOneEntityAreNoConflict() throws {
        let account = EntityDescription(
            name: "Account", attributes: [AttributeDescription(name: "email", type: .string),
                                          AttributeDescription(name: "username", type: .string)],
            uniquenessConstraints: [["email"], ["username"]])
        let (coordinator, _, _) = try seededStore([account]) { _ in }
        let context = ManagedObjectContext(coordinator: coordinator)
        let first = context.insertNewObject(forEntityName: "Account")
        first["email"] = "ada"
        let second = context.insertNewObject(forEntityName: "Account")
        second["username"] = "ada"
        XCTAssertNoThrow(try context.save())
        let third = context.insertNewObject(forEntityName: "Account")
        third["username"] = "ada"
        XCTAssertThrowsError(try context.save(), "the same username twice")
    }

    /// The values met in a save, against a dictionary of them, when every value's hash is one:
    /// each is compared by value, and only a real repeat names the object that has it.
    func testValuesMetInASaveAreComparedByValueWhenTheirHashesMeet() throws {
        let person = EntityDescription(
            name: "Person", attributes: [AttributeDescription(name: "first", type: .string),
                                         AttributeDescription(name: "last", type: .string)],
            uniquenessConstraints: [["first", "last"], ["last"]])
        let model = try ManagedObjectModel(entities: [person])
        let owner = try XCTUnwrap(model.entity(named: "Person"))
        for narrowing: (Int) -> Int in [{ _ in 0 }, { $0 & 3 }, { $0 }] {
            var seen = ConstrainedValuesSeen(narrowingHashes: narrowing)
            var expected: [[DatabaseValue]: ManagedObject] = [:]
            for number in 0..<300 {
                let object = ManagedObject(entity: owner)
                object.values["first"] = "f\(number % 7)"
                object.values["last"] = "l\(number % 11)"
                for (position, constraint) in [["first", "last"], ["last"]].enumerated() {
                    let values = ManagedObjectContext.constrainedValues(of: object, owner, constraint)
                    let key = [position.databaseValue] + values
                    let met = seen.insert(object, owner: owner, constraint: constraint, position: position,
                                          values: values)
                    XCTAssertTrue(met === expected[key], "object \(number), constraint \(constraint)")
                    if expected[key] == nil { expected[key] = object }
                }
            }
        }
    }

    private func titledItems(_ titles: [String]) throws -> (PersistentStoreCoordinator, URL, ManagedObjectModel) {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "title", type: .string),
                                       AttributeDescription(name: "note", type: .string)],
            uniquenessConstraints: [["title"]])
        return try seededStore([item]) { writer in
            for title in titles { writer.insertNewObject(forEntityName: "Item")["title"] = title }
        }
    }

    private func titledItem(_ title: String, _ context: ManagedObjectContext) throws -> ManagedObject {
        try XCTUnwrap(try fetch("Item", context, "title == %@", title).first, "no item \(title)")
    }

    private func storedTitles(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        try fetch("Item", ManagedObjectContext(coordinator: coordinator)).compactMap { $0["title"] as? String }.sorted()
    }

    /// A's title changed and changed back here, while another process renamed A's row to "y";
    /// B takes "y". A's column must still be vacated first (its row holds "y" now), or B's
    /// update meets it (found by an outside review of a change that skipped it).
    func testRenameIntoAValueAnotherProcessGaveARowChangedBackHereSavesUnderObjectTrump() throws {
        for bFirst in [true, false] {
            let (coordinator, url, model) = try titledItems(["x", "z"])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let a = try titledItem("x", context), b = try titledItem("z", context)
            if bFirst { b["title"] = "y" }
            a["title"] = "t"
            a["title"] = "x"
            if !bFirst { b["title"] = "y" }
            let other = try elsewhere(url, model)
            try titledItem("x", other)["title"] = "y"
            try other.save()
            XCTAssertNoThrow(try context.save(), "B first: \(bFirst)")
            XCTAssertEqual(try storedTitles(coordinator), ["x", "y"], "B first: \(bFirst)")
        }
    }

    /// A new "x" meets the stored "x" (object trump: it takes the row's identity); two other new
    /// objects of the same save share "dup", so the save fails. A failed save changes nothing:
    /// the new "x" is still an inserted object with its own ID, and saved again once "dup" is
    /// fixed, the store holds one "x" with the new note (found by an outside review).
    func testAFailedSaveAfterAnAdoptionLeavesTheNewObjectInserted() throws {
        // Its own ID temporary, or permanent already (obtainPermanentIDs before the save).
        for obtainsPermanentID in [false, true] {
            let (coordinator, _, _) = try titledItems(["x"])
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let upsert = context.insertNewObject(forEntityName: "Item")
            upsert["title"] = "x"
            upsert["note"] = "new"
            if obtainsPermanentID { try context.obtainPermanentIDs(for: [upsert]) }
            let ownID = upsert.objectID
            let first = context.insertNewObject(forEntityName: "Item")
            first["title"] = "dup"
            let second = context.insertNewObject(forEntityName: "Item")
            second["title"] = "dup"
            XCTAssertThrowsError(try context.save())
            XCTAssertTrue(context.insertedObjects.contains { $0 === upsert }, "the failed save took the upsert out")
            XCTAssertEqual(upsert.objectID, ownID, "the failed save gave the upsert the row's ID")
            XCTAssertTrue(context.updatedObjects.isEmpty)
            second["title"] = "other"
            XCTAssertNoThrow(try context.save())
            XCTAssertEqual(try storedTitles(coordinator), ["dup", "other", "x"])
            XCTAssertEqual(try fetch("Item", ManagedObjectContext(coordinator: coordinator), "title == 'x'")
                .first?["note"] as? String, "new")
        }
    }

    /// A new object adopts row A by its title and gives it a new code, while row B takes A's old
    /// code in the same save. The adopted row keeps its title in place (read in this save, it is
    /// current) but must still move off its old code first, or B's update meets it. Under store
    /// trump the row keeps its code, so B's update is the conflict it is.
    func testAnAdoptedRowMovesOffTheUniqueValuesItChangesBeforeAnotherRowTakesThem() throws {
        for policy in [MergePolicy.mergeByPropertyObjectTrump, .overwrite, .mergeByPropertyStoreTrump] {
            let item = EntityDescription(
                name: "Item", attributes: [AttributeDescription(name: "title", type: .string),
                                           AttributeDescription(name: "code", type: .integer64)],
                uniquenessConstraints: [["title"], ["code"]])
            let (coordinator, _, _) = try seededStore([item]) { writer in
                for (title, code) in [("x", 1), ("z", 2)] {
                    let row = writer.insertNewObject(forEntityName: "Item")
                    (row["title"], row["code"]) = (title, code)
                }
            }
            let context = ManagedObjectContext(coordinator: coordinator)
            context.mergePolicy = policy
            try titledItem("z", context)["code"] = 1
            let upsert = context.insertNewObject(forEntityName: "Item")
            (upsert["title"], upsert["code"]) = ("x", 3)
            let keepsStored = policy == .mergeByPropertyStoreTrump
            if keepsStored {
                XCTAssertThrowsError(try context.save(), "\(policy)")
            } else {
                XCTAssertNoThrow(try context.save(), "\(policy)")
            }
            let rows = try fetch("Item", ManagedObjectContext(coordinator: coordinator))
                .map { "\($0["title"] as? String ?? "-") \($0["code"] as? Int ?? -1)" }.sorted()
            XCTAssertEqual(rows, keepsStored ? ["x 1", "z 2"] : ["x 3", "z 1"], "\(policy)")
        }
    }
}
