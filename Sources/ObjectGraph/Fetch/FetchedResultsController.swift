import Foundation

/// The position of an object in a fetched results controller: a section and an item in it.
public struct FetchedIndexPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var section: Int
    public var item: Int

    public init(item: Int, section: Int) {
        self.section = section
        self.item = item
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.section, lhs.item) < (rhs.section, rhs.item) }

    public var description: String { "[\(section), \(item)]" }
}

/// One section of a fetched results controller, as `NSFetchedResultsSectionInfo`.
public struct FetchedResultsSection {
    /// The section key path's value for the section's objects ("" when it is nil, or when the
    /// controller has no section key path).
    public let name: String
    /// The title of the section in an index (by default the name's capitalised first letter).
    public let indexTitle: String?
    /// The section's objects, in the request's order.
    public let objects: [ManagedObject]

    public var numberOfObjects: Int { objects.count }
}

/// What happened to an object or a section, as `NSFetchedResultsChangeType`.
public enum FetchedResultsChangeType: Sendable {
    case insert, delete, move, update
}

/// What a delegate sees of a controller: its sections (typed access is on the controller itself).
public protocol FetchedResultsControlling: AnyObject {
    var sections: [FetchedResultsSection] { get }
    var sectionNameKeyPath: String? { get }
}

/// Told how a fetched results controller's results change, as `NSFetchedResultsControllerDelegate`.
///
/// The callbacks of one change form a batch, in a table view's terms: `indexPath` and
/// deleted section indexes count in the results before the change, `newIndexPath` and
/// inserted section indexes in the results after it. Apply deletions (and the sources of
/// moves) first, then insertions (and move destinations) in ascending order, and the old
/// results become the new ones. While the callbacks run, the controller already holds the
/// new results. Every method has an empty default.
public protocol FetchedResultsControllerDelegate: AnyObject {
    /// Called before the first change of a batch.
    func controllerWillChangeContent(_ controller: any FetchedResultsControlling)
    /// An object was inserted (`newIndexPath`), deleted (`indexPath`), moved (both) or
    /// updated in place (both: where it was and where it is now).
    func controller(_ controller: any FetchedResultsControlling, didChange object: ManagedObject,
                    at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType,
                    newIndexPath: FetchedIndexPath?)
    /// A section was inserted (index in the new results) or deleted (index in the old ones).
    func controller(_ controller: any FetchedResultsControlling, didChange section: FetchedResultsSection,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType)
    /// Called after the last change of a batch.
    func controllerDidChangeContent(_ controller: any FetchedResultsControlling)
    /// The index title of a section; nil keeps the default (the name's capitalised first letter).
    func controller(_ controller: any FetchedResultsControlling,
                    sectionIndexTitleForSectionName sectionName: String) -> String?
    /// Following a change failed (the store could not be read); the results are unchanged.
    func controller(_ controller: any FetchedResultsControlling, didFailWith error: Error)
}

