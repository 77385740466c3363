import Foundation
import ObjectGraph
import StashCrypto

/// A failure a person can act on: a message, the lines behind it, an optional hint naming
/// the next step, and the documented exit code.
public struct VaultError: Error, CustomStringConvertible {
    public struct Kind: Hashable, Sendable {
        public let name: String
        /// The process exit status documented in mystash(1).
        public let exitCode: Int32
        public static let usage = Kind(name: "usage", exitCode: 64)
        public static let invalidData = Kind(name: "invalid data", exitCode: 65)
        /// Bytes that should be UTF-8 text and are not (a kind of invalid data).
        public static let invalidText = Kind(name: "invalid text", exitCode: 65)
        public static let notFound = Kind(name: "not found", exitCode: 66)
        public static let cannotCreate = Kind(name: "cannot create", exitCode: 73)
        /// The disk reported an error reading or writing (`EIO`); for a save, the message says
        /// whether the change was committed first.
        public static let ioError = Kind(name: "I/O error", exitCode: 74)
        public static let busy = Kind(name: "busy", exitCode: 75)
        public static let wrongPassword = Kind(name: "wrong password", exitCode: 77)
        public static let permission = Kind(name: "permission", exitCode: 77)
        public static let unexpected = Kind(name: "unexpected", exitCode: 1)
    }

    public var kind: Kind
    public var message: String
    /// Further lines, one per problem (validation failures, ambiguous matches).
    public var details: [String]
    public var hint: String?
    /// For a failure about one row: what is wrong with it without naming the row, so `check`,
    /// which lists problems by store, entity and row, names the place once.
    var rowProblem: String?

    public init(_ kind: Kind, _ message: String, details: [String] = [], hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.details = details
        self.hint = hint
    }

    public var description: String { ([message] + details).joined(separator: "\n") }

    /// Turns any error from the layers below into one a person can read; never includes a secret value.
    public static func wrapping(_ error: Error) -> VaultError {
        switch error {
        case let error as VaultError:
            return error
        case is KeyChangedElsewhere:
            return VaultError(
                .busy, "another process changed the vault's key (a master password change with --rekey) since it "
                    + "was unlocked here; nothing was read or saved with the old key",
                hint: "unlock again with the master password now in use, then repeat the command")
        case let failure as RowAuthenticationFailure:
            return VaultError(.invalidData,
                              "the vault was changed outside mystash: \(failure.problem); nothing was saved",
                              hint: "restore the vault from a backup; 'mystash check' lists every problem")
        case let error as ValidationError:
            return VaultError(.invalidData, "nothing was saved:", details: ValidationMessages.messages(for: error))
        case let error as ObjectGraphError:
            if error.code == .mergeConflict {
                return VaultError(
                    .busy, "another mystash process changed this item at the same time; nothing was saved",
                                  hint: "run the command again")
            }
            if error.code == .damagedRow || error.code == .undecodableValue {
                var failure = VaultError(.invalidData, error.message,
                    hint: "restore the vault from a backup; 'mystash check' lists every damaged row")
                failure.rowProblem = error.rowProblem
                return failure
            }
            switch error.storeFailure {
            case .busy?:
                return VaultError(.busy, "the vault is locked by another mystash process",
                                  hint: "wait for it to finish, or raise MYSTASH_BUSY_TIMEOUT (seconds)")
            case .full?:
                return VaultError(.cannotCreate, "the disk is full; nothing was saved",
                                  hint: "free some space and run the command again")
            case .readOnly?, .permission?:
                return VaultError(.permission, "the vault cannot be written: permission denied",
                                  hint: "check the owner and permissions of the vault directory")
            case .ioError?:
                return VaultError(.ioError, "the disk reported an error: \(error.message)",
                                  hint: "check the disk (dmesg), then run the command again")
            case .corrupt?:
                return VaultError(.invalidData, "a store of the vault is corrupt: \(error.message)",
                                  hint: "restore it from a backup; 'mystash check' lists what it can read")
            default:
                break
            }
            if error.code == .storeOpenFailed {
                return VaultError(.invalidData, error.message, hint: "restore the vault from a backup")
            }
            if error.code == .migrationCannotBeInferred || error.code == .migrationFailed {
                return VaultError(
                    .invalidData, "this vault cannot be brought to this version of MyStash: \(error.message)",
                                  hint: "nothing was changed; use the version of mystash that last wrote it")
            }
            if error.code == .incompatibleVersionHash {
                return VaultError(
                    .invalidData, "this vault was made by an incompatible version of MyStash: \(error.message)",
                                  hint: "use the version of mystash that created it")
            }
            return VaultError(.unexpected, error.message)
        case let error as StashCryptoError:
            switch error.code {
            case .wrongPassword: return VaultError(.wrongPassword, "wrong master password")
            case .damagedKeySlot, .unsupportedVersion, .parametersRejected:
                return VaultError(
                    .invalidData, "the vault's key slot cannot be used: \(error.message)",
                    hint: "restore the vault from a backup")
            default: return VaultError(.unexpected, error.message)
            }
        default:
            return VaultError(.unexpected, "\(error)")
        }
    }
}
