import Foundation
import ObjectGraph

/// Formats an import reads.
public enum ImportFormat: String, CaseIterable, Sendable {
    case mystashJSON = "mystash-json"
    case bitwardenJSON = "bitwarden-json"
    /// Bitwarden's ".zip (with attachments)": its JSON export and the attachments' files.
    case bitwardenZIP = "bitwarden-zip"
    case keepassxcCSV = "keepassxc-csv"
    case keepassxcXML = "keepassxc-xml"
    /// A pass or gopass password-store directory, decrypted with gpg.
    case pass
}

/// What an import did with every item of the source: imported, updated, or skipped with
/// the reason; warnings name items carried over with something to know.
public struct ImportReport: Codable, Equatable {
    /// One item of the source, by its kind ("entry", "note", "category") and title.
    public struct Item: Codable, Equatable {
        public var kind: String
        public var title: String
        public var reason: String?
        /// The ID of the item an update changes (two entries may share a title); nil for others.
        public var id: Int64?
        /// Each value an update changes (``Change``); nil for other items.
        public var changes: [Change]?

        public init(kind: String, title: String, reason: String? = nil, id: Int64? = nil, changes: [Change]? = nil) {
            self.kind = kind
            self.title = title
            self.reason = reason
            self.id = id
            self.changes = changes
        }
    }

    public var imported: [Item] = []
    public var updated: [Item] = []
    public var skipped: [Item] = []
    public var warnings: [Item] = []
    /// True when nothing was saved because the import only showed what it would do.
    public var dryRun = false

    public init() {}

    /// How many items of `kind` were imported.
    public func importedCount(_ kind: String) -> Int { imported.filter { $0.kind == kind }.count }
}

/// Where the objects of an import come from, named in a validation message: "entry 'Mail'",
/// "note 3 (untitled)", "entry 'Mail', field 'PIN'". Only notes and entries are kept (by their
/// index in the source); a field, an earlier password or a category is named through its own
/// values, so 100,000 entries with their fields and history keep two small tables, not a place each.
private struct ImportPlaces {
    /// What messages name a source's items by, kept once the rest of the source is let go.
    let noteTitles: [String]
    let entryTitles: [String]
    var notes: [ObjectIdentifier: Int] = [:]
    var entries: [ObjectIdentifier: Int] = [:]

    init(_ document: ExportDocument) {
        noteTitles = document.notes.map(\.title)
        entryTitles = document.passwords.map(\.name)
        notes.reserveCapacity(document.notes.count)
        entries.reserveCapacity(document.passwords.count)
    }

    func entryLabel(_ index: Int) -> String { Self.title("entry", index, entryTitles[index]) }

    func label(of object: ManagedObject) -> String? {
        switch object {
        case let note as Note: return notes[ObjectIdentifier(note)].map { Self.title("note", $0, noteTitles[$0]) }
        case let entry as PasswordEntry: return entries[ObjectIdentifier(entry)].map(entryLabel)
        case let field as CustomField:
            return field.entry.flatMap { label(of: $0) }.map { "\($0), field '\(field.name)'" }
        case let old as PasswordHistoryItem:
            return old.entry.flatMap { label(of: $0) }.map { "\($0), earlier password" }
        case let category as Category where category.isInserted: return "category '\(category.name)'"
        default: return nil
        }
    }

    private static func title(_ kind: String, _ index: Int, _ title: String) -> String {
        // As the import matched it: trimmed.
        let title = EntryRules.trimmedName(title)
        return title.isEmpty ? "\(kind) \(index + 1) (untitled)" : "\(kind) '\(title)'"
    }
}

/// What an importer read: the items, and those it could not carry over (with the reason).
struct ImportSource {
    var document = ExportDocument(categories: [], notes: [], passwords: [])
    var skipped: [ImportReport.Item] = []
    var warnings: [ImportReport.Item] = []

    func invalid(_ format: ImportFormat, _ reason: String) -> VaultError {
        .invalidFile(format, reason: reason)
    }
}

extension Vault {
    // MARK: - Import

