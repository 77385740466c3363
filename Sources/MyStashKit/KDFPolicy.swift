import Foundation
import StashCrypto

/// How strong the master-password KDF is: calibrated by default, never weaker than the
/// floor unless a test explicitly allows it.
public enum KDFPolicy {
    /// log2(N) below which `--kdf-cost` is refused: 2^15 with r = 8 is 32 MiB per guess.
    public static let minimumLogN: UInt8 = 15
    /// Set to 1 to allow a cost below the floor, for tests: only a debug build (`swift build`,
    /// whose tests run the debug `mystash`) honours it; a release build refuses the weak cost
    /// whatever the variable says, so no environment can make a shipped binary create a weak vault.
    public static let allowWeakEnvironmentKey = "MYSTASH_TEST_ALLOW_WEAK_KDF"
    /// Whether this build honours ``allowWeakEnvironmentKey`` (`DEBUG` is set by SwiftPM's debug configuration).
    #if DEBUG
    public static let honoursWeakSwitch = true
    #else
    public static let honoursWeakSwitch = false
    #endif
    /// The time one derivation should take on the machine creating the vault.
    public static let targetSeconds = 0.5

    /// Parameters for `--kdf-cost LOG2N`, or calibrated ones when nil.
    public static func parameters(logN: Int?, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> ScryptParameters {
        guard let logN else { return try calibrated() }
        let switchSet = environment[allowWeakEnvironmentKey] == "1"
        let floor = switchSet && honoursWeakSwitch ? 1 : Int(minimumLogN)
        guard logN >= floor, logN <= Int(ScryptParameters.maximumLogN) else {
            let hint = switchSet && !honoursWeakSwitch
                ? "\(allowWeakEnvironmentKey) works in test (debug) builds only; leave --kdf-cost out to calibrate"
                : "leave it out to calibrate to about \(targetSeconds) s on this machine"
            throw VaultError(.usage,
                             "--kdf-cost must be between \(minimumLogN) and \(ScryptParameters.maximumLogN) "
                                + "(log2 of scrypt's N), not \(logN)",
                             hint: hint)
        }
        return ScryptParameters(logN: UInt8(logN), r: 8, p: 1)
    }

    /// Measures scrypt here and picks N so a derivation takes about ``targetSeconds``,
    /// within [2^15, 2^20].
    public static func calibrated() throws -> ScryptParameters {
        let probe = ScryptParameters(logN: 14, r: 8, p: 1)
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try Scrypt.deriveKey(password: [0], salt: [0], parameters: probe, length: 32)
        let seconds = max(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, 1e-4)
        let steps = Int((log2(targetSeconds / seconds)).rounded())
        let logN = min(max(14 + steps, Int(minimumLogN)), Int(ScryptParameters.maximumLogN))
        return ScryptParameters(logN: UInt8(logN), r: 8, p: 1)
    }
}
