import Foundation
import GRDB

/// SQL functions that let compiled predicates use exactly the in-memory semantics.
enum SQLFunctions {
    static func register(in db: Database) {
        // OG_STRING_TEST(operator, text, pattern, options) -> 0/1
        db.add(function: DatabaseFunction("OG_STRING_TEST", argumentCount: 4, pure: true) { values in
            guard let op = String.fromDatabaseValue(values[0]).flatMap(Predicate.Operator.init(rawValue:)),
                    let text = String.fromDatabaseValue(values[1]), let pattern = String.fromDatabaseValue(values[2])
                else { return nil }
            let options = Predicate.Options(rawValue: Int.fromDatabaseValue(values[3]) ?? 0)
            return PredicateEvaluator.stringTest(op, text, pattern, options)
        })
        // OG_FOLD(text, options) -> text folded for case and/or diacritics
        db.add(function: DatabaseFunction("OG_FOLD", argumentCount: 2, pure: true) { values in
            guard let text = String.fromDatabaseValue(values[0]) else { return values[0] }
            return PredicateEvaluator.fold(text, Predicate.Options(rawValue: Int.fromDatabaseValue(values[1]) ?? 0))
        })
    }
}