    static func read(_ file: Data, format: ImportFormat, replacingInvalidUTF8: Bool = false) throws -> ImportSource {
        // An archive of files: its JSON member is checked as text when it is read.
        if format == .bitwardenZIP {
            return try BitwardenReader.readZip(file, replacingInvalidUTF8: replacingInvalidUTF8)
        }
        // Every other format is UTF-8 text: checked once here, so no reader turns a bad byte into U+FFFD.
        let isText = file.withUnsafeBytes { UTF8Text.isValid($0.bindMemory(to: UInt8.self)) }
        let data =
            isText
            ? file : Data(try UTF8Text.decode(file, place: "the file", replacingInvalid: replacingInvalidUTF8).utf8)
        switch format {
        case .mystashJSON: return try readMystashJSON(data)
        case .bitwardenJSON: return try BitwardenReader.read(data)
        case .keepassxcCSV: return try KeePassXCReader.readCSV(data)
        case .keepassxcXML: return try KeePassXCReader.readXML(data)
        case .bitwardenZIP: preconditionFailure("read above")
        case .pass:
            throw VaultError.passStoreIsAFile
        }
    }

    func importSource(_ source: consuming ImportSource, dryRun: Bool, merge: ImportMerge,
                             progress: Progress?) throws -> ImportReport {
        var report = ImportReport()
        report.dryRun = dryRun
        report.skipped = source.skipped
        report.warnings = source.warnings
        // Where each new or changed object comes from, for a validation message: labels are
        // made only when one fails (a string for each of 100,000 items was kept for nothing).
        let document = source.document
        var places = ImportPlaces(document)
        // Problems of values found while applying them (a TOTP secret), listed with validation's.
        var valueProblems: [String] = []
        // Named while the objects are still the context's: a field's entry is read through it.
        func describe(_ error: ValidationError) -> [String] {
            error.errors.map { failure in
                let label = failure.object.flatMap { places.label(of: $0) }
                return (label.map { "\($0): " } ?? "") + ValidationMessages.message(for: failure)
            }
        }
        report.imported.reserveCapacity(document.notes.count + document.passwords.count)
        do {
            var categories = Dictionary(try context.fetch(FetchRequest<Category>()).map { ($0.name.lowercased(), $0) },
                                        uniquingKeysWith: { a, _ in a })
            func category(_ name: String?) -> Category? {
                guard let name = name?.trimmingCharacters(in: .whitespaces), !name.isEmpty else { return nil }
                if let existing = categories[name.lowercased()] { return existing }
                let created = context.insert(Category.self)
                created.name = name
                categories[name.lowercased()] = created
                report.imported.append(.init(kind: "category", title: name))
                return created
            }
            for name in document.categories { _ = category(name) }
            let total = document.notes.count + document.passwords.count
            var done = 0

            var existingNotes = try matchTable(
                try context.fetch(FetchRequest<Note>()), key: { Self.noteKey($0.title, $0.folder) })
            for (index, var item) in document.notes.enumerated() {
                item.title = EntryRules.trimmedName(item.title)
                let key = Self.noteKey(item.title, item.folder)
                let note: Note
                if let existing = existingNotes[key]?.first {
                    existingNotes[key]?.removeFirst()
                    let text = item.text ?? ""
                    if existing.text == text || (merge == .keepingValues && text.isEmpty) {
                        report.skipped.append(
                            .init(kind: "note", title: item.title, reason: "already in the vault, unchanged"))
                        continue
                    }
                    note = existing
                    report.updated.append(.init(kind: "note", title: item.title, id: existing.id, changes: [
                        EntryMerge.change("text", existing.text, text, secret: true)]))
                } else {
                    note = context.insert(Note.self)
                    note.title = item.title
                    note.folder = item.folder.flatMap { $0.isEmpty ? nil : $0 }
                    if let date = item.createdAt { note.createdAt = date }
                    report.imported.append(.init(kind: "note", title: item.title))
                }
                note.text = item.text ?? ""
                note.updatedAt = item.updatedAt ?? Date()
                places.notes[ObjectIdentifier(note)] = index
                done += 1
                progress?.report(done, of: total)
            }

            try prefetchCategories()
            var existingEntries = try matchTable(try context.fetch(FetchRequest<PasswordEntry>()),
                                                 key: { Self.entryKey($0.name, $0.userId, $0.url) })
            for (index, var item) in document.passwords.enumerated() {
                // Matched and compared by the name as it is stored.
                item.name = EntryRules.trimmedName(item.name)
                let key = Self.entryKey(item.name, item.userId, item.url)
                let entry: PasswordEntry
                var updated: (merged: EntryMerge, historyBefore: Int)?
                var files = item.attachments ?? []
                if let existing = existingEntries[key]?.first {
                    existingEntries[key]?.removeFirst()
                    for field in existing.fields { try context.decodeValues(of: field) }
                    for old in existing.history { try context.decodeValues(of: old) }
                    let vaultItem = Self.exportEntry(existing)
                    let merged = EntryMerge(vault: vaultItem, source: item, merge)
                    files = try files.filter { try !holds($0, existing) }
                    if merged.changes.isEmpty && !Self.addsHistory(item, to: vaultItem) && files.isEmpty {
                        report.skipped.append(
                            .init(kind: "entry", title: item.name, reason: "already in the vault, unchanged"))
                        continue
                    }
                    entry = existing
                    updated = (merged, existing.history.count)
                    // Changed now, unless the source says when it changed.
                    let changedAt = item.updatedAt ?? Date()
                    item = merged.result
                    item.createdAt = nil
                    item.updatedAt = changedAt
                } else {
                    entry = context.insert(PasswordEntry.self)
                    report.imported.append(.init(kind: "entry", title: item.name))
                }
                var changes = EntryChanges(name: item.name, userId: item.userId ?? "", url: item.url ?? "",
                    category: item.category ?? "", password: item.password, notes: item.notes ?? "")
                changes.moreURLs = item.moreURLs ?? []
                changes.totp = item.totp ?? ""
                changes.favorite = item.favorite ?? false
                changes.fields = item.fields ?? []
                changes.history = item.history
                changes.createdAt = item.createdAt
                changes.updatedAt = item.updatedAt
                if let count = item.history?.count, count > Self.historyLimit {
                    report.warnings.append(.init(kind: "entry", title: item.name,
                            reason: "kept the \(Self.historyLimit) most recent of \(count) earlier passwords"))
                }
                do {
                    try apply(changes, category: category(item.category), to: entry)
                } catch let error as VaultError {
                    // An unusable TOTP secret: refused like any invalid field, naming the item, with the others.
                    let title = places.entryLabel(index)
                    valueProblems += error.details.map { "\(title): \($0)" }
                    places.entries[ObjectIdentifier(entry)] = index
                    continue
                }
                let attached = try files.map { try insertAttachment($0, to: entry) }
                report.imported += attached.map { .init(kind: "attachment", title: "\(item.name)/\($0)") }
                for (file, name) in zip(files, attached) where file.name != name {
                    report.warnings.append(.init(kind: "attachment", title: "\(item.name)/\(name)",
                        reason: "named \(file.name.debugDescription) in the file (a name holds no line break, control "
                            + "character or '/', and is not taken twice)"))
                }
                if let (merged, before) = updated {
                    var changes = merged.changes
                    changes += attached.map { .init(field: "attachment", old: nil, new: "'\($0)'") }
                    let after = entry.history.count
                    // A new password moves the old one there: listed only when the source brought more.
                    let moved = merged.changes.contains { $0.field == "password" && $0.old != nil } ? 1 : 0
                    if after != min(before + moved, Self.historyLimit) {
                        changes.append(.init(field: "history", old: Self.earlierPasswords(before),
                                             new: Self.earlierPasswords(after)))
                    }
                    report.updated.append(.init(kind: "entry", title: item.name, id: entry.id, changes: changes))
                }
                places.entries[ObjectIdentifier(entry)] = index
                done += 1
                progress?.report(done, of: total)
            }
            if !valueProblems.isEmpty {
                var lines = valueProblems
                do { try context.validatePendingChanges() } catch let error as ValidationError {
                    lines += describe(error)
                }
                context.rollback()
                throw VaultError.nothingImported(lines)
            }
            // The source's items are in the objects now: what else it held goes before the save.
            _ = consume document
            _ = consume source
            if dryRun {
                try context.validatePendingChanges()
                context.rollback()
            } else {
                try ensureStoreConstraints()
                try saveChanges()
            }
            return report
        } catch let error as ValidationError {
            let lines = describe(error)
            context.rollback()
            throw VaultError.nothingImported(lines)
        } catch {
            context.rollback()
            throw VaultError.wrapping(error)
        }
    }

