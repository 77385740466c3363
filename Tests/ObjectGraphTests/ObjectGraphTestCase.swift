import Foundation
import XCTest
@testable import ObjectGraph

/// Reverses a string's UTF-8 bytes and records every place it was told, so tests can
/// see that transformed values are stored encoded and bound to their place.
final class ReversingTransformer: ValueTransformer {
    var places: [ValuePlace] = []

    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data {
        places.append(place)
        return Data((value as! String).utf8.reversed())
    }

    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any {
        places.append(place)
        return String(decoding: data.reversed(), as: UTF8.self)
    }
}

extension XCTestCase {
    /// The objects of `entity` in `context` that match a predicate format, if one is given.
    func fetch(_ entity: String, _ context: ManagedObjectContext, _ format: String? = nil,
               _ arguments: Any...) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        if let format { request.predicate = try ObjectGraph.Predicate(format: format, argumentArray: arguments) }
        return try context.fetch(request)
    }
}

enum StoreKind: String, CaseIterable {
    case sqlite, inMemory
}

/// Gives each test a temporary directory and stacks over the Shop fixture model, and runs
/// a test body against both the SQLite and the in-memory store.
class ObjectGraphTestCase: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("og-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    static var fixturesURL: URL { Bundle.module.url(forResource: "Fixtures", withExtension: nil)! }

    static func shopModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(contentsOf: fixturesURL.appendingPathComponent("Shop.xcdatamodeld"))
    }

    struct Stack {
        let coordinator: PersistentStoreCoordinator
        let context: ManagedObjectContext
        let transformer: ReversingTransformer
        let notes: PersistentStore
        let passwords: PersistentStore
    }

    /// A coordinator with the Notes and Passwords configurations in two stores of `kind`.
    func makeStack(_ kind: StoreKind, model: ManagedObjectModel? = nil, name: String = "shop") throws -> Stack {
        let model = try model ?? Self.shopModel()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model, busyTimeout: 5)
        let transformer = ReversingTransformer()
        coordinator.valueTransformers.register(transformer, forName: "TestReversing")
        let type: StoreType = kind == .sqlite ? .sqlite : .inMemory
        let notes = try coordinator.addPersistentStore(type: type, configuration: "Notes", at: directory.appendingPathComponent("\(name)-Notes.sqlite"))
        let passwords = try coordinator.addPersistentStore(type: type, configuration: "Passwords", at: directory.appendingPathComponent("\(name)-Passwords.sqlite"))
        return Stack(coordinator: coordinator, context: ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter()),
                     transformer: transformer, notes: notes, passwords: passwords)
    }

    /// A coordinator on a new SQLite store of `entities` (objects of `classes` by entity name),
    /// filled by `seed` and saved.
    func seededStore(_ entities: [EntityDescription], history: Bool = false,
                     classes: [String: ManagedObject.Type] = [:], seed: (ManagedObjectContext) throws -> Void)
        throws -> (coordinator: PersistentStoreCoordinator, url: URL, model: ManagedObjectModel) {
        let model = try ManagedObjectModel(entities: entities)
        for (name, type) in classes { model.setClass(type, forEntityName: name) }
        let url = directory.appendingPathComponent("store-\(UUID().uuidString).sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.tracksPersistentHistory = history
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let writer = ManagedObjectContext(coordinator: coordinator)
        try seed(writer)
        try writer.save()
        return (coordinator, url, model)
    }

    /// Parents with named children (a one-to-many, nullify both ways), ordered or not.
    static func family(ordered: Bool) -> [EntityDescription] {
        [EntityDescription(
            name: "Parent", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "children", destination: "Child", inverse: "parent",
                                                    isToMany: true, deleteRule: .nullify, isOrdered: ordered)]),
         EntityDescription(
            name: "Child", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "parent", destination: "Parent", inverse: "children",
                                                    deleteRule: .nullify)])]
    }

    /// Item (name, note) ←→ Tag (name), many-to-many, Nullify both ways; the entities named in
    /// `unique` are unique by name.
    static func itemsAndTags(unique: Set<String> = []) -> [EntityDescription] {
        let item = EntityDescription(
            name: "Item", attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "note", type: .string)],
            relationships: [RelationshipDescription(name: "tags", destination: "Tag", inverse: "items",
                                                    isToMany: true, deleteRule: .nullify)],
            uniquenessConstraints: unique.contains("Item") ? [["name"]] : [])
        let tag = EntityDescription(
            name: "Tag", attributes: [AttributeDescription(name: "name", type: .string)],
            relationships: [RelationshipDescription(name: "items", destination: "Item", inverse: "tags",
                                                    isToMany: true, deleteRule: .nullify)],
            uniquenessConstraints: unique.contains("Tag") ? [["name"]] : [])
        return [item, tag]
    }

    /// A context of another coordinator on the store at `url`, as another process would open it.
    func elsewhere(_ url: URL, _ model: ManagedObjectModel, history: Bool = false) throws -> ManagedObjectContext {
        let second = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.tracksPersistentHistory = history
        try second.addPersistentStore(type: .sqlite, at: url, options: options)
        return ManagedObjectContext(coordinator: second)
    }

    /// Runs `body` once per store kind, naming the kind in any failure.
    func forEachStoreKind(_ body: (StoreKind) throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        for kind in StoreKind.allCases {
            do {
                try body(kind)
            } catch {
                XCTFail("[\(kind)] \(error)", file: file, line: line)
            }
        }
    }

    /// Runs a test helper in a child process: this test binary, running only `entryPoint`
    /// (by default `ChildProcessEntry`), with optional pipes for its standard input and output.
    func spawnChild(action: String, environment: [String: String],
                    entryPoint: String = "ObjectGraphTests.ChildProcessEntry/testChildProcessEntryPoint",
                    input: Pipe? = nil, output: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = [entryPoint]
        var env = ProcessInfo.processInfo.environment
        env["OG_CHILD_ACTION"] = action
        env["OG_CHILD_DIR"] = directory.path
        env.merge(environment) { _, new in new }
        process.environment = env
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        if let input { process.standardInput = input }
        try process.run()
        return process
    }
}

/// Shorthands for tests.
extension ManagedObjectContext {
    func objects(_ entity: String, _ format: String? = nil, _ arguments: Any?..., sort: [FetchSortDescriptor] = []) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        if let format { request.predicate = try Predicate(format: format, argumentArray: arguments) }
        request.sortDescriptors = sort
        return try fetch(request)
    }

    func names(_ entity: String, _ format: String? = nil, _ arguments: Any?...) throws -> [String] {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        if let format { request.predicate = try Predicate(format: format, argumentArray: arguments) }
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        return try fetch(request).map { $0["name"] as? String ?? "<nil>" }
    }
}
