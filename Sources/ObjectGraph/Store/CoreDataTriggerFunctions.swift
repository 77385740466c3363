import Foundation
import GRDB

/// The SQL functions that triggers in stores made by Apple's Core Data call, for derived
/// attributes (`derivationExpression`): without them, inserting into such a store fails with
/// "no such function".
///
/// `NSCoreDataNow()` gives the time as Core Data stores dates. The `…AffectedObjectValue`
/// functions are how a trigger tells Core Data the value it derived for a row; the values are
/// recorded here, and a context's save copies them into its objects after committing.
enum CoreDataTriggerFunctions {
    static let reportingFunctions = [
        "NSCoreDataTriggerUpdateAffectedObjectValue",
        "NSCoreDataDATriggerInsertUpdatedAffectedObjectValue",
        "NSCoreDataDATriggerUpdatedAffectedObjectValue",
    ]

    static func register(in db: Database, reports: TriggerReports) {
        db.add(function: DatabaseFunction("NSCoreDataNow", argumentCount: 0, pure: false) { _ in
            Date().timeIntervalSinceReferenceDate
        })
        for name in reportingFunctions {
            // (table, Z_ENT, Z_PK, property name, derived value)
            db.add(function: DatabaseFunction(name, argumentCount: 5, pure: false) { values in
                if let entityNumber = Int.fromDatabaseValue(values[1]),
                   let primaryKey = Int64.fromDatabaseValue(values[2]),
                   let property = String.fromDatabaseValue(values[3]) {
                    reports.append(TriggerReport(
                        entityNumber: entityNumber, primaryKey: primaryKey, property: property, value: values[4]))
                }
                return nil
            })
        }
    }
}

/// A value a trigger derived for a row.
struct TriggerReport {
    var entityNumber: Int
    var primaryKey: Int64
    var property: String
    var value: DatabaseValue
}

/// The values triggers reported on a connection, until a save takes them.
final class TriggerReports: @unchecked Sendable {
    private let lock = NSLock()
    private var reports: [TriggerReport] = []

    func append(_ report: TriggerReport) {
        lock.lock()
        defer { lock.unlock() }
        reports.append(report)
    }

    /// The reports so far, forgetting them.
    func take() -> [TriggerReport] {
        lock.lock()
        defer { lock.unlock() }
        defer { reports = [] }
        return reports
    }
}

extension ManagedObjectContext {
    /// Copies the values triggers derived during a save into this context's objects, as
    /// their saved values (they are not changes of the context).
    func applyTriggerReports(_ reports: [TriggerReport]) {
        for report in reports {
            guard let entity = model.entity(number: report.entityNumber),
                  let object = registered[ObjectKey(rootEntityNumber: entity.rootEntity.entityNumber,
                                                    primaryKey: report.primaryKey)],
                  let attribute = object.entity.attribute(named: report.property), attribute.type != .transformable,
                  !object.changedKeys.contains(report.property),
                  // A value that does not decode is left to the next fetch, which reports it.
                  let value = try? StoredValues.value(report.value, type: attribute.type) else { continue }
            object.values[report.property] = value
            object.committedValues[report.property] = value
        }
    }
}
