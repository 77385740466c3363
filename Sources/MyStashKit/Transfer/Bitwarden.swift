import Foundation

/// Reads Bitwarden's unencrypted JSON export (personal vault or organisation): logins,
/// secure notes, cards, identities and SSH keys, with folders or collections as categories.
enum BitwardenReader {
    /// Seed categories the kinds without a login go to (Config/Seeds/categories.csv, version 5).
    static let cardCategory = "Payment Card"
    static let identityCategory = "Identity"
    static let sshKeyCategory = Vault.sshKeyCategory

    /// Reads the ZIP archive Bitwarden writes for ".zip (with attachments)": `data.json`, its
    /// JSON export, and each attachment as `attachments/<item id>/<file name>`.
    static func readZip(_ file: Data, replacingInvalidUTF8: Bool) throws -> ImportSource {
        let source = ImportSource()
        let archive: ZipArchive
        do {
            archive = try ZipArchive(file)
        } catch let damaged as ZipArchive.Damaged {
            throw source.invalid(.bitwardenZIP, damaged.reason)
        }
        guard let json = archive.members.first(where: { $0.name == "data.json" }) else {
            throw VaultError.bitwardenArchiveWithoutData

        }
        var files: [String: [ExportDocument.AttachedFile]] = [:]
        var strays: [ImportReport.Item] = []
        do {
            for member in archive.members where member.name.hasPrefix("attachments/") && !member.name.hasSuffix("/") {
                let parts = member.name.split(separator: "/", maxSplits: 2).map(String.init)
                guard parts.count == 3 else {
                    strays.append(
                        .init(kind: "file", title: member.name, reason: "not in an item's folder; not imported"))
                    continue
                }
                try Vault.refuseOverAttachmentLimit(Int64(member.size), name: member.name)
                files[parts[1], default: []].append(.init(name: parts[2], data: try archive.contents(of: member)))
            }
            let text = try archive.contents(of: json)
            let isText = text.withUnsafeBytes { UTF8Text.isValid($0.bindMemory(to: UInt8.self)) }
            let data = isText ? text
                : Data(try UTF8Text.decode(text, place: "data.json", replacingInvalid: replacingInvalidUTF8).utf8)
            var read = try self.read(data, attachments: files)
            read.warnings += strays
            return read
        } catch let damaged as ZipArchive.Damaged {
            throw source.invalid(.bitwardenZIP, damaged.reason)
        }
    }

