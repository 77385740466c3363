import Foundation
import GRDB
import XCTest
@testable import ObjectGraph

/// The entry point of helper child processes: other tests run this test binary with only
/// this test selected and `OG_CHILD_ACTION` set. Run directly, it is skipped.
final class ChildProcessEntry: ObjectGraphTestCase {
    override func tearDownWithError() throws {}

    func testChildProcessEntryPoint() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let action = environment["OG_CHILD_ACTION"], let path = environment["OG_CHILD_DIR"] else {
            throw XCTSkip("helper for the multi-process tests; runs only as their child process")
        }
        directory = URL(fileURLWithPath: path)
        let stack = try makeStack(.sqlite)
        switch action {
        case "saveLoop":
            // Each save writes a Note (Notes.sqlite) and a Tag (Passwords.sqlite) with the same number.
            // Numbers continue from earlier children so that every trial's saves are distinct.
            var counter = try stack.context.objects("Note").count
            while true {
                counter += 1
                let note = stack.context.insertNewObject(forEntityName: "Note")
                note["title"] = "\(counter)"
                let tag = stack.context.insertNewObject(forEntityName: "Tag")
                tag["name"] = "\(counter)"
                try stack.context.save()
                FileHandle.standardOutput.write(Data("SAVED\n".utf8))
            }
        case "renameShared":
            let tag = try XCTUnwrap(try stack.context.objects("Tag", "name == 'shared'").first)
            tag["name"] = "changed by child"
            try stack.context.save()
            exit(0)
        default:
            XCTFail("unknown child action \(action)")
        }
    }
}

final class ConcurrencyTests: ObjectGraphTestCase {
    func testASaveAcrossTwoStoresSurvivesSIGKILLAsAllOrNothing() throws {
        try makeStack(.sqlite).coordinator.close()
        var totalSaved = 0
        for trial in 0..<15 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = ["ObjectGraphTests.ChildProcessEntry/testChildProcessEntryPoint"]
            process.environment = ProcessInfo.processInfo.environment.merging(["OG_CHILD_ACTION": "saveLoop", "OG_CHILD_DIR": directory.path]) { _, new in new }
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Kill after a varied number of committed saves, wherever the next one has got to.
            let savesBeforeKill = Int.random(in: 2...6)
            var output = Data()
            // Only the child's SAVED lines count: XCTest prints its own banner lines first.
            let savedLines = { output.split(separator: UInt8(ascii: "\n")).filter { $0.elementsEqual("SAVED".utf8) }.count }
            while savedLines() < savesBeforeKill {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                output += chunk
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()

            let stack = try makeStack(.sqlite)
            let notes = Set(try stack.context.objects("Note").map { $0["title"] as! String })
            let tags = Set(try stack.context.objects("Tag").map { $0["name"] as! String })
            XCTAssertEqual(notes, tags, "trial \(trial): both stores hold the same saves")
            totalSaved = notes.count
            try stack.coordinator.close()
        }
        XCTAssertGreaterThan(totalSaved, 15, "the children saved while being killed")
    }

    func testAnUpdateOverAChangeFromAnotherContextIsAMergeConflict() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let tag = stack.context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "shared"
            try stack.context.save()
            let other = ManagedObjectContext(coordinator: stack.coordinator)
            let theirs = try other.objects("Tag").first!
            theirs["name"] = "theirs"
            try other.save()

            tag["name"] = "mine"
            XCTAssertThrowsError(try stack.context.save()) { error in
                let error = error as? ObjectGraphError
                XCTAssertEqual(error?.code, .mergeConflict)
                XCTAssertEqual(error?.code.rawValue, 133020)
                XCTAssertTrue(error?.objects.first === tag)
                XCTAssertTrue(error?.message.contains("Tag row \(tag.objectID.primaryKey!)") ?? false, error?.message ?? "")
            }
            let third = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try third.names("Tag"), ["theirs"], "their change survives")
        }
    }

    func testAnUpdateOrDeleteOverAChangeFromAnotherProcessIsAMergeConflict() throws {
        let stack = try makeStack(.sqlite)
        let tag = stack.context.insertNewObject(forEntityName: "Tag")
        tag["name"] = "shared"
        let other = stack.context.insertNewObject(forEntityName: "Tag")
        other["name"] = "other"
        try stack.context.save()

        let child = try spawnChild(action: "renameShared", environment: [:])
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0)

        tag["name"] = "changed by parent"
        XCTAssertThrowsError(try stack.context.save()) { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict)
        }
        stack.context.rollback()
        stack.context.delete(tag)
        XCTAssertThrowsError(try stack.context.save(), "deleting a row changed elsewhere conflicts too") { error in
            XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict)
        }
        let fresh = ManagedObjectContext(coordinator: stack.coordinator)
        XCTAssertEqual(try fresh.names("Tag"), ["changed by child", "other"])
    }
}

