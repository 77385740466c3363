import ArgumentParser
import Foundation
import MyStashKit
import StashPlatform

/// A failure as mystash reports it: `Error: <message>`, the lines behind it, `hint: <next
/// step>`, and the exit status mystash(1) documents. Every failure of the library is worded
/// here, in one place.
struct CommandFailure: Error, CustomStringConvertible {
    /// The exit status, following sysexits(3).
    struct Status: Hashable {
        let name: String
        let code: Int32
        static let usage = Status(name: "usage", code: 64)
        static let invalidData = Status(name: "invalid data", code: 65)
        static let notFound = Status(name: "not found", code: 66)
        static let cannotCreate = Status(name: "cannot create", code: 73)
        static let ioError = Status(name: "I/O error", code: 74)
        static let busy = Status(name: "busy", code: 75)
        static let wrongPassword = Status(name: "wrong password", code: 77)
        static let permission = Status(name: "permission", code: 77)
        static let unexpected = Status(name: "unexpected", code: 1)
    }

    var status: Status
    var message: String
    var details: [String]
    var hint: String?
    /// The library's failure this one words, when there is one.
    var cause: VaultError?

    init(_ status: Status, _ message: String, details: [String] = [], hint: String? = nil) {
        self.status = status
        self.message = message
        self.details = details
        self.hint = hint
    }

    var description: String { ([message] + details).joined(separator: "\n") }

    /// Any error, worded: the library's by ``init(vault:)``, the clipboard's, anything else as unexpected.
    init(_ error: Error) {
        switch error {
        case let failure as CommandFailure: self = failure
        case let failure as Clipboard.Failure:
            switch failure {
            case .noClipboard: self.init(.notFound, failure.description)
            case .toolFailed, .helperFailed: self.init(.unexpected, failure.description)
            }
        case let failure as KeyringSession.Unavailable:
            self.init(.unexpected, failure.description, hint: "commands will ask for the master password instead")
        default: self.init(vault: VaultError.wrapping(error))
        }
    }

    private static let restoreVault = "restore the vault from a backup"
    private static let checkListsProblems = "restore the vault from a backup; 'mystash check' lists every problem"
    private static let checkListsRows = "restore the vault from a backup; 'mystash check' lists every damaged row"
    private static let askPassword = "give the master password (prompt, MYSTASH_PASSWORD) or run 'mystash unlock'"
    private static let reachRemote = "check that the remote exists and can be reached, then run sync again"

    /// The library's failure with the exit status of its kind, and the next step to take.
    init(vault error: VaultError) {
        self.init(Self.status(of: error), Self.message(for: error) ?? error.message, details: Self.details(of: error),
                  hint: Self.hint(for: error))
        cause = error
    }

    /// The lines behind the message; candidates by the `#ID` that picks each.
    private static func details(of error: VaultError) -> [String] {
        guard case .ambiguous(_, _, let candidates) = error else { return error.details }
        return candidates.map { "#\($0.id)  \($0.summary)" }
    }

    private static func status(of error: VaultError) -> Status {
        switch error.kind {
        case .invalidRequest: .usage
        case .invalidData, .invalidText: .invalidData
        case .notFound: .notFound
        case .cannotCreate: .cannotCreate
        case .ioError: .ioError
        case .busy: .busy
        case .wrongPassword: .wrongPassword
        case .permission: .permission
        case .unexpected: .unexpected
        }
    }

    /// The settings people give as flags or variables, by those names.
    private static func name(of setting: Setting) -> String {
        switch setting {
        case .passwordLength: "--length"
        case .wordCount: "--words"
        case .kdfCost: "--kdf-cost"
        case .lockTimeout: "MYSTASH_BUSY_TIMEOUT"
        }
    }

