import Foundation
import StashPlatform
import XMLReading

/// Reads KeePassXC's exports: CSV (`keepassxc-cli export -f csv`) and KeePass 2 XML
/// (`keepassxc-cli export -f xml`). Group paths become categories whole, without the root
/// group's name; the recycle bin is left out (reported).
enum KeePassXCReader {
    /// The category of a group path (`Root/Work/Mail` → `Work/Mail`; the root alone → none),
    /// and whether it is in the recycle bin.
    static func groupPath(_ path: String) -> (category: String?, inRecycleBin: Bool) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let inside = Array(parts.dropFirst())
        return (inside.isEmpty ? nil : inside.joined(separator: "/"), inside.first == "Recycle Bin")
    }

    /// A TOTP column: an otpauth URI, base32, or KeeOTP's `key=...&step=...&size=...` form
    /// (``TOTPForms``); one that cannot be used is kept as a hidden field and reported.
    static func addTOTP(_ value: String?, to entry: inout ExportDocument.Entry, source: inout ImportSource) {
        guard let value, !value.isEmpty else { return }
        if let uri = try? TOTPForms.uri(value, label: entry.name) {
            entry.totp = uri
        } else {
            entry.fields = (entry.fields ?? []) + [FieldInfo(name: "TOTP", value: value, hidden: true)]
            source.warnings.append(
                .init(
                    kind: "entry", title: entry.name,
                    reason: "its TOTP setting is not a standard one (kept as the hidden field 'TOTP')"))
        }
    }

    static func readXML(_ data: Data) throws -> ImportSource {
        var source = ImportSource()
        // The text is UTF-8 (Vault.read checked); a NUL byte, which UTF-8 allows, XML does not.
        guard !data.contains(0) else { throw source.invalid(.keepassxcXML, "it holds a NUL byte") }
        guard data.contains(where: { !Character(UnicodeScalar($0)).isWhitespace }) else {
            throw source.invalid(.keepassxcXML, "no <KeePassFile> element (the file is empty)")
        }
        let dates = ExportDocument.Dates()
        var identifiers: [String?] = []
        var children = FirstChildren()
        // From <Meta>, which comes before <Root> in KeePass's files: read when an entry first needs it.
        typealias Meta = (recycleBin: String?, binaries: [String: (text: String, compressed: Bool)])
        var meta: Meta?
        func metaIfRead(_ file: XMLTreeElement) -> Meta? {
            if meta == nil, let element = children.first("Meta", in: file) {
                let bin = children.first("RecycleBinUUID", in: element)?.text
                meta = (bin == "AAAAAAAAAAAAAAAAAAAAAA==" ? nil : bin, sharedBinaries(element.child("Binaries")))
            }
            return meta
        }
        // What an entry needs of the file may come after it (<Meta> after <Root>, a group's name
        // or UUID after its entries): such an entry is made once the whole file is read.
        var waiting: [(element: XMLTreeElement, ancestors: [XMLTreeElement])] = []
        // Each entry is made as soon as it is read, and its elements let go: the file is never held
        // whole (a 100,000-entry export held as a tree took two thirds of a gigabyte).
        func receive(_ element: XMLTreeElement, in ancestors: [XMLTreeElement]) throws {
            guard ancestors.first?.name == "KeePassFile" else {
                throw source.invalid(.keepassxcXML, "no <KeePassFile> element")
            }
            // Entries of the groups under the first <Root>'s first group, as KeePass reads them.
            guard ancestors.count >= 3, children.first("Root", in: ancestors[0]) === ancestors[1],
                  children.first("Group", in: ancestors[1]) === ancestors[2],
                  ancestors.dropFirst(2).allSatisfy({ $0.name == "Group" })
            else { return }
            let groups = ancestors.dropFirst(2)
            guard let meta = metaIfRead(ancestors[0]),
                  groups.dropFirst().allSatisfy({ children.first("Name", in: $0) != nil }),
                  meta.recycleBin == nil || groups.allSatisfy({ children.first("UUID", in: $0) != nil })
            else { return waiting.append((element, ancestors)) }
            make(element, in: groups)
        }
        func make(_ element: XMLTreeElement, in groups: ArraySlice<XMLTreeElement>) {
            let (recycleBin, binaries) = meta ?? (nil, [:])
            let inRecycleBin = recycleBin.map { bin in groups.contains { children.first("UUID", in: $0)?.text == bin } }
                ?? false
            let path = groups.dropFirst().map { children.first("Name", in: $0)?.text ?? "" }
            var entry = entryValues(element, dates: dates)
            if inRecycleBin {
                source.skipped.append(.init(kind: "entry", title: entry.name, reason: "in the recycle bin"))
                return
            }
            entry.category = path.isEmpty ? nil : path.joined(separator: "/")
            let attributes = strings(element)
            var standard: Set<String> = ["Title", "UserName", "Password", "URL", "Notes"]
            switch TOTPForms.find(in: attributes.mapValues(\.value), label: entry.name) {
            case .secret(let uri)?:
                entry.totp = uri
                standard.formUnion(TOTPForms.attributeNames)
            case .unusable(let reason)?:
                source.warnings.append(.init(kind: "entry", title: entry.name,
                    reason: "its TOTP setting cannot be used (\(reason)); kept as custom fields"))
            case nil: break
            }
            var fields = attributes.filter { !standard.contains($0.key) }.sorted { $0.key < $1.key }
                .map { FieldInfo(name: $0.key, value: $0.value.value, hidden: $0.value.protected) }
            if let tags = element.child("Tags")?.text, !tags.isEmpty {
                fields.append(FieldInfo(name: "Tags", value: tags, hidden: false))
            }
            entry.fields = (entry.fields ?? []) + fields
            // Each history version's password was replaced when the next version was saved.
            let versions =
                element.child("History")?.children.filter { $0.name == "Entry" }.map {
                    entryValues($0, dates: dates)
                } ?? []
            var history: [HistoryInfo] = []
            for (index, version) in versions.enumerated() {
                let next = index + 1 < versions.count ? versions[index + 1] : entry
                if version.password != next.password {
                    history.append(
                        HistoryInfo(
                            password: version.password,
                            replacedAt: next.updatedAt ?? version.updatedAt ?? Date(timeIntervalSince1970: 0)))
                }
            }
            entry.history = history.isEmpty ? nil : history
            var attachments = element.children.filter { $0.name == "Binary" }
            // KeePassXC's SSH agent keeps a key as an attachment, its passphrase as the password;
            // some people keep the key's text in an attribute instead.
            var keyText: String?
            if let (index, key) = attachments.lazy.enumerated().compactMap({ index, attachment in
                sshKey(in: attachment, binaries: binaries).map { (index, $0) }
            }).first {
                attachments.remove(at: index)
                attachments.removeAll { $0.child("Key")?.text == "KeeAgent.settings" }
                keyText = key
            } else if let index = entry.fields?.firstIndex(where: {
                $0.value?.contains(SSHPrivateKey.beginMarker) == true
            }) {
                keyText = entry.fields?.remove(at: index).value
            }
            if let key = keyText {
                if let folder = entry.category {
                    entry.fields = (entry.fields ?? []) + [FieldInfo(name: "Folder", value: folder, hidden: false)]
                }
                source.shapeSSHKeyEntry(&entry, privateKey: key, passphrase: entry.password)
            }
            for attachment in attachments {
                let name = attachment.child("Key")?.text ?? ""
                if let reference = attachment.child("Value")?.attributes["Ref"], binaries[reference] == nil {
                    source.warnings.append(.init(kind: "entry", title: entry.name,
                        reason: "attachment '\(name)' refers to binary \(reference), which the file does not hold "
                            + "(an export without its attachments?); not imported"))
                    continue
                }
                guard let data = binaryData(of: attachment, binaries: binaries) else {
                    source.warnings.append(.init(kind: "entry", title: entry.name,
                        reason: "attachment '\(name)' is not valid base64 (or gzip) data; not imported"))
                    continue
                }
                entry.attachments = (entry.attachments ?? []) + [.init(name: name, data: data)]
            }
            source.document.passwords.append(entry)
            identifiers.append(element.child("UUID")?.text.flatMap { Data(base64Encoded: $0) }
                .map { $0.map { String(format: "%02X", $0) }.joined() })
        }
        let root: XMLTreeElement
        do {
            // UTF-8 (checked above): a declaration of another encoding is not followed.
            root = try XMLTreeElement.read(
                data, maximumDepth: KeePassXMLLimits.maximumDepth, asUTF8: true, handingOver: "Entry", to: receive)
        } catch let error as XMLReadingError {
            switch error.reason {
            case .nestedTooDeep(let limit):
                throw VaultError.nestedTooDeep(limit: limit, line: error.line)
            case .notWellFormed(let code, let column, _):
                // libxml2 gives the end of the file inside an element the code of text after the
                // document's end; cut inside the last closing tag, every element is closed and only
                // the tag's '>' is missing.
                let endsInsideTag = data.last { !Character(UnicodeScalar($0)).isWhitespace } != UInt8(ascii: ">")
                let unfinishedTag = [LibXMLCode.greaterThanRequired, LibXMLCode.tagNotFinished]
                let endsEarly = (error.openElements > 0 && (unfinishedTag + [LibXMLCode.documentEnd]).contains(code))
                    || (endsInsideTag && unfinishedTag.contains(code))
                if code == LibXMLCode.documentEnd, error.openElements == 0,
                   data.firstRange(of: Data("<KeePassFile".utf8)) == nil {
                    throw source.invalid(.keepassxcXML, "no <KeePassFile> element")
                }
                throw source.invalid(
                    .keepassxcXML,
                    "line \(error.line), column \(column): "
                        + (endsEarly ? "the file ends before its elements are closed (cut short?)"
                            : describe(xmlErrorCode: code)))
            case .libraryMissing(let detail):
                throw VaultError.libraryMissing("libxml2", detail: detail)
            case .tooLarge:
                throw source.invalid(.keepassxcXML, "\(error)")
            }
        }
        guard root.name == "KeePassFile" else { throw source.invalid(.keepassxcXML, "no <KeePassFile> element") }
        guard root.child("Root")?.child("Group") != nil else {
            throw source.invalid(.keepassxcXML, "no <Root><Group>")
        }
        _ = metaIfRead(root)
        for (element, ancestors) in waiting { make(element, in: ancestors.dropFirst(2)) }
        KeePassReferences.resolve(in: &source, identifiers: identifiers)
        return source
    }

    /// What libxml2 found wrong, in words, from its code (xmlerror.h).
    static func describe(xmlErrorCode code: Int) -> String {
        switch code {
        case 1: return "libxml2 could not read it (an internal limit)"
        case 4: return "expected an element ('<')"
        case 5, 86: return "more text after the end of the document's element"
        case 6, 7, 8, 9: return "a character XML does not allow"
        case 23, 26, 27: return "an entity ('&name;') that XML does not know"
        case 38, 39, 41, 42, 75: return "an attribute not written as name=\"value\""
        case 68: return "expected an element name"
        case 73, 77: return "a tag not finished with '>'"
        case 74, 76, 85: return "a closing tag that does not match the element it closes"
        case 110: return "a name longer than libxml2 reads (50,000 characters)"
        case 6000...6004: return "text that is not in the encoding the file declares"
        default: return "XML error \(code)"
        }
    }

    /// The attachments kept once in `<Meta><Binaries>` and referred to by ID: base64, gzipped
    /// when `Compressed="True"`.
    private static func sharedBinaries(_ binaries: XMLTreeElement?) -> [String: (text: String, compressed: Bool)] {
        var shared: [String: (String, Bool)] = [:]
        for binary in binaries?.children ?? [] where binary.name == "Binary" {
            guard let id = binary.attributes["ID"] else { continue }
            shared[id] = (binary.text ?? "", binary.attributes["Compressed"] == "True")
        }
        return shared
    }

    /// The bytes of an entry's `<Binary>`: its own `<Value>` or the shared one it refers to,
    /// base64, gunzipped when compressed; nil when they cannot be decoded.
    private static func binaryData(of attachment: XMLTreeElement, binaries: [String: (text: String, compressed: Bool)])
        -> Data?
    {
        guard let value = attachment.child("Value") else { return nil }
        let stored = value.attributes["Ref"].flatMap { binaries[$0] }
            ?? (value.text ?? "", value.attributes["Compressed"] == "True")
        let base64 = stored.text.filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: base64) else { return nil }
        // Foundation has no gzip on Linux; gzip reads it from a pipe, never from a file.
        return stored.compressed ? ChildProcess.run(["gzip", "-dc"], input: data, captureOutput: true) : data
    }

    /// The text of an attachment that holds an OpenSSH private key, else nil.
    private static func sshKey(in attachment: XMLTreeElement, binaries: [String: (text: String, compressed: Bool)])
        -> String?
    {
        guard let data = binaryData(of: attachment, binaries: binaries),
              let text = String(data: data, encoding: .utf8), text.contains(SSHPrivateKey.beginMarker) else {
            return nil
        }
        return text
    }

    private static func strings(_ entry: XMLTreeElement) -> [String: (value: String, protected: Bool)] {
        var values: [String: (String, Bool)] = [:]
        for string in entry.children where string.name == "String" {
            guard let key = string.child("Key")?.text else { continue }
            let value = string.child("Value")
            values[key] = (value?.text ?? "", value?.attributes["ProtectInMemory"] == "True")
        }
        return values
    }

    private static func entryValues(_ element: XMLTreeElement, dates: ExportDocument.Dates) -> ExportDocument.Entry {
        let values = strings(element)
        func value(_ key: String) -> String? { values[key].flatMap { $0.value.isEmpty ? nil : $0.value } }
        let times = element.child("Times")
        return ExportDocument.Entry(
            name: value("Title") ?? "", userId: value("UserName"), password: values["Password"]?.value ?? "",
            url: value("URL"), notes: value("Notes"),
            createdAt: times?.child("CreationTime")?.text.flatMap(dates.date),
            updatedAt: times?.child("LastModificationTime")?.text.flatMap(dates.date))
    }
}

