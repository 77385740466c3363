import MyStashKit
import TestSupport
import XCTest

/// The estimate against zxcvbn itself: the guesses and scores below are what Dropbox's
/// zxcvbn (Python port 4.4.28, reference year 2017) prints for each password.
final class PasswordStrengthTests: XCTestCase {
    static let zxcvbn: [(password: String, guesses: Double, score: Int)] = [
        ("password", 3, 0), ("P@ssw0rd", 17, 0), ("qwerty", 5, 0), ("zxcvbn", 58, 0), ("Tr0ub4dor&3", 1e11 + 1, 4),
        ("1q2w3e4r", 193, 0), ("abcdef", 25, 0), ("aaaaaa", 73, 0), ("abcabcabc", 40, 0), ("13.05.1987", 43801, 1),
        ("19870513", 10951, 1), ("1987", 31, 0), ("kP9#vL2!xQ7z", 1e12 + 1, 4), ("dragon2019", 15000, 1),
        ("monkey123", 7752, 1), ("iloveyou!", 11100, 1), ("qazwsxedc", 239, 0), ("Xk7$mQ2pLr9@wZ4n", 1e16 + 1, 4),
        ("asdfghjkl", 233, 0), ("7ujm8ik,", 3_369_232, 2), ("xsw2#EDC", 31_210_000, 2), ("mnbvcxz1", 9672, 1),
        ("wsxcde34rfv", 36_046_000, 2), ("drowssap", 5, 0), ("nohtyp!", 69576, 1), ("Summer2024!", 27_610_000, 2),
        ("Ilove_London88", 80_500_000_000, 4), ("hello world", 100_290_334, 3), ("sunshine", 47, 0),
        ("zyxwvu", 49, 0), ("97531", 41, 0), ("ki8ju7hy6gt5", 1e12 + 1, 4), ("tr4ctorTRACTOR", 26_480_088, 2),
        ("glpat-42", 100_000_001, 2), ("Xk7$mQ2pLr", 10_000_000_001, 3),
    ]
    /// Phrases of words rarer than the 10,000 most frequent, which our shorter lists lack.
    static let zxcvbnRareWords: [(password: String, guesses: Double, score: Int)] = [
        ("correcthorsebatterystaple", 273_500_327_700_640, 4), ("correct horse", 152_743_240, 3),
        ("X5zPqa-lemon-tree", 3_971_327_680_000_000, 4),
    ]

    func testGuessesAreWithinAFactorOfTenOfZxcvbns() {
        for (password, guesses, score) in Self.zxcvbn {
            let estimate = PasswordStrength.estimate(password, year: 2017)
            XCTAssertEqual(log10(estimate.guesses), log10(guesses), accuracy: 1, password)
            XCTAssertLessThanOrEqual(abs(estimate.score - score), 1, password)
        }
    }

    func testScoresAreZxcvbnsAtTheirBoundaries() {
        // Random characters count 10 guesses each, plus one: 8 of them are 10^8 + 1, still a 2.
        XCTAssertEqual(PasswordStrength.estimate("Xk7$mQ2p").score, 2)
        XCTAssertEqual(PasswordStrength.estimate("Xk7$mQ2pL").score, 3)
        XCTAssertEqual(PasswordStrength.estimate("Xk7$mQ2pLr").score, 3)
        XCTAssertEqual(PasswordStrength.estimate("Xk7$mQ2pLr9").score, 4)
    }

    func testPhrasesOfRarerWordsAreNeverRatedWeakerThanZxcvbnRatesThem() {
        for (password, guesses, score) in Self.zxcvbnRareWords {
            let estimate = PasswordStrength.estimate(password, year: 2017)
            XCTAssertGreaterThanOrEqual(estimate.guesses, guesses, password)
            XCTAssertLessThanOrEqual(abs(estimate.score - score), 1, password)
        }
    }

    func testEachPatternIsNamed() {
        let cases: [(String, PasswordStrength.Pattern)] = [
            ("P@ssw0rd", .commonPassword), ("Un1versity", .dictionaryWord), ("xcvbnm,./", .keyboardWalk),
            ("zzzzzzzzz", .repeated), ("lmnopqrs", .sequence), ("31/12/1999", .date), ("wY9$kQ", .bruteForce),
        ]
        for (password, pattern) in cases {
            XCTAssertEqual(PasswordStrength.estimate(password, year: 2026).parts.first?.pattern, pattern, password)
        }
        XCTAssertTrue(PasswordStrength.estimate("P@ssw0rd").parts[0].substituted)
        XCTAssertTrue(PasswordStrength.estimate("drowssap").parts[0].reversed)
        XCTAssertEqual(PasswordStrength.estimate("password").parts[0].rank, 2)
    }

    func testDatesAndYearsAreFoundAmongOtherCharacters() {
        for password in ["kQ13.05.1987!x", "a19870513b", "#31/12/1999#", "%2024"] {
            XCTAssertTrue(PasswordStrength.estimate(password, year: 2026).parts.contains { $0.pattern == .date },
                          password)
        }
        for password in ["1a9b8c7d", "13.05.x987", "1٩87"] {
            XCTAssertFalse(PasswordStrength.estimate(password, year: 2026).parts.contains { $0.pattern == .date },
                           password)
        }
    }

    func testDatesAreCheaperTheCloserTheyAreToThePresent() {
        XCTAssertLessThan(PasswordStrength.estimate("2025", year: 2026).guesses,
                          PasswordStrength.estimate("1931", year: 2026).guesses)
    }

    func testLongAndOddInputIsEstimatedWithoutFailing() {
        let long = String(repeating: "correct horse battery staple ", count: 40)
        XCTAssertGreaterThan(PasswordStrength.estimate(long).bits, 128)
        XCTAssertEqual(PasswordStrength.estimate("").guesses, 1)
        for odd in ["\u{0}\u{0}\u{0}", "🔑🔑🔑🔑", "e\u{301}e\u{301}e\u{301}", "\u{202E}drowssap", "1/1/1"] {
            XCTAssertGreaterThanOrEqual(PasswordStrength.estimate(odd).guesses, 1, odd)
        }
    }

    /// Random text from look-alikes, keyboard rows, digits, separators and other scripts:
    /// every estimate is a finite number of guesses of at least 1, and never above brute force.
    func testRandomTextIsEstimatedWithinBounds() {
        let alphabet = Array("aeos4@3$0|1!7+qwertyasdf-./ 1987 12 31 zZ\u{0}\u{301}é漢🔑\u{202E}")
        var random = SplitMix64(seed: 31)
        for round in 0..<2000 {
            let length = Int(random.next() % 90)
            let text = String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let estimate = PasswordStrength.estimate(text)
            XCTAssertTrue(estimate.guesses.isFinite && estimate.guesses >= 1, "round \(round)")
            let bruteForce = max(pow(10, Double(text.count)), 51) + 1
            XCTAssertLessThanOrEqual(estimate.guesses, bruteForce * (1 + 1e-9), "round \(round)")  // log10 sums round
        }
    }
}
