import Foundation
import StashPlatform
#if canImport(Glibc)
import Glibc
#endif

/// Where a vault's sync log lives: a git repository (any URL git reaches) or a plain folder
/// that another program (Syncthing, Nextcloud) keeps in step. Either only ever gains files.
protocol SyncRemote {
    /// The remote as the person named it.
    var location: String { get }
    /// Brings the remote's current state; returns its files.
    func fetch() throws -> RemoteListing
    /// The contents of files `fetch` listed.
    func read(_ paths: [String]) throws -> [String: [UInt8]]
    /// Adds files on top of what `fetch` saw, all or none; false when the remote moved since
    /// (someone else published first: fetch, merge and try again).
    func publish(_ files: [String: [UInt8]]) throws -> Bool
}

/// The files of a remote, and for those a remote names by their contents (git's object ids),
/// that name: a file whose name is the one remembered holds the bytes read before.
struct RemoteListing {
    var paths: Set<String> = []
    var versions: [String: String] = [:]
}

/// `text` (a remote's location, or a message naming it) without what a URL's user part may
/// hide: a token as password or as user (`https://TOKEN@host/vault.git`), left out whole as git
/// leaves it out of its own messages; and the password of an scp-like `user:password@host:path`.
public func withoutURLPasswords(_ text: String) -> String {
    text.replacingOccurrences(of: #"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@"#, with: "$1", options: .regularExpression)
        .replacingOccurrences(of: #"(^|\s|')([^/@:\s']+):[^/@\s']*@([^/:\s']+):"#, with: "$1$2@$3:",
                              options: .regularExpression)
}

/// Chooses the kind of remote `location` names: a folder that is not a git repository is a
/// plain folder; anything else goes to git. With `tipOnly` (a clone), a git remote's cache
/// fetches the tip's files by name only and each file's bytes only when it is read.
func makeSyncRemote(_ location: String, cache: URL, tipOnly: Bool = false) throws -> SyncRemote {
    var isDirectory: ObjCBool = false
    let looksLikePath = location.hasPrefix("/") || location.hasPrefix(".")
    if looksLikePath {
        guard FileManager.default.fileExists(atPath: location, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw VaultError.remote(location, .missing)
        }
        let url = URL(fileURLWithPath: location)
        let isGit = ["HEAD", ".git"].contains {
            FileManager.default.fileExists(atPath: url.appendingPathComponent($0).path)
        }
        if !isGit { return FolderRemote(folder: url) }
    }
    return try GitRemote(url: location, cache: cache, tipOnly: tipOnly)
}

/// A git repository, reached through the `git` program; the vault keeps a bare cache of it
/// (`sync.git`) and writes commits with plumbing commands, so there is no work tree to go stale.
///
/// A clone's cache is shallow and partial (git's `--depth 1 --filter=blob:none`): it holds
/// the tip's tree and, of the files, only those the clone reads (the latest snapshot and the
/// log files after it), so a clone does not transfer every snapshot and log file ever written.
/// Later fetches bring every new file whole, as in any cache.
struct GitRemote: SyncRemote {
    let location: String
    let cache: URL
    /// Fetch the tip only, and each file when it is read (a clone).
    let tipOnly: Bool
    private let fetched = FetchedBlobs()
    static let branch = "refs/heads/main"
    static let trackingRef = "refs/remotes/origin/main"
    /// The name of the remote in a clone's partial cache, which git fetches missing files from.
    static let promisor = "origin"

    init(url: String, cache: URL, tipOnly: Bool = false) throws {
        guard ChildProcess.find("git") != nil else {
            throw VaultError.toolMissing("git")
        }
        location = url
        self.cache = cache
        self.tipOnly = tipOnly
        if !FileManager.default.fileExists(atPath: cache.appendingPathComponent("HEAD").path) {
            try git(["init", "-q", "--bare", cache.path], inCache: false)
        }
        if tipOnly || FileManager.default.fileExists(atPath: cache.appendingPathComponent("shallow").path) {
            try configurePromisor()
        }
    }

    /// Makes the cache a partial clone of `location`: git fetches a file it lacks from there
    /// (a cache made by a clone keeps following the remote sync names, also a new one).
    private func configurePromisor() throws {
        var settings = [("core.repositoryformatversion", "1"), ("extensions.partialClone", Self.promisor),
                        ("remote.\(Self.promisor).promisor", "true"),
                        ("remote.\(Self.promisor).url", Self.isLocal(location) ? Self.absolute(location) : location)]
        // A repository on this machine is served by a git of ours, told to accept the filter and
        // requests by object id (off by default); a server elsewhere answers as it is set up: one
        // that refuses the filter sends the tip's files whole, which is slower, never wrong.
        if Self.isLocal(location) {
            settings.append(("remote.\(Self.promisor).uploadpack",
                             "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"))
        }
        let configFile = cache.appendingPathComponent("config").path
        let current = (try? String(contentsOfFile: configFile, encoding: .utf8)) ?? ""
        // Written once; again only when the remote moved.
        guard !current.lowercased().contains("partialclone = \(Self.promisor)")
                || !current.contains("url = \(settings[3].1)\n") else { return }
        for (key, value) in settings { try git(["config", key, value]) }
    }

    static func isLocal(_ location: String) -> Bool {
        location.hasPrefix("/") || location.hasPrefix(".") || location.hasPrefix("file://")
    }

    static func absolute(_ location: String) -> String {
        location.hasPrefix("file://") ? location : URL(fileURLWithPath: location).standardizedFileURL.path
    }

    /// Runs git; throws with its message when it fails.
    @discardableResult
    private func git(_ arguments: [String], input: Data = Data(), environment: [String: String] = [:],
                     inCache: Bool = true) throws -> Data {
        let result = try gitResult(arguments, input: input, environment: environment, inCache: inCache)
        guard result.status == 0 else {
            let message = String(decoding: result.errors, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw VaultError.remote(location, .unreachable(operation: "run git \(arguments.first ?? "") for",
                                                          detail: message))
        }
        return result.output
    }

    private func gitResult(_ arguments: [String], input: Data = Data(), environment: [String: String] = [:],
                           inCache: Bool = true) throws -> ChildProcess.Result {
        let prefix = inCache ? ["git", "--git-dir=\(cache.path)"] : ["git"]
        // No prompt git would wait on unseen; the author says nothing about the machine.
        var variables = ["GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "mystash",
                         "GIT_AUTHOR_EMAIL": "mystash@invalid", "GIT_COMMITTER_NAME": "mystash",
                         "GIT_COMMITTER_EMAIL": "mystash@invalid"]
        variables.merge(environment) { _, new in new }
        guard let result = ChildProcess.execute(prefix + arguments, input: input, extraEnvironment: variables) else {
            throw VaultError.toolMissing("git")
        }
        return result
    }

    /// The remote's branch head; nil while the repository is empty.
    private func remoteHead() throws -> String? {
        // --exit-code: 2 when no such branch (an empty repository), other failures otherwise.
        let result = try gitResult(["ls-remote", "--exit-code", location, Self.branch])
        if result.status == 2 { return nil }
        guard result.status == 0 else {
            let message = String(decoding: result.errors, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw VaultError.remote(location, .unreachable(operation: "reach the sync remote", detail: message))
        }
        return String(decoding: result.output, as: UTF8.self).split(separator: "\t").first.map(String.init)
    }

    /// Whether the remote's branch moved since this cache last fetched or pushed it: nil when
    /// that cannot be told (never fetched, or the remote cannot be reached).
    func movedSinceLastSeen() -> Bool? {
        guard let seen = try? gitResult(["rev-parse", "--verify", "-q", Self.trackingRef]), seen.status == 0,
              let head = try? remoteHead()
        else { return nil }
        return String(decoding: seen.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) != head
    }

    func fetch() throws -> RemoteListing {
        guard try remoteHead() != nil else {
            _ = try? gitResult(["update-ref", "-d", Self.trackingRef])
            return RemoteListing()
        }
        if tipOnly {
            try git(["fetch", "-q", "--no-tags", "--depth", "1", "--filter=blob:none", Self.promisor,
                     "+\(Self.branch):\(Self.trackingRef)"])
        } else {
            try git(["fetch", "-q", "--no-tags", location, "+\(Self.branch):\(Self.trackingRef)"])
        }
        // "<mode> <type> <object id>\t<path>", each ended by a zero byte.
        var listing = RemoteListing()
        for line in try git(["ls-tree", "-r", "-z", Self.trackingRef]).split(separator: 0) {
            guard let tab = line.firstIndex(of: 9) else { continue }
            let path = String(decoding: line[(tab + 1)...], as: UTF8.self)
            listing.paths.insert(path)
            if let object = line[..<tab].split(separator: 32).last {
                listing.versions[path] = String(decoding: object, as: UTF8.self)
            }
        }
        if tipOnly {
            // A server that ignored the filter sent every file of the tip: none is missing then.
            let objects = try git(["rev-list", "--objects", "--missing=print", Self.trackingRef])
            fetched.missing = Set(objects.split(separator: 10).filter { $0.first == UInt8(ascii: "?") }
                .map { String(decoding: $0.dropFirst(), as: UTF8.self) })
            fetched.versions = listing.versions
        }
        return listing
    }

    /// Fetches the files `paths` names that a tip-only cache has not fetched yet, in one request
    /// (git would otherwise fetch each on its own as it is read).
    private func fetchContents(of paths: [String]) throws {
        let wanted = Set(paths.compactMap { fetched.versions[$0] }).intersection(fetched.missing)
        guard !wanted.isEmpty else { return }
        try git(["-c", "fetch.negotiationAlgorithm=noop", "fetch", "-q", "--no-tags", "--no-write-fetch-head",
                 "--recurse-submodules=no", "--filter=blob:none", "--stdin", Self.promisor],
                input: Data(wanted.sorted().map { $0 + "\n" }.joined().utf8))
        fetched.missing.subtract(wanted)
    }

    func read(_ paths: [String]) throws -> [String: [UInt8]] {
        try fetchContents(of: paths)
        var files: [String: [UInt8]] = [:]
        // In slices: git answers while we still write, and both pipes are finite.
        for start in stride(from: 0, to: paths.count, by: 200) {
            let slice = Array(paths[start..<min(start + 200, paths.count)])
            let request = slice.map { "\(Self.trackingRef):\($0)\n" }.joined()
            let output = [UInt8](try git(["cat-file", "--batch"], input: Data(request.utf8)))
            var offset = 0
            for path in slice {
                guard let newline = output[offset...].firstIndex(of: 10) else { break }
                let header = String(decoding: output[offset..<newline], as: UTF8.self).split(separator: " ")
                guard header.count == 3, header[1] == "blob", let size = Int(header[2]),
                      newline + 1 + size <= output.count else {
                    throw VaultError.remote(location, .fileUnreadable(path))

                }
                files[path] = Array(output[(newline + 1)..<(newline + 1 + size)])
                offset = newline + 2 + size
            }
        }
        return files
    }

    func publish(_ files: [String: [UInt8]]) throws -> Bool {
        let parent = try? gitResult(["rev-parse", "-q", "--verify", Self.trackingRef])
        let parentCommit = parent?.status == 0
            ? String(decoding: parent!.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : nil
        let index = cache.appendingPathComponent("mystash-index-\(getpid())").path
        defer { unlink(index) }
        let environment = ["GIT_INDEX_FILE": index]
        try git(parentCommit.map { ["read-tree", $0] } ?? ["read-tree", "--empty"], environment: environment)
        for (path, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let blob = String(decoding: try git(["hash-object", "-w", "--stdin"], input: Data(bytes)), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try git(["update-index", "--add", "--cacheinfo", "100644,\(blob),\(path)"], environment: environment)
        }
        let tree = String(decoding: try git(["write-tree"], environment: environment), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let commit = String(decoding: try git(["commit-tree", tree, "-m", "mystash sync"]
                                                + (parentCommit.map { ["-p", $0] } ?? [])), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let push = try gitResult(["push", "-q", location, "\(commit):\(Self.branch)"])
        guard push.status == 0 else {
            let head = try remoteHead()
            // Landed, though git saw the connection drop after it: sending it again made a copy.
            if head == commit {
                try git(["update-ref", Self.trackingRef, commit])
                return true
            }
            // Refused because another machine pushed first: the branch moved since the fetch.
            if head != parentCommit { return false }
            let message = String(decoding: push.errors, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw VaultError.remote(location, .unreachable(operation: "push to", detail: message))
        }
        try git(["update-ref", Self.trackingRef, commit])
        return true
    }
}

/// What a tip-only cache knows of the remote's files: their object ids, and those it lacks.
private final class FetchedBlobs {
    var versions: [String: String] = [:]
    var missing: Set<String> = []
}

/// A plain folder: files are written under a temporary name and linked into place, so a
/// reader never sees half a file and a name once taken is never overwritten.
struct FolderRemote: SyncRemote {
    let folder: URL
    var location: String { folder.path }

    func fetch() throws -> RemoteListing {
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else {
            throw VaultError.remote(location, .unreachable(operation: "read the sync folder", detail: "not readable"))
        }
        var paths = Set<String>()
        while let path = walker.nextObject() as? String {
            let name = (path as NSString).lastPathComponent
            // Temporary files (ours and Syncthing's) and Syncthing's own folders are not the log.
            if name.hasPrefix(".") {
                if (walker.fileAttributes?[.type] as? FileAttributeType) == .typeDirectory { walker.skipDescendants() }
                continue
            }
            if (walker.fileAttributes?[.type] as? FileAttributeType) == .typeRegular { paths.insert(path) }
        }
        return RemoteListing(paths: paths)
    }

    func read(_ paths: [String]) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for path in paths {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(path).path) else {
                throw VaultError.remote(location, .unreachable(operation: "read '\(path)' in the sync folder",
                                                              detail: "not readable"))
            }
            files[path] = [UInt8](data)
        }
        return files
    }

    func publish(_ files: [String: [UInt8]]) throws -> Bool {
        for (path, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let target = folder.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
            let temporary = target.deletingLastPathComponent().appendingPathComponent(".tmp-\(getpid())-\(UUID())")
            guard FileManager.default.createFile(atPath: temporary.path, contents: Data(bytes)) else {
                throw VaultError.remote(location, .unreachable(operation: "write to the sync folder",
                                                              detail: "a file cannot be created there"))
            }
            defer { unlink(temporary.path) }
            let descriptor = open(temporary.path, O_RDONLY | O_CLOEXEC)
            if descriptor >= 0 { fsync(descriptor); close(descriptor) }
            // The key slot is replaced when it changes; everything else is written once.
            if path == SyncLayout.keySlotPath {
                guard rename(temporary.path, target.path) == 0 else {
                    throw VaultError.remote(location, .unreachable(operation: "write '\(path)' in the sync folder",
                                                                  detail: String(cString: strerror(errno))))
                }
                continue
            }
            guard link(temporary.path, target.path) == 0 else {
                if errno == EEXIST { return false }
                throw VaultError.remote(location, .unreachable(operation: "write '\(path)' in the sync folder",
                                                              detail: String(cString: strerror(errno))))

            }
        }
        return true
    }
}
