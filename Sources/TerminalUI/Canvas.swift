/// How a run of text looks. With colours off (NO_COLOR), only attributes remain, so
/// selection and emphasis still show through reverse video and bold.
public struct Style: Equatable, Sendable {
    public enum Color: Int, Sendable {
        case red = 1, green, yellow, blue, magenta, cyan
    }

    public var bold = false
    public var dim = false
    public var reverse = false
    public var underline = false
    public var foreground: Color?

    public init(bold: Bool = false, dim: Bool = false, reverse: Bool = false, underline: Bool = false,
                foreground: Color? = nil) {
        self.bold = bold
        self.dim = dim
        self.reverse = reverse
        self.underline = underline
        self.foreground = foreground
    }

    public static let plain = Style()

    /// The SGR sequence that sets this style from a reset.
    func sequence(colors: Bool) -> String {
        var codes: [String] = ["0"]
        if bold { codes.append("1") }
        if dim { codes.append("2") }
        if underline { codes.append("4") }
        if reverse { codes.append("7") }
        if colors, let foreground { codes.append(String(30 + foreground.rawValue)) }
        return "\u{1B}[" + codes.joined(separator: ";") + "m"
    }
}

/// One frame: a grid of rows, each a list of styled runs exactly `columns` wide.
/// Drawing never goes past the edges, whatever the text.
public struct Canvas {
    public let rows: Int
    public let columns: Int
    private(set) var lines: [[(text: String, style: Style)]]

    public init(rows: Int, columns: Int) {
        self.rows = max(1, rows)
        self.columns = max(1, columns)
        lines = Array(repeating: [], count: self.rows)
    }

    /// Writes `text` at `row`, starting at `column`, cut to `width` columns (default: to
    /// the right edge) and padded with spaces to it when `fill` is set.
    public mutating func draw(_ text: String, row: Int, column: Int = 0, width: Int? = nil, style: Style = .plain,
                              fill: Bool = false) {
        guard row >= 0, row < rows, column >= 0, column < columns else { return }
        let available = min(width ?? (columns - column), columns - column)
        guard available > 0 else { return }
        let fitted = fill ? TextWidth.fitted(text, to: available) : TextWidth.truncated(text, to: available)
        let start = columnsUsed(row)
        if start < column { lines[row].append((String(repeating: " ", count: column - start), .plain)) }
        guard start <= column else { return }  // runs are drawn left to right; overlaps are dropped
        lines[row].append((fitted, style))
    }

    func columnsUsed(_ row: Int) -> Int {
        lines[row].reduce(0) { $0 + TextWidth.columns(of: $1.text) }
    }

    /// The plain text of a row, as a test or a screen reader would see it.
    public func text(ofRow row: Int) -> String {
        lines[row].map(\.text).joined()
    }

    /// The bytes that draw one row from its first column, clearing what is right of it.
    func encoded(row: Int, colors: Bool) -> String {
        var output = ""
        var current: Style?
        for run in lines[row] {
            if run.style != current {
                output += run.style.sequence(colors: colors)
                current = run.style
            }
            output += run.text
        }
        if current != .plain && current != nil { output += "\u{1B}[0m" }
        // Erasing from the last column would erase its character: the cursor stays on it.
        return columnsUsed(row) < columns ? output + "\u{1B}[K" : output
    }
}

/// Sends frames to the terminal, redrawing only the rows that changed since the last one.
public struct Renderer {
    /// Colour unless NO_COLOR is set to anything non-empty (no-color.org) or TERM is dumb.
    public let colors: Bool
    private var previous: [String] = []

    public init(environment: [String: String]) {
        let noColor = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        colors = !noColor && environment["TERM"] != "dumb"
    }

    /// Forgets what is on screen, so the next frame is drawn whole (after a resize or resume).
    public mutating func invalidate() { previous = [] }

    /// The bytes that turn the previous frame into `canvas`.
    public mutating func update(to canvas: Canvas) -> String {
        var output = ""
        if previous.count != canvas.rows {
            output += "\u{1B}[0m\u{1B}[2J"
            previous = Array(repeating: "\u{0}", count: canvas.rows)
        }
        for row in 0..<canvas.rows {
            let line = canvas.encoded(row: row, colors: colors)
            guard line != previous[row] else { continue }
            output += "\u{1B}[\(row + 1);1H" + line
            previous[row] = line
        }
        return output
    }
}
