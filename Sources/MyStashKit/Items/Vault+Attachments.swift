import Foundation
import ObjectGraph

/// What the CLI shows of an attachment.
public struct AttachmentInfo: Codable, Equatable {
    public var id: Int64
    public var name: String
    /// Its length in bytes.
    public var size: Int64
    public var createdAt: Date
}

extension AttachmentInfo {
    init(_ attachment: Attachment) {
        self.init(id: attachment.id, name: attachment.name, size: attachment.size, createdAt: attachment.createdAt)
    }
}

extension Vault {
    /// The largest attachment a vault takes: 512 MiB. Every attachment is decrypted whole
    /// when the master password changes with a new data key, and every unlock verifies it.
    public static let attachmentSizeLimit: Int64 = 512 << 20
    /// Bytes per encrypted chunk row.
    static let attachmentChunkSize = 1 << 20
    /// Chunks written per save while attaching: what memory holds at most.
    static let attachmentChunksPerSave = 4

    // MARK: - Attaching

    /// Whether `entry` has `file` already: an attachment of that name (ignoring case) and those bytes.
    func holds(_ file: ExportDocument.AttachedFile, _ entry: PasswordEntry) throws -> Bool {
        let name = Self.attachmentName(file.name)
        for attachment in entry.attachments
        where attachment.name.caseInsensitiveCompare(name) == .orderedSame && attachment.size == file.data.count {
            if try bytes(of: attachment) == file.data { return true }
        }
        return false
    }

    /// Adds `file` as an attachment of `entry` in the context, saved with the caller's next save
    /// (imports, whose sources hold the bytes in memory anyway). A name the entry has is not
    /// reused: the file becomes `name (2)`, `name (3)`...
    ///
    /// - returns: the name it was given.
    func insertAttachment(_ file: ExportDocument.AttachedFile, to entry: PasswordEntry) throws -> String {
        let base = Self.attachmentName(file.name)
        try Self.refuseOverAttachmentLimit(Int64(file.data.count), name: base)
        let taken = Set(entry.allAttachments.map { $0.name.lowercased() })
        var name = base
        var number = 1
        while taken.contains(name.lowercased()) {
            number += 1
            name = "\(base) (\(number))"
        }
        let attachment = context.insert(Attachment.self)
        attachment.name = name
        attachment.entry = entry
        var index = 0
        for start in stride(from: 0, to: file.data.count, by: Self.attachmentChunkSize) {
            let end = min(start + Self.attachmentChunkSize, file.data.count)
            insertChunk(file.data.subdata(in: start..<end), index: index, into: attachment)
            index += 1
        }
        attachment.size = Int64(file.data.count)
        attachment.chunkCount = index
        attachment.isComplete = true
        return name
    }

    /// A file name from elsewhere as an attachment's name: one line, no `/` (a path's last part).
    static func attachmentName(_ name: String) -> String {
        let last = name.split(separator: "/").last.map(String.init) ?? ""
        let cleaned = String(String.UnicodeScalarView(last.unicodeScalars.map {
            CharacterSet.controlCharacters.union(.newlines).contains($0) ? "_" : $0
        })).trimmingCharacters(in: .whitespaces)
        return cleaned.isEmpty ? "attachment" : String(cleaned.prefix(255))
    }

    private func insertChunk(_ bytes: Data, index: Int, into attachment: Attachment) {
        let chunk = context.insert(AttachmentChunk.self)
        chunk.index = index
        chunk.data = Data(bytes)
        chunk.attachment = attachment
    }

    /// Up to `count` chunks, each full but the last; fewer than `count` at the end of the input.
    private func readChunks(_ handle: FileHandle, upTo count: Int) throws -> [Data] {
        var pieces: [Data] = []
        var piece = Data()
        while pieces.count < count {
            let read: Data
            do {
                read = try handle.read(upToCount: Self.attachmentChunkSize - piece.count) ?? Data()
            } catch {
                throw VaultError.attachmentUnreadable(reason: error.localizedDescription)
            }
            piece += read
            if read.isEmpty || piece.count == Self.attachmentChunkSize {
                if !piece.isEmpty { pieces.append(piece) }
                piece = Data()
                if read.isEmpty { break }
            }
        }
        return pieces
    }

    static func refuseOverAttachmentLimit(_ size: Int64, name: String) throws {
        guard size > Self.attachmentSizeLimit else { return }
        throw VaultError.attachmentTooLarge(name: name, limitMiB: Int(Self.attachmentSizeLimit >> 20))
    }

