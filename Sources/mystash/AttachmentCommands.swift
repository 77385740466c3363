import ArgumentParser
import Foundation
import MyStashKit
#if canImport(Glibc)
import Glibc
#endif

extension PasswordCommand {
    struct Attach: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "attach",
            abstract: "Keep a file with a password entry, encrypted in the vault.",
            discussion: """
            The file is read in pieces and stored in encrypted chunks, so files of any size up to \
            \(Vault.attachmentSizeLimit >> 20) MiB attach without being held in memory. Attachments stay \
            on this machine: 'mystash sync' does not carry them.
            """)
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Argument(help: "The file to attach ('-' for standard input, with --name).", completion: .file())
        var file: String
        @Option(help: ArgumentHelp("Name the attachment this (default: the file's name).", valueName: "name"))
        var name: String?

        func validate() throws {
            if file == "-" && name == nil { throw ValidationError("Name what standard input holds with '--name'") }
        }

        func run() throws {
            try reportingErrors {
                let handle = try openToAttach(file)
                defer { try? handle.close() }
                let vault = try options.openUnlockedVault()
                let attachmentName = name ?? URL(fileURLWithPath: file).lastPathComponent
                let info = try vault.items.attach(handle, named: attachmentName, to: ItemReference(argument: entry))
                let owner = try vault.items.entry(ItemReference(argument: entry), reveal: false)
                Terminal.printError(
                    "Attached '\(Output.safe(info.name))' (\(Output.byteCount(info.size))) to entry \(owner.id) "
                        + "'\(Output.safe(owner.name))'.")
            }
        }

        /// The file opened for reading; what stops it named in the error.
        private func openToAttach(_ path: String) throws -> FileHandle {
            if path == "-" { return FileHandle.standardInput }
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                let reason = String(cString: strerror(errno))
                switch errno {
                case ENOENT, ENOTDIR: throw CommandFailure(.notFound, "cannot attach '\(path)': \(reason)")
                case EACCES, EPERM: throw CommandFailure(.permission, "cannot attach '\(path)': \(reason)")
                default: throw CommandFailure(.ioError, "cannot attach '\(path)': \(reason)")
                }
            }
            var status = stat()
            if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
                close(descriptor)
                throw CommandFailure(.usage, "cannot attach '\(path)': it is a directory", hint: "name a file")
            }
            return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }
    }

    struct Detach: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "detach", abstract: "Remove an attachment from a password entry.")
        @OptionGroup var options: VaultOptions
        @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
        @Argument(help: "The attachment's name, or #ID.", completion: .custom(completeAttachmentNames))
        var attachment: String
        @Flag(name: .shortAndLong, help: "Remove without asking.") var force = false

        func run() throws {
            try reportingErrors {
                let vault = try options.openUnlockedVault()
                let owner = try vault.items.entry(ItemReference(argument: entry), reveal: false)
                try confirmRemoval("attachment '\(attachment)' of entry \(owner.id) '\(owner.name)'", force: force)
                try vault.items.detach(ItemReference(argument: attachment), from: .id(owner.id))
                Terminal.printError("Removed attachment '\(Output.safe(attachment))' of entry \(owner.id).")
            }
        }
    }

    struct AttachmentCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "attachment", abstract: "List or save the files kept with a password entry.",
            subcommands: [List.self, Save.self])

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list", abstract: "List an entry's attachments with their sizes.", aliases: ["ls"])
            @OptionGroup var options: VaultOptions
            @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
            @Flag(help: "Print JSON.") var json = false

            func run() throws {
                try reportingErrors {
                    let attachments = try options.readUnlockedVault {
                        try $0.items.attachments(of: ItemReference(argument: entry))
                    }
                    if json { return try Output.json(attachments) }
                    Output.table(
                        ["ID", "NAME", "SIZE", "ADDED"],
                        attachments.map {
                            [String($0.id), $0.name, Output.byteCount($0.size), Output.date($0.createdAt)]
                        },
                        empty: "No attachments.")
                }
            }
        }

        struct Save: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "save",
                abstract: "Write an attachment to a file (mode 0600) or to standard output.",
                discussion: """
                The file is written beside its destination under a temporary name, then put in place, \
                so an interrupted save leaves no partial file; an existing file is replaced only with --force.
                """)
            @OptionGroup var options: VaultOptions
            @Argument(help: "The entry's name, or #ID.", completion: .custom(completeEntryNames)) var entry: String
            @Argument(help: "The attachment's name, or #ID.", completion: .custom(completeAttachmentNames))
            var attachment: String
            @Option(name: .shortAndLong,
                    help: ArgumentHelp("Write to this file or directory, or '-' for standard output "
                                       + "(default: the attachment's name in the current directory).",
                                       valueName: "file"),
                    completion: .file())
            var output: String?
            @Flag(name: .shortAndLong, help: "Replace a file that exists.") var force = false

            func run() throws {
                try reportingErrors {
                    let vault = try options.openUnlockedVault()
                    if output == "-" {
                        _ = try vault.items.readAttachment(
                            ItemReference(argument: attachment), of: ItemReference(argument: entry)
                        ) { Output.write($0) }
                        return
                    }
                    // The name is the vault's: only its last path component is used.
                    let stored = try vault.items.attachments(of: ItemReference(argument: entry)).first {
                        $0.name.caseInsensitiveCompare(attachment) == .orderedSame || "#\($0.id)" == attachment
                    }?.name ?? attachment
                    let target = AttachmentFile.destination(output, name: stored)
                    let info = try AttachmentFile.write(to: target, replacing: force) { write in
                        try vault.items.readAttachment(
                            ItemReference(argument: attachment), of: ItemReference(argument: entry), into: write)
                    }
                    Terminal.printError("Saved '\(Output.safe(info.name))' (\(Output.byteCount(info.size))) "
                                        + "to '\(Output.safe(target))'.")
                }
            }
        }
    }
}

