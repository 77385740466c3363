import Foundation
import MyStashKit
import StashCrypto
import TestSupport
import XCTest

/// The agent's parser against what a hostile or broken client sends: truncated and padded
/// requests, random bytes, lying lengths, frames cut anywhere. Each must get the failure answer
/// (or end the connection, for an oversized frame), and valid requests still work in between.
final class SSHAgentFuzzTests: XCTestCase {
    static let failure: [UInt8] = [5]

    private func keys() throws -> [SSHPrivateKey] {
        let files = try SSHKeyFiles()
        return try [("ed25519", nil), ("ecdsa", "256"), ("rsa", "2048")].map { type, bits in
            try SSHPrivateKey(keyFile: try SSHKeyFiles.text(try files.make(type, bits: bits))) { .password("") }
        }
    }

    private func randomBytes(_ counts: ClosedRange<Int>, _ generator: inout SplitMix64) -> [UInt8] {
        (0..<Int.random(in: counts, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    private func string(_ bytes: [UInt8]) -> [UInt8] {
        let count = UInt32(bytes.count)
        return [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)] + bytes
    }

    func testOverTwoThousandMalformedRequestsGetTheFailureAnswer() throws {
        let keys = try keys()
        var added = 0
        let agent = SSHAgent(identities: { keys.map { SSHAgent.Identity(key: $0, comment: $0.comment, name: "k") } },
                             addKey: { _ in added += 1 })
        let listing = [UInt8(11)]
        let signing: [[UInt8]] = keys.flatMap { key in
            [UInt8(0), 2, 4].map { flags -> [UInt8] in
                [UInt8(13)] + string(key.publicKeyBlob) + string(Array("data to sign".utf8)) + [0, 0, 0, flags]
            }
        }
        let valid: [[UInt8]] = [listing] + signing
        var generator = SplitMix64(seed: 0x5348_4147)
        var cases = 0
        func expectFailure(_ request: [UInt8], _ what: String) {
            XCTAssertEqual(agent.answer(to: request), Self.failure, "\(what): \(request.prefix(24))")
            cases += 1
        }
        for round in 0..<500 {
            let message = valid[round % valid.count]
            // Cut short anywhere.
            expectFailure(Array(message.prefix(Int.random(in: 0..<message.count, using: &generator))), "truncated")
            // Bytes after a complete request.
            let extra = randomBytes(1...32, &generator)
            expectFailure(message + extra, "padded")
            // A length inside that claims more than is there.
            if message.count > 5 {
                var lying = message
                lying[1] = UInt8.random(in: 1...255, using: &generator)
                expectFailure(lying, "lying length")
            }
            // Random bytes after each message number, including add, remove, lock and extensions.
            let type = UInt8.random(in: 0...40, using: &generator)
            let body = randomBytes(0...300, &generator)
            if !(type == 11 && body.isEmpty) { expectFailure([type] + body, "random body for type \(type)") }
            // A sign request for a key the agent does not have.
            let stranger = randomBytes(0...80, &generator)
            expectFailure([13] + string(stranger) + string([1, 2, 3]) + [0, 0, 0, 0], "unknown key")
        }
        XCTAssertGreaterThanOrEqual(cases, 2_000)
        XCTAssertEqual(added, 0, "random bytes never make a key")
        // The same agent still answers properly.
        let answer = agent.answer(to: listing)
        XCTAssertEqual(answer.first, 12)
        XCTAssertEqual(Array(answer[1..<5]), [0, 0, 0, 3])
        for request in signing { XCTAssertEqual(agent.answer(to: request).first, 14) }
    }

    func testFramesAreSplitWhereverTheStreamIsCutAndOversizedOnesEndTheConnection() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let messages = (0..<Int.random(in: 1...5, using: &generator)).map { _ in randomBytes(0...600, &generator) }
            var stream = messages.flatMap { SSHAgent.frame($0) }
            var reader = SSHAgent.FrameReader()
            var received: [[UInt8]] = []
            while !stream.isEmpty {
                let cut = Int.random(in: 1...stream.count, using: &generator)
                reader.append(stream.prefix(cut))
                stream.removeFirst(cut)
                while case .message(let message) = reader.next() { received.append(message) }
            }
            XCTAssertEqual(received, messages)
            XCTAssertEqual(reader.next(), .incomplete)
        }
        for length in [UInt32(SSHAgent.maximumMessageSize + 1), 0x7FFF_FFFF, 0xFFFF_FFFF] {
            var reader = SSHAgent.FrameReader()
            reader.append([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF),
                           UInt8(length & 0xFF), 11])
            XCTAssertEqual(reader.next(), .tooLarge)
        }
    }

    func testRemovingLockingAndAddingWithoutPermissionAreRefused() throws {
        let keys = try keys()
        let agent = SSHAgent(identities: { keys.map { SSHAgent.Identity(key: $0, comment: "", name: "k") } })
        let requests: [[UInt8]] = [
            [18] + string(keys[0].publicKeyBlob), [19], [22] + string([1]), [23] + string([1]),
            [27] + string(Array("session-bind@openssh.com".utf8)), [17], [25],
        ]
        for request in requests {
            XCTAssertEqual(agent.answer(to: request), Self.failure, "message \(request[0])")
        }
        XCTAssertEqual(agent.answer(to: [11]).count, 5 + keys.reduce(0) { $0 + 8 + $1.publicKeyBlob.count })
    }
}