extension FetchedResultsControllerDelegate {
    public func controllerWillChangeContent(_ controller: any FetchedResultsControlling) {}
    public func controller(_ controller: any FetchedResultsControlling, didChange object: ManagedObject,
                           at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType,
                           newIndexPath: FetchedIndexPath?) {}
    public func controller(_ controller: any FetchedResultsControlling, didChange section: FetchedResultsSection,
                           atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {}
    public func controllerDidChangeContent(_ controller: any FetchedResultsControlling) {}
    public func controller(_ controller: any FetchedResultsControlling,
                           sectionIndexTitleForSectionName sectionName: String) -> String? { nil }
    public func controller(_ controller: any FetchedResultsControlling, didFailWith error: Error) {}
}

/// Fetches objects in sections and follows their changes, as `NSFetchedResultsController`.
///
/// After ``performFetch()`` the controller holds the request's objects split into sections
/// by ``sectionNameKeyPath`` and tells its delegate of every later change: made in its
/// context (announced when the context processes pending changes, at latest when it
/// saves), merged into it from another context (``ManagedObjectContext/mergeChanges(fromContextDidSave:)``),
/// or committed by another process, which ``processExternalChanges()`` (a poll) and
/// ``waitForExternalChanges(timeout:)`` detect cheaply through SQLite's `data_version`.
///
/// For example:
///
/// ```swift
/// var request = FetchRequest<ManagedObject>(entityName: "System")
/// request.sortDescriptors = [FetchSortDescriptor(key: "category.name"), FetchSortDescriptor(key: "name")]
/// let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context,
///                                           sectionNameKeyPath: "category.name", cacheName: "Systems")
/// controller.delegate = self
/// try controller.performFetch()
/// let first = controller.object(at: FetchedIndexPath(item: 0, section: 0))
/// ```
///
/// The first sort descriptor must order the objects by the section key path, so each
/// section's objects are together. Changes to related objects that only a predicate through
/// a relationship would notice are seen at the next change of the fetched entity.
///
/// - warning: With a cache name, the section names are written to a file in the cache
///   directory (mode 0600). Do not use a cache when section names are secret.
public final class FetchedResultsController<Result: ManagedObject>: FetchedResultsControlling {
    /// The request; change it only before ``performFetch()`` (or call it again afterwards).
    public var fetchRequest: FetchRequest<Result>
    public let managedObjectContext: ManagedObjectContext
    /// The key path whose value names an object's section; nil for a single section.
    public let sectionNameKeyPath: String?
    /// The name of the persisted section cache, or nil for none.
    public let cacheName: String?
    /// Where cache files are kept.
    public let cacheDirectory: URL
    public weak var delegate: FetchedResultsControllerDelegate?

    /// The objects in order, or nil before ``performFetch()``.
    public private(set) var fetchedObjects: [Result]?
    /// The sections in order; empty before ``performFetch()``.
    public private(set) var sections: [FetchedResultsSection] = []
    /// True when the last ``performFetch()`` took its sections from the cache.
    public private(set) var sectionsCameFromCache = false

    private var indexPaths: [ObjectIdentifier: FetchedIndexPath] = [:]
    private var observer: NSObjectProtocol?
    private var isRefreshing = false
    private var refreshAgain = false
    private var pendingUpdated: Set<ObjectIdentifier> = []
    private var trackingError: Error?
    private var relevantEntityNames: Set<String> = []

    /// Creates a controller; nothing is fetched until ``performFetch()``.
    ///
    /// - parameter cacheDirectory: where the section cache lives; by default
    ///   `$XDG_CACHE_HOME/ObjectGraph/FetchedResults` (or `~/.cache/...`).
    public init(fetchRequest: FetchRequest<Result>, managedObjectContext: ManagedObjectContext,
                sectionNameKeyPath: String? = nil, cacheName: String? = nil, cacheDirectory: URL? = nil) {
        self.fetchRequest = fetchRequest
        self.managedObjectContext = managedObjectContext
        self.sectionNameKeyPath = sectionNameKeyPath
        self.cacheName = cacheName
        self.cacheDirectory = cacheDirectory ?? Self.defaultCacheDirectory
    }

    deinit {
        if let observer { managedObjectContext.notificationCenter.removeObserver(observer) }
    }

    static var defaultCacheDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
        return base.appendingPathComponent("ObjectGraph/FetchedResults")
    }

    // MARK: - Fetching

