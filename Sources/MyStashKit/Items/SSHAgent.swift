import Foundation
import StashCrypto

/// The SSH agent protocol (draft-miller-ssh-agent): each request message in, its answer out.
/// It lists and signs with the keys ``identities`` hands it, and changes nothing unless
/// ``addKey`` is set: removing keys, locking the agent and extensions are answered with a
/// failure. Serving a socket is the caller's; nothing a client sends can make it trap.
///
/// ```swift
/// let agent = SSHAgent(identities: { vaultKeys() })
/// var frames = SSHAgent.FrameReader()
/// frames.append(received)
/// while case .message(let request) = frames.next() { send(SSHAgent.frame(agent.answer(to: request))) }
/// ```
public final class SSHAgent {
    /// A key the agent offers, with the comment `ssh-add -l` shows for it.
    public struct Identity {
        public var key: SSHPrivateKey
        public var comment: String
        /// Where the key lives (the entry's name), for a confirmation question.
        public var name: String

        public init(key: SSHPrivateKey, comment: String, name: String) {
            self.key = key
            self.comment = comment
            self.name = name
        }
    }

    /// Message numbers (draft-miller-ssh-agent, section 6.1).
    enum Message: UInt8 {
        case failure = 5, success = 6
        case requestIdentities = 11, identitiesAnswer = 12, signRequest = 13, signResponse = 14
        case addIdentity = 17, removeIdentity = 18, removeAllIdentities = 19
        case addIdentityConstrained = 25
    }

    /// Longer messages end the connection: OpenSSH's agent has the same limit, and a length
    /// is read before any of its bytes arrive.
    public static let maximumMessageSize = 256 * 1024

    /// The keys to serve now; an empty list while the vault is locked.
    private let identities: () -> [Identity]
    /// Whether a signature may be made (asked before each one); always yes when nil.
    private let confirmSignature: ((Identity) -> Bool)?
    /// Keeps a key a client adds; adding is refused when nil.
    private let addKey: ((SSHPrivateKey) throws -> Void)?
    /// One line for the log per request that did something or was refused for a reason.
    private let report: (String) -> Void

    public init(identities: @escaping () -> [Identity], confirmSignature: ((Identity) -> Bool)? = nil,
                addKey: ((SSHPrivateKey) throws -> Void)? = nil, report: @escaping (String) -> Void = { _ in }) {
        self.identities = identities
        self.confirmSignature = confirmSignature
        self.addKey = addKey
        self.report = report
    }

    /// The answer to one request (the message without its length).
    public func answer(to request: [UInt8]) -> [UInt8] {
        request.withUnsafeBytes { bytes in
            var reader = SSHReader(bytes)
            do {
                guard let type = Message(rawValue: try reader.byte()) else { return Self.failure }
                switch type {
                case .requestIdentities:
                    guard reader.isAtEnd else { return Self.failure }
                    return listIdentities()
                case .signRequest:
                    return try sign(&reader)
                case .addIdentity, .addIdentityConstrained:
                    return try add(&reader, constrained: type == .addIdentityConstrained)
                case .removeIdentity, .removeAllIdentities:
                    report("refused to remove keys: the agent serves the vault's keys, which are managed in the vault")
                    return Self.failure
                default:
                    return Self.failure
                }
            } catch {
                return Self.failure
            }
        }
    }

    static let failure = [Message.failure.rawValue]

    private func listIdentities() -> [UInt8] {
        let served = identities()
        var writer = SSHWriter()
        writer.byte(Message.identitiesAnswer.rawValue)
        writer.uint32(UInt32(served.count))
        for identity in served {
            writer.string(identity.key.publicKeyBlob)
            writer.string(identity.comment)
        }
        return writer.bytes
    }

    private func sign(_ reader: inout SSHReader) throws -> [UInt8] {
        let blob = Array(try reader.string())
        let data = Array(try reader.string())
        let flags = SSHPrivateKey.SignatureFlags(rawValue: try reader.uint32())
        guard reader.isAtEnd else { return Self.failure }
        guard let identity = identities().first(where: { $0.key.publicKeyBlob == blob }) else {
            return Self.failure
        }
        if let confirmSignature, !confirmSignature(identity) {
            report("refused a signature with '\(identity.name)' (\(identity.key.fingerprint)): not confirmed")
            return Self.failure
        }
        let signature = try identity.key.signature(of: data, flags: flags)
        report("signed with '\(identity.name)' (\(identity.key.fingerprint))")
        var writer = SSHWriter()
        writer.byte(Message.signResponse.rawValue)
        writer.string(signature)
        return writer.bytes
    }

    private func add(_ reader: inout SSHReader, constrained: Bool) throws -> [UInt8] {
        guard let addKey else {
            report("refused to add a key: this agent does not store added keys")
            return Self.failure
        }
        let key = try SSHPrivateKey.readKey(&reader)
        // A lifetime or a confirmation a client asks for cannot be kept for a key stored in the vault.
        guard reader.isAtEnd, !constrained else {
            report("refused to add '\(key.fingerprint)': constraints (ssh-add -t, -c) are not supported")
            return Self.failure
        }
        do {
            try addKey(key)
        } catch {
            report("could not add \(key.fingerprint): \(VaultError.wrapping(error).message)")
            return Self.failure
        }
        report("added \(key.fingerprint) to the vault")
        return [Message.success.rawValue]
    }

    /// A message with its length before it, as it goes on the socket.
    public static func frame(_ message: [UInt8]) -> [UInt8] {
        var writer = SSHWriter()
        writer.string(message)
        return writer.bytes
    }

    /// Splits the bytes a client sends into messages, however the stream cuts them.
    public struct FrameReader {
        public enum Next: Equatable {
            case message([UInt8])
            /// A message has not fully arrived.
            case incomplete
            /// A length beyond ``SSHAgent/maximumMessageSize``: the connection must end.
            case tooLarge
        }

        private var buffer: [UInt8] = []
        private var start = 0

        public init() {}

        public mutating func append<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
            if start > 0, start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            buffer += bytes
        }

        public mutating func next() -> Next {
            guard buffer.count - start >= 4 else { return .incomplete }
            let length = buffer[start..<start + 4].reduce(0) { $0 << 8 | Int($1) }
            guard length <= SSHAgent.maximumMessageSize else { return .tooLarge }
            guard buffer.count - start - 4 >= length else { return .incomplete }
            let message = Array(buffer[start + 4..<start + 4 + length])
            start += 4 + length
            if start > 65_536 {
                buffer.removeFirst(start)
                start = 0
            }
            return .message(message)
        }
    }
}
