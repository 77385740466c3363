import Foundation

/// Reads Bitwarden's unencrypted JSON export (personal vault or organisation): logins,
/// secure notes, cards, identities and SSH keys, with folders or collections as categories.
enum BitwardenReader {
    /// Seed categories the kinds without a login go to (Config/Seeds/categories.csv, version 5).
    static let cardCategory = "Payment Card"
    static let identityCategory = "Identity"
    static let sshKeyCategory = "SSH Key"

    static func read(_ data: Data) throws -> ImportSource {
        var source = ImportSource()
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            let reason = JSONSyntax.firstProblem(in: data)?.description ?? "expected a JSON object"
            throw source.invalid(.bitwardenJSON, reason)
        }
        if root["encrypted"] as? Bool == true {
            throw VaultError(
                .invalidData,
                "this Bitwarden export is encrypted (with the account key or a password); its items cannot be read",
                hint: "export again from Bitwarden choosing the format '.json' (not '.json (Encrypted)')")
        }
        guard let items = root["items"] as? [[String: Any]] else {
            throw source.invalid(.bitwardenJSON, "expected an object with an \"items\" array")
        }
        let folders = names(root["folders"])
        let collections = names(root["collections"])
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plainDates = ISO8601DateFormatter()
        func date(_ value: Any?) -> Date? {
            guard let text = value as? String else { return nil }
            return dates.date(from: text) ?? plainDates.date(from: text)
        }
        for (index, item) in items.enumerated() {
            let name = string(item["name"]) ?? ""
            let title = name.isEmpty ? "item \(index + 1)" : name
            let folder = string(item["folderId"]).flatMap { folders[$0] }
            let itemCollections = (item["collectionIds"] as? [String] ?? []).compactMap { collections[$0] }
            var fields = customFields(item["fields"])
            if itemCollections.count > 1 {
                fields.append(
                    FieldInfo(name: "Collections", value: itemCollections.joined(separator: ", "), hidden: false))
            }
            let place = folder ?? itemCollections.first
            var entry = ExportDocument.Entry(
                name: name, password: "", notes: string(item["notes"]), category: place,
                createdAt: date(item["creationDate"]), updatedAt: date(item["revisionDate"]))
            entry.favorite = item["favorite"] as? Bool == true ? true : nil
            entry.history = (item["passwordHistory"] as? [[String: Any]])?.compactMap { old in
                guard let password = string(old["password"]) else { return nil }
                return HistoryInfo(
                    password: password, replacedAt: date(old["lastUsedDate"]) ?? Date(timeIntervalSince1970: 0))
            }
            func kindEntry(_ category: String, _ object: Any?, _ keys: [(String, String, Bool)]) {
                let values = object as? [String: Any] ?? [:]
                var kindFields: [FieldInfo] = []
                for (key, label, hidden) in keys {
                    if let value = string(values[key]), !value.isEmpty {
                        kindFields.append(FieldInfo(name: label, value: value, hidden: hidden))
                    }
                }
                if let place { kindFields.append(FieldInfo(name: "Folder", value: place, hidden: false)) }
                entry.category = category
                entry.userId = string(values["username"])
                entry.fields = kindFields + fields
            }
            switch item["type"] as? Int {
            case 1?:
                let login = item["login"] as? [String: Any] ?? [:]
                entry.userId = string(login["username"])
                entry.password = string(login["password"]) ?? ""
                let uris = (login["uris"] as? [[String: Any]] ?? []).compactMap { string($0["uri"]) }.filter {
                    !$0.isEmpty
                }
                entry.url = uris.first
                entry.moreURLs = uris.count > 1 ? Array(uris.dropFirst()) : nil
                entry.fields = fields
                if let totp = string(login["totp"]), !totp.isEmpty {
                    if (try? TOTP(parsing: totp)) != nil {
                        entry.totp = totp
                    } else {
                        entry.fields = fields + [FieldInfo(name: "TOTP", value: totp, hidden: true)]
                        source.warnings.append(
                            .init(
                                kind: "entry", title: title,
                                reason: "its TOTP secret is not a standard one (kept as the hidden field 'TOTP')"))
                    }
                }
                if let fido = login["fido2Credentials"] as? [Any], !fido.isEmpty {
                    source.warnings.append(
                        .init(
                            kind: "entry", title: title,
                            reason: "its passkey cannot be carried over (Bitwarden exports only its metadata)"))
                }
            case 2?:
                var text = string(item["notes"]) ?? ""
                if !fields.isEmpty {
                    text +=
                        (text.isEmpty ? "" : "\n\n")
                        + fields.map { "\($0.name): \($0.value ?? "")" }.joined(separator: "\n")
                }
                source.document.notes.append(
                    .init(
                        title: name, folder: place, text: text,
                        createdAt: entry.createdAt, updatedAt: entry.updatedAt))
                continue
            case 3?:
                kindEntry(
                    cardCategory, item["card"],
                    [
                        ("cardholderName", "Cardholder", false), ("brand", "Brand", false),
                        ("number", "Number", true), ("expMonth", "Expiry month", false),
                        ("expYear", "Expiry year", false), ("code", "Security code", true),
                    ])
            case 4?:
                kindEntry(
                    identityCategory, item["identity"],
                    [
                        ("title", "Title", false), ("firstName", "First name", false),
                        ("middleName", "Middle name", false),
                        ("lastName", "Last name", false), ("company", "Company", false), ("email", "E-mail", false),
                        ("phone", "Phone", false), ("address1", "Address 1", false), ("address2", "Address 2", false),
                        ("address3", "Address 3", false), ("city", "City", false), ("state", "State", false),
                        ("postalCode", "Postal code", false), ("country", "Country", false),
                        ("ssn", "Social security number", true),
                        ("passportNumber", "Passport number", true), ("licenseNumber", "License number", true),
                    ])
            case 5?:
                kindEntry(
                    sshKeyCategory, item["sshKey"],
                    [
                        ("privateKey", "Private key", true), ("publicKey", "Public key", false),
                        ("keyFingerprint", "Fingerprint", false),
                    ])
            case let type:
                source.skipped.append(
                    .init(
                        kind: "item", title: title,
                        reason: "unknown Bitwarden item type \(type.map(String.init) ?? "(none)")"))
                continue
            }
            source.document.passwords.append(entry)
        }
        return source
    }

    /// Folders or collections: id → name.
    private static func names(_ value: Any?) -> [String: String] {
        Dictionary(
            (value as? [[String: Any]] ?? []).compactMap { object -> (String, String)? in
                guard let id = string(object["id"]), let name = string(object["name"]) else { return nil }
                return (id, name)
            }, uniquingKeysWith: { a, _ in a })
    }

    /// Custom fields: type 0 text, 1 hidden, 2 boolean, 3 linked (to another field of the item).
    private static func customFields(_ value: Any?) -> [FieldInfo] {
        (value as? [[String: Any]] ?? []).enumerated().map { index, field in
            let name = string(field["name"]).flatMap { $0.isEmpty ? nil : $0 } ?? "Field \(index + 1)"
            let type = field["type"] as? Int ?? 0
            if type == 3 {
                let linked = [100: "username", 101: "password"][field["linkedId"] as? Int ?? 0] ?? "another field"
                return FieldInfo(name: name, value: "(linked to the \(linked))", hidden: false)
            }
            return FieldInfo(name: name, value: string(field["value"]), hidden: type == 1)
        }
    }

    /// Strings, also numbers and booleans written as values (card months, boolean fields).
    private static func string(_ value: Any?) -> String? {
        switch value {
        case let text as String: return text
        case let number as NSNumber: return number.stringValue
        default: return nil
        }
    }
}