    /// Reads the JSON export; `attachments` are the files of each item by its ID (from a ZIP export).
    static func read(_ data: Data, attachments: [String: [ExportDocument.AttachedFile]] = [:]) throws -> ImportSource {
        var source = ImportSource()
        let dates = ExportDocument.Dates()
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = dates.date(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a date"))
            }
            return date
        }
        // Checked whole first: members are read leniently, and the decoder reads a string only
        // when asked for it, so a damaged string in a member of the wrong type would pass unseen.
        if let error = JSONSyntax.error(in: data) { throw source.invalid(.bitwardenJSON, error) }
        let export: BitwardenExport
        do {
            guard let read = try BitwardenExport(data, decoder: decoder) else {
                throw source.invalid(.bitwardenJSON, "expected a JSON object")
            }
            export = read
        } catch let error as DecodingError {
            throw source.invalid(.bitwardenJSON, Vault.describe(error))
        }
        if export.encrypted == true {
            throw VaultError.encryptedBitwardenExport
        }
        guard let items = export.items else {
            throw source.invalid(.bitwardenJSON, "expected an object with an \"items\" array")
        }
        let folders = names(export.folders)
        let collections = names(export.collections)
        var unclaimed = Set(attachments.keys)
        for (index, place) in items.enumerated() {
            let item: BitwardenExport.Item
            do {
                item = try export.item(at: place)
            } catch let error as DecodingError {  // nesting deeper than the decoder goes, say
                throw source.invalid(.bitwardenJSON, "item \(index + 1): \(Vault.describe(error))")
            }
            let name = item.name ?? ""
            let title = name.isEmpty ? "item \(index + 1)" : name
            if item.deletedDate != nil {
                // As KeePassXC's recycle bin: not imported, and said so, with its files.
                let files = item.id.flatMap { attachments[$0]?.count } ?? 0
                if let id = item.id { unclaimed.remove(id) }
                source.skipped.append(.init(kind: "item", title: title,
                    reason: "in the trash" + (files > 0 ? " (with its \(files) attachment(s))" : "")))
                continue
            }
            let folder = item.folderId.flatMap { folders[$0] }
            let itemCollections = (item.collectionIds ?? []).compactMap { collections[$0] }
            var fields = customFields(item.fields)
            if itemCollections.count > 1 {
                fields.append(
                    FieldInfo(name: "Collections", value: itemCollections.joined(separator: ", "), hidden: false))
            }
            let place = folder ?? itemCollections.first
            var entry = ExportDocument.Entry(
                name: name, password: "", notes: item.notes, category: place,
                createdAt: item.creationDate, updatedAt: item.revisionDate)
            entry.favorite = item.favorite == true ? true : nil
            let files = item.id.flatMap { attachments[$0] } ?? []
            if let id = item.id { unclaimed.remove(id) }
            entry.attachments = files.isEmpty ? nil : files
            if files.isEmpty, let listed = item.attachments, !listed.isEmpty {
                source.warnings.append(.init(kind: "item", title: title,
                    reason: "its \(listed.count) attachment(s) are not in this file (Bitwarden's JSON export leaves "
                        + "them out; export as '.zip (with attachments)' to bring them)"))
            }
            entry.history = item.passwordHistory?.compactMap { old in
                guard let password = old.password else { return nil }
                return HistoryInfo(password: password, replacedAt: old.lastUsedDate ?? Date(timeIntervalSince1970: 0))
            }
            func kindEntry<Kind: BitwardenKind>(_ kind: Kind?) {
                let values = kind ?? Kind()
                var kindFields: [FieldInfo] = []
                for (key, label, hidden) in Kind.fields {
                    if let value = values[keyPath: key], !value.isEmpty {
                        kindFields.append(FieldInfo(name: label, value: value, hidden: hidden))
                    }
                }
                if let place { kindFields.append(FieldInfo(name: "Folder", value: place, hidden: false)) }
                entry.category = Kind.category
                entry.userId = values.username
                entry.fields = kindFields + fields
            }
            switch item.type {
            case 1?:
                let login = item.login ?? BitwardenExport.Login()
                entry.userId = login.username
                entry.password = login.password ?? ""
                let uris = (login.uris ?? []).compactMap(\.uri).filter { !$0.isEmpty }
                entry.url = uris.first
                entry.moreURLs = uris.count > 1 ? Array(uris.dropFirst()) : nil
                entry.fields = fields
                if let totp = login.totp, !totp.isEmpty {
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
                if let passkeys = login.fido2Credentials, !passkeys.isEmpty {
                    source.warnings.append(
                        .init(
                            kind: "entry", title: title,
                            reason: "its passkey cannot be carried over (Bitwarden exports only its metadata)"))
                }
            case 2?:
                var text = item.notes ?? ""
                if !fields.isEmpty {
                    text +=
                        (text.isEmpty ? "" : "\n\n")
                        + fields.map { "\($0.name): \($0.value ?? "")" }.joined(separator: "\n")
                }
                if !files.isEmpty {
                    // Notes hold no files: the note comes as an entry that can, its text as the entry's notes.
                    entry.notes = text
                    source.warnings.append(.init(kind: "item", title: title,
                        reason: "a secure note with attachments: imported as an entry, which can hold them"))
                    break
                }
                source.document.notes.append(
                    .init(
                        title: name, folder: place, text: text,
                        createdAt: entry.createdAt, updatedAt: entry.updatedAt))
                continue
            case 3?: kindEntry(item.card)
            case 4?: kindEntry(item.identity)
            case 5?:
                kindEntry(item.sshKey)
                if let privateKey = item.sshKey?.privateKey, !privateKey.isEmpty {
                    source.shapeSSHKeyEntry(&entry, privateKey: privateKey, passphrase: nil)
                }
            case let type:
                source.skipped.append(
                    .init(
                        kind: "item", title: title,
                        reason: "unknown Bitwarden item type \(type.map(String.init) ?? "(none)")"))
                continue
            }
            source.document.passwords.append(entry)
        }
        for id in unclaimed.sorted() {
            for file in attachments[id] ?? [] {
                source.warnings.append(.init(kind: "file", title: "attachments/\(id)/\(file.name)",
                                             reason: "no item has the ID '\(id)'; not imported"))
            }
        }
        return source
    }

    /// Folders or collections: id → name.
    private static func names(_ list: [BitwardenExport.Named]?) -> [String: String] {
        Dictionary(
            (list ?? []).compactMap { named -> (String, String)? in
                guard let id = named.id, let name = named.name else { return nil }
                return (id, name)
            }, uniquingKeysWith: { a, _ in a })
    }

    /// Custom fields: type 0 text, 1 hidden, 2 boolean, 3 linked (to another field of the item).
    private static func customFields(_ list: [BitwardenExport.Field]?) -> [FieldInfo] {
        (list ?? []).enumerated().map { index, field in
            let name = field.name.flatMap { $0.isEmpty ? nil : $0 } ?? "Field \(index + 1)"
            let type = field.type ?? 0
            if type == 3 {
                let linked = [100: "username", 101: "password"][field.linkedId ?? 0] ?? "another field"
                return FieldInfo(name: name, value: "(linked to the \(linked))", hidden: false)
            }
            return FieldInfo(name: name, value: field.value, hidden: type == 1)
        }
    }
}

