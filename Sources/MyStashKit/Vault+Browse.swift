import Foundation
import ObjectGraph

extension Vault {
    // MARK: - Locking

    /// Forgets the data key and every decrypted value the context holds; the vault stays
    /// open and can be unlocked again.
    public func lock() {
        context.reset()
        transformer.dataKey = nil
    }

    /// Forgets the objects read so far, so the next reads see what other processes saved.
    public func forgetLoadedObjects() {
        context.reset()
    }

    // MARK: - What a browser lists

    /// Every note with its text, the most recently changed first.
    public func notesForBrowsing() throws -> [NoteInfo] {
        try Self.wrapErrors {
            var request = FetchRequest<Note>(sortDescriptors: [FetchSortDescriptor(key: "updatedAt", ascending: false)])
            request.propertiesToFetch = ["title", "text"]
            return try context.fetch(request).map { NoteInfo($0, withText: true) }
        }
    }
}
