import ArgumentParser
import Foundation
import MyStashKit
import StashCrypto

struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Report weak, reused, old and breached passwords, and vault settings weaker than they should be.",
        discussion: """
        Strength is a zxcvbn-style estimate of the guesses a password takes (common passwords, \
        English words, look-alike letters, keyboard walks, sequences, repeats, dates); under \
        10^10 guesses is weak. Reused passwords are listed by the entries sharing them, never \
        shown. A password is old when unchanged for --max-age days. With --breaches, each \
        password's SHA-1 is looked up in a downloaded copy of Pwned Passwords, offline. The \
        settings checked are scrypt's cost against what this machine calibrates to and the time \
        left in the unlocked session. Exit status 0 when nothing is found, 2 when something is.
        """)

    /// The exit status when the report has findings (scripts tell it from errors, which are 1 or 64 and up).
    static let findingsStatus: Int32 = 2

    @OptionGroup var options: VaultOptions
    @Flag(help: "Print the report as JSON.") var json = false
    @Option(help: ArgumentHelp(
        "Look passwords up in this downloaded Pwned Passwords list: a directory of range files or one SHA-1 file "
            + "ordered by hash.", valueName: "path"), completion: .file())
    var breaches: String?
    @Option(help: ArgumentHelp("Count a password unchanged for this many days as old.", valueName: "days"))
    var maxAge = 365

    func validate() throws {
        guard (1...36500).contains(maxAge) else {
            throw ValidationError("--max-age must be a number of days from 1 to 36500, not \(maxAge)")
        }
    }

    func run() throws {
        var healthy = true
        try reportingErrors {
            // The list is checked before the vault is unlocked, so a wrong path costs no password.
            let list = try breaches.map { try BreachList(at: URL(fileURLWithPath: $0)) }
            var policy = HealthPolicy()
            policy.maximumAge = TimeInterval(maxAge) * 86400
            let calibrated = try KDFPolicy.calibrated()
            let report = try options.readUnlockedVault {
                try $0.items.healthReport(policy: policy, breaches: list, calibrated: calibrated)
            }
            healthy = report.isHealthy
            if !healthy { Output.brokenPipeStatus = Self.findingsStatus }
            if json { return try Output.json(report) }
            printReport(report)
        }
        if !healthy { throw ExitCode(Self.findingsStatus) }
    }

    /// A line of the report as people read it, in the CLI and in `browse`.
    struct Line: Equatable {
        enum Kind { case title, header, row }
        var kind: Kind
        var text: String
    }

    private func printReport(_ report: HealthReport) {
        var output = ""
        for line in Self.lines(report, maximumAgeDays: maxAge) {
            let bold = line.kind == .header && Terminal.stdoutIsTerminal
            output += bold ? "\u{1B}[1m\(line.text)\u{1B}[0m\n" : line.text + "\n"
        }
        Output.write(output)
    }

    /// The report's sections (those with findings) and a summary line; names are neutralised.
    static func lines(_ report: HealthReport, maximumAgeDays: Int) -> [Line] {
        var lines: [Line] = []
        func section(_ title: String, _ header: [String], _ rows: [[String]]) {
            lines.append(Line(kind: .title, text: title))
            let table = Output.aligned(header, rows)
            lines.append(Line(kind: .header, text: table[0]))
            lines += table.dropFirst().map { Line(kind: .row, text: $0) }
        }
        if !report.weak.isEmpty {
            section("Weak passwords (\(report.weak.count)):", ["ID", "NAME", "BITS", "GUESSABLE AS"], report.weak.map {
                [String($0.entry.id), $0.entry.name, String(format: "%.1f", $0.bits), describe($0)]
            })
        }
        if !report.reused.isEmpty {
            let groups = report.reused.count
            lines.append(Line(kind: .title, text: "Reused passwords (\(groups) group\(groups == 1 ? "" : "s")):"))
            lines += report.reused.map { group in
                let names = group.map { "\($0.name) (#\($0.id))" }.joined(separator: ", ")
                return Line(kind: .row, text: "  " + Output.safe(names))
            }
        }
        if !report.old.isEmpty {
            section("Old passwords (\(report.old.count), unchanged for \(maximumAgeDays) days or more):",
                    ["ID", "NAME", "SET", "DAYS"], report.old.map {
                [String($0.entry.id), $0.entry.name, Output.date($0.since), String($0.days)]
            })
        }
        if let breached = report.breached, !breached.isEmpty {
            section("Breached passwords (\(breached.count)):", ["ID", "NAME", "SEEN"], breached.map {
                [String($0.entry.id), $0.entry.name, "\($0.occurrences) times"]
            })
        }
        if !report.settings.isEmpty {
            lines.append(Line(kind: .title, text: "Vault settings (\(report.settings.count)):"))
            lines += report.settings.map { Line(kind: .row, text: "  " + describe($0)) }
        }
        var summary = "Checked \(report.entriesChecked) passwords: \(report.weak.count) weak, "
            + "\(report.reused.reduce(0) { $0 + $1.count }) reused, \(report.old.count) old"
        if let breached = report.breached { summary += ", \(breached.count) breached" }
        let settings = report.settings.count
        summary += settings == 0 ? "; settings sound." : "; \(settings) setting\(settings == 1 ? "" : "s") to change."
        lines.append(Line(kind: .title, text: summary))
        return lines
    }

    static func describe(_ weak: HealthReport.WeakPassword) -> String {
        let words: [PasswordStrength.Pattern: String] = [
            .commonPassword: "a common password", .dictionaryWord: "dictionary words",
            .keyboardWalk: "a keyboard pattern", .sequence: "a sequence", .repeated: "repeated characters",
            .date: "a date or year", .bruteForce: "too short",
        ]
        let parts = (weak.patterns.isEmpty ? [.bruteForce] : weak.patterns).compactMap { words[$0] }
        return parts.joined(separator: ", ") + (weak.substitutions ? " (look-alike letters)" : "")
    }

    static func describe(_ setting: HealthReport.Setting) -> String {
        switch setting.kind {
        case .scryptCost:
            return "scrypt's cost is N=2^\(setting.current), below the 2^\(setting.recommended) this machine "
                + "calibrates to: run 'mystash passwd' to raise it"
        case .sessionLifetime:
            let left = setting.current < 0 ? "no time limit" : "\(Self.duration(setting.current)) left"
            return "the unlocked session has \(left) (at most \(Self.duration(setting.recommended)) is advised): "
                + "run 'mystash lock', then unlock with a shorter --timeout"
        }
    }

    private static func duration(_ seconds: Int) -> String {
        seconds >= 3600 ? "\(seconds / 3600)h" + (seconds % 3600 >= 60 ? "\(seconds % 3600 / 60)m" : "")
            : "\(seconds / 60)m"
    }
}
