import Foundation
import ObjectGraph

extension Vault {
    // MARK: - Credentials for other programs (git)

    /// The schemes ``storeCredential(_:)`` files under "Web Site"; others go under "Server".
    private static let webSchemes: Set<String> = ["http", "https"]

    /// Entries with an address serving `query` and, when it names one, its user; the
    /// closest first, then the most recently changed.
    private func matchingEntries(_ query: CredentialQuery) throws -> [PasswordEntry] {
        try verifyForRead(of: [passwordsStore])
        let ranked: [(entry: PasswordEntry, rank: Int)] = try Self.wrapErrors {
            var request = FetchRequest<PasswordEntry>()
            request.fetchOnly(.name, .userId, .url, .moreURLs)
            return try context.fetch(request).compactMap { entry in
                let addresses = ([entry.url].compactMap { $0 } + entry.moreURLs).compactMap(CredentialAddress.init)
                let ranks = addresses.compactMap { address -> Int? in
                    guard let wanted = query.username else { return address.rank(for: query) }
                    guard (entry.userId ?? address.user) == wanted || (entry.userId == nil && address.user == nil)
                    else { return nil }
                    return address.rank(for: query)
                }
                return ranks.max().map { (entry, $0) }
            }
        }
        // An entry naming the user comes before one naming none.
        func named(_ entry: PasswordEntry) -> Int { query.username != nil && entry.userId == query.username ? 1 : 0 }
        let sorted = ranked.sorted {
            ($0.rank, named($0.entry), $0.entry.updatedAt, -$0.entry.id)
                > ($1.rank, named($1.entry), $1.entry.updatedAt, -$1.entry.id)
        }.map(\.entry)
        try Self.wrapErrors { for entry in sorted { try context.decodeValues(of: entry) } }
        return sorted
    }

    /// The host as a name, else `user@host`, else either with a number, whichever no entry has.
    private func freeName(for query: CredentialQuery) throws -> String {
        let taken = Set(try items.names(of: .entries).map { $0.lowercased() })
        let bases = [query.host] + (query.username.map { ["\($0)@\(query.host)"] } ?? [])
        if let free = bases.first(where: { !taken.contains($0.lowercased()) }) { return free }
        let base = bases[bases.count - 1]
        return (2...).lazy.map { "\(base) (\($0))" }.first { !taken.contains($0.lowercased()) }!
    }
}

extension Vault.Items {
    /// The entry whose address (URL or one of its more URLs) and user serve `query` best,
    /// with its password; nil when none does. Entries with an empty password (erased) are
    /// passed over. Among equally close addresses the most recently changed entry wins.
    public func credential(for query: CredentialQuery) throws -> Credential? {
        guard let entry = try vault.matchingEntries(query).first(where: { !$0.password.isEmpty }) else { return nil }
        return Credential(entryID: entry.id, entryName: entry.name,
                          username: entry.userId ?? query.username, password: entry.password)
    }

    /// Records the credential `query` carries (its user and password): in the entry that
    /// serves it best for that user (or one with no user, which takes it), else in a new
    /// entry named after the host, filed under "Web Site" or "Server" when those categories
    /// exist. Storing what an entry holds already writes nothing.
    ///
    /// - throws: ``VaultError`` `.invalidData` without a password or protocol, or for an
    ///   address the model refuses; nothing is saved then.
    @discardableResult
    public func storeCredential(_ query: CredentialQuery) throws -> CredentialStoreOutcome {
        guard let password = query.password else {
            throw VaultError.noCredentialPassword
        }
        guard let scheme = query.scheme?.lowercased(), !scheme.isEmpty else {
            throw VaultError.noCredentialProtocol

        }
        let candidates = try vault.matchingEntries(CredentialQuery(scheme: scheme, host: query.host, path: query.path))
        let sameUser = candidates.first { $0.userId == query.username }
        if let entry = sameUser ?? candidates.first(where: { $0.userId == nil }) {
            guard entry.password != password || entry.userId != query.username else {
                return .unchanged(id: entry.id, name: entry.name)
            }
            var changes = EntryChanges(password: password)
            if entry.userId != query.username { changes.userId = query.username ?? "" }
            try editEntry(.id(entry.id), changes)
            return .updated(id: entry.id, name: entry.name)
        }
        var url = "\(scheme)://\(query.host)"
        if let path = query.path, !path.isEmpty { url += "/" + path.drop { $0 == "/" } }
        let name = try vault.freeName(for: query)
        let category = try categories().map(\.name).first {
            $0.caseInsensitiveCompare(Vault.webSchemes.contains(scheme) ? "Web Site" : "Server") == .orderedSame
        }
        let id = try addEntry(EntryChanges(name: name, userId: query.username, url: url, category: category,
                                           password: password))
        return .added(id: id, name: name)
    }

    /// Clears the password of every entry that serves `query` for its user and holds the
    /// password it names (the one that failed), keeping it in the entry's history; the
    /// entries stay. Without a password in `query`, every entry serving it is cleared.
    ///
    /// - returns: the names of the entries changed, none when nothing matched.
    @discardableResult
    public func eraseCredential(_ query: CredentialQuery) throws -> [String] {
        let matches = try vault.matchingEntries(query).filter {
            !$0.password.isEmpty && (query.password == nil || $0.password == query.password)
        }
        for entry in matches { try editEntry(.id(entry.id), EntryChanges(password: "")) }
        return matches.map(\.name)
    }
}
