import Foundation
import ObjectGraph
import StashCrypto
import StashPlatform

/// What ``Vault/healthReport(policy:breaches:calibrated:now:)`` counts as a problem.
public struct HealthPolicy: Sendable {
    /// Passwords guessed in fewer than 10^10 tries (a score under 3) are weak: zxcvbn's
    /// line for surviving an offline attack on a slow hash.
    public var weakBelowScore = 3
    /// A password unchanged this long is old.
    public var maximumAge: TimeInterval = 365 * 86400
    /// An unlocked session with this long or more left is too long.
    public var longSession: TimeInterval = 3600

    public init() {}
}

/// The findings of a health check; no password appears in it.
public struct HealthReport: Codable, Equatable, Sendable {
    public struct EntryReference: Codable, Equatable, Sendable {
        public var id: Int64
        public var name: String
    }

    public struct WeakPassword: Codable, Equatable, Sendable {
        public var entry: EntryReference
        /// log2 of the estimated guesses.
        public var bits: Double
        public var guesses: Double
        /// zxcvbn's 0 (guessed at once) to 4.
        public var score: Int
        /// What made it guessable, the largest part first.
        public var patterns: [PasswordStrength.Pattern]
        /// Letters written as look-alike digits or symbols, which guessers try too.
        public var substitutions: Bool
    }

    public struct OldPassword: Codable, Equatable, Sendable {
        public var entry: EntryReference
        /// When the current password was set: its predecessor's replacement, else the entry's creation.
        public var since: Date
        public var days: Int
    }

    public struct BreachedPassword: Codable, Equatable, Sendable {
        public var entry: EntryReference
        /// How many times the breach list saw it.
        public var occurrences: Int
    }

    /// A vault setting weaker than it should be.
    public struct Setting: Codable, Equatable, Sendable {
        public enum Kind: String, Codable, Sendable {
            /// scrypt's N is below what this machine derives in about half a second.
            case scryptCost
            /// The unlocked session has `longSession` or more left.
            case sessionLifetime
        }
        public var kind: Kind
        /// log2 N for `scryptCost`, seconds left for `sessionLifetime` (-1: no timeout).
        public var current: Int
        /// The calibrated log2 N, or the longest session the policy accepts, in seconds.
        public var recommended: Int
    }

    /// Entries whose password was checked (empty passwords are not).
    public var entriesChecked: Int
    public var weak: [WeakPassword]
    /// Groups of two or more entries sharing one password.
    public var reused: [[EntryReference]]
    public var old: [OldPassword]
    /// nil when no breach list was given.
    public var breached: [BreachedPassword]?
    public var settings: [Setting]

    public var isHealthy: Bool {
        weak.isEmpty && reused.isEmpty && old.isEmpty && (breached ?? []).isEmpty && settings.isEmpty
    }
}

extension Vault {
    // MARK: - Health

    /// When each entry's current password was set: the latest replacement in its history.
    private func passwordReplacementDates() throws -> [ObjectID: Date] {
        try Self.wrapErrors {
            var request = FetchRequest<PasswordHistoryItem>()
            // Only the dates: the earlier passwords are never decrypted for this.
            request.fetchOnly(.replacedAt)
            var dates: [ObjectID: Date] = [:]
            for item in try context.fetch(request) {
                guard let entry = item.entry else { continue }
                dates[entry.objectID] = max(dates[entry.objectID] ?? .distantPast, item.replacedAt)
            }
            return dates
        }
    }

    private func settingsProblems(policy: HealthPolicy, calibrated: ScryptParameters) -> [HealthReport.Setting] {
        var problems: [HealthReport.Setting] = []
        let logN = keySlot.parameters.logN
        let wanted = max(calibrated.logN, KDFPolicy.minimumLogN)
        if logN < wanted {
            problems.append(HealthReport.Setting(kind: .scryptCost, current: Int(logN), recommended: Int(wanted)))
        }
        if let left = KeyringSession.remainingLifetime(vaultIdentifier: identifier), left >= policy.longSession {
            problems.append(HealthReport.Setting(kind: .sessionLifetime, current: left.isFinite ? Int(left) : -1,
                                                 recommended: Int(policy.longSession)))
        }
        return problems
    }
}

