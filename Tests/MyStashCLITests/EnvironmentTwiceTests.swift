import Foundation
import XCTest

/// A variable `execve` gave twice reads as its last definition, as `ProcessInfo.environment`
/// (and so every child's environment) has it: the vault a command opens is the one a child
/// it starts would be told of.
final class EnvironmentTwiceTests: CLITestCase {
    func testAVariableGivenTwiceReadsAsItsLastDefinition() throws {
        let first = home.appendingPathComponent("first-vault").path
        let last = home.appendingPathComponent("last-vault").path
        let definitions = [
            "HOME=\(home.path)", "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "MYSTASH_VAULT=\(first)",
            "MYSTASH_VAULT_OTHER=unrelated", "MYSTASH_VAULT=\(last)",
        ]
        let errors = home.appendingPathComponent("stderr").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        func cStrings(_ texts: [String]) -> [UnsafeMutablePointer<CChar>?] { texts.map { strdup($0) } + [nil] }
        let arguments = cStrings([Self.binary.path, "password", "list"])
        let environment = cStrings(definitions)
        defer { (arguments + environment).forEach { free($0) } }
        var child = pid_t()
        XCTAssertEqual(posix_spawn(&child, Self.binary.path, &actions, nil, arguments, environment), 0)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertEqual((status >> 8) & 0xFF, 66, "no vault there")
        let message = try String(contentsOfFile: errors, encoding: .utf8)
        XCTAssertTrue(message.contains("there is no vault at '\(last)'"), message)
        XCTAssertFalse(message.contains(first), message)
    }
}
