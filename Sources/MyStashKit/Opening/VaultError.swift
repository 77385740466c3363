import Foundation
import ObjectGraph
import StashCrypto

/// The things a vault keeps, as failures name them.
public enum ItemKind: String, Sendable {
    case note, entry, category
    case sshKey = "SSH key"

    public var plural: String { self == .category ? "categories" : self == .entry ? "entries" : rawValue + "s" }
}

/// A note, entry, category, attachment or SSH key as the caller named it: by its ID, or by its
/// name. A name that names nothing and spells a number falls back to that ID, as version 1 read it.
public enum ItemReference: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    case id(Int64)
    case name(String)

    public init(stringLiteral name: String) { self = .name(name) }

    public var description: String {
        switch self {
        case .id(let id): "ID \(id)"
        case .name(let name): "'\(name)'"
        }
    }
}

/// One of several items a name matches: its ID, and what tells it from the others.
public struct Candidate: Hashable, Sendable, CustomStringConvertible {
    public var id: Int64
    /// Its name and what else tells it apart (user, category, URL; a note's folder).
    public var summary: String

    public init(id: Int64, summary: String) {
        self.id = id
        self.summary = summary
    }

    public var description: String { "ID \(id)  \(summary)" }
}

/// A value the caller chooses, with the range the vault accepts.
public enum Setting: String, Sendable {
    case passwordLength = "password length"
    case wordCount = "number of words"
    case kdfCost = "KDF cost (log2 of scrypt's N)"
    case lockTimeout = "wait for another process's lock (seconds)"
}

/// What went wrong, in the vault's own terms: the item, the reference, the candidates, the
/// setting and its range, the store and row. Its ``description`` says it plainly; a program
/// built on the vault chooses how to present it and what to suggest next (the `mystash`
/// command adds its hints and exit statuses).
public enum VaultError: Error, Equatable, Sendable, CustomStringConvertible {
    /// How a failure is classed, for callers that treat whole classes alike.
    public enum Kind: String, Sendable {
        /// The request cannot be carried out as made (an ambiguous name, a setting out of range).
        case invalidRequest = "invalid request"
        /// Data read from the vault, a file, a remote or a key is not what it must be.
        case invalidData = "invalid data"
        /// Bytes that should be UTF-8 text and are not (a kind of invalid data).
        case invalidText = "invalid text"
        case notFound = "not found"
        case cannotCreate = "cannot create"
        /// The disk reported an error (`EIO`).
        case ioError = "I/O error"
        /// Another process holds what is needed, changed it meanwhile, or cannot be reached now.
        case busy
        case wrongPassword = "wrong password"
        case permission
        case unexpected
    }

    /// Where on disk a vault's key slot is missing or wrong.
    public enum KeySlotProblem: Equatable, Sendable {
        /// Neither store holds one: damaged, or not completely created.
        case missingInBoth
        case missing(in: String, intact: String)
        case different
        case unusable(reason: String)
    }

    /// What is wrong with an SSH private key given to the vault.
    public enum SSHKeyProblem: Equatable, Sendable {
        case damaged(reason: String)
        case publicKeyGiven
        case notOpenSSH(expectedLine: String)
        case unusable(reason: String)
        case unusablePEM(reason: String)
        case tooManyRounds(Int, maximum: Int)
        case unsupportedEncryption(cipher: String, kdf: String)
        case encryptedWithPassphrase
        case passphraseIsNotEntryPassword
    }

    /// What is wrong with a breach list (Pwned Passwords' SHA-1 hashes).
    public enum BreachListProblem: Equatable, Sendable {
        case missing
        case noRangeFiles
        case rangeFileTooLarge
        case notOrdered
        case malformedLine(Int, expected: String)
        case malformedAt(byte: UInt64, expected: String)
        case unreadable(reason: String?)
    }

