import Foundation

/// Finds the parts of a password that ``PasswordStrength`` knows how to guess, each with its guesses.
struct PatternMatcher {
    typealias Part = PasswordStrength.Part
    let characters: [Character]
    let lowered: [Character]
    let year: Int

    init(_ characters: [Character], year: Int) {
        self.characters = characters
        lowered = characters.map { Character($0.lowercased()) }
        self.year = year
    }

    func matches() -> [Part.Located] {
        dictionaryMatches() + keyboardMatches() + sequenceMatches() + repeatMatches() + dateMatches()
    }

    private func located(_ start: Int, _ end: Int, _ pattern: PasswordStrength.Pattern, _ guesses: Double,
                         substituted: Bool = false, reversed: Bool = false, rank: Int? = nil) -> Part.Located {
        Part.Located(start: start, end: end, part: Part(
            pattern: pattern, length: end - start, guesses: guesses,
            substituted: substituted, reversed: reversed, rank: rank))
    }

    // MARK: - Dictionaries

    /// zxcvbn's common passwords and English words (Config/Wordlists/ATTRIBUTION.md), each
    /// string with its rank in the list that ranks it higher.
    static let ranked: [String: (pattern: PasswordStrength.Pattern, rank: Int)] = {
        var ranked: [String: (pattern: PasswordStrength.Pattern, rank: Int)] = [:]
        for (pattern, file) in [(PasswordStrength.Pattern.commonPassword, "common-passwords.txt"),
                                (.dictionaryWord, "english-words.txt")] {
            let lines = String(decoding: Resources.file("Wordlists/\(file)") ?? Data(), as: UTF8.self)
                .split(whereSeparator: \.isNewline)
            for (index, line) in lines.enumerated() where (ranked[String(line)]?.rank ?? .max) > index + 1 {
                ranked[String(line)] = (pattern, index + 1)
            }
        }
        return ranked
    }()
    static let longestWord = ranked.keys.map(\.count).max() ?? 0

    /// Letters and the characters written for them.
    static let lookAlikes: [Character: [Character]] = [
        "4": ["a"], "@": ["a"], "8": ["b"], "(": ["c"], "{": ["c"], "[": ["c"], "<": ["c"], "3": ["e"],
        "6": ["g"], "9": ["g"], "1": ["i", "l"], "!": ["i"], "|": ["i", "l"], "7": ["l", "t"], "0": ["o"],
        "$": ["s"], "5": ["s"], "+": ["t"], "%": ["x"], "2": ["z"],
    ]

    /// The listed strings and the same reversed, sorted, to tell whether a substring can
    /// still grow into one (so the search stops as soon as none begins so).
    private static let sortedWords = ranked.keys.sorted()
    private static let sortedReversedWords = ranked.keys.map { String($0.reversed()) }.sorted()

    /// Whether some string of `sorted` begins with `prefix`.
    private static func begins(_ sorted: [String], _ prefix: String) -> Bool {
        var (low, high) = (0, sorted.count)
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < prefix { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low].hasPrefix(prefix)
    }

    /// Every substring found in a list as it is, reversed, or with its look-alikes read as
    /// letters (every occurrence of a character read as the same letter, at most 8 readings).
    /// Substrings grow from each start while one of those can still become a listed string.
    private func dictionaryMatches() -> [Part.Located] {
        var found: [Part.Located] = []
        for start in lowered.indices {
            var token = ""
            var tokenAlive = true
            var readings: [(text: String, letters: [Character: Character])] = []
            for end in (start + 1)...min(lowered.count, start + Self.longestWord) {
                let character = lowered[end - 1]
                let before = token
                token.append(character)
                readings = readings.flatMap { reading -> [(text: String, letters: [Character: Character])] in
                    if let letter = reading.letters[character] {
                        return [(reading.text + String(letter), reading.letters)]
                    }
                    guard let letters = Self.lookAlikes[character] else {
                        return [(reading.text + String(character), reading.letters)]
                    }
                    return letters.map { (reading.text + String($0), reading.letters.merging([character: $0]) { $1 }) }
                }
                if readings.isEmpty, tokenAlive, let letters = Self.lookAlikes[character] {
                    readings = letters.map { (before + String($0), [character: $0]) }
                }
                readings = Array(readings.filter { Self.begins(Self.sortedWords, $0.text) }.prefix(8))
                tokenAlive = Self.begins(Self.sortedWords, token) || Self.begins(Self.sortedReversedWords, token)
                guard tokenAlive || !readings.isEmpty else { break }
                func add(_ word: String, reversed: Bool = false, substitutions: [Character: Character] = [:]) {
                    guard let (pattern, rank) = Self.ranked[word] else { return }
                    var guesses = Double(rank) * capitalisations(start, end) * (reversed ? 2 : 1)
                    for (symbol, letter) in substitutions {
                        var (changed, unchanged) = (0, 0)
                        for character in lowered[start..<end] {
                            if character == symbol { changed += 1 } else if character == letter { unchanged += 1 }
                        }
                        guesses *= variations(changed, unchanged)
                    }
                    found.append(located(start, end, pattern, guesses, substituted: !substitutions.isEmpty,
                                         reversed: reversed, rank: rank))
                }
                if tokenAlive {
                    add(token)
                    let backwards = String(token.reversed())
                    if end - start >= 3, backwards != token { add(backwards, reversed: true) }
                }
                for reading in readings { add(reading.text, substitutions: reading.letters) }
            }
        }
        return found
    }

