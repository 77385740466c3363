import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

final class ValidationTests: ObjectGraphTestCase {
    /// A new "Entry" in a context over an in-memory store of `model`.
    private func newEntry(in model: ManagedObjectModel) throws -> (ManagedObjectContext, ManagedObject) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory)
        let context = ManagedObjectContext(coordinator: coordinator)
        return (context, context.insertNewObject(forEntityName: "Entry"))
    }

    private func messages(_ body: () throws -> Void) -> [String] {
        do {
            try body()
        } catch let error as ValidationError {
            return ValidationMessages.messages(for: error)
        } catch {
            XCTFail("unexpected \(error)")
        }
        return []
    }

    func testTheBooksSystemRulesReadAsSentences() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let system = stack.context.insertNewObject(forEntityName: "System")
            XCTAssertEqual(messages { try stack.context.save() }, ["userId is required"])
            system["userId"] = "ab"
            XCTAssertEqual(messages { try stack.context.save() }, ["userId must be at least 3 characters"])
            system["userId"] = "abcdefghijk"
            XCTAssertEqual(messages { try stack.context.save() }, ["userId can't be longer than 10 characters"])
            system["userId"] = "ab cd"
            XCTAssertEqual(messages { try stack.context.save() }, ["userId can contain only letters and numbers"])
            system["userId"] = "a!"
            XCTAssertEqual(messages { try stack.context.save() }, ["userId must be at least 3 characters", "userId can contain only letters and numbers"])
            system["userId"] = "alice42"
            XCTAssertNoThrow(try stack.context.save())
        }
    }

    func testEveryFailureIsCollectedWithItsConstraint() throws {
        let stack = try makeStack(.sqlite)
        let context = stack.context
        let everything = context.insertNewObject(forEntityName: "Everything")
        everything["int16"] = 101
        everything["date"] = Date(timeIntervalSinceReferenceDate: -1)
        let other = context.insertNewObject(forEntityName: "Everything")
        other["int16"] = -6
        other["date"] = Date(timeIntervalSinceReferenceDate: 2_000_000_000)
        let category = context.insertNewObject(forEntityName: "Category")
        category["name"] = "x"
        for index in 0..<4 {
            let system = context.insertNewObject(forEntityName: "System")
            system["userId"] = "user\(index)"
            system["category"] = category
        }
        XCTAssertThrowsError(try context.save()) { error in
            guard let error = error as? ValidationError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.code, .multiple)
            let byCode = Dictionary(grouping: error.errors, by: \.code)
            XCTAssertEqual(byCode[.numberTooLarge]?.first?.constraint, .maximum(100))
            XCTAssertEqual(byCode[.numberTooLarge]?.first?.value as? Int, 101)
            XCTAssertEqual(byCode[.numberTooSmall]?.first?.constraint, .minimum(-5))
            XCTAssertEqual(byCode[.dateTooSoon]?.first?.constraint, .earliest(Date(timeIntervalSinceReferenceDate: 0)))
            XCTAssertEqual(byCode[.dateTooLate]?.first?.constraint, .latest(Date(timeIntervalSinceReferenceDate: 1_000_000_000)))
            XCTAssertEqual(byCode[.stringTooShort]?.first?.constraint, .minimumLength(2))
            XCTAssertEqual(byCode[.relationshipExceedsMaximumCount]?.first?.constraint, .maximumCount(3))
            XCTAssertEqual(byCode[.relationshipExceedsMaximumCount]?.first?.key, "systems")
            XCTAssertEqual(error.errors.count, 6)
            let text = ValidationMessages.messages(for: error)
            XCTAssertTrue(text.contains("int16 can't be more than 100"), "\(text)")
            XCTAssertTrue(text.contains("int16 must be at least -5"), "\(text)")
            XCTAssertTrue(text.contains("systems can't have more than 3 items"), "\(text)")
        }
        // Nothing was written.
        let queue = try DatabaseQueue(path: stack.notes.url!.path)
        XCTAssertEqual(try queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM ZEVERYTHING") }, 0)
        XCTAssertTrue(context.hasChanges, "the context keeps its changes to be fixed")
        everything["int16"] = 1
        everything["date"] = nil
        other["int16"] = 1
        other["date"] = nil
        category["name"] = "Web"
        context.delete(context.insertedObjects.first { $0.entity.name == "System" }!)
        XCTAssertNoThrow(try context.save(), "fixed and saved again")
    }

    func testValidationRunsAtSaveNotAtInsert() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let system = stack.context.insertNewObject(forEntityName: "System")
            system["userId"] = "x"
            XCTAssertTrue(system.isInserted, "an invalid object can be inserted and edited")
            XCTAssertThrowsError(try stack.context.save())
            stack.context.rollback()
            XCTAssertFalse(stack.context.hasChanges)
        }
    }

    func testSecretValuesNeverAppearInMessagesOrDescriptions() throws {
        let stack = try makeStack(.inMemory)
        let system = stack.context.insertNewObject(forEntityName: "System")
        system["userId"] = "hunter2 is secret"
        system["password"] = "hunter2"
        XCTAssertThrowsError(try stack.context.save()) { error in
            let text = "\(error) \(ValidationMessages.messages(for: error as! ValidationError))"
            XCTAssertFalse(text.contains("hunter2"), text)
        }
    }

    func testDisplayNamesAndCallerNamesAreUsed() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Entry", attributes: [
                AttributeDescription(name: "userId", type: .string, maxValueString: "3", regularExpression: "[^\\s\\p{Cc}]*", userInfo: ["displayName": "user ID"]),
                AttributeDescription(name: "url", type: .string, regularExpression: "[a-z]+://.+", userInfo: ["patternDescription": "look like scheme://..."]),
                AttributeDescription(name: "title", type: .string, isOptional: false),
            ]),
        ])
        let (context, entry) = try newEntry(in: model)
        entry["userId"] = "a b c"
        entry["url"] = "nope"
        entry["title"] = nil
        XCTAssertEqual(messages { try context.save() }, [
            "user ID can't be longer than 3 characters", "user ID can't contain whitespace or control characters",
            "url must look like scheme://...", "title is required",
        ])
        do {
            try context.save()
        } catch let error as ValidationError {
            XCTAssertEqual(ValidationMessages.messages(for: error) { _, key in "--\(key)" }.last, "--title is required")
        }
    }

    /// A pattern that does not compile stops the model's load; deferred to validation, it loads,
    /// and then fails every validation of its attribute (a save is refused, never let through).
    func testAnInvalidPatternStopsTheLoadOrEveryValidationWhenDeferred() throws {
        let entities = {
            [EntityDescription(name: "Entry", attributes: [
                AttributeDescription(name: "code", type: .string, regularExpression: "[a-z"),
                AttributeDescription(name: "plain", type: .string, regularExpression: "[a-z]+"),
            ])]
        }
        XCTAssertThrowsError(try ManagedObjectModel(entities: entities())) { error in
            XCTAssertTrue("\(error)".contains("invalid regular expression '[a-z'"), "\(error)")
        }
        let model = try ManagedObjectModel(entities: entities(), deferringPatternChecks: true)
        let (context, entry) = try newEntry(in: model)
        entry["plain"] = "fine"
        entry["code"] = "abc"
        XCTAssertEqual(messages { try context.save() }.count, 1)
        entry["code"] = nil
        try context.save()
        entry["plain"] = "NOT"
        XCTAssertEqual(messages { try context.save() }.count, 1)
    }

    /// A check of its own that cannot run (its fetch failed) fails the save instead of passing unchecked.
    func testACheckThatCannotRunFailsTheSaveAndWritesNothing() throws {
        forEachStoreKind { kind in
            let model = try Self.shopModel()
            model.setClass(UncheckableTag.self, forEntityName: UncheckableTag.entityName)
            let stack = try makeStack(kind, model: model)
            stack.context.insert(UncheckableTag.self)["name"] = "unchecked"
            XCTAssertThrowsError(try stack.context.save()) { XCTAssertTrue($0 is UncheckableTag.CheckFailed, "\($0)") }
            stack.context.rollback()
            XCTAssertEqual(try stack.context.objects("Tag").count, 0)
        }
    }
}

