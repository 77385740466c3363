import Foundation
import ObjectGraph
import StashCrypto
#if canImport(Glibc)
import Glibc
#endif

/// The remote moved between fetch and push: merge again.
private struct PushRejected: Error {}

/// Received files, verified and opened, with the heads they lead to.
struct VerifiedLog {
    var files: [(device: String, payload: SyncPayload)] = []
    var heads: [String: SyncState.Head] = [:]
    var read = 0
}

extension Vault {
    // MARK: - Sync

    /// Sends the changes made here since the last sync to the remote's log and merges the
    /// changes other machines sent, field by field; with `dryRun`, reports what it would do
    /// and changes nothing (it only fetches). The first sync names the remote; later ones
    /// remember it (`remote` replaces it).
    ///
    /// - throws: ``VaultError`` `.usage` without a remote; `.invalidData` naming the log file
    ///   for a remote that was tampered with, rolled back, or holds another vault (nothing is
    ///   applied); `.busy` when the remote cannot be reached or keeps moving.
    public func sync(remote: String? = nil, deviceName: String? = nil, dryRun: Bool = false) throws -> SyncReport {
        guard transformer.dataKey != nil else { throw VaultError.locked }
        var retries = 0
        while true {
            do {
                var report = try syncOnce(remote: remote, deviceName: deviceName, dryRun: dryRun, clone: nil)
                report.retries = retries
                // Counted only in a vault checked whole: a sync with nothing to do reads nothing else.
                if !verifiesEachRead, let notice = try attachmentsNotSyncedNotice() { report.notices.append(notice) }
                return report
            } catch is PushRejected where retries < 8 {
                context.rollback()
                retries += 1
            } catch is PushRejected {
                context.rollback()
                throw VaultError.remote(remote ?? "", .keptChanging)
            } catch {
                context.rollback()
                // The integrity check's verdict first: a damaged row may be tampering it names.
                try awaitVerification()
                throw VaultError.wrapping(error)
            }
        }
    }

    /// A sync state made by `clone`: the sync key and this device's new identity.
    struct CloneStart {
        var key: SecretBytes
        var state: SyncState
    }