    /// Where the command line words a failure otherwise than the library does.
    private static func message(for error: VaultError) -> String? {
        switch error {
        case .ambiguous(let kind, let reference, let candidates):
            return "\(reference.argument) matches \(candidates.count) \(kind.plural); give one of their IDs as #ID:"
        case .settingOutOfRange(.kdfCost, let value, let allowed):
            return "--kdf-cost must be between \(allowed.lowerBound) and \(allowed.upperBound) (log2 of scrypt's N), "
                + "not \(value)"
        case .weakKDFRefused(let value, let allowed):
            return "--kdf-cost must be between \(allowed.lowerBound) and \(allowed.upperBound) (log2 of scrypt's N), "
                + "not \(value)"
        case .settingOutOfRange(.lockTimeout, let value, let allowed):
            return "MYSTASH_BUSY_TIMEOUT must be a number of seconds from \(allowed.lowerBound) to "
                + "\(allowed.upperBound), not \(value)"
        case .settingOutOfRange(let setting, let value, let allowed):
            return "\(name(of: setting)) must be between \(allowed.lowerBound) and \(allowed.upperBound), not \(value)"
        case .keyChangedElsewhere:
            return "another process changed the vault's key (a master password change with --rekey) since it "
                + "was unlocked here; nothing was read or saved with the old key"
        case .concurrentChange:
            return "another mystash process changed this item at the same time; nothing was saved"
        case .storeBusy:
            return "the vault is locked by another mystash process"
        default:
            return nil
        }
    }

    /// The next step a person can take, naming mystash's commands, flags and variables.
    private static func hint(for error: VaultError) -> String? {
        switch error {
        case .notFound(.note, _): "'mystash note list' shows them with their IDs"
        case .notFound(.entry, _): "'mystash password list' shows them with their IDs"
        case .notFound(.category, _): "'mystash category list' shows them with their IDs"
        case .notFound(.sshKey, _): "'mystash ssh list' shows the keys"
        case .nameTaken: "choose another name, or allow a second one"
        case .noSuchField(_, _, let fields): "its fields are: \(fields.joined(separator: ", "))"
        case .noTOTPSecret: "add one with 'mystash password edit --totp'"
        case .categoryHasEntries(let category, _):
            "move or remove its entries first ('mystash password list --category \(category)')"
        case .noSuchAttachment(_, _, let attachments):
            attachments.isEmpty
                ? "it has no attachments"
                : "its attachments are: \(attachments.map { "'\($0)'" }.joined(separator: ", "))"
        case .attachmentNameTaken: "attach it under another name, or detach the one it has first"
        case .attachmentTooLarge: "compress or split the file, or keep it outside the vault (encrypted with gpg or age)"
        case .attachmentRemovedMeanwhile: "attach the file again"
        case .attachmentDamaged: checkListsRows
        case .sshKey(.damaged): "check that the whole file was copied"
        case .sshKey(.notOpenSSH): "give a private key file such as ~/.ssh/id_ed25519"

        case .sshKey(.publicKeyGiven): "give the file without '.pub'"
        case .sshKey(.unusablePEM): "convert it with 'ssh-keygen -p -f FILE', which rewrites it in OpenSSH's format"
        case .sshKey(.tooManyRounds): "re-encrypt it with 'ssh-keygen -p -a 100 -f FILE'"
        case .sshKey(.unsupportedEncryption): "re-encrypt it with 'ssh-keygen -p -Z aes256-ctr -f FILE'"
        case .sshKeyStored: "'mystash ssh list' shows the stored keys"
        case .wrongPassphrase: "type the passphrase the key was saved with"
        case .settingOutOfRange(.kdfCost, _, _):
            "leave it out to calibrate to about \(KDFPolicy.targetSeconds) s on this machine"
        case .weakKDFRefused:
            "MYSTASH_TEST_ALLOW_WEAK_KDF works in test (debug) builds only; leave --kdf-cost out to calibrate"
        case .settingOutOfRange(.lockTimeout, _, _): "unset it to wait 30 seconds"
        case .locked: askPassword
        case .keyChangedElsewhere: "unlock again with the master password now in use, then repeat the command"
        case .passwordChangedElsewhere: "unlock with the master password now in use and try again"
        case .noVault: "create one with 'mystash init', or name another with --vault or MYSTASH_VAULT"
        case .vaultExists: "use it, or choose another directory with --vault"
        case .vaultIncomplete: "restore the missing file from a backup"
        case .cannotCreate: "choose an empty or new directory with --vault"
        case .notOwned: "a vault must belong to the user who opens it"
        case .openToOthers(let path, _, let wanted): "run: chmod \(wanted) '\(path)'"
        case .keySlot(.missingInBoth):
            "restore the vault from a backup, or move the directory aside and run 'mystash init'"
        case .keySlot(.missing(let damaged, let intact)): "restore \(damaged) from a backup and keep \(intact)"
        case .keySlot, .sameStoreIdentity, .storeUnopenable: restoreVault
        case .changedOutside, .rowChangedOutside, .schemaChanged: checkListsProblems
        case .damagedRow: checkListsRows
        case .concurrentChange: "run the command again"
        case .storeBusy: "wait for it to finish, or raise MYSTASH_BUSY_TIMEOUT (seconds)"
        case .diskFull: "free some space and run the command again"
        case .readOnly: "check the owner and permissions of the vault directory"
        case .diskError: "check the disk (dmesg), then run the command again"
        case .savedButNotSynced: "check the disk (dmesg) and run 'mystash check'; do not run the command again"
        case .storeCorrupt: "restore it from a backup; 'mystash check' lists what it can read"
        case .cannotMigrate: "nothing was changed; use the version of mystash that last wrote it"
        case .incompatibleVersion: "use the version of mystash that created it"
        case .syncStateDamaged: "clone the vault again from its remote with 'mystash clone'"
        case .notATextFile: "convert it to UTF-8 first"
        case .nestedTooDeep: "export the database again from KeePassXC, whose own exports nest far less"
        case .bitwardenArchiveWithoutData: "export again from Bitwarden choosing '.zip (with attachments)'"
        case .encryptedBitwardenExport:
            "export again from Bitwarden choosing the format '.json' (not '.json (Encrypted)')"
        case .unexportable: "export as mystash-json, which escapes them, or remove them from these values"
        case .toolMissing(let tool): tool == "git" ? "install it: apt install git" : "install it: apt install gnupg"
        case .libraryMissing: "install it: apt install libxml2"
        case .breachList(_, .missing): "download Pwned Passwords' SHA-1 list (ordered by hash) or its range files first"
        case .breachList(_, .noRangeFiles):
            "name the directory PwnedPasswordsDownloader filled, or the single sorted SHA-1 file"
        case .breachList(_, .notOrdered): "download the list ordered by hash, not by prevalence"
        case .noRemote: "name one: mystash sync --remote URL (a git repository or a folder)"
        case .remote(let location, let problem): remoteHint(problem, location: withoutURLPasswords(location))
        default: nil
        }
    }

