import Foundation
import TestSupport
import XCTest
@testable import ObjectGraph

final class FetchTests: ObjectGraphTestCase {
    /// Web: GitHub(gh, rank 3, tags red), Gmail(gm, rank 5, tags red+blue); Desktop: Émail(em, rank 1); none: Zed(zz, rank 9).
    private func populate(_ stack: Stack) throws {
        let context = stack.context
        let web = context.insertNewObject(forEntityName: "Category")
        web["name"] = "Web"
        let desktop = context.insertNewObject(forEntityName: "Category")
        desktop["name"] = "Desktop"
        let red = context.insertNewObject(forEntityName: "Tag")
        red["name"] = "red"
        let blue = context.insertNewObject(forEntityName: "Tag")
        blue["name"] = "blue"
        for (name, user, rank, category, tags) in [("GitHub", "gh", 3, web, [red]), ("Gmail", "gmx", 5, web, [red, blue]),
                                                   ("Émail", "emx", 1, desktop, []), ("Zed", "zzz", 9, nil, [])] as [(String, String, Int, ManagedObject?, [ManagedObject])] {
            let system = context.insertNewObject(forEntityName: "System")
            system["name"] = name
            system["userId"] = user + "1"
            system["rank"] = rank
            system["category"] = category
            system["tags"] = tags
        }
        try context.save()
    }

