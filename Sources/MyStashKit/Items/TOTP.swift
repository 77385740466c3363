import Foundation
import StashCrypto

/// Time-based one-time passwords (RFC 6238): what an authenticator app shows for an entry.
///
/// A secret is written either as an `otpauth://totp/...?secret=BASE32&algorithm=SHA1&digits=6&period=30`
/// URI (the Key URI format authenticator apps and password managers export) or as a bare
/// base32 secret, which means SHA-1, 6 digits, 30 seconds.
public struct TOTP: Equatable, Sendable {
    public var secret: [UInt8]
    public var algorithm: HMAC.Algorithm
    public var digits: Int
    public var period: Int

    /// A current code with the seconds it stays valid.
    public struct Code: Equatable, Sendable {
        public var value: String
        public var secondsLeft: Int
    }

    /// Why a TOTP secret cannot be used.
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    public init(secret: [UInt8], algorithm: HMAC.Algorithm = .sha1, digits: Int = 6, period: Int = 30) {
        self.secret = secret
        self.algorithm = algorithm
        self.digits = digits
        self.period = period
    }

    /// Reads an `otpauth://totp/` URI or a bare base32 secret.
    ///
    /// - throws: ``ParseError`` naming what is wrong (never the secret).
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.lowercased().hasPrefix("otpauth:") else {
            self.init(secret: try Self.base32Decode(trimmed))
            return
        }
        // Some exports leave the spaces of a grouped secret (JBSWY3DP EHPK3PXP) in the URI unescaped.
        let components = URLComponents(string: trimmed)
            ?? URLComponents(string: trimmed.replacingOccurrences(of: " ", with: "%20"))
        guard let components, components.host?.lowercased() == "totp" else {
            throw ParseError(description: "only otpauth://totp/ URIs are supported (not HOTP or other kinds)")
        }
        var values: [String: String] = [:]
        for item in components.queryItems ?? [] { values[item.name.lowercased()] = item.value ?? "" }
        guard let secretText = values["secret"] else { throw ParseError(description: "the otpauth URI has no secret") }
        let algorithmName = (values["algorithm"] ?? "SHA1").uppercased()
        guard let algorithm = HMAC.Algorithm(rawValue: algorithmName) else {
            throw ParseError(description: "unknown algorithm '\(algorithmName)' (use SHA1, SHA256 or SHA512)")
        }
        guard let digits = Int(values["digits"] ?? "6"), (6...8).contains(digits) else {
            throw ParseError(description: "digits must be 6, 7 or 8")
        }
        guard let period = Int(values["period"] ?? "30"), (1...86_400).contains(period) else {
            throw ParseError(description: "period must be 1 to 86400 seconds")
        }
        self.init(secret: try Self.base32Decode(secretText), algorithm: algorithm, digits: digits, period: period)
    }

    /// `text` as it is stored: a usable URI with its spaces escaped, or bare base32 in capitals
    /// without the spaces and hyphens people group it with (`jbsw y3dp` is `JBSWY3DP`).
    ///
    /// - throws: ``ParseError`` when `text` cannot be used.
    public static func normalized(_ text: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try TOTP(parsing: trimmed)
        guard trimmed.lowercased().hasPrefix("otpauth:") else {
            return trimmed.uppercased().filter { !" -".contains($0) }
        }
        return trimmed.replacingOccurrences(of: " ", with: "%20")
    }

    /// The code for `date`.
    public func code(at date: Date = Date()) throws -> Code {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let counter = UInt64(max(0, seconds) / Int64(period))
        let message = (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64($0))) }
        let mac = try HMAC.authenticationCode(algorithm, key: secret, message: message)
        // RFC 4226 section 5.3: dynamic truncation.
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let binary = (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16)
            | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = String(binary % modulus)
        let padded = String(repeating: "0", count: digits - value.count) + value
        return Code(value: padded, secondsLeft: period - Int(max(0, seconds) % Int64(period)))
    }

    /// RFC 4648 base32, ignoring case, spaces, hyphens and padding.
    static func base32Decode(_ text: String) throws -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.uppercased() where !" -=".contains(character) {
            guard let index = alphabet.firstIndex(of: character) else {
                throw ParseError(description: "the secret is not base32 (letters A-Z and digits 2-7)")
            }
            buffer = (buffer << 5) | UInt32(index)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
            guard bytes.count <= 1024 else { throw ParseError(description: "the secret is longer than 1024 bytes") }
        }
        guard !bytes.isEmpty else { throw ParseError(description: "the secret is empty") }
        return bytes
    }
}
