import Foundation
import XMLReading

/// An Xcode mapping model (`.xcmappingmodel`): how a store of one model version becomes a store
/// of another when the migration cannot be inferred, as Core Data's `NSMappingModel`.
///
/// What it says declaratively is honored: which source entity each destination entity comes
/// from (renames included), property mappings whose value is a source property
/// (`$source.oldName`, or Xcode's automatic same-name expression), and relationship mappings
/// (`FUNCTION($manager, "destinationInstancesForEntityMappingNamed:sourceInstances:", …,
/// $source.relationship)`). A mapping that needs app code (an entity migration policy class, a
/// custom entity mapping or source expression) or another value expression (a function, a
/// computation) is refused when the migration is planned, before anything is written.
///
/// For example:
///
/// ```swift
/// coordinator.mappingModels = [try MappingModel(contentsOf: URL(fileURLWithPath: "Model2to3.xcmappingmodel"))]
/// ```
public struct MappingModel: Sendable {
    /// Where a destination property's value comes from.
    enum ValueSource: Sendable, Equatable {
        /// The source object's property of that name.
        case sourceProperty(String)
        /// Xcode's automatic expression: the source's property of the same name, where it has one.
        case sameName
        /// No value: an attribute gets its default, a relationship stays empty.
        case nothing
        /// An expression ObjectGraph does not evaluate, described.
        case unsupported(String)
    }

    struct PropertyMapping: Sendable {
        var name: String
        var value: ValueSource
    }

    struct EntityMapping: Sendable {
        var name: String
        var sourceEntity: String?
        var destinationEntity: String?
        var typeName: String
        /// What makes the mapping need app code, if anything.
        var needsCode: String?
        var attributes: [PropertyMapping]
        var relationships: [PropertyMapping]
    }

    /// The mapping model's file name.
    public let name: String
    /// The version it migrates from: the source `.xcdatamodel`'s name without extension.
    public let sourceVersion: String
    /// The version it migrates to.
    public let destinationVersion: String
    let entityMappings: [EntityMapping]

    /// Reads an `.xcmappingmodel` folder (or its `xcmapping.xml`).
    ///
    /// - throws: ``ModelError`` naming the file when it is not a mapping model Xcode wrote.
    public init(contentsOf url: URL) throws {
        let file = url.pathExtension == "xml" ? url : url.appendingPathComponent("xcmapping.xml")
        let name =
            url.pathExtension == "xml" ? url.deletingLastPathComponent().lastPathComponent : url.lastPathComponent
        self.name = name
        guard let data = try? Data(contentsOf: file) else {
            throw ModelError(file: name, reason: "no xcmapping.xml inside (is this an .xcmappingmodel folder?)")
        }
        let objects = try MappingXMLParser.objects(in: data, file: name)
        guard let root = objects.values.first(where: { $0.type == "XDDEVMAPPINGMODEL" }) else {
            throw ModelError(file: name, reason: "no mapping model (XDDEVMAPPINGMODEL) inside")
        }
        func version(_ key: String) throws -> String {
            guard let path = root.attributes[key], path.hasSuffix(".xcdatamodel") else {
                throw ModelError(file: name, reason: "no \(key) naming an .xcdatamodel")
            }
            return String((path.split(separator: "/").last ?? "").dropLast(".xcdatamodel".count))
        }
        let (sourceVersion, destinationVersion) = (try version("sourcemodelpath"), try version("destinationmodelpath"))
        self.sourceVersion = sourceVersion
        self.destinationVersion = destinationVersion
        var mappings: [(number: Int, mapping: EntityMapping)] = []
        for reference in root.relationships["entitymappings"] ?? [] {
            guard let object = objects[reference], object.type == "XDDEVENTITYMAPPING" else {
                throw ModelError(file: name, reason: "an entity mapping '\(reference)' that is not in the file")
            }
            let number = Int(object.attributes["mappingnumber"] ?? "") ?? 0
            mappings.append((number, try Self.entityMapping(object, objects, file: name)))
        }
        entityMappings = mappings.sorted { $0.number < $1.number }.map(\.mapping)
    }

