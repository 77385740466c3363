import Foundation
import MyStashKit
import TerminalUI

/// How the browser looks: tabs on top, the filter under them, the list with the selected
/// item's details beside it (or below it on a narrow terminal), and a status line.
extension Browser {
    static let mask = "••••••••"
    private static let heading = Style(bold: true, foreground: .cyan)
    private static let faint = Style(dim: true)
    private static let selected = Style(reverse: true)
    private static let failure = Style(bold: true, foreground: .red)

    func draw(on canvas: inout Canvas) {
        guard canvas.rows >= 6, canvas.columns >= 20 else {
            canvas.draw("Too small", row: 0)
            return
        }
        if isLocked { return drawLocked(on: &canvas) }
        drawTabs(on: &canvas)
        drawFilter(on: &canvas)
        let body = (top: 2, height: canvas.rows - 3)
        switch mode {
        case .help(let offset): drawHelp(offset: offset, on: &canvas, top: body.top, height: body.height)
        case .health(let lines, let offset): drawHealth(lines, offset: offset, on: &canvas, top: body.top,
                                                        height: body.height)
        case .form(let form): drawForm(form, on: &canvas, top: body.top, height: body.height)
        default: drawListAndDetail(on: &canvas, top: body.top, height: body.height)
        }
        drawStatus(on: &canvas)
    }

    private func drawTabs(on canvas: inout Canvas) {
        var column = 0
        for candidate in Tab.allCases {
            let count = lists[candidate].flatMap { $0.isLoaded ? "\($0.visibleRows.count)" : nil }
            let label = " \(candidate.title)\(count.map { " (\($0))" } ?? "") "
            let style = candidate == tab ? Style(bold: true, reverse: true) : Self.faint
            canvas.draw(label, row: 0, column: column, style: style)
            column += TextWidth.columns(of: label) + 1
        }
        let name = "MyStash"
        if canvas.columns - column > name.count + 1 {
            canvas.draw(name, row: 0, column: canvas.columns - name.count, style: Self.faint)
        }
    }

    private func drawFilter(on canvas: inout Canvas) {
        let label = "Filter: "
        canvas.draw(label, row: 1, style: Self.faint)
        let room = canvas.columns - label.count - 1
        if list.filter.isEmpty {
            canvas.draw("type to filter · F1 or ? for help", row: 1, column: label.count, style: Self.faint)
        } else {
            // The end of the filter stays in view as it grows.
            var shown = list.filter
            while TextWidth.columns(of: shown) > room - 1, !shown.isEmpty { shown.removeFirst() }
            canvas.draw(shown, row: 1, column: label.count)
            canvas.draw(" ", row: 1, column: label.count + TextWidth.columns(of: shown), style: Self.selected)
        }
    }

    private func drawStatus(on canvas: inout Canvas) {
        let row = canvas.rows - 1
        if case .confirmDelete(let item) = mode {
            let files = attachmentCount(of: item)
            let also = files == 0 ? "" : " and its \(files) attachment\(files == 1 ? "" : "s") (for good)"
            canvas.draw("Delete \(tab.noun) \(item.id) '\(item.title)'\(also)? y/n", row: row,
                        style: Style(bold: true, reverse: true), fill: true)
        } else if let status {
            canvas.draw(status.text, row: row, style: status.isError ? Self.failure : Style(bold: true), fill: true)
        } else if case .form(let form) = mode {
            let multiline = form.fields[form.focus].isMultiline
            canvas.draw((multiline ? "Enter new line · ↑ ↓ lines · " : "") + "Tab next · Ctrl-S save · Esc cancel",
                        row: row, style: Self.faint)
        } else {
            // The way out and to the help first: a narrow terminal cuts the end.
            canvas.draw("F1 help ^Q quit ^N add ^E edit ^D del ^R reveal ^P/^Y copy ^Z undo ^L lock", row: row,
                        style: Self.faint)
        }
    }

    // MARK: - List and detail

    private func drawListAndDetail(on canvas: inout Canvas, top: Int, height: Int) {
        if canvas.columns >= 72 {
            let listWidth = canvas.columns * 45 / 100
            drawList(on: &canvas, top: top, height: height, width: listWidth)
            for row in top..<(top + height) { canvas.draw("│", row: row, column: listWidth, style: Self.faint) }
            drawDetail(on: &canvas, top: top, height: height, column: listWidth + 2,
                       width: canvas.columns - listWidth - 2)
        } else {
            let listHeight = max(3, height * 55 / 100)
            drawList(on: &canvas, top: top, height: listHeight, width: canvas.columns)
            canvas.draw(String(repeating: "─", count: canvas.columns), row: top + listHeight, style: Self.faint)
            drawDetail(on: &canvas, top: top + listHeight + 1, height: height - listHeight - 1, column: 0,
                       width: canvas.columns)
        }
    }

