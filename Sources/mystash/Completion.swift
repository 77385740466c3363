import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform

// Shell completion of entry, note and category names (swift-argument-parser's custom
// completions). Names of entries and notes are encrypted, so they complete only in an
// unlocked session; otherwise nothing is offered and nothing is asked.

@Sendable func completeEntryNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    completionNames(.entries, arguments: arguments, prefix: prefix)
}

@Sendable func completeNoteNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    completionNames(.notes, arguments: arguments, prefix: prefix)
}

@Sendable func completeCategoryNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    completionNames(.categories, arguments: arguments, prefix: prefix)
}

/// Entries of the "SSH Key" category, for `ssh export-public`.
@Sendable func completeSSHKeyNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    completionNames(.sshKeys, arguments: arguments, prefix: prefix)
}

private func completionNames(_ kind: Vault.NameKind, arguments: [String], prefix: String) -> [String] {
    // Category names are plain: they complete on a locked vault too.
    guard let vault = kind == .categories ? openForCompletion(arguments) : unlockedForCompletion(arguments) else {
        return []
    }
    let names = (try? vault.items.names(of: kind)) ?? []
    // One candidate per line: names with control characters or newlines are left out.
    return names.filter { name in
        name.lowercased().hasPrefix(prefix.lowercased())
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }.sorted()
}

/// Values `show --field` takes: the built-in names, and, in an unlocked session, the custom
/// fields of the entry named on the command line.
@Sendable func completeFieldNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    var names = ["password", "user", "url", "otp", "notes", "name", "category", "totp"]
    // The entry: the first word after show (or get) that is no option nor an option's value.
    if let show = arguments.firstIndex(where: { $0 == "show" || $0 == "get" }) {
        var words = arguments[(show + 1)...].makeIterator()
        while let word = words.next() {
            if ["--field", "--vault"].contains(word) { _ = words.next(); continue }
            if word.hasPrefix("-") || word == prefix { continue }
            if let vault = unlockedForCompletion(arguments),
               let fields = try? vault.items.entry(ItemReference(argument: word), reveal: false).fields {
                names += fields.map(\.name)
            }
            break
        }
    }
    return names.filter { $0.lowercased().hasPrefix(prefix.lowercased()) && !$0.contains("\n") }
}

/// In an unlocked session, the attachments of the entry named on the command line (`detach`
/// and `attachment save`: the first word after the command that is no option nor its value).
@Sendable func completeAttachmentNames(_ arguments: [String], _ index: Int, _ prefix: String) -> [String] {
    guard let command = arguments.lastIndex(where: { $0 == "detach" || $0 == "save" }) else { return [] }
    var words = arguments[(command + 1)...].makeIterator()
    while let word = words.next() {
        if ["--vault", "--output", "-o"].contains(word) { _ = words.next(); continue }
        if word.hasPrefix("-") || word == prefix { continue }
        guard let vault = unlockedForCompletion(arguments),
              let names = try? vault.items.attachments(of: ItemReference(argument: word)).map(\.name)
        else { return [] }
        return names.filter { $0.lowercased().hasPrefix(prefix.lowercased()) }.sorted()
    }
    return []
}

/// The vault `--vault` names on the command line, else the default one.
private func openForCompletion(_ arguments: [String]) -> Vault? {
    let named = arguments.firstIndex(of: "--vault").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    return try? Vault.open(at: VaultOptions.directory(vault: named))
}

/// That vault unlocked by a session; nil without one.
private func unlockedForCompletion(_ arguments: [String]) -> Vault? {
    guard let vault = openForCompletion(arguments),
          let session = KeyringSession.load(vaultIdentifier: vault.identifier),
          // Not verifying: completion only reads names, and must never write or complain.
          (try? vault.unlock(session: session, verification: .skipped)) == true
    else { return nil }
    return vault
}

// MARK: - Aliases

