import Foundation
import StashCrypto

/// Passwords and passphrases from OpenSSL's CSPRNG, with their entropy.
public enum PasswordGenerator {
    public struct Generated {
        public var value: String
        public var entropyBits: Double
    }

    static let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    static let digits = Array("0123456789")
    static let symbols = Array("!#$%&()*+,-./:;<=>?@[]^_{|}~")

    /// A random password of `length` characters: letters and digits, plus symbols unless
    /// `symbols` is false. Each character is drawn uniformly from the whole alphabet.
    public static func password(length: Int, symbols useSymbols: Bool = true) throws -> Generated {
        guard (4...1024).contains(length) else {
            throw VaultError.settingOutOfRange(.passwordLength, value: "\(length)", allowed: 4...1024)
        }
        let alphabet = letters + digits + (useSymbols ? symbols : [])
        var characters: [Character] = []
        for _ in 0..<length {
            characters.append(alphabet[Int(try SecureRandom.uniform(below: UInt32(alphabet.count)))])
        }
        return Generated(value: String(characters), entropyBits: Double(length) * log2(Double(alphabet.count)))
    }

    /// The EFF long word list the passphrases are drawn from.
    public static var words: [String] { Resources.wordList }

    /// A passphrase of `count` words from the EFF long list (7776 words, 12.9 bits each).
    public static func passphrase(words count: Int) throws -> Generated {
        guard (3...64).contains(count) else {
            throw VaultError.settingOutOfRange(.wordCount, value: "\(count)", allowed: 3...64)

        }
        let list = Resources.wordList
        var words: [String] = []
        for _ in 0..<count { words.append(list[Int(try SecureRandom.uniform(below: UInt32(list.count)))]) }
        return Generated(value: words.joined(separator: " "), entropyBits: Double(count) * log2(Double(list.count)))
    }
}
