import Foundation
import GRDB

extension PersistentStoreCoordinator {
    /// How each SQLite store's schema differs from the one ObjectGraph creates for the model:
    /// tables, their columns (type, default, key, generated), indexes (columns, order, collation,
    /// uniqueness, `WHERE` clause), triggers and views. A trigger or view added to a store can
    /// make what a save writes, or what a fetch reads, differ from what the code asked for, so a
    /// store that must be trusted is checked before it is used. Persistent history tables and
    /// SQLite's own (`sqlite_sequence`, `sqlite_stat1`) may be present or not.
    ///
    /// `extraObjects` names, per store identifier, the `CREATE` statements (unqualified) of
    /// tables and indexes the caller adds itself: each may be absent, and must match if present.
    /// A store written by Apple's Core Data holds more (`Z_MODELCACHE`, triggers of derived
    /// attributes) and is reported as such. CHECK constraints are not compared: they can only
    /// make a write fail.
    ///
    /// - throws: ``ObjectGraphError`` when a store cannot be read.
    public func schemaProblems(extraObjects: [String: [String]] = [:]) throws -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        for store in persistentStores where store.type == .sqlite {
            let statements = expectedStatements(of: store, extraObjects: extraObjects[store.identifier] ?? [])
            // One read: what is compared and what is named are the same schema.
            let differences = try wrapStoreErrors(.saveFailed, "cannot read the schema of \(store.displayName)") {
                try read { db -> [String] in
                    // The same definitions, word for word, make the same schema: the common case is
                    // settled by one query, without asking SQLite for every table's columns, and most
                    // often without running the statements either.
                    let actual = try SchemaObject.definitions(in: db, schemaName: store.schemaName)
                    if let predicted = SchemaObject.predictedDefinitions(required: statements.required,
                                                                         optional: statements.optional),
                       SchemaObject.matches(actual, predicted.definitions, required: predicted.required) {
                        return []
                    }
                    let expected = try expectedSchema(statements)
                    if SchemaObject.matches(actual, expected.definitions, required: expected.required) { return [] }
                    let objects = try expected.database.read { try SchemaObject.all(in: $0, schemaName: "main") }
                    return SchemaObject.differences(
                        actual: try SchemaObject.all(in: db, schemaName: store.schemaName),
                        expected: Dictionary(uniqueKeysWithValues: objects.map {
                            ($0.key, ($0.value, expected.required.contains($0.key)))
                        }))
                }
            }
            problems += differences.map { IntegrityProblem(store: store.displayName, message: $0) }
        }
        return problems
    }

    /// The statements that make `store`'s schema: those that must have run and those that may
    /// have (persistent history, the caller's own objects).
    func expectedStatements(of store: PersistentStore, extraObjects: [String])
        -> (required: [String], optional: [String])
    {
        (SQLiteSchema.createStatements(for: store, model: managedObjectModel),
         PersistentHistoryTables.createStatements(for: store) + extraObjects)
    }

    /// The schema `statements` make, in a database of their own, with the names of the objects
    /// that must be present and every object's definition: SQLite's own word on them.
    func expectedSchema(_ statements: (required: [String], optional: [String])) throws
        -> (database: DatabaseQueue, required: Set<String>, definitions: [String: SchemaObject.Definition])
    {
        // Run where the statements' store is "main".
        let qualifiers = Set(persistentStores.map { "\"\($0.schemaName)\"." })
        func unqualified(_ statement: String) -> String {
            qualifiers.reduce(statement) { $0.replacingOccurrences(of: $1, with: "") }
        }
        let database = try DatabaseQueue()
        return try database.write { db in
            for statement in statements.required { try db.execute(sql: unqualified(statement)) }
            let requiredNames = Set(try SchemaObject.definitions(in: db, schemaName: "main").keys)
            for statement in statements.optional { try db.execute(sql: unqualified(statement)) }
            return (database, requiredNames, try SchemaObject.definitions(in: db, schemaName: "main"))
        }
    }
}

/// One table, index, trigger or view of a schema, described by what SQLite reports of it.
struct SchemaObject: Equatable {
    var type: String
    var table: String
    /// Columns (tables and indexes) or the definition (triggers and views), comparable.
    var shape: [String]
    /// The `CREATE` statement as stored: what the shape does not show (a foreign key, a
    /// column's collation, an `ON CONFLICT` clause) still makes the object differ.
    var sql: String?

