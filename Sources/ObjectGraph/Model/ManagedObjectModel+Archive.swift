import Foundation

extension ManagedObjectModel {
    /// Reads a model from a keyed archive of Apple's `NSManagedObjectModel`: what Core Data keeps
    /// in a store's `Z_MODELCACHE` (inflated) and what Xcode compiles into a `.mom` file.
    ///
    /// Entities, attributes (type, optional, transient, default value, transformer, renaming
    /// identifier), relationships (destination, inverse, counts, delete rule), inheritance,
    /// abstract entities, user info and uniqueness constraints are read; validation rules and
    /// fetch indexes are not, as nothing that reads a store depends on them.
    ///
    /// - parameter fallbackIdentifier: the version identifier when the archive records none
    ///   (Xcode leaves it empty unless the model sets one).
    /// - throws: ``ModelError`` naming `file`, and the entity and property at fault.
    public convenience init(keyedArchive data: Data, fallbackIdentifier: String, file: String) throws {
        let (entities, identifiers) = try Self.decode(keyedArchive: data, file: file)
        try self.init(entities: entities, versionIdentifier: identifiers.first ?? fallbackIdentifier, file: file)
    }

    /// Reads a model from a keyed archive, naming the version `versionIdentifier` (a `.mom`
    /// file's name, as its `.momd` names versions).
    convenience init(keyedArchive data: Data, versionIdentifier: String, file: String) throws {
        let (entities, _) = try Self.decode(keyedArchive: data, file: file)
        try self.init(entities: entities, versionIdentifier: versionIdentifier, file: file)
    }

    /// The entities of an archived model, and its non-empty version identifiers, sorted.
    private static func decode(keyedArchive data: Data, file: String) throws
        -> (entities: [EntityDescription], identifiers: [String])
    {
        let archive = try ModelArchive(data, file: file)
        let model = try archive.root()
        var entities: [EntityDescription] = []
        for (_, reference) in try archive.dictionary(model["NSEntities"], what: "the model's entities") {
            entities.append(try archive.entity(reference))
        }
        return (entities, archive.strings(in: model["NSVersionIdentifiers"]).filter { !$0.isEmpty }.sorted())
    }
}

/// The objects of a keyed archive, read without Foundation's unarchiver (the archive's classes,
/// `NSEntityDescription` and its kin, do not exist here). Every reference is checked.
private struct ModelArchive {
    let objects: [Any]
    let top: Any?
    let file: String

    init(_ data: Data, file: String) throws {
        self.file = file
        let plist: Any
        do {
            plist = try BinaryPropertyList.parse(data)
        } catch {
            throw ModelError(file: file, reason: "not a compiled model (\(error))")
        }
        guard KeyedArchiveTransformer.isKeyedArchive(plist), let archive = plist as? [String: Any],
            let objects = archive["$objects"] as? [Any]
        else {
            throw ModelError(file: file, reason: "not a compiled model (no keyed archive)")
        }
        self.objects = objects
        top = (archive["$top"] as? [String: Any])?["root"]
    }

    func fail(_ reason: String, entity: String? = nil, property: String? = nil) -> ModelError {
        ModelError(file: file, entity: entity, property: property, reason: "damaged compiled model: \(reason)")
    }

    /// The object a reference points to; nil for a missing one (`$null`) or one out of range.
    func object(_ reference: Any?) -> Any? {
        guard let reference else { return nil }
        guard let uid = reference as? BinaryPropertyList.UID else { return reference }
        guard uid.value > 0, uid.value < objects.count else { return nil }
        return objects[uid.value]
    }

    /// The class name of an archived object.
    func className(_ object: [String: Any]) -> String? {
        (self.object(object["$class"]) as? [String: Any])?["$classname"] as? String
    }

    func instance(_ reference: Any?, of expected: String) -> [String: Any]? {
        guard let object = object(reference) as? [String: Any], className(object) == expected else { return nil }
        return object
    }

    func root() throws -> [String: Any] {
        guard objects.first as? String == "$null", let model = instance(top, of: "NSManagedObjectModel") else {
            throw fail("its root is not an NSManagedObjectModel")
        }
        return model
    }

    func string(_ reference: Any?) -> String? {
        switch object(reference) {
        case let text as String: return text == "$null" ? nil : text
        case let object as [String: Any]: return object["NS.string"] as? String
        default: return nil
        }
    }

    /// The elements of an array or set.
    func array(_ reference: Any?) -> [Any] {
        guard let object = object(reference) as? [String: Any] else { return [] }
        return object["NS.objects"] as? [Any] ?? []
    }

    func strings(in reference: Any?) -> [String] { array(reference).compactMap { string($0) } }

    /// The entries of a dictionary, also Core Data's `NSKnownKeysDictionary1` (keys in its
    /// mapping strategy, values in an array), in key order.
    func dictionary(_ reference: Any?, what: String) throws -> [(key: String, value: Any)] {
        guard let object = object(reference) as? [String: Any] else { return [] }
        let keys: [Any]
        let values: [Any]
        if let plainKeys = object["NS.keys"] as? [Any] {
            keys = plainKeys
            values = object["NS.objects"] as? [Any] ?? []
        } else {
            keys = array((self.object(object["searchMapping"]) as? [String: Any])?["keys"])
            values = array(object["values"])
        }
        guard keys.count == values.count else {
            throw fail("\(what) have \(keys.count) names and \(values.count) values")
        }
        var entries: [(key: String, value: Any)] = []
        for (key, value) in zip(keys, values) {
            guard let name = string(key) else { throw fail("\(what) have a name that is not a string") }
            entries.append((name, value))
        }
        return entries.sorted { $0.key < $1.key }
    }

