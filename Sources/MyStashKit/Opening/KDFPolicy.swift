import Foundation
import StashCrypto

/// How strong the master-password KDF is: calibrated by default, never weaker than the
/// floor unless a test explicitly allows it.
public enum KDFPolicy {
    /// log2(N) below which a cost is refused: 2^15 with r = 8 is 32 MiB per guess.
    public static let minimumLogN: UInt8 = 15
    /// Whether this build allows a cost below the floor when a caller asks, for tests: only a
    /// debug build (`DEBUG` is set by SwiftPM's debug configuration) does; a release build
    /// refuses the weak cost whatever the caller asks, so a shipped binary never creates a weak vault.
    #if DEBUG
    public static let honoursWeakSwitch = true
    #else
    public static let honoursWeakSwitch = false
    #endif
    /// The time one derivation should take on the machine creating the vault.
    public static let targetSeconds = 0.5

    /// Parameters for a cost of 2^`logN`, or calibrated ones when nil.
    ///
    /// - Parameter allowingWeak: a test asks for a cost below the floor (honoured by debug builds only).
    /// - throws: ``VaultError/settingOutOfRange(_:value:allowed:)`` outside the range this build
    ///   allows; ``VaultError/weakKDFRefused(_:allowed:)`` when a weak cost was allowed by the
    ///   caller but this build refuses it.
    public static func parameters(logN: Int?, allowingWeak: Bool = false) throws -> ScryptParameters {
        guard let logN else { return try calibrated() }
        let allowed = Int(minimumLogN)...Int(ScryptParameters.maximumLogN)
        let floor = allowingWeak && honoursWeakSwitch ? 1 : allowed.lowerBound
        guard logN >= floor, logN <= allowed.upperBound else {
            if allowingWeak && !honoursWeakSwitch { throw VaultError.weakKDFRefused(logN, allowed: allowed) }
            throw VaultError.settingOutOfRange(.kdfCost, value: "\(logN)", allowed: allowed)
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