extension Vault.Items {
    /// Checks every entry's current password (strength, reuse, age, and presence in
    /// `breaches`) and the vault's settings: its scrypt cost against `calibrated` (what this
    /// machine derives in about half a second, ``KDFPolicy/calibrated()``) and the time
    /// left in its unlocked session.
    ///
    /// - throws: ``VaultError`` when an entry cannot be read, or the breach list is malformed.
    public func healthReport(policy: HealthPolicy = HealthPolicy(), breaches: BreachList? = nil,
                             calibrated: ScryptParameters, now: Date = Date()) throws -> HealthReport {
        try vault.verifyForRead(of: [vault.passwordsStore])
        let year = Calendar(identifier: .gregorian).component(.year, from: now)
        // Passwords are compared by a MAC under a key of this report's: none is kept as text.
        let key = try HMAC.Key(.sha256, bytes: try SecretBytes.random(count: 32).withUnsafeBytes { Array($0) })
        // Each password's weakness (nil when strong) once, whoever else uses it.
        var weaknesses: [[UInt8]: HealthReport.WeakPassword?] = [:]
        var occurrences: [[UInt8]: Int] = [:]
        /// What the report needs of an entry: its password is let go with its object.
        struct Checked {
            var reference: HealthReport.EntryReference
            var objectID: ObjectID
            var createdAt: Date
            var passwordMAC: [UInt8]
            var weak: HealthReport.WeakPassword?
            var occurrences: Int?
        }
        // A batch of entries at a time, each kept only as what the report needs, in name order.
        let entries: [Checked] = try Vault.wrapErrors {
            var request = FetchRequest<PasswordEntry>(sortDescriptors: [
                PasswordEntry.sort(.name, caseInsensitive: true)
            ])
            request.fetchOnly(.name, .password)
            return try vault.context.fetchMapped(request) { entry -> Checked? in
                let password = entry.password
                guard !password.isEmpty else { return nil }
                let reference = HealthReport.EntryReference(id: entry.id, name: entry.name)
                let digest = try key.authenticationCode(of: Array(password.utf8))
                var checked = Checked(reference: reference, objectID: entry.objectID, createdAt: entry.createdAt,
                                      passwordMAC: digest)
                let weakness = weaknesses[digest] ?? {
                    let strength = PasswordStrength.estimate(password, year: year)
                    guard strength.score < policy.weakBelowScore else { return nil }
                    return HealthReport.WeakPassword(
                        entry: reference, bits: (strength.bits * 10).rounded() / 10,
                        guesses: strength.guesses.rounded(), score: strength.score, patterns: strength.patterns,
                        substitutions: strength.parts.contains(where: \.substituted))
                }()
                weaknesses[digest] = weakness
                checked.weak = weakness.map { weak in
                    var weak = weak
                    weak.entry = reference
                    return weak
                }
                if let breaches {
                    let count = try occurrences[digest] ?? breaches.occurrences(of: password)
                    occurrences[digest] = count
                    checked.occurrences = count
                }
                return checked
            }.compactMap { $0 }
        }
        weaknesses = [:]
        let lastReplaced = try vault.passwordReplacementDates()
        var sharing: [[UInt8]: [HealthReport.EntryReference]] = [:]
        var report = HealthReport(entriesChecked: entries.count, weak: [], reused: [], old: [],
                                  breached: breaches == nil ? nil : [], settings: [])
        for entry in entries {
            if let weak = entry.weak { report.weak.append(weak) }
            sharing[entry.passwordMAC, default: []].append(entry.reference)
            let since = lastReplaced[entry.objectID] ?? entry.createdAt
            if now.timeIntervalSince(since) >= policy.maximumAge {
                report.old.append(HealthReport.OldPassword(
                    entry: entry.reference, since: since, days: Int(now.timeIntervalSince(since) / 86400)))
            }
            if let count = entry.occurrences, count > 0 {
                report.breached?.append(HealthReport.BreachedPassword(entry: entry.reference, occurrences: count))
            }
        }
        report.reused = sharing.values.filter { $0.count > 1 }
            .sorted { ($0.count, $1[0].name.lowercased()) > ($1.count, $0[0].name.lowercased()) }
        report.settings = vault.settingsProblems(policy: policy, calibrated: calibrated)
        return report
    }
}
