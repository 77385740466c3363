import Foundation
import XCTest
@testable import ObjectGraph

/// The model Apple's Core Data keeps in each store (`Z_MODELCACHE`), read back and compared with
/// the Xcode model that wrote the store.
extension CoreDataFixtureTests {
    func testEveryFixtureStoresModelCacheHasTheShapeOfTheModelThatWroteIt() throws {
        for (store, modelPath) in Self.pairs {
            let real = try model(modelPath)
            let cached = try XCTUnwrap(ManagedObjectModel.cachedModel(ofStoreAt: try copyStore(store)), store)
            XCTAssertEqual(cached.entityShapes, real.entityShapes, store)
            XCTAssertEqual(cached.entities.map(\.name), real.entities.map(\.name), store)
            XCTAssertEqual(cached.entities.map(\.entityNumber), real.entities.map(\.entityNumber), store)
            for entity in real.entities {
                let twin = try XCTUnwrap(cached.entity(named: entity.name))
                XCTAssertEqual(twin.isAbstract, entity.isAbstract, "\(store) \(entity.name)")
                XCTAssertEqual(
                    twin.uniquenessConstraints.map { $0.sorted() }, entity.uniquenessConstraints.map { $0.sorted() },
                    "\(store) \(entity.name)")
                for attribute in entity.attributes {
                    let read = try XCTUnwrap(twin.attribute(named: attribute.name), "\(entity.name).\(attribute.name)")
                    let place = "\(store) \(entity.name).\(attribute.name)"
                    XCTAssertEqual(read.isOptional, attribute.isOptional, place)
                    XCTAssertEqual(read.isTransient, attribute.isTransient, place)
                    XCTAssertEqual(read.valueTransformerName, attribute.valueTransformerName, place)
                    XCTAssertEqual(
                        read.defaultValue.map { "\($0)" }, attribute.defaultValue.map { "\($0)" }, place)
                }
                for relationship in entity.relationships {
                    let read = try XCTUnwrap(twin.relationship(named: relationship.name))
                    let place = "\(store) \(entity.name).\(relationship.name)"
                    XCTAssertEqual(read.deleteRule, relationship.deleteRule, place)
                    XCTAssertEqual(read.isOptional, relationship.isOptional, place)
                    XCTAssertEqual(read.minCount, relationship.minCount, place)
                }
            }
        }
        // Xcode's userDefinedModelVersionIdentifier is kept; without one the cache is named as such.
        let v2 = try ManagedObjectModel.cachedModel(
            ofStoreAt: try copyStore("coredataplus-samplemodel/SampleModel_V2.sqlite"))
        XCTAssertEqual(v2?.versionIdentifier, "2")
        let wibosco = try ManagedObjectModel.cachedModel(
            ofStoreAt: try copyStore("wibosco-migration-example/CoreDataMigration_Example_2.sqlite"))
        XCTAssertEqual(wibosco?.versionIdentifier, "Z_MODELCACHE")
        // The renaming identifier of version 2 (hexColor, formerly color) is in the cache too.
        XCTAssertEqual(wibosco?.entity(named: "Post")?.attribute(named: "hexColor")?.elementID, "color")
    }

    func testAStoreWithoutAModelCacheHasNone() throws {
        let url = try copyStore("bnr-coredatastack/TestModel.sqlite")
        _ = try runSQLite3([url.path, "DROP TABLE Z_MODELCACHE"])
        XCTAssertNil(try ManagedObjectModel.cachedModel(ofStoreAt: url))
    }