    /// Why a sync remote is refused or cannot be used.
    public enum RemoteProblem: Equatable, Sendable {
        /// The path names no repository or folder.
        case missing
        /// It lacks the files every sync log has.
        case notASyncLog(missing: [String])
        case anotherVault
        /// A log this device never wrote to, at a location it was told to move to.
        case begunElsewhere
        /// The remote being left holds what this device has not synced yet.
        case changedSinceLastSync
        /// A file is missing, changed, out of order or replayed: `file` and what is wrong with it.
        case tampered(file: String, problem: String)
        case keySlotDamaged
        /// None of its sync keys opens with the data key of this master password.
        case noSyncKeyOpens
        /// git or the folder could not be read or written: the operation and what it said.
        case unreachable(operation: String, detail: String)
        case fileUnreadable(String)
        /// It kept changing while this sync merged.
        case keptChanging
    }

    // Items
    case notFound(ItemKind, ItemReference)
    case ambiguous(ItemKind, ItemReference, candidates: [Candidate])
    case nameTaken(ItemKind, name: String, id: Int64)
    case noSuchField(entry: String, field: String, fields: [String])
    case emptyField(entry: String, field: String)
    case noTOTPSecret(entry: String)
    case unusableTOTPSecret(entry: String, reason: String)
    case nothingToChange
    case categoryHasEntries(category: String, problems: [String])
    case noSuchAttachment(entry: String, ItemReference, attachments: [String])
    case attachmentNameTaken(entry: String, name: String)
    case attachmentTooLarge(name: String, limitMiB: Int)
    case attachmentUnreadable(reason: String)
    case attachmentRemovedMeanwhile
    case attachmentDamaged(name: String, chunksRead: Int, chunks: Int, bytesRead: Int, bytes: Int)
    /// Values the model's rules refuse, one line each; nothing was saved.
    case invalidValues([String])
    case sshKey(SSHKeyProblem)
    case sshKeyStored(name: String, id: Int64)
    case storedSSHKeyUnreadable(name: String, problem: String)
    case wrongPassphrase
    case noCredentialPassword
    case noCredentialProtocol
    case draftUnreadable(reason: String)

    // Settings and keys
    case settingOutOfRange(Setting, value: String, allowed: ClosedRange<Int>)
    /// A KDF cost below the floor, asked of a build that does not allow it.
    case weakKDFRefused(Int, allowed: ClosedRange<Int>)
    /// Reading or changing the vault needs its key, and it is not unlocked.
    case locked
    case wrongPassword
    case keyChangedElsewhere
    case passwordChangedElsewhere

    // The vault's files and stores
    case noVault(path: String)
    case vaultExists(path: String)
    case vaultIncomplete(path: String, reason: String)
    case cannotCreate(path: String, reason: String)
    case notOwned(path: String)
    case openToOthers(path: String, mode: UInt16, wanted: String)
    case keySlot(KeySlotProblem)
    case sameStoreIdentity(String, String)
    /// Rows, tags or records changed outside the vault: the first problem and the rest.
    case changedOutside([CheckProblem])
    /// A row a save was about to change was changed outside the vault; nothing was saved.
    case rowChangedOutside(CheckProblem)
    case schemaChanged([CheckProblem])
    /// A row that does not decode or authenticate: where it is, and what is wrong with it alone.
    case damagedRow(String, rowProblem: String?)
    case concurrentChange
    case storeBusy
    case diskFull
    case readOnly
    case diskError(String)
    case savedButNotSynced(String)
    case storeCorrupt(String)
    case storeUnopenable(String)
    case cannotMigrate(String)
    case incompatibleVersion(String)
    case syncStateDamaged

    // Transfer
    case unknownFormat(seen: String)
    case invalidFile(ImportFormat, reason: String)
    case bitwardenArchiveWithoutData
    /// A KeePass XML file nested deeper than any KeePassXC writes.
    case nestedTooDeep(limit: Int, line: Int)
    case encryptedBitwardenExport
    case exportNewerThanReadable(version: Int, readable: String)
    case notATextFile(place: String, line: Int, byte: Int)
    case unexportable(problems: [String])
    case nothingImported([String])
    case passStoreIsAFile
    case noPasswordStore(path: String)
    case breachList(path: String, BreachListProblem)