    private func refuseTakenAttachmentName(_ name: String, of entry: PasswordEntry) throws {
        guard entry.attachments.contains(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }) else {
            return
        }
        throw VaultError.attachmentNameTaken(entry: entry.name, name: name)
    }

    /// The attachment at `row`: being written, or (`complete`) finished.
    private func attachment(atRow primaryKey: Int64, complete: Bool = false) throws -> Attachment {
        guard let attachment = try context.existingObject(entityName: Attachment.entityName, primaryKey: primaryKey)
            as? Attachment, attachment.isComplete == complete
        else {
            throw VaultError.attachmentRemovedMeanwhile
        }
        try context.decodeValues(of: attachment)
        return attachment
    }

    /// Removes what interrupted attaches and detaches left: attachments never marked complete.
    private func removeIncompleteAttachments() throws {
        let request = FetchRequest<Attachment>(
            predicate: try Predicate(format: "%K != YES", Attachment.Key.complete.rawValue))
        for attachment in try Self.wrapErrors({ try context.fetch(request) }) {
            try removeChunks(of: attachment)
        }
    }

    // MARK: - Detaching

    /// Removes every attachment of the entry with ID `id`, as ``detach(_:from:)`` does.
    func removeAttachments(ofEntry id: Int64) throws {
        let attachments = try findEntry(.id(id)).attachments
        guard !attachments.isEmpty else { return }
        try change { for attachment in attachments { attachment.isComplete = false } }
        for attachment in attachments { try removeChunks(of: attachment) }
    }

    private func removeChunks(of attachment: Attachment) throws {
        let attachmentKey = attachment.objectID.primaryKey ?? 0
        while true {
            let done: Bool = try change {
                guard let attachment = try context.existingObject(
                    entityName: Attachment.entityName, primaryKey: attachmentKey)
                else { return true }
                var request = FetchRequest<AttachmentChunk>(predicate: try Self.chunks(of: attachment))
                request.fetchLimit = 16
                request.fetchOnly(.index)
                let chunks = try context.fetch(request)
                for chunk in chunks { context.delete(chunk) }
                if chunks.count < request.fetchLimit { context.delete(attachment) }
                return chunks.count < request.fetchLimit
            }
            context.reset()
            if done { return }
        }
    }

    // MARK: - Reading

    /// The attachment `wanted` names (by ID, or by name ignoring case) of the entry `reference` names.
    func findAttachment(_ wanted: ItemReference, of reference: ItemReference) throws -> Attachment {
        let entry = try findEntry(reference)
        let attachments = entry.attachments
        let found: Attachment?
        switch wanted {
        case .id(let id): found = attachments.first { $0.id == id }
        case .name(let name): found = attachments.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        }
        guard let found else {
            throw VaultError.noSuchAttachment(entry: entry.name, wanted, attachments: attachments.map(\.name))
        }
        return found
    }

    private static func chunks(of attachment: ManagedObject) throws -> ObjectGraph.Predicate {
        try Predicate(format: "%K == %@", AttachmentChunk.Key.attachment.rawValue, attachment)
    }

    private func forEachChunk(of attachment: Attachment, _ body: (Data) throws -> Void) throws {
        let expected = (count: attachment.chunkCount, size: attachment.size, name: attachment.name)
        var request = FetchRequest<AttachmentChunk>(
            predicate: try Self.chunks(of: attachment), sortDescriptors: [AttachmentChunk.sort(.index)])
        request.fetchBatchSize = 1
        var index = 0
        var size: Int64 = 0
        for case let chunk as AttachmentChunk in try Self.wrapErrors({ try context.fetchBatched(request) }) {
            let data = try Self.wrapErrors { () -> Data in
                try context.decodeValues(of: chunk)
                return chunk.data
            }
            guard chunk.index == index else { break }
            size += Int64(data.count)
            try body(data)
            index += 1
        }
        guard index == expected.count, size == expected.size else {
            throw VaultError.attachmentDamaged(
                name: expected.name, chunksRead: index, chunks: expected.count, bytesRead: Int(size),
                bytes: Int(expected.size))

        }
    }

    /// The whole bytes of an attachment (small ones: imports comparing what they would add).
    func bytes(of attachment: Attachment) throws -> Data {
        var data = Data()
        try forEachChunk(of: attachment) { data += $0 }
        return data
    }

    /// What a sync says of the attachments it leaves here; nil when there are none. Sync does
    /// not carry files: a remote holding every file of every machine would only grow.
    func attachmentsNotSyncedNotice() throws -> String? {
        let count = try Self.wrapErrors {
            try context.count(for: FetchRequest<Attachment>(
                predicate: try Predicate(format: "%K == YES", Attachment.Key.complete.rawValue)))
        }
        guard count > 0 else { return nil }
        return "\(count) attachment\(count == 1 ? "" : "s") stay\(count == 1 ? "s" : "") on this machine: "
            + "sync does not carry attachments"
    }
}

