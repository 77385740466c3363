import Foundation
import StashPlatform

/// Reads a pass or gopass password store: every `*.gpg` file under the directory, decrypted
/// by the user's `gpg` (agent, pinentry and GNUPGHOME as for pass itself). The first line is
/// the password; `user:`/`login:`/`username:` and `url:` lines, an `otpauth://` line and
/// gopass's `totp:` key go to their fields; the rest becomes the notes; the folder path becomes the category.
enum PassStoreReader {
    static func read(_ directory: URL, replacingInvalidUTF8: Bool = false) throws -> ImportSource {
        var source = ImportSource()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw VaultError.noPasswordStore(path: directory.path)
        }
        // The store itself may be a link (~/.password-store often is); nothing inside it is followed.
        let root = directory.standardizedFileURL.resolvingSymlinksInPath()
        let (files, notFiles) = storeFiles(under: root.path)
        source.skipped += notFiles
        for relative in files {
            let name = String(relative.dropLast(4))
            let parts = name.split(separator: "/").map(String.init)
            let title = parts.last ?? name
            let folder = parts.dropLast().joined(separator: "/")
            let plaintext: Data
            do {
                plaintext = try decrypt(root.appendingPathComponent(relative))
            } catch let error as VaultError {
                source.skipped.append(.init(kind: "entry", title: name, reason: error.message))
                continue
            }
            var entry: ExportDocument.Entry
            if isBinary(plaintext, name: title) {
                // A file kept in the store as it is (pass insert -m < photo.jpg): its bytes, unchanged.
                entry = ExportDocument.Entry(name: title, password: "")
                entry.attachments = [.init(name: title, data: plaintext)]
                source.warnings.append(.init(kind: "entry", title: name,
                    reason: "not text: kept as the attachment '\(title)' of an entry without a password"))
            } else {
                let text = try UTF8Text.decode(
                    plaintext, place: "the decrypted entry '\(name)'", replacingInvalid: replacingInvalidUTF8)
                entry = parse(text, name: title)
            }
            entry.category = folder.isEmpty ? nil : folder
            source.document.passwords.append(entry)
        }
        return source
    }

    /// Whether decrypted contents are a file rather than an entry's text: not UTF-8, and holding
    /// a NUL or a control character text does not have, or named like a file (`scan.pdf`). Text in
    /// another encoding (Latin-1) is not binary: it is refused, or read with invalid sequences
    /// replaced when the caller asks.
    static func isBinary(_ contents: Data, name: String) -> Bool {
        guard String(data: contents, encoding: .utf8) == nil else { return false }
        let textControls: Set<UInt8> = [0x09, 0x0A, 0x0C, 0x0D, 0x1B]
        if contents.contains(where: { $0 < 0x20 && !textControls.contains($0) }) { return true }
        let parts = name.split(separator: ".")
        guard parts.count > 1, let suffix = parts.last else { return false }
        return (1...5).contains(suffix.count) && suffix.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    /// The `*.gpg` files under `root` (paths relative to it, sorted), and everything there that is
    /// neither a file nor a folder, each with the reason it is skipped: a symbolic link is never
    /// followed (it may point outside the store), and gpg would wait forever on a named pipe.
    /// Found with `lstat`, so a link is seen as a link, never as what it points at.
    static func storeFiles(under root: String) -> (files: [String], skipped: [ImportReport.Item]) {
        var files: [String] = []
        var skipped: [ImportReport.Item] = []
        var folders = [""]
        while let folder = folders.popLast() {
            let path = folder.isEmpty ? root : "\(root)/\(folder)"
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: path)
            } catch {
                skipped.append(.init(kind: "folder", title: folder, reason: "it cannot be read"))
                continue
            }
            for name in names where name != ".git" {
                let relative = folder.isEmpty ? name : "\(folder)/\(name)"
                let full = "\(root)/\(relative)"
                var status = stat()
                guard lstat(full, &status) == 0 else { continue }  // gone since the listing
                switch status.st_mode & S_IFMT {
                case S_IFDIR: folders.append(relative)
                case S_IFREG: if name.hasSuffix(".gpg") { files.append(relative) }
                case S_IFLNK:
                    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: full)) ?? "?"
                    skipped.append(
                        .init(kind: "file", title: relative, reason: "a symbolic link (to '\(target)'), not followed"))
                case S_IFIFO: skipped.append(.init(kind: "file", title: relative, reason: "a named pipe, not a file"))
                case S_IFSOCK: skipped.append(.init(kind: "file", title: relative, reason: "a socket, not a file"))
                default: skipped.append(.init(kind: "file", title: relative, reason: "a device, not a file"))
                }
            }
        }
        return (files.sorted(), skipped.sorted { $0.title < $1.title })
    }

    /// One decrypted file as an entry.
    static func parse(_ text: String, name: String) -> ExportDocument.Entry {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.hasSuffix("\r") ? $0.dropLast() : $0[...])
        }
        while lines.count > 1, lines.last == "" { lines.removeLast() }
        var entry = ExportDocument.Entry(name: name, password: lines.first ?? "")
        var notes: [String] = []
        for (number, line) in lines.enumerated().dropFirst() {
            let lowered = line.lowercased()
            // gopass starts its key: value lines with a YAML document marker.
            if number == 1 && line == "---" { continue }
            func value(after prefix: String) -> String? {
                lowered.hasPrefix(prefix)
                    ? String(line.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces) : nil
            }
            if entry.userId == nil,
                let user = value(after: "user:") ?? value(after: "login:") ?? value(after: "username:")
            {
                entry.userId = user
            } else if entry.url == nil, let url = value(after: "url:") {
                entry.url = url
            } else if entry.totp == nil, lowered.hasPrefix("otpauth://totp/"), (try? TOTP(parsing: line)) != nil {
                entry.totp = line
            } else if entry.totp == nil, let secret = value(after: "totp:"),
                let uri = try? TOTPForms.uri(secret, label: name)
            {
                // gopass's key: base32 (any case, spaces allowed) or a URI.
                entry.totp = uri
            } else {
                notes.append(line)
            }
        }
        while notes.first == "" { notes.removeFirst() }
        entry.notes = notes.isEmpty ? nil : notes.joined(separator: "\n")
        return entry
    }

    /// Runs `gpg --decrypt` on one file; the plaintext stays in this process's memory.
    static func decrypt(_ file: URL) throws -> Data {
        guard let result = ChildProcess.execute(["gpg", "--quiet", "--yes", "--batch", "--decrypt", file.path]) else {
            throw VaultError.toolMissing("gpg")
        }
        guard result.status == 0 else {
            let reason =
                String(decoding: result.errors, as: UTF8.self).split(separator: "\n").last.map(String.init)
                ?? "status \(result.status)"
            throw VaultError.cannotDecrypt(reason: reason)

        }
        return result.output
    }
}