    private func syncOnce(remote: String?, deviceName: String?, dryRun: Bool, clone: CloneStart?) throws
        -> SyncReport {
        guard let dataKey = transformer.dataKey else { throw VaultError.locked }
        let loaded = try Self.wrapErrors { try loadSyncState() }
        // Unlocked to verify what is read: the sync state's bucket vouches for it.
        if let loaded { try verifyRead(of: [loaded.row]) }
        var state: SyncState
        var syncKey: SecretBytes?
        if let loaded {
            (state, syncKey) = (loaded.state, loaded.key)
        } else if let clone {
            (state, syncKey) = (clone.state, clone.key)
        } else {
            state = SyncState(device: hexString(try Self.wrapErrors { try SecureRandom.bytes(count: 16) }),
                              deviceName: hostName())
        }
        let everything = loaded == nil && clone == nil
        // Another location than the one remembered: an empty remote is moved to (below).
        let newLocation = remote != nil && loaded != nil && remote != loaded?.state.remote
        if let remote { state.remote = remote }
        if let deviceName { state.deviceName = deviceName }
        guard let location = state.remote else {
            throw VaultError.noRemote
        }
        // A move carries this machine's view: what the others sent to the old remote since its last
        // sync there would be left behind (a git remote tells; a folder's state is not kept).
        let cache = directory.appendingPathComponent(Self.syncCacheName)
        let hasCache = FileManager.default.fileExists(atPath: cache.appendingPathComponent("HEAD").path)
        let oldRemoteMoved = newLocation && hasCache
            ? loaded.flatMap { $0.state.remote }.flatMap { old in
                (try? GitRemote(url: old, cache: cache))?.movedSinceLastSeen()
            } : nil
        // Changes to send: the whole vault is checked on a second connection while the remote is fetched.
        let sendsLocalChanges = try everything || newLocation || clone != nil
            || hasUnsyncedHistory(after: state.token)
        if sendsLocalChanges { startWholeVaultCheck() }
        let store = try makeSyncRemote(location, cache: cache, tipOnly: clone != nil)
        let listing = try store.fetch()
        let paths = listing.paths
        // An empty remote at a new location starts a new log: with a new sync key (so a data key
        // left behind by a rekey cannot read what is sent there) and the whole vault. One holding
        // this device's log is that log under another name, checked as always; one holding a log
        // begun elsewhere is joined by `clone`: machines resending their vaults there brought
        // back older master passwords and deleted items.
        let movesRemote = newLocation && paths.isEmpty
        // This log: one holding this device's files, or a file this device read from it (the same
        // contents: a device that moved starts a new log at 1 again).
        let isThisLog = paths.contains { $0.hasPrefix(SyncLayout.logFolder + state.device + "/") }
            || (loaded?.state.heads ?? [:]).contains { device, head in
                let path = SyncLayout.logPath(device: device, sequence: head.sequence)
                return paths.contains(path) && (head.version == nil || listing.versions[path] == head.version)
            }
        if newLocation, !paths.isEmpty, !isThisLog {
            throw VaultError.remote(withoutURLPasswords(location), .begunElsewhere)
        }
        if movesRemote {
            if oldRemoteMoved == true, let old = loaded?.state.remote {
                throw VaultError.remote(withoutURLPasswords(old), .changedSinceLastSync)
            }
            state.heads = [:]
            syncKey = nil
        }
        var report = SyncReport(remote: withoutURLPasswords(location), dryRun: dryRun)
        var newFiles: [String: [UInt8]] = [:]
        if paths.isEmpty {
            newFiles[SyncLayout.markerPath] = SyncLayout.marker
        } else if !paths.contains(SyncLayout.markerPath) {
            throw VaultError.remote(location, .notASyncLog(missing: [SyncLayout.markerPath]))
        }
        let keyPaths = paths.filter { $0.hasPrefix(SyncLayout.keysFolder) }.sorted()
        let wraps = try store.read(keyPaths)
        let opened = keyPaths.compactMap { wraps[$0].flatMap { try? SyncKey.unwrap($0, dataKey: dataKey) } }
        if syncKey == nil {
            if let key = opened.first {
                syncKey = key
            } else if keyPaths.isEmpty && paths.subtracting([SyncLayout.markerPath]).isEmpty {
                syncKey = try Self.wrapErrors { try SecretBytes.random(count: 32) }
            } else {
                throw VaultError.remote(location, .anotherVault)
            }
        }
        guard let syncKey else { throw VaultError.unexpected("no sync key") }
        // Each data key the vault has had wraps the sync key: a clone after a rekey reads everything.
        if !opened.contains(syncKey) {
            newFiles[SyncLayout.keysFolder + hexString(try Self.wrapErrors { try SecureRandom.bytes(count: 16) })] =
                try Self.wrapErrors { try SyncKey.wrap(syncKey, dataKey: dataKey) }
        }
        let logKey = try Self.wrapErrors { try SyncKey.logKey(syncKey: syncKey) }
        // A clone starts from the latest snapshot and reads only the files after it.
        var snapshotFile: (device: String, payload: SyncPayload)?
        if clone != nil, let snapshot = try latestSnapshot(paths: paths, store: store, logKey: logKey) {
            state.heads = snapshot.heads
            state.deleted = snapshot.deleted
            snapshotFile = (snapshot.device, SyncPayload(deviceName: snapshot.deviceName, changes: snapshot.items))
        }
        let log = try verifiedLog(listing, store: store, state: state, logKey: logKey)
        report.filesRead = log.read
        // Nothing to merge or send: so far only the sync state (its bucket verified) and the
        // remote's files (authenticated) were read, and nothing else of the vault is.
        if let loaded, !sendsLocalChanges, newFiles.isEmpty, log.files.isEmpty, log.heads == state.heads,
           state.remote == loaded.state.remote, state.deviceName == loaded.state.deviceName,
           state.keySlot == Data(keySlot.serialized).base64EncodedString() {
            return report
        }
        // Anything else of the vault is used only once the whole of it has passed its check.
        try awaitVerification()
        if !dryRun {
            try ensureStoreConstraints()
            // From the first sync on, every save is recorded for the next one.
            for store in [notesStore, passwordsStore] { store.setTracksHistory(true) }
        }

        var merge = SyncMerge(state: state, report: report)
        // The clocks are read only to merge what came (local changes read them as they come).
        if !log.files.isEmpty || snapshotFile != nil { try merge.state.readClocks() }
        if clone != nil { merge.state.token = try Self.wrapErrors { try coordinator.currentPersistentHistoryToken() } }
        try Self.wrapErrors {
            try collectLocalChanges(&merge, everything: everything)
            if movesRemote { try collectRecordedItems(&merge) }
        }
        // Nothing sent or received: no item is read (sync with nothing to do stays quick).
        let index = log.files.isEmpty && merge.outgoing.isEmpty && snapshotFile == nil
            ? SyncIndex() : try Self.wrapErrors { try SyncIndex(context: context) }
        try Self.wrapErrors {
            try mergeReceived((snapshotFile.map { [$0] } ?? []) + log.files, into: &merge, index: index)
        }
        let slotRecord = try keySlotChanges(
            log.files, dataKey: dataKey, adopting: !dryRun, republishing: movesRemote, merge: &merge)
        let changes = try Self.wrapErrors { try settleOutgoing(&merge, index: index) }
        merge.state.heads = log.heads
        if !changes.isEmpty || slotRecord != nil {
            if let slotRecord {
                newFiles[SyncLayout.keySlotPath] = Array(Data(base64Encoded: slotRecord.slot) ?? Data())
            }
            let payload = SyncPayload(deviceName: merge.state.deviceName, changes: changes, keySlot: slotRecord)
            let head = merge.state.heads[merge.me]
            let previous = head.flatMap { hexBytes($0.hash) } ?? [UInt8](repeating: 0, count: 32)
            let header = SyncLogHeader(device: hexBytes(merge.me) ?? [], sequence: (head?.sequence ?? 0) + 1,
                                       previousHash: previous)
            let file = try Self.wrapErrors {
                try SyncLogFile.seal(try payload.json(), header: header, logKey: logKey)
            }
            newFiles[SyncLayout.logPath(device: merge.me, sequence: header.sequence)] = file
            merge.state.heads[merge.me] = .init(sequence: header.sequence,
                                                hash: hexString(try Self.wrapErrors { try SHA256Digest.hash(file) }))
            merge.report.filesWritten = 1
            if try snapshotDue(paths: paths) {
                let snapshot = try Self.wrapErrors { try makeSnapshot(merge.state, index: index) }
                let covered = merge.state.heads.values.reduce(0) { $0 + Int(clamping: $1.sequence) }
                let path = SyncLayout.snapshotPath(device: merge.me, sequence: header.sequence, covered: covered)
                newFiles[path] = try Self.wrapErrors {
                    try SyncLogFile.seal(try snapshot.json(), header: SyncLogHeader(
                        device: header.device, sequence: header.sequence, previousHash: try SHA256Digest.hash(file)),
                                         logKey: logKey)
                }
            }
        }
        if dryRun {
            context.rollback()
            return merge.report
        }
        if !newFiles.isEmpty {
            guard try store.publish(newFiles) else { throw PushRejected() }
        }
        try storeSyncState(merge.state, key: syncKey, in: loaded?.row)
        guard context.hasChanges else { return merge.report }
        try saveSyncChanges()
        pruneSyncedHistory(upTo: merge.state.token)
        return merge.report
    }

