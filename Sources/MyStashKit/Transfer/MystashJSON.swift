import Foundation
import ObjectGraph

/// The `mystash-json` document: everything in the vault, in plaintext (man page, FILES).
struct ExportDocument: Codable {
    struct Entry: Codable {
        var name: String
        var userId: String?
        var password: String
        var url: String?
        var moreURLs: [String]?
        var notes: String?
        var category: String?
        var totp: String?
        var favorite: Bool?
        var fields: [FieldInfo]?
        var history: [HistoryInfo]?
        /// Files kept with the entry, their bytes base64 in mystash-json.
        var attachments: [AttachedFile]?
        var createdAt: Date?
        var updatedAt: Date?

        init(name: String, userId: String? = nil, password: String, url: String? = nil, notes: String? = nil,
             category: String? = nil, createdAt: Date? = nil, updatedAt: Date? = nil) {
            self.name = name
            self.userId = userId
            self.password = password
            self.url = url
            self.notes = notes
            self.category = category
            self.createdAt = createdAt
            self.updatedAt = updatedAt
        }
    }

    /// An attachment as exports carry it: whole, in memory.
    struct AttachedFile: Codable, Equatable {
        var name: String
        var data: Data
    }

    struct NoteItem: Codable {
        var title: String
        var folder: String?
        var text: String?
        var createdAt: Date?
        var updatedAt: Date?
    }

    /// ISO 8601 dates as mystash-json writes them: with milliseconds only when the date has a
    /// fraction of a second. One per export or import. Read: the usual RFC 3339 shape by hand
    /// (``InternetDate``, the same `Date` the formatter gives), any other shape by ICU's
    /// formatters as always (made only then: on Linux each of their reads copied an ICU formatter,
    /// half of an import's time). Written: whole seconds by Foundation's format style, the
    /// milliseconds rounded here (the style truncates them: .123 written as .122).
    final class Dates: @unchecked Sendable {  // used by one encoder or decoder at a time
        private let wholeSeconds = Date.ISO8601FormatStyle()
        private lazy var whole = ISO8601DateFormatter()
        private lazy var fractional: ISO8601DateFormatter = {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter
        }()

        func text(_ date: Date) -> String {
            let seconds = date.timeIntervalSinceReferenceDate
            guard seconds.rounded(.down) != seconds, seconds.isFinite else { return date.formatted(wholeSeconds) }
            let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
            let whole = (milliseconds / 1000).rounded(.down)
            let text = Date(timeIntervalSince1970: whole).formatted(wholeSeconds)
            // The whole-seconds form ends in "Z" (UTC).
            return text.dropLast() + String(format: ".%03dZ", Int(milliseconds - whole * 1000))
        }

        /// Reads dates with or without a fraction of a second; other shapes of ISO 8601 as the
        /// formatters always read them.
        func date(_ text: String) -> Date? {
            InternetDate.date(text) ?? whole.date(from: text) ?? fractional.date(from: text)
        }
    }

    var format = "mystash-json"
    var version = 2

    /// The encoder of the whole document: pretty-printed, keys sorted, dates as ``Dates`` writes them.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let dates = Dates()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            // Fractional seconds only when there are some, so whole-second dates read as before.
            var container = encoder.singleValueContainer()
            try container.encode(dates.text(date))
        }
        return encoder
    }
    var categories: [String]
    var notes: [NoteItem]
    var passwords: [Entry]
}

extension Vault {
    func exportedCategories() throws -> [String] {
        try Self.wrapErrors {
            try context.fetch(FetchRequest<Category>(sortDescriptors: [Category.sort(.name)])).map(\.name)
        }
    }

    /// How many notes and entries an export wrote, told to `progress`.
    struct ExportProgress {
        let progress: Progress?
        let total: Int
        var done = 0

        /// `passes`: how many times the export reads every note and entry.
        init(vault: Vault, progress: Progress?, passes: Int = 1) throws {
            self.progress = progress
            total = try Vault.wrapErrors {
                try vault.context.count(for: FetchRequest<Note>())
                    + vault.context.count(for: FetchRequest<PasswordEntry>())
            } * passes
        }

        mutating func add(_ count: Int) {
            done += count
            progress?.report(done, of: total)
        }
    }

    /// The notes, oldest first, as the export holds them, a batch at a time; each batch's rows
    /// are let go after it.
    func forEachExportedNoteBatch(_ counter: inout ExportProgress, _ body: ([ExportDocument.NoteItem]) throws -> Void)
        throws
    {
        try Self.wrapErrors {
            try context.forEachBatch(FetchRequest<Note>(sortDescriptors: [Note.sort(.createdAt)]), batchSize: 500) {
                try body($0.map {
                    ExportDocument.NoteItem(title: $0.title, folder: $0.folder, text: $0.text, createdAt: $0.createdAt,
                                            updatedAt: $0.updatedAt)
                })
                counter.add($0.count)
            }
        }
    }

