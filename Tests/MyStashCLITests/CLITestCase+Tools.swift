import Foundation

extension CLITestCase {
    /// Puts the version-1 vault of MyStashKitTests/Fixtures/vault-v1 where the commands look, and
    /// returns the environment that gives its master password.
    func installVersion1Vault() throws -> [String: String] { try installFixtureVault("vault-v1") }

    /// Copies a vault an earlier release wrote (MyStashKitTests/Fixtures/`name`, see its README)
    /// in place of the test's vault; the environment that unlocks it.
    func installFixtureVault(_ name: String) throws -> [String: String] {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../MyStashKitTests/Fixtures/\(name)").standardizedFileURL
        try FileManager.default.createDirectory(
            at: vaultDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for store in ["Notes.sqlite", "Passwords.sqlite"] {
            let target = vaultDirectory.appendingPathComponent(store)
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(store), to: target)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        }
        return ["MYSTASH_PASSWORD": "fixture-password"]
    }
}

extension CLITestCase {
    /// Runs a shell script with the test environment and mystash on PATH.
    func shell(_ script: String, environment: [String: String] = [:], stdout: FileHandle? = nil,
               bash: Bool = false) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: bash ? "/bin/bash" : "/bin/sh")
        process.arguments = ["-c", script]
        var env = baseEnvironment.merging(environment) { _, new in new }
        env["PATH"] = Self.binary.deletingLastPathComponent().path + ":" + (env["PATH"] ?? "")
        process.environment = env
        return try execute(process, stdin: nil, stdout: stdout)
    }
}

extension CLITestCase {
    /// A stand-in for xclip: `-in` keeps standard input in a file, `-out` prints it.
    func fakeClipboard() throws -> (bin: URL, store: URL) {
        let bin = home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let store = home.appendingPathComponent("clipboard")
        let script = """
        #!/bin/sh
        for a in "$@"; do
          case "$a" in -in) cat > '\(store.path)'; exit 0;; -out) cat '\(store.path)'; exit 0;; esac
        done
        exit 1
        """
        let tool = bin.appendingPathComponent("xclip")
        try script.write(to: tool, atomically: true, encoding: .utf8)
        chmod(tool.path, 0o700)
        return (bin, store)
    }
}