    /// Reads the log files this device has not seen, after checking that every device's log
    /// still holds what was seen before, unchanged and in order.
    ///
    /// - throws: ``VaultError`` `.invalidData` naming the first file that is missing, out of
    ///   place, changed or forged.
    func verifiedLog(_ listing: RemoteListing, store: SyncRemote, state: SyncState, logKey: SecretBytes) throws
        -> VerifiedLog {
        func refuse(_ path: String, _ problem: String) -> VaultError {
            .remote(store.location, .tampered(file: path, problem: problem))
        }
        var sequences: [String: [UInt64]] = [:]
        for path in listing.paths where path.hasPrefix(SyncLayout.logFolder) {
            guard let (device, sequence) = SyncLayout.parseLogPath(path) else {
                throw refuse(path, "is not a log file name")
            }
            sequences[device, default: []].append(sequence)
        }
        for (device, head) in state.heads where !(sequences[device] ?? []).contains(head.sequence) {
            throw refuse(SyncLayout.logPath(device: device, sequence: head.sequence),
                         "is gone: the remote was rolled back to an older state")
        }
        var log = VerifiedLog(heads: state.heads)
        var toRead: [String] = []
        for (device, list) in sequences {
            let sorted = list.sorted()
            for (position, sequence) in sorted.enumerated() where sequence != UInt64(position + 1) {
                throw refuse(SyncLayout.logPath(device: device, sequence: UInt64(position + 1)), "is missing (dropped)")
            }
            // A head the remote still names as it did is unchanged: only the files after it are read.
            let head = state.heads[device]
            let unchanged = head.map { $0.version != nil && listing.versions[SyncLayout.logPath(
                device: device, sequence: $0.sequence)] == $0.version } ?? false
            let first = (head?.sequence ?? 0) + (unchanged ? 1 : 0)
            toRead += sorted.filter { $0 >= max(first, 1) }.map { SyncLayout.logPath(device: device, sequence: $0) }
        }
        let contents = try store.read(toRead)
        var opened: [(device: String, sequence: UInt64, payload: SyncPayload)] = []
        for (device, list) in sequences.sorted(by: { $0.key < $1.key }) {
            var previous = [UInt8](repeating: 0, count: 32)
            let seen = state.heads[device]
            if let seen {
                let path = SyncLayout.logPath(device: device, sequence: seen.sequence)
                if let bytes = contents[path] {
                    guard let hash = try? SHA256Digest.hash(bytes), hexString(hash) == seen.hash else {
                        throw refuse(path, "was changed after this machine read it")
                    }
                    log.heads[device]?.version = listing.versions[path]
                }
                guard let hash = hexBytes(seen.hash), hash.count == 32 else { throw Self.damagedSyncState() }
                previous = hash
            }
            for sequence in list.sorted() where sequence > (seen?.sequence ?? 0) {
                let path = SyncLayout.logPath(device: device, sequence: sequence)
                guard let bytes = contents[path] else { throw refuse(path, "cannot be read") }
                let header: SyncLogHeader
                let plaintext: [UInt8]
                do {
                    (header, plaintext) = try SyncLogFile.open(bytes, logKey: logKey)
                } catch {
                    throw refuse(path, "was changed or forged (it does not authenticate)")
                }
                guard hexString(header.device) == device, header.sequence == sequence else {
                    throw refuse(path, "holds file \(header.sequence) of device \(hexString(header.device)): "
                                    + "moved, reordered or replayed")
                }
                guard header.previousHash == previous else {
                    throw refuse(path, "does not follow the file before it: reordered, replayed or one was dropped")
                }
                guard let payload = try? JSONDecoder().decode(SyncPayload.self, from: Data(plaintext)) else {
                    throw refuse(path, "holds changes this version of mystash cannot read")
                }
                previous = try Self.wrapErrors { try SHA256Digest.hash(bytes) }
                opened.append((device, sequence, payload))
                log.heads[device] = .init(sequence: sequence, hash: hexString(previous),
                                          version: listing.versions[path])
                log.read += 1
            }
        }
        log.files = opened.map { ($0.device, $0.payload) }
        return log
    }