    /// The entries, oldest first, with their fields, history and attachments, as
    /// ``forEachExportedNoteBatch(_:_:)`` gives the notes.
    func forEachExportedEntryBatch(_ counter: inout ExportProgress, _ body: ([ExportDocument.Entry]) throws -> Void)
        throws
    {
        try Self.wrapErrors {
            try context.forEachBatch(
                FetchRequest<PasswordEntry>(sortDescriptors: [PasswordEntry.sort(.createdAt)]), batchSize: 500
            ) { batch in
                try body(batch.map { entry in
                    for field in entry.fields { try context.decodeValues(of: field) }
                    for item in entry.history { try context.decodeValues(of: item) }
                    var exported = Self.exportEntry(entry)
                    let files = try entry.attachments.map {
                        ExportDocument.AttachedFile(name: $0.name, data: try bytes(of: $0))
                    }
                    exported.attachments = files.isEmpty ? nil : files
                    return exported
                })
                counter.add(batch.count)
            }
        }
    }

    static func exportEntry(_ entry: PasswordEntry) -> ExportDocument.Entry {
        var item = ExportDocument.Entry(
            name: entry.name, userId: entry.userId, password: entry.password, url: entry.url,
                                        notes: entry.notes, category: entry.category?.name,
                                        createdAt: entry.createdAt, updatedAt: entry.updatedAt)
        item.moreURLs = entry.moreURLs.isEmpty ? nil : entry.moreURLs
        item.totp = entry.totp
        item.favorite = entry.isFavorite ? true : nil
        let fields = entry.fields
        item.fields =
            fields.isEmpty ? nil : fields.map { FieldInfo(name: $0.name, value: $0.value, hidden: $0.isHidden) }
        let history = entry.history
        item.history =
            history.isEmpty ? nil : history.map { HistoryInfo(password: $0.password, replacedAt: $0.replacedAt) }
        return item
    }

    static func readMystashJSON(_ data: Data) throws -> ImportSource {
        let decoder = JSONDecoder()
        let dates = ExportDocument.Dates()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = dates.date(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
            }
            return date
        }
        var source = ImportSource()
        do {
            source.document = try decoder.decode(ExportDocument.self, from: data)
        } catch {
            throw source.invalid(.mystashJSON, describe(error, in: data))
        }
        guard source.document.format == "mystash-json" else {
            throw source.invalid(.mystashJSON, "its format is '\(source.document.format)'")
        }
        guard (1...2).contains(source.document.version) else {
            throw VaultError.exportNewerThanReadable(version: source.document.version, readable: "1 or 2")

        }
        return source
    }
}

extension Vault.Transfer {
    /// Everything in the vault as `mystash-json` (plaintext), given to `output` a piece at a
    /// time: notes and entries are read, written and let go 500 at a time, so memory does not
    /// grow with the vault. The bytes are those `JSONEncoder` writes for the whole document
    /// (pretty-printed, sorted keys), then a newline.
    ///
    /// - throws: ``VaultError`` when a row cannot be read, after `output` got what came before.
    public func exportJSON(progress: Progress? = nil, to output: ([UInt8]) throws -> Void) throws {
        try vault.awaitVerification()
        let encoder = ExportDocument.encoder()
        let document = ExportDocument(categories: try vault.exportedCategories(), notes: [], passwords: [])
        var counter = try Vault.ExportProgress(vault: vault, progress: progress)
        // The members in the order sorted keys put them: categories, format, notes, passwords, version.
        var array = JSONArrayWriter(encoder: encoder, depth: 1)
        try output(Array("{\n  \"categories\" : ".utf8))
        try array.write(document.categories, to: output)
        try array.close(to: output)
        try output(Array(",\n  \"format\" : \"\(document.format)\",\n  \"notes\" : ".utf8))
        try vault.forEachExportedNoteBatch(&counter) { try array.write($0, to: output) }
        try array.close(to: output)
        try output(Array(",\n  \"passwords\" : ".utf8))
        try vault.forEachExportedEntryBatch(&counter) { try array.write($0, to: output) }
        try array.close(to: output)
        try output(Array(",\n  \"version\" : \(document.version)\n}\n".utf8))
    }

    /// ``exportJSON(progress:to:)`` whole in memory, without its last newline: for a vault
    /// small enough to hold its export twice (tests, a backup kept in memory).
    public func exportJSON(progress: Progress? = nil) throws -> Data {
        var data = Data()
        try exportJSON(progress: progress) { data.append(contentsOf: $0) }
        return data.dropLast()
    }
}