    func stringDictionary(_ reference: Any?, what: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for (key, value) in try dictionary(reference, what: what) { result[key] = string(value) ?? "\(value)" }
        return result
    }

    // MARK: - Entities and properties

    func entity(_ reference: Any) throws -> EntityDescription {
        guard let entity = instance(reference, of: "NSEntityDescription"),
            let name = string(entity["NSEntityName"]), !name.isEmpty
        else {
            throw fail("an entity without a name")
        }
        let parent = instance(entity["NSSuperentity"], of: "NSEntityDescription")
        let parentName = parent.flatMap { string($0["NSEntityName"]) }
        // An entity's properties include those it inherits; it declares the others.
        let inherited = Set(try parent.map { try dictionary($0["NSProperties"], what: "entity properties") }?
            .map(\.key) ?? [])
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        for (propertyName, value) in try dictionary(entity["NSProperties"], what: "\(name)'s properties")
        where !inherited.contains(propertyName) {
            guard let property = object(value) as? [String: Any] else {
                throw fail("a property that is missing", entity: name, property: propertyName)
            }
            switch className(property) {
            case "NSAttributeDescription":
                if let attribute = try attribute(property, named: propertyName, of: name) {
                    attributes.append(attribute)
                }
            case "NSRelationshipDescription":
                relationships.append(try relationship(property, named: propertyName, of: name))
            default:
                // Fetched and derived properties are not stored in the entity's table.
                continue
            }
        }
        let renaming = string(entity["NSRenamingIdentifier"])
        let constraints = array(entity["NSUniqueTuples"]).map { strings(in: $0) }.filter { !$0.isEmpty }
        return EntityDescription(
            name: name, parent: parentName, isAbstract: entity["NSIsAbstract"] as? Bool ?? false,
            attributes: attributes, relationships: relationships,
            userInfo: try stringDictionary(entity["NSUserInfo"], what: "\(name)'s user info"),
            managedObjectClassName: string(entity["NSClassNameForEntity"]),
            elementID: renaming == name ? nil : renaming, uniquenessConstraints: constraints)
    }

    /// `NSAttributeType` numbers (Core Data's `NSAttributeDescription.AttributeType` raw values).
    private static let attributeTypes: [Int: AttributeType] = [
        100: .integer16, 200: .integer32, 300: .integer64, 400: .decimal, 500: .double, 600: .float,
        700: .string, 800: .boolean, 900: .date, 1000: .binary, 1100: .uuid, 1200: .uri, 1800: .transformable,
    ]

    /// The attribute, or nil for a transient one of a type no store holds (undefined).
    private func attribute(_ property: [String: Any], named name: String, of entity: String) throws
        -> AttributeDescription?
    {
        let isTransient = property["NSIsTransient"] as? Bool ?? false
        let number = property["NSAttributeType"] as? Int ?? 0
        guard let type = Self.attributeTypes[number] else {
            if isTransient { return nil }
            throw ModelError(
                file: file, entity: entity, property: name,
                reason: "attribute type \(number) (\(number == 2100 ? "composite" : "unknown")) is not supported")
        }
        let renaming = string(property["NSRenamingIdentifier"])
        return AttributeDescription(
            name: name, type: type, isOptional: property["NSIsOptional"] as? Bool ?? false,
            isTransient: isTransient, defaultValueString: defaultValueText(property["NSDefaultValue"]),
            valueTransformerName: string(property["NSValueTransformerName"]),
            userInfo: try stringDictionary(property["NSUserInfo"], what: "\(entity).\(name)'s user info"),
            elementID: renaming == name ? nil : renaming)
    }

    /// A default value as Xcode's model file writes it.
    private func defaultValueText(_ reference: Any?) -> String? {
        switch object(reference) {
        case let flag as Bool: return flag ? "YES" : "NO"
        case let number as Int: return String(number)
        case let number as Double: return String(number)
        case let object as [String: Any]:
            if let time = object["NS.time"] as? Double { return String(time) }
            return object["NS.string"] as? String
        case let text as String: return text == "$null" ? nil : text
        default: return nil
        }
    }

    /// `NSDeleteRule` numbers (Core Data's `NSDeleteRule` raw values).
    private static let deleteRules: [Int: DeleteRule] = [0: .noAction, 1: .nullify, 2: .cascade, 3: .deny]

    private func relationship(_ property: [String: Any], named name: String, of entity: String) throws
        -> RelationshipDescription
    {
        let destination =
            string(property["_NSDestinationEntityName"])
            ?? instance(property["NSDestinationEntity"], of: "NSEntityDescription").flatMap {
                string($0["NSEntityName"])
            }
        guard let destination else {
            throw fail("a relationship without a destination", entity: entity, property: name)
        }
        let inverse =
            string(property["_NSInverseRelationshipName"])
            ?? instance(property["NSInverseRelationship"], of: "NSRelationshipDescription").flatMap {
                string($0["NSPropertyName"])
            }
        let ruleNumber = property["NSDeleteRule"] as? Int ?? 1
        guard let rule = Self.deleteRules[ruleNumber] else {
            throw fail("delete rule \(ruleNumber)", entity: entity, property: name)
        }
        let maxCount = property["NSMaxCount"] as? Int ?? 0
        let renaming = string(property["NSRenamingIdentifier"])
        // Core Data's rule: a relationship is to-one exactly when at most one destination is allowed.
        return RelationshipDescription(
            name: name, destination: destination, inverse: inverse, isToMany: maxCount != 1, deleteRule: rule,
            isOptional: property["NSIsOptional"] as? Bool ?? false, minCount: property["NSMinCount"] as? Int ?? 0,
            maxCount: maxCount,
            userInfo: try stringDictionary(property["NSUserInfo"], what: "\(entity).\(name)'s user info"),
            elementID: renaming == name ? nil : renaming)
    }
}
