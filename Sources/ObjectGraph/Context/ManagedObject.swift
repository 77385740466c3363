import Foundation
import Synchronization

/// The identity of a managed object: its entity, store and primary key, or a temporary
/// identity until its first save, as `NSManagedObjectID`.
///
/// 16 bytes: the entity name, store and kind live in an `ObjectIDScope` shared by every ID
/// of that entity and store, so 50,000 IDs hold 0.8 MB, not 3.2.
public struct ObjectID: Hashable, CustomStringConvertible, Sendable {
    let scope: ObjectIDScope
    /// The primary key, or the temporary number.
    let number: Int64

    public var entityName: String { scope.entityName }
    public var storeIdentifier: String? { scope.storeIdentifier }
    public var primaryKey: Int64? { scope.kind == .permanent ? number : nil }
    var temporaryNumber: Int? { scope.kind == .temporary ? Int(truncatingIfNeeded: number) : nil }

    public var isTemporaryID: Bool { primaryKey == nil }

    init(scope: ObjectIDScope, number: Int64) {
        self.scope = scope
        self.number = number
    }

    init(entityName: String, storeIdentifier: String?, primaryKey: Int64?, temporaryNumber: Int?) {
        let kind: ObjectIDScope.Kind = primaryKey != nil ? .permanent : temporaryNumber != nil ? .temporary : .none
        scope = ObjectIDScope.shared(entityName: entityName, entity: nil, storeIdentifier: storeIdentifier, kind: kind)
        number = primaryKey ?? temporaryNumber.map(Int64.init) ?? 0
    }

    public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool { lhs.number == rhs.number && lhs.scope == rhs.scope }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(scope)
        hasher.combine(number)
    }

    /// `x-coredata://<store UUID>/<Entity>/p<pk>`, or `x-coredata:///<Entity>/t<n>` while temporary.
    public var uriRepresentation: URL {
        if let primaryKey, let storeIdentifier {
            return URL(string: "x-coredata://\(storeIdentifier)/\(entityName)/p\(primaryKey)")!
        }
        return URL(string: "x-coredata:///\(entityName)/t\(temporaryNumber ?? 0)")!
    }

    public var description: String { uriRepresentation.absoluteString }
}

/// What the IDs of one entity in one store (or the temporary IDs of one entity) share, made
/// once and shared while in use.
///
/// A context keeps scopes of its own, which name it: an object finds its context and its entity
/// through its scope, two words less in every object. Equality and hashing ignore the context
/// and the entity. An ID kept after its model is gone keeps its entity's description (not the
/// model: an entity holds its model and superentity weakly).
final class ObjectIDScope: Hashable, Sendable {
    enum Kind: UInt8, Sendable { case none, permanent, temporary }

    let entityName: String
    /// The entity of the objects using this scope; nil only in the scope of an ID made from names.
    nonisolated(unsafe) let entity: EntityDescription?
    let storeIdentifier: String?
    let kind: Kind
    /// The context whose objects use this scope; nil for the shared scopes (and once it is gone).
    weak let context: ManagedObjectContext?
    /// Hashed once: IDs are hashed often (merges, result caches), their strings never change.
    private let contentHash: Int

    private init(entityName: String, entity: EntityDescription?, storeIdentifier: String?, kind: Kind,
                 context: ManagedObjectContext? = nil) {
        self.entityName = entityName
        self.entity = entity
        self.storeIdentifier = storeIdentifier
        self.kind = kind
        self.context = context
        var hasher = Hasher()
        hasher.combine(entityName)
        hasher.combine(storeIdentifier)
        hasher.combine(kind)
        contentHash = hasher.finalize()
    }

    static func == (lhs: ObjectIDScope, rhs: ObjectIDScope) -> Bool {
        lhs === rhs
            || (lhs.kind == rhs.kind && lhs.entityName == rhs.entityName && lhs.storeIdentifier == rhs.storeIdentifier)
    }

    func hash(into hasher: inout Hasher) { hasher.combine(contentHash) }

    private struct Key: Hashable {
        let entityName: String
        let entity: ObjectIdentifier?
        let storeIdentifier: String?
        let kind: Kind
    }

    /// Held weakly: a scope lives as long as IDs and objects use it, so a process that opens
    /// many stores over time does not keep one per store forever.
    private final class WeakScope {
        weak var scope: ObjectIDScope?
        init(_ scope: ObjectIDScope) { self.scope = scope }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var scopes: [Key: WeakScope] = [:]
    /// By entity, for every object made: a `Mutex` needs no exclusivity check, and the key no
    /// string hashed.
    private static let unassignedScopes = Mutex<[ObjectIdentifier: WeakScope]>([:])

    /// The scope of `entity`'s objects before they have an ID or a context (a contextless scope
    /// of kind `.none`), one while in use.
    static func unassigned(_ entity: EntityDescription) -> ObjectIDScope {
        unassignedScopes.withLock { scopes in
            // A live scope holds its entity, so the entity's identifier cannot name another one meanwhile.
            if let scope = scopes[ObjectIdentifier(entity)]?.scope { return scope }
            let scope = ObjectIDScope(entityName: entity.name, entity: entity, storeIdentifier: nil, kind: .none)
            removeDeadScopes(from: &scopes)
            scopes[ObjectIdentifier(entity)] = WeakScope(scope)
            return scope
        }
    }

    /// Dead entries go each time a table reaches a power of two: amortized, never a scan per ID.
    private static func removeDeadScopes<Key>(from scopes: inout [Key: WeakScope]) {
        if scopes.count >= 64, scopes.count.nonzeroBitCount == 1 { scopes = scopes.filter { $0.value.scope != nil } }
    }

