import Foundation
import MyStashKit
import TestSupport

/// A vault as people have one: most entries in a few categories, dates on everything, a TOTP
/// secret on one entry in ten, two custom fields and a history of three passwords on one in
/// five, notes of about 1 KB. Deterministic for a size, so every run and tool reads the same.
struct RealisticData {
    struct Entry {
        var name: String
        var user: String
        var password: String
        var url: String
        var category: String
        var created: Date
        var updated: Date
        var totp: String?
        var fields: [(name: String, value: String, hidden: Bool)]
        var history: [(password: String, replacedAt: Date)]
    }

    struct Note {
        var title: String
        var text: String
        var created: Date
        var updated: Date
    }

    /// Seeded category names, weighted: half of the entries are web sites.
    static let categories: [(name: String, weight: Int)] = [
        ("Web Site", 50), ("E-mail", 12), ("Shopping", 10), ("Social Media", 8), ("Banking", 6), ("Server", 5),
        ("Wi-Fi", 4), ("Software License", 3), ("Payment Card", 2),
    ]

    let entries: [Entry]
    let notes: [Note]
    let searchWord: String

    init(size: Int, searchWord: String) {
        self.searchWord = searchWord
        var random = SplitMix64(seed: UInt64(size))
        let words = PasswordGenerator.words.filter { $0 != searchWord }
        func text(_ length: Int) -> String {
            var result = ""
            while result.utf8.count < length { result += words[Int.random(in: 0..<words.count, using: &random)] + " " }
            return result
        }
        let weighted = Self.categories.flatMap { Array(repeating: $0.name, count: $0.weight) }
        // Spread over the last ten years.
        let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
        func date(before: Date) -> Date {
            before.addingTimeInterval(-Double.random(in: 0..<315_360_000, using: &random))
        }
        entries = (0..<size).map { index in
            let updated = date(before: now)
            let created = date(before: updated)
            let rich = index % 5 == 0
            return Entry(
                name: "site-\(index)", user: "user\(index)@example.com",
                password: "pw-\(index)-" + text(12).replacingOccurrences(of: " ", with: "-"),
                url: "https://site\(index).example.com/login",
                category: weighted[Int.random(in: 0..<weighted.count, using: &random)],
                created: created, updated: updated,
                totp: index % 10 == 0 ? Self.base32Secret(&random) : nil,
                fields: rich
                    ? [("Account number", "\(100_000 + index)", false), ("Recovery code", text(16), true)] : [],
                history: rich
                    ? (1...3).map { ("old-\($0)-" + text(8), created.addingTimeInterval(Double($0) * 86_400)) } : [])
        }
        notes = (0..<size).map { index in
            let updated = date(before: now)
            return Note(
                title: "Note \(index) " + text(20), text: (index % 100 == 0 ? searchWord + " " : "") + text(1000),
                        created: date(before: updated), updated: updated)
        }
    }

    private static func base32Secret(_ random: inout SplitMix64) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        return String((0..<32).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] })
    }

    private static func iso(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// As `mystash export` writes it.
    func mystashJSON() throws -> Data {
        let document: [String: Any] = [
            "format": "mystash-json", "version": 2, "categories": Self.categories.map(\.name),
            "notes": notes.map { ["title": $0.title, "text": $0.text, "createdAt": Self.iso($0.created),
                                  "updatedAt": Self.iso($0.updated)] },
            "passwords": entries.map { entry -> [String: Any] in
                var item: [String: Any] = [
                    "name": entry.name, "userId": entry.user, "password": entry.password, "url": entry.url,
                    "category": entry.category, "createdAt": Self.iso(entry.created),
                    "updatedAt": Self.iso(entry.updated)
                ]
                if let totp = entry.totp { item["totp"] = totp }
                if !entry.fields.isEmpty {
                    item["fields"] = entry.fields.map { ["name": $0.name, "value": $0.value, "hidden": $0.hidden] }
                }
                if !entry.history.isEmpty {
                    item["history"] = entry.history.map {
                        ["password": $0.password, "replacedAt": Self.iso($0.replacedAt)]
                    }
                }
                return item
            },
        ]
        return try JSONSerialization.data(withJSONObject: document)
    }

    /// As Bitwarden's unencrypted JSON export: categories as folders, notes as secure notes.
    func bitwardenJSON() throws -> Data {
        let folderIDs = Dictionary(uniqueKeysWithValues: Self.categories.enumerated().map {
            ($1.name, String(format: "00000000-0000-4000-8000-%012d", $0))
        })
        var items: [[String: Any]] = entries.enumerated().map { index, entry in
            var login: [String: Any] = [
                "uris": [["match": NSNull(), "uri": entry.url]], "username": entry.user, "password": entry.password,
            ]
            if let totp = entry.totp { login["totp"] = totp }
            return [
                "id": String(format: "10000000-0000-4000-8000-%012d", index), "organizationId": NSNull(),
                "folderId": folderIDs[entry.category]!, "type": 1, "reprompt": 0, "name": entry.name,
                "notes": NSNull(), "favorite": false, "login": login,
                "fields": entry.fields.map { ["name": $0.name, "value": $0.value, "type": $0.hidden ? 1 : 0] },
                "passwordHistory": entry.history.map {
                    ["password": $0.password, "lastUsedDate": Self.iso($0.replacedAt)]
                },
                "creationDate": Self.iso(entry.created), "revisionDate": Self.iso(entry.updated),
                "deletedDate": NSNull(), "collectionIds": NSNull(),
            ]
        }
        items += notes.enumerated().map { index, note in
            [
                "id": String(format: "20000000-0000-4000-8000-%012d", index), "organizationId": NSNull(),
                "folderId": NSNull(), "type": 2, "reprompt": 0, "name": note.title, "notes": note.text,
                "favorite": false, "secureNote": ["type": 0], "creationDate": Self.iso(note.created),
                "revisionDate": Self.iso(note.updated), "deletedDate": NSNull(),
            ]
        }
        let folders = Self.categories.map { ["id": folderIDs[$0.name]!, "name": $0.name] }
        return try JSONSerialization.data(withJSONObject: ["encrypted": false, "folders": folders, "items": items])
    }
}