/// libxml2's error codes (xmlerror.h) that tell a file cut short.
private enum LibXMLCode {
    /// XML_ERR_DOCUMENT_END: text after the document's element — or, for libxml2, an end inside it.
    static let documentEnd = 5
    /// XML_ERR_GT_REQUIRED, XML_ERR_TAG_NOT_FINISHED: a tag not closed by '>'.
    static let greaterThanRequired = 73
    static let tagNotFinished = 77
}

/// The first child of each name of an element, found by reading each element's children once
/// however often asked: a crafted file can give a group thousands of children before its name,
/// and each of its entries asks.
private struct FirstChildren {
    private var seen: [ObjectIdentifier: (read: Int, byName: [String: XMLTreeElement])] = [:]

    mutating func first(_ name: String, in element: XMLTreeElement) -> XMLTreeElement? {
        var known = seen[ObjectIdentifier(element)] ?? (0, [:])
        if known.byName[name] == nil, known.read < element.children.count {
            for child in element.children[known.read...] where known.byName[child.name] == nil {
                known.byName[child.name] = child
            }
            known.read = element.children.count
            seen[ObjectIdentifier(element)] = known
        }
        return known.byName[name]
    }
}

/// How deep a KeePass file may nest: the tree and the walk over its groups recurse, so a deeper
/// file would overflow the stack (a file nested 3,000 deep did), whatever libxml2 accepts.
enum KeePassXMLLimits {
    /// Deeper than any real export: a KeePass file nests entries, history and values about 8
    /// levels below its groups, and few people nest groups more than a dozen deep.
    static let maximumDepth = 256
}
