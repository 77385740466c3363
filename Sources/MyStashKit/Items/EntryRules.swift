import Foundation
import ObjectGraph

/// The rules every write of an entry meets, whichever path it comes by (add, edit, import,
/// browse): the model holds what it can express (lengths, patterns, the URL schemes); this
/// is the code those need beyond a pattern.
enum EntryRules {
    /// A name, title or category name as stored: without the spaces around it, so a name of
    /// spaces alone is empty and the model's minimum length refuses it.
    static func trimmedName(_ name: String) -> String {
        name.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The URL schemes the model allows (the entity's `userInfo["urlSchemes"]`, separated
    /// by spaces); nil when the model names none, and then any scheme with a host will do.
    static func urlSchemes(of entity: EntityDescription) -> [String]? {
        entity.userInfo["urlSchemes"].map { $0.split(separator: " ").map(String.init) }
    }

    /// Why `address` cannot be an entry's URL, as the end of a sentence starting with the
    /// field's name; nil when it can. An address is `scheme:` (with `//` or not) and a host,
    /// the scheme one of `schemes`, or a bare host with a dot or in brackets as exports
    /// hold them (`example.com`, `192.168.1.1`, `[::1]`), either with a user, port and path.
    /// The address itself is never part of the reason: it is a secret.
    static func problem(withAddress address: String, schemes: [String]?) -> String? {
        var rest = Substring(address)
        var hasScheme = false
        if let colon = rest.firstIndex(of: ":"), isScheme(rest[..<colon]), !isPort(rest[rest.index(after: colon)...]) {
            if let schemes, !schemes.contains(rest[..<colon].lowercased()) {
                return "must use one of the schemes \(list(schemes))"
            }
            rest = rest[rest.index(after: colon)...]
            if rest.hasPrefix("//") { rest = rest.dropFirst(2) }
            hasScheme = true
        }
        let authority = rest.prefix { !"/?#".contains($0) }
        var host = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = host[...close]
        } else if let colon = host.firstIndex(of: ":") {
            host = host[..<colon]
        }
        let bareHostIsOne = host.contains(".") || host.hasPrefix("[")
        guard !host.isEmpty, hasScheme || bareHostIsOne else {
            return "must name a host, as in https://example.com or example.com"
        }
        return nil
    }

    /// RFC 3986: a letter, then letters, digits, `+`, `-` or `.`.
    private static func isScheme(_ text: Substring) -> Bool {
        guard let first = text.first, first.isASCII, first.isLetter else { return false }
        return text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
    }

    /// Whether text after a colon is a port (`example.com:8080/x`), so the colon ends a host.
    private static func isPort(_ text: Substring) -> Bool {
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        return !digits.isEmpty && (digits.endIndex == text.endIndex || "/?#".contains(text[digits.endIndex]))
    }

    private static func list(_ items: [String]) -> String {
        items.count > 1 ? items.dropLast().joined(separator: ", ") + " or " + items.last! : items.joined()
    }
}
