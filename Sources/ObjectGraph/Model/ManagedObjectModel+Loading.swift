import Foundation
import XMLReading

extension ManagedObjectModel {
    /// Loads the current version of an Xcode model.
    ///
    /// `url` names an `.xcdatamodeld` folder (its `.xccurrentversion` picks the version;
    /// with a single version that one is used) or a single `.xcdatamodel` folder.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "Model.xcdatamodeld"))
    /// ```
    ///
    /// - throws: ``ModelError`` naming the file, entity and property at fault.
    public convenience init(contentsOf url: URL) throws {
        let fileManager = FileManager.default
        try self.init(
            modelName: url.lastPathComponent,
            listVersions: { (try? fileManager.contentsOfDirectory(atPath: url.path)) ?? [] },
            readFile: { try? Data(contentsOf: url.appendingPathComponent($0)) },
            isSingleVersion: url.pathExtension == "xcdatamodel"
        )
    }

    /// Loads the current version of an `.xcdatamodeld` whose files are given in memory,
    /// keyed by their path inside the folder (`"Model.xcdatamodel/contents"`, `".xccurrentversion"`).
    public convenience init(xcdatamodeldFiles files: [String: Data], modelName: String) throws {
        try self.init(
            modelName: modelName,
            listVersions: { Set(files.keys.compactMap { $0.split(separator: "/").first.map(String.init) }).sorted() },
            readFile: { files[$0] },
            isSingleVersion: false
        )
    }

    private convenience init(
        modelName: String, listVersions: () -> [String], readFile: (String) -> Data?, isSingleVersion: Bool
    ) throws {
        let versionFolder: String?
        if isSingleVersion {
            versionFolder = nil
        } else if let plistData = readFile(".xccurrentversion") {
            let plist = try? BinaryPropertyList.foundationPropertyList(from: plistData) as? [String: Any]
            guard let name = plist?["_XCCurrentVersionName"] as? String else {
                throw ModelError(file: "\(modelName)/.xccurrentversion", reason: "no _XCCurrentVersionName key")
            }
            versionFolder = name
        } else {
            let versions = listVersions().filter { $0.hasSuffix(".xcdatamodel") }
            guard versions.count == 1 else {
                throw ModelError(file: modelName, reason: versions.isEmpty
                    ? "no .xcdatamodel version inside"
                    : "several versions and no .xccurrentversion to choose one")
            }
            versionFolder = versions[0]
        }
        let contentsPath = versionFolder.map { "\($0)/contents" } ?? "contents"
        let fileName = "\(modelName)/\(contentsPath)"
        guard let xml = readFile(contentsPath) else {
            throw ModelError(file: fileName, reason: "file not found")
        }
        let parsed = try ModelXMLParser.parse(xml, file: fileName)
        let identifier = (versionFolder ?? modelName).replacingOccurrences(of: ".xcdatamodel", with: "")
        try self.init(
            entities: parsed.entities, configurations: parsed.configurations, versionIdentifier: identifier,
            file: fileName)
    }
}

/// Reads Xcode's `contents` XML, or its compiled form (`XMLTreeElement.compiled()`, as a build
/// embeds it), into entity descriptions.
final class ModelXMLParser: XMLEventHandler {
    struct Result {
        var entities: [EntityDescription]
        var configurations: [String: [String]]
    }

    private let file: String
    private var entities: [EntityDescription] = []
    private var configurations: [String: [String]] = [:]
    // The entity being read, with its parts.
    private var entityAttributes: [String: String]?
    private var attributes: [AttributeDescription] = []
    private var relationships: [RelationshipDescription] = []
    private var entityUserInfo: [String: String] = [:]
    private var uniquenessConstraints: [[String]] = []
    private var currentConfiguration: String?
    // userInfo entries go to the innermost open element of these kinds.
    private enum Owner { case entity, attribute, relationship }
    private var userInfoOwner: Owner?
    private var ownerStack: [Owner] = []
    private var sawModel = false

    private init(file: String) { self.file = file }

    static func parse(_ data: Data, file: String) throws -> Result {
        let handler = ModelXMLParser(file: file)
        do {
            if XMLTreeElement.isCompiled(data) {
                try XMLTreeElement(compiled: data).replay(into: handler)
            } else {
                try XMLReader.read(data, into: handler)
            }
        } catch let error as XMLReadingError {
            throw ModelError(file: file, reason: "malformed XML: \(error)")
        }
        guard handler.ownerStack.isEmpty, handler.sawModel else {
            throw ModelError(file: file, reason: "malformed XML: no <model> element, or one not closed")
        }
        return Result(entities: handler.entities, configurations: handler.configurations)
    }

