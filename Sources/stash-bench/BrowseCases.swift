import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `mystash browse` on a pseudo-terminal, timed from outside as a person sees it: from the
/// start to the first complete frame, and from each key press while filtering to its frame.
/// The browser ends every frame with `ESC[?25l` (hide the cursor), which marks where a frame ends.
struct PseudoTerminalRun {
    static let frameEnd = Array("\u{1B}[?25l".utf8)
    /// Keys go to util-linux `script`, which runs the command on a new pseudo-terminal
    /// (80×24) as its controlling terminal and relays what it draws.
    let input: Int32
    let master: Int32
    let pid: pid_t
    let started: UInt64
    let rssPath: String
    private(set) var output: [UInt8] = []

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        rssPath = FileManager.default.temporaryDirectory.appendingPathComponent("browse-rss-\(UUID().uuidString)").path
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            throw BenchError("no pipe: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 2)
        for descriptor in toChild + fromChild { posix_spawn_file_actions_addclose(&actions, descriptor) }
        let quoted = (["/usr/bin/time", "-o", rssPath, "-f", "%M", executable] + arguments)
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let words = ["/usr/bin/script", "-qfec", quoted, "/dev/null"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        started = DispatchTime.now().uptimeNanoseconds
        let spawned = posix_spawn(&pid, words[0], &actions, nil, argv, envp)
        close(toChild[0])
        close(fromChild[1])
        guard spawned == 0 else { throw BenchError("cannot run script: \(String(cString: strerror(spawned)))") }
        self.pid = pid
        input = toChild[1]
        master = fromChild[0]
    }

    /// Reads until `marker` appears after byte `offset` of the output; returns the
    /// monotonic time then and where the marker ends.
    mutating func waitFor(_ marker: [UInt8], after offset: Int,
                          timeout: Double = 30) throws -> (nanoseconds: UInt64, end: Int) {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = Self.find(marker, in: output, from: offset) {
                return (DispatchTime.now().uptimeNanoseconds, end)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else {
                throw BenchError("browse did not show '\(String(decoding: marker, as: UTF8.self))' in \(timeout) s")
            }
            var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32((deadline - now) / 1_000_000) + 1) > 0 else { continue }
            let count = read(master, &buffer, buffer.count)
            guard count > 0 else { throw BenchError("browse closed its terminal") }
            output += buffer.prefix(count)
        }
    }

    func send(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { write(input, $0.baseAddress, $0.count - 1) }
    }

    /// Waits for the process to end (after Ctrl-Q); its peak RSS in KiB.
    func finish() -> Int {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(master)
        close(input)
        defer { unlink(rssPath) }
        let report = (try? String(contentsOfFile: rssPath, encoding: .utf8)) ?? ""
        return Int(report.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Ends a run that failed: without `script` the terminal goes away, so browse gets
    /// SIGHUP and exits, as when a window closes.
    func abandon() {
        kill(pid, SIGKILL)
        _ = finish()
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for index in start...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index + needle.count }
        }
        return nil
    }
}

extension VaultBench {
    /// Runs browse `repeats` times: the first paint of each run, and every key press of
    /// typing then erasing a filter that narrows 10,000 entries to one.
    func browseTimings(environment: [String: String]) throws
        -> (firstPaint: [Double], keystrokes: [Double], externalChanges: [Double], rssKiB: Int) {
        var firstPaints: [Double] = []
        var keystrokes: [Double] = []
        var externalChanges: [Double] = []
        var rss = 0
        let filter = "site-\(size / 2 + 7)"
        for _ in 0..<repeats {
            var run = try PseudoTerminalRun(mystash, ["browse", "--idle-lock", "0"], environment: environment)
            var finished = false
            defer { if !finished { run.abandon() } }
            let title = try run.waitFor(Array("Passwords (\(size))".utf8), after: 0)
            let painted = try run.waitFor(PseudoTerminalRun.frameEnd, after: title.end)
            firstPaints.append(Double(painted.nanoseconds - run.started) / 1e9)
            let keys = filter.map(String.init) + Array(repeating: "\u{7F}", count: filter.count)
            for (index, key) in keys.enumerated() {
                let offset = run.output.count
                let sent = DispatchTime.now().uptimeNanoseconds
                run.send(key)
                let frame = try run.waitFor(PseudoTerminalRun.frameEnd, after: offset)
                keystrokes.append(Double(frame.nanoseconds - sent) / 1e9)
                let narrowed = PseudoTerminalRun.find(Array("Passwords (1)".utf8), in: run.output, from: offset) != nil
                if index == filter.count - 1, !narrowed {
                    throw BenchError("browse: the filter '\(filter)' did not narrow the list to one entry")
                }
            }
            // Another process changes the selected entry (the filter's, still selected after it
            // is erased); the view follows without a key press.
            let offset = run.output.count
            let user = "followed-\(UUID().uuidString.prefix(8))"
            _ = try mystashRun(["password", "edit", filter, "--user", user], removing: ["MYSTASH_PASSWORD"])
            let committed = DispatchTime.now().uptimeNanoseconds
            let shown = try run.waitFor(Array(user.utf8), after: offset)
            externalChanges.append(Double(shown.nanoseconds - committed) / 1e9)
            run.send("\u{11}")
            finished = true
            rss = max(rss, run.finish())
        }
        return (firstPaints, keystrokes, externalChanges, rss)
    }
}

/// The browse rows of the report: first paint against `password list` in the same run and
/// against its 0.3 s target; key presses (median, slowest in the note) against 0.03 s; from
/// another process's commit to the frame showing it, against 1 s.
func browseResults(_ timings: (firstPaint: [Double], keystrokes: [Double], externalChanges: [Double], rssKiB: Int),
                   list: (seconds: Double, rssKiB: Int)) -> [CaseResult] {
    let paint = median(timings.firstPaint)
    let key = median(timings.keystrokes)
    let slowest = timings.keystrokes.max() ?? .nan
    let mib = Double(timings.rssKiB) / 1024
    let keyNote = String(format: "slowest of %d: %.4f s", timings.keystrokes.count, slowest)
    return [
        CaseResult(name: "browse.firstPaint", ours_s: paint, ours_rss_mib: mib, ours_session_s: paint,
                   baseline: "mystash password list --json", baseline_s: list.seconds,
                   baseline_rss_mib: Double(list.rssKiB) / 1024,
                   ratio: paint / list.seconds),
        CaseResult(name: "browse.firstPaint", ours_s: paint, ours_rss_mib: mib, ours_session_s: paint,
                   baseline: "target", baseline_s: 0.3, ratio: paint / 0.3),
        CaseResult(name: "browse.keystroke", ours_s: key, ours_rss_mib: mib, ours_session_s: key,
                   baseline: "target", baseline_s: 0.03, ratio: key / 0.03, note: keyNote),
        CaseResult(name: "browse.keystroke", ours_s: slowest, ours_rss_mib: mib, ours_session_s: slowest,
                   baseline: "target (slowest key press)", baseline_s: 0.03, ratio: slowest / 0.03),
        CaseResult(name: "browse.externalChange", ours_s: median(timings.externalChanges), ours_rss_mib: mib,
                   ours_session_s: median(timings.externalChanges), baseline: "target", baseline_s: 1,
                   ratio: median(timings.externalChanges)),
    ]
}
