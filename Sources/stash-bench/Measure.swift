import Foundation

/// One timed run: wall-clock seconds of the measured work and the process's peak RSS.
struct Measurement: Codable {
    var seconds: Double
    var rssKiB: Int
}

/// Seconds elapsed while `body` runs, on the monotonic clock.
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Runs a command with stdin from `stdinPath` (else /dev/null) and stdout discarded;
/// returns its wall time, its own peak RSS (from wait4), its status and its stderr.
func runTimed(
    _ executable: String, _ arguments: [String], environment: [String: String], stdinPath: String? = nil
) throws -> (Measurement, Int32, String) {
    let errorPath = FileManager.default.temporaryDirectory.appendingPathComponent("bench-stderr-\(UUID().uuidString)")
        .path
    defer { unlink(errorPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdinPath ?? "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    // Linux carries the spawning process's memory high-water mark over exec, so children
    // are started by GNU time (a tiny process) and their peak RSS is read from its report.
    let timer = "/usr/bin/time"
    let wrapped =
        FileManager.default.isExecutableFile(atPath: timer) ? [timer, "-f", "MAXRSS:%M", executable] : [executable]
    let argv = (wrapped + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    var pid: pid_t = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let spawned = posix_spawn(&pid, wrapped[0], &actions, nil, argv, envp)
    guard spawned == 0 else { throw BenchError("cannot run \(executable): \(String(cString: strerror(spawned)))") }
    var status: Int32 = 0
    _ = waitpid(pid, &status, 0)
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    var stderrText = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
    var rss = -1  // unknown without GNU time
    if let line = stderrText.split(separator: "\n").last(where: { $0.hasPrefix("MAXRSS:") }) {
        rss = Int(line.dropFirst("MAXRSS:".count)) ?? -1
        stderrText = stderrText.split(separator: "\n").filter { !$0.hasPrefix("MAXRSS:") }.joined(separator: "\n")
    }
    return (Measurement(seconds: seconds, rssKiB: rss), exitStatus, stderrText)
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