    /// Fetches the request's objects, splits them into sections (from the cache when it is
    /// still valid), and starts following changes.
    ///
    /// - throws: ``ObjectGraphError`` for an unknown entity or key path, a store error, or
    ///   134060 when the objects are not ordered by the section key path.
    public func performFetch() throws {
        guard let entity = managedObjectContext.model.entity(named: fetchRequest.entityName) else {
            throw ObjectGraphError(code: .objectNotFound,
                                   message: "the model has no entity named '\(fetchRequest.entityName)'")
        }
        if let sectionNameKeyPath, !entity.resolves(keyPath: sectionNameKeyPath) {
            throw ObjectGraphError(code: .objectNotFound,
                                   message: "section key path '\(sectionNameKeyPath)' not found in entity "
                                       + entity.name)
        }
        relevantEntityNames = relevantEntities(of: entity)
        // The baseline for outside changes is taken before reading, so none falls in between.
        try managedObjectContext.mergeExternalChanges()
        let objects = try currentObjects()
        let cache = try cacheName.flatMap { _ in
            try SectionCache.Key(request: fetchRequest, sectionNameKeyPath: sectionNameKeyPath,
                                 context: managedObjectContext)
        }
        if let cache, let cached = loadCache(cache), cached.counts.reduce(0, +) == objects.count {
            sections = slice(objects, into: cached)
            sectionsCameFromCache = true
        } else {
            sections = try makeSections(objects)
            sectionsCameFromCache = false
            if let cache { saveCache(cache) }
        }
        fetchedObjects = objects
        indexPaths = Self.indexPaths(of: sections)
        startObserving()
    }

    /// The objects the request matches now, with the context's unsaved changes applied.
    private func currentObjects() throws -> [Result] {
        let context = managedObjectContext
        var objects = try context.fetch(fetchRequest)
        guard fetchRequest.includesPendingChanges, !context.updatedSet.isEmpty else { return objects }
        // The store matched and sorted stored values; unsaved updates may change both.
        let entity = context.model.entity(named: fetchRequest.entityName)
        let pending = context.updatedSet.objects.compactMap { object -> Result? in
            guard let entity,
                  fetchRequest.includesSubentities ? object.entity.isKind(of: entity) : object.entity === entity,
                  !context.deletedSet.contains(object) else { return nil }
            return object as? Result
        }
        if !pending.isEmpty {
            let pendingIDs = Set(pending.map(ObjectIdentifier.init))
            let predicate = fetchRequest.predicate
            objects.removeAll { pendingIDs.contains(ObjectIdentifier($0)) && !(predicate?.evaluate(with: $0) ?? true) }
            let present = Set(objects.map(ObjectIdentifier.init))
            objects += pending.filter {
                !present.contains(ObjectIdentifier($0)) && (predicate?.evaluate(with: $0) ?? true)
            }
        }
        return context.sorted(objects, by: fetchRequest.sortDescriptors).compactMap { $0 as? Result }
    }

    /// The entities whose changes can change the results: the fetched ones and those reached
    /// by the sort and section key paths.
    private func relevantEntities(of entity: EntityDescription) -> Set<String> {
        var names = Set(entity.rootEntity.selfAndDescendants.map(\.name))
        for keyPath in fetchRequest.sortDescriptors.map(\.key) + [sectionNameKeyPath].compactMap({ $0 }) {
            var current: EntityDescription? = entity
            for key in keyPath.split(separator: ".").map(String.init) {
                guard let step = current, let relationship = step.relationship(named: key) else { break }
                current = step.destination(of: relationship)
                if let current { names.formUnion(current.rootEntity.selfAndDescendants.map(\.name)) }
            }
        }
        return names
    }

    // MARK: - Sections

    /// The section name of an object: its value at the section key path (split into `steps`), "" when nil.
    private func sectionName(of object: ManagedObject, steps: ArraySlice<String>) -> String {
        switch object.value(forKeyPath: steps) {
        case nil: return ""
        case let text as String: return text
        case let value?: return "\(value)"
        }
    }

