import Foundation

/// Where and how a ``PersistentContainer`` opens one store, as `NSPersistentStoreDescription`.
///
/// As in Core Data, a description made from a URL migrates a store of an older model version
/// automatically, inferring the mapping.
public struct PersistentStoreDescription: Sendable, CustomStringConvertible {
    /// The kind of store: SQLite (the default), in-memory, binary or XML.
    public var type: StoreType
    /// The store's file; nil for an in-memory store.
    public var url: URL?
    /// The model configuration whose entities the store holds; nil for all of them.
    public var configuration: String?
    /// How the store is opened (migration, history tracking, file mode...).
    public var options: StoreOptions

    /// A description of a store of `type` at `url` (SQLite by default).
    public init(url: URL?, type: StoreType = .sqlite) {
        self.url = url
        self.type = type
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        self.options = options
    }

    /// The store's kind and place, for messages.
    public var description: String { "\(type) store at \(url?.path ?? "(memory)")" }
}

/// A model, a coordinator and its stores, and contexts on them, set up in one place, as
/// `NSPersistentContainer`.
///
/// For example:
///
/// ```swift
/// let container = PersistentContainer(name: "Notes", model: model)
/// container.loadPersistentStores { description, error in
///     if let error { print("cannot open \(description): \(error)") }
/// }
/// let note = container.viewContext.insertNewObject(forEntityName: "Note")
/// try container.viewContext.save()
/// ```
///
/// - warning: ``viewContext`` is a main-queue context: use it on the main thread.
public final class PersistentContainer: @unchecked Sendable {
    /// The container's name, which names its default store's file.
    public let name: String
    /// The model of every store and context of the container.
    public let managedObjectModel: ManagedObjectModel
    /// The coordinator the stores are added to and the contexts read and write through.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The stores ``loadPersistentStores(completionHandler:)`` opens. By default one SQLite
    /// store, `<name>.sqlite` in ``defaultDirectoryURL()``.
    public var persistentStoreDescriptions: [PersistentStoreDescription]
    /// Where the container's contexts post their notifications.
    public let notificationCenter: NotificationCenter

    /// A container for `model` named `name` (the default store's file name).
    public init(name: String, model: ManagedObjectModel, notificationCenter: NotificationCenter = .default) {
        self.name = name
        self.managedObjectModel = model
        self.notificationCenter = notificationCenter
        persistentStoreCoordinator = PersistentStoreCoordinator(managedObjectModel: model)
        persistentStoreDescriptions = [
            PersistentStoreDescription(url: Self.defaultDirectoryURL().appendingPathComponent("\(name).sqlite"))
        ]
    }

    /// The directory default stores live in: the user's application support directory
    /// (`~/.local/share` on Linux), as Core Data's.
    public class func defaultDirectoryURL() -> URL {
        FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.homeDirectoryForCurrentUser
    }

    /// Opens each store of ``persistentStoreDescriptions`` (creating its directory and file
    /// when needed), then calls `completionHandler` once per description, with the error
    /// that kept it from opening or nil; synchronously, as Core Data does by default.
    public func loadPersistentStores(
        completionHandler: (PersistentStoreDescription, Error?) -> Void
    ) {
        for description in persistentStoreDescriptions {
            do {
                if let directory = description.url?.deletingLastPathComponent(), description.type != .inMemory {
                    try FileManager.default.createDirectory(
                        at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                }
                try persistentStoreCoordinator.addPersistentStore(
                    type: description.type, configuration: description.configuration, at: description.url,
                    options: description.options)
                completionHandler(description, nil)
            } catch {
                completionHandler(description, error)
            }
        }
    }

    /// The main-queue context for the user interface, made on first use.
    public private(set) lazy var viewContext = ManagedObjectContext(
        coordinator: persistentStoreCoordinator, notificationCenter: notificationCenter, concurrencyType: .mainQueue)

    /// A new private-queue context on the container's coordinator, for work off the main thread.
    public func newBackgroundContext() -> ManagedObjectContext {
        ManagedObjectContext(coordinator: persistentStoreCoordinator, notificationCenter: notificationCenter)
    }

    /// Runs `block` on a new background context's queue, later; returns at once.
    public func performBackgroundTask(_ block: @escaping @Sendable (ManagedObjectContext) -> Void) {
        let context = newBackgroundContext()
        context.perform { block(context) }
    }
}
