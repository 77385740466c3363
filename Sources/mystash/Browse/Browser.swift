import Foundation
import MyStashKit
import StashPlatform
import StashCrypto
import TerminalUI

/// `mystash browse`: the vault's notes and passwords in one full-screen view, kept in step
/// with the vault, locked after a spell of idleness.
final class Browser {
    enum Tab: Int, CaseIterable {
        case notes, passwords

        var title: String { self == .notes ? "Notes" : "Passwords" }
        var noun: String { self == .notes ? "note" : "entry" }
    }

    enum Mode {
        case list
        case form(BrowseForm)
        /// The keys, scrolled by `offset` (a small terminal does not hold them all).
        case help(offset: Int)
        /// The health report's lines, scrolled by `offset`.
        case health([Health.Line], offset: Int)
        case confirmDelete(BrowseRow)
        case locked
    }

    /// The selected item with every field decrypted, for the detail pane.
    enum Detail {
        case note(NoteInfo)
        case entry(EntryInfo)

        var id: Int64 {
            switch self {
            case .note(let note): return note.id
            case .entry(let entry): return entry.id
            }
        }
    }

    let vault: Vault
    let screen: TerminalScreen
    var renderer: Renderer
    /// Seconds without a key press before the view locks; nil never locks.
    let idleLimit: TimeInterval?
    private let environment: [String: String]

    var tab: Tab
    /// The observations of the vault's items behind the lists.
    let results: BrowseResults
    var lists: [Tab: BrowseList] = [.notes: BrowseList(), .passwords: BrowseList()]
    var scrollTop: [Tab: Int] = [.notes: 0, .passwords: 0]
    var mode = Mode.list
    var detail: Detail?
    var revealed = false
    var status: (text: String, isError: Bool, until: Date)?
    var lockPrompt: [UInt8] = []
    var lockMessage: String?
    private var lastInput = Date()
    private var running = true

    init(vault: Vault, results: BrowseResults, screen: TerminalScreen, tab: Tab, idleLimit: TimeInterval?,
         environment: [String: String]) {
        self.vault = vault
        self.screen = screen
        self.tab = tab
        self.idleLimit = idleLimit
        self.environment = environment
        self.results = results
        renderer = Renderer(environment: environment)
    }

    var list: BrowseList {
        get { lists[tab] ?? BrowseList() }
        set { lists[tab] = newValue }
    }

    // MARK: - The loop

    /// Draws, then waits for keys, resizes and ticks until the person quits.
    func run() throws {
        try load(tab)
        paint()
        list.prepareSearch()
        while running {
            let events = screen.readEvents(timeout: 0.25)
            // What another process committed meanwhile is checked and followed before a key reads.
            if !events.isEmpty, !isLocked { followExternalChanges() }
            for event in events {
                lastInput = Date()
                try handle(event)
                if !running { break }
            }
            tick()
            paint()
            list.prepareSearch()
        }
    }

    /// What happens without a key press: idle locking, status messages running out.
    private func tick() {
        if let idleLimit, !isLocked, Date().timeIntervalSince(lastInput) >= idleLimit {
            lock(reason: "locked after \(Self.duration(idleLimit)) without a key press")
        }
        if !isLocked { followExternalChanges() }
        if let status, status.until < Date() { self.status = nil }
    }

    func paint() {
        var canvas = Canvas(rows: screen.size.rows, columns: screen.size.columns)
        draw(on: &canvas)
        let output = renderer.update(to: canvas)
        // Hiding the (hidden) cursor again marks where a frame ends, for timing from outside.
        if !output.isEmpty { screen.write(output + "\u{1B}[?25l") }
    }

    func say(_ text: String, isError: Bool = false, seconds: TimeInterval = 5) {
        status = (text, isError, Date().addingTimeInterval(seconds))
    }

    // MARK: - Loading

    /// Fetches a tab's items unless they are already followed, and makes the rows of every
    /// tab whose observation reported a change; the selection stays on its item where it can.
    func load(_ tab: Tab) throws {
        try results.fetch(tab)
        for changed in results.changedTabs {
            lists[changed, default: BrowseList()].replaceRows(results.rows(changed))
            detail = nil
        }
    }

    /// Follows other processes' commits: the observations hear of them from the vault.
    private func followExternalChanges() {
        guard results.isFetched else { return }
        do {
            if try vault.followExternalChanges() { try load(tab) }
        } catch {
            // A change made outside mystash, or a check that could not run: nothing read
            // since is shown.
            lock(reason: viewLines(error).first ?? "\(error)")
        }
    }