    /// Publishes this machine's key slot when its master password changed, and adopts one
    /// published elsewhere when it wraps the same data key (a `passwd` there: the new
    /// password opens this vault from now on); a rekey elsewhere is reported.
    /// `republishing`: the remote is a new, empty one: this machine's key slot goes there with
    /// the clock it had (the earliest clock when it had none), so a later change made elsewhere
    /// and sent to the old remote still wins.
    func keySlotChanges(_ files: [(device: String, payload: SyncPayload)], dataKey: SecretBytes, adopting: Bool,
                        republishing: Bool = false, merge: inout SyncMerge) throws -> KeySlotRecord? {
        let check = try Self.wrapErrors { try SyncKey.dataKeyCheck(dataKey: dataKey) }
        var names: [String: String] = [:]
        for file in files { names[file.device] = file.payload.deviceName }
        let latest = files.compactMap { file in file.payload.keySlot.map { (file.device, $0) } }
            .filter { $0.0 != merge.me }.max { $0.1.clock < $1.1.clock }
        if let (device, record) = latest, merge.state.keySlotClock.map({ record.clock > $0 }) ?? true {
            merge.observe(record.clock)
            merge.state.keySlotClock = record.clock
            let from = names[device] ?? "another machine"
            if Data(base64Encoded: record.dataKeyCheck).map(Array.init) == check,
               let bytes = Data(base64Encoded: record.slot), let slot = try? KeySlot(serialized: Array(bytes)) {
                if slot.slotIdentifier != keySlot.slotIdentifier {
                    for store in [notesStore, passwordsStore] where adopting {
                        coordinator.setMetadata(bytes, forKey: Self.keySlotKey, in: store)
                    }
                    guard adopting else { return nil }
                    keySlot = slot
                    // The record knows the slot it was unlocked with, to tell a key changed elsewhere.
                    integrityRecord?.keySlot = bytes
                    merge.report.notices.append(
                        "The master password was changed on \(from): use the new one here from now on.")
                }
                merge.state.keySlot = record.slot
            } else {
                // A rekey on either machine: the slot opens another data key than this machine's.
                merge.report.notices.append(
                    "The master password was changed on \(from), whose data key differs from this machine's "
                        + "(one of the two was given a new data key): this machine still reads everything and "
                        + "keeps its own master password.")
            }
        }
        let mine = Data(keySlot.serialized).base64EncodedString()
        guard merge.state.keySlot != mine || republishing else { return nil }
        let clock = republishing && merge.state.keySlot == mine
            ? merge.state.keySlotClock ?? HybridClock.earliest(device: merge.me) : merge.tick()
        let replacing = merge.state.keySlot != nil && merge.state.keySlot != mine
        merge.state.keySlot = mine
        merge.state.keySlotClock = clock
        if replacing {
            merge.report.notices.append(
                "Sent this machine's new master password (its key slot): the others use it after their next sync.")
        }
        return KeySlotRecord(slot: mine, dataKeyCheck: Data(check).base64EncodedString(), clock: clock)
    }

