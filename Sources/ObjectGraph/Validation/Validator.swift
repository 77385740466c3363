import Foundation

/// Checks objects against the rules of their model at save.
enum Validator {
    static func errors(for object: ManagedObject) throws -> [ValidationError] {
        var errors: [ValidationError] = []
        func fail(_ code: ValidationError.Code, _ key: String, _ value: Any?, _ constraint: ValidationConstraint) {
            errors.append(ValidationError(code: code, object: object, key: key, value: value, constraint: constraint))
        }
        let entity = object.entity
        for index in entity.attributes.indices {
            guard let value = object.values[entity.attributes[index].name] else {
                if !entity.attributes[index].isOptional {
                    fail(.missingMandatoryProperty, entity.attributes[index].name, nil, .required)
                }
                continue
            }
            // SQLite is given text up to its first NUL (GRDB binds it so): refused, never cut short.
            if entity.attributeTypeList[index] == .string, let text = value as? String, text.utf8.contains(0),
               !entity.attributes[index].isTransient {
                fail(.generic, entity.attributes[index].name, value, .custom(ValidationConstraint.holdsNul))
            }
            // Most attributes have no rule beyond being present: skip them cheaply.
            guard entity.attributeHasValueRules[index] else { continue }
            let attribute = entity.attributes[index]
            if let text = value as? String, attribute.type == .string || attribute.type == .transformable {
                let length = text.count
                if let minimum = attribute.minValueString.flatMap({ Int($0) }), length < minimum {
                    // An empty required string reads better as "required" than "too short".
                    if length == 0 && !attribute.isOptional {
                        fail(.missingMandatoryProperty, attribute.name, value, .required)
                        continue
                    }
                    fail(.stringTooShort, attribute.name, value, .minimumLength(minimum))
                }
                if let maximum = attribute.maxValueString.flatMap({ Int($0) }), length > maximum {
                    fail(.stringTooLong, attribute.name, value, .maximumLength(maximum))
                }
                if let pattern = attribute.regularExpression, !matchesWhole(text, pattern) {
                    fail(.stringPatternMatching, attribute.name, value, .pattern(pattern))
                }
            } else if attribute.type.isNumeric, let number = doubleValue(value) {
                if let minimum = attribute.minValueString.flatMap({ Double($0) }), number < minimum {
                    fail(.numberTooSmall, attribute.name, value, .minimum(minimum))
                }
                if let maximum = attribute.maxValueString.flatMap({ Double($0) }), number > maximum {
                    fail(.numberTooLarge, attribute.name, value, .maximum(maximum))
                }
                if let range = attribute.type.integerRange, let integer = value as? Int, !range.contains(integer) {
                    fail(integer < range.lowerBound ? .numberTooSmall : .numberTooLarge, attribute.name, value,
                        integer < range.lowerBound
                            ? .minimum(Double(range.lowerBound)) : .maximum(Double(range.upperBound)))
                }
            } else if let date = value as? Date {
                if let earliest = attribute.minValueString.flatMap({ Double($0) }).map({
                    Date(timeIntervalSinceReferenceDate: $0)
                }), date < earliest {
                    fail(.dateTooSoon, attribute.name, value, .earliest(earliest))
                }
                if let latest = attribute.maxValueString.flatMap({ Double($0) }).map({
                    Date(timeIntervalSinceReferenceDate: $0)
                }), date > latest {
                    fail(.dateTooLate, attribute.name, value, .latest(latest))
                }
            }
        }
        for relationship in entity.relationships {
            if relationship.isToMany {
                let minimum = max(relationship.minCount, relationship.isOptional ? 0 : 1)
                // Counting reads the relationship: only when the model bounds it.
                guard minimum > 0 || relationship.maxCount > 0 else { continue }
                let count = object.toManyObjects(relationship).filter { !$0.isDeleted }.count
                if minimum > 0, count < minimum {
                    fail(.relationshipLacksMinimumCount, relationship.name, nil, .minimumCount(minimum))
                }
                if relationship.maxCount > 0, count > relationship.maxCount {
                    fail(.relationshipExceedsMaximumCount, relationship.name, nil, .maximumCount(relationship.maxCount))
                }
            } else if !relationship.isOptional, object.toOneObject(relationship).map({ !$0.isDeleted }) != true {
                fail(.missingMandatoryProperty, relationship.name, nil, .required)
            }
        }
        try object.validateForSave(into: &errors)
        return errors
    }

    /// Deny rules of a deleted object: a denying relationship that still has live destinations.
    static func denyErrors(for object: ManagedObject) -> [ValidationError] {
        object.entity.relationships.filter { $0.deleteRule == .deny }.compactMap { relationship in
            let destinations =
                relationship.isToMany
                ? object.toManyObjects(relationship) : object.toOneObject(relationship).map { [$0] } ?? []
            guard destinations.contains(where: { !$0.isDeleted }) else { return nil }
            return ValidationError(code: .relationshipDeniedDelete, object: object, key: relationship.name, value: nil,
                                   constraint: .deleteDenied(relationship: relationship.name))
        }
    }

    /// NSPredicate's MATCHES: the whole string must match.
    static func matchesWhole(_ text: String, _ pattern: String) -> Bool {
        guard let expression = cachedExpression(pattern) else { return false }
        let range = NSRange(text.startIndex..., in: text)
        guard let match = expression.firstMatch(in: text, options: [.anchored], range: range) else { return false }
        return match.range == range
    }

    private static let cacheLock = NSLock()
    nonisolated(unsafe) private static var cache: [String: NSRegularExpression] = [:]

    static func cachedExpression(_ pattern: String, caseInsensitive: Bool = false) -> NSRegularExpression? {
        let key = (caseInsensitive ? "i:" : "s:") + pattern
        return cacheLock.withLock {
            if let expression = cache[key] { return expression }
            // An invalid pattern matches nothing (a value fails it); the model's are checked when it loads.
            let expression = try? NSRegularExpression(
                pattern: pattern, options: caseInsensitive ? [.caseInsensitive] : [])
            cache[key] = expression
            return expression
        }
    }
}

func doubleValue(_ value: Any?) -> Double? {
    switch value {
    case let v as Int: return Double(v)
    case let v as Double: return v
    case let v as Float: return Double(v)
    case let v as Bool: return v ? 1 : 0
    case let v as Decimal: return NSDecimalNumber(decimal: v).doubleValue
    case let v as Int64: return Double(v)
    case let v as Int32: return Double(v)
    case let v as Int16: return Double(v)
    default: return nil
    }
}
