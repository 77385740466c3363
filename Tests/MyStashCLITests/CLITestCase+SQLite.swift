import Foundation

extension CLITestCase {
    /// Runs the sqlite3 tool on a file, as someone editing the vault from outside would.
    func sqlite(_ file: URL, _ sql: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [file.path, sql]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

extension CLITestCase {
    /// Puts the version-1 vault of MyStashKitTests/Fixtures/vault-v1 where the commands look, and
    /// returns the environment that gives its master password.
    func installVersion1Vault() throws -> [String: String] {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../MyStashKitTests/Fixtures/vault-v1").standardizedFileURL
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
