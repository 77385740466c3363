/// Records a context's changes in groups so they can be undone and redone, as the
/// `UndoManager` of an `NSManagedObjectContext`.
///
/// Give a context one (``ManagedObjectContext/undoManager``) and every insert, delete,
/// attribute and relationship change (inverse sides included) is recorded. Changes group
/// by event: a group opens at the first change and closes when the context processes its
/// pending changes (explicitly, or before a fetch or a save). ``beginUndoGrouping()`` and
/// ``endUndoGrouping()`` make explicit groups, which may nest.
///
/// For example:
///
/// ```swift
/// context.undoManager = ContextUndoManager()
/// entry["name"] = "Mail"
/// context.processPendingChanges()     // ends the group
/// context.undo()                      // the name is back
/// context.redo()                      // and "Mail" again
/// ```
///
/// The history outlives saves: undoing a saved change makes the unsaved change that reverses
/// it (a saved insertion comes back as a deletion, a saved deletion as an insertion with the
/// same values and a new ID), for the next save to write. ``ManagedObjectContext/rollback()``
/// and ``ManagedObjectContext/reset()`` clear the history.
public final class ContextUndoManager {
    typealias Action = () -> Void

    private var undoStack: [[Action]] = []
    private var redoStack: [[Action]] = []
    /// Open groups, innermost last; each collects the actions registered while it is open.
    private var openGroups: [[Action]] = []
    private var openedAutomatically = false
    private var disabledCount = 0
    /// The values the open top-level group keeps whole (see ``keepsWholeValue(of:forKey:)``).
    private var wholeValuesKept: Set<WholeValue> = []

    private struct WholeValue: Hashable {
        let object: ManagedObject
        let key: String
    }

    /// The most groups kept for undo (the oldest go first); 0 keeps all.
    public var levelsOfUndo = 0 {
        didSet { trim() }
    }
    /// Whether a group opens by itself at the first change and closes when the context
    /// processes its pending changes.
    public var groupsByEvent = true
    /// True while ``undo()`` runs.
    public private(set) var isUndoing = false
    /// True while ``redo()`` runs.
    public private(set) var isRedoing = false

    public init() {}

    /// How deeply groups are nested now (0 when none is open).
    public var groupingLevel: Int { openGroups.count }
    public var canUndo: Bool { !undoStack.isEmpty || openGroups.first.map { !$0.isEmpty } ?? false }
    /// Whether there is an undone group to redo.
    public var canRedo: Bool { !redoStack.isEmpty }
    /// How many groups can be undone now.
    var undoGroupCount: Int { undoStack.count }
    /// How many changes the open groups hold.
    var openActionCount: Int { openGroups.reduce(0) { $0 + $1.count } }
    /// Whether changes are being recorded now.
    public var isUndoRegistrationEnabled: Bool { disabledCount == 0 }

    // MARK: - Grouping

    /// Opens a group; changes until the matching ``endUndoGrouping()`` undo together.
    public func beginUndoGrouping() {
        openGroups.append([])
    }

    /// Closes the innermost group: a nested group joins its parent, a top-level one becomes
    /// one step of undo.
    ///
    /// - precondition: a group is open.
    public func endUndoGrouping() {
        precondition(!openGroups.isEmpty, "endUndoGrouping() without beginUndoGrouping()")
        let group = openGroups.removeLast()
        if openGroups.isEmpty {
            openedAutomatically = false
            wholeValuesKept = []
        }
        if !openGroups.isEmpty {
            openGroups[openGroups.count - 1] += group
        } else if !group.isEmpty {
            if isUndoing {
                redoStack.append(group)
            } else {
                undoStack.append(group)
                trim()
            }
        }
    }

    /// Closes the group opened by the first change of an event (see ``groupsByEvent``).
    func endEventGroup() {
        guard openedAutomatically, openGroups.count == 1 else { return }
        endUndoGrouping()
    }

    // MARK: - Registration

    /// Stops recording changes until as many ``enableUndoRegistration()`` calls.
    public func disableUndoRegistration() { disabledCount += 1 }

    /// Undoes one ``disableUndoRegistration()``.
    public func enableUndoRegistration() {
        precondition(disabledCount > 0, "enableUndoRegistration() without disableUndoRegistration()")
        disabledCount -= 1
    }

    /// Forgets every recorded change.
    public func removeAllActions() {
        undoStack = []
        redoStack = []
        openGroups = []
        openedAutomatically = false
        wholeValuesKept = []
    }

    /// Records how to undo one change; false when nothing is recorded.
    @discardableResult
    func register(_ action: @escaping Action) -> Bool {
        guard isUndoRegistrationEnabled else { return false }
        if openGroups.isEmpty {
            guard groupsByEvent || isUndoing || isRedoing else { return false }
            beginUndoGrouping()
            openedAutomatically = !(isUndoing || isRedoing)
        }
        openGroups[openGroups.count - 1].append(action)
        if !isUndoing && !isRedoing { redoStack = [] }
        return true
    }

    /// Whether the open group already holds an action putting back the whole value of `key`
    /// as it was before the group's first change to it: that action runs after every later one
    /// of the group, so a later change to the value needs no record of its own.
    func keepsWholeValue(of object: ManagedObject, forKey key: String) -> Bool {
        !isUndoing && !isRedoing && wholeValuesKept.contains(WholeValue(object: object, key: key))
    }

    /// Records `action`, which puts back the whole value of `key`, and that the open group keeps it.
    func register(wholeValueOf object: ManagedObject, forKey key: String, _ action: @escaping Action) {
        guard register(action), !isUndoing, !isRedoing else { return }
        wholeValuesKept.insert(WholeValue(object: object, key: key))
    }

    // MARK: - Undo and redo

    /// Undoes the last group (closing the event's group first); its changes become redoable.
    public func undo() { undo(then: {}) }

    /// Redoes the last undone group; it becomes undoable again.
    public func redo() { redo(then: {}) }

    /// Undoes the last group; what `finish` changes joins the group that redoes it.
    func undo(then finish: () -> Void) {
        endEventGroup()
        guard openGroups.isEmpty, let group = undoStack.popLast() else { return }
        isUndoing = true
        defer { isUndoing = false }
        beginUndoGrouping()
        for action in group.reversed() { action() }
        finish()
        endUndoGrouping()
    }

    /// Redoes the last undone group; what `finish` changes joins the group that undoes it.
    func redo(then finish: () -> Void) {
        guard openGroups.isEmpty, let group = redoStack.popLast() else { return }
        isRedoing = true
        defer { isRedoing = false }
        beginUndoGrouping()
        for action in group.reversed() { action() }
        finish()
        let redone = openGroups.removeLast()
        if !redone.isEmpty {
            undoStack.append(redone)
            trim()
        }
    }

    private func trim() {
        if levelsOfUndo > 0, undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
    }
}