// MARK: - The export's shape

/// Bitwarden's export as far as MyStash reads it (bitwarden.com/help/condition-bitwarden-import).
/// Every member is read leniently: a value of another type than expected counts as absent and
/// never refuses the file; a list with one element of the wrong kind counts as absent whole.
/// Members not named here are not read.
struct BitwardenExport {
    struct Named: Decodable {
        @Lenient var id: String?
        @Lenient var name: String?
    }

    struct Field: Decodable {
        @Lenient var name: String?
        @Lenient var value: String?
        @Lenient var type: Int?
        @Lenient var linkedId: Int?
    }

    struct History: Decodable {
        @Lenient var password: String?
        @Lenient var lastUsedDate: Date?
    }

    struct Login: Decodable, LenientValue {
        struct URI: Decodable { @Lenient var uri: String? }
        @Lenient var username: String?
        @Lenient var password: String?
        @Lenient var uris: [URI]?
        @Lenient var totp: String?
        /// Passkeys: only their metadata is exported, so only their presence matters.
        @Lenient var fido2Credentials: [Unread]?
    }

    struct Card: BitwardenKind {
        static let category = BitwardenReader.cardCategory
        static var fields: [(KeyPath<Card, String?>, String, Bool)] {
            [
                (\.cardholderName, "Cardholder", false), (\.brand, "Brand", false), (\.number, "Number", true),
                (\.expMonth, "Expiry month", false), (\.expYear, "Expiry year", false), (\.code, "Security code", true),
            ]
        }
        @Lenient var cardholderName: String?
        @Lenient var brand: String?
        @Lenient var number: String?
        @Lenient var expMonth: String?
        @Lenient var expYear: String?
        @Lenient var code: String?
        @Lenient var username: String?
    }

    struct Identity: BitwardenKind {
        static let category = BitwardenReader.identityCategory
        static var fields: [(KeyPath<Identity, String?>, String, Bool)] {
            [
                (\.title, "Title", false), (\.firstName, "First name", false), (\.middleName, "Middle name", false),
                (\.lastName, "Last name", false), (\.company, "Company", false), (\.email, "E-mail", false),
                (\.phone, "Phone", false), (\.address1, "Address 1", false), (\.address2, "Address 2", false),
                (\.address3, "Address 3", false), (\.city, "City", false), (\.state, "State", false),
                (\.postalCode, "Postal code", false), (\.country, "Country", false),
                (\.ssn, "Social security number", true), (\.passportNumber, "Passport number", true),
                (\.licenseNumber, "License number", true),
            ]
        }
        @Lenient var title: String?
        @Lenient var firstName: String?
        @Lenient var middleName: String?
        @Lenient var lastName: String?
        @Lenient var company: String?
        @Lenient var email: String?
        @Lenient var phone: String?
        @Lenient var address1: String?
        @Lenient var address2: String?
        @Lenient var address3: String?
        @Lenient var city: String?
        @Lenient var state: String?
        @Lenient var postalCode: String?
        @Lenient var country: String?
        @Lenient var ssn: String?
        @Lenient var passportNumber: String?
        @Lenient var licenseNumber: String?
        @Lenient var username: String?
    }

    struct SSHKey: BitwardenKind {
        static let category = BitwardenReader.sshKeyCategory
        static var fields: [(KeyPath<SSHKey, String?>, String, Bool)] {
            [
                (\.privateKey, "Private key", true), (\.publicKey, "Public key", false),
                (\.keyFingerprint, "Fingerprint", false),
            ]
        }
        @Lenient var privateKey: String?
        @Lenient var publicKey: String?
        @Lenient var keyFingerprint: String?
        @Lenient var username: String?
    }

    struct Item: Decodable {
        @Lenient var id: String?
        /// 1 login, 2 secure note, 3 card, 4 identity, 5 SSH key; others are reported as skipped.
        @Lenient var type: Int?
        /// What `bw list items` lists of the attachments; their bytes come only in a ZIP export.
        @Lenient var attachments: [Unread]?
        @Lenient var name: String?
        @Lenient var notes: String?
        @Lenient var folderId: String?
        @Lenient var collectionIds: [String]?
        @Lenient var favorite: Bool?
        @Lenient var fields: [Field]?
        @Lenient var passwordHistory: [History]?
        @Lenient var creationDate: Date?
        @Lenient var revisionDate: Date?
        /// Set for an item in Bitwarden's trash (`bw list items --trash`).
        @Lenient var deletedDate: Date?
        @Lenient var login: Login?
        @Lenient var card: Card?
        @Lenient var identity: Identity?
        @Lenient var sshKey: SSHKey?
    }

