import Foundation
import XCTest
import XMLReading

/// The XML reader under the model loader, the XML store and KeePass imports: libxml2 loaded on
/// first use, and the compiled trees a build embeds.
final class XMLReadingTests: XCTestCase {
    /// Each event as a line, to compare readings.
    final class Recorder: XMLEventHandler {
        var events: [String] = []
        var failAtElement: String?

        func startElement(_ name: String, attributes: [String: String], line: Int) throws {
            let pairs = attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            events.append("start \(name) line \(line) \(pairs.joined(separator: " "))")
            if name == failAtElement { throw CocoaError(.featureUnsupported) }
        }

        func endElement(_ name: String) throws { events.append("end \(name)") }
        func text(_ text: String) throws { events.append("text \(text)") }
    }

    func read(_ xml: String) throws -> [String] {
        let recorder = Recorder()
        try XMLReader.read(Data(xml.utf8), into: recorder)
        return recorder.events
    }

    func notWellFormed(_ xml: String, file: StaticString = #filePath, line: UInt = #line)
        -> (code: Int, error: XMLReadingError)?
    {
        do {
            _ = try read(xml)
            XCTFail("read: \(xml)", file: file, line: line)
        } catch let error as XMLReadingError {
            if case .notWellFormed(let code, _, _) = error.reason { return (code, error) }
            XCTFail("\(error)", file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
        return nil
    }

    /// libxml2's SAX2 gives an attribute's `&amp;` as `&#38;` unless entities are substituted.
    func testEntitiesAndCharacterReferencesArriveDecodedAndTextInOnePiece() throws {
        XCTAssertEqual(
            try read("<a x=\"1&amp;2&lt;&quot;&#65;\" xmlns:p='urn:p' p:y='v'>t&lt;&#x263A;<![CDATA[<c>&amp;]]>\n<b/></a>"),
            ["start a line 1 p:y=v x=1&2<\"A xmlns:p=urn:p", "text t<☺<c>&amp;\n", "start b line 2 ", "end b", "end a"])
    }

    func testDeclaredAndExternalEntitiesAreRefusedAndNothingIsFetched() throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("entity-\(UUID().uuidString)")
        try Data("never read".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        let external = "<!DOCTYPE a [<!ENTITY e SYSTEM \"\(secret.absoluteString)\">]><a>&e;</a>"
        let laughs = "<!DOCTYPE a [<!ENTITY l \"lol\"><!ENTITY l2 \"&l;&l;&l;&l;\">]><a x=\"&l2;\">&l2;</a>"
        for xml in [external, laughs] {
            XCTAssertEqual(notWellFormed(xml)?.code, 26, xml)  // XML_ERR_UNDECLARED_ENTITY
        }
    }

    func testAnErrorNamesCodeLineColumnAndTheElementsLeftOpen() throws {
        let mismatch = try XCTUnwrap(notWellFormed("<a>\n  <b></a>"))
        XCTAssertEqual(mismatch.code, 76)  // XML_ERR_TAG_NAME_MISMATCH
        XCTAssertEqual(mismatch.error.line, 2)
        XCTAssertTrue("\(mismatch.error)".hasPrefix("not well-formed XML at line 2, column "), "\(mismatch.error)")
        XCTAssertTrue("\(mismatch.error)".contains("mismatch"), "\(mismatch.error)")
        XCTAssertEqual(try XCTUnwrap(notWellFormed("<a><b><c/>")).error.openElements, 2)
        XCTAssertNotNil(notWellFormed(""))
        XCTAssertNotNil(notWellFormed("<p:a/>"), "a prefix no namespace declares")
    }

    func testAHandlersErrorStopsTheReadingAndIsWhatIsThrown() throws {
        let recorder = Recorder()
        recorder.failAtElement = "b"
        XCTAssertThrowsError(try XMLReader.read(Data("<a><b/><c/></a>".utf8), into: recorder)) {
            XCTAssertEqual(($0 as? CocoaError)?.code, .featureUnsupported, "\($0)")
        }
        XCTAssertEqual(recorder.events, ["start a line 1 ", "start b line 1 "])
    }

    func testATreeDeeperThanItsLimitIsRefusedAtTheLineItGoesTooDeep() throws {
        let xml = String(repeating: "<g>\n", count: 10) + String(repeating: "</g>", count: 10)
        XCTAssertEqual(try XMLTreeElement.read(Data(xml.utf8), maximumDepth: 10).children.count, 1)
        XCTAssertThrowsError(try XMLTreeElement.read(Data(xml.utf8), maximumDepth: 9)) {
            XCTAssertEqual($0 as? XMLReadingError, XMLReadingError(reason: .nestedTooDeep(limit: 9), line: 10))
        }
    }

    /// A compiled tree replays as the XML reads, and damaged bytes are refused, never trusted.
    func testACompiledTreeReplaysAsTheXMLReadsAndDamageIsRefused() throws {
        let folder = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
        let models = try FileManager.default.subpathsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".xcdatamodel/contents") }
        XCTAssertGreaterThan(models.count, 3)
        for path in models {
            let xml = try Data(contentsOf: folder.appendingPathComponent(path))
            let fromXML = Recorder()
            try XMLTreeElement.read(xml).replay(into: fromXML)
            let compiled = try XMLTreeElement.read(xml).compiled()
            XCTAssertTrue(XMLTreeElement.isCompiled(compiled))
            XCTAssertFalse(XMLTreeElement.isCompiled(xml))
            let fromCompiled = Recorder()
            try XMLTreeElement(compiled: compiled).replay(into: fromCompiled)
            XCTAssertEqual(fromCompiled.events, fromXML.events, path)
            XCTAssertGreaterThan(fromXML.events.count, 10, path)
        }
        let sample = try XMLTreeElement.read(Data(contentsOf: folder.appendingPathComponent(models[0]))).compiled()
        var refused = 0
        for length in 0..<sample.count where (try? XMLTreeElement(compiled: sample.prefix(length))) == nil {
            refused += 1
        }
        XCTAssertEqual(refused, sample.count, "every cut short tree is refused")
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var damaged = sample
            let index = Int.random(in: 8..<damaged.count, using: &random)
            damaged[index] = UInt8.random(in: 0...255, using: &random)
            _ = try? XMLTreeElement(compiled: damaged)  // refused or read; never a crash
        }
    }