    /// A scope of `context`'s own (the context keeps it: see
    /// ``ManagedObjectContext/idScope(of:storeIdentifier:kind:)``).
    static func owned(by context: ManagedObjectContext, entity: EntityDescription, storeIdentifier: String?,
                      kind: Kind) -> ObjectIDScope {
        ObjectIDScope(entityName: entity.name, entity: entity, storeIdentifier: storeIdentifier, kind: kind,
                      context: context)
    }

    /// The scope for these parts (equal scopes may coexist: equality compares the parts). The
    /// scope an object uses names its own entity; an ID made from names has none.
    static func shared(entityName: String, entity: EntityDescription?, storeIdentifier: String?,
                       kind: Kind) -> ObjectIDScope {
        let key = Key(entityName: entityName, entity: entity.map(ObjectIdentifier.init),
                      storeIdentifier: storeIdentifier, kind: kind)
        return lock.withLock {
            // A live scope holds its entity, so the entity's identifier cannot name another one meanwhile.
            if let scope = scopes[key]?.scope { return scope }
            let scope = ObjectIDScope(entityName: entityName, entity: entity, storeIdentifier: storeIdentifier,
                                      kind: kind)
            removeDeadScopes(from: &scopes)
            scopes[key] = WeakScope(scope)
            return scope
        }
    }
}

/// A Transformable value read from a row but not decoded yet.
struct EncodedValue {
    let data: Data
    let place: ValuePlace
}

/// The unresolved destination of a to-one relationship read from a row.
struct FaultReference {
    let primaryKey: Int64
}

/// A protocol for typed classes of an application's entities.
///
/// ```swift
/// final class Note: ManagedObject, ManagedEntity {
///     static let entityName = "Note"
///     var title: String? {
///         get { self["title"] as? String }
///         set { self["title"] = newValue }
///     }
/// }
/// model.setClass(Note.self, forEntityName: Note.entityName)
/// let note = context.insert(Note.self)
/// ```
public protocol ManagedEntity: ManagedObject {
    static var entityName: String { get }
}

/// An object of the graph: one row of a store, with its attributes and relationships,
/// as `NSManagedObject`.
///
/// Read and write properties by key (`object["name"]`), or through a typed subclass.
/// Setting one side of a relationship updates the inverse side.
///
/// - warning: A managed object belongs to its context's thread.
open class ManagedObject: Hashable, CustomStringConvertible {
    /// Read through the object's ID scope, which names it: a word less in every object.
    public var entity: EntityDescription { identityScope.entity! }
    /// The object's identity: its scope, and its number (kept in `numbersAndFlags`).
    public internal(set) var objectID: ObjectID {
        get { ObjectID(scope: identityScope, number: identityNumber) }
        set {
            assert(newValue.entityName == entity.name, "An object's ID names its own entity")
            identityScope = scope(like: newValue.scope, in: managedObjectContext)
            identityNumber = newValue.number
        }
    }
    /// A shared scope of kind `.none` until the object is first given an ID or a context.
    private var identityScope: ObjectIDScope
    private var identityNumber: Int64 {
        get { numbers.identity }
        set { numbers = (newValue, numbers.stored) }
    }
    /// The primary key a registered object is registered under (its permanent ID's number),
    /// read without building an ``ObjectID``.
    var registeredPrimaryKey: Int64 { identityNumber }
    /// Held weakly, through the object's ID scope (`ObjectIDScope.context`).
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        get { identityScope.context }
        set { identityScope = scope(like: identityScope, in: newValue) }
    }

    /// Gives the object an ID of `context`'s own, and so that context, in one step.
    func assign(_ id: ObjectID, in context: ManagedObjectContext) {
        assert(id.scope.context === context && id.scope.entity === identityScope.entity,
               "An ID of the context's own, for this entity")
        (identityScope, identityNumber) = (id.scope, id.number)
    }

    /// Leaves its context, as setting ``managedObjectContext`` to nil does, with the shared scope
    /// for each of the context's scopes looked up once: a save forgetting 100,000 deleted objects
    /// took a lock and a table lookup for each.
    func leaveContext(sharedScopes: inout [ObjectIdentifier: ObjectIDScope]) {
        let scope = identityScope
        guard scope.context != nil else { return }
        if let shared = sharedScopes[ObjectIdentifier(scope)] {
            identityScope = shared
            return
        }
        managedObjectContext = nil
        sharedScopes[ObjectIdentifier(scope)] = identityScope
    }

    /// A scope with the parts of `scope`, for this object's entity, kept by `context` (or shared,
    /// without one).
    private func scope(like scope: ObjectIDScope, in context: ManagedObjectContext?) -> ObjectIDScope {
        let entity = entity
        if scope.context === context, scope.entity === entity { return scope }
        if let context { return context.idScope(of: entity, storeIdentifier: scope.storeIdentifier, kind: scope.kind) }
        return ObjectIDScope.shared(
            entityName: entity.name, entity: entity, storeIdentifier: scope.storeIdentifier, kind: scope.kind)
    }