    var encrypted: Bool?
    var folders: [Named]?
    var collections: [Named]?
    /// Where each item is in the text: each is decoded alone, when its turn comes (``item(at:)``),
    /// so the decoder never maps the whole text. Nil when missing or not an array of objects:
    /// the file is refused.
    var items: [Range<Data.Index>]?
    private let data: Data
    private let decoder: JSONDecoder

    /// The export in `data`, a text ``JSONSyntax/error(in:)`` passed; nil when its root is not an object.
    init?(_ data: Data, decoder: JSONDecoder) throws {
        guard let members = JSONSyntax.rootMembers(of: data) else { return nil }
        self.data = data
        self.decoder = decoder
        var values: [String: Range<Data.Index>] = [:]
        for member in members { values[member.name] = member.value }
        func member<Value: LenientValue>(_ name: String, _ type: Value.Type) throws -> Value? {
            guard let range = values[name] else { return nil }
            return try decoder.decode(Lenient<Value>.self, from: data[range]).wrappedValue
        }
        encrypted = try member("encrypted", Bool.self)
        // The items of an encrypted export are ciphertext: not read at all.
        guard encrypted != true else { return }
        folders = try member("folders", [Named].self)
        collections = try member("collections", [Named].self)
        if let range = values["items"], let elements = JSONSyntax.elements(ofArrayAt: range, in: data),
            elements.allSatisfy({ data[$0.lowerBound] == UInt8(ascii: "{") })
        {
            items = elements
        }
    }

    func item(at range: Range<Data.Index>) throws -> Item { try decoder.decode(Item.self, from: data[range]) }
}

/// A card, an identity or an SSH key: labelled fields, and the category the entry goes to.
protocol BitwardenKind: Decodable, LenientValue {
    static var category: String { get }
    /// Each member with its label and whether it is hidden, in the order the entry shows them.
    static var fields: [(KeyPath<Self, String?>, String, Bool)] { get }
    var username: String? { get }
    init()
}

// MARK: - Lenient values

/// A value read as the dictionaries of `JSONSerialization` were read with `as?`: nil when it
/// has another type.
protocol LenientValue {
    init?(lenient decoder: Decoder)
}

extension LenientValue where Self: Decodable {
    init?(lenient decoder: Decoder) {
        guard let value = try? Self(from: decoder) else { return nil }
        self = value
    }
}

extension Int: LenientValue {}
extension Date: LenientValue {
    /// Text read by the decoder's date strategy (`Date(from:)` itself would read a number).
    init?(lenient decoder: Decoder) {
        guard let container = try? decoder.singleValueContainer(), let date = try? container.decode(Date.self)
        else { return nil }
        self = date
    }
}
extension Array: LenientValue where Element: Decodable {}

extension Bool: LenientValue {
    /// Also 0 and 1, which `as? Bool` took.
    init?(lenient decoder: Decoder) {
        guard let container = try? decoder.singleValueContainer() else { return nil }
        if let value = try? container.decode(Bool.self) {
            self = value
        } else if let number = try? container.decode(Int.self), number == 0 || number == 1 {
            self = number == 1
        } else {
            return nil
        }
    }
}

extension String: LenientValue {
    /// Also numbers and booleans written where text belongs (card months, boolean fields), as
    /// `NSNumber.stringValue` wrote them.
    init?(lenient decoder: Decoder) {
        guard let container = try? decoder.singleValueContainer() else { return nil }
        if let text = try? container.decode(String.self) {
            self = text
        } else if let flag = try? container.decode(Bool.self) {
            self = flag ? "1" : "0"
        } else if let number = try? container.decode(Int64.self) {
            self = String(number)
        } else if let number = try? container.decode(UInt64.self) {
            self = String(number)
        } else if let number = try? container.decode(Double.self) {
            self = String(number)
        } else {
            return nil
        }
    }
}

/// A JSON value that is counted, never read.
struct Unread: Decodable {
    init(from decoder: Decoder) {}
}

/// A member read leniently (``LenientValue``); missing, null or of another type, it is nil.
@propertyWrapper
struct Lenient<Value: LenientValue>: Decodable {
    var wrappedValue: Value?

    init() { wrappedValue = nil }

    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    init(from decoder: Decoder) { wrappedValue = Value(lenient: decoder) }
}

extension KeyedDecodingContainer {
    /// A missing member is absent too (synthesized decoding of a ``Lenient`` member calls this).
    func decode<Value>(_ type: Lenient<Value>.Type, forKey key: Key) throws -> Lenient<Value> {
        (try? decodeIfPresent(type, forKey: key)) ?? Lenient()
    }
}