    /// The selected item's fields, decrypted when first needed.
    func selectedDetail() -> Detail? {
        guard let row = list.selectedRow else { return nil }
        if let detail, detail.id == row.id, detail.matches(tab) { return detail }
        do {
            switch tab {
            case .notes: detail = .note(try vault.items.note(.id(row.id)))
            case .passwords: detail = .entry(try vault.items.entry(.id(row.id), reveal: true))
            }
        } catch {
            detail = nil
            say(viewLines(error).first ?? "\(error)", isError: true)
        }
        return detail
    }

    // MARK: - Health

    /// The report `mystash health` prints (without a breach list), in place of the list.
    private func showHealth() {
        do {
            let report = try vault.items.healthReport(calibrated: try KDFPolicy.calibrated())
            let days = Int(HealthPolicy().maximumAge / 86400)
            mode = .health(Health.lines(report, maximumAgeDays: days), offset: 0)
        } catch {
            say(viewLines(error).first ?? "\(error)", isError: true)
        }
    }

    // MARK: - Keys

    func handle(_ event: TerminalScreen.Event) throws {
        switch event {
        case .resized, .resumed:
            renderer.invalidate()
            return
        default: break
        }
        switch mode {
        case .locked: try handleLocked(event)
        case .help(let offset):
            guard let move = scrollMove(event) else { return mode = .list }
            mode = .help(offset: min(max(0, offset + move), max(0, Self.helpKeys.count - 1)))
        case .health(let lines, let offset):
            guard let move = scrollMove(event) else { return mode = .list }
            mode = .health(lines, offset: min(max(0, offset + move), max(0, lines.count - 1)))
        case .form(var form):
            switch form.handle(event) {
            case .stay: mode = .form(form)
            case .cancel: mode = .list
            case .save: try save(form)
            }
        case .confirmDelete(let row):
            mode = .list
            if case .key(.character(let answer)) = event, answer == "y" || answer == "Y" { try delete(row) }
        case .list:
            try handleList(event)
        }
    }

    private func handleList(_ event: TerminalScreen.Event) throws {
        let key: Key
        switch event {
        case .paste(let text):
            list.setFilter(list.filter + text.replacingOccurrences(of: "\n", with: " "))
            return
        case .key(let pressed): key = pressed
        default: return
        }
        let previous = list.selectedRow?.id
        let page = max(1, screen.size.rows - 5)
        switch key {
        case .up: list.move(by: -1)
        case .down: list.move(by: 1)
        case .pageUp: list.move(by: -page)
        case .pageDown: list.move(by: page)
        case .home: list.move(by: -list.visibleRows.count)
        case .end: list.move(by: list.visibleRows.count)
        case .tab, .backTab, .left, .right: try switchTab()
        case .character("?") where list.filter.isEmpty: mode = .help(offset: 0)
        case .function(1): mode = .help(offset: 0)
        case .function(2): showHealth()
        case .character(let character): list.setFilter(list.filter + String(character))
        case .backspace:
            if !list.filter.isEmpty { list.setFilter(String(list.filter.dropLast())) }
        case .escape, .control("u"): list.setFilter("")
        case .enter, .control("r"): revealed.toggle()
        case .control("n"): mode = .form(tab == .notes ? .note() : .entry())
        case .control("e"): editSelected()
        case .control("d"), .delete:
            if let row = list.selectedRow { mode = .confirmDelete(row) }
        case .control("p"): copy("password", what: "the password")
        case .control("y"): copy("user", what: "the user")
        case .control("o"): copy("otp", what: "the one-time code")
        case .control("z"): undoLastChange()
        case .control("l"): lock(reason: "locked")
        case .control("c"), .control("q"): running = false
        default: break
        }
        if list.selectedRow?.id != previous { revealed = false }
    }

    private func switchTab() throws {
        tab = tab == .notes ? .passwords : .notes
        revealed = false
        detail = nil
        try load(tab)
    }

    private func editSelected() {
        guard list.selectedRow != nil, let detail = selectedDetail() else { return }
        switch detail {
        case .note(let note): mode = .form(.note(title: note.title, text: note.text ?? "", id: note.id))
        case .entry(let entry): mode = .form(.entry(entry))
        }
    }

    // MARK: - Changes