    /// SQLite's own tables, which it makes as it needs them (AUTOINCREMENT, ANALYZE), each as
    /// SQLite defines it: one defined otherwise is someone else's and is reported.
    static let sqliteTables = [
        "sqlite_sequence": "CREATE TABLE sqlite_sequence(name,seq)",
        "sqlite_stat1": "CREATE TABLE sqlite_stat1(tbl,idx,stat)",
        "sqlite_stat4": "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)",
    ]

    /// An object as `sqlite_master` defines it: its type, table and `CREATE` statement.
    struct Definition: Equatable {
        var type: String
        var table: String
        var sql: String?
    }

    /// The key of an object by its type and name, under which both sides are compared: a
    /// trigger's name is apart from the others (SQLite lets a trigger share an index's name),
    /// and names are compared as SQLite compares them (see ``exact(_:)``), where no name holds
    /// a NUL.
    static func key(type: String, name: String) -> String {
        type == "trigger" ? "\u{0}trigger\u{0}" + exact(name) : exact(name)
    }

    /// The name a key stands for, to be shown.
    static func shown(_ key: String) -> String {
        key.hasPrefix("\u{0}trigger\u{0}") ? String(key.dropFirst("\u{0}trigger\u{0}".count)) : key
    }

    /// `text` with every character beyond printable ASCII written as `\u{…}`: Swift holds
    /// canonically equivalent text equal (a "K" and the Kelvin sign), which SQLite tells apart,
    /// so whatever is read from `sqlite_master` is compared in this form; and a control
    /// character (a NUL written into a name) is shown, not printed.
    static func exact(_ text: String) -> String {
        guard text.utf8.contains(where: { !isPrintableASCII($0) }) else { return text }
        return text.unicodeScalars.map {
            $0.isASCII && isPrintableASCII(UInt8($0.value)) ? String($0) : "\\u{\(String($0.value, radix: 16))}"
        }.joined()
    }

    private static func isPrintableASCII(_ byte: UInt8) -> Bool { (0x20..<0x7f).contains(byte) }

    /// Whether a `sqlite_master` row is one of SQLite's own tables, as SQLite defines it.
    static func isSQLitesOwn(type: String, name: String, sql: String?) -> Bool {
        type == "table" && sql != nil && sqliteTables[name] == sql
    }

    /// Every object's definition, by ``key(type:name:)``; SQLite's own tables, as SQLite defines
    /// them, left out.
    static func definitions(in db: Database, schemaName: String) throws -> [String: Definition] {
        var definitions: [String: Definition] = [:]
        let sql = "SELECT type, name, tbl_name, sql FROM \"\(schemaName)\".sqlite_master"
        for row in try Row.fetchAll(db, sql: sql) {
            let type: String = row["type"] ?? "", name: String = row["name"] ?? "", text: String? = row["sql"]
            if isSQLitesOwn(type: type, name: name, sql: text) { continue }
            definitions[key(type: type, name: name)] = Definition(
                type: exact(type), table: exact(row["tbl_name"] ?? ""), sql: text.map(exact))
        }
        return definitions
    }

    /// Whether `actual` holds every required object and nothing but expected objects, each
    /// defined by the same statement.
    static func matches(
        _ actual: [String: Definition], _ expected: [String: Definition], required: Set<String>
    ) -> Bool {
        required.allSatisfy { actual[$0] != nil } && actual.allSatisfy { expected[$0.key] == $0.value }
    }