    /// Current values: attributes, to-one destinations (object or fault), loaded to-many arrays.
    var values: PropertyValues {
        _read {
            checkNotWritingValues()
            switch state {
            case .fresh(let values), .clean(let values): yield values
            case .tracked(let tracking): yield tracking.values
            }
        }
        set {
            checkNotWritingValues()
            switch state {
            case .fresh: state = .fresh(newValue)
            case .clean(let committed):
                state = newValue.sharesStorage(with: committed)
                    ? .clean(newValue) : .tracked(Tracking(values: newValue, committedValues: committed))
            case .tracked(let tracking):
                tracking.values = newValue
                settle(tracking)
            }
        }
        _modify {
            // Two calls, not a switch here: the coroutine's frame stays small enough not to be
            // allocated for each write.
            var values = takeValuesForWrite()
            defer { putWrittenValues(&values) }
            yield &values
        }
    }
    /// The current values, moved out where nothing else needs them, so a write changes the
    /// buffer in place when nothing else holds it.
    private func takeValuesForWrite() -> PropertyValues {
        checkNotWritingValues()
        setFlag(Self.writingValuesFlag, true)
        // Swapped out, then taken apart: no copy of the buffer's reference to count.
        var taken = State.fresh(PropertyValues())
        swap(&taken, &state)
        switch consume taken {
        case .fresh(let values):
            return values
        case .clean(let values):
            // Shared with the committed values: a write copies, and the copy is the current one.
            state = .clean(values)
            return values
        case .tracked(let tracking):
            state = .tracked(tracking)
            var values = PropertyValues()
            swap(&values, &tracking.values)
            return values
        }
    }
    private func putWrittenValues(_ written: inout PropertyValues) {
        setFlag(Self.writingValuesFlag, false)
        var values = PropertyValues()
        swap(&values, &written)
        switch state {
        case .fresh: state = .fresh(values)
        case .clean(let committed):
            if !values.sharesStorage(with: committed) {
                state = .tracked(Tracking(values: values, committedValues: committed))
            }
        case .tracked(let tracking):
            tracking.values = values
            settle(tracking)
        }
    }
    private func checkNotWritingValues() {
        if hasFlag(Self.writingValuesFlag) {
            preconditionFailure("An object's values were accessed while being written (simultaneous accesses)")
        }
    }
    /// Attribute and to-one values as last read from or written to the store.
    var committedValues: PropertyValues {
        get {
            switch state {
            case .fresh: return PropertyValues()
            case .clean(let values): return values
            case .tracked(let tracking): return tracking.committedValues
            }
        }
        set {
            switch state {
            case .fresh(let values), .clean(let values):
                if newValue.sharesStorage(with: values) {
                    state = .clean(values)
                } else if newValue.isUnwritten {
                    state = .fresh(values)
                } else {
                    state = .tracked(Tracking(values: values, committedValues: newValue))
                }
            case .tracked(let tracking):
                tracking.committedValues = newValue
                settle(tracking)
            }
        }
        _modify {
            if case .tracked(let tracking) = state {
                // In place: the committed values are the tracking's own.
                defer { settle(tracking) }
                yield &tracking.committedValues
            } else {
                // Another buffer for them either way (none yet, or the values' own).
                var committed = committedValues
                defer { committedValues = committed }
                yield &committed
            }
        }
    }
    /// Sets the current and the committed values to one buffer, as a read of the row does.
    func setStoredValues(_ stored: PropertyValues) {
        checkNotWritingValues()
        if case .tracked(let tracking) = state {
            (tracking.values, tracking.committedValues) = (stored, stored)
            settle(tracking)
        } else {
            state = .clean(stored)
        }
    }
    /// Replaces an encoded value by its decoded one, in the committed values too where they hold
    /// it still encoded: in one buffer when both are one.
    func replaceEncoded(_ key: String, with decoded: Any?) {
        checkNotWritingValues()
        if case .clean(var stored) = state, stored[key] is EncodedValue {
            // Moved out, so the write changes the buffer in place when nothing else holds it.
            state = .fresh(PropertyValues())
            stored[key] = decoded
            state = .clean(stored)
            return
        }
        values[key] = decoded
        if committedValues[key] is EncodedValue { committedValues[key] = decoded }
    }
    /// To-many relationships whose destinations are loaded.
    var loadedToMany: Set<String> {
        get { tracking?.loadedToMany ?? [] }
        set { setTracked(\.loadedToMany, newValue) }
        _modify {
            let tracking = makeTracking()
            defer { settle(tracking) }
            yield &tracking.loadedToMany
        }
    }
    /// Properties changed since the last save or fetch.
    var changedKeys: Set<String> {
        get { tracking?.changedKeys ?? [] }
        set { setTracked(\.changedKeys, newValue) }
        _modify {
            let tracking = makeTracking()
            defer { settle(tracking) }
            yield &tracking.changedKeys
        }
    }
    /// The values and what the object tracks, in one word. Most objects track nothing: one
    /// inserted and not saved yet has no committed values (``State/fresh``), one read and not
    /// changed since has its values committed (``State/clean``). Only the others keep a
    /// ``Tracking``: two words more per object made every object a size class larger.
    private enum State {
        /// No committed values (an empty buffer).
        case fresh(PropertyValues)
        /// The committed values are the current ones, one buffer.
        case clean(PropertyValues)
        case tracked(Tracking)
    }
    private final class Tracking {
        var values: PropertyValues
        var committedValues: PropertyValues
        var loadedToMany: Set<String> = []
        var changedKeys: Set<String> = []
        /// The numbers, when one is out of what ``numbersAndFlags`` holds.
        var wideNumbers: WideNumbers?
        init(values: PropertyValues, committedValues: PropertyValues) {
            self.values = values
            self.committedValues = committedValues
        }
    }
    /// Boxed, so that a tracking takes a word for what almost no object has.
    private final class WideNumbers {
        let identity: Int64
        let stored: Int64
        init(identity: Int64, stored: Int64) { (self.identity, self.stored) = (identity, stored) }
    }
    private var state: State
    private var tracking: Tracking? {
        if case .tracked(let tracking) = state { return tracking }
        return nil
    }
    private func setTracked(_ set: ReferenceWritableKeyPath<Tracking, Set<String>>, _ value: Set<String>) {
        if tracking == nil, value.isEmpty { return }
        let tracking = makeTracking()
        tracking[keyPath: set] = value
        settle(tracking)
    }
    private func makeTracking() -> Tracking {
        switch state {
        case .tracked(let tracking): return tracking
        case .fresh(let values):
            let made = Tracking(values: values, committedValues: PropertyValues())
            state = .tracked(made)
            return made
        case .clean(let values):
            let made = Tracking(values: values, committedValues: values)
            state = .tracked(made)
            return made
        }
    }
    /// Lets go of a tracking that holds nothing the states without one cannot say.
    private func settle(_ tracking: Tracking) {
        guard tracking.wideNumbers == nil, tracking.loadedToMany.isEmpty, tracking.changedKeys.isEmpty,
              case .tracked(let current) = state, current === tracking else { return }
        if tracking.committedValues.sharesStorage(with: tracking.values) {
            state = .clean(tracking.values)
        } else if tracking.committedValues.isUnwritten {
            state = .fresh(tracking.values)
        }
    }
    /// `Z_OPT` of the row as this object last saw it.
    var version: Int64 {
        get { hasFlag(Self.pendingKeyFlag) ? 0 : storedNumber }
        set {
            numbersAndFlags &= ~Self.pendingKeyFlag
            storedNumber = newValue
        }
    }
    /// The primary key given during a save, before the save is known to succeed.
    var pendingPrimaryKey: Int64? {
        get {
            guard hasFlag(Self.pendingKeyFlag) else { return nil }
            return identityScope.kind == .permanent ? identityNumber : storedNumber
        }
        set {
            storedNumber = 0
            setFlag(Self.pendingKeyFlag, newValue != nil)
            guard let newValue else { return }
            // A permanent ID's key is kept once, in the ID: it may be any key the store holds.
            if identityScope.kind == .permanent {
                precondition(newValue == identityNumber, "A permanent ID's own key")
            } else {
                precondition(newValue >= 0, "A new row's key")
                storedNumber = newValue
            }
        }
    }
    /// The largest number an object keeps as a row version or a new row's key (2^52 − 1): a
    /// context gives no key past it, and a version at it (or out of ``rowVersions``) cannot grow.
    static let largestRowNumber: Int64 = 1 << 52 - 1
    /// The row versions an object keeps as they are; a store's version out of them (only a
    /// damaged store holds one) is kept as ``largestRowNumber``.
    static let rowVersions = -largestRowNumber - 1 ... largestRowNumber - 1
    /// The ID's number (29 bits), the row version or the pending key of an object waiting for its
    /// first row (which has no version yet; 23 bits), and the object's flags (the high 12), in one
    /// word: with the values and what the object tracks in another (``State``) and the entity read
    /// through the ID scope, an object takes three words, malloc's 48-byte chunks (it took 64).
    /// Numbers out of those ranges (a store of more than half a billion rows, a row saved eight million
    /// times, a damaged store's) are kept in the object's tracking, and the bits say so.
    private var numbersAndFlags: UInt64 = 0
    private static let identityBits: UInt64 = 29
    private static let identityLimit: Int64 = 1 << 29 - 1
    private static let storedLimit: Int64 = 1 << 23
    /// The 52 bits of both numbers; all set (an identity of `identityLimit`, never packed): kept wide.
    private static let numbersMask: UInt64 = 1 << 52 - 1
    /// Set while the values are moved out for a write: an access to them then (from a `deinit` or
    /// a hook the write runs) stops the process, as Swift's exclusivity check did when they were a
    /// stored property, instead of reading them as empty or losing a write.
    private static let writingValuesFlag: UInt64 = 1 << 52
    private var numbers: (identity: Int64, stored: Int64) {
        get {
            let packed = numbersAndFlags & Self.numbersMask
            if packed == Self.numbersMask, let wide = tracking?.wideNumbers { return (wide.identity, wide.stored) }
            return (Int64(packed & (1 << Self.identityBits - 1)), Int64(packed >> Self.identityBits))
        }
        set {
            if (0..<Self.identityLimit).contains(newValue.identity), (0..<Self.storedLimit).contains(newValue.stored) {
                numbersAndFlags = numbersAndFlags & ~Self.numbersMask
                    | UInt64(newValue.stored) << Self.identityBits | UInt64(newValue.identity)
                if let tracking, tracking.wideNumbers != nil {
                    tracking.wideNumbers = nil
                    settle(tracking)
                }
            } else {
                makeTracking().wideNumbers = WideNumbers(identity: newValue.identity, stored: newValue.stored)
                numbersAndFlags |= Self.numbersMask
            }
        }
    }
    private var storedNumber: Int64 {
        get { numbers.stored }
        set {
            precondition((-Self.largestRowNumber - 1...Self.largestRowNumber).contains(newValue), "53 bits")
            numbers = (numbers.identity, newValue)
        }
    }
    private static let membershipShift: UInt64 = 53
    private static let membershipMask: UInt64 = 0x3F << membershipShift
    private static let joinedToManyFlag: UInt64 = 1 << 59
    private static let pendingKeyFlag: UInt64 = 1 << 60
    private static let pendingInsertFlag: UInt64 = 1 << 61
    private static let faultFlag: UInt64 = 1 << 62
    private static let preparedForDeletionFlag: UInt64 = 1 << 63
    @inline(__always)
    private func hasFlag(_ flag: UInt64) -> Bool { numbersAndFlags & flag != 0 }
    @inline(__always)
    private func setFlag(_ flag: UInt64, _ isOn: Bool) {
        numbersAndFlags = isOn ? numbersAndFlags | flag : numbersAndFlags & ~flag
    }
    /// True from insertion until the first save: such an object needs no change tracking.
    var isPendingInsert: Bool {
        get { hasFlag(Self.pendingInsertFlag) }
        set { setFlag(Self.pendingInsertFlag, newValue) }
    }
    /// True while the object's values are not loaded, as `NSManagedObject.isFault`: it was
    /// fetched with ``FetchRequest/returnsObjectsAsFaults`` or turned into a fault by
    /// ``ManagedObjectContext/refresh(_:mergeChanges:)``. Reading or changing any property
    /// fulfills it (one read of its row); a fault whose row is gone reads as empty, and the
    /// context's next fetch or save throws ``ObjectGraphError`` 133000.
    public internal(set) var isFault: Bool {
        get { hasFlag(Self.faultFlag) }
        set { setFlag(Self.faultFlag, newValue) }
    }
    /// Whether the object was ever put among a to-many's members (it stays set once it left):
    /// one that never was joins without a look-up, so an import's new members are never indexed.
    var hasJoinedToMany: Bool {
        get { hasFlag(Self.joinedToManyFlag) }
        set { setFlag(Self.joinedToManyFlag, newValue) }
    }
    /// Whether ``prepareForDeletion()`` ran for its pending deletion.
    var isPreparedForDeletion: Bool {
        get { hasFlag(Self.preparedForDeletionFlag) }
        set { setFlag(Self.preparedForDeletionFlag, newValue) }
    }