    /// Objects by their match key, in ID order: the n-th item of a source with a key
    /// matches the n-th object with it, so repeated names import once each, and again not at all.
    private func matchTable<T: ManagedEntity>(_ objects: [T], key: (T) -> String) throws -> [String: [T]] {
        var table: [String: [T]] = [:]
        for object in objects.sorted(by: { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }) {
            try context.decodeValues(of: object)
            table[key(object), default: []].append(object)
        }
        return table
    }

    static func noteKey(_ title: String, _ folder: String?) -> String {
        [title, folder ?? ""].map { $0.lowercased() }.joined(separator: "\u{0}")
    }

    static func entryKey(_ name: String, _ userId: String?, _ url: String?) -> String {
        [name, userId ?? "", url ?? ""].map { $0.lowercased() }.joined(separator: "\u{0}")
    }

    /// Whether `item` holds earlier passwords `entry` lacks and would keep: one older than all
    /// of a full history would be dropped again.
    static func addsHistory(_ item: ExportDocument.Entry, to entry: ExportDocument.Entry) -> Bool {
        func key(_ old: HistoryInfo) -> String { "\(old.password ?? "")\u{0}\(old.replacedAt.timeIntervalSince1970)" }
        let history = Set((entry.history ?? []).map(key))
        let full = (entry.history?.count ?? 0) >= historyLimit
        let oldest = entry.history?.map(\.replacedAt).min() ?? .distantPast
        return (item.history ?? []).contains { !(full && $0.replacedAt <= oldest) && !history.contains(key($0)) }
    }