    /// The index title for a section name: the delegate's, or the name's capitalised first letter.
    public func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        if let title = delegate?.controller(self, sectionIndexTitleForSectionName: sectionName) { return title }
        return sectionName.first.map { String($0).uppercased() }
    }

    /// The distinct index titles of the sections, in order.
    public var sectionIndexTitles: [String] {
        var seen: Set<String> = []
        return sections.compactMap(\.indexTitle).filter { seen.insert($0).inserted }
    }

    /// The first section with an index title, or nil when none has it.
    public func section(forSectionIndexTitle title: String) -> Int? {
        sections.firstIndex { $0.indexTitle == title }
    }

    private func makeSections(_ objects: [Result]) throws -> [FetchedResultsSection] {
        guard let sectionNameKeyPath else {
            return [FetchedResultsSection(name: "", indexTitle: nil, objects: objects)]
        }
        let steps = ManagedObject.steps(of: sectionNameKeyPath)
        var sections: [FetchedResultsSection] = []
        var names: [String] = []
        var members: [[ManagedObject]] = []
        for object in objects {
            let name = sectionName(of: object, steps: steps)
            if name == names.last {
                members[members.count - 1].append(object)
            } else {
                guard !names.contains(name) else {
                    throw ObjectGraphError(code: .invalidRequest,
                                           message: "the objects are not ordered by the section key path '"
                                               + sectionNameKeyPath
                                               + "': section '\(name)' comes twice; sort by it first")
                }
                names.append(name)
                members.append([object])
            }
        }
        for (name, objects) in zip(names, members) {
            sections.append(FetchedResultsSection(name: name, indexTitle: sectionIndexTitle(forSectionName: name),
                                                  objects: objects))
        }
        return sections
    }

    private static func indexPaths(of sections: [FetchedResultsSection]) -> [ObjectIdentifier: FetchedIndexPath] {
        var paths: [ObjectIdentifier: FetchedIndexPath] = [:]
        for (sectionIndex, section) in sections.enumerated() {
            for (item, object) in section.objects.enumerated() {
                paths[ObjectIdentifier(object)] = FetchedIndexPath(item: item, section: sectionIndex)
            }
        }
        return paths
    }

    // MARK: - Access

    /// The object at an index path.
    ///
    /// - precondition: the index path is within ``sections``.
    public func object(at indexPath: FetchedIndexPath) -> Result {
        precondition(sections.indices.contains(indexPath.section)
                     && sections[indexPath.section].objects.indices.contains(indexPath.item),
                     "Index path \(indexPath) is outside the fetched results")
        // Sections hold only objects fetched as Result.
        return sections[indexPath.section].objects[indexPath.item] as! Result
    }

    /// The index path of an object, or nil when it is not in the results.
    public func indexPath(for object: Result) -> FetchedIndexPath? { indexPaths[ObjectIdentifier(object)] }

    // MARK: - Changes from other processes

    /// Checks (one `PRAGMA data_version` per store) whether another process or connection
    /// committed to the stores; if so, the context re-reads its objects and the controller
    /// re-fetches and tells its delegate what changed.
    ///
    /// - returns: true when there were outside commits.
    /// - throws: a store error while reading the changes.
    @discardableResult
    public func processExternalChanges() throws -> Bool {
        let changed = try managedObjectContext.mergeExternalChanges()
        try throwTrackingError()
        return changed
    }

    /// Waits up to `timeout` for another process to commit, then follows as
    /// ``processExternalChanges()``.
    ///
    /// - returns: false when the time passed with no outside commit.
    public func waitForExternalChanges(timeout: TimeInterval) throws -> Bool {
        let changed = try managedObjectContext.waitForExternalChanges(timeout: timeout)
        try throwTrackingError()
        return changed
    }

    private func throwTrackingError() throws {
        if let error = trackingError {
            trackingError = nil
            throw error
        }
    }

    // MARK: - Following changes

    private func startObserving() {
        guard observer == nil else { return }
        // Posted synchronously on the context's queue, where the controller lives too.
        nonisolated(unsafe) weak let controller = self
        observer = managedObjectContext.notificationCenter.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: managedObjectContext, queue: nil
        ) { notification in
            controller?.contextDidChange(notification)
        }
    }

    private func contextDidChange(_ notification: Notification) {
        let info = notification.userInfo ?? [:]
        typealias Keys = ManagedObjectContext
        let changed = [Keys.insertedObjectsKey, Keys.updatedObjectsKey, Keys.deletedObjectsKey]
            .flatMap { info[$0] as? [ManagedObject] ?? [] }
        let invalidated = info[ManagedObjectContext.invalidatedAllObjectsKey] != nil
        guard invalidated || changed.contains(where: { relevantEntityNames.contains($0.entity.name) }) else { return }
        for object in info[ManagedObjectContext.updatedObjectsKey] as? [ManagedObject] ?? [] {
            pendingUpdated.insert(ObjectIdentifier(object))
        }
        // A fetch processes pending changes, which may post again: that change joins this pass.
        guard !isRefreshing else { refreshAgain = true; return }
        isRefreshing = true
        defer { isRefreshing = false }
        repeat {
            refreshAgain = false
            do {
                try refresh()
            } catch {
                trackingError = error
                delegate?.controller(self, didFailWith: error)
                return
            }
        } while refreshAgain
    }

    private func refresh() throws {
        let objects = try currentObjects()
        let newSections = try makeSections(objects)
        let updated = pendingUpdated
        pendingUpdated = []
        let changes = FetchedResultsDiff(old: sections, new: newSections, oldPaths: indexPaths, updated: updated)
        fetchedObjects = objects
        sections = newSections
        indexPaths = Self.indexPaths(of: newSections)
        if let cacheName { try? FileManager.default.removeItem(at: cacheURL(cacheName)) }
        guard !changes.isEmpty, let delegate else { return }
        delegate.controllerWillChangeContent(self)
        for (index, section) in changes.deletedSections {
            delegate.controller(self, didChange: section, atSectionIndex: index, for: .delete)
        }
        for (index, section) in changes.insertedSections {
            delegate.controller(self, didChange: section, atSectionIndex: index, for: .insert)
        }
        for change in changes.objects {
            delegate.controller(self, didChange: change.object, at: change.old, for: change.type,
                                newIndexPath: change.new)
        }
        delegate.controllerDidChangeContent(self)
    }

    // MARK: - Cache

    /// Removes a named section cache (all of them when `name` is nil).
    public static func deleteCache(withName name: String?, cacheDirectory: URL? = nil) {
        let directory = cacheDirectory ?? defaultCacheDirectory
        if let name {
            try? FileManager.default.removeItem(at: SectionCache.url(name: name, in: directory))
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    private func cacheURL(_ name: String) -> URL { SectionCache.url(name: name, in: cacheDirectory) }

    /// The cache when it can be read and its key (the request and the stores' contents) matches:
    /// one that cannot be read is rebuilt, never trusted, so failures here cost only time.
    private func loadCache(_ key: SectionCache.Key) -> SectionCache? {
        guard let cacheName, let data = try? Data(contentsOf: cacheURL(cacheName)),
              let cache = try? JSONDecoder().decode(SectionCache.self, from: data), cache.key == key,
              cache.names.count == cache.counts.count, cache.counts.allSatisfy({ $0 > 0 }) else { return nil }
        return cache
    }

    private func saveCache(_ key: SectionCache.Key) {
        guard let cacheName else { return }
        let cache = SectionCache(key: key, names: sections.map(\.name), indexTitles: sections.map(\.indexTitle),
                                 counts: sections.map(\.numberOfObjects))
        // A cache that cannot be written only costs the next fetch some time.
        try? SectionCache.write(cache, to: cacheURL(cacheName))
    }

    private func slice(_ objects: [Result], into cache: SectionCache) -> [FetchedResultsSection] {
        var start = 0
        return zip(cache.names, zip(cache.indexTitles, cache.counts)).map { name, rest in
            defer { start += rest.1 }
            let (indexTitle, count) = rest
            return FetchedResultsSection(name: name, indexTitle: indexTitle,
                                         objects: Array(objects[start..<start + count]))
        }
    }
}