    private func drawList(on canvas: inout Canvas, top: Int, height: Int, width: Int) {
        let list = self.list
        guard !list.visibleRows.isEmpty else {
            let empty = list.totalCount == 0 ? "No \(tab == .notes ? "notes" : "entries") yet: Ctrl-N adds one."
                                             : "Nothing matches '\(list.filter)'."
            canvas.draw(empty, row: top, width: width, style: Self.faint)
            return
        }
        let selectedLine = list.lineOfRow[list.selectedIndex]
        var first = scrollTop[tab] ?? 0
        if selectedLine < first {
            // Scrolling up shows the section header above the first row too.
            first = selectedLine > 0 && isHeader(list.lines[selectedLine - 1]) ? selectedLine - 1 : selectedLine
        }
        if selectedLine >= first + height { first = selectedLine - height + 1 }
        first = max(0, min(first, list.lines.count - 1))
        scrollTop[tab] = first
        for (offset, line) in list.lines[first..<min(list.lines.count, first + height)].enumerated() {
            let row = top + offset
            switch line {
            case .header(let name, let count):
                canvas.draw("\(name) (\(count))", row: row, width: width, style: Self.heading)
            case .row(let item):
                let isSelected = offset + first == selectedLine
                let subtitle = width >= 30 ? item.subtitle : ""
                let subtitleWidth = subtitle.isEmpty ? 0 : min(TextWidth.columns(of: subtitle), width / 3)
                let titleWidth = width - 2 - (subtitleWidth > 0 ? subtitleWidth + 1 : 0)
                let text = "  " + TextWidth.fitted(item.title.isEmpty ? "(untitled)" : item.title, to: titleWidth)
                    + (subtitleWidth > 0 ? " " + TextWidth.fitted(subtitle, to: subtitleWidth) : "")
                canvas.draw(text, row: row, width: width, style: isSelected ? Self.selected : .plain, fill: true)
            }
        }
    }

    private func isHeader(_ line: BrowseList.Line) -> Bool {
        if case .header = line { return true }
        return false
    }

    private func drawDetail(on canvas: inout Canvas, top: Int, height: Int, column: Int, width: Int) {
        guard height > 0, width > 4, let detail = selectedDetail() else { return }
        var lines: [(String, Style)] = []
        func field(_ label: String, _ value: String?, style: Style = .plain) {
            guard let value, !value.isEmpty else { return }
            let prefix = label.padding(toLength: 10, withPad: " ", startingAt: 0)
            for (index, line) in TextWidth.wrapped(value, to: max(1, width - 10)).enumerated() {
                lines.append(((index == 0 ? prefix : String(repeating: " ", count: 10)) + line, style))
            }
        }
        switch detail {
        case .entry(let entry):
            field("Name", entry.name, style: Style(bold: true))
            field("User", entry.userId)
            field("Password", revealed ? entry.password ?? "" : Self.mask + "  (^R shows)",
                  style: revealed ? Style(foreground: .yellow) : Self.faint)
            if entry.hasTOTP == true { field("OTP", oneTimeCode(entry), style: revealed ? .plain : Self.faint) }
            field("URL", entry.url)
            field("Category", entry.category)
            field("Notes", entry.notes)
            for attachment in entry.attachments ?? [] {
                field("Attached", "\(attachment.name) (\(Output.byteCount(attachment.size)))")
            }
            field("Changed", Output.date(entry.updatedAt), style: Self.faint)
            field("ID", String(entry.id), style: Self.faint)
        case .note(let note):
            lines.append((note.title, Style(bold: true)))
            lines.append(("changed \(Output.date(note.updatedAt)) · ID \(note.id)", Self.faint))
            lines.append(("", .plain))
            for line in TextWidth.wrapped(note.text ?? "", to: width) { lines.append((line, .plain)) }
        }
        for (offset, line) in lines.prefix(height).enumerated() {
            canvas.draw(line.0, row: top + offset, column: column, width: width, style: line.1)
        }
    }

    /// The entry's current one-time code with the seconds it has left, when revealed.
    private func oneTimeCode(_ entry: EntryInfo) -> String {
        guard revealed else { return "••••••  (^O copies)" }
        guard let (code, _) = try? vault.items.totpCode(.id(entry.id)) else {
            return "(the TOTP secret cannot be used)"
        }
        return "\(code.value)  (\(code.secondsLeft) s)"
    }

    // MARK: - Overlays

