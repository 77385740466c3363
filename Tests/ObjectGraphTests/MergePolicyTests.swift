import Foundation
import XCTest
@testable import ObjectGraph

/// The same conflicts under each merge policy, reached three ways: saving over a change
/// another context saved, merging its did-save notification first, and merging a change
/// made through another connection (as another process would) by `data_version`.
final class MergePolicyTests: BoardTestCase {
    enum Route: CaseIterable { case saveOnly, mergeDidSave, mergeExternal }

    struct Conflict {
        let mine: ManagedObjectContext
        let item: ManagedObject
        let g2: ManagedObject
    }

    /// Item "base" (rank 1, group g1). Theirs: name "theirs", rank 9, saved. Mine, unsaved:
    /// name "mine", group g2 — or a deletion.
    func makeConflict(_ kind: StoreKind, _ policy: MergePolicy, _ route: Route, deleting: Bool) throws -> Conflict {
        let mine = try makeBoard(kind, name: "\(policy)-\(route)-\(deleting)")
        mine.mergePolicy = policy
        let g1 = group(mine, "g1"), g2 = group(mine, "g2")
        let item = item(mine, "base", rank: 1, group: g1)
        try mine.save()
        _ = try mine.mergeExternalChanges()   // the baseline for outside changes

        let theirs: ManagedObjectContext
        if route == .mergeExternal, kind == .sqlite {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: mine.model)
            try coordinator.addPersistentStore(type: .sqlite, at: mine.coordinator.persistentStores[0].url)
            theirs = ManagedObjectContext(coordinator: coordinator, notificationCenter: NotificationCenter())
        } else {
            theirs = ManagedObjectContext(coordinator: mine.coordinator, notificationCenter: NotificationCenter())
        }
        let their = try XCTUnwrap(theirs.objects("Item").first)
        their["name"] = "theirs"
        their["rank"] = 9

