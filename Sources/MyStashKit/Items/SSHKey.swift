import Foundation
import StashCrypto

/// An SSH private key: Ed25519, ECDSA (nistp256, nistp384, nistp521) or RSA, read from
/// OpenSSH's key file format (`openssh-key-v1`, PROTOCOL.key in OpenSSH's sources), plain or
/// encrypted with a passphrase (bcrypt_pbkdf and AES-256-CTR or AES-256-GCM), or from an SSH
/// agent's add request. It knows its public key, its fingerprint, and signs as SSH signs.
///
/// ```swift
/// let key = try SSHPrivateKey(keyFile: text) { try askPassphrase() }
/// print(key.publicKeyLine)  // ssh-ed25519 AAAAC3Nza... alice@laptop
/// ```
public final class SSHPrivateKey: @unchecked Sendable {
    /// The key type as SSH names it: `ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`...
    public let type: String
    /// The public key in SSH's encoding, as an agent lists it and `authorized_keys` holds it (base64).
    public let publicKeyBlob: [UInt8]
    public let comment: String
    private let signer: SigningKey
    /// The type and private numbers as OpenSSH encodes them in a key file's private section and
    /// in an agent's add request: kept to write the key back out.
    private let privateEncoding: SecretBytes

    /// The key types read and served.
    public static let supportedTypes = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                        "ecdsa-sha2-nistp521", "ssh-rsa"]
    static let beginMarker = "-----BEGIN OPENSSH PRIVATE KEY-----"
    static let endMarker = "-----END OPENSSH PRIVATE KEY-----"
    private static let magic = Array("openssh-key-v1\0".utf8)

    private init(type: String, publicKeyBlob: [UInt8], comment: String, signer: SigningKey,
                 privateEncoding: SecretBytes) {
        self.type = type
        self.publicKeyBlob = publicKeyBlob
        self.comment = comment
        self.signer = signer
        self.privateEncoding = privateEncoding
    }

    /// `SHA256:` and the unpadded base64 of the public key's SHA-256, as `ssh-keygen -l` prints it.
    public var fingerprint: String {
        let digest = (try? SHA256Digest.hash(publicKeyBlob)) ?? []
        return "SHA256:" + Data(digest).base64EncodedString().replacingOccurrences(of: "=", with: "")
    }

    /// The line `authorized_keys` takes: type, base64 public key, comment.
    public var publicKeyLine: String {
        let line = "\(type) \(Data(publicKeyBlob).base64EncodedString())"
        // A comment is one line of the file; anything after a line break would be a second key line.
        let oneLine = comment.split(whereSeparator: \.isNewline).joined(separator: " ")
        return oneLine.isEmpty ? line : "\(line) \(oneLine)"
    }

    /// The key's size in bits, as `ssh-keygen -l` counts it.
    public var bits: Int {
        switch signer.kind {
        case .ed25519: 256
        case .ecdsa(let curve): curve == .p521 ? 521 : curve.coordinateSize * 8
        case .rsa(let bits): bits
        }
    }

    /// The algorithm's short name, as `ssh-keygen -l` shows it in parentheses.
    public var algorithmName: String {
        switch signer.kind {
        case .ed25519: "ED25519"
        case .ecdsa: "ECDSA"
        case .rsa: "RSA"
        }
    }

    // MARK: - OpenSSH's key file

    /// Reads a private key file's text: OpenSSH's format, or PEM through OpenSSL; `passphrase`
    /// is called only for an encrypted key.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming what is wrong with the text,
    ///   `.wrongPassword` when the passphrase does not decrypt it; whatever `passphrase` throws.
    public convenience init(keyFile text: String, passphrase: () throws -> SecretBytes) throws {
        let isPEM = Self.pemLabels.contains { text.contains("-----BEGIN \($0)-----") }
        if isPEM && !text.contains(Self.beginMarker) {
            try self.init(pem: text, passphrase: passphrase)
            return
        }
        let body = try Self.base64Body(text)
        do {
            try self.init(decoded: body, passphrase: passphrase)
        } catch let error as SSHFormatError {
            throw VaultError.sshKey(.damaged(reason: "\(error)"))
        } catch let error as StashCryptoError {
            throw VaultError.sshKey(.unusable(reason: "\(error)"))
        }
    }

    /// The bytes between the markers; other kinds of key file are named, with a way to convert them.
    private static func base64Body(_ text: String) throws -> Data {
        guard let begin = text.range(of: beginMarker),
              let end = text.range(of: endMarker, range: begin.upperBound..<text.endIndex)
        else {
            let words = text.split(whereSeparator: \.isWhitespace)
            if let first = words.first, supportedTypes.contains(String(first)) || first.hasPrefix("sk-") {
                throw VaultError.sshKey(.publicKeyGiven)
            }
            throw VaultError.sshKey(.notOpenSSH(expectedLine: beginMarker))
        }
        let encoded = text[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        guard let body = Data(base64Encoded: String(encoded)) else {
            throw VaultError.sshKey(.damaged(reason: "its text is not base64"))
        }
        return body
    }

    /// The PEM forms OpenSSL reads: PKCS #1, SEC 1, PKCS #8 (plain and encrypted).
    private static let pemLabels = ["ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY"]

    /// A PEM key, through OpenSSL, re-encoded as OpenSSH encodes a key and read as one. PEM
    /// keys carry no comment.
    private convenience init(pem text: String, passphrase: () throws -> SecretBytes) throws {
        let numbers: PEMPrivateKey.Numbers
        do {
            numbers = try PEMPrivateKey.read(text, passphrase: passphrase)
        } catch let error as StashCryptoError where error.code == .wrongPassword {
            throw Self.wrongPassphrase
        } catch let error as StashCryptoError {
            throw VaultError.sshKey(.unusablePEM(reason: "\(error)"))
        }
        var writer = SSHWriter()
        switch numbers {
        case .ed25519(let seed, let publicKey):
            writer.string("ssh-ed25519")
            writer.string(publicKey)
            writer.string(seed.bytes + publicKey)
        case .ecdsa(let curve, let scalar, let point):
            writer.string("ecdsa-sha2-\(curve.rawValue)")
            writer.string(curve.rawValue)
            writer.string(point)
            writer.positiveInteger(scalar.bytes)
        case .rsa(let modulus, let exponent, let privateExponent, let prime1, let prime2, let coefficient):
            writer.string("ssh-rsa")
            for number in [modulus, exponent, privateExponent.bytes, coefficient.bytes, prime1.bytes, prime2.bytes] {
                writer.positiveInteger(number)
            }
        }
        writer.string("")
        let encoding = SecretBytes(copying: writer.bytes)
        let key: SSHPrivateKey
        do {
            key = try encoding.withUnsafeBytes { bytes in
                var reader = SSHReader(bytes)
                return try Self.readKey(&reader)
            }
        } catch let error as SSHFormatError {
            throw VaultError.sshKey(.unusablePEM(reason: "\(error)"))
        } catch let error as StashCryptoError {
            throw VaultError.sshKey(.unusablePEM(reason: "\(error)"))
        }
        self.init(type: key.type, publicKeyBlob: key.publicKeyBlob, comment: key.comment, signer: key.signer,
                  privateEncoding: key.privateEncoding)
    }

    private convenience init(decoded body: Data, passphrase: () throws -> SecretBytes) throws {
        let header = try body.withUnsafeBytes { bytes -> (cipher: String, kdf: String, salt: [UInt8], rounds: UInt32,
                                                           publicBlob: [UInt8], encrypted: [UInt8], tag: [UInt8]) in
            var reader = SSHReader(bytes)
            guard Array(try reader.raw(Self.magic.count)) == Self.magic else {
                throw SSHFormatError("it does not start with 'openssh-key-v1'")
            }
            let cipher = try reader.name()
            let kdf = try reader.name()
            var options = SSHReader(try reader.string())
            var salt: [UInt8] = []
            var rounds: UInt32 = 0
            if kdf == "bcrypt" {
                salt = Array(try options.string())
                rounds = try options.uint32()
            }
            let count = try reader.uint32()
            guard count == 1 else { throw SSHFormatError("it holds \(count) keys, where OpenSSH writes one") }
            let publicBlob = Array(try reader.string())
            let encrypted = Array(try reader.string())
            let tag = Array(try reader.raw(cipher == "aes256-gcm@openssh.com" ? AES256GCM.tagSize : 0))
            return (cipher, kdf, salt, rounds, publicBlob, encrypted, tag)
        }
        let section: SecretBytes
        switch (header.cipher, header.kdf) {
        case ("none", "none"):
            section = SecretBytes(copying: header.encrypted)
        case ("aes256-ctr", "bcrypt"), ("aes256-gcm@openssh.com", "bcrypt"):
            let gcm = header.cipher != "aes256-ctr"
            let ivSize = gcm ? AES256GCM.nonceSize : 16
            guard header.encrypted.count % 16 == 0 else { throw SSHFormatError("its private part is cut short") }
            guard header.rounds <= BcryptPBKDF.maximumRounds else {
                throw VaultError.sshKey(.tooManyRounds(Int(header.rounds), maximum: Int(BcryptPBKDF.maximumRounds)))
            }
            let derived = try BcryptPBKDF.derive(password: try passphrase(), salt: header.salt,
                                                 rounds: Int(header.rounds), count: 32 + ivSize)
            let key = SecretBytes(copying: derived.bytes.prefix(32))
            let iv = derived.withUnsafeBytes { Array($0[32...]) }
            if gcm {
                do {
                    let box = AES256GCM.SealedBox(nonce: iv, ciphertext: header.encrypted, tag: header.tag)
                    section = try AES256GCM.open(box, key: key)
                } catch let error as StashCryptoError where error.code == .authenticationFailed {
                    throw Self.wrongPassphrase
                }
            } else {
                section = try AES256CTR.apply(key: key, counter: iv, to: header.encrypted)
            }
        case (let cipher, let kdf):
            throw VaultError.sshKey(.unsupportedEncryption(cipher: cipher, kdf: kdf))
        }
        let parsed = try section.withUnsafeBytes { bytes in
            var reader = SSHReader(bytes)
            let check = (try reader.uint32(), try reader.uint32())
            // A wrong passphrase decrypts to noise, where the two check numbers differ.
            guard check.0 == check.1 else { throw Self.wrongPassphrase }
            let parsed = try Self.readKey(&reader)
            var padding: UInt8 = 1
            while !reader.isAtEnd {
                guard try reader.byte() == padding else {
                    throw SSHFormatError("its private part has bytes after the key")
                }
                padding &+= 1
            }
            return parsed
        }
        guard parsed.publicKeyBlob == header.publicBlob else {
            throw SSHFormatError("its private key does not match the public key before it")
        }
        self.init(type: parsed.type, publicKeyBlob: parsed.publicKeyBlob, comment: parsed.comment,
                  signer: parsed.signer, privateEncoding: parsed.privateEncoding)
    }

    private static var wrongPassphrase: VaultError { .wrongPassphrase }


    /// The text of an unencrypted OpenSSH key file: how the vault keeps the key (under its own
    /// encryption). The same key always gives the same text, so a re-import of it changes
    /// nothing: the check number, random in ssh-keygen's files, only tells a right passphrase
    /// from a wrong one, and an unencrypted section has none; it is taken from the public key.
    public func openSSHText() throws -> String {
        var section = SSHWriter()
        let check = Array(try SHA256Digest.hash(publicKeyBlob).prefix(4))
        section.raw(check)
        section.raw(check)
        privateEncoding.withUnsafeBytes { section.raw($0) }
        section.string(comment)
        var padding: UInt8 = 1
        while section.bytes.count % 8 != 0 {
            section.byte(padding)
            padding += 1
        }
        var file = SSHWriter()
        file.raw(Self.magic)
        file.string("none")
        file.string("none")
        file.string([UInt8]())
        file.uint32(1)
        file.string(publicKeyBlob)
        file.string(section.bytes)
        let base64 = Data(file.bytes).base64EncodedString()
        var lines = [Self.beginMarker]
        var start = base64.startIndex
        while start < base64.endIndex {
            let end = base64.index(start, offsetBy: 70, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[start..<end]))
            start = end
        }
        lines.append(Self.endMarker)
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - One key's fields

    /// Reads a key type, its numbers and a comment, as a key file's private section and an
    /// agent's add request hold them.
    static func readKey(_ reader: inout SSHReader) throws -> SSHPrivateKey {
        let start = reader.offset
        let type = try reader.name()
        var publicKey = SSHWriter()
        publicKey.string(type)
        let signer: SigningKey
        switch type {
        case "ssh-ed25519":
            let point = Array(try reader.string())
            let secret = try reader.string()
            // OpenSSH keeps the 32-byte seed followed by the public key.
            guard point.count == 32, secret.count == 64, Array(secret[32...]) == point else {
                throw SSHFormatError("its Ed25519 key does not have the sizes Ed25519 keys have")
            }
            signer = try SigningKey.ed25519(seed: SecretBytes(copying: secret[..<32]), publicKey: point)
            publicKey.string(point)
        case let ecdsa where ecdsa.hasPrefix("ecdsa-sha2-"):
            let curveName = try reader.name()
            guard let curve = SigningKey.Curve(rawValue: curveName), ecdsa == "ecdsa-sha2-\(curveName)" else {
                throw SSHFormatError("the ECDSA curve '\(curveName)' is not one of nistp256, nistp384, nistp521")
            }
            let point = Array(try reader.string())
            let scalar = SecretBytes(copying: try reader.positiveInteger())
            signer = try SigningKey.ecdsa(curve: curve, privateScalar: scalar, publicPoint: point)
            publicKey.string(curveName)
            publicKey.string(point)
        case "ssh-rsa":
            let modulus = Array(try reader.positiveInteger())
            let exponent = Array(try reader.positiveInteger())
            let privateExponent = SecretBytes(copying: try reader.positiveInteger())
            let coefficient = SecretBytes(copying: try reader.positiveInteger())
            let prime1 = SecretBytes(copying: try reader.positiveInteger())
            let prime2 = SecretBytes(copying: try reader.positiveInteger())
            signer = try SigningKey.rsa(
                modulus: modulus, publicExponent: exponent, privateExponent: privateExponent, prime1: prime1,
                prime2: prime2, coefficient: coefficient)
            publicKey.positiveInteger(exponent)
            publicKey.positiveInteger(modulus)
        default:
            throw SSHFormatError(
                "the key type '\(type)' is not one MyStash serves (\(supportedTypes.joined(separator: ", ")))")
        }
        let end = reader.offset
        let comment = try reader.text()
        let encoding = SecretBytes(copying: reader.bytes(in: start..<end))
        return SSHPrivateKey(type: type, publicKeyBlob: publicKey.bytes, comment: comment, signer: signer,
                             privateEncoding: encoding)
    }

    // MARK: - Signing

    /// What an agent's sign request may ask of an RSA key (draft-miller-ssh-agent, section 4.5.1).
    public struct SignatureFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let rsaSHA256 = SignatureFlags(rawValue: 2)
        public static let rsaSHA512 = SignatureFlags(rawValue: 4)
    }

    /// An SSH signature of `data`: the algorithm's name and its signature bytes, each a string.
    /// RSA signs with SHA-512 or SHA-256 when `flags` ask, else with SHA-1 (`ssh-rsa`).
    public func signature(of data: [UInt8], flags: SignatureFlags = []) throws -> [UInt8] {
        var writer = SSHWriter()
        switch signer.kind {
        case .ed25519:
            guard case .bytes(let bytes) = try signer.sign(data) else { throw SSHFormatError("unexpected signature") }
            writer.string(type)
            writer.string(bytes)
        case .ecdsa:
            guard case .ecdsa(let r, let s) = try signer.sign(data) else {
                throw SSHFormatError("unexpected signature")
            }
            var inner = SSHWriter()
            inner.positiveInteger(r)
            inner.positiveInteger(s)
            writer.string(type)
            writer.string(inner.bytes)
        case .rsa:
            let (name, hash): (String, SigningKey.Hash) =
                flags.contains(.rsaSHA512) ? ("rsa-sha2-512", .sha512)
                : flags.contains(.rsaSHA256) ? ("rsa-sha2-256", .sha256) : ("ssh-rsa", .sha1)
            guard case .bytes(let bytes) = try signer.sign(data, hash: hash) else {
                throw SSHFormatError("unexpected signature")
            }
            writer.string(name)
            writer.string(bytes)
        }
        return writer.bytes
    }
}