    // MARK: - Snapshots

    /// Makes a snapshot every `files` log files instead of every 100, so tests see one.
    public static func setSnapshotIntervalForTesting(_ files: Int) {
        SyncLayout.snapshotInterval = max(1, files)
    }

    /// Every ``SyncLayout/snapshotInterval`` log files a device that writes one also writes a
    /// snapshot, so that a clone does not replay years of history.
    func snapshotDue(paths: Set<String>) throws -> Bool {
        let logs = paths.filter { $0.hasPrefix(SyncLayout.logFolder) }.count + 1
        let covered = paths.compactMap(SyncLayout.parseSnapshotPath).map(\.covered).max() ?? 0
        return logs - covered >= SyncLayout.snapshotInterval
    }

    /// Everything the vault holds, with the clocks and heads it stands at.
    func makeSnapshot(_ state: SyncState, index: SyncIndex) throws -> SyncSnapshot {
        let complete = index.objects.isEmpty ? try SyncIndex(context: context) : index
        var items: [SyncChange] = []
        for (id, object) in complete.objects.sorted(by: { $0.key < $1.key }) where !object.isDeleted {
            try context.decodeValues(of: object)
            let entity = object.entity.name
            var fields: [String: SyncFieldValue] = [:]
            for field in Self.syncedFields[entity, default: []] {
                guard let clock = state.fields[id]?[field.key] else { continue }
                let value = try syncValue(of: object, field.key, field.kind)
                fields[field.key] = SyncFieldValue(clock: clock, value: value)
            }
            // An item no sync ever carried (a seed category as seeded) is in every vault already.
            guard !fields.isEmpty else { continue }
            let history = (object as? PasswordEntry).map(historyInfo)
            items.append(SyncChange(entity: entity, id: id, kind: .put, fields: fields,
                                    history: history?.isEmpty == false ? history : nil))
        }
        // The remote's names for the files are this machine's knowledge, not the log's.
        let heads = state.heads.mapValues { SyncState.Head(sequence: $0.sequence, hash: $0.hash) }
        return SyncSnapshot(deviceName: state.deviceName, heads: heads, deleted: state.deleted, items: items,
                            device: state.device)
    }