    // Sync
    case noRemote
    case remote(String, RemoteProblem)

    // Other programs
    case toolMissing(String)
    /// A system library loaded when it is first needed (libxml2, to read XML): what the loader said.
    case libraryMissing(String, detail: String)
    /// gpg could not decrypt a file of a password store: what it said.
    case cannotDecrypt(reason: String)
    case unexpected(String)

    public var kind: Kind {
        switch self {
        case .notFound, .noSuchField, .emptyField, .noTOTPSecret, .noSuchAttachment, .noVault, .vaultIncomplete,
             .noPasswordStore, .toolMissing, .libraryMissing:
            return .notFound
        case .breachList(_, let problem):
            switch problem {
            case .missing: return .notFound
            case .unreadable: return .permission
            default: return .invalidData
            }
        case .ambiguous, .nothingToChange, .settingOutOfRange, .weakKDFRefused, .unknownFormat, .passStoreIsAFile,
             .noRemote:
            return .invalidRequest
        case .nameTaken, .unusableTOTPSecret, .categoryHasEntries, .attachmentNameTaken, .attachmentTooLarge,
             .attachmentDamaged, .invalidValues, .sshKey, .sshKeyStored, .storedSSHKeyUnreadable, .rowChangedOutside,
             .noCredentialPassword,
             .noCredentialProtocol, .draftUnreadable, .keySlot, .sameStoreIdentity, .changedOutside, .schemaChanged,
             .damagedRow, .storeCorrupt, .storeUnopenable, .cannotMigrate, .incompatibleVersion, .syncStateDamaged,
             .invalidFile, .bitwardenArchiveWithoutData, .nestedTooDeep, .encryptedBitwardenExport,
             .exportNewerThanReadable,
             .unexportable, .nothingImported, .cannotDecrypt:
            return .invalidData
        case .notATextFile:
            return .invalidText
        case .remote(_, let problem):
            switch problem {
            case .missing: return .notFound
            case .unreachable, .keptChanging: return .busy
            // Not the remote's fault: another way (a clone, a sync first) does it.
            case .begunElsewhere, .changedSinceLastSync: return .invalidRequest
            default: return .invalidData
            }
        case .locked, .wrongPassword, .wrongPassphrase:
            return .wrongPassword
        case .keyChangedElsewhere, .passwordChangedElsewhere, .concurrentChange, .storeBusy,
             .attachmentRemovedMeanwhile:
            return .busy
        case .vaultExists, .cannotCreate, .diskFull:
            return .cannotCreate
        case .notOwned, .openToOthers, .readOnly:
            return .permission
        case .diskError, .savedButNotSynced, .attachmentUnreadable:
            return .ioError
        case .unexpected:
            return .unexpected
        }
    }

