import Foundation
import XCTest
@testable import ObjectGraph

/// Xcode mapping models: wibosco's real `Migration2to3ModelMapping.xcmappingmodel` (a custom
/// policy: refused), and variants of it made here in the file's own format.
extension ObjectGraphCLITests {
    /// wibosco/CoreDataMigrationRevised-Example's `Migration2to3ModelMapping.xcmappingmodel`
    /// (MIT), beside its stores in the shared fixtures: files fetched from public repositories
    /// are kept there, never committed here. Skips the test when it is not there.
    static func realMapping() throws -> URL {
        let mapping = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../shared/coredata-fixtures/wibosco-migration-example/Mappings/"
                + "Migration2to3ModelMapping.xcmappingmodel").standardizedFileURL
        guard FileManager.default.fileExists(atPath: mapping.appendingPathComponent("xcmapping.xml").path) else {
            throw XCTSkip("no \(mapping.path) (wibosco/CoreDataMigrationRevised-Example, "
                + "CoreDataMigration-Example/CoreData/Migration/Mappings/)")
        }
        return mapping
    }

    /// A keyed archive of an `NSExpression`, base64, built by Python's plistlib as Foundation's
    /// `NSKeyedArchiver` lays one out. `kind`: `keypath-self` (`$source.key` as Xcode archives it,
    /// the key path `source.key` on the evaluated object), `keypath-variable` (`$source` variable
    /// operand), `function` (`FUNCTION($entityPolicy, "intValueFromString:", $source.key)`),
    /// `instances` (`FUNCTION($manager, "destinationInstancesForEntityMappingNamed:sourceInstances:",
    /// "<mapping>", $source.key)`).
    func archivedExpression(_ kind: String, key: String, mapping: String = "") throws -> String {
        let script = #"""
            import base64, plistlib, sys
            kind, key, mapping = sys.argv[1], sys.argv[2], sys.argv[3]
            objects = ['$null']
            classes = {}
            def add(value):
                objects.append(value)
                return plistlib.UID(len(objects) - 1)
            def cls(name, chain):
                if name not in classes:
                    classes[name] = add({'$classname': name, '$classes': [name] + chain + ['NSObject']})
                return classes[name]
            def keypath(operand, path):
                spec = add({'$class': cls('NSKeyPathSpecifierExpression', ['NSExpression']),
                            'NSExpressionType': 10, 'NSKeyPath': add(path)})
                args = add({'$class': cls('NSArray', []), 'NS.objects': [spec]})
                return add({'$class': cls('NSKeyPathExpression', ['NSFunctionExpression', 'NSExpression']),
                            'NSExpressionType': 3, 'NSOperand': operand, 'NSSelectorName': add('valueForKeyPath:'),
                            'NSArguments': args})
            def variable(name):
                return add({'$class': cls('NSVariableExpression', ['NSExpression']), 'NSExpressionType': 2,
                            'NSVariable': add(name)})
            def on_self(path):
                return keypath(add({'$class': cls('NSSelfExpression', ['NSExpression']), 'NSExpressionType': 1}), path)
            def function(operand, selector, arguments):
                args = add({'$class': cls('NSArray', []), 'NS.objects': arguments})
                return add({'$class': cls('NSFunctionExpression', ['NSExpression']), 'NSExpressionType': 4,
                            'NSOperand': operand, 'NSSelectorName': add(selector), 'NSArguments': args})
            if kind == 'keypath-self':
                root = on_self('source.' + key)
            elif kind == 'keypath-variable':
                root = keypath(variable('source'), key)
            elif kind == 'function':
                root = function(variable('entityPolicy'), 'intValueFromString:', [on_self('source.' + key)])
            else:
                constant = add({'$class': cls('NSConstantValueExpression', ['NSExpression']),
                                'NSExpressionType': 0, 'NSConstantValue': add(mapping)})
                root = function(variable('manager'), 'destinationInstancesForEntityMappingNamed:sourceInstances:',
                                [constant, on_self('source.' + key)])
            archive = {'$version': 100000, '$archiver': 'NSKeyedArchiver', '$top': {'root': root}, '$objects': objects}
            sys.stdout.write(base64.b64encode(plistlib.dumps(archive, fmt=plistlib.FMT_BINARY)).decode())
            """#
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, kind, key, mapping]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return String(decoding: output, as: UTF8.self)
    }

    /// A copy of the real mapping model with `edit` applied to its XML, in the test's directory.
    func mappingVariant(_ edit: (String) throws -> String) throws -> URL {
        let folder = directory.appendingPathComponent(UUID().uuidString + ".xcmappingmodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        let xml = try String(
            contentsOf: try Self.realMapping().appendingPathComponent("xcmapping.xml"), encoding: .utf8)
        try Data(try edit(xml).utf8).write(to: folder.appendingPathComponent("xcmapping.xml"))
        return folder
    }

    static let policyLine =
        "        <attribute name=\"migrationpolicyclassname\" type=\"string\">"
        + "CoreDataMigration_Example.Post2ToPost3MigrationPolicy</attribute>\n"

    /// Gives the attribute mapping (or relationship mapping) of `id` the value expression `base64`.
    func setting(_ xml: String, id: String, expression base64: String) throws -> String {
        let opening = "<object type=\"XDDEVATTRIBUTEMAPPING\" id=\"\(id)\">\n"
        let relationship = "<object type=\"XDDEVRELATIONSHIPMAPPING\" id=\"\(id)\">\n"
        let marker = xml.contains(opening) ? opening : relationship
        XCTAssertTrue(xml.contains(marker), id)
        return xml.replacingOccurrences(
            of: marker,
            with: marker + "        <attribute name=\"valueexpressiondata\" type=\"binary\">\(base64)</attribute>\n")
    }

    func testTheRealMappingModelWithACustomPolicyIsRefusedBeforeAnythingChanges() throws {
        let url = try store(2)
        let before = try Data(contentsOf: url)
        let refused = try run(
            "migrate", "--model", model, "--mapping-model", try Self.realMapping().path, "--allow-loss", url.path)
        XCTAssertEqual(refused.status, 65)
        XCTAssertTrue(refused.stderr.contains("Post2ToPost3MigrationPolicy"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("Migration2to3ModelMapping.xcmappingmodel"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: url), before)
        // Beside the model it is found without being named.
        let folder = directory.appendingPathComponent("app")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        let bundle = folder.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld")
        try FileManager.default.copyItem(at: URL(fileURLWithPath: model), to: bundle)
        try FileManager.default.copyItem(
            at: try Self.realMapping(),
            to: folder.appendingPathComponent("Migration2to3ModelMapping.xcmappingmodel"))
        let beside = try run("migrate", "--dry-run", "--model", bundle.path, url.path)
        XCTAssertEqual(beside.status, 65)
        XCTAssertTrue(beside.stderr.contains("Post2ToPost3MigrationPolicy"), beside.stderr)
    }

    func testADeclarativeMappingIsFollowedAndALossyOneNeedsAllowLoss() throws {
        let declarative = try mappingVariant { $0.replacingOccurrences(of: Self.policyLine, with: "") }
        let url = try store(2)
        let before = try Data(contentsOf: url)
        // Post.content is in no mapping: dropping it needs --allow-loss.
        let refused = try run("migrate", "--model", model, "--mapping-model", declarative.path, url.path)
        XCTAssertEqual(refused.status, 65)
        XCTAssertTrue(refused.stderr.contains("would drop 10 values of Post.content"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--allow-loss"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: url), before)
        let dryRun = try run("migrate", "--dry-run", "--model", model, "--mapping-model", declarative.path, url.path)
        XCTAssertEqual(dryRun.status, 0, dryRun.stderr)
        XCTAssertTrue(dryRun.stdout.contains("(as the mapping model '\(declarative.lastPathComponent)' says)"))
        XCTAssertTrue(dryRun.stdout.contains("needs --allow-loss"), dryRun.stdout)
        let migrated = try run(
            "migrate", "--model", model, "--mapping-model", declarative.path, "--allow-loss", url.path)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertTrue(migrated.stdout.contains("dropped 10 values of Post.content"), migrated.stdout)
        // What the mapping states here is what inference would do: the same store results.
        let inferred = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_2.sqlite")
        XCTAssertEqual(try run("migrate", "--model", model, "--allow-loss", inferred.path).status, 0)
        XCTAssertEqual(
            try run("dump", "--model", model, "--raw", url.path).stdout,
            try run("dump", "--model", model, "--raw", inferred.path).stdout)
    }

    func testASourceKeyPathExpressionCarriesTheValuesItNames() throws {
        let original = try sqlite3(
            Self.wibosco.appendingPathComponent("CoreDataMigration_Example_2.sqlite"),
            "SELECT Z_PK || '=' || ZPOSTID FROM ZPOST ORDER BY Z_PK")
        XCTAssertEqual(original.count, 10)
        // hexColor is z104 in the file: from now on it takes the old postID, in both archived spellings.
        for kind in ["keypath-self", "keypath-variable"] {
            let expression = try archivedExpression(kind, key: "postID")
            let variant = try mappingVariant {
                try setting($0.replacingOccurrences(of: Self.policyLine, with: ""), id: "z104", expression: expression)
            }
            let url = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_2.sqlite")
            let migrated = try run(
                "migrate", "--model", model, "--mapping-model", variant.path, "--allow-loss", url.path)
            XCTAssertEqual(migrated.status, 0, migrated.stderr)
            XCTAssertEqual(try sqlite3(url, "SELECT Z_PK || '=' || ZHEXCOLOR FROM ZPOST ORDER BY Z_PK"), original, kind)
            XCTAssertEqual(try sqlite3(url, "SELECT Z_PK || '=' || ZPOSTID FROM ZPOST ORDER BY Z_PK"), original, kind)
        }
    }

    func testAnExpressionThatIsNotAKeyPathIsRefusedNamingIt() throws {
        let expression = try archivedExpression("function", key: "postID")
        let variant = try mappingVariant {
            try setting($0.replacingOccurrences(of: Self.policyLine, with: ""), id: "z104", expression: expression)
        }
        let url = try store(2)
        let before = try Data(contentsOf: url)
        let refused = try run("migrate", "--model", model, "--mapping-model", variant.path, "--allow-loss", url.path)
        XCTAssertEqual(refused.status, 65)
        XCTAssertTrue(refused.stderr.contains("Post.hexColor"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("intValueFromString:"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: url), before)
    }

    /// The same file turned into a mapping from version 3 to 4 whose Section mapping has a source:
    /// links are carried through the relationship mappings, or reported dropped when left out.
    func testRelationshipMappingsCarryLinksAndALeftOutOneReportsThemDropped() throws {
        func threeToFour(_ xml: String) -> String {
            xml.replacingOccurrences(of: Self.policyLine, with: "")
                .replacingOccurrences(of: "Example 3.xcdatamodel", with: "Example 4.xcdatamodel")
                .replacingOccurrences(of: "Example 2.xcdatamodel", with: "Example 3.xcdatamodel")
                .replacingOccurrences(
                    of: "<attribute name=\"destinationname\" type=\"string\">Section</attribute>",
                    with: "<attribute name=\"sourcename\" type=\"string\">Section</attribute>\n"
                        + "        <attribute name=\"destinationname\" type=\"string\">Section</attribute>")
        }
        let links = "SELECT Z_PK || '>' || ZPOST FROM ZSECTION ORDER BY Z_PK"
        let original = try sqlite3(Self.wibosco.appendingPathComponent("CoreDataMigration_Example_3.sqlite"), links)
        XCTAssertFalse(original.isEmpty)
        // Post.sections (z102) through an explicit destinationInstancesForEntityMappingNamed:sourceInstances:.
        let instances = try archivedExpression("instances", key: "sections", mapping: "Section")
        let carried = try mappingVariant { try setting(threeToFour($0), id: "z102", expression: instances) }
        let url = try store(3)
        let migrated = try run("migrate", "--model", model, "--mapping-model", carried.path, url.path)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertEqual(try sqlite3(url, links), original)
        // Both relationship mappings left out: every link is dropped, and said so.
        let dropping = try mappingVariant {
            threeToFour($0)
                .replacingOccurrences(of: "idrefs=\"z102\"></relationship>", with: "></relationship>")
                .replacingOccurrences(of: "idrefs=\"z105\"></relationship>", with: "></relationship>")
        }
        let second = try copyOfStore("wibosco-migration-example/CoreDataMigration_Example_3.sqlite")
        let refused = try run("migrate", "--model", model, "--mapping-model", dropping.path, second.path)
        XCTAssertEqual(refused.status, 65)
        XCTAssertTrue(
            refused.stderr.contains("\(original.count) links of Section.post"), refused.stderr)
        let lossy = try run("migrate", "--model", model, "--mapping-model", dropping.path, "--allow-loss", second.path)
        XCTAssertEqual(lossy.status, 0, lossy.stderr)
        XCTAssertTrue(lossy.stdout.contains("dropped \(original.count) links of Section.post"), lossy.stdout)
        XCTAssertEqual(try sqlite3(second, "SELECT COUNT(*) FROM ZSECTION WHERE ZPOST IS NOT NULL"), ["0"])
    }
}

final class MappingModelTests: ObjectGraphTestCase {
    func testTheRealMappingModelReadsAsXcodeWroteIt() throws {
        let mapping = try MappingModel(contentsOf: try ObjectGraphCLITests.realMapping())
        XCTAssertEqual(mapping.sourceVersion, "CoreDataMigration_Example 2")
        XCTAssertEqual(mapping.destinationVersion, "CoreDataMigration_Example 3")
        XCTAssertEqual(mapping.entityMappings.map(\.name), ["Section", "PostToPost"])
        let post = try XCTUnwrap(mapping.entityMappings.last)
        XCTAssertEqual(
            post.needsCode, "the custom migration policy 'CoreDataMigration_Example.Post2ToPost3MigrationPolicy'")
        XCTAssertEqual(Set(post.attributes.map(\.name)), ["hexColor", "postID", "date"])
        XCTAssertTrue(post.attributes.allSatisfy { $0.value == .sameName })
        XCTAssertEqual(post.relationships.map(\.name), ["sections"])
        XCTAssertNil(mapping.entityMappings.first?.sourceEntity)
    }

    func testAnEntityMappedTwiceIsRefused() throws {
        let versions = try ModelVersions(
            contentsOf: ObjectGraphCLITests.wibosco.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld"))
        let xml = try String(
            contentsOf: try ObjectGraphCLITests.realMapping().appendingPathComponent("xcmapping.xml"),
            encoding: .utf8)
        let folder = directory.appendingPathComponent("Twice.xcmappingmodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        // The Section mapping takes Post objects too.
        try Data(
            xml.replacingOccurrences(of: ObjectGraphCLITests.policyLine, with: "")
                .replacingOccurrences(
                    of: "<attribute name=\"destinationname\" type=\"string\">Section</attribute>",
                    with: "<attribute name=\"sourcename\" type=\"string\">Post</attribute>\n"
                        + "        <attribute name=\"destinationname\" type=\"string\">Section</attribute>")
                .utf8
        ).write(to: folder.appendingPathComponent("xcmapping.xml"))
        let mapping = try MappingModel(contentsOf: folder)
        XCTAssertThrowsError(
            try MigrationPlan(
                from: try XCTUnwrap(versions.version(named: "CoreDataMigration_Example 2")),
                to: try XCTUnwrap(versions.version(named: "CoreDataMigration_Example 3")), mappingModel: mapping)
        ) {
            XCTAssertTrue("\($0)".contains("maps Post to both"), "\($0)")
        }
    }

    func testBrokenMappingFilesAreRefusedNamingTheFile() throws {
        for (name, xml) in [
            ("empty", ""), ("not xml", "<database><object"), ("no root", "<database></database>"),
            ("no paths", "<database><object type=\"XDDEVMAPPINGMODEL\" id=\"z1\"></object></database>"),
        ] {
            let folder = directory.appendingPathComponent(UUID().uuidString + ".xcmappingmodel")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try Data(xml.utf8).write(to: folder.appendingPathComponent("xcmapping.xml"))
            XCTAssertThrowsError(try MappingModel(contentsOf: folder), name) {
                XCTAssertTrue("\($0)".contains(folder.lastPathComponent), "\(name): \($0)")
            }
        }
        XCTAssertThrowsError(try MappingModel(contentsOf: directory.appendingPathComponent("none.xcmappingmodel")))
    }
}