    /// Saves a form through the vault; a refusal stays on the form with the vault's messages.
    private func save(_ form: BrowseForm) throws {
        var form = form
        func optional(_ index: Int) -> String? { form.value(index).isEmpty ? nil : form.value(index) }
        do {
            let id: Int64
            switch form.purpose {
            case .addEntry:
                var changes = EntryChanges(name: form.value(0), userId: optional(1), url: optional(3),
                                           category: optional(4), password: form.value(2), notes: optional(5))
                changes.totp = optional(6)
                id = try vault.items.addEntry(changes)
            case .editEntry(let entryID):
                id = entryID
                var changes = EntryChanges(name: form.changed(0), userId: form.changed(1), url: form.changed(3),
                                           category: form.changed(4), password: form.changed(2), notes: form.changed(5))
                changes.totp = form.changed(6)
                try vault.items.editEntry(.id(id), changes)
            case .addNote:
                id = try vault.items.addNote(title: form.value(0), text: form.value(1))
            case .editNote(let noteID):
                id = noteID
                try vault.items.editNote(.id(id), title: form.changed(0), text: form.changed(1))
            }
            mode = .list
            try load(tab)
            list.setFilter("")
            list.select(id: id)
            let added = form.purpose == .addEntry || form.purpose == .addNote
            say(added ? "Added \(tab.noun) \(id)." : "Saved \(tab.noun) \(id).")
        } catch {
            form.errors = viewLines(error)
            mode = .form(form)
        }
    }

    /// How many attachments the item of `row` has, as its details show them.
    func attachmentCount(of row: BrowseRow) -> Int {
        guard tab == .passwords, case .entry(let entry)? = detail, entry.id == row.id else { return 0 }
        return entry.attachments?.count ?? 0
    }

    private func delete(_ row: BrowseRow) throws {
        // An entry's attachments go in saves of their own, which undo cannot take back.
        let files = attachmentCount(of: row)
        do {
            switch tab {
            case .notes: try vault.items.removeNote(.id(row.id))
            case .passwords: try vault.items.removeEntry(.id(row.id))
            }
            try load(tab)
            say("Removed \(tab.noun) \(row.id). Ctrl-Z brings it back"
                + (files == 0 ? "." : ", without its attachments."))
        } catch {
            say(viewLines(error).joined(separator: " "), isError: true)
        }
    }

    /// Copies a field of the selected entry to the clipboard, cleared after a while.
    private func copy(_ field: String, what: String) {
        guard tab == .passwords, let row = list.selectedRow else { return say("Select a password entry to copy from.") }
        do {
            let value = try vault.items.fieldValue(field, of: .id(row.id))
            say(try ClipboardCopy.copyReporting(value, what: what), seconds: 8)
        } catch {
            say(viewLines(error).joined(separator: " "), isError: true)
        }
    }

    /// Takes back the last change through the context's undo, after reading what other
    /// processes committed, so only the fields that change set are put back.
    private func undoLastChange() {
        guard vault.canUndo else { return say("Nothing to undo.") }
        do {
            try vault.followExternalChanges()
            guard let undone = try vault.undoLastChange() else {
                try load(tab)
                return say("Undone.")
            }
            tab = undone.isNote ? .notes : .passwords
            try load(tab)
            list.select(id: undone.id)
            let noun = "\(tab.noun) \(undone.id)"
            switch undone.kind {
            case .removed: say("Undone: \(noun) removed.")
            case .broughtBack: say("Undone: \(noun) is back.")
            case .reverted: say("Undone: \(noun) has its fields back.")
            case .alreadyBack: say("Undone: \(noun) was back already, brought back by a sync.")
            }
        } catch {
            say(viewLines(error).joined(separator: " "), isError: true)
        }
    }

    // MARK: - Locking

    var isLocked: Bool {
        if case .locked = mode { return true }
        return false
    }

    /// Drops every decrypted value (lists, detail, form, what the renderer remembers of the
    /// screen) and the data key, and asks for the master password.
    func lock(reason: String) {
        // Which tabs were loaded, each one's selected item and filter: kept (they hold no secret),
        // so unlocking shows the view as it was.
        keptAcrossLock = lists.compactMapValues { list in
            list.isLoaded ? (selected: list.selectedRow?.id, filter: list.filter) : nil
        }
        // A form being typed is kept sealed under the vault's key, which the lock then forgets.
        if case .form(let form) = mode { sealedForm = seal(form) }
        results.stop()
        vault.lock()
        for tab in Tab.allCases { lists[tab]?.clear() }
        detail = nil
        revealed = false
        status = nil
        renderer.invalidate()
        lockMessage = reason
        hasSession = KeyringSession.load(vaultIdentifier: vault.identifier) != nil
        lockPrompt.resetBytes(in: 0..<lockPrompt.count)
        lockPrompt = []
        mode = .locked
    }

    /// The form open when the view locked, sealed (``Vault/sealDraft(_:)``) until it unlocks.
    private var sealedForm: [UInt8]?

    private func seal(_ form: BrowseForm) -> [UInt8]? {
        guard var plaintext = try? JSONEncoder().encode(form) else { return nil }
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        return try? vault.sealDraft(Array(plaintext))
    }

