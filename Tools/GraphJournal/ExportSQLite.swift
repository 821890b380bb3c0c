import Foundation
import GraphJournal
import GraphJournalProgress
import ObjectGraph

/// Names unique in one SQLite scope (the tables of a database, the columns of a table) as
/// SQLite compares them: ASCII letters without regard to case. A name already taken gets
/// `_2`, `_3`, …; a table name that starts with `sqlite_` (reserved) gets a leading `_`.
struct SQLiteNames {
    private var taken: Set<String> = []

    /// The name to use for `wanted`, now taken.
    mutating func claim(_ wanted: String, isTable: Bool = false) -> String {
        var base = wanted
        if isTable && Self.folded(base).hasPrefix("sqlite_") { base = "_" + base }
        var name = base
        var n = 2
        while taken.contains(Self.folded(name)) {
            name = "\(base)_\(n)"
            n += 1
        }
        taken.insert(Self.folded(name))
        return name
    }

    /// `name` with ASCII capitals lowered, as SQLite compares identifiers.
    static func folded(_ name: String) -> String {
        String(decoding: name.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }
}

/// `name` as an SQL identifier: in double quotes, a double quote doubled, so that a keyword
/// (`order`, `group`) or any other text is a name.
func sqlQuoted(_ name: String) -> String {
    "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

/// The tables `export --format sqlite` writes for a plan.
struct SQLiteLayout {
    /// One entity's table.
    struct EntityTable {
        /// The entity's index in the plan.
        var entity: Int
        var name: String
        /// Aligned with the entity's ``ExportPlan/Entity/attributes``.
        var attributeColumns: [String]
        /// Per to-one relationship (an index into the entity's relationships): its
        /// `<name>_id` column and the table it references (nil: the destination has none).
        var toOnes: [(relationship: Int, column: String, references: String?)]
        /// Per to-one side of links whose other side is ordered: the column holding the
        /// object's position in the related object's list.
        var positions: [(relationship: Int, column: String)]
    }

    /// The join table of a many-to-many (a relationship stored as links, to-many both ways).
    struct JoinTable {
        /// The link's index in the plan.
        var link: Int
        var name: String
        /// Per side: the column holding that side's object.
        var columns: [String]
        /// Per side: for an ordered side, the column holding the position of the other
        /// side's object in this side's list.
        var positions: [String?]
        /// Per side: the table of its entity.
        var references: [String]
    }

    var tables: [EntityTable]
    var joins: [JoinTable]
    /// Notes on the names that had to change.
    var renames: [String]

    init(_ plan: ExportPlan) {
        var tableNames = SQLiteNames()
        var tableOf: [String: String] = [:]
        var tables: [EntityTable] = []
        var renames: [String] = []
        for (e, entity) in plan.entities.enumerated() {
            let name = tableNames.claim(entity.name, isTable: true)
            if name != entity.name { renames.append("entity \(entity.name) is table \(sqlQuoted(name))") }
            tableOf[entity.name] = name
            tables.append(EntityTable(entity: e, name: name, attributeColumns: [], toOnes: [], positions: []))
        }
        for t in tables.indices {
            let entity = plan.entities[tables[t].entity]
            let tableName = tables[t].name
            var columns = SQLiteNames()
            _ = columns.claim("id")
            func claim(_ wanted: String, _ what: String) -> String {
                let name = columns.claim(wanted)
                if name != wanted {
                    renames.append(
                        "\(entity.name).\(what) is column \(sqlQuoted(name)) of table \(sqlQuoted(tableName))")
                }
                return name
            }
            var attributeColumns: [String] = []
            for a in entity.attributes {
                let name = entity.table.attributes[a].name
                attributeColumns.append(claim(name, name))
            }
            var toOnes: [(relationship: Int, column: String, references: String?)] = []
            for (r, relationship) in entity.relationships.enumerated() where relationship.isToOne {
                let column = claim(relationship.name + "_id", relationship.name)
                toOnes.append((r, column, relationship.destination.flatMap { tableOf[$0] }))
            }
            var positions: [(relationship: Int, column: String)] = []
            for (r, relationship) in entity.relationships.enumerated() {
                guard relationship.isToOne, case .link(let k, let side) = relationship.storage else { continue }
                let other = plan.links[k].link
                guard other.ordered[1 - side] && !other.toOne[1 - side] else { continue }
                positions.append((r, claim(other.names[1 - side] + "_position", "\(relationship.name) (position)")))
            }
            tables[t].attributeColumns = attributeColumns
            tables[t].toOnes = toOnes
            tables[t].positions = positions
        }
        var joins: [JoinTable] = []
        for (k, state) in plan.links.enumerated() where !state.link.toOne[0] && !state.link.toOne[1] {
            let wanted = "\(state.entityNames[0])_\(state.link.names[0])"
            let name = tableNames.claim(wanted, isTable: true)
            if name != wanted { renames.append("the join table of \(state.shortName) is \(sqlQuoted(name))") }
            var columns = SQLiteNames()
            // Each side's object is named by the relationship that leads to it from the other.
            let objectColumns = [
                columns.claim(state.link.names[1] + "_id"), columns.claim(state.link.names[0] + "_id"),
            ]
            let positions = (0..<2).map { side -> String? in
                state.link.ordered[side] ? columns.claim(state.link.names[side] + "_position") : nil
            }
            joins.append(
                JoinTable(
                    link: k, name: name, columns: objectColumns, positions: positions,
                    references: state.entityNames.map { tableOf[$0] ?? $0 }))
        }
        self.tables = tables
        self.joins = joins
        self.renames = renames
    }

    /// The declared type of the column of `attribute`: a `Codable` attribute's JSON is TEXT
    /// (SQLite's JSON functions read it), as is a native list, written as a JSON array; other
    /// data BLOB.
    static func columnType(_ attribute: AttributeDescription) -> String {
        switch attribute.type {
        case .bool, .int8, .int16, .int32, .int64, .uint8, .uint16, .uint32, .uint64: "INTEGER"
        case .double, .float: "REAL"
        case .string, .date, .uuid, .url: "TEXT"
        case .data: attribute.valueKind == .codable ? "TEXT" : "BLOB"
        case .stringList, .intList: "TEXT"
        }
    }

    /// The `CREATE TABLE` statements.
    func createStatements(_ plan: ExportPlan) -> [String] {
        var statements: [String] = []
        for table in tables {
            let entity = plan.entities[table.entity]
            var parts = ["\(sqlQuoted("id")) INTEGER PRIMARY KEY"]
            for (j, a) in entity.attributes.enumerated() {
                parts.append(
                    "\(sqlQuoted(table.attributeColumns[j])) \(Self.columnType(entity.table.attributes[a]))")
            }
            for toOne in table.toOnes { parts.append("\(sqlQuoted(toOne.column)) INTEGER") }
            for position in table.positions { parts.append("\(sqlQuoted(position.column)) INTEGER") }
            for toOne in table.toOnes {
                guard let references = toOne.references else { continue }
                parts.append(
                    "FOREIGN KEY (\(sqlQuoted(toOne.column))) REFERENCES \(sqlQuoted(references)) (\(sqlQuoted("id")))")
            }
            statements.append("CREATE TABLE \(sqlQuoted(table.name)) (\n  " + parts.joined(separator: ",\n  ") + "\n)")
        }
        for join in joins {
            var parts = join.columns.map { "\(sqlQuoted($0)) INTEGER NOT NULL" }
            for case let position? in join.positions { parts.append("\(sqlQuoted(position)) INTEGER") }
            parts.append("PRIMARY KEY (\(join.columns.map(sqlQuoted).joined(separator: ", ")))")
            for side in 0..<2 {
                parts.append(
                    "FOREIGN KEY (\(sqlQuoted(join.columns[side]))) REFERENCES \(sqlQuoted(join.references[side])) (\(sqlQuoted("id")))"
                )
            }
            statements.append("CREATE TABLE \(sqlQuoted(join.name)) (\n  " + parts.joined(separator: ",\n  ") + "\n)")
        }
        return statements
    }
}

/// Counts the values SQLite cannot hold as they are, for the notes.
struct SQLiteValueNotes {
    var hugeUnsigned = 0
    var nan = 0
    var dangling = 0

    var lines: [String] {
        var lines: [String] = []
        if hugeUnsigned > 0 {
            lines.append(
                "\(hugeUnsigned) uint64 value\(hugeUnsigned == 1 ? "" : "s") above 9223372036854775807 \(hugeUnsigned == 1 ? "is" : "are") stored as the 64-bit two's complement (a negative INTEGER)"
            )
        }
        if nan > 0 {
            lines.append(
                "\(nan) NaN value\(nan == 1 ? "" : "s") \(nan == 1 ? "is" : "are") stored as NULL (SQLite has no NaN)")
        }
        if dangling > 0 { lines.append(ExportPlan.danglingNote(dangling)) }
        return lines
    }
}

/// Writes `plan` into a new SQLite database at `path` (an empty or missing file): the tables of
/// ``SQLiteLayout``, then every object and every link, in one transaction, without a rollback
/// journal (the file is a temporary one, renamed into place only once it is complete).
func writeSQLite(_ plan: ExportPlan, to path: String, notes: inout ExportNotes, progress: ProgressBar?) throws {
    let layout = SQLiteLayout(plan)
    var counts = SQLiteValueNotes()
    let db = try SQLiteDatabase(path: path)
    try db.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN")
    for statement in layout.createStatements(plan) { try db.execute(statement) }
    var written: Int64 = 0
    for table in layout.tables {
        try insertObjects(plan, table, into: db, counts: &counts) { count in
            written += Int64(count)
            progress?.update(done: written)
        }
    }
    if !layout.joins.isEmpty {
        let total = layout.joins.reduce(Int64(0)) { $0 + Int64(plan.links[$1.link].count) }
        progress?.phase("writing links", total: total, unit: .items("links"))
        var linked: Int64 = 0
        for join in layout.joins {
            try insertLinks(plan, join, into: db) { count in
                linked += Int64(count)
                progress?.update(done: linked)
            }
        }
    }
    try db.execute("COMMIT")
    try db.close()
    for line in counts.lines { notes.add(line) }
    for line in layout.renames { notes.add(line) }
}

/// How many rows are inserted between two reports of progress.
private let progressStep = 4096

/// Inserts one entity's live objects, by serial.
private func insertObjects(
    _ plan: ExportPlan, _ table: SQLiteLayout.EntityTable, into db: SQLiteDatabase, counts: inout SQLiteValueNotes,
    advance: (Int) -> Void
) throws {
    let entity = plan.entities[table.entity]
    let columns =
        ["id"] + table.attributeColumns + table.toOnes.map(\.column) + table.positions.map(\.column)
    let insert = try db.prepare(
        "INSERT INTO \(sqlQuoted(table.name)) (\(columns.map(sqlQuoted).joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")")
    // A to-one side of links whose other side is ordered: each object's position in its
    // related object's list, from those lists.
    let positionMaps: [[UInt64: Int]] = table.positions.map { position in
        guard case .link(let k, let side) = entity.relationships[position.relationship].storage else { return [:] }
        var map: [UInt64: Int] = [:]
        for list in plan.links[k].lists[1 - side].values {
            for (i, member) in list.order.enumerated() { map[member] = i }
        }
        return map
    }
    var sinceAdvance = 0
    for serial in entity.serials() {
        guard let values = entity.table.objects[serial] else { continue }
        var index: Int32 = 1
        try insert.bind(Int64(bitPattern: serial), index)
        for a in entity.attributes {
            index += 1
            try bind(
                a < values.count ? values[a] : nil, at: index, of: insert,
                isJSON: entity.table.attributes[a].valueKind == .codable, counts: &counts)
        }
        for toOne in table.toOnes {
            index += 1
            let relationship = entity.relationships[toOne.relationship]
            let related: UInt64?
            switch relationship.storage {
            case .slot(let slot):
                related = plan.destination(
                    of: slot < values.count ? values[slot] : nil, relationship, dangling: &counts.dangling)
            case .link(let k, let side):
                related = plan.links[k].members(side, serial).first
            }
            if let related { try insert.bind(Int64(bitPattern: related), index) } else { try insert.bindNull(index) }
        }
        for map in positionMaps {
            index += 1
            if let position = map[serial] {
                try insert.bind(Int64(position), index)
            } else {
                try insert.bindNull(index)
            }
        }
        try insert.run()
        sinceAdvance += 1
        if sinceAdvance == progressStep {
            advance(sinceAdvance)
            sinceAdvance = 0
        }
    }
    if sinceAdvance > 0 { advance(sinceAdvance) }
}

/// Inserts the pairs of one many-to-many, each once (from side 0's lists), with side 0's
/// positions; then sets side 1's positions, if it is ordered, from its own lists.
private func insertLinks(
    _ plan: ExportPlan, _ join: SQLiteLayout.JoinTable, into db: SQLiteDatabase, advance: (Int) -> Void
) throws {
    let state = plan.links[join.link]
    var columns = join.columns
    if let position = join.positions[0] { columns.append(position) }
    let insert = try db.prepare(
        "INSERT INTO \(sqlQuoted(join.name)) (\(columns.map(sqlQuoted).joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")")
    var sinceAdvance = 0
    for owner in state.lists[0].keys.sorted() {
        for (i, member) in state.members(0, owner).enumerated() {
            try insert.bind(Int64(bitPattern: owner), 1)
            try insert.bind(Int64(bitPattern: member), 2)
            if join.positions[0] != nil { try insert.bind(Int64(i), 3) }
            try insert.run()
            sinceAdvance += 1
            if sinceAdvance == progressStep {
                advance(sinceAdvance)
                sinceAdvance = 0
            }
        }
    }
    if sinceAdvance > 0 { advance(sinceAdvance) }
    guard let position = join.positions[1] else { return }
    let update = try db.prepare(
        "UPDATE \(sqlQuoted(join.name)) SET \(sqlQuoted(position)) = ? WHERE \(sqlQuoted(join.columns[0])) = ? AND \(sqlQuoted(join.columns[1])) = ?"
    )
    for owner in state.lists[1].keys.sorted() {
        for (i, member) in state.members(1, owner).enumerated() {
            try update.bind(Int64(i), 1)
            try update.bind(Int64(bitPattern: member), 2)
            try update.bind(Int64(bitPattern: owner), 3)
            try update.run()
        }
    }
}

/// Binds an attribute value as its column stores it: integers and booleans as INTEGER,
/// doubles and floats as REAL (a float by its shortest decimal form, so that 0.1 stays 0.1),
/// strings, UUIDs and URLs as TEXT, dates as ISO 8601 TEXT in UTC (as `dump` writes them),
/// data as BLOB, except the JSON of a `Codable` attribute (`isJSON`): TEXT, when it is UTF-8;
/// a native list as the TEXT of a JSON array (as `dump` writes it).
private func bind(
    _ value: AttributeValue?, at index: Int32, of statement: SQLiteStatement, isJSON: Bool,
    counts: inout SQLiteValueNotes
) throws {
    guard let value else { try statement.bindNull(index); return }
    switch value {
    case .bool(let v): try statement.bind(Int64(v ? 1 : 0), index)
    case .int(let v): try statement.bind(v, index)
    case .uint(let v):
        if v > UInt64(Int64.max) { counts.hugeUnsigned += 1 }
        try statement.bind(Int64(bitPattern: v), index)
    case .double(let v):
        if v.isNaN {
            counts.nan += 1
            try statement.bindNull(index)
        } else {
            try statement.bind(v, index)
        }
    case .float(let v):
        if v.isNaN {
            counts.nan += 1
            try statement.bindNull(index)
        } else {
            try statement.bind(v.isFinite ? Double(v.description) ?? Double(v) : Double(v), index)
        }
    case .string(let v): try statement.bind(text: v, index)
    case .data(let v):
        if isJSON, let text = String(data: v, encoding: .utf8) {
            try statement.bind(text: text, index)
        } else {
            try statement.bind(blob: v, index)
        }
    case .date(let v):
        var text = JSONWriter(capacity: 40)
        text.date(v)
        if text.bytes.first == UInt8(ascii: "\""), text.bytes.count >= 2 {
            try statement.bind(text: String(decoding: text.bytes.dropFirst().dropLast(), as: UTF8.self), index)
        } else {
            // Beyond what ISO 8601 writes (or not finite): seconds since 1970.
            try statement.bind(v.timeIntervalSince1970, index)
        }
    case .uuid(let v): try statement.bind(text: v.uuidString, index)
    case .url(let v): try statement.bind(text: v.absoluteString, index)
    case .stringList, .intList:
        var text = JSONWriter(capacity: 64)
        text.value(value)
        try statement.bind(text: String(decoding: text.bytes, as: UTF8.self), index)
    case .object(let id): try statement.bind(Int64(bitPattern: id.serial), index)
    case .objects: try statement.bindNull(index)
    }
}
