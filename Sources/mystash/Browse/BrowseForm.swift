import Foundation
import MyStashKit
import TerminalUI

/// The add and edit screens: labelled fields typed in place, and the vault's validation
/// messages shown under them when a save is refused (nothing is saved then).
struct BrowseForm {
    enum Purpose: Equatable {
        case addEntry, editEntry(Int64), addNote, editNote(Int64)
    }

    struct Field {
        var label: String
        var value: String
        var isSecret = false
        /// Enter adds a line instead of moving on.
        var isMultiline = false
        /// What the field held when the form opened.
        let initial: String

        init(label: String, value: String, isSecret: Bool = false, isMultiline: Bool = false) {
            self.label = label
            self.value = value
            self.isSecret = isSecret
            self.isMultiline = isMultiline
            initial = value
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
            fields[focus].value += fields[focus].isMultiline ? text : text.replacingOccurrences(of: "\n", with: " ")
        case .key(let key):
            switch key {
            case .escape: return .cancel
            case .control("s"): return .save
            case .tab, .down: focus = (focus + 1) % fields.count
            case .backTab, .up: focus = (focus + fields.count - 1) % fields.count
            case .enter:
                if fields[focus].isMultiline { fields[focus].value += "\n"; break }
                if focus == fields.count - 1 { return .save }
                focus += 1
            case .backspace:
                if !fields[focus].value.isEmpty { fields[focus].value.removeLast() }
            case .control("u"): fields[focus].value = ""
            case .character(let character): fields[focus].value.append(character)
            default: break
            }
        case .resized, .resumed: break
        }
        return .stay
    }
}