    /// The ways of choosing which of `changed + unchanged` letters were changed, at least one
    /// (zxcvbn's count of capitalisations and substitutions); 2 when one side is empty.
    private func variations(_ changed: Int, _ unchanged: Int) -> Double {
        guard changed > 0, unchanged > 0 else { return 2 }
        return (1...min(changed, unchanged)).reduce(0.0) { $0 + binomial(changed + unchanged, $1) }
    }

    private func capitalisations(_ start: Int, _ end: Int) -> Double {
        var (upper, lower) = (0, 0)
        for character in characters[start..<end] {
            if character.isUppercase { upper += 1 } else if character.isLowercase { lower += 1 }
        }
        if upper == 0 { return 1 }
        if lower == 0 || (upper == 1 && (characters[start].isUppercase || characters[end - 1].isUppercase)) {
            return 2
        }
        return variations(upper, lower)
    }

    // MARK: - Keyboard walks

    /// A QWERTY keyboard's keys, unshifted then shifted, each row half a key right of the one above.
    private static let rows: [(plain: String, shifted: String, offset: Int)] = [
        ("`1234567890-=", "~!@#$%^&*()_+", 0), ("qwertyuiop[]\\", "QWERTYUIOP{}|", 1),
        ("asdfghjkl;'", "ASDFGHJKL:\"", 1), ("zxcvbnm,./", "ZXCVBNM<>?", 1),
    ]
    /// Where each character is typed: column, row, and whether with shift.
    private static let keys: [Character: (x: Int, y: Int, shifted: Bool)] = {
        var keys: [Character: (x: Int, y: Int, shifted: Bool)] = [:]
        for (y, row) in rows.enumerated() {
            for (x, (plain, shifted)) in zip(row.plain, row.shifted).enumerated() {
                keys[plain] = (x + row.offset, y, false)
                keys[shifted] = (x + row.offset, y, true)
            }
        }
        return keys
    }()
    /// The six neighbours of a key on a keyboard whose rows slant.
    private static let directions = [(-1, 0), (1, 0), (0, -1), (1, -1), (-1, 1), (0, 1)]
    private static let keyCount = Double(keys.count / 2)
    private static let averageDegree: Double = {
        let positions = Set(keys.values.map { "\($0.x),\($0.y)" })
        let degrees = keys.values.filter { !$0.shifted }.map { key in
            directions.filter { positions.contains("\(key.x + $0.0),\(key.y + $0.1)") }.count
        }
        return Double(degrees.reduce(0, +)) / Double(degrees.count)
    }()

    private static func direction(from a: Character, to b: Character) -> Int? {
        guard let from = keys[a], let to = keys[b] else { return nil }
        return directions.firstIndex { from.x + $0.0 == to.x && from.y + $0.1 == to.y }
    }

    private func keyboardMatches() -> [Part.Located] {
        var found: [Part.Located] = []
        var start = 0
        while start < characters.count - 2 {
            var end = start + 1
            var turns = 0
            var last: Int?
            while end < characters.count,
                  let direction = Self.direction(from: characters[end - 1], to: characters[end]) {
                if direction != last { turns += 1 }
                last = direction
                end += 1
            }
            if end - start >= 3 {
                let length = end - start
                var guesses = 0.0
                for typed in 2...length {
                    for turn in 1...min(turns, typed - 1) {
                        guesses += binomial(typed - 1, turn - 1) * Self.keyCount * pow(Self.averageDegree, Double(turn))
                    }
                }
                let shifted = characters[start..<end].filter { Self.keys[$0]?.shifted == true }.count
                if shifted > 0 { guesses *= variations(shifted, length - shifted) }
                found.append(located(start, end, .keyboardWalk, guesses))
                start = end - 1
            } else {
                start += 1
            }
        }
        return found
    }

    // MARK: - Sequences and repeats

    private func sequenceMatches() -> [Part.Located] {
        let values = characters.map { $0.unicodeScalars.count == 1 ? Int($0.unicodeScalars.first!.value) : -1000 }
        func kind(_ value: Int) -> Int? {
            switch value {
            case 48...57: return 0
            case 97...122: return 1
            case 65...90: return 2
            default: return nil
            }
        }
        var found: [Part.Located] = []
        var start = 0
        while start < values.count - 2 {
            let delta = values[start + 1] - values[start]
            guard let kind = kind(values[start]), (1...5).contains(abs(delta)) else {
                start += 1
                continue
            }
            var end = start + 1
            while end < values.count, values[end] - values[end - 1] == delta, self.kindMatches(values[end], kind) {
                end += 1
            }
            if end - start >= 3 {
                let first = characters[start]
                let base: Double = "aAzZ019".contains(first) ? 4 : (kind == 0 ? 10 : 26)
                found.append(located(start, end, .sequence, base * Double(end - start) * (delta < 0 ? 2 : 1)))
                start = end - 1
            } else {
                start += 1
            }
        }
        return found
    }