/// Every alias with the command path it is typed after (" password ls": `ls` after `password`)
/// and the name of the command it stands for.
private func aliases() -> [(path: String, command: String)] {
    var found: [(String, String)] = []
    func collect(_ command: ParsableCommand.Type, path: String) {
        for sub in command.configuration.subcommands {
            let name = sub.configuration.commandName ?? sub._commandName
            for alias in sub.configuration.aliases { found.append(("\(path) \(alias)", name)) }
            collect(sub, path: "\(path) \(name)")
        }
    }
    collect(MyStash.self, path: "")
    return found
}

/// The completion script for `shell`: swift-argument-parser's, which knows no aliases, with a
/// wrapper that reads each alias on the line (`pw`, `ls`, `get`...) as its command's name.
func completionScriptWithAliases(for shell: CompletionShell) -> String {
    let script = MyStash.completionScript(for: shell)
    switch shell {
    case .bash:
        let registration = "complete -o filenames -F _mystash mystash"
        guard script.trimmingCharacters(in: .newlines).hasSuffix(registration) else { return script }
        let cases = aliases().map { "        \"\($0.path)\") canonical=\($0.command) ;;" }
        return script.trimmingCharacters(in: .newlines).dropLast(registration.count) + """
            # Aliases complete as the commands they stand for: each on the line before the cursor is
            # replaced by its command's name (in COMP_WORDS, COMP_LINE and COMP_POINT alike).
            _mystash_aliases() {
                local rest="${COMP_LINE}" line="" path="" word canonical before i
                for ((i = 0; i < COMP_CWORD; i++)); do
                    word="${COMP_WORDS[i]}"
                    before="${rest%%"${word}"*}"
                    rest="${rest:$((${#before} + ${#word}))}"
                    canonical="${word}"
                    if ((i > 0)); then
                        case "${path} ${word}" in
            \(cases.joined(separator: "\n"))
                        esac
                        path="${path} ${canonical}"
                    fi
                    line+="${before}${canonical}"
                    COMP_POINT=$((COMP_POINT + ${#canonical} - ${#word}))
                    COMP_WORDS[i]="${canonical}"
                done
                COMP_LINE="${line}${rest}"
                _mystash "$@"
            }

            complete -o filenames -F _mystash_aliases mystash

            """
    case .zsh:
        let registration = """
            if [[ "${funcstack[1]}" = _mystash ]]; then
                _mystash "${@}"
            else
                compdef _mystash mystash
            fi
            """
        guard script.contains(registration) else { return script }
        let cases = aliases().map { "    '\($0.path)') words[i]=\($0.command) ;;" }
        return script.replacingOccurrences(of: registration, with: """
            # Aliases complete as the commands they stand for: each before the cursor is read as
            # its command's name.
            _mystash_aliases() {
                local i path=''
                for ((i = 2; i < CURRENT; i++)); do
                    case "${path} ${words[i]}" in
            \(cases.joined(separator: "\n"))
                    esac
                    path="${path} ${words[i]}"
                done
                _mystash "${@}"
            }

            if [[ "${funcstack[1]}" = _mystash ]]; then
                _mystash_aliases "${@}"
            else
                compdef _mystash_aliases mystash
            fi
            """)
    case .fish:
        guard script.contains("function __mystash_tokens\n") else { return script }
        let cases = aliases().map { "            case '\($0.path)'\n                set tokens[$i] \($0.command)" }
        return script + """

            # Aliases complete as the commands they stand for: each before the cursor is read as
            # its command's name.
            functions -c __mystash_tokens __mystash_tokens_as_typed
            function __mystash_tokens
                set -l tokens (__mystash_tokens_as_typed $argv)
                # Only the line's tokens (-p), not the one under the cursor alone (-t).
                string match -q -- '-p*' $argv; or begin; printf '%s\\n' $tokens; return; end
                set -l path ''
                for i in (seq 2 (count $tokens))
                    switch "$path $tokens[$i]"
            \(cases.joined(separator: "\n"))
                    end
                    set path "$path $tokens[$i]"
                end
                printf '%s\\n' $tokens
            end

            """
    default:
        return script
    }
}
