import Foundation
import GRDB

import XMLReading

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
        let root: XMLTreeElement
        do {
            root = try XMLTreeElement.read(try Data(contentsOf: url))
        } catch let error as XMLReadingError {
            throw damaged("\(error)")
        } catch {
            throw damaged("unreadable (\(error.localizedDescription))")
        }
        guard root.name == "objectgraph-store" else {
            throw damaged("no <objectgraph-store> root element")
        }
        guard let metadataText = root.child("metadata")?.text,
            let metadata = try? PropertyListSerialization.propertyList(from: Data(metadataText.utf8), format: nil)
                as? [String: Any]
        else {
            throw damaged("no readable <metadata> property list")
        }
        self.metadata = metadata
        try addCacheNodes(
            from: root.children(named: "object").enumerated().map { index, element in
                guard let entity = element.attributes["entity"], let identity = element.attributes["id"] else {
                    throw damaged("<object> \(index + 1) has no entity or id")
                }
                var record = AtomicRecord(entityName: entity, identity: identity, attributes: [:], relationships: [:])
                for attribute in element.children(named: "attribute") {
                    guard let name = attribute.attributes["name"],
                        let value = Self.databaseValue(type: attribute.attributes["type"], text: attribute.text ?? "")
                    else {
                        throw damaged("an <attribute> of \(identity) has no name or an unreadable value")
                    }
                    record.attributes[name] = value
                }
                for relationship in element.children(named: "relationship") {
                    guard let name = relationship.attributes["name"] else {
                        throw damaged("a <relationship> of \(identity) has no name")
                    }
                    record.relationships[name] = (relationship.attributes["idrefs"] ?? "").split(separator: " ")
                        .map(String.init)
                }
                return record
            })
    }

    /// Writes the whole document atomically.
    public override func save() throws {
        let metadataData: Data
        do {
            metadataData = try PropertyListSerialization.data(fromPropertyList: metadata, format: .xml, options: 0)
        } catch {
            throw ObjectGraphError(
                code: .saveFailed,
                message: "cannot encode the metadata of '\(url.lastPathComponent)': \(error.localizedDescription)")
        }
        let metadataText = try escaped(String(decoding: metadataData, as: UTF8.self), inValue: false)
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<objectgraph-store version=\"1\">\n"
        xml += "    <metadata>\(metadataText)</metadata>\n"
        for record in records() {
            let (entity, identity) = (try escaped(record.entityName), try escaped(record.identity))
            xml += "    <object entity=\"\(entity)\" id=\"\(identity)\">\n"
            for (name, value) in record.attributes.sorted(by: { $0.key < $1.key }) {
                let (type, text) = Self.typeAndText(value)
                xml += "        <attribute name=\"\(try escaped(name))\" type=\"\(type)\">"
                xml += "\(try escaped(text, inValue: false))</attribute>\n"
            }
            for (name, identities) in record.relationships.sorted(by: { $0.key < $1.key }) {
                let idrefs = try escaped(identities.joined(separator: " "))
                xml += "        <relationship name=\"\(try escaped(name))\" idrefs=\"\(idrefs)\"/>\n"
            }
            xml += "    </object>\n"
        }
        xml += "</objectgraph-store>\n"
        try writeAtomically(Data(xml.utf8), to: url)
    }

    /// Text or an attribute's value as XML writes it: markup characters as entities, and the
    /// whitespace a reader would change (a carriage return; in a value, tabs and newlines too) as
    /// character references.
    /// - throws: a character XML 1.0 cannot carry at all (a control character, U+FFFE): written,
    ///   the file could not be read back.
    private func escaped(_ text: String, inValue: Bool = true) throws -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "\r": result += "&#13;"
            case "\n" where inValue: result += "&#10;"
            case "\t" where inValue: result += "&#9;"
            case _ where character.value < 0x20 && character != "\t" && character != "\n",
                 "\u{FFFE}", "\u{FFFF}":
                throw ObjectGraphError(
                    code: .saveFailed,
                    message: "cannot write '\(url.lastPathComponent)': its metadata or names hold the character "
                        + String(format: "U+%04X", character.value) + ", which XML cannot carry")
            default: result.unicodeScalars.append(character)
            }
        }
        return result
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
