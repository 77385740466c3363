import Foundation

/// Reads a pass or gopass password store: every `*.gpg` file under the directory, decrypted
/// by the user's `gpg` (agent, pinentry and GNUPGHOME as for pass itself). The first line is
/// the password; `user:`/`login:`/`username:` and `url:` lines and an `otpauth://` line go to
/// their fields; the rest becomes the notes; the folder path becomes the category.
enum PassStoreReader {
    static func read(_ directory: URL) throws -> ImportSource {
        var source = ImportSource()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw VaultError(.notFound, "there is no password store at '\(directory.path)'")
        }
        let root = directory.standardizedFileURL.resolvingSymlinksInPath()
        var files: [String] = []
        if let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let url as URL in walker {
                if url.lastPathComponent == ".git" {
                    walker.skipDescendants()
                    continue
                }
                // A file whose type cannot be read (it vanished) is not one pass would show either.
                guard url.pathExtension == "gpg",
                    (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
                else { continue }
                // Names come from where the file is in the store, not where a symlink points.
                let path = url.standardizedFileURL.path
                guard path.hasPrefix(root.path + "/") else { continue }
                files.append(String(path.dropFirst(root.path.count + 1)))
            }
        }
        for relative in files.sorted() {
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
            var entry = parse(String(decoding: plaintext, as: UTF8.self), name: title)
            entry.category = folder.isEmpty ? nil : folder
            source.document.passwords.append(entry)
        }
        return source
    }

    /// One decrypted file as an entry.
    static func parse(_ text: String, name: String) -> ExportDocument.Entry {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.hasSuffix("\r") ? $0.dropLast() : $0[...])
        }
        while lines.count > 1, lines.last == "" { lines.removeLast() }
        var entry = ExportDocument.Entry(name: name, password: lines.first ?? "")
        var notes: [String] = []
        for line in lines.dropFirst() {
            let lowered = line.lowercased()
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
            throw VaultError(.notFound, "gpg could not be started", hint: "install gnupg")
        }
        guard result.status == 0 else {
            let reason =
                String(decoding: result.errors, as: UTF8.self).split(separator: "\n").last.map(String.init)
                ?? "status \(result.status)"
            throw VaultError(.invalidData, "gpg could not decrypt it: \(reason)")
        }
        return result.output
    }
}
