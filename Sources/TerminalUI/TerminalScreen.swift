#if canImport(Glibc)
import Glibc
#endif

/// What the terminal was like before we took it over, kept where a signal handler can reach
/// it: handlers may only call async-signal-safe functions (write, tcsetattr, signal, raise).
nonisolated(unsafe) private var savedDescriptor: Int32 = -1
nonisolated(unsafe) private var savedSettings = termios()
nonisolated(unsafe) private var isTakenOver = false
nonisolated(unsafe) private var wakeDescriptor: Int32 = -1

/// Leave the alternate screen after blanking it, show the cursor, reset attributes, leave
/// bracketed paste: what the person had before is back, and nothing we drew reaches scrollback.
private let restoreSequence: [UInt8] = Array("\u{1B}[0m\u{1B}[2J\u{1B}[?2004l\u{1B}[?7h\u{1B}[?25h\u{1B}[?1049l".utf8)
private let takeOverSequence: [UInt8] = Array("\u{1B}[?1049h\u{1B}[?25l\u{1B}[?7l\u{1B}[0m\u{1B}[2J\u{1B}[?2004h".utf8)

/// Async-signal-safe: puts the terminal back as it was.
private func restoreTerminalNow() {
    guard isTakenOver, savedDescriptor >= 0 else { return }
    isTakenOver = false
    restoreSequence.withUnsafeBufferPointer { _ = write(savedDescriptor, $0.baseAddress, $0.count) }
    _ = tcsetattr(savedDescriptor, TCSAFLUSH, &savedSettings)
}

private func enterRawModeNow() {
    guard !isTakenOver, savedDescriptor >= 0 else { return }
    var raw = savedSettings
    raw.c_iflag &= ~tcflag_t(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON)
    raw.c_oflag &= ~tcflag_t(OPOST)
    raw.c_lflag &= ~tcflag_t(ECHO | ECHONL | ICANON | ISIG | IEXTEN)
    raw.c_cflag |= tcflag_t(CS8)
    _ = tcsetattr(savedDescriptor, TCSAFLUSH, &raw)
    takeOverSequence.withUnsafeBufferPointer { _ = write(savedDescriptor, $0.baseAddress, $0.count) }
    isTakenOver = true
}

private func wake(_ byte: UInt8) {
    var value = byte
    if wakeDescriptor >= 0 { _ = write(wakeDescriptor, &value, 1) }
}

/// Signals that end the process: restore, then die of the same signal so the parent sees it.
private let fatalSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGSEGV, SIGBUS, SIGILL, SIGTRAP,
                                     SIGABRT, SIGFPE]

/// The terminal taken over for a full-screen program: raw mode, the alternate screen, no
/// cursor. Restored on ``restore()``, at exit, and on every signal that ends the process
/// (a crash included); Ctrl-Z suspends with the terminal restored and takes it back on `fg`.
///
/// Events arrive through ``readEvents(timeout:)``: keys, resizes (SIGWINCH), a return
/// from suspension, or a timeout, so a caller can update the screen without a key press.
public final class TerminalScreen {
    /// Something that happened while waiting.
    public enum Event: Equatable {
        case key(Key)
        case resized
        /// The process was continued after a suspension: everything must be drawn again.
        case resumed
        /// Text pasted while bracketed paste is on, delivered whole.
        case paste(String)
    }

    public let descriptor: Int32
    public private(set) var size: (rows: Int, columns: Int) = (24, 80)
    private var decoder = KeyDecoder()
    private let wakePipe: (read: Int32, write: Int32)
    private var pasting: [UInt8]?

