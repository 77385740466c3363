import Foundation
import MyStashKit
import StashPlatform
import StashCrypto
import TestSupport
import XCTest

/// Key files made by the real `ssh-keygen`, of every type, plain and encrypted.
final class SSHKeyFiles {
    let directory: URL

    init() throws {
        guard ChildProcess.find("ssh-keygen") != nil else {
            throw XCTSkip("ssh-keygen is not installed (CI installs openssh-client)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ssh-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The key types to try: ssh-keygen's `-t` and `-b`.
    static let types: [(type: String, bits: String?)] = [
        ("ed25519", nil), ("ecdsa", "256"), ("ecdsa", "384"), ("ecdsa", "521"), ("rsa", "2048"),
    ]

    /// Makes a key; returns its path (the public key is beside it, with `.pub`).
    func make(_ type: String, bits: String? = nil, passphrase: String = "", cipher: String? = nil,
              format: String? = nil, comment: String = "test key") throws -> URL {
        let path = directory.appendingPathComponent("\(type)-\(bits ?? "")-\(UUID().uuidString.prefix(6))")
        var arguments = ["ssh-keygen", "-q", "-t", type, "-N", passphrase, "-C", comment, "-f", path.path]
        if let bits { arguments += ["-b", bits] }
        if let cipher { arguments += ["-Z", cipher] }
        if let format { arguments += ["-m", format] }
        let result = try XCTUnwrap(ChildProcess.execute(arguments))
        XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
        return path
    }

    /// What `ssh-keygen` says of a key file: `-l` (bits, fingerprint, comment, type) or `-y` (public key).
    static func keygen(_ arguments: [String]) throws -> String {
        let result = try XCTUnwrap(ChildProcess.execute(["ssh-keygen"] + arguments))
        XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
        return String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func text(_ url: URL) throws -> String { try String(contentsOf: url, encoding: .utf8) }
}

final class SSHKeyTests: XCTestCase {
    func testEveryTypePlainAndEncryptedReadsAsSSHKeygenSeesIt() throws {
        let files = try SSHKeyFiles()
        for (type, bits) in SSHKeyFiles.types {
            let encryptions = [("", nil), ("correct horse", nil), ("correct horse", "aes256-gcm@openssh.com")]
            for (passphrase, cipher) in encryptions {
                let path = try files.make(type, bits: bits, passphrase: passphrase, cipher: cipher)
                var asked = 0
                let key = try SSHPrivateKey(keyFile: try SSHKeyFiles.text(path)) {
                    asked += 1
                    return .password(passphrase)
                }
                let label = "\(type) \(bits ?? "") \(cipher ?? (passphrase.isEmpty ? "plain" : "aes256-ctr"))"
                XCTAssertEqual(asked, passphrase.isEmpty ? 0 : 1, label)
                let publicKey = try SSHKeyFiles.text(path.appendingPathExtension("pub"))
                XCTAssertEqual(key.publicKeyLine, publicKey.trimmingCharacters(in: .newlines), label)
                XCTAssertEqual(
                    "\(key.bits) \(key.fingerprint) \(key.comment) (\(key.algorithmName))",
                    try SSHKeyFiles.keygen(["-l", "-f", path.appendingPathExtension("pub").path]), label)
                // What the vault keeps is a key file OpenSSH itself reads, without a passphrase.
                let stored = files.directory.appendingPathComponent("stored")
                try key.openSSHText().write(to: stored, atomically: false, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: stored.path)
                XCTAssertEqual(
                    try SSHKeyFiles.keygen(["-y", "-P", "", "-f", stored.path]),
                    publicKey.trimmingCharacters(in: .newlines), label)
            }
        }
    }

    /// PEM keys (PKCS #1, SEC 1, PKCS #8, plain and encrypted) as ssh-keygen and openssl write them.
    func testPEMKeysReadThroughOpenSSL() throws {
        let files = try SSHKeyFiles()
        for (type, bits) in [("rsa", "2048"), ("ecdsa", "256"), ("ecdsa", "521")] {
            for format in ["PEM", "PKCS8"] {
                for passphrase in ["", "pass phrase"] {
                    let path = try files.make(type, bits: bits, passphrase: passphrase, format: format)
                    let text = try SSHKeyFiles.text(path)
                    XCTAssertFalse(text.contains("OPENSSH PRIVATE KEY"), "ssh-keygen wrote \(format)")
                    let key = try SSHPrivateKey(keyFile: text) { .password(passphrase) }
                    let keygen = try SSHKeyFiles.keygen(["-l", "-f", path.appendingPathExtension("pub").path])
                    XCTAssertEqual(keygen, "\(key.bits) \(key.fingerprint) test key (\(key.algorithmName))",
                                   "\(type) \(format)")
                    if !passphrase.isEmpty {
                        XCTAssertThrowsError(try SSHPrivateKey(keyFile: text) { .password("wrong") }) {
                            XCTAssertEqual(($0 as? VaultError)?.kind, .wrongPassword)
                        }
                    }
                }
            }
        }
        guard ChildProcess.find("openssl") != nil else { return }
        for encryption in [[], ["-aes256", "-pass", "pass:pass phrase"]] {
            let path = files.directory.appendingPathComponent("ed25519-\(encryption.count).pem").path
            XCTAssertEqual(ChildProcess.execute(["openssl", "genpkey", "-algorithm", "ed25519", "-out", path]
                                                + encryption)?.status, 0)
            let key = try SSHPrivateKey(keyFile: try String(contentsOfFile: path, encoding: .utf8)) {
                .password("pass phrase")
            }
            let publicDER = try XCTUnwrap(ChildProcess.execute(
                ["openssl", "pkey", "-in", path, "-passin", "pass:pass phrase", "-pubout", "-outform", "DER"]))
            XCTAssertEqual(Array(key.publicKeyBlob.suffix(32)), Array(publicDER.output.suffix(32)))
            XCTAssertEqual(key.type, "ssh-ed25519")
        }
    }

    func testAWrongPassphraseIsToldApartFromDamage() throws {
        let files = try SSHKeyFiles()
        for cipher in [nil, "aes256-gcm@openssh.com"] {
            let path = try files.make("ed25519", passphrase: "right", cipher: cipher)
            XCTAssertThrowsError(try SSHPrivateKey(keyFile: try SSHKeyFiles.text(path)) { .password("wrong") }) {
                XCTAssertEqual(($0 as? VaultError)?.kind, .wrongPassword, "\(cipher ?? "ctr"): \($0)")
            }
        }
    }

    func testOtherFilesAreNamedWithWhatToDo() throws {
        let files = try SSHKeyFiles()
        let pem = try files.make("rsa", bits: "2048", format: "PEM")
        let cases: [(String, String)] = [
            (try SSHKeyFiles.text(pem.appendingPathExtension("pub")), "this is a public key"),
            ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "the PEM key cannot be used"),
            ("hello", "not an OpenSSH private key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\n!!!\n-----END OPENSSH PRIVATE KEY-----\n", "not base64"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try SSHPrivateKey(keyFile: text) { XCTFail("asked"); return .password("") }) {
                let error = $0 as? VaultError
                XCTAssertEqual(error?.kind, .invalidData)
                XCTAssertTrue(error?.message.contains(expected) == true, "\(String(describing: error))")
            }
        }
    }

    /// Every truncation of a key file's bytes, and bytes changed one at a time, are refused with
    /// an error: never a crash, never a key.
    func testDamagedKeyFilesAreRefusedAtEveryByte() throws {
        let files = try SSHKeyFiles()
        var generator = SplitMix64(seed: 24)
        for (type, bits) in SSHKeyFiles.types {
            let text = try SSHKeyFiles.text(try files.make(type, bits: bits))
            let body = try XCTUnwrap(Data(base64Encoded: text.split(separator: "\n").dropFirst().dropLast()
                .joined()))
            func wrapped(_ bytes: Data) -> String {
                "-----BEGIN OPENSSH PRIVATE KEY-----\n\(bytes.base64EncodedString())\n-----END OPENSSH PRIVATE KEY-----"
            }
            for length in stride(from: 0, to: body.count, by: max(1, body.count / 200)) {
                XCTAssertThrowsError(try SSHPrivateKey(keyFile: wrapped(body.prefix(length))) { .password("") })
            }
            // A changed byte is refused, or it was in the comment or padding: the numbers are
            // checked against the public key, so a damaged key never reads as another one.
            let original = try SSHPrivateKey(keyFile: text) { .password("") }
            var refused = 0
            for _ in 0..<100 {
                var damaged = body
                let index = Int.random(in: 0..<body.count, using: &generator)
                damaged[index] ^= UInt8.random(in: 1...255, using: &generator)
                if let key = try? SSHPrivateKey(keyFile: wrapped(damaged), passphrase: { .password("") }) {
                    XCTAssertEqual(key.publicKeyBlob, original.publicKeyBlob, "\(type) byte \(index)")
                } else {
                    refused += 1
                }
            }
            XCTAssertGreaterThan(refused, 80, type)
        }
    }
}
