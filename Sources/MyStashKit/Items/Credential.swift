import Foundation

/// What a program asks the vault a credential for, as git describes one to its credential
/// helpers (gitcredentials(7)): a protocol, a host (with its port, if any), a path and a
/// user, each optional but the host; `password` is the one to store or the one that failed.
public struct CredentialQuery: Equatable, Sendable {
    /// `https`, `http`, `ssh`...; nil matches any.
    public var scheme: String?
    /// `example.com` or `example.com:8443`; never empty.
    public var host: String
    /// The repository's path on the host (git sends it with `credential.useHttpPath`); nil matches any.
    public var path: String?
    /// nil matches any user.
    public var username: String?
    public var password: String?

    public init(scheme: String?, host: String, path: String? = nil, username: String? = nil, password: String? = nil) {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.username = username
        self.password = password
    }
}

/// A credential the vault answers with.
public struct Credential: Equatable, Sendable {
    public var entryID: Int64
    public var entryName: String
    public var username: String?
    public var password: String
}

/// What storing a credential did to the vault.
public enum CredentialStoreOutcome: Equatable, Sendable {
    /// A new entry was made.
    case added(id: Int64, name: String)
    /// An existing entry's password (or user) changed; the old password is in its history.
    case updated(id: Int64, name: String)
    /// The entry had that credential already; nothing was written.
    case unchanged(id: Int64, name: String)
}

/// One address of an entry, cut into what a credential query is compared with.
struct CredentialAddress: Equatable {
    /// Lowercased; nil for a bare host (`example.com`), which serves http and https.
    var scheme: String?
    /// Lowercased, with the port unless it is the scheme's default.
    var host: String
    /// Path segments without the empty ones; a final `.git` is dropped, as git's paths have it or not.
    var path: [String]
    /// The user named in the address (`https://bob@example.com`).
    var user: String?

    /// Ports that are the same as none for their scheme.
    private static let defaultPorts = ["http": "80", "https": "443", "ftp": "21", "ftps": "990", "ssh": "22",
                                       "sftp": "22"]

    /// Parses `scheme://user@host:port/path?query#fragment`, or the same without scheme or
    /// `//`; nil when no host is left.
    init?(_ address: String) {
        var rest = Substring(address)
        if let separator = rest.range(of: "://") {
            scheme = rest[..<separator.lowerBound].lowercased()
            rest = rest[separator.upperBound...]
        } else if let colon = rest.firstIndex(of: ":"), rest[..<colon].allSatisfy(\.isLetter),
                  !rest[rest.index(after: colon)...].hasPrefix(where: \.isNumber) {
            scheme = rest[..<colon].lowercased()
            rest = rest[rest.index(after: colon)...]
        }
        let authority = rest.prefix { !"/?#".contains($0) }
        var hostPart = Substring(authority)
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            user = String(userInfo.prefix { $0 != ":" }).removingPercentEncoding
            hostPart = authority[authority.index(after: at)...]
        }
        guard let host = Self.normalizedHost(String(hostPart), scheme: scheme) else { return nil }
        self.host = host
        let afterAuthority = rest[authority.endIndex...].prefix { !"?#".contains($0) }
        path = Self.segments(String(afterAuthority))
    }

    /// The host lowercased, without a trailing dot or the scheme's default port; nil when empty.
    static func normalizedHost(_ host: String, scheme: String?) -> String? {
        var name = host.lowercased()
        var port: String?
        if let colon = name.lastIndex(of: ":"), !name[name.index(after: colon)...].contains("]") {
            port = String(name[name.index(after: colon)...])
            name = String(name[..<colon])
        }
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { return nil }
        let ports = scheme.map { [defaultPorts[$0]] } ?? [defaultPorts["http"], defaultPorts["https"]]
        if let port, !port.isEmpty, !ports.contains(port) { return name + ":" + port }
        return name
    }

    static func segments(_ path: String) -> [String] {
        var parts = path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
        if let last = parts.last, last.hasSuffix(".git"), last.count > 4 {
            parts[parts.count - 1] = String(last.dropLast(4))
        }
        return parts
    }

    /// How well this address serves `query`: nil when it does not; higher is closer. With a
    /// path asked for, an address whose path is a prefix of it serves it, the longer the
    /// closer; without one, every path serves, the shorter (the host itself) the closer.
    func rank(for query: CredentialQuery) -> Int? {
        if let wanted = query.scheme?.lowercased() {
            guard scheme == wanted || (scheme == nil && ["http", "https"].contains(wanted)) else { return nil }
        }
        guard CredentialAddress.normalizedHost(query.host, scheme: query.scheme?.lowercased() ?? scheme) == host else {
            return nil
        }
        guard let wantedPath = query.path.map(Self.segments) else { return -path.count }
        guard path.count <= wantedPath.count, Array(wantedPath.prefix(path.count)) == path else { return nil }
        return path.count
    }
}

private extension Substring {
    func hasPrefix(where predicate: (Character) -> Bool) -> Bool { first.map(predicate) ?? false }
}
