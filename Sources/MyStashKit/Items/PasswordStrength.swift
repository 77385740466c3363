import Foundation

/// How many guesses a password would take an attacker who tries common passwords, words,
/// keyboard walks, sequences, repeats and dates before anything else — the method of
/// Dropbox's zxcvbn (Wheeler, USENIX Security 2016), with its frequency lists:
///
/// 1. Every substring that is a known pattern is a candidate part, guessed in a number of
///    tries: a common password or an English word by its frequency rank (times the ways of
///    capitalising it, of writing letters as look-alikes such as `4` for `a` or `$` for `s`,
///    and 2 when reversed); a walk on a QWERTY keyboard by its length, turns and shifted
///    keys; a sequence (`abcd`, `9753`) by its start and length; a repeat (`abab`) by its
///    unit's guesses times the repeats; a date or year by its distance from the present.
/// 2. Anything else is brute force at 10 guesses a character.
/// 3. The password's guesses are the fewest over every way of cutting it into such parts:
///    the product of the parts' guesses, times the number of orders of the parts (l!),
///    plus 10,000^(l-1) for each part beyond the first.
///
/// The score is zxcvbn's: 0 under 10^3 guesses, 1 under 10^6, 2 under 10^8, 3 under 10^10, else 4.
public struct PasswordStrength: Equatable, Sendable {
    /// What a part of a password is.
    public enum Pattern: String, Codable, Sendable, CaseIterable {
        case commonPassword, dictionaryWord, keyboardWalk, sequence, repeated, date, bruteForce
    }

    /// One part of the cheapest way to guess the password (which characters is not kept: they are secret).
    public struct Part: Equatable, Sendable {
        public var pattern: Pattern
        public var length: Int
        public var guesses: Double
        /// Letters written as look-alike digits or symbols.
        public var substituted: Bool
        public var reversed: Bool
        /// For a common password or word: its rank in the list, 1 the most frequent.
        public var rank: Int?
    }

    public var guesses: Double
    public var parts: [Part]

    /// log2 of the guesses: the password's entropy in bits, as an attacker sees it.
    public var bits: Double { log2(max(guesses, 1)) }

    public var score: Int {
        // zxcvbn's margin: exactly 10^8 brute-force guesses (8 random digits) is still a 2.
        switch guesses {
        case ..<(1e3 + 5): return 0
        case ..<(1e6 + 5): return 1
        case ..<(1e8 + 5): return 2
        case ..<(1e10 + 5): return 3
        default: return 4
        }
    }

    /// The patterns that made the password guessable, most important first, without brute force.
    public var patterns: [Pattern] {
        var seen: [Pattern] = []
        for part in parts.sorted(by: { $0.length > $1.length }) where part.pattern != .bruteForce
        && !seen.contains(part.pattern) { seen.append(part.pattern) }
        return seen
    }

    /// Only this many characters are searched for patterns; the rest count as brute force.
    static let analysedLength = 64
    private static let extraPartCost = 10_000.0

    /// Estimates `password`; `year` is the present a date is measured from.
    public static func estimate(_ password: String, year: Int = Calendar(identifier: .gregorian).component(
        .year, from: Date())) -> PasswordStrength {
        let characters = Array(password)
        guard !characters.isEmpty else { return PasswordStrength(guesses: 1, parts: []) }
        let analysed = Array(characters.prefix(analysedLength))
        var result = cheapest(analysed, matches: PatternMatcher(analysed, year: year).matches())
        let rest = characters.count - analysed.count
        if rest > 0 {
            result.guesses *= pow(10, Double(rest))
            result.parts.append(Part(pattern: .bruteForce, length: rest, guesses: pow(10, Double(rest)),
                                     substituted: false, reversed: false))
        }
        return result
    }

    /// The decomposition with the fewest guesses (zxcvbn's `most_guessable_match_sequence`),
    /// in log10 to stay finite.
    private static func cheapest(_ characters: [Character], matches: [Part.Located]) -> PasswordStrength {
        let count = characters.count
        let maximumParts = min(count, 16)
        // best[end][parts]: the smallest log10 product of guesses covering [0, end) in that many parts.
        var best = [[Double]](repeating: [Double](repeating: .infinity, count: maximumParts + 1), count: count + 1)
        var back = [[(start: Int, part: Part)?]](repeating: [(start: Int, part: Part)?](
            repeating: nil, count: maximumParts + 1), count: count + 1)
        best[0][0] = 0
        var ending = [[Part.Located]](repeating: [], count: count + 1)
        for match in matches { ending[match.end].append(match) }
        for end in 1...count {
            var candidates = ending[end]
            for start in 0..<end {
                let length = end - start
                let guesses = max(pow(10, Double(length)), Part.floored(0, length: length) + 1)
                candidates.append(Part.Located(start: start, end: end, part: Part(
                    pattern: .bruteForce, length: length, guesses: guesses, substituted: false, reversed: false)))
            }
            for candidate in candidates {
                // A part that is the whole password is not floored: "password" is guess 2, not 50.
                let whole = candidate.start == 0 && end == count
                let cost = log10(whole ? candidate.part.guesses : Part.floored(candidate.part.guesses,
                                                                                length: candidate.part.length))
                for parts in 0..<maximumParts where best[candidate.start][parts].isFinite {
                    let total = best[candidate.start][parts] + cost
                    if total < best[end][parts + 1] {
                        best[end][parts + 1] = total
                        back[end][parts + 1] = (candidate.start, candidate.part)
                    }
                }
            }
        }
        var bestGuesses = Double.infinity
        var bestParts = 1
        for parts in 1...maximumParts where best[count][parts].isFinite {
            let factorial = (1...parts).reduce(0.0) { $0 + log10(Double($1)) }
            let guesses = pow(10, best[count][parts] + factorial) + pow(extraPartCost, Double(parts - 1))
            if guesses < bestGuesses { (bestGuesses, bestParts) = (guesses, parts) }
        }
        var parts: [Part] = []
        var (end, remaining) = (count, bestParts)
        while end > 0, remaining > 0, let step = back[end][remaining] {
            parts.insert(step.part, at: 0)
            (end, remaining) = (step.start, remaining - 1)
        }
        return PasswordStrength(guesses: bestGuesses, parts: parts)
    }
}

extension PasswordStrength.Part {
    /// A part with where it lies: characters [start, end).
    struct Located {
        var start: Int
        var end: Int
        var part: PasswordStrength.Part
    }

    /// A part's guesses, never below zxcvbn's floor for its length, so that many small parts
    /// never look cheaper than one.
    static func floored(_ guesses: Double, length: Int) -> Double {
        max(guesses, length == 1 ? 10 : 50)
    }
}
