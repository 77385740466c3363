import Foundation
import ObjectGraph

/// Hands a transformed value's bytes over undecoded, for transformers this tool does not have.
final class RawDataTransformer: ValueTransformer {
    func transformedValue(_ value: Any, at place: ValuePlace) throws -> Data { value as? Data ?? Data() }
    func reverseTransformedValue(_ data: Data, at place: ValuePlace) throws -> Any { data }
}

/// Turns objects into values JSON and text can show.
enum StoredValueReader {
    /// Registers ``RawDataTransformer`` under every transformer name the entities use that is
    /// not available; returns those names.
    @discardableResult
    static func registerRawTransformers(
        for entities: [EntityDescription], in coordinator: PersistentStoreCoordinator
    ) -> [String] {
        var missing: Set<String> = []
        for entity in entities {
            for attribute in entity.attributes where attribute.type == .transformable {
                let name = attribute.valueTransformerName ?? ValueTransformerRegistry.defaultTransformerName
                if coordinator.valueTransformers.transformer(named: name) == nil { missing.insert(name) }
            }
        }
        for name in missing { coordinator.valueTransformers.register(RawDataTransformer(), forName: name) }
        return missing.sorted()
    }

    /// Attributes (decoded) and relationships (primary keys) of `object`, JSON-compatible; a
    /// link whose destination row is missing is a problem, and reads as the error's words.
    static func values(of object: ManagedObject, rawDates: Bool, problems: inout [String]) -> [String: Any] {
        var values: [String: Any] = [:]
        for attribute in object.entity.attributes where !attribute.isTransient {
            do {
                values[attribute.name] = json(try object.loadedValue(forKey: attribute.name), rawDates: rawDates)
            } catch {
                // One cell that cannot be decoded is reported in its place; the dump goes on.
                let problem = (error as? ObjectGraphError)?.message ?? "\(error)"
                values[attribute.name] = "undecodable: \(problem)"
                problems.append(problem)
            }
        }
        for relationship in object.entity.relationships {
            do {
                let destination = try object.loadedValue(forKey: relationship.name)
                if relationship.isToMany {
                    let members = destination as? [ManagedObject] ?? []
                    values[relationship.name] = members.compactMap(\.objectID.primaryKey).sorted()
                } else {
                    values[relationship.name] = (destination as? ManagedObject)?.objectID.primaryKey ?? NSNull()
                }
            } catch {
                let problem = (error as? ObjectGraphError)?.message ?? "\(error)"
                values[relationship.name] = "dangling: \(problem)"
                problems.append(problem)
            }
        }
        return values
    }

    private static let wholeSeconds = Date.ISO8601FormatStyle()

    /// ISO 8601 UTC to the microsecond, as precise as Core Data's stored double is meaningful
    /// (Foundation's fractional style stops at milliseconds, and truncates them).
    static func isoText(_ date: Date) -> String {
        let microseconds = (date.timeIntervalSince1970 * 1_000_000).rounded()
        guard microseconds.isFinite, abs(microseconds) < 1e17 else { return "\(date.timeIntervalSinceReferenceDate)" }
        let whole = (microseconds / 1_000_000).rounded(.down)
        let fraction = Int(microseconds - whole * 1_000_000)
        let text = Date(timeIntervalSince1970: whole).formatted(wholeSeconds)
        guard fraction != 0 else { return text }
        var digits = String(format: "%06d", fraction)
        while digits.hasSuffix("0") { digits.removeLast() }
        return text.dropLast() + ".\(digits)Z"
    }

    /// A value as JSON can hold it: dates in ISO 8601 (or the stored seconds since 2001 with
    /// `rawDates`), data in base64, decimals as exact strings.
    static func json(_ value: Any?, rawDates: Bool = false) -> Any {
        switch value {
        case nil, is NSNull: return NSNull()
        case let value as String: return value
        case let value as Bool: return value
        case let value as Int: return value
        case let value as Double: return value.isFinite ? value : "\(value)"
        case let value as Float: return value.isFinite ? Double(value) : "\(value)"
        case let value as Decimal: return "\(value)"
        case let value as Date: return rawDates ? value.timeIntervalSinceReferenceDate : isoText(value)
        case let value as Data: return value.base64EncodedString()
        case let value as UUID: return value.uuidString
        case let value as URL: return value.absoluteString
        case let value as [Any]: return value.map { json($0, rawDates: rawDates) }
        case let value as [String: Any]: return value.mapValues { json($0, rawDates: rawDates) }
        case let value?: return "\(value)"
        }
    }

    /// A JSON-compatible value as one line of text.
    static func text(_ value: Any) -> String {
        switch value {
        case is NSNull: return "nil"
        case let value as String: return value.debugDescription
        case let value as [Any]: return "[" + value.map(text).joined(separator: ", ") + "]"
        case let value as [String: Any]:
            return "{"
                + value.sorted { $0.key < $1.key }.map { "\($0.key): \(text($0.value))" }.joined(separator: ", ") + "}"
        default: return "\(value)"
        }
    }
}