    /// The failure in one sentence, without the lines behind it (see ``details``).
    public var message: String {
        switch self {
        case .notFound(let kind, .id(let id)): "no \(kind.rawValue) with ID \(id)"
        case .notFound(let kind, .name(let name)): "no \(kind.rawValue) named '\(name)'"
        case .ambiguous(let kind, let reference, let candidates):
            "\(reference) matches \(candidates.count) \(kind.plural)"
        case .nameTaken(let kind, let name, let id): "an \(kind.rawValue) named '\(name)' exists already (#\(id))"
        case .noSuchField(let entry, let field, _): "entry '\(entry)' has no field '\(field)'"
        case .emptyField(let entry, let field): "the \(field) of entry '\(entry)' is empty"
        case .noTOTPSecret(let entry): "entry '\(entry)' has no TOTP secret"
        case .unusableTOTPSecret(let entry, let reason): "the TOTP secret of '\(entry)' cannot be used: \(reason)"
        case .nothingToChange: "nothing to change"
        case .categoryHasEntries: "nothing was saved:"
        case .noSuchAttachment(let entry, .name(let name), _): "entry '\(entry)' has no attachment '\(name)'"
        case .noSuchAttachment(let entry, .id(let id), _): "entry '\(entry)' has no attachment with ID \(id)"
        case .attachmentNameTaken(let entry, let name):
            "entry '\(entry)' already has an attachment named '\(name)'; nothing was saved"
        case .attachmentTooLarge(let name, let limit):
            "'\(name)' is larger than the \(limit) MiB an attachment may hold; nothing was saved"
        case .attachmentUnreadable(let reason): "cannot read the file to attach: \(reason)"
        case .attachmentRemovedMeanwhile:
            "another process removed the attachment while it was written; nothing was saved"
        case .attachmentDamaged(let name, let chunksRead, let chunks, let bytesRead, let bytes):
            "the attachment '\(name)' is damaged: \(chunksRead) of its \(chunks) chunks "
                + "(\(bytesRead) of \(bytes) bytes) could be read in order"
        case .invalidValues: "nothing was saved:"
        case .sshKey(let problem): problem.message
        case .sshKeyStored(let name, let id): "this key is stored already, as '\(name)' (#\(id))"
        case .storedSSHKeyUnreadable(let name, let problem): "the key of '\(name)' cannot be read: \(problem)"
        case .wrongPassphrase: "wrong passphrase for the key"
        case .noCredentialPassword: "there is no password to store"
        case .noCredentialProtocol: "there is no protocol to store the credential under"
        case .draftUnreadable(let reason): "the draft cannot be opened: \(reason)"
        case .settingOutOfRange(let setting, let value, let allowed):
            "the \(setting.rawValue) must be between \(allowed.lowerBound) and \(allowed.upperBound), not \(value)"
        case .weakKDFRefused(let cost, let allowed):
            "the \(Setting.kdfCost.rawValue) must be between \(allowed.lowerBound) and \(allowed.upperBound) "
                + "in this build, not \(cost)"
        case .locked: "the vault is locked"
        case .wrongPassword: "wrong master password"
        case .keyChangedElsewhere:
            "another process changed the vault's key since it was unlocked here; nothing was read or saved "
                + "with the old key"
        case .passwordChangedElsewhere:
            "another process changed the master password or the vault's key since this one unlocked it; "
                + "nothing was changed"
        case .noVault(let path): "there is no vault at '\(path)'"
        case .vaultExists(let path): "a vault already exists at '\(path)'"
        case .vaultIncomplete(let path, let reason): "the vault at '\(path)' is incomplete: \(reason)"
        case .cannotCreate(let path, let reason): "cannot create '\(path)': \(reason)"
        case .notOwned(let path): "'\(path)' belongs to another user"
        case .openToOthers(let path, let mode, _):
            "'\(path)' can be read or written by other users (mode \(String(mode, radix: 8)))"
        case .keySlot(let problem): problem.message
        case .sameStoreIdentity(let first, let second):
            "\(first) and \(second) carry the same store UUID (Z_METADATA.Z_UUID): one of them was altered or replaced"
        case .changedOutside(let problems):
            "the vault was changed outside mystash: \(problems.first?.description ?? "")"
        case .rowChangedOutside(let problem): "the vault was changed outside mystash: \(problem); nothing was saved"
        case .schemaChanged(let problems):
            "the vault's schema was changed outside mystash: \(problems.first?.description ?? "")"
        case .damagedRow(let message, _): message
        case .concurrentChange: "another process changed this item at the same time; nothing was saved"
        case .storeBusy: "the vault is locked by another process"
        case .diskFull: "the disk is full; nothing was saved"
        case .readOnly: "the vault cannot be written: permission denied"
        case .diskError(let detail): "the disk reported an error: \(detail)"
        case .savedButNotSynced(let detail):
            "the change was saved, but the disk reported an error while syncing it (\(detail))"
        case .storeCorrupt(let detail): "a store of the vault is corrupt: \(detail)"
        case .storeUnopenable(let detail): detail
        case .cannotMigrate(let detail): "this vault cannot be brought to this version of MyStash: \(detail)"
        case .incompatibleVersion(let detail): "this vault was made by an incompatible version of MyStash: \(detail)"
        case .syncStateDamaged: "the vault's sync state is damaged"
        case .unknownFormat(let seen): "cannot tell the format of the file: \(seen)"
        case .invalidFile(let format, let reason): "the file is not valid \(format.rawValue): \(reason)"
        case .nestedTooDeep(let limit, let line):
            "the file is not valid \(ImportFormat.keepassxcXML.rawValue): its elements are nested more than \(limit) "
                + "deep (line \(line))"
        case .bitwardenArchiveWithoutData:
            "the file is not valid \(ImportFormat.bitwardenZIP.rawValue): the archive holds no data.json"
        case .encryptedBitwardenExport:
            "this Bitwarden export is encrypted (with the account key or a password); its items cannot be read"
        case .exportNewerThanReadable(let version, let readable):
            "the file is not valid \(ImportFormat.mystashJSON.rawValue): version \(version) is newer than this "
                + "mystash reads (\(readable))"
        case .notATextFile(let place, let line, let byte):
            "\(place) is not UTF-8 text (an invalid byte at line \(line), byte \(byte)); nothing was saved"
        case .unexportable: "these values hold control characters, which CSV cannot carry; nothing was exported:"
        case .nothingImported: "nothing was imported:"
        case .passStoreIsAFile: "a password store is a directory, not a file"
        case .noPasswordStore(let path): "there is no password store at '\(path)'"
        case .breachList(let path, let problem): problem.message(path: path)
        case .noRemote: "this vault has no sync remote yet"
        case .remote(let location, let problem): withoutURLPasswords(problem.message(location: location))
        case .toolMissing(let tool): "\(tool) could not be started (is it installed?)"
        case .libraryMissing(let library, let detail): "\(library) could not be loaded (is it installed?): \(detail)"
        case .cannotDecrypt(let reason): "gpg could not decrypt it: \(reason)"
        case .unexpected(let message): message
        }
    }

