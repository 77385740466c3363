import Foundation
import ObjectGraph
import StashCrypto

/// One sync's work on the vault's context: the local changes to send, the received ones
/// merged field by field, the conflicts resolved. Nothing is saved here.
struct SyncMerge {
    var state: SyncState
    var report: SyncReport
    /// Changes to send, by item identity.
    var outgoing: [String: SyncChange] = [:]
    /// Items deleted here and brought back by an undo since the last sync this device recorded.
    var undoneDeletions: Set<String> = []
    /// Items sent unchanged, as they stand, to a remote new to this device (counted, not listed).
    var resent: Set<String> = []
    /// Items changed here and sent whole to such a remote: the fields that changed (listed).
    var changedFields: [String: Set<String>] = [:]

    var me: String { state.device }

    mutating func tick(_ wall: Date = Date()) -> HybridClock {
        let clock = HybridClock.tick(after: state.clock, wall: wall, device: me)
        state.clock = clock
        return clock
    }

    mutating func observe(_ clock: HybridClock) {
        if state.clock.map({ clock > $0 }) ?? true { state.clock = clock }
    }
}

extension Vault {
    // MARK: - Local changes

    /// The changes made here since the last sync (every item on the first), each field
    /// stamped with a clock reading for the save that made it.
    func collectLocalChanges(_ merge: inout SyncMerge, everything: Bool) throws {
        if everything {
            // What came before the first sync is in the items themselves.
            merge.state.token = try coordinator.currentPersistentHistoryToken()
            let clock = merge.tick()
            for entity in Self.syncedEntities {
                for object in try context.fetch(FetchRequest<ManagedObject>(entityName: entity)) {
                    try context.decodeValues(of: object)
                    if Self.syncIdentity(of: object) == nil {
                        (object as? any SyncedEntity)?.syncIdentity = entity == Category.entityName
                            && Self.seedCategories.contains { $0.name == displayName(object) }
                            ? Self.seedIdentity(of: displayName(object)) : UUID()
                    }
                    // A seed category as seeded: every vault has it already.
                    if entity == Category.entityName,
                       Self.syncIdentity(of: object) == Self.seedIdentity(of: displayName(object)).uuidString,
                       Self.seedCategories.contains(where: { $0.name == displayName(object) }) { continue }
                    let keys = Self.syncedFields[entity, default: []].map(\.key)
                    try addPut(object, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, clock) }), history: true,
                               into: &merge)
                }
            }
            return
        }
        struct Touched {
            var entity: String
            var primaryKey: Int64
            var inserted = false
            /// Inserted by an undo: the row is a deleted one back, its values as they were then.
            var insertedByUndo: HybridClock?
            var deleted: (id: String, clock: HybridClock)?
            var fields: [String: HybridClock] = [:]
            var history = false
        }
        var touched: [String: Touched] = [:]
        var order: [String] = []
        for transaction in try context.fetchHistory(after: merge.state.token) {
            merge.state.token = transaction.token
            guard transaction.author != Self.syncAuthor, transaction.author != Self.rekeyAuthor else { continue }
            try merge.state.readClocks()
            let clock = merge.tick(transaction.timestamp)
            for change in transaction.changes {
                let entity = change.changedObjectID.entityName
                guard let fields = Self.syncedFields[entity], let primaryKey = change.changedObjectID.primaryKey
                else { continue }
                let name = "\(entity)#\(primaryKey)"
                if touched[name] == nil { order.append(name) }
                var item = touched[name] ?? Touched(entity: entity, primaryKey: primaryKey)
                switch change.changeType {
                case .insert where transaction.author == Self.undoAuthor:
                    item.inserted = true
                    item.insertedByUndo = clock
                case .insert:
                    item.inserted = true
                    for field in fields { item.fields[field.key] = clock }
                    item.history = true
                case .update:
                    let updated = change.updatedProperties ?? []
                    for field in fields where updated.contains(field.key) { item.fields[field.key] = clock }
                    if updated.contains(PasswordEntry.Key.history.rawValue) { item.history = true }
                case .delete:
                    let stored = change.tombstone?[SyncKeys.uuid]
                    if let id = (stored as? UUID)?.uuidString ?? (stored as? Data).flatMap(Self.uuid(from:)) {
                        item.deleted = (id, clock)
                    }
                }
                touched[name] = item
            }
        }
        // A deletion undone before it was sent: the row back is the item as it was, so what is sent
        // is what changed on its rows since the sync (before each deletion, after each undo), at
        // those changes' clocks. Sent as an edit of every field, the undo won over other machines'
        // later edits. An item whose deletion was sent comes back whole (a revival).
        var deletedRows: [String: [String]] = [:]
        for name in order {
            if let deleted = touched[name]?.deleted { deletedRows[deleted.id, default: []].append(name) }
        }
        for name in order {
            guard var item = touched[name], let undoClock = item.insertedByUndo, item.deleted == nil,
                  let object = try context.existingObject(entityName: item.entity, primaryKey: item.primaryKey)
            else { continue }
            let id = Self.syncIdentity(of: object)
            let earlierRows = id.flatMap { deletedRows[$0] } ?? []
            if earlierRows.isEmpty || id.map({ merge.state.deleted[$0] != nil }) == true {
                for field in Self.syncedFields[item.entity, default: []] where item.fields[field.key] == nil {
                    item.fields[field.key] = undoClock
                }
                item.history = true
            } else {
                if let id { merge.undoneDeletions.insert(id) }
                var fields: [String: HybridClock] = [:]
                for row in earlierRows {
                    guard let earlier = touched.removeValue(forKey: row) else { continue }
                    fields.merge(earlier.fields) { $1 }
                    item.history = item.history || earlier.history
                }
                item.fields = fields.merging(item.fields) { $1 }
            }
            touched[name] = item
        }
        for name in order {
            guard let item = touched[name] else { continue }
            if let deleted = item.deleted {
                guard !item.inserted else { continue }
                // A deletion of a row still here was forged (the integrity record covers the history too).
                if try context.existingObject(entityName: item.entity, primaryKey: item.primaryKey) != nil {
                    throw Self.forgedDeletion(item.entity, primaryKey: item.primaryKey)
                }
                merge.outgoing[deleted.id] = SyncChange(
                    entity: item.entity, id: deleted.id, kind: .delete, clock: deleted.clock,
                    seen: merge.state.latestClock(of: deleted.id))
                continue
            }
            guard let object = try context.existingObject(entityName: item.entity, primaryKey: item.primaryKey),
                  !item.fields.isEmpty || item.history else { continue }
            try context.decodeValues(of: object)
            if let object = object as? any SyncedEntity, object.syncIdentity == nil { object.syncIdentity = UUID() }
            // An item whose deletion was sent, back (an undone deletion): a revival, or the machines
            // that applied the deletion would drop it.
            let id = Self.syncIdentity(of: object)
            let isBack = item.inserted && id.map { merge.state.deleted[$0] != nil } == true
            if isBack, let id { merge.state.deleted[id] = nil }
            try addPut(object, keys: item.fields, history: item.history, kind: isBack ? .revive : .put, into: &merge)
        }
        for deletion in merge.outgoing.values where deletion.kind == .delete {
            guard let held = try heldItem(deletion) else { continue }
            // Brought back on a new row by another process since the history was read (an undo
            // in browse): the next sync sends it. Otherwise no save of mystash's wrote that deletion.
            guard try isInsertedAfter(merge.state.token, held) else {
                throw Self.forgedDeletion(deletion.entity, primaryKey: held.objectID.primaryKey)
            }
            merge.outgoing[deletion.id] = nil
        }
    }

    /// For a remote other than the one remembered, after the changes since the last sync: every
    /// other item, each field with the clock it was last sent or received with (as a snapshot
    /// carries them), so the new log holds the whole vault and no field is made newer than it is.
    func collectRecordedItems(_ merge: inout SyncMerge) throws {
        try merge.state.readClocks()
        for (id, object) in try SyncIndex(context: context).objects.sorted(by: { $0.key < $1.key }) {
            let pending = merge.outgoing[id]
            guard pending?.kind != .delete else { continue }
            // The fields a change made here does not carry, at their clocks: a new remote's clone
            // must find every field of the item.
            let keys = (merge.state.fields[id] ?? [:]).filter { pending?.fields?[$0.key] == nil }
            // An item no sync ever carried (a seed category as seeded) is in every vault already.
            guard !keys.isEmpty else { continue }
            try context.decodeValues(of: object)
            if let pending {
                merge.changedFields[id] = Set((pending.fields ?? [:]).keys)
            } else {
                merge.resent.insert(id)
            }
            try addPut(object, keys: keys, history: true, into: &merge)
        }
    }

    /// The item the store holds under a deletion's sync identity, on another row than the deleted one.
    private func heldItem(_ deletion: SyncChange) throws -> ManagedObject? {
        guard let id = UUID(uuidString: deletion.id) else { return nil }
        return try items(deletion.entity, withSyncIdentity: id, limit: 1).first
    }

    /// Up to `limit` items of `entity` with the sync identity `id`, insertions not saved yet included.
    func items(_ entity: String, withSyncIdentity id: UUID, limit: Int) throws -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(
            entityName: entity, predicate: try Predicate(format: "\(SyncKeys.uuid) == %@", id))
        request.fetchLimit = limit
        return try context.fetch(request)
    }

    private func isInsertedAfter(_ token: PersistentHistoryToken?, _ object: ManagedObject) throws -> Bool {
        try context.fetchHistory(after: token).contains { transaction in
            transaction.changes.contains {
                $0.changeType == .insert && $0.changedObjectID.primaryKey == object.objectID.primaryKey
                    && $0.changedObjectID.entityName == object.entity.name
            }
        }
    }

    static func forgedDeletion(_ entity: String, primaryKey: Int64?) -> VaultError {
        .rowChangedOutside(CheckProblem(
            store: entity == Note.entityName ? notesFileName : passwordsFileName, entity: entity,
            primaryKey: primaryKey,
            message: "the store's history records its deletion, but the store holds it: history rows were written "
                + "outside mystash"))
    }

    static func uuid(from data: Data) -> String? {
        guard data.count == 16 else { return nil }
        return data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)).uuidString }
    }

    /// Adds the fields `keys` of `object` (each with its clock) to what is sent.
    func addPut(_ object: ManagedObject, keys: [String: HybridClock], history: Bool, kind: SyncChange.Kind = .put,
                into merge: inout SyncMerge) throws {
        guard let id = Self.syncIdentity(of: object) else { return }
        let entity = object.entity.name
        // A deletion not sent yet of an item here again (an undone deletion): the item is sent instead.
        let pending = merge.outgoing[id].flatMap { $0.kind == .delete ? nil : $0 }
        var change = pending ?? SyncChange(entity: entity, id: id, kind: kind, fields: [:])
        if kind == .revive { change.kind = .revive }
        for field in Self.syncedFields[entity, default: []] {
            guard let clock = keys[field.key] else { continue }
            change.fields?[field.key] = SyncFieldValue(
                clock: clock, base: merge.state.fields[id]?[field.key],
                value: try syncValue(of: object, field.key, field.kind))
        }
        if history, let entry = object as? PasswordEntry {
            let items = historyInfo(of: entry)
            change.history = items.isEmpty ? nil : items
        }
        merge.outgoing[id] = change
    }

    /// Records the clocks of what is sent, once the merge has settled it, and hands it over
    /// (`merge.outgoing` is empty after).
    func settleOutgoing(_ merge: inout SyncMerge, index: SyncIndex) throws -> [SyncChange] {
        var changes: [SyncChange] = []
        var resentCount = 0
        // Taken out of what was collected, so each change's fields are updated in place: a copy
        // left behind held every field of the vault twice on a first sync.
        for id in merge.outgoing.keys.sorted() {
            guard var change = merge.outgoing.removeValue(forKey: id) else { continue }
            let noun = Self.syncNoun(change.entity)
            if change.kind == .delete {
                merge.state.fields[id] = nil
                if let clock = change.clock { merge.state.deleted[id] = clock }
                changes.append(change)
                merge.report.sent.append(.init(kind: noun, name: "", action: "removed"))
                continue
            }
            // Values as they are after the merge (a rename of a clash, a field received).
            if let object = index.objects[id], !object.isDeleted {
                for field in Self.syncedFields[change.entity, default: []] where change.fields?[field.key] != nil {
                    change.fields?[field.key]?.value = try syncValue(of: object, field.key, field.kind)
                }
                if change.history != nil, let entry = object as? PasswordEntry {
                    change.history = historyInfo(of: entry)
                }
            } else {
                continue
            }
            guard !(change.fields ?? [:]).isEmpty || change.history != nil else { continue }
            let isNew = merge.state.fields[id] == nil
            for (key, value) in change.fields ?? [:] { merge.state.fields[id, default: [:]][key] = value.clock }
            changes.append(change)
            if merge.resent.contains(id) {
                resentCount += 1
                continue
            }
            var fields = (merge.changedFields[id] ?? Set((change.fields ?? [:]).keys))
                .filter { !Self.quietFields.contains($0) }.sorted().map(Self.fieldLabel)
            if fields.isEmpty, change.history != nil { fields = ["password history"] }
            let action = change.kind == .revive ? "restored" : isNew ? "added" : "changed"
            merge.report.sent.append(.init(kind: noun, name: index.objects[id].map(displayName) ?? "", action: action,
                                           fields: action == "changed" ? fields : nil))
        }
        merge.report.sent.sort { ($0.kind, $0.name) < ($1.kind, $1.name) }
        merge.report.resent = resentCount
        return changes
    }

    // MARK: - Merging received changes

    /// Merges the changes of received files into the context: per field, the later clock
    /// wins; concurrent edits are reported, and where this machine's value lost, an entry
    /// keeps it in its password history and a note text becomes a copy named for this device.
    func mergeReceived(_ files: [(device: String, payload: SyncPayload)], into merge: inout SyncMerge,
                       index: SyncIndex) throws {
        var names = merge.state.deviceNames ?? [:]
        for file in files where file.device != merge.me { names[file.device] = file.payload.deviceName }
        merge.state.deviceNames = names.isEmpty ? nil : names
        names[merge.me] = merge.state.deviceName
        func deviceName(_ clock: HybridClock) -> String { names[clock.device] ?? "another machine" }

        struct Incoming {
            var change: SyncChange
            var from: String
            var device: String
            var own: Bool
        }
        let incoming = files.flatMap { file in
            file.payload.changes.compactMap { change -> Incoming? in
                // One spelling of each identity, and only the entities sync knows.
                guard let uuid = UUID(uuidString: change.id), Self.syncedFields[change.entity] != nil else {
                    return nil
                }
                var change = change
                change.id = uuid.uuidString
                return Incoming(
                    change: change, from: file.payload.deviceName, device: file.device, own: file.device == merge.me)
            }
        }
        var received: [String: SyncReport.Item] = [:]
        var receivedOrder: [String] = []
        // Items whose name came or changed: only they can clash (names are read only then).
        var named = Set<String>()
        func note(_ id: String, _ item: SyncReport.Item, field: String? = nil) {
            if received[id] == nil { receivedOrder.append(id) }
            var entry = received[id] ?? item
            if let field, entry.action == "changed", !(entry.fields ?? []).contains(field) {
                entry.fields = (entry.fields ?? []) + [field]
            }
            received[id] = entry
        }

        // New items first, categories before the entries that name them.
        func rank(_ item: Incoming) -> Int { Self.syncedEntities.firstIndex(of: item.change.entity) ?? 9 }
        let creations = incoming.filter { $0.change.kind != .delete }.sorted { rank($0) < rank($1) }
        for item in creations where index.objects[item.change.id] == nil {
            let change = item.change
            guard Self.syncedFields[change.entity] != nil,
                  change.kind == .revive || merge.state.deleted[change.id] == nil,
                  merge.outgoing[change.id]?.kind != .delete || change.kind == .revive,
                  let uuid = UUID(uuidString: change.id) else { continue }
            if merge.outgoing[change.id]?.kind == .delete { merge.outgoing[change.id] = nil }
            let object = context.insertNewObject(forEntityName: change.entity)
            (object as? any SyncedEntity)?.syncIdentity = uuid
            index.objects[change.id] = object
            named.insert(change.id)
            merge.state.deleted[change.id] = nil
            // A new object has no values: clocks kept from an item deleted here would refuse them.
            merge.state.fields[change.id] = nil
            if !item.own {
                note(change.id, .init(kind: Self.syncNoun(change.entity), name: "", action: "added", device: item.from))
            }
        }

        // Field by field, in clock order: each value meets the one it replaced.
        var values: [(id: String, entity: String, key: String, value: SyncFieldValue, from: String, own: Bool)] = []
        for item in incoming where item.change.kind != .delete {
            for (key, value) in item.change.fields ?? [:] {
                values.append((item.change.id, item.change.entity, key, value, item.from, item.own))
            }
        }
        // Fields of one edit share its clock: by name among themselves, so reports list them alike.
        values.sort { $0.value.clock != $1.value.clock ? $0.value.clock < $1.value.clock : $0.key < $1.key }
        var ownValues = Set<String>()
        for incoming in values {
            merge.observe(incoming.value.clock)
            guard let object = index.objects[incoming.id], !object.isDeleted, object.entity.name == incoming.entity,
                  let kind = Self.syncedFields[incoming.entity]?.first(where: { $0.key == incoming.key })?.kind
            else { continue }
            if incoming.own { ownValues.insert("\(incoming.id)|\(incoming.key)|\(incoming.value.clock)") }
            let pending = merge.outgoing[incoming.id]?.fields?[incoming.key]
            let local = pending?.clock ?? merge.state.fields[incoming.id]?[incoming.key]
            let current = try syncValue(of: object, incoming.key, kind)
            let noun = Self.syncNoun(incoming.entity)
            if let local, local >= incoming.value.clock {
                if local != incoming.value.clock, incoming.value.base != local, incoming.value.value != current,
                   !Self.quietFields.contains(incoming.key) {
                    merge.report.conflicts.append(.init(
                        kind: noun, name: displayName(object), field: Self.fieldLabel(incoming.key),
                        resolution: "changed here and on \(incoming.from); kept the later change, from "
                            + deviceName(local)))
                }
                continue
            }
            let concurrent = local != nil && incoming.value.base != local && incoming.value.value != current
            if concurrent, let local, !Self.quietFields.contains(incoming.key) {
                var resolution = "changed here and on \(incoming.from); kept the later change, from \(incoming.from)"
                if local.device == merge.me, let lost = current {
                    if let entry = object as? PasswordEntry, incoming.key == PasswordEntry.Key.password.rawValue {
                        mergeHistory([HistoryInfo(password: lost, replacedAt: incoming.value.clock.date)], into: entry)
                        try addPut(object, keys: [:], history: true, into: &merge)
                        resolution += "; this machine's password is in the entry's history"
                    } else if object is Note, incoming.key == Note.Key.text.rawValue {
                        let copy = try copyNote(object, text: lost, clock: local, into: &merge, index: index)
                        resolution += "; this machine's text is in the note '\(copy)'"
                    }
                }
                merge.report.conflicts.append(.init(kind: noun, name: displayName(object),
                                                    field: Self.fieldLabel(incoming.key), resolution: resolution))
            }
            if pending != nil { merge.outgoing[incoming.id]?.fields?[incoming.key] = nil }
            if current != incoming.value.value {
                if incoming.key == PasswordEntry.Key.name.rawValue { named.insert(incoming.id) }
                try setSyncValue(incoming.value.value, of: object, incoming.key, kind, index: index)
                if !incoming.own {
                    note(incoming.id, .init(kind: noun, name: "", action: "changed", device: incoming.from),
                         field: Self.quietFields.contains(incoming.key) ? nil : Self.fieldLabel(incoming.key))
                }
            }
            merge.state.fields[incoming.id, default: [:]][incoming.key] = incoming.value.clock
        }
        // What this device sent before a crash kept it from recording so: not sent twice.
        for (id, change) in merge.outgoing {
            for (key, value) in change.fields ?? [:] where ownValues.contains("\(id)|\(key)|\(value.clock)") {
                merge.outgoing[id]?.fields?[key] = nil
            }
        }
        for item in incoming where item.change.kind != .delete {
            guard let history = item.change.history, let entry = index.objects[item.change.id] as? PasswordEntry,
                  !entry.isDeleted else { continue }
            let before = Set(entry.history.map(ObjectIdentifier.init))
            mergeHistory(history, into: entry)
            if !item.own, entry.history.contains(where: { !before.contains(ObjectIdentifier($0)) }) {
                note(item.change.id, .init(kind: "entry", name: "", action: "changed", device: item.from),
                     field: "password history")
            }
        }

        // A deletion its own device took back later (an undo, sent as a revival) in the same files: void.
        var revivals: [String: [(device: String, clock: HybridClock)]] = [:]
        for item in incoming where item.change.kind == .revive {
            guard let latest = (item.change.fields ?? [:]).values.map(\.clock).max() else { continue }
            revivals[item.change.id, default: []].append((item.device, latest))
        }
        // Deletes: an item changed after what the deleting device had seen stays, and is sent whole.
        // Categories last: one whose entries the same files delete is no longer in use.
        let deletions = incoming.filter { $0.change.kind == .delete }
        for item in deletions.filter({ $0.change.entity != Category.entityName })
            + deletions.filter({ $0.change.entity == Category.entityName }) {
            let change = item.change
            if let clock = change.clock { merge.observe(clock) }
            if let clock = change.clock,
               revivals[change.id, default: []].contains(where: { $0.device == item.device && $0.clock > clock }) {
                continue
            }
            // This device's deletion, sent before a crash kept it from recording so, of an item an
            // undo brought back since: the item stays and is sent whole after it, as a revival. (A
            // vault put back from a backup older than its deletion takes the deletion, as the rest.)
            if item.own, merge.undoneDeletions.contains(change.id), let object = index.objects[change.id],
               !object.isDeleted, object.entity.name == change.entity {
                let clock = merge.tick()
                let fields = Self.syncedFields[change.entity, default: []]
                let keys = Dictionary(uniqueKeysWithValues: fields.map { ($0.key, clock) })
                try addPut(object, keys: keys, history: true, kind: .revive, into: &merge)
                continue
            }
            guard let object = index.objects[change.id], !object.isDeleted, object.entity.name == change.entity else {
                if let clock = change.clock, index.objects[change.id] == nil { merge.state.deleted[change.id] = clock }
                continue
            }
            let pendingClocks = (merge.outgoing[change.id]?.fields ?? [:]).values.map(\.clock)
            let latest = ([merge.state.latestClock(of: change.id)].compactMap { $0 } + pendingClocks).max()
            let changedSince = latest.map { latest in change.seen.map { latest > $0 } ?? true } ?? false
            let inUse = (object as? Category).map { $0.entries.contains { !$0.isDeleted } } ?? false
            // Attachments are not synced: the deleting device never saw them, and they would go with the entry.
            let keepsFiles = (object as? PasswordEntry).map { !$0.attachments.isEmpty } ?? false
            if changedSince || inUse || keepsFiles {
                let why = inUse ? "entries here still use it"
                    : changedSince ? "it was changed after \(item.from) deleted it"
                    : "its attachments are only on this machine"
                merge.report.conflicts.append(.init(kind: Self.syncNoun(change.entity), name: displayName(object),
                                                    field: nil, resolution: "kept: \(why)"))
                try revive(object, into: &merge)
                continue
            }
            if received[change.id]?.action == "added" {
                // Added and removed by the same files: nothing to tell.
                received[change.id] = nil
            } else if !item.own {
                note(change.id, .init(kind: Self.syncNoun(change.entity), name: displayName(object), action: "removed",
                                      device: item.from))
            }
            context.delete(object)
            merge.outgoing[change.id] = nil
            merge.state.fields[change.id] = nil
            if let clock = change.clock { merge.state.deleted[change.id] = clock }
        }

        try resolveNameClashes(touched: named, into: &merge, index: index)
        for id in receivedOrder {
            guard var item = received[id] else { continue }
            if item.name.isEmpty, let object = index.objects[id] { item.name = displayName(object) }
            if item.action == "changed", (item.fields ?? []).isEmpty { continue }
            merge.report.received.append(item)
        }
    }

    /// A field as reports name it.
    static func fieldLabel(_ key: String) -> String {
        let labels: [PasswordEntry.Key: String] = [
            .userId: "user ID", .url: "URL", .moreURLs: "more URLs", .totp: "TOTP secret", .fields: "custom fields",
        ]
        return PasswordEntry.Key(rawValue: key).flatMap { labels[$0] } ?? key
    }

    /// Fields whose every edit changes them: their conflicts are not worth a line.
    static let quietFields = Set([PasswordEntry.Key.updatedAt, .createdAt].map(\.rawValue))

    /// Sends an item whole, to bring it back where it was deleted.
    func revive(_ object: ManagedObject, into merge: inout SyncMerge) throws {
        guard let id = Self.syncIdentity(of: object) else { return }
        var keys: [String: HybridClock] = [:]
        for field in Self.syncedFields[object.entity.name, default: []] {
            // An edit not sent yet keeps its clock: it is what makes other machines keep the item too.
            keys[field.key] = merge.outgoing[id]?.fields?[field.key]?.clock ?? merge.state.fields[id]?[field.key]
                ?? merge.tick()
        }
        try addPut(object, keys: keys, history: true, kind: .revive, into: &merge)
    }

    /// A new note holding this machine's text that lost to a later edit elsewhere; its identity
    /// comes from the note and the lost edit, so a rerun after a crash makes it once.
    func copyNote(_ note: ManagedObject, text: String, clock: HybridClock, into merge: inout SyncMerge,
                  index: SyncIndex) throws -> String {
        let id = Self.derivedUUID((try? SHA256Digest.hash(Array("\(Self.syncIdentity(of: note) ?? "")|\(clock)".utf8)))
                                  ?? [])
        let title = String(("\(displayName(note)) (\(merge.state.deviceName))").prefix(200))
        if index.objects[id.uuidString] != nil { return title }
        let copy = context.insert(Note.self)
        copy.syncIdentity = id
        copy.title = title
        copy.text = text
        copy.folder = (note as? Note)?.folder
        index.objects[id.uuidString] = copy
        let now = merge.tick()
        let keys = Self.syncedFields[Note.entityName, default: []].map(\.key)
        try addPut(copy, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, now) }), history: false, into: &merge)
        return title
    }

    /// Entry and category names are unique (ignoring case): of two items received or kept
    /// under one name, the one with the greater identity is renamed "name (2)", the same
    /// choice on every machine.
    func resolveNameClashes(touched: Set<String>, into merge: inout SyncMerge, index: SyncIndex) throws {
        for entity in [Category.entityName, PasswordEntry.entityName] {
            let objects = index.objects.filter { $0.value.entity.name == entity && !$0.value.isDeleted }
            guard objects.keys.contains(where: touched.contains) else { continue }
            for object in objects.values { try context.decodeValues(of: object) }
            var byName: [String: [(String, ManagedObject)]] = [:]
            for (id, object) in objects { byName[displayName(object).lowercased(), default: []].append((id, object)) }
            var taken = Set(byName.keys)
            for (_, group) in byName.sorted(by: { $0.key < $1.key }) where group.count > 1 {
                for (_, object) in group.sorted(by: { $0.0 < $1.0 }).dropFirst() {
                    guard let named = object as? any NamedEntity else { continue }
                    let old = named.itemName
                    let limit = entity == Category.entityName ? 64 : 100
                    var number = 2
                    var name = ""
                    repeat {
                        let suffix = " (\(number))"
                        name = String(old.prefix(limit - suffix.count)) + suffix
                        number += 1
                    } while taken.contains(name.lowercased())
                    taken.insert(name.lowercased())
                    named.itemName = name
                    try addPut(object, keys: [named.nameAttributeName: merge.tick()], history: false, into: &merge)
                    merge.report.conflicts.append(.init(kind: Self.syncNoun(entity), name: old, field: "name",
                                                        resolution: "another \(Self.syncNoun(entity)) has this name; "
                                                            + "renamed to '\(name)'"))
                }
            }
        }
    }
}