/// Writes a file as an attachment is saved: created 0600 under a temporary name beside its
/// place, synced, then linked into place (never over a file) or, when replacing, renamed.
enum AttachmentFile {
    static func destination(_ output: String?, name: String) -> String {
        let safeName = name.split(separator: "/").last.map(String.init) ?? "attachment"
        guard let output else { return safeName }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory), isDirectory.boolValue {
            return URL(fileURLWithPath: output).appendingPathComponent(safeName).path
        }
        return output
    }

    static func write<T>(to path: String, replacing: Bool, _ produce: ((Data) throws -> Void) throws -> T) throws
        -> T
    {
        if !replacing, FileManager.default.fileExists(atPath: path) {
            throw exists(path)
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var template = Array((directory + "/.mystash-attachment-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw CommandFailure(.cannotCreate, "cannot write '\(path)': \(String(cString: strerror(errno)))")
        }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var placed = false
        defer {
            close(descriptor)
            if !placed { unlink(temporary) }
        }
        let result = try produce { data in
            try data.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw CommandFailure(.ioError, "cannot write '\(path)': \(String(cString: strerror(errno)))")
                    }
                    offset += written
                }
            }
        }
        guard fsync(descriptor) == 0 else {
            throw CommandFailure(.ioError, "cannot write '\(path)': \(String(cString: strerror(errno)))")
        }
        if replacing {
            guard rename(temporary, path) == 0 else {
                throw CommandFailure(.cannotCreate, "cannot write '\(path)': \(String(cString: strerror(errno)))")
            }
            placed = true
        } else {
            // link(2) fails on an existing name: a file made meanwhile is not overwritten either.
            guard link(temporary, path) == 0 else {
                throw errno == EEXIST
                    ? exists(path)
                    : CommandFailure(.cannotCreate, "cannot write '\(path)': \(String(cString: strerror(errno)))")
            }
        }
        return result
    }

    private static func exists(_ path: String) -> CommandFailure {
        CommandFailure(.cannotCreate, "'\(path)' exists; nothing was written", hint: "add --force to replace it")
    }
}