    /// The lines behind the message, one per problem (validation failures, candidates).
    public var details: [String] {
        switch self {
        case .ambiguous(_, _, let candidates): candidates.map(\.description)
        case .invalidValues(let lines), .categoryHasEntries(_, let lines), .unexportable(let lines),
             .nothingImported(let lines):
            lines
        case .changedOutside(let problems), .schemaChanged(let problems): problems.dropFirst().map(\.description)
        default: []
        }
    }

    public var description: String { ([message] + details).joined(separator: "\n") }

    /// For a failure about one row: what is wrong with it without naming the row, so `check`,
    /// which lists problems by store, entity and row, names the place once.
    var rowProblem: String? {
        if case .damagedRow(_, let problem) = self { return problem }
        return nil
    }

    /// Any error from the layers below as the vault's; never includes a secret value.
    public static func wrapping(_ error: Error) -> VaultError {
        switch error {
        case let error as VaultError:
            return error
        case is KeyChangedElsewhere:
            return .keyChangedElsewhere
        case let failure as RowAuthenticationFailure:
            return .rowChangedOutside(failure.problem)
        case let error as ValidationError:
            return .invalidValues(ValidationMessages.messages(for: error))
        case let error as ObjectGraphError:
            return wrapping(error)
        case let error as StashCryptoError:
            switch error.code {
            case .wrongPassword: return .wrongPassword
            case .damagedKeySlot, .unsupportedVersion, .parametersRejected:
                return .keySlot(.unusable(reason: error.message))
            default: return .unexpected(error.message)
            }
        default:
            return .unexpected("\(error)")
        }
    }

    /// The vault cannot be written now (a read-only mount or file, a full disk).
    var isNotWritable: Bool {
        switch self {
        case .readOnly, .diskFull: true
        default: false
        }
    }

