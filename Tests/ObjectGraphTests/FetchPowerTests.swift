import Foundation
import XCTest

@testable import ObjectGraph

/// Result types, aggregates, grouping, batches, prefetching, batch requests and object-ID
/// URIs; every figure is checked against the same question answered by walking objects.
final class FetchPowerTests: ObjectGraphTestCase {
    /// A deterministic pseudo-random generator, so a failure can be replayed.
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// 12 categories with 0–3 systems each, 10 uncategorised systems, 4 tags spread around.
    @discardableResult
    private func populate(_ stack: Stack, seed: UInt64 = 7) throws -> [ManagedObject] {
        var random = Generator(state: seed)
        let context = stack.context
        let tags = (0..<4).map { index -> ManagedObject in
            let tag = context.insertNewObject(forEntityName: "Tag")
            tag["name"] = "tag\(index)"
            return tag
        }
        var systems: [ManagedObject] = []
        func system(_ category: ManagedObject?) {
            let system = context.insertNewObject(forEntityName: "System")
            system["name"] = "s\(systems.count)"
            system["userId"] = "user\(systems.count)"
            system["rank"] = random.next(100) - 20
            system["password"] = "pw\(random.next(5))"
            system["category"] = category
            system["tags"] = tags.filter { _ in random.next(3) == 0 }
            systems.append(system)
        }
        for index in 0..<12 {
            let category = context.insertNewObject(forEntityName: "Category")
            category["name"] = "Cat \(index)"
            for _ in 0..<random.next(4) { system(category) }
        }
        for _ in 0..<10 { system(nil) }
        try context.save()
        return systems
    }

    private func request(
        _ entity: String, _ format: String? = nil, _ arguments: Any?...
    ) throws -> FetchRequest<ManagedObject> {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        if let format { request.predicate = try Predicate(format: format, argumentArray: arguments) }
        return request
    }

    // MARK: - Result types

    func testATextArgumentHoldingANulIsNotCutAtItRowByRow() throws {
        let stack = try makeStack(.sqlite)
        let system = stack.context.insertNewObject(forEntityName: "System")
        system["name"] = "a"
        system["userId"] = "user"
        try stack.context.save()
        // An object's ID among the properties reads the rows one by one, binding the argument
        // itself: cut at its NUL, "a\0b" would find "a".
        var request = try request("System", "name == %@", "a\u{0}b")
        request.dictionaryProperties = [.objectID(), .keyPath("name")]
        let context = ManagedObjectContext(coordinator: stack.coordinator)
        XCTAssertEqual(try context.fetchDictionaries(request).count, 0)
        request.predicate = try Predicate(format: "name == %@", "a")
        XCTAssertEqual(try context.fetchDictionaries(request).map { $0["name"] as? String }, ["a"])
    }

