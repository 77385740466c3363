import Foundation
import GRDB

/// An atomic store in one binary property list (store type ``StoreType/binary``): the
/// metadata and every object, read whole when the store is added and rewritten whole at
/// each save.
public final class BinaryStore: AtomicStore {
    static let format = "ObjectGraph binary store"

    public override func load() throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw damaged("cannot be read (\(error.localizedDescription))")
        }
        let root: Any
        do {
            root = try PropertyListSerialization.propertyList(from: data, format: nil)
        } catch {
            throw damaged("not a property list")
        }
        guard let top = root as? [String: Any], top["format"] as? String == Self.format else {
            throw damaged("not a property list written by \(Self.self)")
        }
        guard let metadata = top["metadata"] as? [String: Any], let objects = top["objects"] as? [Any] else {
            throw damaged("the metadata or the object list is missing")
        }
        self.metadata = metadata
        try addCacheNodes(from: objects.enumerated().map { index, object in
            guard let object = object as? [String: Any], let entity = object["entity"] as? String, let identity = object["id"] as? String,
                  let attributes = object["attributes"] as? [String: Any], let relationships = object["relationships"] as? [String: Any] else {
                throw damaged("object \(index + 1) is malformed")
            }
            var record = AtomicRecord(entityName: entity, identity: identity, attributes: [:], relationships: [:])
            for (name, value) in attributes {
                guard let stored = Self.databaseValue(value) else { throw damaged("\(identity).\(name) has a value of unknown kind") }
                record.attributes[name] = stored
            }
            for (name, value) in relationships {
                guard let identities = value as? [String] else { throw damaged("\(identity).\(name) is not a list of identities") }
                record.relationships[name] = identities
            }
            return record
        })
    }

    public override func save() throws {
        let objects: [[String: Any]] = records().map { record in
            ["entity": record.entityName, "id": record.identity,
             "attributes": record.attributes.compactMapValues(Self.propertyListValue), "relationships": record.relationships]
        }
        let top: [String: Any] = ["format": Self.format, "version": 1, "metadata": metadata, "objects": objects]
        let data: Data
        do {
            data = try PropertyListSerialization.data(fromPropertyList: top, format: .binary, options: 0)
        } catch {
            throw ObjectGraphError(code: .saveFailed, message: "cannot encode '\(url.lastPathComponent)': \(error.localizedDescription)")
        }
        try writeAtomically(data, to: url)
    }

    static func propertyListValue(_ value: DatabaseValue) -> Any? {
        switch value.storage {
        case .null: return nil
        case .int64(let number): return Int(number)
        case .double(let number): return number
        case .string(let text): return text
        case .blob(let data): return data
        }
    }

    static func databaseValue(_ value: Any) -> DatabaseValue? {
        switch value {
        case let data as Data: return data.databaseValue
        case let text as String: return text.databaseValue
        // A real written as 2.0 may read back as an integer; the attribute's type settles it.
        case let integer as Int64: return integer.databaseValue
        case let real as Double: return real.databaseValue
        default: return nil
        }
    }
}
