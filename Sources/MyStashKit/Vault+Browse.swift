import Foundation
import ObjectGraph
import StashCrypto

extension Vault {
    // MARK: - Locking

    /// Forgets the data key and every decrypted value the context holds; the vault stays
    /// open and can be unlocked again. Drop fetched results controllers first: the context's
    /// reset would make them fetch again, without a key.
    public func lock() {
        pendingVerification = nil
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
            throw VaultError(.invalidData, "the draft cannot be opened: \(error.message)")
        }
    }

    private func draftKey() throws -> SecretBytes {
        guard let dataKey = transformer.dataKey else { throw VaultError(.wrongPassword, "the vault is locked") }
        return try HKDF.sha256(key: dataKey, info: Array("MyStash draft v1".utf8), length: 32)
    }

    /// Binds a draft to this vault: no store row holds one.
    private var draftPlace: FieldContext {
        FieldContext(storeIdentifier: identifier, entity: "draft", attribute: "form", primaryKey: 0)
    }

    // MARK: - What a browser lists

    /// A controller over every password entry in sections by category (the section key
    /// path), by name within each; entries without a category form the section "".
    /// Only names, user IDs and URLs are decrypted for it.
    public func entriesController() throws -> FetchedResultsController<PasswordEntry> {
        // Registers every category at once, so entries' categories resolve without a query each.
        _ = try Self.wrapErrors { try context.fetch(FetchRequest<Category>()) }
        var request = FetchRequest<PasswordEntry>(sortDescriptors: [
            FetchSortDescriptor(key: PasswordEntry.categoryName, caseInsensitive: true),
            PasswordEntry.sort(.name, caseInsensitive: true),
        ])
        request.fetchOnly(.name, .userId, .url)
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context,
                                        sectionNameKeyPath: PasswordEntry.categoryName)
    }

    /// A controller over every note with its title and text, the most recently changed first.
    public func notesController() -> FetchedResultsController<Note> {
        var request = FetchRequest<Note>(sortDescriptors: [Note.sort(.updatedAt, ascending: false)])
        request.fetchOnly(.title, .text)
        return FetchedResultsController(fetchRequest: request, managedObjectContext: context)
    }

    /// Reads what other processes committed since the last look into the context, which
    /// tells the controllers on it; true when there was something. What they committed is
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