    private static func remoteHint(_ problem: VaultError.RemoteProblem, location: String) -> String? {
        switch problem {
        case .missing: "create it first, for example with 'git init --bare \(location)'"
        case .notASyncLog(let missing) where missing.count > 1:
            "run 'mystash sync --remote \(location)' on the machine that has the vault first"
        case .notASyncLog: "sync to an empty git repository or folder"
        case .anotherVault: "clone it with 'mystash clone \(location) --vault DIR', or sync to an empty remote"
        case .changedSinceLastSync: "run 'mystash sync' first, then move"
        case .begunElsewhere:
            "sync this machine with its old remote first, then clone this one with 'mystash clone \(location) "
                + "--vault DIR' (a clone does not carry changes that were never synced)"
        case .tampered: "restore the remote from a backup; until then this machine neither sends nor receives"
        case .keySlotDamaged: "sync from another machine first"
        case .noSyncKeyOpens: "sync once more on the machine where the password was changed, then clone again"
        case .unreachable: reachRemote
        case .keptChanging: "run sync again"
        case .fileUnreadable: nil
        }
    }
}

extension ItemReference {
    /// What a person typed: `#17` is ID 17; anything else is a name.
    init(argument: String) {
        if argument.hasPrefix("#"), let id = Int64(argument.dropFirst()) {
            self = .id(id)
        } else {
            self = .name(argument)
        }
    }

    /// The reference as it is typed on the command line: `#17`, or the name.
    var argument: String {
        switch self {
        case .id(let id): "#\(id)"
        case .name(let name): "'\(name)'"
        }
    }
}
