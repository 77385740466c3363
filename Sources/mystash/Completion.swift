import Foundation
import MyStashKit

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
    let named = arguments.firstIndex(of: "--vault").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    guard let vault = try? Vault.open(at: VaultOptions.directory(vault: named)) else { return [] }
    if kind != .categories {
        // Not verifying: completion only reads names, and must never write or complain.
        guard let session = KeyringSession.load(vaultIdentifier: vault.identifier),
              (try? vault.unlock(session: session, verification: .skipped)) == true
        else { return [] }
    }
    let names = (try? vault.names(of: kind)) ?? []
    // One candidate per line: names with control characters or newlines are left out.
    return names.filter { name in
        name.lowercased().hasPrefix(prefix.lowercased())
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }.sorted()
}
