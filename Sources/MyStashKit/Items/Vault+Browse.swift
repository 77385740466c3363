import Foundation
import ObjectGraph
import StashCrypto

extension Vault {
    // MARK: - Locking

    /// Forgets the data key and every decrypted value the context holds, and ends every
    /// observation of items (``observeEntries(onError:onChange:)``); the vault stays open and
    /// can be unlocked again, and observed again then.
    public func lock() {
        pendingVerification = nil
        // Before the reset, which would make them fetch again without a key.
        for registered in observations { registered.observation?.cancel() }
        observations = []
        context.reset()
        transformer.dataKey = nil
    }

    // MARK: - Work kept across a lock

    /// Seals `plaintext` (a form being typed when the view locks) under a key derived from the
    /// data key: once ``lock()`` forgets that key, only the master password (or an unlocked
    /// session) opens it again with ``openSealedDraft(_:)``. AES-256-GCM with a new nonce.
    ///
    /// - throws: ``VaultError`` `.wrongPassword` when the vault is locked already.
    public func sealDraft(_ plaintext: [UInt8]) throws -> [UInt8] {
        try Self.wrapErrors {
            try FieldEnvelope.seal(bytes: plaintext, key: try draftKey(), context: draftPlace)
        }
    }

    /// What ``sealDraft(_:)`` sealed, once unlocked again.
    ///
    /// - throws: ``VaultError`` `.invalidData` when it does not open: the vault's data key changed
    ///   meanwhile (a rekey elsewhere) or the bytes were altered.
    public func openSealedDraft(_ sealed: [UInt8]) throws -> SecretBytes {
        do {
            return try FieldEnvelope.openBytes(sealed, key: try draftKey(), context: draftPlace)
        } catch let error as StashCryptoError {
            throw VaultError.draftUnreadable(reason: error.message)

        }
    }

    private func draftKey() throws -> SecretBytes {
        guard let dataKey = transformer.dataKey else { throw VaultError.locked }
        return try HKDF.sha256(key: dataKey, info: Array("MyStash draft v1".utf8), length: 32)
    }

    /// Binds a draft to this vault: no store row holds one.
    private var draftPlace: FieldContext {
        FieldContext(storeIdentifier: identifier, entity: "draft", attribute: "form", primaryKey: 0)
    }

    // MARK: - What a browser lists

    /// Follows every password entry, in sections by category (entries without one first), by
    /// name within each, as GRDB's `ValueObservation` follows a query: `onChange` gets the whole
    /// list now, then again after each change to it, made through this vault (a save, an undo)
    /// or by another process once ``followExternalChanges()`` read it. Only names, user IDs and
    /// URLs are decrypted for it.
    ///
    /// The observation lasts until it is cancelled or released, or the vault locks.
    ///
    /// - parameter onError: told when a change could not be read; the list stays as it was.
    /// - throws: ``VaultError`` when the entries cannot be read.
    public func observeEntries(onError: @escaping (Error) -> Void,
                               onChange: @escaping ([EntrySummary]) -> Void) throws -> ItemObservation {
        // Browsing shows both stores: the whole vault is checked (concurrently in readWhileVerifying).
        try verifyWholeVaultForRead()
        // Registers every category at once, so entries' categories resolve without a query each.
        _ = try Self.wrapErrors { try context.fetch(FetchRequest<Category>()) }
        return try observe(entriesController(), onError: onError) { controller in
            onChange(controller.sections.flatMap { section in
                section.objects.compactMap { $0 as? PasswordEntry }.map {
                    EntrySummary(id: $0.id, name: $0.name, userId: $0.userId, url: $0.url,
                                 category: section.name.isEmpty ? nil : section.name)
                }
            })
        }
    }

    /// Follows every note, the most recently changed first, as ``observeEntries(onError:onChange:)``
    /// follows the entries. Only titles and texts are decrypted for it.
    public func observeNotes(onError: @escaping (Error) -> Void,
                             onChange: @escaping ([NoteSummary]) -> Void) throws -> ItemObservation {
        try verifyWholeVaultForRead()
        return try observe(notesController(), onError: onError) { controller in
            onChange((controller.fetchedObjects ?? []).map {
                NoteSummary(id: $0.id, title: $0.title, text: $0.text, updatedAt: $0.updatedAt)
            })
        }
    }

    /// Fetches a controller's objects, tells `changed` of them and of every later change, and
    /// registers the observation for ``lock()`` to end.
    private func observe<Item: ManagedObject>(
        _ controller: FetchedResultsController<Item>, onError: @escaping (Error) -> Void,
        changed: @escaping (FetchedResultsController<Item>) -> Void
    ) throws -> ItemObservation {
        let relay = ChangeRelay(controller, changed: changed, onError: onError)
        try Self.wrapErrors { try controller.performFetch() }
        changed(controller)
        let observation = ItemObservation(relay: relay)
        observations.removeAll { $0.observation == nil }
        observations.append(WeakObservation(observation: observation))
        return observation
    }