    /// The form sealed when the view locked, opened again; the way it was left, errors and all.
    private func restoreSealedForm() {
        guard let sealed = sealedForm else { return }
        sealedForm = nil
        do {
            let plaintext = try vault.openSealedDraft(sealed)
            // Read in place: no copy of the plaintext is left behind.
            let form = try plaintext.withUnsafeBytes { bytes in
                try JSONDecoder().decode(BrowseForm.self, from: Data(
                    bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes.baseAddress!), count: bytes.count,
                    deallocator: .none))
            }
            mode = .form(form)
            say("Your unsaved \(form.purpose.isNote ? "note" : "entry") is back: Ctrl-S saves it.")
        } catch {
            say("The form open when the view locked could not be brought back: \(viewLines(error).first ?? "")",
                isError: true)
        }
    }

    /// Whether an unlocked session could unlock the view, looked up once when it locks.
    private(set) var hasSession = false
    /// The tabs loaded when the view locked, with the item selected in each and the filter typed.
    private var keptAcrossLock: [Tab: (selected: Int64?, filter: String)] = [:]

    private func handleLocked(_ event: TerminalScreen.Event) throws {
        guard case .key(let key) = event else {
            if case .paste(let text) = event { lockPrompt += Array(text.utf8) }
            return
        }
        switch key {
        case .character(let character): lockPrompt += Array(String(character).utf8)
        case .backspace:
            if !lockPrompt.isEmpty { lockPrompt.removeLast() }
        case .control("u"), .escape: lockPrompt.resetBytes(in: 0..<lockPrompt.count); lockPrompt = []
        case .control("c"), .control("q"): running = false
        case .enter: try unlock()
        default: break
        }
    }

    private func unlock() throws {
        defer {
            lockPrompt.resetBytes(in: 0..<lockPrompt.count)
            lockPrompt = []
        }
        if lockPrompt.isEmpty {
            guard let session = KeyringSession.load(vaultIdentifier: vault.identifier),
                  try vault.unlock(session: session) else {
                lockMessage = "type the master password, then Enter"
                return
            }
        } else {
            do {
                try vault.unlock(password: SecretBytes(copying: lockPrompt))
            } catch {
                lockMessage = viewLines(error).first ?? "wrong master password"
                return
            }
        }
        mode = .list
        lockMessage = nil
        for kept in Set(keptAcrossLock.keys).union([tab]) { try load(kept) }
        for (kept, state) in keptAcrossLock {
            lists[kept]?.setFilter(state.filter)
            if let id = state.selected { lists[kept]?.select(id: id) }
        }
        keptAcrossLock = [:]
        restoreSealedForm()
    }

    /// How far a key scrolls a page of text (the help, the health report); nil for any other key,
    /// which closes it.
    private func scrollMove(_ event: TerminalScreen.Event) -> Int? {
        let page = max(1, screen.size.rows - 5)
        switch event {
        case .key(.up): return -1
        case .key(.down): return 1
        case .key(.pageUp): return -page
        case .key(.pageDown): return page
        default: return nil
        }
    }

    // MARK: - Words

    /// An error in the view's words: its message and details, and its hint only when the hint
    /// is not a command line to type elsewhere (a `mystash` command, a flag, a variable).
    func viewLines(_ error: Error) -> [String] {
        let error = CommandFailure(error)
        let lines = ["Error: \(Output.safe(error.message))"] + error.details.map { "  " + Output.safe($0) }
        // What is shown is chosen by the words of the advice, never what the error is.
        guard let advice = error.hint,
              !["'mystash ", "--", "MYSTASH_"].contains(where: { advice.contains($0) }) else { return lines }
        return lines + ["hint: \(Output.safe(advice))"]
    }

    static func duration(_ seconds: TimeInterval) -> String {
        seconds >= 120 ? "\(Int(seconds / 60)) minutes" : "\(Int(seconds)) seconds"
    }
}

/// Notes fall into sections by the day they last changed: Today, Yesterday, then dates.
struct DaySections {
    private let today = Calendar.current.startOfDay(for: Date())
    private let yesterday: Date
    private let dayFormatter = DateFormatter()
    private let timeFormatter = DateFormatter()

    init() {
        yesterday = Calendar.current.date(byAdding: .day, value: -1, to: today) ?? today
        dayFormatter.dateFormat = "EEEE d MMMM yyyy"
        timeFormatter.dateFormat = "HH:mm"
    }

    func section(_ date: Date) -> String {
        if date >= today { return "Today" }
        if date >= yesterday { return "Yesterday" }
        return dayFormatter.string(from: date)
    }

    func time(_ date: Date) -> String { timeFormatter.string(from: date) }
}

extension Browser.Detail {
    func matches(_ tab: Browser.Tab) -> Bool {
        switch self {
        case .note: return tab == .notes
        case .entry: return tab == .passwords
        }
    }
}