    func testComparisonsStringOperatorsAndOptions() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let c = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try c.names("System", "rank == 3"), ["GitHub"])
            XCTAssertEqual(try c.names("System", "rank != 3"), ["Gmail", "Zed", "Émail"])
            XCTAssertEqual(try c.names("System", "rank < 3"), ["Émail"])
            XCTAssertEqual(try c.names("System", "rank <= 3"), ["GitHub", "Émail"])
            XCTAssertEqual(try c.names("System", "rank > 5"), ["Zed"])
            XCTAssertEqual(try c.names("System", "rank >= 5"), ["Gmail", "Zed"])
            XCTAssertEqual(try c.names("System", "rank BETWEEN {3, 5}"), ["GitHub", "Gmail"])
            XCTAssertEqual(try c.names("System", "name BEGINSWITH 'G'"), ["GitHub", "Gmail"])
            XCTAssertEqual(try c.names("System", "name BEGINSWITH 'g'"), [])
            XCTAssertEqual(try c.names("System", "name BEGINSWITH[c] 'g'"), ["GitHub", "Gmail"])
            XCTAssertEqual(try c.names("System", "name ENDSWITH 'mail'"), ["Gmail", "Émail"])
            XCTAssertEqual(try c.names("System", "name CONTAINS 'ai'"), ["Gmail", "Émail"])
            XCTAssertEqual(try c.names("System", "name ==[d] 'Email'"), ["Émail"])
            XCTAssertEqual(try c.names("System", "name ==[cd] 'email'"), ["Émail"])
            XCTAssertEqual(try c.names("System", "name ==[c] 'email'"), [])
            XCTAssertEqual(try c.names("System", "name LIKE 'G*b'"), ["GitHub"])
            XCTAssertEqual(try c.names("System", "name LIKE '?mail'"), ["Gmail", "Émail"])
            XCTAssertEqual(try c.names("System", "name MATCHES '[GZ].*'"), ["GitHub", "Gmail", "Zed"])
            XCTAssertEqual(try c.names("System", "name IN {'Zed', 'Gmail', 'nobody'}"), ["Gmail", "Zed"])
            XCTAssertEqual(try c.names("System", "name IN[c] %@", ["zed"]), ["Zed"])
            XCTAssertEqual(try c.names("System", "NOT (name BEGINSWITH 'G') AND (rank > 2 OR rank < 2)"), ["Zed", "Émail"])
            XCTAssertEqual(try c.names("System", "%K == %@", "userId", "gh1"), ["GitHub"])
            XCTAssertEqual(try c.names("System", "TRUEPREDICATE").count, 4)
            XCTAssertEqual(try c.names("System", "FALSEPREDICATE").count, 0)
        }
    }

    /// CONTAINS, BEGINSWITH and ENDSWITH on ASCII text take a byte-level path (memchr for
    /// candidates, case folded on the fly); it must answer as folding and `String` search do,
    /// on bytes next to the letters' cases too (`@`, `[`, backquote, `{`) and on empty strings.
    func testTheASCIIPathOfStringOperatorsAgreesWithFoldedStringSearch() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aAzZbB@[`{ 1e")
        func random(_ lengths: ClosedRange<Int>) -> String {
            String((0..<Int.random(in: lengths, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
        }
        for _ in 0..<20_000 {
            let text = random(0...24)
            let pattern = random(0...4)
            for op in [Predicate.Operator.contains, .beginsWith, .endsWith] {
                for options in [Predicate.Options(), .caseInsensitive] {
                    let (folded, needle) = options.isEmpty
                        ? (text, pattern) : (text.lowercased(), pattern.lowercased())
                    let expected = switch op {
                    case .beginsWith: folded.hasPrefix(needle)
                    case .endsWith: folded.hasSuffix(needle)
                    default: needle.isEmpty || folded.contains(needle)
                    }
                    XCTAssertEqual(PredicateEvaluator.stringTest(op, text, pattern, options), expected,
                                   "\(op) \(options) '\(text)' '\(pattern)'")
                }
            }
        }
    }

    func testRelationshipsNilAndBooleans() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let c = ManagedObjectContext(coordinator: stack.coordinator)
            XCTAssertEqual(try c.names("System", "category.name == 'Web'"), ["GitHub", "Gmail"])
            XCTAssertEqual(try c.names("System", "category.name BEGINSWITH[c] 'desk'"), ["Émail"])
            XCTAssertEqual(try c.names("System", "category == nil"), ["Zed"])
            XCTAssertEqual(try c.names("System", "category != nil").count, 3)
            let web = try c.objects("Category", "name == 'Web'").first!
            XCTAssertEqual(try c.names("System", "category == %@", web), ["GitHub", "Gmail"])
            XCTAssertEqual(try c.names("Category", "systems.@count == 2"), ["Web"])
            XCTAssertEqual(try c.names("Category", "ANY systems.rank > 4"), ["Web"])
            XCTAssertEqual(try c.names("Category", "ALL systems.rank > 2"), ["Web"])
            XCTAssertEqual(try c.names("Category", "NONE systems.rank > 2"), ["Desktop"])
            XCTAssertEqual(try c.names("System", "ANY tags.name == 'blue'"), ["Gmail"])
            XCTAssertEqual(try c.names("System", "tags.@count == 0"), ["Zed", "Émail"])
            XCTAssertEqual(try c.names("Tag", "ANY systems.category.name == 'Web'"), ["blue", "red"])

            let everything = c.insertNewObject(forEntityName: "Everything")
            everything["flag"] = true
            try c.save()
            XCTAssertEqual(try c.objects("Everything", "flag == TRUE").count, 1)
            XCTAssertEqual(try c.objects("Everything", "flag == FALSE").count, 0)
            XCTAssertEqual(try c.objects("Everything", "blob == nil").count, 1)
        }
    }

    /// Results sorted in memory are moved into place by swaps along the permutation's cycles:
    /// the order is that of a stable sort of their keys (nil first, text in byte order, ties
    /// in the order read), whatever the ties and cycles.
    func testSortingInMemoryIsAStableSortOfTheKeys() {
        var random = SplitMix64(seed: 23)
        let words: [String?] = [nil, "b", "a", "B", "ab", "é", "", "a\u{0}b", "e\u{301}"]
        let descriptors = [FetchSortDescriptor(key: "word"), FetchSortDescriptor(key: "number", ascending: false)]
        for count in [0, 1, 2, 7, 64, 500] {
            let keys: [(word: String?, number: Int)] = (0..<count).map { _ in
                (words.randomElement(using: &random)!, Int.random(in: 0..<3, using: &random))
            }
            var values = Array(0..<count)
            var sortKeys = SortKeys(descriptors)
            for key in keys {
                sortKeys.append(key.word)
                sortKeys.append(key.number)
            }
            ManagedObjectContext.sort(&values, by: sortKeys)
            let expected = (0..<count).sorted { left, right in
                let (a, b) = (keys[left], keys[right])
                // Bytes, not Swift's equality: "é" and "e\u{301}" are equal strings, not equal keys.
                let (first, second) = (a.word.map { Array($0.utf8) }, b.word.map { Array($0.utf8) })
                if first != second {
                    guard let first, let second else { return first == nil }
                    return first.lexicographicallyPrecedes(second)
                }
                return a.number != b.number ? a.number > b.number : left < right
            }
            XCTAssertEqual(values, expected, "\(count) values")
        }
    }

    func testSortLimitOffsetAndCount() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let c = ManagedObjectContext(coordinator: stack.coordinator)
            var request = FetchRequest<ManagedObject>(entityName: "System")
            request.sortDescriptors = [FetchSortDescriptor(key: "rank", ascending: false)]
            request.fetchLimit = 2
            request.fetchOffset = 1
            XCTAssertEqual(try c.fetch(request).map { $0["name"] as! String }, ["Gmail", "GitHub"])
            XCTAssertEqual(try c.count(for: request), 2)
            request.fetchLimit = 0
            request.fetchOffset = 0
            request.predicate = try Predicate(format: "rank > 2")
            XCTAssertEqual(try c.count(for: request), 3)
            request.sortDescriptors = [FetchSortDescriptor(key: "category.name"), FetchSortDescriptor(key: "name")]
            request.predicate = nil
            XCTAssertEqual(try c.fetch(request).map { $0["name"] as! String }, ["Zed", "Émail", "GitHub", "Gmail"])
        }
    }

    func testPendingChangesAreIncludedAndDeletedObjectsLeftOut() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let c = stack.context
            let fresh = c.insertNewObject(forEntityName: "System")
            fresh["name"] = "Aardvark"
            fresh["rank"] = 4
            c.delete(try c.objects("System", "name == 'Zed'").first!)
            XCTAssertEqual(try c.names("System", "rank > 3"), ["Aardvark", "Gmail"])
            var request = FetchRequest<ManagedObject>(entityName: "System")
            request.includesPendingChanges = false
            request.predicate = try Predicate(format: "rank > 3")
            XCTAssertEqual(try c.fetch(request).count, 2, "store only: Gmail and Zed")
        }
    }

    func testValuesAreBoundSoQuotesAndSQLCannotChangeTheQuery() {
        forEachStoreKind { kind in
            let stack = try makeStack(kind)
            try populate(stack)
            let c = ManagedObjectContext(coordinator: stack.coordinator)
            for hostile in ["' OR 1=1 --", "Zed' OR '1'='1", "x\"); DROP TABLE ZSYSTEM; --", "%", "_"] {
                XCTAssertEqual(try c.names("System", "name == %@", hostile), [], hostile)
                XCTAssertEqual(try c.names("System", "name CONTAINS %@", hostile), [], hostile)
                XCTAssertEqual(try c.names("System", "category.name BEGINSWITH %@", hostile), [], hostile)
            }
            XCTAssertEqual(try c.names("System").count, 4, "the table is intact")
            let quoted = c.insertNewObject(forEntityName: "System")
            quoted["name"] = "O'Brien"
            quoted["userId"] = "obrien"
            try c.save()
            XCTAssertEqual(try c.names("System", "name == %@", "O'Brien"), ["O'Brien"])
            XCTAssertEqual(try c.names("System", "name == 'O\\'Brien'"), ["O'Brien"])
        }
    }

    func testSyntaxErrorsNameThePosition() {
        func position(_ format: String) -> Int? {
            do {
                _ = try Predicate(format: format)
                return nil
            } catch let error as PredicateSyntaxError {
                XCTAssertTrue(error.description.contains("position \(error.position)"))
                return error.position
            } catch {
                return nil
            }
        }
        XCTAssertEqual(position("name == "), 9)
        XCTAssertEqual(position("name === 'x'"), 8)
        XCTAssertEqual(position("name == 'x' AND"), 16)
        XCTAssertEqual(position("name SOUNDSLIKE 'x'"), 6)
        XCTAssertEqual(position("(name == 'x'"), 7)
        XCTAssertEqual(position("name == 'x"), 9)
        XCTAssertThrowsError(try Predicate(format: "name == %@"), "missing argument")
    }

    func testUnknownKeyIsAnError() throws {
        let stack = try makeStack(.inMemory)
        XCTAssertThrowsError(try stack.context.objects("System", "nickname == 'x'")) { error in
            XCTAssertTrue("\(error)".contains("keypath 'nickname' not found in entity System"), "\(error)")
        }
    }
}
