import ArgumentParser
import Foundation
import MyStashKit
#if canImport(Glibc)
import Glibc
#endif

/// git's credential helper protocol (gitcredentials(7)): `key=value` lines on stdin up to a
/// blank line or the end; `get` answers `username=` and `password=` lines, or nothing.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "Answer git's credential requests from the vault (get, store, erase).",
        discussion: """
        Set it up with: git config --global credential.helper '!mystash git-credential'. \
        'get' prints the user and password of the entry whose URL or more URLs match the protocol, \
        host (with port) and path git sends, and its user; nothing when none does, so git asks. \
        'store' records a credential git used successfully, in the matching entry or a new one \
        named after the host; 'erase' clears the password git reports as refused (it stays in the \
        entry's history). The vault is unlocked by an unlocked session, else MYSTASH_PASSWORD, \
        else a prompt on the terminal; with none of them the helper says so on stderr and exits 77. \
        A request without a host, or malformed, is refused with status 65. Other actions are ignored, \
        as git asks of helpers.
        """
    )
    @OptionGroup var options: VaultOptions
    @Argument(help: ArgumentHelp("What git asks: get, store or erase.", valueName: "action"),
              completion: .list(["get", "store", "erase"]))
    var action: String

    /// The most a request may hold; git's are a few hundred bytes.
    static let maximumRequestBytes = 1 << 20

    func run() throws {
        guard ["get", "store", "erase"].contains(action) else { return }
        try reportingErrors {
            let query = try Self.query(from: try Self.readRequest(from: STDIN_FILENO))
            switch action {
            case "get":
                guard let credential = try options.readUnlockedVault({ try $0.items.credential(for: query) }) else {
                    return
                }
                guard !credential.password.contains(where: { $0 == "\n" || $0 == "\0" }) else {
                    throw CommandFailure(.invalidData,
                                     "the password of entry '\(credential.entryName)' has a line break, which git's "
                                        + "credential protocol cannot carry",
                                     hint: "copy it with 'mystash password show #\(credential.entryID) --clip' instead")
                }
                var answer = ""
                if let username = credential.username { answer += "username=\(username)\n" }
                answer += "password=\(credential.password)\n"
                Output.write(answer)
            case "store":
                guard query.password != nil else { return }
                switch try options.openUnlockedVault().items.storeCredential(query) {
                case let .added(id, name):
                    Terminal.printError("mystash: stored the credential in new entry '\(Output.safe(name))' (#\(id)).")
                case let .updated(id, name):
                    Terminal.printError("mystash: stored the new password in entry '\(Output.safe(name))' (#\(id)).")
                case .unchanged:
                    break
                }
            default:
                for name in try options.openUnlockedVault().items.eraseCredential(query) {
                    Terminal.printError(
                        "mystash: cleared the refused password of entry '\(Output.safe(name))' (its history keeps it).")
                }
            }
        }
    }

    /// The request's bytes, up to the blank line that ends it or the end of input.
    ///
    /// - throws: ``CommandFailure`` `.invalidData` beyond ``maximumRequestBytes``.
    static func readRequest(from descriptor: Int32) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= maximumRequestBytes {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
            if let end = blankLine(in: bytes) { return Array(bytes[..<end]) }
        }
        guard bytes.count <= maximumRequestBytes else {
            throw CommandFailure(.invalidData, "the credential request is larger than \(maximumRequestBytes) bytes",
                             hint: "git sends a few lines of key=value; check what feeds the helper")
        }
        return bytes
    }

    /// Where the blank line ending a request starts (after the last line's newline).
    private static func blankLine(in bytes: [UInt8]) -> Int? {
        if bytes.first == UInt8(ascii: "\n") { return 0 }
        for index in bytes.indices.dropFirst() where bytes[index] == UInt8(ascii: "\n") {
            if bytes[index - 1] == UInt8(ascii: "\n") { return index }
            if bytes[index - 1] == UInt8(ascii: "\r"), index >= 2, bytes[index - 2] == UInt8(ascii: "\n") {
                return index - 1
            }
        }
        return nil
    }

    /// The query a request describes. Keys are those of gitcredentials(7); `url` stands for its
    /// parts; unknown keys (`capability[]`, `wwwauth[]`, `password_expiry_utc`...) are ignored.
    ///
    /// - throws: ``CommandFailure`` `.invalidData` for a NUL byte, bytes that are not UTF-8, a line
    ///   without `=`, or no host.
    static func query(from bytes: [UInt8]) throws -> CredentialQuery {
        if let position = bytes.firstIndex(of: 0) {
            throw CommandFailure(.invalidData, "the credential request has a NUL byte (at byte \(position + 1))",
                             hint: "git's credential lines are key=value text")
        }
        let text = try UTF8Text.decode(bytes, place: "the credential request")
        var fields: [String: String] = [:]
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else {
                throw CommandFailure(.invalidData, "line \(number + 1) of the credential request has no '='",
                                 hint: "each line is key=value, as in host=example.com")
            }
            let key = String(line[..<equals])
            let value = String(line[line.index(after: equals)...])
            if key == "url" {
                fields.merge(urlFields(value)) { _, new in new }
            } else {
                fields[key] = value
            }
        }
        guard let host = fields["host"], !host.isEmpty else {
            throw CommandFailure(.invalidData, "the credential request names no host",
                             hint: "send host=NAME (or url=...), as git does; mystash keeps credentials by host")
        }
        func nonEmpty(_ key: String) -> String? { fields[key].flatMap { $0.isEmpty ? nil : $0 } }
        return CredentialQuery(scheme: nonEmpty("protocol"), host: host, path: nonEmpty("path"),
                               username: fields["username"], password: fields["password"])
    }

    /// The fields a `url=` value stands for, as git reads it: `protocol://user:password@host/path`.
    private static func urlFields(_ url: String) -> [String: String] {
        guard let separator = url.range(of: "://") else { return [:] }
        var fields = ["protocol": String(url[..<separator.lowerBound])]
        let rest = url[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        var host = Substring(authority)
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            let user = userInfo.prefix { $0 != ":" }
            fields["username"] = String(user).removingPercentEncoding ?? String(user)
            if user.endIndex < userInfo.endIndex {
                let password = userInfo[userInfo.index(after: user.endIndex)...]
                fields["password"] = String(password).removingPercentEncoding ?? String(password)
            }
            host = authority[authority.index(after: at)...]
        }
        fields["host"] = String(host)
        let path = rest[authority.endIndex...].drop { $0 == "/" }
        if !path.isEmpty { fields["path"] = String(path).removingPercentEncoding ?? String(path) }
        return fields
    }
}
