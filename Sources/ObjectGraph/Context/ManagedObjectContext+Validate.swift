import Foundation

extension ManagedObjectContext {
    /// Validates the pending changes exactly as ``save()`` would, without writing anything:
    /// for a dry run that reports every problem. Delete rules are applied to the context.
    ///
    /// - throws: ``ValidationError`` (1560 gathering several).
    public func validatePendingChanges() throws {
        processPendingChanges()
        try throwDeferredError()
        propagateDeletes()
        processPendingChanges()
        try validateChanges()
    }

    /// Checks every inserted and updated object against its model, and deleted ones against Deny.
    func validateChanges() throws {
        var failures: [ValidationError] = []
        for object in [insertedSet.objects, updatedSet.objects].joined() where !deletedSet.contains(object) {
            failures += try Validator.errors(for: object)
        }
        for object in deletedSet.objects { failures += Validator.denyErrors(for: object) }
        try throwDeferredError()
        if !failures.isEmpty { throw ValidationError.combining(failures) }
    }
}