    private static func wrapping(_ error: ObjectGraphError) -> VaultError {
        switch error.code {
        case .mergeConflict: return .concurrentChange
        case .damagedRow, .undecodableValue: return .damagedRow(error.message, rowProblem: error.rowProblem)
        default: break
        }
        switch error.storeFailure {
        case .busy?: return .storeBusy
        case .full?: return .diskFull
        case .readOnly?, .permission?: return .readOnly
        case .ioError?: return .diskError(error.message)
        case .corrupt?: return .storeCorrupt(error.message)
        default: break
        }
        switch error.code {
        case .storeOpenFailed: return .storeUnopenable(error.message)
        case .migrationCannotBeInferred, .migrationFailed: return .cannotMigrate(error.message)
        case .incompatibleVersionHash: return .incompatibleVersion(error.message)
        default: return .unexpected(error.message)
        }
    }
}

extension VaultError.KeySlotProblem {
    var message: String {
        switch self {
        case .missingInBoth: "neither store of the vault holds a key slot (it was damaged, or not completely created)"
        case .missing(let damaged, let intact): "\(damaged) has no key slot: it is damaged or was replaced; "
            + "\(intact) is intact"
        case .different: "the two stores of the vault hold different key slots"
        case .unusable(let reason): "the vault's key slot cannot be used: \(reason)"
        }
    }
}

extension VaultError.SSHKeyProblem {
    var message: String {
        switch self {
        case .damaged(let reason): "the key file is damaged: \(reason)"
        case .publicKeyGiven: "this is a public key; the private key is needed"
        case .notOpenSSH(let line): "this is not an OpenSSH private key (no '\(line)' line)"
        case .unusable(let reason): "the key cannot be used: \(reason)"
        case .unusablePEM(let reason): "the PEM key cannot be used: \(reason)"
        case .tooManyRounds(let rounds, let maximum):
            "the key asks for \(rounds) rounds of bcrypt_pbkdf, more than the \(maximum) accepted"
        case .unsupportedEncryption(let cipher, let kdf):
            "the key is encrypted with '\(cipher)' ('\(kdf)'), which MyStash does not read"
        case .encryptedWithPassphrase: "the stored key is encrypted with a passphrase"
        case .passphraseIsNotEntryPassword: "it is encrypted, and the entry's password is not its passphrase"
        }
    }
}

extension VaultError.BreachListProblem {
    func message(path: String) -> String {
        switch self {
        case .missing: "there is no breach list at '\(path)'"
        case .noRangeFiles: "'\(path)' holds no range files (named by 5 hex digits, such as 21BD1.txt)"
        case .rangeFileTooLarge: "'\(path)' is larger than a range file can be"
        case .notOrdered: "'\(path)' is not ordered by hash"
        case .malformedLine(let line, let expected):
            "line \(line) of '\(path)' is not a breach list line: expected \(expected)"
        case .malformedAt(let byte, let expected):
            "'\(path)' has a line at byte \(byte) that is not a breach list line: expected \(expected)"
        case .unreadable(let reason): "cannot read '\(path)'" + (reason.map { ": \($0)" } ?? "")
        }
    }
}

extension VaultError.RemoteProblem {
    func message(location: String) -> String {
        switch self {
        case .missing: "the sync remote '\(location)' does not exist"
        case .notASyncLog(let missing):
            "'\(location)' is not a MyStash sync remote (it has no \(missing.joined(separator: " or ")))"
        case .changedSinceLastSync:
            "'\(location)' holds changes this machine has not synced yet; a move would leave them behind"
        case .begunElsewhere:
            "'\(location)' holds a sync log begun on another machine; this one joins it by a clone"
        case .anotherVault:
            "'\(location)' holds the sync log of another vault, or of this one begun under a key this machine's "
                + "data key does not open (the vault's key was renewed on another machine)"
        case .tampered(let file, let problem):
            "the sync remote was tampered with: \(file) \(problem); nothing was applied"
        case .keySlotDamaged: "the remote's key slot is damaged"
        case .noSyncKeyOpens: "none of the remote's sync keys opens with this master password's data key"
        case .unreachable(let operation, let detail): "cannot \(operation) '\(location)': \(detail)"
        case .fileUnreadable(let path): "the remote's file '\(path)' cannot be read"
        case .keptChanging: "the remote kept changing while this sync merged; nothing was sent"
        }
    }
}