    /// "3 earlier passwords", as a report shows a history's size.
    static func earlierPasswords(_ count: Int) -> String? {
        count == 0 ? nil : "\(count) earlier password\(count == 1 ? "" : "s")"
    }

    /// A decoding error of `data` in words: where the text stops being JSON (line and column),
    /// else the path of the item that does not fit (`passwords[2].name`).
    static func describe(_ error: Error, in data: Data? = nil) -> String {
        if let data, let problem = JSONSyntax.error(in: data) { return problem }
        func path(_ keys: [CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            let place = context.codingPath.isEmpty ? "" : " in \(path(context.codingPath))"
            return "missing \"\(key.stringValue)\"" + place
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong value at \(path(context.codingPath))"
        case DecodingError.dataCorrupted(let context):
            let place = context.codingPath.isEmpty ? "" : "\(path(context.codingPath)): "
            return place + context.debugDescription
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

extension Vault {
    /// Imports into an open vault and exports from it, as in `vault.transfer.exportJSON()`.
    public struct Transfer {
        let vault: Vault
    }

    public var transfer: Transfer { Transfer(vault: self) }
}

extension Vault.Transfer {

    /// Reads `data` (or, for ``ImportFormat/pass``, the store directory at `url`) and adds or
    /// updates its items in one save: all of it, or (on any invalid item) nothing. An item
    /// already in the vault unchanged is skipped, so importing the same file twice adds nothing.
    /// An item the vault has is merged as `merge` says: by default the source's values update
    /// the vault's and nothing the source lacks is removed; every value that changes is in the
    /// report (``ImportReport/Item/changes``), secrets masked.
    /// With `dryRun`, everything is checked and reported but nothing is saved. Text that is not
    /// UTF-8 is refused unless `replacingInvalidUTF8`, which turns each bad sequence into U+FFFD.
    ///
    /// - throws: ``VaultError`` `.invalidData` (65) naming each bad item by its title and field;
    ///   `.invalidText` (65) naming the line of a byte that is not UTF-8.
    ///
    /// A caller that hands the file over (`importItems(consume data, …)`) has it freed once it is
    /// read, before the items are saved: 145 MB of the 610 MB a 100,000-item import held at its peak.
    public func importItems(_ data: consuming Data, format: ImportFormat, dryRun: Bool = false,
                            merge: ImportMerge = .keepingValues, replacingInvalidUTF8: Bool = false,
                            progress: Progress? = nil) throws -> ImportReport {
        try vault.awaitVerification()
        let source = try Vault.read(data, format: format, replacingInvalidUTF8: replacingInvalidUTF8)
        _ = consume data
        return try vault.importSource(consume source, dryRun: dryRun, merge: merge, progress: progress)
    }

    /// Imports a pass or gopass store directory, decrypting each file with `gpg`.
    public func importPasswordStore(at directory: URL, dryRun: Bool = false, merge: ImportMerge = .keepingValues,
                                    replacingInvalidUTF8: Bool = false, progress: Progress? = nil)
        throws -> ImportReport
    {
        try vault.awaitVerification()
        let source = try PassStoreReader.read(directory, replacingInvalidUTF8: replacingInvalidUTF8)
        return try vault.importSource(consume source, dryRun: dryRun, merge: merge, progress: progress)
    }
}
