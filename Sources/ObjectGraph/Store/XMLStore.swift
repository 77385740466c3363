import Foundation
import GRDB

#if canImport(FoundationXML)
import FoundationXML
#endif

/// An atomic store in one XML file (store type ``StoreType/xml``), in the spirit of Core
/// Data's XML store: one `<object>` element per object with its attributes and
/// relationships, and the metadata as an XML property list.
///
/// ```xml
/// <objectgraph-store version="1">
///   <metadata>(XML property list)</metadata>
///   <object entity="System" id="System/p3">
///     <attribute name="name" type="string">GitHub</attribute>
///     <relationship name="tags" idrefs="Tag/p1 Tag/p2"/>
///   </object>
/// </objectgraph-store>
/// ```
public final class XMLStore: AtomicStore {
    /// Reads and parses the whole file; a damaged one is refused naming what is wrong.
    public override func load() throws {
        let document: XMLDocument
        do {
            let data = try Data(contentsOf: url)
            // XMLDocument parses in libxml2's recovery mode, printing each error to stderr and
            // patching over it; XMLParser reports the first error to us alone, so check with it first.
            let parser = XMLParser(data: data)
            parser.shouldResolveExternalEntities = false
            // It may return true yet leave an error behind (an unfinished tag at the end).
            guard parser.parse(), parser.parserError == nil else {
                let code = (parser.parserError as NSError?).map { ", XML parser error \($0.code)" } ?? ""
                throw damaged("not well-formed XML near line \(parser.lineNumber)\(code)")
            }
            document = try XMLDocument(data: data, options: [])
        } catch let error as ObjectGraphError {
            throw error
        } catch {
            throw damaged("not well-formed XML (\(error.localizedDescription))")
        }
        guard let root = document.rootElement(), root.name == "objectgraph-store" else {
            throw damaged("no <objectgraph-store> root element")
        }
        guard let metadataText = root.elements(forName: "metadata").first?.stringValue,
            let metadata = try? PropertyListSerialization.propertyList(from: Data(metadataText.utf8), format: nil)
                as? [String: Any]
        else {
            throw damaged("no readable <metadata> property list")
        }
        self.metadata = metadata
        try addCacheNodes(
            from: root.elements(forName: "object").enumerated().map { index, element in
                guard let entity = element.attribute(forName: "entity")?.stringValue,
                    let identity = element.attribute(forName: "id")?.stringValue
                else {
                    throw damaged("<object> \(index + 1) has no entity or id")
                }
                var record = AtomicRecord(entityName: entity, identity: identity, attributes: [:], relationships: [:])
                for attribute in element.elements(forName: "attribute") {
                    guard let name = attribute.attribute(forName: "name")?.stringValue,
                        let value = Self.databaseValue(
                            type: attribute.attribute(forName: "type")?.stringValue, text: attribute.stringValue ?? "")
                    else {
                        throw damaged("an <attribute> of \(identity) has no name or an unreadable value")
                    }
                    record.attributes[name] = value
                }
                for relationship in element.elements(forName: "relationship") {
                    guard let name = relationship.attribute(forName: "name")?.stringValue else {
                        throw damaged("a <relationship> of \(identity) has no name")
                    }
                    record.relationships[name] = (relationship.attribute(forName: "idrefs")?.stringValue ?? "").split(
                        separator: " "
                    ).map(String.init)
                }
                return record
            })
    }

    /// Writes the whole document atomically.
    public override func save() throws {
        let root = XMLElement(name: "objectgraph-store")
        root.addAttribute(XMLNode.attribute(withName: "version", stringValue: "1") as! XMLNode)
        let metadataData: Data
        do {
            metadataData = try PropertyListSerialization.data(fromPropertyList: metadata, format: .xml, options: 0)
        } catch {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "cannot encode the metadata of '\(url.lastPathComponent)': \(error.localizedDescription)")
        }
        root.addChild(XMLElement(name: "metadata", stringValue: String(decoding: metadataData, as: UTF8.self)))
        for record in records() {
            let object = XMLElement(name: "object")
            object.addAttribute(XMLNode.attribute(withName: "entity", stringValue: record.entityName) as! XMLNode)
            object.addAttribute(XMLNode.attribute(withName: "id", stringValue: record.identity) as! XMLNode)
            for (name, value) in record.attributes.sorted(by: { $0.key < $1.key }) {
                let (type, text) = Self.typeAndText(value)
                let attribute = XMLElement(name: "attribute", stringValue: text)
                attribute.addAttribute(XMLNode.attribute(withName: "name", stringValue: name) as! XMLNode)
                attribute.addAttribute(XMLNode.attribute(withName: "type", stringValue: type) as! XMLNode)
                object.addChild(attribute)
            }
            for (name, identities) in record.relationships.sorted(by: { $0.key < $1.key }) {
                let relationship = XMLElement(name: "relationship")
                relationship.addAttribute(XMLNode.attribute(withName: "name", stringValue: name) as! XMLNode)
                relationship.addAttribute(
                    XMLNode.attribute(withName: "idrefs", stringValue: identities.joined(separator: " ")) as! XMLNode)
                object.addChild(relationship)
            }
            root.addChild(object)
        }
        let document = XMLDocument(rootElement: root)
        document.characterEncoding = "UTF-8"
        document.version = "1.0"
        try writeAtomically(document.xmlData(options: [.nodePrettyPrint]), to: url)
    }

    /// Text that XML 1.0 can carry unchanged; anything else is written in base64.
    private static func isPlainText(_ text: String) -> Bool {
        !text.isEmpty && text.trimmingCharacters(in: .whitespacesAndNewlines) == text
            && text.unicodeScalars.allSatisfy { scalar in
                scalar.value >= 0x20 && scalar.value != 0xFFFE && scalar.value != 0xFFFF
            }
    }

    private static func typeAndText(_ value: DatabaseValue) -> (String, String) {
        switch value.storage {
        case .int64(let number): return ("integer", String(number))
        case .double(let number): return ("real", "\(number)")
        case .string(let text):
            return isPlainText(text) ? ("string", text) : ("base64-string", Data(text.utf8).base64EncodedString())
        case .blob(let data): return ("data", data.base64EncodedString())
        case .null: return ("null", "")
        }
    }

    private static func databaseValue(type: String?, text: String) -> DatabaseValue? {
        switch type {
        case "integer": return Int64(text)?.databaseValue
        case "real": return Double(text)?.databaseValue
        case "string": return text.databaseValue
        case "base64-string":
            return Data(base64Encoded: text).flatMap { String(data: $0, encoding: .utf8) }?.databaseValue
        case "data": return Data(base64Encoded: text)?.databaseValue
        default: return nil
        }
    }
}
