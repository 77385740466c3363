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
    /// list now, then again after each saved change to entries or categories, made through this
    /// vault (a save, an undo) or by another process once ``followExternalChanges()`` read it.
    /// Each list is read from the store as `password list` reads it: only names, user IDs, URLs
    /// and category names are decrypted, and no object is kept for it.
    ///
    /// The observation lasts until it is cancelled or released, or the vault locks.
    ///
    /// - parameter onError: told when a change could not be read; the list stays as it was.
    /// - throws: ``VaultError`` when the entries cannot be read.
    public func observeEntries(onError: @escaping (Error) -> Void,
                               onChange: @escaping ([EntrySummary]) -> Void) throws -> ItemObservation {
        // Only the store it shows is checked (concurrently in readWhileVerifying).
        try verifyForRead(of: [passwordsStore])
        var request = FetchRequest<PasswordEntry>(sortDescriptors: [
            FetchSortDescriptor(key: PasswordEntry.categoryName, caseInsensitive: true),
            PasswordEntry.sort(.name, caseInsensitive: true),
        ])
        request.dictionaryProperties = EntrySummary.listed
        return try observe([PasswordEntry.entityName, Category.entityName], onError: onError) { [context] in
            onChange(try context.fetchDictionaries(request) { EntrySummary(listed: $0) })
        }
    }

    /// Follows every note, the most recently changed first, as ``observeEntries(onError:onChange:)``
    /// follows the entries. Only titles and texts are decrypted for it.
    public func observeNotes(onError: @escaping (Error) -> Void,
                             onChange: @escaping ([NoteSummary]) -> Void) throws -> ItemObservation {
        try verifyForRead(of: [notesStore])
        var request = FetchRequest<Note>(sortDescriptors: [Note.sort(.updatedAt, ascending: false)])
        request.dictionaryProperties = NoteSummary.listed
        return try observe([Note.entityName], onError: onError) { [context] in
            onChange(try context.fetchDictionaries(request) { NoteSummary(listed: $0) })
        }
    }

    /// Reads now, then again after each save touching `entities` and each merge of another
    /// process's commits; registers the observation for ``lock()`` to end.
    private func observe(_ entities: Set<String>, onError: @escaping (Error) -> Void,
                         read: @escaping () throws -> Void) throws -> ItemObservation {
        try Self.wrapErrors {
            // Notes the stores' change token before reading (if none is known), so
            // followExternalChanges misses nothing committed in between.
            _ = try context.hasExternalChanges()
            try read()
        }
        let relay = QueryRelay(context: context, entities: entities, onError: onError) {
            try Self.wrapErrors(read)
        }
        let observation = ItemObservation(relay: relay)
        observations.removeAll { $0.observation == nil }
        observations.append(WeakObservation(observation: observation))
        return observation
    }

    /// Reads what other processes committed since the last look, which tells the observations
    /// of items it changes; true when there was something. What they committed is
    /// checked against the integrity record first, in the same read transaction. A vault kept
    /// open calls it before reading an item another process may have changed: the objects it
    /// holds are as it last read them, and a read of an item changed since then finds rows its
    /// check does not vouch for (a change made outside mystash).
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
            /// A removed item was back already (a sync brought it back): it stays as it is.
            case alreadyBack
        }

        public var kind: Kind
        public var isNote: Bool
        public var id: Int64
    }

    /// Takes back the last change through the context's undo and saves that. Returns what
    /// happened to the note or entry the change was about (nil when it touched neither).
    @discardableResult
    public func undoLastChange() throws -> UndoneChange? {
        context.transactionAuthor = Self.undoAuthor
        defer { context.transactionAuthor = nil }
        let undone: (item: ManagedObject, kind: UndoneChange.Kind)? = try change {
            context.undo()
            // An item a sync brought back since its deletion is not brought back twice.
            var alreadyBack: ManagedObject?
            for object in context.insertedObjects {
                guard let id = (object as? any SyncedEntity)?.syncIdentity,
                      let held = try items(object.entity.name, withSyncIdentity: id, limit: 2)
                          .first(where: { $0 !== object })
                else { continue }
                context.delete(object)
                if held is Note || held is PasswordEntry { alreadyBack = held }
            }
            if let alreadyBack { return (alreadyBack, .alreadyBack) }
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

extension NoteSummary {
    /// What a list reads of a note, as dictionary results: no object is made for it.
    static let listed: [FetchedProperty] = [.objectID()]
        + [Note.Key.title, .text, .updatedAt].map { .keyPath($0.rawValue) }

    init(listed row: FetchedValues) {
        func value<Value>(_ key: Note.Key) -> Value? { row[key.rawValue] as? Value }
        self.init(id: (row["objectID"] as? ObjectID)?.primaryKey ?? 0, title: value(.title) ?? "",
                  text: value(.text) ?? "", updatedAt: value(.updatedAt) ?? .distantPast)
    }
}

extension EntrySummary {
    /// What a list reads of an entry, as dictionary results: no object is made for it.
    static let listed: [FetchedProperty] = [.objectID(), .keyPath(PasswordEntry.categoryName, as: "category")]
        + [PasswordEntry.Key.name, .userId, .url].map { .keyPath($0.rawValue) }

    init(listed row: FetchedValues) {
        func value(_ key: PasswordEntry.Key) -> String? { row[key.rawValue] as? String }
        self.init(id: (row["objectID"] as? ObjectID)?.primaryKey ?? 0, name: value(.name) ?? "",
                  userId: value(.userId), url: value(.url), category: row["category"] as? String)
    }
}

/// An observation of the vault's items (``Vault/observeEntries(onError:onChange:)``); it ends
/// when cancelled or released, or when the vault locks.
public final class ItemObservation {
    /// What reads the items again after a change; nil once the observation ended.
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

/// Reads an observation's query again after each save that touched one of its entities and
/// after each merge of another process's commits (which may have touched any).
private final class QueryRelay {
    private let notificationCenter: NotificationCenter
    private var observers: [NSObjectProtocol] = []

    init(context: ManagedObjectContext, entities: Set<String>, onError: @escaping (Error) -> Void,
         read: @escaping () throws -> Void) {
        notificationCenter = context.notificationCenter
        nonisolated(unsafe) let reread = {
            do { try read() } catch { onError(error) }
        }
        typealias Keys = ManagedObjectContext
        // Both are posted synchronously on the context's queue, where the relay lives too.
        observers.append(notificationCenter.addObserver(
            forName: Keys.didSaveNotification, object: context, queue: nil
        ) { notification in
            let info = notification.userInfo ?? [:]
            let saved = [Keys.insertedObjectIDsKey, Keys.updatedObjectIDsKey, Keys.deletedObjectIDsKey]
                .compactMap { info[$0] as? ObjectIDList }
            if saved.contains(where: { $0.contains { entities.contains($0.entityName) } }) { reread() }
        })
        observers.append(notificationCenter.addObserver(
            forName: Keys.objectsDidChangeNotification, object: context, queue: nil
        ) { notification in
            if notification.userInfo?[Keys.invalidatedAllObjectsKey] != nil { reread() }
        })
    }

    deinit {
        for observer in observers { notificationCenter.removeObserver(observer) }
    }
}