    func testObjectIDAndCountResultsMatchTheObjects() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            for format in [
                "rank > 10", "category.name BEGINSWITH 'Cat 1'", "password == 'pw2'", "ANY tags.name == 'tag1'",
                "TRUEPREDICATE",
            ] {
                var request = try request("System", format)
                request.sortDescriptors = [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "name")]
                let objects = try context.fetch(request)
                XCTAssertFalse(objects.isEmpty, format)
                XCTAssertEqual(try context.fetchObjectIDs(request), objects.map(\.objectID), format)
                XCTAssertEqual(try context.count(for: request), objects.count, format)
                request.fetchLimit = 3
                request.fetchOffset = 2
                XCTAssertEqual(
                    try context.fetchObjectIDs(request), Array(objects.dropFirst(2).prefix(3)).map(\.objectID), format)
            }
        }
    }

    // MARK: - Aggregates

    func testAggregatesInPredicatesAgreeWithKeyPathsInMemory() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            let categories = try context.fetch(try request("Category"))
            let ranks = { (category: ManagedObject) in
                (category["systems"] as! [ManagedObject]).map { $0["rank"] as! Int }
            }
            let cases: [(String, Any, (ManagedObject) -> Bool)] = [
                ("systems.@count == %@", 2, { ranks($0).count == 2 }),
                ("systems.@sum.rank > %@", 60, { ranks($0).reduce(0, +) > 60 }),
                ("systems.@sum.rank == %@", 0, { ranks($0).reduce(0, +) == 0 }),
                (
                    "systems.@avg.rank >= %@", 30.5,
                    {
                        let r = ranks($0)
                        return !r.isEmpty && Double(r.reduce(0, +)) / Double(r.count) >= 30.5
                    }
                ),
                ("systems.@min.rank < %@", 0, { ranks($0).min().map { $0 < 0 } ?? false }),
                ("systems.@max.rank > %@", 70, { ranks($0).max().map { $0 > 70 } ?? false }),
            ]
            for (format, argument, expected) in cases {
                let wanted = Set(categories.filter(expected).map { $0["name"] as! String })
                XCTAssertEqual(Set(try context.names("Category", format, argument)), wanted, format)
                // The same predicate evaluated on objects in memory (the key-path path) agrees.
                let predicate = try Predicate(format: format, argument)
                XCTAssertEqual(
                    Set(categories.filter { predicate.evaluate(with: $0) }.map { $0["name"] as! String }), wanted,
                    format)
            }
            // Unsaved objects are judged in memory by the same rule.
            let fresh = context.insertNewObject(forEntityName: "Category")
            fresh["name"] = "Fresh"
            let system = context.insertNewObject(forEntityName: "System")
            system["userId"] = "fresh1"
            system["rank"] = 1000
            system["category"] = fresh
            XCTAssertTrue(try context.names("Category", "systems.@sum.rank > 999").contains("Fresh"))
            XCTAssertThrowsError(try context.names("Category", "systems.@sum.nothing > 1"))
        }
    }

    func testDictionaryResultsGroupAndAggregateAsObjectsDo() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let systems = try populate(stack)
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            var request = try request("System", "rank > %@", -5)
            request.dictionaryProperties = [
                .keyPath("category.name", as: "category"), .aggregate(.count, of: "*", as: "n"),
                .aggregate(.sum, of: "rank", as: "total"), .aggregate(.average, of: "rank", as: "mean"),
                .aggregate(.min, of: "rank", as: "low"), .aggregate(.max, of: "rank", as: "high"),
            ]
            request.propertiesToGroupBy = ["category.name"]
            request.sortDescriptors = [
                FetchSortDescriptor(key: "total", ascending: false), FetchSortDescriptor(key: "category"),
            ]
            let rows = try context.fetchDictionaries(request)

            let matching = systems.filter { ($0["rank"] as! Int) > -5 }
            let groups = Dictionary(grouping: matching) { ($0["category"] as? ManagedObject)?["name"] as? String }
            XCTAssertEqual(rows.count, groups.count)
            for row in rows {
                let members = groups[row["category"] as? String]!.map { $0["rank"] as! Int }
                XCTAssertEqual(row["n"] as? Int, members.count)
                XCTAssertEqual(row["total"] as? Int, members.reduce(0, +))
                XCTAssertEqual(
                    row["mean"] as! Double, Double(members.reduce(0, +)) / Double(members.count), accuracy: 1e-9)
                XCTAssertEqual(row["low"] as? Int, members.min())
                XCTAssertEqual(row["high"] as? Int, members.max())
            }
            XCTAssertEqual(rows.map { $0["total"] as! Int }, rows.map { $0["total"] as! Int }.sorted(by: >))
            XCTAssertTrue(rows.contains { $0["category"] == nil }, "the uncategorised group has no category key")

            // Distinct values, and a to-many aggregate as a property.
            var distinct = try self.request("System")
            distinct.dictionaryProperties = [.keyPath("category.name")]
            distinct.returnsDistinctResults = true
            XCTAssertEqual(
                try context.fetchDictionaries(distinct).count,
                Set(systems.map { ($0["category"] as? ManagedObject)?["name"] as? String }).count)
            var perCategory = try self.request("Category")
            perCategory.dictionaryProperties = [
                .keyPath("name"), .keyPath("systems.@count", as: "count"), .keyPath("systems.@sum.rank", as: "sum"),
            ]
            for row in try context.fetchDictionaries(perCategory) {
                let category = try context.objects("Category", "name == %@", row["name"] as! String)[0]
                let ranks = (category["systems"] as! [ManagedObject]).map { $0["rank"] as! Int }
                XCTAssertEqual(row["count"] as? Int, ranks.count)
                XCTAssertEqual(row["sum"] as? Int, ranks.reduce(0, +))
            }

            // A transformed attribute is decoded (in memory), and cannot be aggregated in SQL.
            var secrets = try self.request("System", "name == 's0'")
            secrets.dictionaryProperties = [.keyPath("name"), .keyPath("password")]
            XCTAssertEqual(
                try context.fetchDictionaries(secrets).first?["password"] as? String, systems[0]["password"] as? String
            )
            secrets.dictionaryProperties = [.aggregate(.max, of: "password", as: "p")]
            XCTAssertThrowsError(try context.fetchDictionaries(secrets)) { error in
                XCTAssertTrue("\(error)".contains("transformed"), "\(error)")
            }
            secrets.dictionaryProperties = [.keyPath("nope")]
            XCTAssertThrowsError(try context.fetchDictionaries(secrets)) { XCTAssertTrue("\($0)".contains("nope")) }
        }
    }

    /// Transformed attributes and object IDs in dictionary results are read from the rows, never
    /// through objects, with the same values, order and window as the objects give, and the same
    /// error for a value that does not decode.
    func testDictionaryResultsOfTransformedValuesComeFromRowsAsObjectsWouldGiveThem() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            var random = Generator(state: 11)
            // A category holds at most 3 systems in this model: 100 of them, under 3 names.
            let categories = (0..<100).map { index -> ManagedObject in
                let category = stack.context.insertNewObject(forEntityName: "Category")
                category["name"] = "Cat \(index % 3)"
                return category
            }
            for index in 0..<300 {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["name"] = "n\(random.next(40))"
                system["userId"] = "user\(index)"
                let word = ["Zeta", "alpha", "Émile", "beta", "éclair"][random.next(5)]
                system["password"] = word + "\(random.next(3))"
                system["rank"] = index
                system["category"] = random.next(4) == 0 ? nil : categories[index / 3]
            }
            try stack.context.save()
            let properties: [FetchedProperty] = [
                .objectID(), .keyPath("name"), .keyPath("password"), .keyPath("category.name", as: "category"),
                .keyPath("rank"),
            ]
            func fromObjects(_ request: FetchRequest<ManagedObject>) throws -> [[String]] {
                let context = ManagedObjectContext(coordinator: stack.coordinator)
                return try context.fetch(request).map { object in
                    ["\(object.objectID)", object["name"] as! String, object["password"] as! String,
                     object.value(forKeyPath: "category.name") as? String ?? "-", "\(object["rank"]!)"]
                }
            }
            let sorts: [[FetchSortDescriptor]] = [
                [FetchSortDescriptor(key: "password", caseInsensitive: true), FetchSortDescriptor(key: "rank")],
                [FetchSortDescriptor(key: "password", ascending: false), FetchSortDescriptor(key: "rank")],
                [FetchSortDescriptor(key: "rank", ascending: false)],
            ]
            for (format, sort, limit, offset) in [
                ("rank >= 50", sorts[0], 0, 0), ("rank >= 50", sorts[1], 25, 10),
                ("category.name == 'Cat 1'", sorts[2], 7, 3),
                ("password BEGINSWITH[c] 'z'", sorts[0], 0, 0),
            ] {
                var request = try request("System", format)
                request.sortDescriptors = sort
                request.fetchLimit = limit
                request.fetchOffset = offset
                request.dictionaryProperties = properties
                let context = ManagedObjectContext(coordinator: stack.coordinator)
                let rows = try context.fetchDictionaries(request) { row in
                    ["\(row["objectID"]!)", row["name"] as! String, row["password"] as! String,
                     row["category"] as? String ?? "-", "\(row["rank"]!)"]
                }
                XCTAssertEqual(rows, try fromObjects(request), format)
                XCTAssertFalse(rows.isEmpty, format)
                XCTAssertEqual(context.registered.count, 0, "\(format): no object was made")
            }
            // A predicate reading what is not a property (SELF is the object, not its ID) needs the
            // objects; the results are the same.
            let sameContext = ManagedObjectContext(coordinator: stack.coordinator)
            let target = try XCTUnwrap(try sameContext.fetch(request("System", "rank == 7")).first)
            let unreadCases: [(String, [Any?])] = [
                ("password BEGINSWITH[c] 'z' OR name == 'n3'", []), ("password == 'x' OR SELF == %@", [target]),
            ]
            for (format, arguments) in unreadCases {
                var unread = try request("System")
                unread.predicate = try Predicate(format: format, argumentArray: arguments)
                unread.sortDescriptors = [FetchSortDescriptor(key: "rank")]
                unread.dictionaryProperties = [.objectID(), .keyPath("rank"), .keyPath("password")]
                let expected = try sameContext.fetch(unread).map { "\($0.objectID) \($0["rank"]!)" }
                XCTAssertFalse(expected.isEmpty, format)
                XCTAssertEqual(
                    try sameContext.fetchDictionaries(unread) {
                        "\($0["objectID"]!) \($0["rank"]!)"
                    }, expected, format)
            }
            // A value that is not a transformer's fails as the objects' fetch fails, naming the row.
            let store = stack.passwords
            try stack.coordinator.performWrite { transaction in
                try transaction.db.execute(
                    sql: "UPDATE \(store.qualified("ZSYSTEM")) SET ZPASSWORD = 'text' WHERE Z_PK = 5")
            }
            var all = try request("System")
            all.dictionaryProperties = properties
            func failure(_ fetch: () throws -> Any) -> String? {
                do {
                    _ = try fetch()
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            let fromRows = failure { try ManagedObjectContext(coordinator: stack.coordinator).fetchDictionaries(all) }
            XCTAssertEqual(fromRows, failure { try ManagedObjectContext(coordinator: stack.coordinator).fetch(all) })
            XCTAssertTrue(fromRows?.contains("row 5") ?? false, fromRows ?? "no error")
        }
    }

    // MARK: - Batches

    /// A fetched result read by name: the later of two properties of one name, as a dictionary keeps it.
    func testFetchedValuesReadByNameAsTheirDictionaryDoes() {
        var row = FetchedValues(names: ["name", "rank", "name"])
        row.values = ["first", nil, "second"]
        XCTAssertEqual(row["name"] as? String, "second")
        XCTAssertNil(row["rank"])
        XCTAssertNil(row["missing"])
        XCTAssertEqual(row.dictionary.count, 1)
        XCTAssertEqual(row.dictionary["name"] as? String, "second")
    }

    func testBatchedFetchReadsBatchesAndReleasesThoseLeftBehind() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            for index in 0..<1000 {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["name"] = String(format: "n%04d", index)
                system["userId"] = "user\(index)"
                system["rank"] = index
            }
            try stack.context.save()
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            var request = try request("System", "rank >= 100")
            request.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
            request.fetchBatchSize = 50
            let results = try context.fetchBatched(request)
            XCTAssertEqual(results.count, 900)
            XCTAssertEqual(context.registered.count, 0, "nothing is read before it is reached")
            let kept = results[3]
            results[10]["rank"] = -1  // an unsaved change must survive its batch being left
            var highWater = 0
            var ranks: [Int] = []
            for object in results {
                ranks.append(object["rank"] as! Int)
                highWater = max(highWater, context.registered.count)
            }
            XCTAssertEqual(Array(ranks.prefix(10)), Array((990...999).reversed()))
            XCTAssertEqual(ranks[10], -1)
            XCTAssertEqual(Array(ranks.dropFirst(11)), Array((100...988).reversed()))
            XCTAssertLessThanOrEqual(
                highWater, 50 + 2, "only the current batch and objects held elsewhere stay registered")
            XCTAssertTrue(results[3] === kept, "an object still referenced keeps its identity")
            try context.save()
            XCTAssertEqual(
                try ManagedObjectContext(coordinator: stack.coordinator).names("System", "rank == -1"), ["n0989"])
        }
    }

    func testBatchedFetchOfARowDeletedMeanwhileFailsTheNextFetch() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            for index in 0..<30 {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["userId"] = "user\(index)"
                system["rank"] = index
            }
            try stack.context.save()
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            var request = try request("System")
            request.sortDescriptors = [FetchSortDescriptor(key: "rank")]
            request.fetchBatchSize = 10
            let results = try context.fetchBatched(request)
            try ManagedObjectContext(coordinator: stack.coordinator).execute(
                BatchDeleteRequest(
                    entityName: "System",
                    predicate: try Predicate(format: "rank == 15")))
            XCTAssertEqual(results.map { $0["rank"] as? Int }, (0..<30).map { $0 == 15 ? nil : $0 })
            XCTAssertThrowsError(try context.fetch(request)) {
                XCTAssertTrue("\($0)".contains("no longer exist"), "\($0)")
            }
        }
    }

    func testPrefetchedRelationshipsNeedNoFurtherReads() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let plain = ManagedObjectContext(coordinator: stack.coordinator)
            let expected = try plain.objects("System", sort: [FetchSortDescriptor(key: "name")]).map { system in
                [(system["category"] as? ManagedObject)?["name"] as? String ?? "-"]
                    + (system["tags"] as! [ManagedObject]).map { $0["name"] as! String }.sorted()
                    + ((system["category"] as? ManagedObject)?["systems"] as? [ManagedObject] ?? []).map {
                        $0["name"] as! String
                    }.sorted()
            }
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            var request = try request("System")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            request.relationshipKeyPathsForPrefetching = ["category.systems", "tags"]
            let systems = try context.fetch(request)
            let reads = stack.coordinator.readCount
            let seen = systems.map { system in
                [(system["category"] as? ManagedObject)?["name"] as? String ?? "-"]
                    + (system["tags"] as! [ManagedObject]).map { $0["name"] as! String }.sorted()
                    + ((system["category"] as? ManagedObject)?["systems"] as? [ManagedObject] ?? []).map {
                        $0["name"] as! String
                    }.sorted()
            }
            XCTAssertEqual(stack.coordinator.readCount, reads, "walking prefetched relationships read the store")
            XCTAssertEqual(seen, expected)
            // Without prefetching the same walk does read.
            let lazy = ManagedObjectContext(coordinator: stack.coordinator)
            let lazySystems = try lazy.objects("System")
            let before = stack.coordinator.readCount
            _ = lazySystems.map { ($0["tags"] as! [ManagedObject]).count }
            XCTAssertGreaterThan(stack.coordinator.readCount, before)
        }
    }

    // MARK: - Batch requests

    func testBatchInsertWritesRowsThatReadBackWithEncodedSecrets() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let rows: [[String: Any]] = (0..<200).map {
                ["name": "b\($0)", "userId": "user\($0)", "rank": $0 % 7, "password": "secret\($0)"]
            }
            let result = try stack.context.execute(BatchInsertRequest(entityName: "System", objects: rows))
            XCTAssertEqual(result.count, 200)
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            let systems = try context.objects(
                "System", sort: [FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "name")])
            XCTAssertEqual(Set(systems.map(\.objectID)), Set(result.objectIDs))
            for system in systems {
                let index = Int((system["name"] as! String).dropFirst())!
                XCTAssertEqual(system["password"] as? String, "secret\(index)")
                XCTAssertEqual(system["rank"] as? Int, index % 7)
            }
            XCTAssertEqual(
                try context.count(for: try request("System", "rank == 3")),
                rows.filter { $0["rank"] as! Int == 3 }.count)
            // Stored encoded, bound to the row it lives in.
            XCTAssertTrue(
                stack.transformer.places.contains {
                    $0.entityName == "System" && $0.primaryKey == result.objectIDs[5].primaryKey
                })
            // A new object after a batch insert takes the next primary key.
            let next = context.insertNewObject(forEntityName: "System")
            next["userId"] = "after1"
            try context.save()
            XCTAssertEqual(next.objectID.primaryKey, 201)

            for (bad, reason) in [
                (["userId": "abc", "rank": "high"], "rank"), (["name": "x"], "userId"),
                (["userId": "abc", "colour": 1], "colour"),
            ] {
                XCTAssertThrowsError(
                    try stack.context.execute(
                        BatchInsertRequest(entityName: "System", objects: [["userId": "fine"], bad]))
                ) { error in
                    XCTAssertTrue("\(error)".contains("row 2") && "\(error)".contains(reason), "\(error)")
                }
            }
            XCTAssertEqual(try context.count(for: try request("System")), 201, "a refused batch inserts nothing")
        }
    }

    func testBatchUpdateChangesMatchingRowsAndMovesTheirVersion() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let systems = try populate(stack)
            let stale = ManagedObjectContext(coordinator: stack.coordinator)
            let staleObject = try stale.objects("System", "rank < 0").first!
            let expected = Set(systems.filter { ($0["rank"] as! Int) < 0 }.map(\.objectID))
            let result = try stack.context.execute(
                BatchUpdateRequest(
                    entityName: "System", predicate: try Predicate(format: "rank < 0"),
                    propertiesToUpdate: ["rank": 0, "password": "reset", "name": nil]))
            XCTAssertEqual(Set(result.objectIDs), expected)
            XCTAssertEqual(
                systems.filter { expected.contains($0.objectID) }.map { $0["password"] as? String },
                Array(repeating: "reset", count: expected.count), "the context's own objects were refreshed")
            let fresh = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try fresh.count(for: try request("System", "rank < 0")), 0)
            XCTAssertEqual(try fresh.count(for: try request("System", "password == 'reset'")), expected.count)
            XCTAssertEqual(try fresh.count(for: try request("System", "name == nil")), expected.count)
            staleObject["rank"] = 5
            XCTAssertThrowsError(try stale.save()) { XCTAssertEqual(($0 as? ObjectGraphError)?.code, .mergeConflict) }

            for (properties, format, reason) in [
                (["userId": nil], "rank > 0", "required"), (["rank": "x"], "rank > 0", "Integer"),
                (["rank": 1], "password == 'x'", "cannot run in SQL"),
            ] as [([String: Any?], String, String)] {
                XCTAssertThrowsError(
                    try stack.context.execute(
                        BatchUpdateRequest(
                            entityName: "System", predicate: try Predicate(format: format),
                            propertiesToUpdate: properties))
                ) { error in
                    XCTAssertTrue("\(error)".contains(reason), "\(error)")
                }
            }
        }
    }

    func testBatchDeleteFollowsDeleteRules() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            let systems = try populate(stack)
            // Category.systems is Deny: a category that still has systems is not deleted, nor any other.
            XCTAssertThrowsError(try stack.context.execute(BatchDeleteRequest(entityName: "Category"))) {
                XCTAssertTrue("\($0)".contains("denies"))
            }
            let context = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try context.count(for: try request("Category")), 12)
            let empty = try context.objects("Category", "systems.@count == 0").map(\.objectID)
            XCTAssertEqual(
                Set(
                    try context.execute(
                        BatchDeleteRequest(
                            entityName: "Category", predicate: try Predicate(format: "systems.@count == 0"))
                    ).objectIDs),
                Set(empty))

            // Systems go with their tag links (many-to-many rows) and category links.
            let doomed = systems.filter { ($0["rank"] as! Int) > 50 }
            let result = try context.execute(
                BatchDeleteRequest(entityName: "System", predicate: try Predicate(format: "rank > 50")))
            XCTAssertEqual(Set(result.objectIDs), Set(doomed.map(\.objectID)))
            let after = ManagedObjectContext(coordinator: stack.coordinator)
            for tag in try after.objects("Tag") {
                let names = Set((tag["systems"] as! [ManagedObject]).map { $0["name"] as! String })
                let wanted = Set(
                    systems.filter {
                        ($0["rank"] as! Int) <= 50
                            && ($0["tags"] as! [ManagedObject]).contains {
                                $0["name"] as? String == tag["name"] as? String
                            }
                    }
                    .map { $0["name"] as! String })
                XCTAssertEqual(names, wanted)
            }
            for category in try after.objects("Category") {
                XCTAssertTrue((category["systems"] as! [ManagedObject]).allSatisfy { ($0["rank"] as! Int) <= 50 })
            }

            // Cascade: a note's attachments go with it, and are reported.
            let note = after.insertNewObject(forEntityName: "Note")
            note["title"] = "with files"
            for _ in 0..<3 { after.insertNewObject(forEntityName: "Attachment")["note"] = note }
            try after.save()
            let gone = try after.execute(BatchDeleteRequest(entityName: "Note"))
            XCTAssertEqual(
                gone.objectIDs.map(\.entityName).sorted(), ["Attachment", "Attachment", "Attachment", "Note"])
            XCTAssertEqual(
                try ManagedObjectContext(coordinator: stack.coordinator).count(for: try request("Attachment")), 0)
            XCTAssertNil(note.managedObjectContext, "the deleted object left its context")
        }
    }

    // MARK: - Object-ID URIs

    func testObjectIDURIsResolveBackToTheirObjects() throws {
        let stack = try makeStack(.sqlite)
        let systems = try populate(stack)
        let uris = systems.map(\.objectID.uriRepresentation)
        try stack.coordinator.close()

        let again = try makeStack(.sqlite)
        let context = again.context
        for (uri, system) in zip(uris, systems) {
            let id = try XCTUnwrap(again.coordinator.managedObjectID(forURIRepresentation: uri), uri.absoluteString)
            let object = try context.existingObject(with: id)
            XCTAssertEqual(object["name"] as? String, system["name"] as? String)
            XCTAssertEqual(object.objectID.uriRepresentation, uri)
        }
        let temporary = context.insertNewObject(forEntityName: "Tag").objectID.uriRepresentation
        XCTAssertNil(again.coordinator.managedObjectID(forURIRepresentation: temporary))
        // Mangled URIs resolve to nothing and never trap.
        var random = Generator(state: 99)
        let text = Array(uris[0].absoluteString)
        let alphabet = Array("x-coredata:/pP0123456789%ABCDEF-System_Tag.?#@ \u{0}é")
        var cases = 0
        for _ in 0..<2000 {
            var mutated = text
            for _ in 0..<(1 + random.next(3)) {
                let position = random.next(mutated.count)
                switch random.next(3) {
                case 0: mutated.remove(at: position)
                case 1: mutated.insert(alphabet[random.next(alphabet.count)], at: position)
                default: mutated[position] = alphabet[random.next(alphabet.count)]
                }
            }
            guard let url = URL(string: String(mutated)), url != uris[0] else { continue }
            cases += 1
            if let id = again.coordinator.managedObjectID(forURIRepresentation: url) {
                // Only a URI naming a real store, entity and key can resolve.
                XCTAssertTrue(
                    again.coordinator.persistentStores.contains { $0.identifier == id.storeIdentifier },
                    url.absoluteString)
                _ = try? context.existingObject(with: id)
            }
        }
        XCTAssertGreaterThan(cases, 1000)
        let otherStore = URL(string: "x-coredata://\(again.notes.identifier)/System/p1")!
        XCTAssertNil(
            again.coordinator.managedObjectID(forURIRepresentation: otherStore), "System lives in the Passwords store")
    }

    /// Values a batch at a time: the same as fetching then mapping, with the predicate and sort
    /// run in SQL (plain attributes) or in memory (a transformed one), and never more objects
    /// registered than the batch being read.
    func testMappedFetchAgreesWithFetchAndKeepsOnlyABatchRegistered() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            for index in 0..<600 {
                let system = stack.context.insertNewObject(forEntityName: "System")
                system["name"] = "n\((index * 7) % 600)"
                system["userId"] = "user\(index)"
                system["password"] = index % 3 == 0 ? "Secret\(index % 50)" : "plain\(index)"
                system["rank"] = index
            }
            try stack.context.save()
            let cases = [
                ("rank >= 100", FetchSortDescriptor(key: "name")),
                ("password BEGINSWITH[c] 'secret'", FetchSortDescriptor(key: "password", caseInsensitive: true)),
            ]
            for (format, sort) in cases {
                var request = try request("System", format)
                request.sortDescriptors = [sort, FetchSortDescriptor(key: "rank", ascending: false)]
                let expected = try ManagedObjectContext(coordinator: stack.coordinator).fetch(request)
                    .map { $0["rank"] as? Int ?? -1 }
                let context = ManagedObjectContext(coordinator: stack.coordinator)
                var highWater = 0
                let ranks = try context.fetchMapped(request, batchSize: 40) { object -> Int in
                    highWater = max(highWater, context.registered.count)
                    return object["rank"] as? Int ?? -1
                }
                XCTAssertEqual(ranks, expected, format)
                XCTAssertGreaterThan(ranks.count, 150, format)
                XCTAssertLessThanOrEqual(highWater, 40, "\(format): only the batch being read is registered")
                XCTAssertEqual(context.registered.count, 0, "\(format): nothing stays registered")
            }
        }
    }
}
