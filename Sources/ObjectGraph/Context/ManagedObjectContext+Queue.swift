import Foundation

/// The queue a context's work runs on, as `NSManagedObjectContextConcurrencyType`.
public enum ConcurrencyType: Sendable {
    /// A serial queue of the context's own.
    case privateQueue
    /// The main queue, for contexts that feed a user interface.
    case mainQueue
}

// The queue is the synchronisation: a context is used inside perform blocks (or on the main
// queue for a main-queue context), as in Core Data, so handing it to another queue is safe.
extension ManagedObjectContext: @unchecked Sendable {}

extension ManagedObjectContext {
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    static func makeQueue(_ type: ConcurrencyType) -> DispatchQueue {
        switch type {
        case .mainQueue: return .main
        case .privateQueue: return DispatchQueue(label: "ObjectGraph.ManagedObjectContext")
        }
    }

    /// True when the caller runs on this context's queue.
    public var isOnQueue: Bool {
        switch concurrencyType {
        case .mainQueue: return Thread.isMainThread
        case .privateQueue: return DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self)
        }
    }

    private func tagQueue() {
        if concurrencyType == .privateQueue { queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self)) }
    }

    /// Runs `block` on the context's queue, later; returns at once.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        tagQueue()
        queue.async(execute: block)
    }

    /// Runs `block` on the context's queue and waits for it; runs it at once when already
    /// on the queue (so it may nest).
    public func performAndWait<T>(_ block: () throws -> T) rethrows -> T {
        if isOnQueue { return try block() }
        tagQueue()
        return try queue.sync(execute: block)
    }

    /// Runs `block` on the context's queue and returns its result to the awaiting task.
    public func perform<T>(_ block: @escaping @Sendable () throws -> T) async throws -> T {
        tagQueue()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    continuation.resume(returning: try block())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