    /// Replaces the store's model cache with `bytes`, compressed by Python's zlib as raw deflate.
    private func setModelCache(of url: URL, python expression: String) throws {
        let script = """
            import sqlite3, sys, zlib
            def deflate(data):
                c = zlib.compressobj(9, zlib.DEFLATED, -15)
                return c.compress(data) + c.flush()
            db = sqlite3.connect(sys.argv[1])
            old = zlib.decompress(db.execute('SELECT Z_CONTENT FROM Z_MODELCACHE').fetchone()[0], -15)
            db.execute('UPDATE Z_MODELCACHE SET Z_CONTENT = ?', (\(expression),))
            db.commit()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, url.path]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, expression)
    }

    func testADamagedModelCacheIsRefusedNamingIt() throws {
        let cases: [(python: String, reason: String)] = [
            ("b'not deflate at all'", "cannot be inflated"),
            ("deflate(old)[:200]", "cut short"),
            ("deflate(b'\\0' * (80 * 1024 * 1024))", "more than"),
            ("deflate(b'<plist/>')", "not a compiled model"),
            ("deflate(old.replace(b'NSManagedObjectModel', b'NSManagedObjectModeX'))", "damaged compiled model"),
            ("deflate(old.replace(b'NSEntityName', b'NSEntityNamX'))", "an entity without a name"),
            ("None", "not one row holding bytes"),
        ]
        for (python, reason) in cases {
            let url = try copyStore("coredataplus-samplemodel/SampleModel_V2.sqlite")
            try setModelCache(of: url, python: python)
            XCTAssertThrowsError(try ManagedObjectModel.cachedModel(ofStoreAt: url), python) { error in
                XCTAssertTrue(error is ModelError, "\(python): \(error)")
                XCTAssertTrue("\(error)".contains("Z_MODELCACHE"), "\(python): \(error)")
                XCTAssertTrue("\(error)".contains(reason), "\(python): \(error)")
            }
        }
    }

    /// Every byte of the inflated archive changed in turn, and bytes of the compressed one:
    /// the reader throws or reads a model, it never traps.
    func testFlippedBytesInTheModelCacheNeverCrash() throws {
        let url = try copyStore("coredataplus-samplemodel/SampleModel_V1.sqlite")
        let bytes = [UInt8](try compressedModelCache(of: url))
        let archive = try RawDeflate.inflate(Data(bytes), limit: ModelCache.inflatedLimit)
        var refused = 0
        var generator = SystemRandomNumberGenerator()
        for position in archive.indices {
            var damaged = archive
            damaged[position] ^= UInt8.random(in: 1...255, using: &generator)
            do {
                _ = try ManagedObjectModel(keyedArchive: damaged, fallbackIdentifier: "x", file: "fuzz")
            } catch is ModelError {
                refused += 1
            }
        }
        XCTAssertGreaterThan(refused, archive.count / 10)
        for position in stride(from: 0, to: bytes.count, by: 3) {
            var damaged = bytes
            damaged[position] ^= 0x5A
            if let inflated = try? RawDeflate.inflate(Data(damaged), limit: ModelCache.inflatedLimit) {
                _ = try? ManagedObjectModel(keyedArchive: inflated, fallbackIdentifier: "x", file: "fuzz")
            }
        }
    }
}

/// The bytes of a store's `Z_MODELCACHE`, as `sqlite3` prints them.
func compressedModelCache(of url: URL) throws -> Data {
    let text = String(decoding: try runSQLite3([url.path, "SELECT hex(Z_CONTENT) FROM Z_MODELCACHE"]), as: UTF8.self)
    let digits = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    return Data(stride(from: 0, to: digits.count - 1, by: 2).map {
        UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) ?? 0
    })
}

/// `objectgraph` on a store whose model version is not in the bundle it is given.
extension ObjectGraphCLITests {
    static var coreData: URL { fixturesURL.appendingPathComponent("CoreData") }

    /// A copy of the `.xcdatamodeld` at `bundle` without the version `missing`; when that was
    /// the current version, the newest one left becomes current.
    func bundle(_ bundle: String, without missing: String) throws -> URL {
        let copy = directory.appendingPathComponent(UUID().uuidString + ".xcdatamodeld")
        try FileManager.default.copyItem(at: Self.coreData.appendingPathComponent(bundle), to: copy)
        try FileManager.default.removeItem(at: copy.appendingPathComponent(missing))
        let named = try String(contentsOf: copy.appendingPathComponent(".xccurrentversion"), encoding: .utf8)
        guard named.contains("<string>\(missing)</string>") else { return copy }
        let left = try FileManager.default.contentsOfDirectory(atPath: copy.path)
            .filter { $0.hasSuffix(".xcdatamodel") }
            .map { String($0.dropLast(".xcdatamodel".count)) }
            .sorted { $0.compare($1, options: .numeric) == .orderedAscending }.map { $0 + ".xcdatamodel" }
        let current = try PropertyListSerialization.data(
            fromPropertyList: ["_XCCurrentVersionName": try XCTUnwrap(left.last)], format: .xml, options: 0)
        try current.write(to: copy.appendingPathComponent(".xccurrentversion"))
        return copy
    }

    func copyOfStore(_ path: String) throws -> URL {
        let url = directory.appendingPathComponent(UUID().uuidString + ".sqlite")
        try FileManager.default.copyItem(at: Self.coreData.appendingPathComponent(path), to: url)
        return url
    }

    func testDumpInfoAndCheckReadAStoreWhoseVersionIsMissingWithTheModelItKeeps() throws {
        for (store, modelPath) in CoreDataFixtureTests.pairs {
            let parts = modelPath.split(separator: "/").map(String.init)
            let full = Self.coreData.appendingPathComponent(parts[0] + "/" + parts[1]).path
            let reduced = try bundle(parts[0] + "/" + parts[1], without: parts[2])
            let url = try copyOfStore(store)
            // Without the cache, no version left fits: what follows is read through the cache alone.
            XCTAssertNil(try ModelVersions(contentsOf: reduced).sourceVersion(ofStoreAt: url), store)
            let before = try Data(contentsOf: url)
            for format in ["--raw", "--json"] {
                let real = try run("dump", "--model", full, format, url.path)
                let cached = try run("dump", "--model", reduced.path, format, url.path)
                XCTAssertEqual(real.status, 0, real.stderr)
                XCTAssertEqual(cached.status, 0, cached.stderr)
                XCTAssertEqual(cached.stdout, real.stdout, store)
                XCTAssertTrue(cached.stderr.contains("Z_MODELCACHE"), cached.stderr)
            }
            let info = try run("info", "--model", reduced.path, url.path)
            XCTAssertEqual(info.status, 0, info.stderr)
            XCTAssertTrue(info.lines.contains("model version: (none)"), info.stdout)
            XCTAssertTrue(info.stdout.contains("model cache: fits"), info.stdout)
            let check = try run("check", "--model", reduced.path, url.path)
            XCTAssertEqual(check.status, 0, check.stderr)
            XCTAssertTrue(check.stdout.hasPrefix("ok: "), check.stdout)
            XCTAssertEqual(try Data(contentsOf: url), before, "reading changed \(store)")
        }
    }

    func testMigrateFromTheModelCacheGivesWhatMigratingFromTheRealVersionGives() throws {
        let full = Self.wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld").path
        let reduced = try bundle(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld",
            without: "CoreDataMigration_Example 2.xcdatamodel")
        // Version 2 renamed color to hexColor; the cache keeps that renaming identifier.
        let throughCache = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_2.sqlite")
        let throughVersions = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_2.sqlite")
        let migrated = try run("migrate", "--model", reduced.path, "--allow-loss", throughCache.path)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertTrue(migrated.stdout.contains("Z_MODELCACHE → CoreDataMigration_Example 4"), migrated.stdout)
        XCTAssertEqual(try run("migrate", "--model", full, "--allow-loss", throughVersions.path).status, 0)
        let one = try run("dump", "--model", full, "--raw", throughCache.path)
        let other = try run("dump", "--model", full, "--raw", throughVersions.path)
        XCTAssertEqual(one.status, 0, one.stderr)
        XCTAssertEqual(one.stdout, other.stdout)
        XCTAssertEqual(one.lines.filter { $0.hasPrefix("  hexColor: \"") }.count, 10, one.stdout)
        let check = try run("check", "--model", full, throughCache.path)
        XCTAssertTrue(check.stdout.contains("model version 'CoreDataMigration_Example 4'"), check.stdout)
    }

    func testAModelCacheThatDoesNotFitTheStoreIsNotUsed() throws {
        let reduced = try bundle(
            "wibosco-migration-example/CoreDataMigration_Example.xcdatamodeld",
            without: "CoreDataMigration_Example 3.xcdatamodel")
        let url = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        _ = try sqlite3(url, "ALTER TABLE ZPOST ADD COLUMN ZEXTRA VARCHAR")
        let dump = try run("dump", "--model", reduced.path, url.path)
        XCTAssertEqual(dump.status, 65)
        XCTAssertTrue(dump.stderr.contains("fits none of the model's versions"), dump.stderr)
        XCTAssertEqual(try run("migrate", "--model", reduced.path, url.path).status, 65)
    }
}