extension Vault.Items {
    /// Stores the bytes `handle` reads, to its end, as the attachment `name` of the entry
    /// `reference` names, streamed: at most ``attachmentChunksPerSave`` chunks are in memory.
    ///
    /// The chunks are saved a few at a time, under an attachment marked incomplete that no
    /// listing shows; the last save marks it complete. After a crash the vault holds the entry
    /// as before (plus an invisible incomplete attachment that the next attach removes).
    ///
    /// - throws: ``VaultError`` `.invalidData` when the bytes pass ``attachmentSizeLimit``,
    ///   the entry has an attachment of that name, or the name is not valid; `.notFound` when
    ///   no entry matches. Nothing of the attachment is left visible then.
    @discardableResult
    public func attach(_ handle: FileHandle, named name: String, to reference: ItemReference) throws -> AttachmentInfo {
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        var status = stat()
        if fstat(handle.fileDescriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG {
            try Vault.refuseOverAttachmentLimit(Int64(status.st_size), name: name)
        }
        try vault.removeIncompleteAttachments()
        let entry = try vault.findEntry(reference)
        try vault.refuseTakenAttachmentName(name, of: entry)
        let attachmentKey = try vault.change { () -> Attachment in
            let attachment = vault.context.insert(Attachment.self)
            attachment.name = name
            attachment.entry = entry
            return attachment
        }.id
        do {
            var size: Int64 = 0
            var index = 0
            while true {
                let pieces = try vault.readChunks(handle, upTo: Vault.attachmentChunksPerSave)
                size += pieces.reduce(0) { $0 + Int64($1.count) }
                try Vault.refuseOverAttachmentLimit(size, name: name)
                let last = pieces.count < Vault.attachmentChunksPerSave
                try vault.change {
                    let attachment = try vault.attachment(atRow: attachmentKey)
                    for piece in pieces {
                        vault.insertChunk(piece, index: index, into: attachment)
                        index += 1
                    }
                    if last {
                        attachment.size = size
                        attachment.chunkCount = index
                        attachment.isComplete = true
                    }
                }
                // What was saved leaves memory: the next chunks start from an empty context.
                vault.context.reset()
                if last { break }
            }
        } catch {
            vault.context.reset()
            try? vault.removeIncompleteAttachments()
            throw VaultError.wrapping(error)
        }
        return try Vault.wrapErrors { AttachmentInfo(try vault.attachment(atRow: attachmentKey, complete: true)) }
    }

    /// Removes the attachment `name` refers to (by name or ID) of the entry `reference` names. The attachment
    /// is hidden in one save, then its chunks go 16 per save (what memory holds): a crash part
    /// way leaves it hidden, and the next attach finishes removing it.
    public func detach(_ name: ItemReference, from reference: ItemReference) throws {
        let attachment = try vault.findAttachment(name, of: reference)
        try vault.change { attachment.isComplete = false }
        try vault.removeChunks(of: attachment)
    }

    /// The attachments of the entry `reference` names, by name.
    public func attachments(of reference: ItemReference) throws -> [AttachmentInfo] {
        try vault.findEntry(reference).attachments.map(AttachmentInfo.init)
    }

    /// Hands the bytes of the attachment `name` of the entry `reference` names to `write`, one
    /// chunk at a time, in order: memory holds one chunk.
    ///
    /// - throws: ``VaultError`` `.invalidData` when a chunk is missing, out of place or damaged
    ///   (the bytes handed over until then are not the whole attachment); what `write` throws.
    public func readAttachment(_ name: ItemReference, of reference: ItemReference,
                               into write: (Data) throws -> Void) throws -> AttachmentInfo {
        let attachment = try vault.findAttachment(name, of: reference)
        let info = AttachmentInfo(attachment)
        try vault.forEachChunk(of: attachment, write)
        return info
    }
}