    /// libxml2 2.9 refuses more than 10 MB given in one piece ("Huge input lookup"): an XML store
    /// that saved could not be opened, a KeePass export of 4,500 entries could not be imported.
    func testADocumentOfTwentyMegabytesReads() throws {
        let value = String(repeating: "0123456789abcdef", count: 65_536)  // 1 MiB
        let xml = "<root>" + String(repeating: "<item v=\"\(value)\">\(value)</item>\n", count: 10) + "</root>"
        XCTAssertGreaterThan(xml.utf8.count, 20_000_000)
        let root = try XMLTreeElement.read(Data(xml.utf8))
        XCTAssertEqual(root.children.count, 10)
        XCTAssertTrue(root.children.allSatisfy { $0.text == value && $0.attributes["v"] == value })
    }

    /// Elements handed over as they end, with the elements they are in, are left out of the
    /// tree; one inside another of the same name stays in that one's tree.
    func testHandedOverElementsComeWithTheirAncestorsAndLeaveTheTree() throws {
        let xml = "<db><meta>m</meta><group><name>g</name><item n=\"1\"><item n=\"1a\"/></item>"
            + "<group><name>h</name><item n=\"2\"/></group></group></db>"
        var received: [String] = []
        let root = try XMLTreeElement.read(Data(xml.utf8), handingOver: "item") { item, ancestors in
            let names = ancestors.map { $0.child("name")?.text ?? $0.name }.joined(separator: "/")
            let inner = item.children.map { $0.attributes["n"] ?? "" }.joined()
            received.append("\(item.attributes["n"] ?? "") in \(names) holding [\(inner)]; meta \(ancestors[0].child("meta")?.text ?? "-")")
        }
        XCTAssertEqual(received, ["1 in db/g holding [1a]; meta m", "2 in db/g/h holding []; meta m"])
        XCTAssertEqual(root.child("group")?.children.map(\.name), ["name", "group"])
        XCTAssertEqual(root.child("group")?.child("group")?.children.map(\.name), ["name"])
    }
}