    private static let entityKeys: Set<String> = [
        "name", "sourcename", "destinationname", "mappingtypename", "mappingnumber", "autogenerateexpression",
        "migrationpolicyclassname", "sourceexpressiondata", "userinfodata",
    ]
    private static let propertyKeys: Set<String> = [
        "name", "valueexpressiondata", "autogenerateexpression", "userinfodata",
    ]

    private static func entityMapping(
        _ object: MappingXMLParser.Object, _ objects: [String: MappingXMLParser.Object], file: String
    ) throws -> EntityMapping {
        let source = object.attributes["sourcename"].flatMap { $0.isEmpty ? nil : $0 }
        let destination = object.attributes["destinationname"].flatMap { $0.isEmpty ? nil : $0 }
        // Xcode's default name: SourceToDestination, or the one entity a mapping names.
        let name = object.attributes["name"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (source.flatMap { source in destination.map { "\(source)To\($0)" } } ?? destination ?? source ?? "")
        let typeName = object.attributes["mappingtypename"] ?? "Undefined"
        var needsCode: String?
        if let policy = object.attributes["migrationpolicyclassname"], !policy.isEmpty {
            needsCode = "the custom migration policy '\(policy)'"
        } else if typeName == "Custom" {
            needsCode = "a custom entity mapping"
        } else if object.attributes["sourceexpressiondata"].map({ !$0.isEmpty }) == true {
            needsCode = "a custom source expression"
        } else if let unknown = Set(object.attributes.keys).subtracting(entityKeys).sorted().first {
            needsCode = "the setting '\(unknown)', which ObjectGraph does not know"
        }
        let automatic = object.attributes["autogenerateexpression"] == "1"
        func properties(_ key: String, relationship: Bool) throws -> [PropertyMapping] {
            try (object.relationships[key] ?? []).map { reference in
                guard let property = objects[reference], let propertyName = property.attributes["name"] else {
                    throw ModelError(file: file, entity: destination, reason: "a property mapping without a name")
                }
                if let unknown = Set(property.attributes.keys).subtracting(propertyKeys).sorted().first {
                    return PropertyMapping(
                        name: propertyName,
                        value: .unsupported("the setting '\(unknown)', which ObjectGraph does not know"))
                }
                let value: ValueSource
                if let encoded = property.attributes["valueexpressiondata"], !encoded.isEmpty {
                    value = MappingExpression.valueSource(base64: encoded, relationship: relationship)
                } else if automatic || property.attributes["autogenerateexpression"] == "1" {
                    value = source == nil ? .nothing : .sameName
                } else {
                    value = .nothing
                }
                return PropertyMapping(name: propertyName, value: value)
            }
        }
        return EntityMapping(
            name: name, sourceEntity: source, destinationEntity: destination, typeName: typeName, needsCode: needsCode,
            attributes: try properties("attributemappings", relationship: false),
            relationships: try properties("relationshipmappings", relationship: true))
    }
}

/// Reads an archived `NSExpression` of a property mapping, for the forms a mapping model can
/// state without code.
enum MappingExpression {
    static func valueSource(base64: String, relationship: Bool) -> MappingModel.ValueSource {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters),
            let plist = try? BinaryPropertyList.parse(data), let archive = plist as? [String: Any],
            let objects = archive["$objects"] as? [Any]
        else {
            return .unsupported("an expression that cannot be read")
        }
        let reader = Reader(objects: objects)
        let root = reader.object((archive["$top"] as? [String: Any])?["root"])
        if let key = reader.sourceKey(root) { return .sourceProperty(key) }
        if relationship, let key = reader.destinationInstancesKey(root) { return .sourceProperty(key) }
        return .unsupported(reader.describe(root))
    }

    private struct Reader {
        let objects: [Any]

        func object(_ reference: Any?) -> [String: Any]? {
            guard let uid = reference as? BinaryPropertyList.UID, uid.value > 0, uid.value < objects.count else {
                return nil
            }
            return objects[uid.value] as? [String: Any]
        }

