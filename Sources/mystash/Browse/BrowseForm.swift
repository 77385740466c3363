import Foundation
import MyStashKit
import TerminalUI

/// The add and edit screens: labelled fields typed in place, and the vault's validation
/// messages shown under them when a save is refused (nothing is saved then). Typing goes where
/// the cursor is; a multi-line field (a note's text, an entry's notes) is edited line by line,
/// as in a text editor: Enter breaks the line, ↑ ↓ move between its lines.
struct BrowseForm: Codable {
    enum Purpose: Equatable, Codable {
        case addEntry, editEntry(Int64), addNote, editNote(Int64)

        var isNote: Bool {
            switch self {
            case .addNote, .editNote: return true
            case .addEntry, .editEntry: return false
            }
        }
    }

    struct Field: Codable {
        var label: String
        var value: String
        var isSecret = false
        /// Enter adds a line instead of moving on.
        var isMultiline = false
        /// What the field held when the form opened.
        let initial: String
        /// Where typing goes: an offset in characters, from 0 to the value's count.
        var cursor: Int

        init(label: String, value: String, isSecret: Bool = false, isMultiline: Bool = false) {
            self.label = label
            self.value = value
            self.isSecret = isSecret
            self.isMultiline = isMultiline
            initial = value
            cursor = value.count
        }

        /// The value's lines (one for a single-line field).
        var lines: [Substring] { value.split(separator: "\n", omittingEmptySubsequences: false) }

        /// The cursor's line and column, in characters.
        var position: (line: Int, column: Int) {
            let before = value.prefix(min(max(0, cursor), value.count))
            let line = before.filter { $0 == "\n" }.count
            let column = before.count - (before.lastIndex(of: "\n").map { before.distance(from: before.startIndex,
                                                                                           to: $0) + 1 } ?? 0)
            return (line, column)
        }

        /// Puts the cursor on `line` at `column`, or at the end of that line when it is shorter.
        mutating func move(toLine line: Int, column: Int) {
            let lines = self.lines
            let target = min(max(0, line), lines.count - 1)
            cursor = lines.prefix(target).reduce(0) { $0 + $1.count + 1 } + min(column, lines[target].count)
        }

        mutating func insert(_ text: String) {
            var characters = Array(value)
            let at = min(max(0, cursor), characters.count)
            characters.insert(contentsOf: text, at: at)
            value = String(characters)
            cursor = at + text.count
        }

        /// Removes the character before the cursor (`before`) or under it.
        mutating func delete(before: Bool) {
            var characters = Array(value)
            let at = min(max(0, cursor), characters.count) - (before ? 1 : 0)
            guard characters.indices.contains(at) else { return }
            characters.remove(at: at)
            value = String(characters)
            cursor = at
        }
    }

    /// What a key asks of the screen that shows the form.
    enum Outcome {
        case stay, save, cancel
    }

    var purpose: Purpose
    var fields: [Field]
    var focus = 0
    /// The refusal, as the CLI prints it: `Error: ...`, the lines behind it, `hint: ...`.
    var errors: [String] = []

    var title: String {
        switch purpose {
        case .addEntry: return "New password entry"
        case .editEntry(let id): return "Edit entry \(id)"
        case .addNote: return "New note"
        case .editNote(let id): return "Edit note \(id)"
        }
    }

    static func entry(_ info: EntryInfo? = nil) -> BrowseForm {
        BrowseForm(purpose: info.map { .editEntry($0.id) } ?? .addEntry, fields: [
            Field(label: "Name", value: info?.name ?? ""),
            Field(label: "User", value: info?.userId ?? ""),
            Field(label: info == nil ? "Password" : "Password (empty: keep)", value: "", isSecret: true),
            Field(label: "URL", value: info?.url ?? ""),
            Field(label: "Category", value: info?.category ?? ""),
            Field(label: "Notes", value: info?.notes ?? "", isMultiline: true),
            Field(label: "TOTP secret", value: info?.totp ?? "", isSecret: true),
        ])
    }

    static func note(title: String = "", text: String = "", id: Int64? = nil) -> BrowseForm {
        BrowseForm(purpose: id.map { .editNote($0) } ?? .addNote, fields: [
            Field(label: "Title", value: title),
            Field(label: "Text", value: text, isMultiline: true),
        ])
    }

    func value(_ index: Int) -> String { fields[index].value }

    /// The field's value if it was changed, else nil: an edit sets only what the person
    /// changed, so it neither overwrites nor, when undone, takes back other changes.
    func changed(_ index: Int) -> String? { fields[index].value == fields[index].initial ? nil : fields[index].value }

    mutating func handle(_ event: TerminalScreen.Event) -> Outcome {
        switch event {
        case .paste(let text):
            fields[focus].insert(fields[focus].isMultiline ? text : text.replacingOccurrences(of: "\n", with: " "))
        case .key(let key):
            let index = focus
            var field = fields[index]
            let (line, column) = field.position
            switch key {
            case .escape: return .cancel
            case .control("s"): return .save
            case .tab: focus = (focus + 1) % fields.count
            case .backTab: focus = (focus + fields.count - 1) % fields.count
            case .up:
                guard field.isMultiline, line > 0 else { focus = (focus + fields.count - 1) % fields.count; break }
                field.move(toLine: line - 1, column: column)
            case .down:
                guard field.isMultiline, line < field.lines.count - 1 else { focus = (focus + 1) % fields.count; break }
                field.move(toLine: line + 1, column: column)
            case .left: field.cursor = max(0, field.cursor - 1)
            case .right: field.cursor = min(field.value.count, field.cursor + 1)
            case .home: field.move(toLine: line, column: 0)
            case .end: field.move(toLine: line, column: Int.max)
            case .enter:
                if field.isMultiline { field.insert("\n"); break }
                if focus == fields.count - 1 { return .save }
                focus += 1
            case .backspace: field.delete(before: true)
            case .delete: field.delete(before: false)
            case .control("u"):
                field.value = ""
                field.cursor = 0
            case .character(let character): field.insert(String(character))
            default: break
            }
            fields[index] = field
        case .resized, .resumed: break
        }
        return .stay
    }
}