    /// Takes over the controlling terminal (`/dev/tty`).
    ///
    /// - throws: ``TerminalError`` when there is no terminal.
    public init() throws {
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            throw TerminalError("there is no terminal to draw on (/dev/tty cannot be opened)")
        }
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else {
            close(descriptor)
            throw TerminalError("standard input is not a terminal")
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            close(descriptor)
            throw TerminalError("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        self.descriptor = descriptor
        wakePipe = (fds[0], fds[1])
        savedDescriptor = descriptor
        savedSettings = settings
        wakeDescriptor = fds[1]
        installSignalHandlers()
        atexit { restoreTerminalNow() }
        enterRawModeNow()
        updateSize()
    }

    deinit {
        restore()
        close(wakePipe.read)
        close(wakePipe.write)
    }

    /// Puts the terminal back as it was; safe to call more than once.
    public func restore() {
        restoreTerminalNow()
        for signalNumber in fatalSignals + [SIGWINCH, SIGTSTP, SIGCONT] { signal(signalNumber, SIG_DFL) }
    }

    /// Suspends the process as Ctrl-Z would, with the terminal restored while stopped.
    public func suspend() {
        restoreTerminalNow()
        raise(SIGTSTP)
    }

    private func installSignalHandlers() {
        for signalNumber in fatalSignals {
            signal(signalNumber) { number in
                restoreTerminalNow()
                signal(number, SIG_DFL)
                raise(number)
            }
        }
        signal(SIGWINCH) { _ in wake(UInt8(ascii: "w")) }
        signal(SIGTSTP) { _ in
            restoreTerminalNow()
            signal(SIGTSTP, SIG_DFL)
            raise(SIGTSTP)
        }
        signal(SIGCONT) { _ in
            enterRawModeNow()
            signal(SIGTSTP) { _ in
                restoreTerminalNow()
                signal(SIGTSTP, SIG_DFL)
                raise(SIGTSTP)
            }
            wake(UInt8(ascii: "c"))
        }
    }

    private func updateSize() {
        var window = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &window) == 0, window.ws_row > 0, window.ws_col > 0 {
            size = (Int(window.ws_row), Int(window.ws_col))
        }
    }

    /// Writes bytes to the terminal, all of them.
    public func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBufferPointer { buffer in
                Glibc.write(descriptor, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            offset += written
        }
    }

    /// Waits up to `timeout` seconds (nil: forever) for events; an empty array means the time ran out.
    public func readEvents(timeout: Double?) -> [Event] {
        var descriptors = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0)]
        let milliseconds = timeout.map { Int32(max(0, min($0, 86_400)) * 1000) } ?? -1
        let ready = poll(&descriptors, 2, milliseconds)
        guard ready > 0 else { return [] }
        var events: [Event] = []
        if descriptors[1].revents != 0 {
            var signals = [UInt8](repeating: 0, count: 64)
            let count = read(wakePipe.read, &signals, signals.count)
            let received = signals.prefix(max(0, count))
            if received.contains(UInt8(ascii: "c")) {
                updateSize()
                events.append(.resumed)
            } else if received.contains(UInt8(ascii: "w")) {
                updateSize()
                events.append(.resized)
            }
        }
        if descriptors[0].revents & Int16(POLLIN) != 0 {
            events += readKeys()
        } else if descriptors[0].revents & Int16(POLLHUP | POLLERR) != 0 {
            // The terminal went away (window closed): behave as SIGHUP would.
            events.append(.key(.control("c")))
        }
        return events
    }

    private func readKeys() -> [Event] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return count == 0 ? [.key(.control("c"))] : [] }
        var events = takePaste(Array(buffer.prefix(count)))
        if decoder.hasPendingEscape {
            // A lone ESC is the Escape key unless the rest of a sequence follows at once.
            var descriptors = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)]
            if poll(&descriptors, 1, 30) > 0 {
                let more = read(descriptor, &buffer, buffer.count)
                if more > 0 { events += takePaste(Array(buffer.prefix(more))) }
            }
            events += decoder.flushEscape().map(Event.key)
        }
        return events
    }

    /// Splits out bracketed paste (ESC[200~ ... ESC[201~), so pasted text is one event and
    /// a pasted newline does not press Enter.
    private func takePaste(_ bytes: [UInt8]) -> [Event] {
        let start = Array("\u{1B}[200~".utf8), end = Array("\u{1B}[201~".utf8)
        var events: [Event] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            if var pasted = pasting {
                if let range = firstRange(of: end, in: rest) {
                    pasted += rest[..<range.lowerBound]
                    events.append(.paste(String(decoding: pasted, as: UTF8.self)))
                    pasting = nil
                    rest = rest[range.upperBound...]
                } else {
                    pasting = pasted + rest
                    rest = []
                }
            } else if let range = firstRange(of: start, in: rest) {
                events += decoder.feed(Array(rest[..<range.lowerBound])).map(Event.key)
                pasting = []
                rest = rest[range.upperBound...]
            } else {
                events += decoder.feed(Array(rest)).map(Event.key)
                rest = []
            }
        }
        return events
    }

    private func firstRange(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Range<Int>? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index..<(index + needle.count) }
            index += 1
        }
        return nil
    }
}

/// Why the terminal cannot be used.
public struct TerminalError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
