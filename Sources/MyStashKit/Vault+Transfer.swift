import Foundation
import ObjectGraph

/// Formats `mystash import` reads.
public enum ImportFormat: String, CaseIterable, Sendable {
    case mystashJSON = "mystash-json"
    case bitwardenJSON = "bitwarden-json"
    case keepassxcCSV = "keepassxc-csv"
}

public struct ImportReport: Codable, Equatable {
    public var notes = 0
    public var passwords = 0
    public var categories = 0
}

/// The `mystash-json` document: everything in the vault, in plaintext.
struct ExportDocument: Codable {
    struct Entry: Codable {
        var name: String
        var userId: String?
        var password: String
        var url: String?
        var notes: String?
        var category: String?
        var createdAt: Date?
        var updatedAt: Date?
    }

    struct NoteItem: Codable {
        var title: String
        var text: String?
        var createdAt: Date?
        var updatedAt: Date?
    }

    var format = "mystash-json"
    var version = 1
    var categories: [String]
    var notes: [NoteItem]
    var passwords: [Entry]
}

extension Vault {
    // MARK: - Export

    private func exportDocument(progress: Progress?) throws -> ExportDocument {
        try Self.wrapErrors {
            let notes = try context.fetch(FetchRequest<Note>(sortDescriptors: [FetchSortDescriptor(key: "createdAt")]))
            let entries = try context.fetch(FetchRequest<PasswordEntry>(sortDescriptors: [FetchSortDescriptor(key: "createdAt")]))
            progress?.report(notes.count + entries.count, of: notes.count + entries.count)
            return ExportDocument(
                categories: try context.fetch(FetchRequest<Category>(sortDescriptors: [FetchSortDescriptor(key: "name")])).map(\.name),
                notes: notes.map { .init(title: $0.title, text: $0.text, createdAt: $0.createdAt, updatedAt: $0.updatedAt) },
                passwords: entries.map { .init(name: $0.name, userId: $0.userId, password: $0.password, url: $0.url, notes: $0.notes,
                                               category: $0.category?.name, createdAt: $0.createdAt, updatedAt: $0.updatedAt) })
        }
    }