    /// Loads the values of a fault from its row.
    @inline(__always)
    func fireFault() {
        guard isFault else { return }
        isFault = false
        _ = deferringErrors { try managedObjectContext?.fulfillFault(self) }
    }

    /// Reads a fault's row for its deletion, if the row is still there: one deleted meanwhile
    /// leaves it a fault and keeps no error, for the save's merge policy to decide.
    func fireFaultForDeletion() {
        guard isFault, let context = managedObjectContext else { return }
        try? context.fulfillFault(self)
    }
    /// The sets of its context this object is in (see ``ObjectSet``).
    var memberships: ObjectSet.Membership {
        get {
            ObjectSet.Membership(
                rawValue: UInt8(truncatingIfNeeded: (numbersAndFlags & Self.membershipMask) >> Self.membershipShift))
        }
        set {
            numbersAndFlags = numbersAndFlags & ~Self.membershipMask
                | UInt64(newValue.rawValue) << Self.membershipShift & Self.membershipMask
        }
    }

    public required init(entity: EntityDescription) {
        identityScope = .unassigned(entity)
        state = .fresh(entity.emptyValues)
    }

    /// Creates an object and inserts it into `context` (when given).
    public convenience init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        self.init(entity: entity)
        context?.insert(self)
    }

    public var isInserted: Bool { managedObjectContext?.insertedSet.contains(self) ?? false }
    public var isUpdated: Bool { managedObjectContext?.updatedSet.contains(self) ?? false }
    public var isDeleted: Bool { managedObjectContext?.deletedSet.contains(self) ?? false }
    public var hasChanges: Bool { isInserted || isUpdated || isDeleted }

    /// The values changed since the last save or fetch, by key.
    public var changedValues: [String: Any] {
        fireFault()
        if isPendingInsert {
            var result: [String: Any] = [:]
            for (key, value) in values {
                guard let members = value as? RelationshipMembers else {
                    result[key] = value
                    continue
                }
                // A to-many as its members, when it has some: an empty one is no change, read or not.
                if members.count > 0 { result[key] = members.objects }
            }
            return result
        }
        var result: [String: Any] = [:]
        for key in changedKeys { result[key] = self[key] ?? NSNull() }
        return result
    }

    // MARK: - Key-value access

    /// The value of an attribute or relationship. A to-many relationship reads as
    /// `[ManagedObject]`. Assigning updates the inverse relationship.
    ///
    /// - precondition: `key` names a property of the entity.
    public subscript(key: String) -> Any? {
        get { value(forKey: key) }
        set { setValue(newValue, forKey: key) }
    }

    public func value(forKey key: String) -> Any? {
        fireFault()
        if let index = entity.attributeNames.firstIndex(of: key) {
            let values = values
            let value = values.layout === entity.propertyLayout ? values[slot: index] : values[key]
            guard entity.attributeTypeList[index] == .transformable, let encoded = value as? EncodedValue else {
                return value
            }
            return decoded(key, encoded)
        }
        guard let relationship = entity.relationshipsByName[key] else {
            preconditionFailure("Entity \(entity.name) has no property named '\(key)'")
        }
        return relationship.isToMany ? toManyObjects(relationship) : toOneObject(relationship)
    }

    /// The value for `key` as a `T`, or nil.
    public func value<T>(forKey key: String, as type: T.Type) -> T? { value(forKey: key) as? T }

    public func setValue(_ value: Any?, forKey key: String) {
        fireFault()
        if let index = entity.attributeNames.firstIndex(of: key) {
            let normalized = StoredValues.normalized(
                value, type: entity.attributeTypeList[index], key: key, entity: entity.name)
            registerUndo(forKey: key)
            values.setValue(normalized, forKey: key, at: index, ifLayoutIs: entity.propertyLayout)
            markChanged(key)
            return
        }
        guard let relationship = entity.relationshipsByName[key] else {
            preconditionFailure("Entity \(entity.name) has no property named '\(key)'")
        }
        if relationship.isToMany {
            guard let objects = value as? [ManagedObject] ?? (value == nil ? [] : nil) else {
                preconditionFailure(
                    "To-many relationship \(entity.name).\(key) takes [ManagedObject], not \(type(of: value!))")
            }
            replaceToMany(relationship, with: objects)
        } else {
            guard value == nil || value is ManagedObject else {
                preconditionFailure(
                    "To-one relationship \(entity.name).\(key) takes a ManagedObject, not \(type(of: value!))")
            }
            setToOne(relationship, to: value as? ManagedObject)
        }
    }

    /// Adds `object` to a to-many relationship (and this object to its inverse), in O(1): a
    /// relationship not read yet stays unread.
    public func add(_ object: ManagedObject, toRelationship key: String) {
        let relationship = toManyRelationship(key)
        guard join(object, relationship) else { return }
        didChangeMembership(of: object, joined: true, in: relationship)
        if let inverse = inverse(of: relationship) { object.primitiveLink(inverse, to: self) }
    }

    /// Removes `object` from a to-many relationship (and this object from its inverse), in O(1).
    public func remove(_ object: ManagedObject, fromRelationship key: String) {
        let relationship = toManyRelationship(key)
        guard leaveRecordingChange(object, relationship) else { return }
        if let inverse = inverse(of: relationship) { object.primitiveUnlink(inverse, from: self) }
    }

    /// The value at a dotted key path; through a to-many relationship the result is an array
    /// of the values found, and `@count` counts.
    public func value(forKeyPath keyPath: String) -> Any? {
        // Most paths are one key: read it without splitting (sorts read a key path per object).
        guard keyPath.utf8.contains(UInt8(ascii: ".")) else {
            return keyPath.isEmpty ? self : value(forKeyPath: [keyPath][...])
        }
        return value(forKeyPath: Self.steps(of: keyPath))
    }

    /// The keys of a dotted key path, for ``value(forKeyPath:)-(ArraySlice<String>)`` to follow.
    static func steps(of keyPath: String) -> ArraySlice<String> {
        keyPath.split(separator: ".").map(String.init)[...]
    }

    func value(forKeyPath path: ArraySlice<String>) -> Any? {
        guard let first = path.first else { return self }
        if first == "SELF" || first == "self" { return value(forKeyPath: path.dropFirst()) }
        let rest = path.dropFirst()
        if rest.isEmpty { return value(forKey: first) }
        if let relationship = entity.relationshipsByName[first], !relationship.isToMany {
            // Through a to-one, without casting its object to a to-many's array first.
            fireFault()
            return toOneObject(relationship)?.value(forKeyPath: rest)
        }
        let current = value(forKey: first)
        if let objects = current as? [ManagedObject] {
            if let function = rest.first.flatMap(AggregateFunction.init(keyPathOperator:)) {
                if function == .count, rest.count == 1 { return objects.count }
                return function.apply(to: objects.compactMap { $0.value(forKeyPath: rest.dropFirst()) })
            }
            if rest.isEmpty { return objects }
            return objects.flatMap { object -> [Any] in
                let found = object.value(forKeyPath: rest)
                if let many = found as? [Any] { return many }
                return found.map { [$0] } ?? []
            }
        }
        if rest.isEmpty { return current }
        return (current as? ManagedObject)?.value(forKeyPath: rest)
    }

    /// Decodes a value left encoded by a fetch; a failure is kept for the context's next
    /// fetch or save to throw (a property read cannot throw).
    private func decoded(_ key: String, _ encoded: EncodedValue) -> Any? {
        deferringErrors { try loadedValue(forKey: key) }
    }

    // MARK: - Relationship plumbing

    private func toManyRelationship(_ key: String) -> RelationshipDescription {
        guard let relationship = entity.relationshipsByName[key], relationship.isToMany else {
            preconditionFailure("Entity \(entity.name) has no to-many relationship named '\(key)'")
        }
        return relationship
    }

    /// The destination of a to-one relationship; a failure to load it is kept for the
    /// context's next fetch or save to throw (see ``loadedValue(forKey:)`` to get it at once).
    func toOneObject(_ relationship: RelationshipDescription) -> ManagedObject? {
        deferringErrors { try loadedToOneObject(relationship) }
    }

    /// A to-one's destination as ``toOneObject(_:)`` finds it, but a registered destination
    /// behind a row's key is not written back into the values: for a deleted object's delete
    /// rules, where writing it copied the values the object shares with its committed ones
    /// (a cascade of 100,000 children copied them all).
    /// A fault holds a to-one only when a cascade read it as a member of that destination
    /// (`ManagedObjectContext.memberFaults(of:_:)`): what its row said, given without reading it.
    func toOneObjectUnchanged(_ relationship: RelationshipDescription) -> ManagedObject? {
        guard let index = values.layout.index(of: relationship.name) else { return toOneObject(relationship) }
        switch values.slot(index) {
        case .object(let object) where isFault:
            return object
        case .fault(let primaryKey) where !isFault:
            guard let context = managedObjectContext, let destination = entity.destination(of: relationship),
                  let object = context.registeredDestination(primaryKey: primaryKey, of: destination)
            else { return toOneObject(relationship) }
            return object
        default:
            return toOneObject(relationship)
        }
    }

    func toManyObjects(_ relationship: RelationshipDescription) -> [ManagedObject] {
        deferringErrors { try loadedToManyObjects(relationship) } ?? []
    }

    func deferringErrors<T>(_ body: () throws -> T?) -> T? {
        do {
            return try body()
        } catch {
            if let context = managedObjectContext, context.deferredError == nil { context.deferredError = error }
            return nil
        }
    }

    func loadedToOneObject(_ relationship: RelationshipDescription) throws -> ManagedObject? {
        fireFault()
        // By its slot: a sort through a to-one reads one for every object, and an `Any` made and
        // cast back each time was most of that.
        guard let index = values.layout.index(of: relationship.name) else { return nil }
        switch values.slot(index) {
        case .object(let object):
            // A destination whose row a new object took (an upsert) left the context: the object
            // that took the row stands for it.
            if object.managedObjectContext == nil, let context = managedObjectContext,
               let successor = context.objectThatTookTheRow(of: object) {
                values.setSlot(index, .object(successor))
                return successor
            }
            return object
        case .fault(let primaryKey):
            guard let context = managedObjectContext else { return nil }
            let object = try context.destination(primaryKey: primaryKey, of: relationship, source: self)
            values.setSlot(index, .object(object))
            return object
        default:
            return nil
        }
    }

    func loadedToManyObjects(_ relationship: RelationshipDescription) throws -> [ManagedObject] {
        try loadedMembers(relationship).objects
    }

    /// The members of a to-many relationship, read from the store unless they are all here.
    func loadedMembers(_ relationship: RelationshipDescription) throws -> RelationshipMembers {
        fireFault()
        if loadedToMany.contains(relationship.name) {
            if let members = values[relationship.name] as? RelationshipMembers, members.isComplete { return members }
            if values[relationship.name] == nil { return membersForChange(relationship) }
        }
        return installStored(try managedObjectContext?.loadToMany(relationship, of: self) ?? [], for: relationship)
    }

    /// Takes what the store lists as the members of `relationship`, with the changes made
    /// since the last save applied (a fetch's prefetching reads many objects' at once);
    /// `distinct` when none can be listed twice (a one-to-many's rows): nothing is indexed then
    /// until something looks a member up.
    @discardableResult
    func installStored(_ stored: [ManagedObject], for relationship: RelationshipDescription, distinct: Bool = false)
        -> RelationshipMembers {
        let pending = values[relationship.name] as? RelationshipMembers
        let members =
            pending.map { $0.isComplete ? RelationshipMembers(complete: stored) : $0.completed(withStored: stored) }
            ?? (distinct ? RelationshipMembers(distinct: stored) : RelationshipMembers(complete: stored))
        values[relationship.name] = members
        loadedToMany.insert(relationship.name)
        return members
    }

    /// The members of a to-many relationship to change: those read already, or the changes
    /// made since the last save while the relationship is a fault (changing it never reads it).
    func membersForChange(_ relationship: RelationshipDescription) -> RelationshipMembers {
        fireFault()
        let isLoaded = loadedToMany.contains(relationship.name)
        if let members = values[relationship.name] as? RelationshipMembers, members.isComplete == isLoaded {
            return members
        }
        // Never saved: nothing in the store to read, so the relationship is all here. Loaded and
        // absent: an object inserted with the relationship empty (see `insert`).
        let isAllHere = isPendingInsert || objectID.primaryKey == nil || (isLoaded && values[relationship.name] == nil)
        let members = isAllHere ? RelationshipMembers(complete: []) : RelationshipMembers()
        values[relationship.name] = members
        if isAllHere { loadedToMany.insert(relationship.name) }
        return members
    }

    /// Makes `member` join the to-many `relationship`; false when it was a member already.
    func join(_ member: ManagedObject, _ relationship: RelationshipDescription) -> Bool {
        let members = membersForChange(relationship)
        let comesBack = relationship.isOrdered && members.removed[ObjectIdentifier(member)] != nil
        guard members.insert(member, isStored: { isStoredMember(member, of: relationship) }) else { return false }
        // A stored member that left and came back is no change of membership, but it is last now.
        if comesBack { members.markRewritesAll() }
        return true
    }

    /// Takes `member` out of the to-many `relationship`; false when it was not a member.
    func leave(_ member: ManagedObject, _ relationship: RelationshipDescription) -> Bool {
        membersForChange(relationship).remove(member) { isStoredMember(member, of: relationship) }
    }

    /// Whether the store lists `member` in this object's unread to-many `relationship`: for a
    /// one-to-many, the member's stored to-one says so (no read); for a many-to-many, its join row.
    private func isStoredMember(_ member: ManagedObject, of relationship: RelationshipDescription) -> Bool {
        member.fireFault()
        guard let ownKey = objectID.primaryKey, let memberKey = member.objectID.primaryKey,
              let inverse = inverse(of: relationship) else { return false }
        guard inverse.isToMany else {
            switch member.committedValues[inverse.name] {
            case let owner as ManagedObject: return owner === self
            case let fault as FaultReference: return fault.primaryKey == ownKey
            default: return false
            }
        }
        return deferringErrors {
            try managedObjectContext?.joinRowExists(
                from: self, primaryKey: ownKey, to: memberKey, through: relationship)
        } ?? false
    }

    /// Forgets the members read from the store (they may be stale), keeping unsaved changes.
    func forgetLoadedMembers() {
        var kept: Set<String> = []
        for name in loadedToMany {
            guard let members = values[name] as? RelationshipMembers else { continue }
            if members.rewritesAll {
                kept.insert(name)
            } else {
                values[name] = members.hasUnsavedChanges ? members.unsavedChanges() : nil
            }
        }
        loadedToMany = kept
    }

    /// The value of an attribute or relationship, loading what it needs from the store and
    /// throwing when that fails, where ``value(forKey:)`` (which cannot throw) leaves the error
    /// to the context's next fetch or save.
    ///
    /// - throws: ``ObjectGraphError`` 133000 for a relationship whose destination row does not
    ///   exist or an unknown key, 134060 for a stored value that cannot be decoded, or the
    ///   store's error.
    public func loadedValue(forKey key: String) throws -> Any? {
        if isFault {
            isFault = false
            try managedObjectContext?.fulfillFault(self)
        }
        if let type = entity.attributeType(of: key) {
            guard type == .transformable, let encoded = values[key] as? EncodedValue else { return values[key] }
            guard let context = managedObjectContext else { return nil }
            let value = try context.decode(
                encoded, transformerName: entity.attributesByName[key]?.valueTransformerName, entity: entity, key: key)
            replaceEncoded(key, with: value)
            return value
        }
        guard let relationship = entity.relationshipsByName[key] else {
            throw ObjectGraphError(
                code: .objectNotFound, message: "entity \(entity.name) has no property named '\(key)'")
        }
        return relationship.isToMany ? try loadedToManyObjects(relationship) : try loadedToOneObject(relationship)
    }

    private func inverse(of relationship: RelationshipDescription) -> RelationshipDescription? {
        guard let name = relationship.inverseName else { return nil }
        return managedObjectContext?.model.entity(named: relationship.destinationEntityName)?.relationship(named: name)
    }

    private func setToOne(_ relationship: RelationshipDescription, to newValue: ManagedObject?) {
        let old = toOneObject(relationship)
        guard old !== newValue else { return }
        primitiveSetToOne(relationship, newValue)
        guard let inverse = inverse(of: relationship) else { return }
        if let old { old.primitiveUnlink(inverse, from: self) }
        if let newValue { newValue.primitiveLink(inverse, to: self) }
    }

    private func replaceToMany(_ relationship: RelationshipDescription, with objects: [ManagedObject]) {
        let members = deferringErrors { try loadedMembers(relationship) } ?? membersForChange(relationship)
        let old = members.objects
        registerUndo(forKey: relationship.name)
        members.replaceAll(with: objects)
        markChanged(relationship.name)
        guard let inverse = inverse(of: relationship) else { return }
        let oldSet = Set(old.map(ObjectIdentifier.init))
        for removed in old where !members.contains(removed) { removed.primitiveUnlink(inverse, from: self) }
        for added in members.objects where !oldSet.contains(ObjectIdentifier(added)) {
            added.primitiveLink(inverse, to: self)
        }
    }

    private func primitiveSetToOne(_ relationship: RelationshipDescription, _ object: ManagedObject?) {
        registerUndo(forKey: relationship.name)
        values[relationship.name] = object
        markChanged(relationship.name)
    }

    /// Makes `relationship` of this object point at (or contain) `owner`, the object on the
    /// other side that just changed; a one-to-one's previous partner is released.
    func primitiveLink(_ relationship: RelationshipDescription, to owner: ManagedObject) {
        if relationship.isToMany {
            guard join(owner, relationship) else { return }
            didChangeMembership(of: owner, joined: true, in: relationship)
        } else {
            let previous = toOneObject(relationship)
            guard previous !== owner else { return }
            if let previous, let backwards = inverse(of: relationship) {
                previous.primitiveUnlink(backwards, from: self)
            }
            primitiveSetToOne(relationship, owner)
        }
    }

    func primitiveUnlink(_ relationship: RelationshipDescription, from owner: ManagedObject) {
        if relationship.isToMany {
            leaveRecordingChange(owner, relationship)
        } else if toOneObject(relationship) === owner {
            primitiveSetToOne(relationship, nil)
        }
    }

    /// Takes `member` out of a to-many and records the change; false when it was not a member.
    /// Undo keeps an ordered one whole as it was (one member joining again would go to the end,
    /// not back to its place): O(its size) once per undo group, O(1) for each later change.
    @discardableResult
    private func leaveRecordingChange(_ member: ManagedObject, _ relationship: RelationshipDescription) -> Bool {
        guard relationship.isOrdered else {
            guard leave(member, relationship) else { return false }
            didChangeMembership(of: member, joined: false, in: relationship)
            return true
        }
        let registerUndo = undoOfValue(forKey: relationship.name)
        guard leave(member, relationship) else { return false }
        registerUndo?()
        markChanged(relationship.name)
        return true
    }

    /// After `member` joined or left a to-many relationship: undo learns the one change, not a
    /// copy of the relationship.
    private func didChangeMembership(of member: ManagedObject, joined: Bool, in relationship: RelationshipDescription) {
        registerUndo(ofMembership: member, joined: joined, key: relationship.name)
        markChanged(relationship.name)
    }

    func markChanged(_ key: String) {
        guard !isPendingInsert else {
            // Nothing to track for the save, but observers still hear of the change.
            managedObjectContext?.insertedObjectDidChange(self)
            return
        }
        changedKeys.insert(key)
        managedObjectContext?.objectDidChange(self)
    }

    // MARK: - Hooks

    /// Override to add checks to the model's validation; append failures to `errors`.
    /// Called at save for inserted and updated objects.
    ///
    /// - throws: when the check itself cannot run (a fetch it needs failed): the save fails
    ///   with that error and writes nothing, rather than saving what was not checked.
    open func validateForSave(into errors: inout [ValidationError]) throws {}

    /// Called after the object is inserted into a context; default values are set already.
    ///
    /// Lifecycle hooks are methods of ``ManagedObject`` to override, as in Core Data: register the
    /// subclass with ``ManagedObjectModel/setClass(_:forEntityName:)``.
    open func awakeFromInsert() {}

    /// Called at the start of each save of its context that writes this object (inserted,
    /// updated or deleted), before validation, as Core Data's `willSave()`. Changes made here
    /// are saved with it; changing another object makes that one part of the save too.
    open func willSave() {}

    /// Called once when the object is about to be deleted, before its delete rules run (its
    /// relationships are still set), as Core Data's `prepareForDeletion()`: at the end of the
    /// event in which it was deleted, or at the save, whichever comes first; also for objects a
    /// cascade deletes.
    open func prepareForDeletion() {}

    // MARK: - Hashable, description

    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The entity and identity only: values may be secret.
    public var description: String { "<\(entity.name) \(objectID)>" }
}