    static func all(in db: Database, schemaName: String) throws -> [String: SchemaObject] {
        let schema = "\"\(schemaName)\""
        var objects: [String: SchemaObject] = [:]
        let rows = try Row.fetchAll(db, sql: "SELECT type, name, tbl_name, sql FROM \(schema).sqlite_master")
        for row in rows {
            let type: String = row["type"] ?? ""
            let name: String = row["name"] ?? ""
            let table: String = row["tbl_name"] ?? ""
            let sql: String? = row["sql"]
            if isSQLitesOwn(type: type, name: name, sql: sql) { continue }
            var shape: [String]
            switch type {
            case _ where quoted(name) == nil || quoted(table) == nil:
                // SQLite reads a statement up to its first NUL: what it holds cannot be asked.
                shape = ["a name holding a NUL byte"]
            case "table":
                shape = try Row.fetchAll(db, sql: "PRAGMA \(schema).table_xinfo(\(quoted(name)!))").map { column in
                    let declared: String = column["type"] ?? ""
                    let base = declared.uppercased().prefix { $0 != "(" }.trimmingCharacters(in: .whitespaces)
                    let defaultValue: String? = column["dflt_value"]
                    let fields: [String] = [column["name"] ?? "", base, "not null \(column["notnull"] as Int? ?? 0)",
                                            "default \(defaultValue ?? "none")", "key \(column["pk"] as Int? ?? 0)",
                                            "hidden \(column["hidden"] as Int? ?? 0)"]
                    return fields.joined(separator: " ")
                }.sorted()
            case "index":
                let listing = try Row.fetchAll(db, sql: "PRAGMA \(schema).index_list(\(quoted(table)!))")
                    .first { ($0["name"] as String?) == name }
                shape = ["unique \(listing?["unique"] as Int? ?? -1)", "partial \(listing?["partial"] as Int? ?? -1)"]
                shape += try Row.fetchAll(db, sql: "PRAGMA \(schema).index_xinfo(\(quoted(name)!))").map { column in
                    let columnName: String? = column["name"]
                    return "\(columnName ?? "<expression>") desc \(column["desc"] as Int? ?? 0) "
                        + "collation \(column["coll"] as String? ?? "") key \(column["key"] as Int? ?? 0)"
                }
            default:
                shape = [(sql ?? "").split(whereSeparator: \.isWhitespace).joined(separator: " ")]
            }
            objects[key(type: type, name: name)] = SchemaObject(
                type: exact(type), table: exact(table), shape: shape.map(exact), sql: sql.map(exact))
        }
        return objects
    }

    /// `name` as an SQL identifier; nil when it holds a NUL, where SQLite would stop reading.
    static func quoted(_ name: String) -> String? {
        name.utf8.contains(0) ? nil : "\"\(name.replacingOccurrences(of: "\"", with: "\"\""))\""
    }

    /// Each difference in words, in name order.
    static func differences(actual: [String: SchemaObject],
                            expected: [String: (object: SchemaObject, required: Bool)]) -> [String] {
        var found: [String] = []
        for name in Set(actual.keys).union(expected.keys).sorted(by: { (shown($0), $0) < (shown($1), $1) }) {
            switch (actual[name], expected[name]) {
            case (let object?, nil):
                found.append(unexpected(shown(name), object))
            case (nil, let wanted?):
                if wanted.required { found.append("\(wanted.object.type) '\(shown(name))' is missing") }
            case (let object?, let wanted?):
                if object != wanted.object { found.append(changed(shown(name), object, wanted.object)) }
            case (nil, nil):
                continue
            }
        }
        return found
    }

    private static func unexpected(_ name: String, _ object: SchemaObject) -> String {
        switch object.type {
        case "trigger":
            return "trigger '\(name)' on \(object.table) was added outside ObjectGraph: a trigger can change what "
                + "a save writes"
        case "view":
            return "view '\(name)' was added outside ObjectGraph: a view can stand in for what a fetch reads"
        case "index":
            return "index '\(name)' on \(object.table) was added outside ObjectGraph"
        default:
            return "\(object.type) '\(name)' is not part of the model"
        }
    }

    private static func changed(_ name: String, _ object: SchemaObject, _ wanted: SchemaObject) -> String {
        guard object.type == wanted.type, object.table == wanted.table else {
            return "'\(name)' is a \(object.type) where the model has a \(wanted.type)"
                + (object.type == "view" ? ": a view can stand in for what a fetch reads" : "")
        }
        guard object.type == "table" else {
            return "\(object.type) '\(name)' on \(object.table) differs from the one ObjectGraph creates "
                + "(its columns, order, collation, uniqueness or a WHERE clause)"
        }
        let columnName = { (column: String) in String(column.prefix { $0 != " " }) }
        let actualColumns = Dictionary(object.shape.map { (columnName($0), $0) }) { first, _ in first }
        let wantedColumns = Dictionary(wanted.shape.map { (columnName($0), $0) }) { first, _ in first }
        var details: [String] = []
        for column in Set(actualColumns.keys).union(wantedColumns.keys).sorted() {
            switch (actualColumns[column], wantedColumns[column]) {
            case (_?, nil): details.append("column \(column) was added")
            case (nil, _?): details.append("column \(column) is missing")
            case (let have?, let want?) where have != want:
                details.append("column \(column) is '\(have)', not '\(want)'")
            default: continue
            }
        }
        guard !details.isEmpty else {
            return "table '\(name)' is defined otherwise than ObjectGraph defines it (a key, a constraint, a "
                + "collation or a clause that its columns do not show)"
        }
        return "table '\(name)' differs from the model: " + details.joined(separator: "; ")
    }
}

