import Foundation
import XCTest

@testable import ObjectGraph
import XMLReading

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

    /// libxml2 raises an encoding's conversion error outside its parser's context, to the
    /// thread's handler, which printed it (with bytes of the file) on stderr before our message.
    func testAnEncodingThatDoesNotConvertIsOurErrorAloneNamingIt() throws {
        let xml = Data("<?xml version=\"1.0\" encoding=\"EUC-JP\"?><a>caf\u{E9} \u{20AC}</a>".utf8)
        let output = try capturingStandardError {
            XCTAssertThrowsError(try XMLReader.read(xml, into: XMLReadingTests.Recorder())) {
                guard case .notWellFormed(let code, _, let message)? = ($0 as? XMLReadingError)?.reason else {
                    return XCTFail("\($0)")
                }
                XCTAssertTrue((6000...6004).contains(code), "\(code): \(message)")  // XML_I18N_*
                XCTAssertFalse(message.contains("\n") || message.contains("0x"), message)  // no bytes of the file
            }
        }
        XCTAssertEqual(output, "")
    }

    /// Metadata holding a character XML cannot carry is refused at the save, naming it: written,
    /// the store could not be opened again.
    func testMetadataXMLCannotCarryIsRefusedAtTheSaveAndTheFileKept() throws {
        let url = directory.appendingPathComponent("Notes.xml")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.shopModel())
        coordinator.valueTransformers.register(ReversingTransformer(), forName: "TestReversing")
        let store = try coordinator.addPersistentStore(type: .xml, configuration: "Notes", at: url)
        let context = ManagedObjectContext(coordinator: coordinator)
        context.insertNewObject(forEntityName: "Note")["title"] = "Office"
        try context.save()
        let saved = try Data(contentsOf: url)
        coordinator.setMetadata("bell \u{7}", forKey: "comment", in: store)
        context.insertNewObject(forEntityName: "Note")["title"] = "Home"
        XCTAssertThrowsError(try context.save()) {
            XCTAssertTrue("\($0)".contains("U+0007, which XML cannot carry"), "\($0)")
        }
        XCTAssertEqual(try Data(contentsOf: url), saved)
    }
}