final class CompatibilityTests: ObjectGraphTestCase {
    private func editedModel(_ edit: (String) -> String) throws -> ManagedObjectModel {
        let source = Self.fixturesURL.appendingPathComponent("Shop.xcdatamodeld")
        let copy = directory.appendingPathComponent("Edited.xcdatamodeld")
        try FileManager.default.copyItem(at: source, to: copy)
        let contents = copy.appendingPathComponent("Shop 2.xcdatamodel/contents")
        try edit(try String(contentsOf: contents, encoding: .utf8)).write(to: contents, atomically: true, encoding: .utf8)
        return try ManagedObjectModel(contentsOf: copy)
    }

    func testOpeningWithADifferentShapeFailsNamingWhatChanged() throws {
        try makeStack(.sqlite).coordinator.close()
        let changed = try editedModel {
            $0.replacingOccurrences(of: #"<entity name="Tag" representedClassName="Tag" syncable="YES">"#,
                                    with: #"<entity name="Tag" representedClassName="Tag" syncable="YES"><attribute name="color" optional="YES" attributeType="String"/>"#)
                .replacingOccurrences(of: #"<attribute name="rank" optional="YES" attributeType="Integer 32""#, with: #"<attribute name="rank" optional="YES" attributeType="String""#)
        }
        XCTAssertThrowsError(try makeStack(.sqlite, model: changed)) { error in
            guard let error = error as? ObjectGraphError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.code, .incompatibleVersionHash)
            XCTAssertEqual(error.code.rawValue, 134100)
            XCTAssertTrue(error.message.contains("Tag.color added"), error.message)
            XCTAssertTrue(error.message.contains("System.rank changed from attribute Integer 32 to attribute String"), error.message)
            XCTAssertFalse(error.message.contains("Category"), "unchanged entities are not named: \(error.message)")
        }
    }

    func testValidationRulesAndDefaultsAreNotShapeChanges() throws {
        try makeStack(.sqlite).coordinator.close()
        let relaxed = try editedModel {
            $0.replacingOccurrences(of: #"minValueString="3" maxValueString="10""#, with: #"minValueString="1" maxValueString="99""#)
                .replacingOccurrences(of: #"defaultValueString="0" usesScalarValueType="YES"/>"#, with: #"defaultValueString="42" usesScalarValueType="YES"/>"#)
        }
        XCTAssertEqual(relaxed.entity(named: "System")?.attribute(named: "userId")?.maxValueString, "99")
        XCTAssertNoThrow(try makeStack(.sqlite, model: relaxed))
    }
}

final class NotificationTests: ObjectGraphTestCase {
    /// What the observers heard (notifications are posted synchronously on the test's thread).
    final class Heard: @unchecked Sendable {
        var changes: [[String: [ManagedObject]]] = []
        var saves: [[String: [ManagedObject]]] = []
        var secondObserverSaves = 0
    }

    /// The object lists of a notification (it also carries object IDs).
    static func objectLists(_ note: Notification) -> [String: [ManagedObject]] {
        var lists: [String: [ManagedObject]] = [:]
        for case let (key as String, objects as [ManagedObject]) in note.userInfo ?? [:] { lists[key] = objects }
        return lists
    }

    func testDidChangeAndDidSaveCarryTheObjectsToEveryObserver() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let context = stack.context
            let heard = Heard()
            let center = context.notificationCenter
            let tokens = [
                center.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification, object: context, queue: nil) { note in
                    heard.changes.append(Self.objectLists(note))
                },
                center.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil) { note in
                    heard.saves.append(Self.objectLists(note))
                },
                center.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil) { _ in
                    heard.secondObserverSaves += 1
                },
            ]
            defer { tokens.forEach(center.removeObserver) }

            let a = context.insertNewObject(forEntityName: "Tag")
            a["name"] = "a"
            let b = context.insertNewObject(forEntityName: "Tag")
            b["name"] = "b"
            context.processPendingChanges()
            XCTAssertEqual(heard.changes.last?["inserted"], [a, b])
            try context.save()
            XCTAssertEqual(heard.saves.last?["inserted"], [a, b])

            a["name"] = "a2"
            context.delete(b)
            try context.save()
            XCTAssertEqual(heard.changes.last?["updated"], [a])
            XCTAssertEqual(heard.changes.last?["deleted"], [b])
            XCTAssertEqual(heard.saves.last?["updated"], [a])
            XCTAssertEqual(heard.saves.last?["deleted"], [b])
            XCTAssertEqual(heard.saves.count, 2)
            XCTAssertEqual(heard.secondObserverSaves, 2)
        }
    }
}