    /// The entries in sections by category name, by name within each; "" holds those without one.
    func entriesController() -> FetchedResultsController<PasswordEntry> {
        var request = FetchRequest<PasswordEntry>(sortDescriptors: [
            FetchSortDescriptor(key: PasswordEntry.categoryName, caseInsensitive: true),
            PasswordEntry.sort(.name, caseInsensitive: true),
        ])
        request.fetchOnly(.name, .userId, .url)
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                        sectionNameKeyPath: PasswordEntry.categoryName)
    }

    /// The notes with their titles and texts, the most recently changed first.
    func notesController() -> FetchedResultsController<Note> {
        var request = FetchRequest<Note>(sortDescriptors: [Note.sort(.updatedAt, ascending: false)])
        request.fetchOnly(.title, .text)
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context)
    }

    /// Reads what other processes committed since the last look, which tells the observations
    /// of items it changes; true when there was something. What they committed is
    /// checked against the integrity record first, in the same read transaction.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming each change made outside mystash; then
    ///   nothing of it was read into the context.
    @discardableResult
    public func followExternalChanges() throws -> Bool {
        try Self.wrapErrors {
            try coordinator.performRead { _ in
                guard try context.hasExternalChanges() else { return false }
                try refuse(try integrityProblems())
                return try context.mergeExternalChanges()
            }
        }
    }

    // MARK: - Undo

    /// Records every change made through the vault from now on in the context's undo
    /// manager, so ``undoLastChange()`` can take the last ones back (`levels` of them).
    public func recordChangesForUndo(levels: Int = 20) {
        let manager = ContextUndoManager()
        manager.levelsOfUndo = levels
        context.undoManager = manager
    }

    /// Whether there is a change to take back.
    public var canUndo: Bool { context.undoManager?.canUndo ?? false }

    /// What an undo did to a note or an entry.
    public struct UndoneChange: Equatable {
        public enum Kind: Equatable {
            /// An added item was removed.
            case removed
            /// A removed item came back, under a new ID.
            case broughtBack
            /// An edited item got back the fields the change set.
            case reverted
        }

        public var kind: Kind
        public var isNote: Bool
        public var id: Int64
    }

    /// Takes back the last change through the context's undo and saves that. Returns what
    /// happened to the note or entry the change was about (nil when it touched neither).
    @discardableResult
    public func undoLastChange() throws -> UndoneChange? {
        let undone: (item: ManagedObject, kind: UndoneChange.Kind)? = try change {
            context.undo()
            let changes: [([ManagedObject], UndoneChange.Kind)] = [
                (context.deletedObjects, .removed), (context.insertedObjects, .broughtBack),
                (context.updatedObjects, .reverted),
            ]
            for (objects, kind) in changes {
                if let item = objects.first(where: { $0 is Note || $0 is PasswordEntry }) { return (item, kind) }
            }
            return nil
        }
        // Primary keys of brought-back items exist only once saved.
        return undone.map { UndoneChange(kind: $0.kind, isNote: $0.item is Note, id: $0.item.objectID.primaryKey ?? 0) }
    }
}

/// A note as a list shows it: its title and text, nothing else decrypted.
public struct NoteSummary: Equatable, Sendable {
    public var id: Int64
    public var title: String
    public var text: String
    public var updatedAt: Date
}

/// A password entry as a list shows it: never its password.
public struct EntrySummary: Equatable, Sendable {
    public var id: Int64
    public var name: String
    public var userId: String?
    public var url: String?
    /// The name of the entry's category; nil without one.
    public var category: String?
}

/// An observation of the vault's items (``Vault/observeEntries(onError:onChange:)``); it ends
/// when cancelled or released, or when the vault locks.
public final class ItemObservation {
    /// The controller following the items, with its delegate; nil once the observation ended.
    private var relay: AnyObject?

    init(relay: AnyObject) {
        self.relay = relay
    }

    /// Stops telling of changes; the observer is called no more.
    public func cancel() {
        relay = nil
    }
}

/// What the vault keeps of an observation, to end it at a lock without keeping it alive.
struct WeakObservation {
    weak var observation: ItemObservation?
}

/// Holds a fetched results controller and passes on its changes once each batch is complete
/// and every object in it has its ID: an item inserted by a save is told once the save committed.
private final class ChangeRelay<Item: ManagedObject>: FetchedResultsControllerDelegate {
    let controller: FetchedResultsController<Item>
    let changed: (FetchedResultsController<Item>) -> Void
    let onError: (Error) -> Void
    /// A change is waiting for the save that gives its new objects their IDs.
    private var awaitingSave = false
    private var saveObserver: NSObjectProtocol?

    init(_ controller: FetchedResultsController<Item>, changed: @escaping (FetchedResultsController<Item>) -> Void,
         onError: @escaping (Error) -> Void) {
        self.controller = controller
        self.changed = changed
        self.onError = onError
        controller.delegate = self
        let context = controller.managedObjectContext
        // Posted synchronously on the context's queue, where the relay lives too.
        nonisolated(unsafe) weak let relay = self
        saveObserver = context.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { _ in
            relay?.contextDidSave()
        }
    }

    deinit {
        if let saveObserver { controller.managedObjectContext.notificationCenter.removeObserver(saveObserver) }
    }

    func controllerDidChangeContent(_ controller: any FetchedResultsControlling) {
        awaitingSave = self.controller.fetchedObjects?.contains { $0.objectID.isTemporaryID } ?? false
        if !awaitingSave { changed(self.controller) }
    }

    private func contextDidSave() {
        guard awaitingSave else { return }
        awaitingSave = false
        changed(controller)
    }

    func controller(_ controller: any FetchedResultsControlling, didFailWith error: Error) {
        onError(VaultError.wrapping(error))
    }
}