    private func kindMatches(_ value: Int, _ kind: Int) -> Bool {
        [48...57, 97...122, 65...90][kind].contains(value)
    }

    /// The longest repeat of a unit starting at each position (`aaa`, `abcabc`), priced by the
    /// unit's own estimate times the repeats.
    private func repeatMatches() -> [Part.Located] {
        var found: [Part.Located] = []
        var start = 0
        while start < characters.count - 1 {
            var bestEnd = start
            var bestUnit = 0
            for unit in 1...((characters.count - start) / 2) {
                var end = start + unit
                while end + unit <= characters.count, characters[end..<end + unit] == characters[start..<start + unit] {
                    end += unit
                }
                if end - start >= 2 * unit, end > bestEnd { (bestEnd, bestUnit) = (end, unit) }
            }
            if bestUnit > 0, bestEnd - start >= 3 || bestUnit > 1 {
                let unit = String(characters[start..<start + bestUnit])
                let repeats = Double((bestEnd - start) / bestUnit)
                found.append(located(start, bestEnd, .repeated,
                                     PasswordStrength.estimate(unit, year: year).guesses * repeats))
                start = bestEnd
            } else {
                start += 1
            }
        }
        return found
    }

    // MARK: - Dates

    /// Years a person types: 1900 to 2049.
    private func plausibleYear(_ text: Substring) -> Int? {
        guard let value = Int(text) else { return nil }
        switch text.count {
        case 2: return value > 50 ? 1900 + value : 2000 + value
        case 4: return (1900...2049).contains(value) ? value : nil
        default: return nil
        }
    }

    private func dateGuesses(_ year: Int) -> Double { Double(max(abs(year - self.year), 20)) * 365 }

    /// Years (`1987`), and dates of day, month and year in any order, with or without one
    /// kind of separator (`13.5.87`, `19870513`).
    private func dateMatches() -> [Part.Located] {
        var found: [Part.Located] = []
        // Only ASCII digits and the separators can be in a year or a date: a token ends before
        // anything else (most tokens of a random password, each of which was built and split).
        let inDate = characters.map { $0.isASCII && ($0.isNumber || " /\\_.-".contains($0)) }
        for start in characters.indices where start + 4 <= characters.count {
            var limit = start
            while limit < min(characters.count, start + 10), inDate[limit] { limit += 1 }
            guard limit >= start + 4 else { continue }
            for end in (start + 4)...limit {
                let token = String(characters[start..<end])
                if token.count == 4, let year = plausibleYear(Substring(token)) {
                    found.append(located(start, end, .date, Double(max(abs(year - self.year), 20))))
                }
                if let year = dateYear(token) {
                    let separated = token.contains { !$0.isNumber }
                    found.append(located(start, end, .date, dateGuesses(year) * (separated ? 4 : 1)))
                }
            }
        }
        return found
    }

    /// The year of `token` read as a date, or nil when it is none.
    private func dateYear(_ token: String) -> Int? {
        let separators = Set(token.filter { !$0.isNumber })
        let fields: [Substring]
        if separators.isEmpty {
            guard token.allSatisfy(\.isASCII), (4...8).contains(token.count) else { return nil }
            let digits = Substring(token)
            // Every cut into three fields of 1, 2 or 4 digits.
            for first in 1...4 {
                for second in 1...2 where first + second < digits.count {
                    let a = digits.prefix(first)
                    let b = digits.dropFirst(first).prefix(second)
                    let c = digits.dropFirst(first + second)
                    if let year = validDate([a, b, c]) { return year }
                }
            }
            return nil
        }
        guard separators.count == 1, let separator = separators.first, " /\\_.-".contains(separator) else { return nil }
        fields = token.split(separator: separator, omittingEmptySubsequences: false)
        guard fields.count == 3, fields.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) }) else { return nil }
        return validDate(fields)
    }

    /// The year when the fields are a year first or last and a day and month around it.
    private func validDate(_ fields: [Substring]) -> Int? {
        for (yearIndex, others) in [(2, [0, 1]), (0, [1, 2])] {
            guard let year = plausibleYear(fields[yearIndex]),
                  let a = Int(fields[others[0]]), let b = Int(fields[others[1]]),
                  fields[others[0]].count <= 2, fields[others[1]].count <= 2 else { continue }
            if ((1...31).contains(a) && (1...12).contains(b)) || ((1...12).contains(a) && (1...31).contains(b)) {
                return year
            }
        }
        return nil
    }
}

/// n choose k, as a Double (the counts above reach beyond Int).
func binomial(_ n: Int, _ k: Int) -> Double {
    guard k >= 0, k <= n else { return 0 }
    var result = 1.0
    for i in 0..<min(k, n - k) { result = result * Double(n - i) / Double(i + 1) }
    return result
}