    private func drawForm(_ form: BrowseForm, on canvas: inout Canvas, top: Int, height: Int) {
        var row = top
        canvas.draw(form.title, row: row, style: Style(bold: true))
        row += 2
        let labelWidth = min(24, (form.fields.map { $0.label.count }.max() ?? 8) + 2)
        let narrow = canvas.columns < labelWidth + 20
        let valueColumn = narrow ? 4 : labelWidth + 2
        let room = canvas.columns - valueColumn - 1
        for (index, field) in form.fields.enumerated() where row < top + height {
            let focused = index == form.focus
            canvas.draw((focused ? "› " : "  ") + field.label + (narrow ? "" : ":"), row: row,
                        style: focused ? Style(bold: true) : Self.faint)
            if narrow { row += 1 }
            guard row < top + height else { break }
            let lines = field.isSecret ? [Substring(String(repeating: "•", count: field.value.count))] : field.lines
            let (cursorLine, cursorColumn) = field.isSecret ? (0, field.cursor) : field.position
            // A multi-line field takes the rows the fields below it leave (three at least while typed in),
            // scrolled so the cursor's line shows.
            let rowsBelow = (form.fields.count - index - 1) * (narrow ? 2 : 1) + 1
            let available = max(1, top + height - row - rowsBelow)
            let shown = field.isMultiline ? max(1, min(max(lines.count, focused ? 3 : 1), available)) : 1
            let first = focused ? min(max(0, cursorLine - shown + 1), max(0, lines.count - shown)) : 0
            for offset in 0..<shown where row < top + height {
                let number = first + offset
                let text = number < lines.count ? String(lines[number]) : ""
                if focused && number == cursorLine {
                    drawEditedLine(text, cursor: cursorColumn, on: &canvas, row: row, column: valueColumn, room: room)
                } else {
                    canvas.draw(TextWidth.fitted(text, to: room), row: row, column: valueColumn,
                                style: focused ? Style(underline: true) : .plain)
                }
                row += 1
            }
        }
        row += 1
        for line in form.errors where row < top + height {
            for wrapped in TextWidth.wrapped(line, to: canvas.columns) where row < top + height {
                canvas.draw(wrapped, row: row, style: Self.failure)
                row += 1
            }
        }
    }

    /// The line the cursor is on, shifted left as far as needed to keep the cursor in view,
    /// the character under the cursor (or a space) in reverse video.
    private func drawEditedLine(_ text: String, cursor: Int, on canvas: inout Canvas, row: Int, column: Int,
                                room: Int) {
        let characters = Array(text)
        let at = min(max(0, cursor), characters.count)
        var start = 0
        while start < at, TextWidth.columns(of: String(characters[start..<at])) > room - 1 { start += 1 }
        let visible = String(characters[start...])
        canvas.draw(TextWidth.fitted(visible, to: room), row: row, column: column, style: Style(underline: true))
        let under = at < characters.count ? String(characters[at]) : " "
        canvas.draw(under, row: row, column: column + TextWidth.columns(of: String(characters[start..<at])),
                    style: Self.selected)
    }

    static let helpKeys: [(String, String)] = [
        ("^Q, ^C", "quit"), ("type", "filter (names, users, URLs, note titles and texts)"),
        ("Esc, ^U", "clear the filter"),
        ("↑ ↓ PgUp PgDn", "move"), ("Tab ← →", "Notes / Passwords"),
        ("Enter, ^R", "show or hide the password"),
        ("^N", "add"), ("^E", "edit"), ("^D, Del", "delete (asks)"), ("^P", "copy the password"),
        ("^Y", "copy the user"), ("^O", "copy the one-time code"), ("^Z", "undo the last change"),
        ("^L", "lock now"), ("F2", "password health: weak, reused, old passwords"), ("F1, ?", "this help"),
    ]

    private func drawHelp(offset: Int, on canvas: inout Canvas, top: Int, height: Int) {
        let hidden = offset > 0 || Self.helpKeys.count > height - 2
        canvas.draw(hidden ? "Keys (↑ ↓ PgUp PgDn scroll, any other key closes this)" : "Keys (any key closes this)",
                    row: top, style: Style(bold: true))
        let keyWidth = min(15, canvas.columns / 3)
        var row = top + 2
        for (key, meaning) in Self.helpKeys.dropFirst(offset) where row < top + height {
            canvas.draw(key, row: row, width: keyWidth, style: Self.heading)
            canvas.draw(meaning, row: row, column: keyWidth)
            row += 1
        }
    }

    private func drawHealth(_ lines: [Health.Line], offset: Int, on canvas: inout Canvas, top: Int, height: Int) {
        canvas.draw("Password health (↑ ↓ PgUp PgDn scroll, any other key closes this)", row: top,
                    style: Style(bold: true))
        var row = top + 2
        for line in lines.dropFirst(offset) where row < top + height {
            let style: Style = switch line.kind {
            case .title: Self.heading
            case .header: Style(bold: true)
            case .row: .plain
            }
            canvas.draw(line.text, row: row, style: style)
            row += 1
        }
    }

    private func drawLocked(on canvas: inout Canvas) {
        let top = max(0, canvas.rows / 2 - 3)
        canvas.draw("MyStash is locked", row: top, style: Style(bold: true))
        canvas.draw(lockMessage ?? "", row: top + 1, style: Self.faint)
        canvas.draw("Master password: " + String(repeating: "•", count: min(lockPrompt.count, 32)), row: top + 3)
        if hasSession { canvas.draw("(Enter alone uses the unlocked session)", row: top + 4, style: Self.faint) }
        canvas.draw("Enter unlock · ^Q quit", row: canvas.rows - 1, style: Self.faint)
    }
}