    /// The snapshot covering the most log files, opened and checked; nil when there is none.
    func latestSnapshot(paths: Set<String>, store: SyncRemote, logKey: SecretBytes) throws -> SyncSnapshot? {
        guard let best = paths.compactMap({ path in SyncLayout.parseSnapshotPath(path).map { (path, $0) } })
            .max(by: { $0.1.covered < $1.1.covered }) else { return nil }
        let refuse = VaultError.remote(store.location, .tampered(file: best.0, problem: "was changed or forged"))
        guard let bytes = try store.read([best.0])[best.0],
              let (header, plaintext) = try? SyncLogFile.open(bytes, logKey: logKey),
              hexString(header.device) == best.1.device, header.sequence == best.1.sequence,
              let snapshot = try? JSONDecoder().decode(SyncSnapshot.self, from: Data(plaintext)),
              snapshot.device == best.1.device, snapshot.heads[best.1.device]?.sequence == best.1.sequence,
              snapshot.heads.values.reduce(0, { $0 + Int(clamping: $1.sequence) }) == best.1.covered,
              snapshot.heads[best.1.device]?.hash == hexString(header.previousHash)
        else { throw refuse }
        return snapshot
    }

    // MARK: - Clone

    /// Makes a vault at `directory` from a remote another machine syncs to: its key slot, so
    /// the same master password opens it, and everything in its log. Built beside `directory`
    /// and renamed into place, so a crash leaves no vault or a complete one.
    ///
    /// - parameter unlock: given the remote's key slot, returns its data key (asks the master password).
    /// - throws: ``VaultError`` `.cannotCreate` when a vault exists there; `.invalidData` for
    ///   a remote that is not a mystash remote or was tampered with; `.wrongPassword`.
    public static func clone(from location: String, to directory: URL, deviceName: String?,
                             unlock: (KeySlot) throws -> SecretBytes) throws -> SyncReport {
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: directory.appendingPathComponent(passwordsFileName).path) {
            throw VaultError.vaultExists(path: directory.path)
        }
        let aside = try makeBuildDirectory(for: directory, kind: "clone")
        defer { try? fileManager.removeItem(at: aside) }
        let cache = aside.appendingPathComponent(syncCacheName)
        let store = try makeSyncRemote(location, cache: cache, tipOnly: true)
        let paths = try store.fetch().paths
        guard paths.contains(SyncLayout.markerPath), paths.contains(SyncLayout.keySlotPath) else {
            throw VaultError.remote(location, .notASyncLog(missing: [SyncLayout.markerPath, SyncLayout.keySlotPath]))
        }
        let files = try store.read([SyncLayout.keySlotPath] + paths.filter { $0.hasPrefix(SyncLayout.keysFolder) })
        let slot: KeySlot
        do {
            slot = try KeySlot(serialized: files[SyncLayout.keySlotPath] ?? [])
        } catch {
            throw VaultError.remote(location, .keySlotDamaged)
        }
        let dataKey = try unlock(slot)
        guard let syncKey = files.filter({ $0.key != SyncLayout.keySlotPath }).sorted(by: { $0.key < $1.key })
            .lazy.compactMap({ try? SyncKey.unwrap($0.value, dataKey: dataKey) }).first else {
            throw VaultError.remote(location, .noSyncKeyOpens)
        }
        let building = aside.appendingPathComponent("vault")
        let vault = try create(at: building, slot: slot, dataKey: dataKey)
        // A folder remote has no cache.
        guard !fileManager.fileExists(atPath: cache.path)
                || rename(cache.path, building.appendingPathComponent(syncCacheName).path) == 0 else {
            throw VaultError.cannotCreate(path: directory.appendingPathComponent(syncCacheName).path,
                                          reason: String(cString: strerror(errno)))
        }
        var state = SyncState(device: hexString(try wrapErrors { try SecureRandom.bytes(count: 16) }),
                              deviceName: deviceName ?? hostName(), remote: location)
        // The slot came from the remote: nothing to publish.
        state.keySlot = Data(slot.serialized).base64EncodedString()
        let report: SyncReport
        do {
            report = try vault.syncOnce(remote: nil, deviceName: nil, dryRun: false,
                                        clone: CloneStart(key: syncKey, state: state))
            try vault.coordinator.close()
        } catch {
            throw VaultError.wrapping(error)
        }
        if fileManager.fileExists(atPath: directory.path) { try checkPermissions(directory) }
        guard fsyncPath(building.path), rename(building.path, directory.path) == 0 else {
            throw VaultError.cannotCreate(path: directory.path, reason: String(cString: strerror(errno)))

        }
        _ = fsyncPath(directory.deletingLastPathComponent().path)
        return report
    }
}