        if deleting {
            mine.delete(item)
        } else {
            item["name"] = "mine"
            item["group"] = g2
        }
        let token = theirs.notificationCenter.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: theirs, queue: nil
        ) { note in
            if route == .mergeDidSave {
                do { try mine.mergeChanges(fromContextDidSave: note) } catch { XCTFail("\(error)") }
            }
        }
        defer { theirs.notificationCenter.removeObserver(token) }
        try theirs.save()
        if route == .mergeExternal { _ = try mine.mergeExternalChanges() }
        return Conflict(mine: mine, item: item, g2: g2)
    }

    func stored(_ context: ManagedObjectContext) throws -> [String] {
        let fresh = ManagedObjectContext(coordinator: context.coordinator, notificationCenter: NotificationCenter())
        return try fresh.objects("Item").map(Self.summary)
    }

    static func summary(_ item: ManagedObject) -> String {
        "\(item["name"] ?? "") \(item["rank"] ?? "") \((item["group"] as? ManagedObject)?["name"] as? String ?? "-")"
    }

    func testEachPolicyOnAnUpdateConflict() {
        let expected: [(MergePolicy, String?)] = [
            (.error, nil),
            (.rollback, "theirs 9 g1"),
            (.overwrite, "mine 1 g2"),
            (.mergeByPropertyStoreTrump, "theirs 9 g2"),
            (.mergeByPropertyObjectTrump, "mine 9 g2"),
        ]
        forEachStoreKind { kind in
            for route in Route.allCases where kind == .sqlite || route != .mergeExternal {
                for (policy, result) in expected {
                    let conflict = try makeConflict(kind, policy, route, deleting: false)
                    let label = "\(kind) \(policy) \(route)"
                    guard let result else {
                        XCTAssertThrowsError(try conflict.mine.save(), label) { error in
                            XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict, label)
                        }
                        XCTAssertEqual(try stored(conflict.mine), ["theirs 9 g1"], label)
                        XCTAssertEqual(conflict.item["name"] as? String, "mine", "\(label): changes kept to retry")
                        continue
                    }
                    try conflict.mine.save()
                    XCTAssertEqual(try stored(conflict.mine), [result], label)
                    let item = conflict.item
                    XCTAssertEqual(Self.summary(item), result, "\(label): the object reads as stored")
                    XCTAssertFalse(conflict.mine.hasChanges, label)
                    let groupHoldsIt = (conflict.g2["items"] as? [ManagedObject])?.contains(item) ?? false
                    XCTAssertEqual(groupHoldsIt, result.hasSuffix("g2"), "\(label): the inverse agrees")
                    item["rank"] = 5
                    XCTAssertNoThrow(try conflict.mine.save(), "\(label): the object is at the stored version")
                }
            }
        }
    }

    func testEachPolicyOnADeleteConflict() {
        let expected: [(MergePolicy, [String]?)] = [
            (.error, nil),
            (.rollback, ["theirs 9 g1"]),
            (.mergeByPropertyStoreTrump, ["theirs 9 g1"]),
            (.overwrite, []),
            (.mergeByPropertyObjectTrump, []),
        ]
        forEachStoreKind { kind in
            for route in Route.allCases where kind == .sqlite || route != .mergeExternal {
                for (policy, result) in expected {
                    let conflict = try makeConflict(kind, policy, route, deleting: true)
                    let label = "\(kind) \(policy) \(route)"
                    guard let result else {
                        XCTAssertThrowsError(try conflict.mine.save(), label)
                        XCTAssertEqual(try stored(conflict.mine), ["theirs 9 g1"], label)
                        continue
                    }
                    try conflict.mine.save()
                    XCTAssertEqual(try stored(conflict.mine), result, label)
                    XCTAssertEqual(conflict.item.managedObjectContext === conflict.mine, !result.isEmpty, label)
                }
            }
        }
    }

    /// A save deleting rows by the hundred (500 a statement): each row another context changed
    /// or deleted meanwhile is settled by the policy alone, and every other row goes.
    func testADeleteOfManyRowsSettlesEachConflictAloneAndDeletesTheRest() throws {
        let changedRanks = [3, 700, 1199]
        let expected: [(MergePolicy, [String]?)] = [
            (.error, nil),
            (.rollback, changedRanks.map { "theirs \($0) \($0) -" }),
            (.overwrite, []),
        ]
        for (policy, result) in expected {
            let mine = try makeBoard(.sqlite, name: "many-\(policy)")
            mine.mergePolicy = policy
            let items = (0..<1200).map { item(mine, "item \($0)", rank: $0, group: nil) }
            try mine.save()
            let theirs = ManagedObjectContext(coordinator: mine.coordinator, notificationCenter: NotificationCenter())
            let theirItems = Dictionary(
                uniqueKeysWithValues: try theirs.objects("Item").map { ($0["rank"] as! Int, $0) })
            for rank in changedRanks { theirItems[rank]?["name"] = "theirs \(rank)" }
            theirs.delete(try XCTUnwrap(theirItems[600]))
            try theirs.save()

            for item in items { mine.delete(item) }
            let label = "\(policy)"
            guard let result else {
                XCTAssertThrowsError(try mine.save(), label) { error in
                    XCTAssertEqual((error as? ObjectGraphError)?.code, .mergeConflict, label)
                }
                XCTAssertEqual(try stored(mine).count, 1199, "\(label): nothing was deleted")
                continue
            }
            try mine.save()
            XCTAssertEqual(try stored(mine).sorted(), result.sorted(), label)
            for (rank, item) in items.enumerated() {
                let kept = result.contains { $0.hasSuffix(" \(rank) -") }
                XCTAssertEqual(item.managedObjectContext === mine, kept, "\(label): item \(rank)")
                if kept { XCTAssertEqual(item["name"] as? String, "theirs \(rank)", "\(label): back as stored") }
            }
        }
    }
}
