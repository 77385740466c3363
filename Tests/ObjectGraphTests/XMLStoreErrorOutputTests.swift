import Foundation
import XCTest

@testable import ObjectGraph

/// A damaged XML store is refused with our error alone: libxml2 prints nothing to stderr.
final class XMLStoreErrorOutputTests: ObjectGraphTestCase {
    /// Runs `body` with file descriptor 2 sent to a file; returns what was written there.
    func capturingStandardError(_ body: () throws -> Void) throws -> String {
        let captured = directory.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: captured.path, contents: nil)
        let file = try FileHandle(forWritingTo: captured)
        let saved = dup(2)
        XCTAssertGreaterThanOrEqual(saved, 0)
        dup2(file.fileDescriptor, 2)
        defer {
            dup2(saved, 2)
            close(saved)
            try? file.close()
        }
        try body()
        return try String(contentsOf: captured, encoding: .utf8)
    }

    func testADamagedXMLStoreIsRefusedWithoutLibxml2Output() throws {
        let url = directory.appendingPathComponent("Notes.xml")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
        coordinator.valueTransformers.register(ReversingTransformer(), forName: "TestReversing")
        try coordinator.addPersistentStore(type: .xml, configuration: "Notes", at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        let note = context.insertNewObject(forEntityName: "Note")
        note["title"] = "Office"
        try context.save()
        try coordinator.close()
        let text = try String(contentsOf: url, encoding: .utf8)
        let damages = [
            String(text.prefix(text.count / 2)),  // cut mid-file
            text.replacingOccurrences(of: "<object ", with: "<object entity=<"),
            text.replacingOccurrences(of: "</objectgraph-store>", with: "</objectgraph-stor>"),
        ]
        for (index, damaged) in damages.enumerated() {
            try Data(damaged.utf8).write(to: url)
            let output = try capturingStandardError {
                let reader = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
                XCTAssertThrowsError(try reader.addPersistentStore(type: .xml, configuration: "Notes", at: url)) {
                    XCTAssertTrue("\($0)".contains("not well-formed XML at line"), "damage \(index): \($0)")
                }
            }
            XCTAssertEqual(output, "", "damage \(index)")
        }
    }
}