extension StoreTransaction {
    /// The store's schema cookie (`PRAGMA schema_version`): it changes whenever any connection
    /// changes the schema, so a schema checked at one value is unchanged while it stays.
    public func schemaVersion(ofStore storeIdentifier: String) throws -> Int64 {
        let master = try qualified("sqlite_master", storeIdentifier: storeIdentifier)
        guard case .integer(let version)? = try rows("PRAGMA \(master.dropLast("sqlite_master".count))schema_version")
            .first?.first
        else { return 0 }
        return version
    }

    /// Indexes of the store whose entries are not exactly its table's rows: a damaged index
    /// byte can make a fetch through it miss rows (or find others) while the table is intact.
    /// Each table is read once without its indexes and each index once on its own (a covering
    /// scan), and the two multisets of (indexed values, row) compared by count and a keyed sum
    /// of hashes (the key is random per process, so no edit can be made to match it): O(rows).
    /// Damage SQLite reports while reading is a problem too.
    ///
    /// - throws: ``ObjectGraphError`` when the store's list of indexes cannot be read.
    public func indexProblems(storeIdentifier: String, storeName: String) throws -> [IntegrityProblem] {
        try indexProblems(of: indexAudit(storeIdentifier: storeIdentifier, storeName: storeName))
    }

    /// The indexes of a store to compare with their tables, before any table is read: a caller
    /// that reads whole tables anyway adds their rows (``IndexAudit/digests(of:columns:)``), and
    /// ``indexProblems(of:)`` reads only the others.
    ///
    /// - throws: ``ObjectGraphError`` when the store's list of indexes cannot be read.
    func indexAudit(storeIdentifier: String, storeName: String) throws -> IndexAudit {
        let master = try qualified("sqlite_master", storeIdentifier: storeIdentifier)
        var audit = IndexAudit(storeName: storeName, schema: String(master.dropLast("sqlite_master".count)))
        let listed = try rows("SELECT name, tbl_name FROM \(master) WHERE type = 'index' ORDER BY name")
        for row in listed {
            guard case .text(let name) = row[0], case .text(let table) = row[1] else { continue }
            guard let quotedName = SchemaObject.quoted(name), let quotedTable = SchemaObject.quoted(table) else {
                audit.problems.append(IntegrityProblem(
                    store: storeName,
                    message: "index '\(SchemaObject.exact(name))' on \(SchemaObject.exact(table)) has a name holding "
                        + "a NUL byte: it was written outside ObjectGraph and cannot be checked"))
                continue
            }
            let columns = try rows("PRAGMA \(audit.schema)index_info(\(quotedName))").map { info -> String? in
                if info.count > 2, case .text(let column) = info[2] { return column }
                return nil
            }
            let isPartial = try rows("PRAGMA \(audit.schema)index_list(\(quotedTable))").contains {
                $0.count > 4 && $0[1] == .text(name) && $0[4] == .integer(1)
            }
            // Whole indexes on named columns of a rowid table (primary-key ones of join tables too):
            // every row has exactly one entry.
            guard !columns.isEmpty, !columns.contains(nil), !isPartial, try hasRowid(table, master: master)
            else { continue }
            audit.indexesByTable[table, default: []].append(.init(name: name, columns: columns.compactMap { $0 }))
        }
        return audit
    }

    /// Finishes `audit`: reads each table whose rows were not added, then each index, and names
    /// every index that does not hold exactly its table's rows.
    func indexProblems(of audit: IndexAudit) throws -> [IntegrityProblem] {
        var problems = audit.problems
        let schema = audit.schema
        for (table, indexes) in audit.indexesByTable.sorted(by: { $0.key < $1.key }) {
            do {
                let fromTable: [MultisetDigest]
                if let read = audit.tablesRead[table] {
                    fromTable = read
                } else {
                    let allColumns = Array(Set(indexes.flatMap(\.columns))).sorted()
                    var digests = IndexAudit.TableDigests(
                        table: table, indexes: indexes, columns: allColumns + ["rowid"])!
                    // Read in place: this reads every row of the store, once more for each index.
                    try db.forEachRow(
                        sql: "SELECT \((allColumns.map(quotedColumn) + ["rowid"]).joined(separator: ", ")) "
                            + "FROM \(schema)\(quotedColumn(table)) NOT INDEXED",
                        arguments: []
                    ) { digests.add($0) }
                    fromTable = digests.digests
                }
                for (slot, index) in indexes.enumerated() {
                    var fromIndex = MultisetDigest()
                    let columns = index.columns.map(quotedColumn) + ["rowid"]
                    let sql = "SELECT \(columns.joined(separator: ", ")) FROM \(schema)\(quotedColumn(table)) "
                        + "INDEXED BY \(quotedColumn(index.name))"
                    try db.forEachRow(sql: sql, arguments: []) { fromIndex.add($0, columns: Array(0..<columns.count)) }
                    if fromIndex != fromTable[slot] {
                        problems.append(IntegrityProblem(
                            store: audit.storeName,
                            message: "index '\(SchemaObject.exact(index.name))' does not match table "
                                + "\(SchemaObject.exact(table)) (\(fromIndex.count) entries "
                                + "for \(fromTable[slot].count) rows): reads through it would miss or invent rows"))
                    }
                }
            } catch let error as DatabaseError {
                problems.append(IntegrityProblem(
                    store: audit.storeName,
                    message: "table \(SchemaObject.exact(table)) or one of its indexes cannot be read: "
                        + (error.message ?? "SQLite error")))
            }
        }
        return problems
    }