final class RelationshipCountTests: ObjectGraphTestCase {
    func testTooFewDestinationsIs1580() {
        forEachStoreKind { kind in
            let model = try ManagedObjectModel(entities: [
                EntityDescription(name: "Team", relationships: [RelationshipDescription(name: "members", destination: "Person", inverse: "team", isToMany: true, minCount: 2, maxCount: 3)]),
                EntityDescription(name: "Person", relationships: [RelationshipDescription(name: "team", destination: "Team", inverse: "members", isOptional: false)]),
            ])
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: kind == .sqlite ? .sqlite : .inMemory, at: directory.appendingPathComponent("teams-\(kind).sqlite"))
            let context = ManagedObjectContext(coordinator: coordinator)
            let team = context.insertNewObject(forEntityName: "Team")
            let lonely = context.insertNewObject(forEntityName: "Person")
            lonely["team"] = team
            let stray = context.insertNewObject(forEntityName: "Person")
            XCTAssertThrowsError(try context.save()) { error in
                let errors = (error as? ValidationError)?.errors ?? []
                XCTAssertEqual(Set(errors.map(\.code)), [.relationshipLacksMinimumCount, .missingMandatoryProperty])
                XCTAssertEqual(errors.first { $0.code == .relationshipLacksMinimumCount }?.constraint, .minimumCount(2))
                XCTAssertTrue(errors.first { $0.code == .missingMandatoryProperty }?.object === stray)
                XCTAssertEqual(ValidationMessages.messages(for: error as! ValidationError).sorted(), ["members must have at least 2 items", "team is required"])
            }
            stray["team"] = team
            XCTAssertNoThrow(try context.save())
        }
    }
}

/// A tag whose own check always fails to run, as one whose fetch fails would.
final class UncheckableTag: ManagedObject, ManagedEntity {
    static let entityName = "Tag"
    struct CheckFailed: Error {}

    override func validateForSave(into errors: inout [ValidationError]) throws { throw CheckFailed() }
}