    /// Everything in the vault as `mystash-json` (plaintext).
    public func exportJSON(progress: Progress? = nil) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(try exportDocument(progress: progress))
    }

    /// Everything in the vault as CSV (plaintext): `kind,name,user,password,url,notes,category`.
    public func exportCSV(progress: Progress? = nil) throws -> String {
        let document = try exportDocument(progress: progress)
        var lines = [CSV.line(["kind", "name", "user", "password", "url", "notes", "category"])]
        for entry in document.passwords {
            lines.append(CSV.line(["password", entry.name, entry.userId ?? "", entry.password, entry.url ?? "", entry.notes ?? "", entry.category ?? ""]))
        }
        for note in document.notes { lines.append(CSV.line(["note", note.title, "", "", "", note.text ?? "", ""])) }
        for category in document.categories { lines.append(CSV.line(["category", category, "", "", "", "", ""])) }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - Import

    /// Adds everything in `data` in one save: all of it, or (on any invalid item) nothing.
    ///
    /// - throws: ``VaultError`` `.invalidData` (65) naming each bad item and field.
    public func importItems(_ data: Data, format: ImportFormat, progress: Progress? = nil) throws -> ImportReport {
        let document = try parse(data, format: format)
        var report = ImportReport()
        var labels: [ObjectIdentifier: String] = [:]
        do {
            var categories = Dictionary(try context.fetch(FetchRequest<Category>()).map { ($0.name.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
            func category(_ name: String?) -> Category? {
                guard let name = name?.trimmingCharacters(in: .whitespaces), !name.isEmpty else { return nil }
                if let existing = categories[name.lowercased()] { return existing }
                let created = context.insert(Category.self)
                created["name"] = name
                labels[ObjectIdentifier(created)] = "category '\(name)'"
                categories[name.lowercased()] = created
                report.categories += 1
                return created
            }
            for name in document.categories { _ = category(name) }
            let total = document.notes.count + document.passwords.count
            for (index, item) in document.notes.enumerated() {
                let note = context.insert(Note.self)
                note.title = item.title
                note.text = item.text ?? ""
                if let date = item.createdAt { note["createdAt"] = date }
                if let date = item.updatedAt { note["updatedAt"] = date }
                labels[ObjectIdentifier(note)] = "note \(index + 1)"
                report.notes += 1
                progress?.report(report.notes, of: total)
            }
            for (index, item) in document.passwords.enumerated() {
                let entry = context.insert(PasswordEntry.self)
                entry["name"] = item.name
                entry["password"] = item.password
                entry["userId"] = item.userId.flatMap { $0.isEmpty ? nil : $0 }
                entry["url"] = item.url.flatMap { $0.isEmpty ? nil : $0 }
                entry["notes"] = item.notes.flatMap { $0.isEmpty ? nil : $0 }
                entry["category"] = category(item.category)
                if let date = item.createdAt { entry["createdAt"] = date }
                if let date = item.updatedAt { entry["updatedAt"] = date }
                labels[ObjectIdentifier(entry)] = "password \(index + 1)"
                report.passwords += 1
                progress?.report(report.notes + report.passwords, of: total)
            }
            try ensureStoreConstraints()
            try context.save()
            return report
        } catch let error as ValidationError {
            context.rollback()
            let lines = error.errors.map { failure in
                let label = failure.object.flatMap { labels[ObjectIdentifier($0)] }
                return (label.map { "\($0): " } ?? "") + ValidationMessages.message(for: failure)
            }
            throw VaultError(.invalidData, "nothing was imported:", details: lines)
        } catch {
            context.rollback()
            throw VaultError.wrapping(error)
        }
    }

    private func parse(_ data: Data, format: ImportFormat) throws -> ExportDocument {
        func invalid(_ reason: String) -> VaultError {
            VaultError(.invalidData, "the file is not valid \(format.rawValue): \(reason)", hint: "check --format; it must be one of \(ImportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        switch format {
        case .mystashJSON:
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            do {
                let document = try decoder.decode(ExportDocument.self, from: data)
                guard document.format == "mystash-json" else { throw invalid("its format is '\(document.format)'") }
                return document
            } catch let error as VaultError {
                throw error
            } catch {
                throw invalid(describe(error))
            }
        case .bitwardenJSON:
            guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let items = root["items"] as? [[String: Any]] else {
                throw invalid("expected an object with an \"items\" array")
            }
            let folders = Dictionary((root["folders"] as? [[String: Any]] ?? []).compactMap { folder -> (String, String)? in
                guard let id = folder["id"] as? String, let name = folder["name"] as? String else { return nil }
                return (id, name)
            }, uniquingKeysWith: { a, _ in a })
            var document = ExportDocument(categories: [], notes: [], passwords: [])
            for item in items {
                let name = item["name"] as? String ?? ""
                let notes = item["notes"] as? String
                switch item["type"] as? Int {
                case 1?:
                    let login = item["login"] as? [String: Any] ?? [:]
                    let uri = (login["uris"] as? [[String: Any]])?.first?["uri"] as? String
                    document.passwords.append(.init(name: name, userId: login["username"] as? String, password: login["password"] as? String ?? "",
                                                    url: uri, notes: notes, category: (item["folderId"] as? String).flatMap { folders[$0] }))
                case 2?:
                    document.notes.append(.init(title: name, text: notes))
                default:
                    continue  // cards and identities have no counterpart here
                }
            }
            return document
        case .keepassxcCSV:
            let rows = CSV.parse(String(decoding: data, as: UTF8.self))
            guard let header = rows.first?.map({ $0.lowercased() }), let title = header.firstIndex(of: "title"), let password = header.firstIndex(of: "password") else {
                throw invalid("expected a header with \"Title\" and \"Password\" columns")
            }
            func column(_ name: String) -> Int? { header.firstIndex(of: name) }
            let (group, user, url, notes) = (column("group"), column("username"), column("url"), column("notes"))
            var document = ExportDocument(categories: [], notes: [], passwords: [])
            for row in rows.dropFirst() {
                func value(_ index: Int?) -> String? { index.flatMap { $0 < row.count ? row[$0] : nil } }
                let groupName = value(group)?.split(separator: "/").last.map(String.init)
                document.passwords.append(.init(name: value(title) ?? "", userId: value(user), password: value(password) ?? "",
                                                url: value(url), notes: value(notes), category: groupName == "Root" ? nil : groupName))
            }
            return document
        }
    }

    private func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong value at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.dataCorrupted(let context): return context.debugDescription
        default: return "\(error)"
        }
    }
}

/// Progress of a long operation, reported to a closure (the CLI draws it on a terminal).
public final class Progress {
    private let handler: (Int, Int) -> Void
    public init(_ handler: @escaping (_ done: Int, _ total: Int) -> Void) { self.handler = handler }
    func report(_ done: Int, of total: Int) { handler(done, total) }
}
