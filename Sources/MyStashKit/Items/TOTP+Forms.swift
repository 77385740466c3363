import Foundation
import StashCrypto

/// The ways password managers write a TOTP secret beside an entry, each turned into the
/// `otpauth://totp/` URI MyStash stores:
/// - KeePassXC: the `otp` attribute (a URI, or KeeOTP's `key=...&step=...&size=...`), and
///   its legacy `TOTP Seed` (base32) with `TOTP Settings` (`period;digits`);
/// - KeePass 2.47+: `TimeOtp-Secret-Base32` (or `-Hex`, `-Base64`, or `TimeOtp-Secret` as
///   UTF-8 text) with `TimeOtp-Length`, `TimeOtp-Period` and `TimeOtp-Algorithm`
///   (`HMAC-SHA-1`, `HMAC-SHA-256`, `HMAC-SHA-512`);
/// - gopass: a `totp:` key holding base32 or a URI.
/// Base32 is read ignoring case, spaces and hyphens.
enum TOTPForms {
    /// Every attribute name a form above uses.
    static let attributeNames: Set<String> = [
        "otp", "TOTP Seed", "TOTP Settings", "TimeOtp-Secret-Base32", "TimeOtp-Secret-Hex", "TimeOtp-Secret-Base64",
        "TimeOtp-Secret", "TimeOtp-Length", "TimeOtp-Period", "TimeOtp-Algorithm",
    ]

    /// What an entry's attributes say of TOTP: nil when they hold none of the forms.
    enum Found: Equatable {
        /// A usable secret, as an otpauth URI.
        case secret(String)
        /// A form that is there but cannot be used, with the reason.
        case unusable(String)
    }

    static func find(in attributes: [String: String], label: String) -> Found? {
        func value(_ name: String) -> String? {
            let trimmed = attributes[name]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            return trimmed.isEmpty ? nil : trimmed
        }
        do {
            if let otp = value("otp") { return .secret(try uri(otp, label: label)) }
            if let seed = value("TOTP Seed") {
                // KeePassXC's legacy settings: "period;digits", digits "S" for Steam's own codes.
                let settings = value("TOTP Settings")?.split(separator: ";").map(String.init) ?? []
                if settings.count > 1, settings[1] == "S" {
                    return .unusable("Steam's TOTP codes are not supported")
                }
                return .secret(try uri(secret: try TOTP.base32Decode(seed), label: label, algorithm: nil,
                                       digits: settings.count > 1 ? settings[1] : nil, period: settings.first))
            }
            let secret: [UInt8]?
            if let text = value("TimeOtp-Secret-Base32") {
                secret = try TOTP.base32Decode(text)
            } else if let text = value("TimeOtp-Secret-Hex") {
                secret = try hexDecode(text)
            } else if let text = value("TimeOtp-Secret-Base64") {
                guard let data = Data(base64Encoded: text) else { throw TOTP.ParseError(description: "not base64") }
                secret = Array(data)
            } else {
                secret = attributes["TimeOtp-Secret"].flatMap { $0.isEmpty ? nil : Array($0.utf8) }
            }
            guard let secret else { return nil }
            let algorithm = value("TimeOtp-Algorithm").map {
                $0.uppercased().replacingOccurrences(of: "HMAC-", with: "")
            }
            return .secret(try uri(secret: secret, label: label, algorithm: algorithm, digits: value("TimeOtp-Length"),
                                   period: value("TimeOtp-Period")))
        } catch {
            return .unusable("\(error)")
        }
    }

    /// A URI, bare base32, or KeeOTP's `key=BASE32&step=30&size=6&otpHashMode=SHA256`, as an otpauth URI.
    static func uri(_ text: String, label: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("key=") else {
            _ = try TOTP(parsing: trimmed)
            return trimmed
        }
        var parts: [String: String] = [:]
        for pair in trimmed.split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if halves.count == 2 { parts[halves[0].lowercased()] = halves[1].removingPercentEncoding ?? halves[1] }
        }
        return try uri(secret: try TOTP.base32Decode(parts["key"] ?? ""), label: label,
                       algorithm: parts["otphashmode"], digits: parts["size"], period: parts["step"])
    }

    /// The otpauth URI of `secret` with settings as the sources write them, each checked.
    static func uri(secret: [UInt8], label: String, algorithm: String?, digits: String?, period: String?) throws
        -> String
    {
        var components = URLComponents()
        components.scheme = "otpauth"
        components.host = "totp"
        components.path = "/" + label
        components.queryItems = [URLQueryItem(name: "secret", value: TOTP.base32Encode(secret))]
            + [("algorithm", algorithm?.replacingOccurrences(of: "-", with: "")), ("digits", digits),
               ("period", period)].compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
        guard let text = components.string else { throw TOTP.ParseError(description: "the label cannot be written") }
        _ = try TOTP(parsing: text)
        return text
    }

    static func hexDecode(_ text: String) throws -> [UInt8] {
        let digits = Array(text.filter { !$0.isWhitespace })
        guard digits.count % 2 == 0 else { throw TOTP.ParseError(description: "the hexadecimal secret is cut short") }
        return try stride(from: 0, to: digits.count, by: 2).map {
            guard let byte = UInt8(String(digits[$0...$0 + 1]), radix: 16) else {
                throw TOTP.ParseError(description: "the secret is not hexadecimal")
            }
            return byte
        }
    }
}

extension TOTP {
    /// RFC 4648 base32 without padding, as otpauth URIs carry secrets.
    static func base32Encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var text = ""
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                text.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        if bits > 0 { text.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return text
    }
}