        func string(_ reference: Any?) -> String? {
            guard let uid = reference as? BinaryPropertyList.UID, uid.value > 0, uid.value < objects.count else {
                return nil
            }
            switch objects[uid.value] {
            case let text as String: return text
            case let object as [String: Any]: return object["NS.string"] as? String
            default: return nil
            }
        }

        func className(_ object: [String: Any]?) -> String? {
            (self.object(object?["$class"]))?["$classname"] as? String
        }

        func arguments(_ object: [String: Any]?) -> [[String: Any]?] {
            (self.object(object?["NSArguments"])?["NS.objects"] as? [Any] ?? []).map { self.object($0) }
        }

        /// `$source.key`: a key path expression on the `source` variable (or Xcode's spelling of it,
        /// the key path `source.key` on the evaluated object), one key deep.
        func sourceKey(_ expression: [String: Any]?) -> String? {
            guard expression?["NSExpressionType"] as? Int == 3, let specifier = arguments(expression).first,
                let path = string(specifier?["NSKeyPath"])
            else { return nil }
            let operand = object(expression?["NSOperand"])
            let keys = path.split(separator: ".").map(String.init)
            switch className(operand) {
            case "NSVariableExpression" where string(operand?["NSVariable"]) == "source":
                return keys.count == 1 ? keys[0] : nil
            case "NSSelfExpression":
                return keys.count == 2 && keys[0] == "source" ? keys[1] : nil
            default:
                return nil
            }
        }

        /// `FUNCTION($manager, "destinationInstancesForEntityMappingNamed:sourceInstances:", name, $source.key)`.
        func destinationInstancesKey(_ expression: [String: Any]?) -> String? {
            guard expression?["NSExpressionType"] as? Int == 4,
                string(expression?["NSSelectorName"]) == "destinationInstancesForEntityMappingNamed:sourceInstances:",
                string(object(expression?["NSOperand"])?["NSVariable"]) == "manager"
            else { return nil }
            let arguments = arguments(expression)
            return arguments.count == 2 ? sourceKey(arguments[1]) : nil
        }

        func describe(_ expression: [String: Any]?) -> String {
            if let selector = string(expression?["NSSelectorName"]) { return "the function '\(selector)'" }
            return "an expression of kind \(className(expression) ?? "unknown")"
        }
    }
}

/// The objects of an `xcmapping.xml` (a Core Data XML store of Xcode's editing objects), read as
/// the XML it is: type, attributes by lowercased name, relationships as lists of object ids.
final class MappingXMLParser: XMLEventHandler {
    struct Object {
        var type: String
        var attributes: [String: String] = [:]
        var relationships: [String: [String]] = [:]
    }

    private var objects: [String: Object] = [:]
    private var current: (id: String, object: Object)?
    private var attributeName: String?
    private var attributeText = ""

    static func objects(in data: Data, file: String) throws -> [String: Object] {
        let handler = MappingXMLParser()
        do {
            try XMLReader.read(data, into: handler)
        } catch let error as XMLReadingError {
            throw ModelError(file: file, reason: "malformed xcmapping.xml: \(error)")
        }
        return handler.objects
    }

    func startElement(_ element: String, attributes: [String: String], line: Int) {
        switch element {
        case "object":
            guard let id = attributes["id"], let type = attributes["type"] else { return }
            current = (id, Object(type: type.uppercased()))
        case "attribute" where current != nil:
            attributeName = attributes["name"]?.lowercased()
            attributeText = ""
        case "relationship" where current != nil:
            guard let name = attributes["name"]?.lowercased() else { return }
            current?.object.relationships[name] = (attributes["idrefs"] ?? "").split(separator: " ").map(String.init)
        default:
            break
        }
    }

    func text(_ string: String) {
        if attributeName != nil { attributeText += string }
    }

    func endElement(_ element: String) {
        switch element {
        case "attribute":
            if let name = attributeName { current?.object.attributes[name] = attributeText }
            attributeName = nil
        case "object":
            if let (id, object) = current { objects[id] = object }
            current = nil
        default:
            break
        }
    }
}