    /// A name SQLite parsed (a column) or that was checked to hold no NUL, as an identifier.
    private func quotedColumn(_ name: String) -> String { SchemaObject.quoted(name) ?? "\"\"" }

    private func hasRowid(_ table: String, master: String) throws -> Bool {
        // A WITHOUT ROWID table is its own primary-key index: there is no row to compare with.
        guard case .text(let sql)? = try rows("SELECT sql FROM \(master) WHERE type = 'table' AND name = ?",
                                               [.text(table)]).first?.first else { return false }
        return !sql.uppercased().split(whereSeparator: \.isWhitespace).joined(separator: " ").contains("WITHOUT ROWID")
    }
}

/// The indexes of one store to compare with their tables (``StoreTransaction/indexAudit``), and
/// the tables already read for it.
struct IndexAudit {
    struct Index {
        let name: String
        let columns: [String]
    }
    let storeName: String
    /// The store's schema, as a prefix of qualified names.
    let schema: String
    var problems: [IntegrityProblem] = []
    var indexesByTable: [String: [Index]] = [:]
    var tablesRead: [String: [MultisetDigest]] = [:]

    init(storeName: String, schema: String) {
        self.storeName = storeName
        self.schema = schema
    }

    /// What each row of `table`, read whole elsewhere, is added to when the table has indexes to
    /// compare; `columns` names the cells of the rows read, the last one the rowid.
    func digests(of table: String, columns: [String]) -> TableDigests? {
        indexesByTable[table].flatMap { TableDigests(table: table, indexes: $0, columns: columns) }
    }

    /// Takes the rows added to `digests` as all its table's: the table is not read again.
    mutating func record(_ digests: TableDigests) { tablesRead[digests.table] = digests.digests }

    /// One table's rows as each of its indexes should hold them.
    struct TableDigests {
        let table: String
        private let positions: [[Int]]
        private(set) var digests: [MultisetDigest]

        /// Nil when an indexed column is not among `columns`.
        init?(table: String, indexes: [Index], columns: [String]) {
            var positions: [[Int]] = []
            for index in indexes {
                let found = index.columns.compactMap { columns.firstIndex(of: $0) }
                guard found.count == index.columns.count else { return nil }
                positions.append(found + [columns.count - 1])
            }
            self.table = table
            self.positions = positions
            digests = positions.map { _ in MultisetDigest() }
        }

        mutating func add(_ row: StatementRow) {
            for slot in positions.indices { digests[slot].add(row, columns: positions[slot]) }
        }
    }
}

/// A multiset of rows as a count and a wrapping sum of keyed hashes (Swift's `Hasher` is
/// SipHash under a key random per process).
struct MultisetDigest: Equatable {
    private(set) var count = 0
    private var sum: UInt64 = 0

    /// Adds the values of `columns` of a statement's current row.
    mutating func add(_ row: StatementRow, columns: [Int]) {
        var hasher = Hasher()
        for column in columns {
            row.withCell(at: column) { cell in
                switch cell {
                case .null: hasher.combine(0)
                case .integer(let number): hasher.combine(1); hasher.combine(number)
                case .real(let number): hasher.combine(2); hasher.combine(number.bitPattern)
                case .text(let bytes): hasher.combine(3); hasher.combine(bytes.count); hasher.combine(bytes: bytes)
                case .blob(let bytes): hasher.combine(4); hasher.combine(bytes.count); hasher.combine(bytes: bytes)
                }
            }
        }
        sum &+= UInt64(bitPattern: Int64(hasher.finalize()))
        count += 1
    }
}