    func text(_ text: String) {}

    func startElement(_ element: String, attributes dict: [String: String], line: Int) throws {
        switch element {
        case "model":
            sawModel = true
        case "entity":
            guard let name = dict["name"], !name.isEmpty else {
                throw ModelError(file: file, reason: "an entity has no name")
            }
            entityAttributes = dict
            attributes = []
            relationships = []
            entityUserInfo = [:]
            uniquenessConstraints = []
            ownerStack.append(.entity)
        case "uniquenessConstraint":
            uniquenessConstraints.append([])
        case "constraint":
            guard let value = dict["value"], !uniquenessConstraints.isEmpty else { return }
            uniquenessConstraints[uniquenessConstraints.count - 1].append(value)
        case "attribute":
            let entityName = entityAttributes?["name"]
            guard let name = dict["name"] else {
                throw ModelError(file: file, entity: entityName, reason: "an attribute has no name")
            }
            guard let typeName = dict["attributeType"], let type = AttributeType(rawValue: typeName) else {
                throw ModelError(file: file, entity: entityName, property: name,
                                 reason: "unknown attribute type '\(dict["attributeType"] ?? "")'")
            }
            var attribute = AttributeDescription(
                name: name, type: type, isOptional: isTruthy(dict["optional"]),
                isTransient: isTruthy(dict["transient"]),
                isIndexed: isTruthy(dict["indexed"]), defaultValueString: dict["defaultValueString"],
                minValueString: dict["minValueString"], maxValueString: dict["maxValueString"],
                regularExpression: dict["regularExpressionString"], valueTransformerName: dict["valueTransformerName"],
                elementID: dict["elementID"])
            attribute.preservesValueInHistoryOnDeletion = isTruthy(dict["preserveAfterDeletion"])
            attributes.append(attribute)
            ownerStack.append(.attribute)
        case "relationship":
            let entityName = entityAttributes?["name"]
            guard let name = dict["name"] else {
                throw ModelError(file: file, entity: entityName, reason: "a relationship has no name")
            }
            guard let destination = dict["destinationEntity"] else {
                throw ModelError(file: file, entity: entityName, property: name, reason: "no destination entity")
            }
            let ruleName = dict["deletionRule"] ?? "Nullify"
            guard let rule = DeleteRule(rawValue: ruleName) else {
                throw ModelError(
                    file: file, entity: entityName, property: name, reason: "unknown deletion rule '\(ruleName)'")
            }
            let toMany = isTruthy(dict["toMany"])
            relationships.append(RelationshipDescription(
                name: name, destination: destination, inverse: dict["inverseName"], isToMany: toMany, deleteRule: rule,
                isOptional: isTruthy(dict["optional"]), minCount: Int(dict["minCount"] ?? "") ?? 0,
                maxCount: Int(dict["maxCount"] ?? "") ?? 0, elementID: dict["elementID"],
                isOrdered: isTruthy(dict["ordered"])))
            ownerStack.append(.relationship)
        case "entry":
            guard let key = dict["key"], let value = dict["value"] else { return }
            switch ownerStack.last {
            case .entity: entityUserInfo[key] = value
            case .attribute: attributes[attributes.count - 1].userInfo[key] = value
            case .relationship: relationships[relationships.count - 1].userInfo[key] = value
            case nil: break
            }
        case "configuration":
            currentConfiguration = dict["name"]
            if let name = currentConfiguration { configurations[name, default: []] = configurations[name] ?? [] }
        case "memberEntity":
            if let configuration = currentConfiguration, let name = dict["name"] {
                configurations[configuration, default: []].append(name)
            }
        default:
            break
        }
    }

    func endElement(_ element: String) {
        switch element {
        case "entity":
            guard let dict = entityAttributes, let name = dict["name"] else { return }
            entities.append(EntityDescription(
                name: name, parent: dict["parentEntity"], isAbstract: isTruthy(dict["isAbstract"]),
                attributes: attributes, relationships: relationships, userInfo: entityUserInfo,
                managedObjectClassName: dict["representedClassName"], elementID: dict["elementID"],
                uniquenessConstraints: uniquenessConstraints.filter { !$0.isEmpty }))
            entityAttributes = nil
            ownerStack.removeLast()
        case "attribute", "relationship":
            ownerStack.removeLast()
        case "configuration":
            currentConfiguration = nil
        default:
            break
        }
    }
}
