import CLinuxSupport
import Foundation
import MyStashKit
import StashPlatform

#if canImport(Glibc)
    import Glibc
#endif

/// Plaintext for `$EDITOR` lives only in a private 0700 directory on a memory filesystem
/// (`$XDG_RUNTIME_DIR`, else /dev/shm), named after our process so that a later run can
/// tell an interrupted session's leftovers from a live one's.
extension Terminal {
    static let editorDirectoryPrefix = "mystash-editor."

    /// Memory-backed places for editor files: a usable `$XDG_RUNTIME_DIR` first, then /dev/shm.
    static func editorBaseDirectories(environment: (String) -> String? = ProcessEnvironment.value) -> [String] {
        var bases: [String] = []
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/"), isPrivateDirectory(runtime) {
            bases.append(runtime)
        }
        if isDirectory("/dev/shm") { bases.append("/dev/shm") }
        return bases
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// A directory of ours that nobody else may enter, as $XDG_RUNTIME_DIR must be.
    private static func isPrivateDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_uid == geteuid()
            && info.st_mode & 0o077 == 0
    }

    /// Opens $EDITOR (else $VISUAL, else vi) on a 0600 file holding `initial` and returns
    /// what was saved. The file and anything the editor put beside it (swap and backup
    /// files) are overwritten and removed afterwards, on error, and on every signal whose
    /// default is to end the process. The editor gets no master password in its environment.
    static func edit(_ initial: String) throws -> String {
        guard let base = editorBaseDirectories().first else {
            throw CommandFailure(
                .cannotCreate, "there is no memory filesystem (/dev/shm or $XDG_RUNTIME_DIR) for the editor's file",
                hint: "pipe the text on standard input instead")
        }
        var template = Array("\(base)/\(editorDirectoryPrefix)\(getpid()).XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else {
            throw CommandFailure(
                .cannotCreate,
                "cannot create a private directory in \(base) for the editor: \(String(cString: strerror(errno)))",
                hint: "pipe the text on standard input instead")
        }
        let directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard ms_editor_guard_begin(directory) == 0 else {
            _ = ms_wipe_directory(directory)
            throw CommandFailure(.unexpected, "cannot protect the editor's file against signals; nothing was written")
        }
        defer { _ = ms_editor_guard_end() }
        let path = directory + "/note.txt"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CommandFailure(
                .cannotCreate, "cannot create a private file in \(directory) for the editor",
                hint: "pipe the text on standard input instead")
        }
        _ = initial.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
        // The one list of secret variables every child is kept from (a list of its own here
        // missed the SSH passphrase: found by review).
        let environment = ChildProcess.environment
        let editor = environment["EDITOR"] ?? environment["VISUAL"] ?? "vi"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(editor) \"$1\"", "mystash-editor", path]
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CommandFailure(
                .unexpected, "the editor '\(editor)' exited with status \(process.terminationStatus); nothing was saved"
            )
        }
        // Not "" when it cannot be read as text: saving that would clear what was edited.
        return try UTF8Text.decode(FileManager.default.contents(atPath: path) ?? Data(), place: "the edited text")
    }

    /// Removes editor directories left by mystash processes that no longer run (killed
    /// while the editor was open), and returns their paths.
    static func removeEditorLeftovers() -> [String] {
        var removed: [String] = []
        for base in editorBaseDirectories() {
            for name in DirectoryEntries.names(in: base) ?? [] where name.hasPrefix(editorDirectoryPrefix) {
                let parts = name.dropFirst(editorDirectoryPrefix.count).split(separator: ".")
                guard parts.count == 2, let pid = pid_t(parts[0]), !isRunningMyStash(pid) else { continue }
                let path = base + "/" + name
                var info = stat()
                guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else {
                    continue
                }
                if ms_wipe_directory(path) == 0 { removed.append(path) }
            }
        }
        return removed
    }

    private static func isRunningMyStash(_ pid: pid_t) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
        return name.trimmingCharacters(in: .whitespacesAndNewlines) == "mystash"
    }
}
