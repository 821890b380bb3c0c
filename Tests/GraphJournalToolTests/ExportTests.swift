import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// A package of the Debian fixture (`Fixtures/debian-packages.jsonl.lz4`), as the demo stores
/// it: a to-one to its maintainer (stored in its slot) and a many-to-many of packages.
@Entity final class DebianPackage {
    var name: String = ""
    var version: String = ""
    var architecture: String = ""
    var section: String = ""
    var priority: String?
    var installedSize: Int64?
    var size: Int64 = 0
    var homepage: URL?
    var summary: String = ""
    var sha256: String = ""
    @Relationship(inverse: "packages") var maintainedBy: DebianMaintainer?
    @Relationship(inverse: "dependents") var depends: [DebianPackage]
    @Relationship(inverse: "depends") var dependents: [DebianPackage]
}

@Entity final class DebianMaintainer {
    var name: String = ""
    @Relationship(inverse: "maintainedBy") var packages: [DebianPackage]
}

/// Names SQL reserves, for entities and attributes: `Order` and `Group` are keywords, so are
/// `group`, `select`, `values`, `index` and `check`; `id` is the primary key's name too.
@Entity final class Order {
    var group: String = ""
    var select: Int = 0
    var id: Int64 = 0
    var values: Double = 0
    @Relationship(inverse: "orders") var index: Group?
    @Relationship(inverse: "checks", ordered: true) var check: [Group]
}

@Entity final class Group {
    var table: String = ""
    @Relationship(inverse: "index") var orders: [Order]
    @Relationship(inverse: "check") var checks: [Order]
}

/// The Debian fixture's records as the tests need them.
struct DebianFixture: Sendable {
    struct Package: Sendable {
        var name, version, architecture, section, maintainer, description, sha256: String
        var priority, homepage: String?
        var installedSize: Int64?
        var size: Int64
        var depends: [String]
    }

    var packages: [Package]

    /// The repository's `Fixtures/debian-packages.jsonl.lz4`, decompressed and parsed.
    static func load() throws -> DebianFixture {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/debian-packages.jsonl.lz4")
        let bytes = try LZ4.decompressFrame([UInt8](Data(contentsOf: url)))
        var packages: [Package] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            packages.append(
                Package(
                    name: try #require(object["name"] as? String), version: try #require(object["version"] as? String),
                    architecture: try #require(object["architecture"] as? String),
                    section: try #require(object["section"] as? String),
                    maintainer: try #require(object["maintainer"] as? String),
                    description: try #require(object["description"] as? String),
                    sha256: try #require(object["sha256"] as? String), priority: object["priority"] as? String,
                    homepage: object["homepage"] as? String,
                    installedSize: (object["installedSize"] as? Int).map(Int64.init),
                    size: Int64(try #require(object["size"] as? Int)), depends: object["depends"] as? [String] ?? []))
        }
        return DebianFixture(packages: packages)
    }

    /// The distinct maintainers, in order of first appearance.
    var maintainers: [String] {
        var seen = Set<String>()
        return packages.map(\.maintainer).filter { seen.insert($0).inserted }
    }

    /// The dependencies that name a package of the slice (the links of `depends`).
    var links: Int {
        let names = Set(packages.map(\.name))
        return packages.reduce(0) { $0 + Set($1.depends).filter(names.contains).count }
    }

    /// Writes the fixture as a store: every package and maintainer in one save, then every
    /// package's dependencies in a second.
    func write(at dir: URL) throws {
        var options = StoreOptions(durability: .none)
        options.autoCompactionRatio = nil
        let store = try ObjectStore.open(
            at: dir, schema: try Schema(DebianPackage.self, DebianMaintainer.self), options: options)
        let context = store.context
        var maintainers: [String: DebianMaintainer] = [:]
        var objects: [String: DebianPackage] = [:]
        for record in packages {
            let maintainer =
                try maintainers[record.maintainer]
                ?? context.insert(DebianMaintainer.self) {
                    $0.name = record.maintainer
                }
            maintainers[record.maintainer] = maintainer
            objects[record.name] = try context.insert(DebianPackage.self) { p in
                p.name = record.name
                p.version = record.version
                p.architecture = record.architecture
                p.section = record.section
                p.priority = record.priority
                p.installedSize = record.installedSize
                p.size = record.size
                p.homepage = record.homepage.flatMap(URL.init(string:))
                p.summary = String(record.description.prefix { $0 != "\n" })
                p.sha256 = record.sha256
                p.maintainedBy = maintainer
            }
        }
        try context.save()
        for record in packages {
            var seen = Set<String>()
            objects[record.name]?.depends = record.depends.filter { seen.insert($0).inserted }.compactMap {
                objects[$0]
            }
        }
        try context.save()
        try store.close()
    }
}

/// Runs `sqlite3` (the command line shell) on a database and gives back its output lines.
enum SQLite3 {
    static let binary: String? = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    static var isInstalled: Bool { binary != nil }

    /// The rows `sql` returns, one line each, columns separated by `|`.
    static func query(_ database: URL, _ sql: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(binary))
        process.arguments = ["-batch", "-bail", database.path, sql]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "sqlite3: \(sql): \(String(decoding: errors, as: UTF8.self))")
        return String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast().map(String.init)
    }

    /// The one value `sql` returns.
    static func value(_ database: URL, _ sql: String) throws -> String {
        let rows = try query(database, sql)
        #expect(rows.count == 1, "\(sql): \(rows)")
        return rows.first ?? ""
    }
}

/// `graph-journal export` on the Debian fixture's store and on stores made to test one thing:
/// JSON Lines and SQLite, read back with `JSONSerialization` and the `sqlite3` shell.
@Suite("GraphJournalTool: export", .serialized)
struct ExportTests {
    /// The fixture's records, and a store written from them, once per test process.
    static let debian = Result<(fixture: DebianFixture, store: URL), any Error>(catching: {
        let fixture = try DebianFixture.load()
        let dir = Tool.temporaryURL("debian-store")
        try fixture.write(at: dir)
        return (fixture, dir)
    })

    /// Writes the Debian fixture's store to `GRAPH_JOURNAL_DEBIAN_STORE` when it is set (the
    /// store of the README's export example).
    @Test func writeDebianStoreWhenAsked() throws {
        guard let path = ProcessInfo.processInfo.environment["GRAPH_JOURNAL_DEBIAN_STORE"] else { return }
        try DebianFixture.load().write(at: URL(fileURLWithPath: path))
    }

    /// The objects of an export's JSON Lines, parsed, by entity then ID.
    static func parse(_ jsonl: String) throws -> [String: [Int: [String: Any]]] {
        var objects: [String: [Int: [String: Any]]] = [:]
        for line in jsonl.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let entity = try #require(object["entity"] as? String)
            let id = try #require(object["id"] as? Int)
            #expect(objects[entity]?[id] == nil, "\(entity) \(id) written once")
            objects[entity, default: [:]][id] = object
        }
        return objects
    }

    @Test func jsonLinesOfTheDebianStoreHoldEveryObjectWithItsValuesAndRelationships() throws {
        let (fixture, store) = try Self.debian.get()
        let result = try Tool.run(["export", store.path, "--format", "jsonl"])
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == fixture.packages.count + fixture.maintainers.count)
        let objects = try Self.parse(result.stdout)
        let packages = try #require(objects["DebianPackage"])
        let maintainers = try #require(objects["DebianMaintainer"])
        #expect(packages.count == fixture.packages.count)
        #expect(maintainers.count == fixture.maintainers.count)
        // Every package by name, then a sample of the fixture's records compared field by field.
        var byName: [String: [String: Any]] = [:]
        var nameOf: [Int: String] = [:]
        for (id, object) in packages {
            let attributes = try #require(object["attributes"] as? [String: Any])
            let name = try #require(attributes["name"] as? String)
            byName[name] = object
            nameOf[id] = name
        }
        let maintainerNames = try maintainers.mapValues { object in
            try #require((object["attributes"] as? [String: Any])?["name"] as? String)
        }
        var dependencies = 0
        let names = Set(fixture.packages.map(\.name))
        for (i, record) in fixture.packages.enumerated() {
            let object = try #require(byName[record.name])
            let relationships = try #require(object["relationships"] as? [String: Any])
            let depends = try #require(relationships["depends"] as? [Int])
            dependencies += depends.count
            guard i % 97 == 0 || record.name == "adduser" else { continue }
            let attributes = try #require(object["attributes"] as? [String: Any])
            #expect(attributes["version"] as? String == record.version)
            #expect(attributes["section"] as? String == record.section)
            #expect((attributes["size"] as? Int).map(Int64.init) == record.size)
            #expect((attributes["installedSize"] as? Int).map(Int64.init) == record.installedSize)
            #expect(attributes["priority"] as? String == record.priority)
            #expect(attributes["homepage"] as? String == record.homepage)
            #expect(attributes["maintainedBy"] == nil, "a to-one is a relationship, not an attribute")
            let maintainer = try #require(relationships["maintainedBy"] as? Int)
            #expect(maintainerNames[maintainer] == record.maintainer)
            #expect(
                Set(depends.compactMap { nameOf[$0] }) == Set(record.depends.filter(names.contains)), "\(record.name)")
            #expect(depends == depends.sorted(), "an unordered to-many by ID")
        }
        #expect(dependencies == fixture.links)
        let adduser = try #require(byName["adduser"])
        #expect(
            (adduser["attributes"] as? [String: Any])?["summary"] as? String == "add and remove users and groups")

        // --output writes the same bytes to a file.
        let file = Tool.temporaryURL("debian.jsonl")
        let toFile = try Tool.run(["export", store.path, "--format", "jsonl", "--output", file.path])
        #expect(toFile.status == 0 && toFile.stdout.isEmpty && toFile.stderr.isEmpty)
        #expect(try String(contentsOf: file, encoding: .utf8) == result.stdout)
    }

    @Test(.enabled(if: SQLite3.isInstalled)) func sqliteOfTheDebianStoreHoldsEveryObjectLinkAndForeignKey() throws {
        let (fixture, store) = try Self.debian.get()
        let db = Tool.temporaryURL("debian.sqlite")
        let result = try Tool.run(["export", store.path, "--format", "sqlite", "--output", db.path])
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stderr)")
        #expect(try SQLite3.value(db, "SELECT count(*) FROM DebianPackage") == "\(fixture.packages.count)")
        #expect(try SQLite3.value(db, "SELECT count(*) FROM DebianMaintainer") == "\(fixture.maintainers.count)")
        // A many-to-many: one join table, each pair once (not once per side).
        #expect(try SQLite3.value(db, "SELECT count(*) FROM DebianPackage_depends") == "\(fixture.links)")
        #expect(try SQLite3.query(db, "PRAGMA foreign_key_check").isEmpty)
        #expect(
            try SQLite3.query(db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
                == ["DebianMaintainer", "DebianPackage", "DebianPackage_depends"])
        // Typed columns.
        #expect(
            try SQLite3.query(db, "SELECT name, type, pk FROM pragma_table_info('DebianPackage') ORDER BY cid")
                == [
                    "id|INTEGER|1", "name|TEXT|0", "version|TEXT|0", "architecture|TEXT|0", "section|TEXT|0",
                    "priority|TEXT|0", "installedSize|INTEGER|0", "size|INTEGER|0", "homepage|TEXT|0",
                    "summary|TEXT|0", "sha256|TEXT|0", "maintainedBy_id|INTEGER|0",
                ])
        #expect(
            try SQLite3.query(db, "SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list('DebianPackage')")
                == ["DebianMaintainer|maintainedBy_id|id"])
        // A sample of values, against the fixture's records.
        let names = Set(fixture.packages.map(\.name))
        for (i, record) in fixture.packages.enumerated() where i % 211 == 0 || record.name == "adduser" {
            let quoted = record.name.replacingOccurrences(of: "'", with: "''")
            #expect(
                try SQLite3.value(
                    db,
                    "SELECT p.version, p.size, typeof(p.size), coalesce(p.installedSize, 'null'), m.name FROM DebianPackage p JOIN DebianMaintainer m ON m.id = p.maintainedBy_id WHERE p.name = '\(quoted)'"
                )
                    == "\(record.version)|\(record.size)|integer|\(record.installedSize.map(String.init) ?? "null")|\(record.maintainer)"
            )
            let depends = try SQLite3.query(
                db,
                "SELECT d.name FROM DebianPackage_depends j JOIN DebianPackage p ON p.id = j.dependents_id JOIN DebianPackage d ON d.id = j.depends_id WHERE p.name = '\(quoted)'"
            )
            #expect(Set(depends) == Set(record.depends.filter(names.contains)), "\(record.name)")
        }
        #expect(
            try SQLite3.value(db, "SELECT summary FROM DebianPackage WHERE name = 'adduser'")
                == "add and remove users and groups")
        // No temporary file is left beside the output.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: db.deletingLastPathComponent().path)
            .filter { $0.contains(db.lastPathComponent) && $0 != db.lastPathComponent }
        #expect(leftovers.isEmpty)
    }

    @Test func anExistingOutputIsRefusedWithoutForce() throws {
        let (_, store) = try Self.debian.get()
        for format in ["sqlite", "jsonl"] {
            let file = Tool.temporaryURL("existing.\(format)")
            try Data("keep me\n".utf8).write(to: file)
            let refused = try Tool.run(["export", store.path, "--format", format, "--output", file.path])
            #expect(refused.status == 1 && refused.stdout.isEmpty)
            #expect(
                refused.stderr
                    == "graph-journal: \(file.path) exists; pass --force to replace it; nothing was written\n")
            #expect(try String(contentsOf: file, encoding: .utf8) == "keep me\n")
            let forced = try Tool.run(["export", store.path, "--format", format, "--output", file.path, "--force"])
            #expect(forced.status == 0 && forced.stderr.isEmpty, "\(forced.stderr)")
            #expect(try String(contentsOf: file, encoding: .isoLatin1) != "keep me\n")
            let siblings = try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)
            #expect(!siblings.contains { $0.hasPrefix(".\(file.lastPathComponent).export-") }, "no temporary file left")
        }
        let sqliteToStandardOutput = try Tool.run(["export", store.path, "--format", "sqlite"])
        #expect(sqliteToStandardOutput.status == 64 && sqliteToStandardOutput.stderr.contains("--output"))
        let unknownFormat = try Tool.run(["export", store.path, "--format", "csv"])
        #expect(unknownFormat.status == 64)
    }

    @Test func entitiesAndAttributesNamedLikeSQLKeywordsExport() throws {
        let dir = Tool.temporaryURL("keywords")
        do {
            let store = try ObjectStore.open(at: dir, schema: try Schema(Order.self, Group.self))
            let c = store.context
            let groups = try (0..<3).map { i in try c.insert(Group.self) { $0.table = "g\(i)" } }
            for i in 0..<5 {
                try c.insert(Order.self) { o in
                    o.group = "order \(i)"
                    o.select = i * 10
                    o.id = Int64(100 + i)
                    o.values = Double(i) / 4
                    o.index = groups[i % 3]
                    o.check = [groups[(i + 1) % 3], groups[i % 3]]
                }
            }
            try c.save()
            try store.close()
        }
        let jsonl = try Tool.run(["export", dir.path, "--format", "jsonl"])
        #expect(jsonl.status == 0 && jsonl.stderr.isEmpty)
        let objects = try Self.parse(jsonl.stdout)
        let first = try #require(objects["Order"]?[1])
        let attributes = try #require(first["attributes"] as? [String: Any])
        #expect(attributes["group"] as? String == "order 0" && attributes["id"] as? Int == 100)
        let relationships = try #require(first["relationships"] as? [String: Any])
        #expect(relationships["index"] as? Int == 1 && relationships["check"] as? [Int] == [2, 1])
        guard SQLite3.isInstalled else { return }
        let db = Tool.temporaryURL("keywords.sqlite")
        let result = try Tool.run(["export", dir.path, "--format", "sqlite", "--output", db.path])
        #expect(result.status == 0 && result.stdout.isEmpty)
        // The attribute named id cannot be the primary key's column too: it gets a suffix, said once.
        #expect(result.stderr == "graph-journal: note: Order.id is column \"id_2\" of table \"Order\"\n")
        #expect(
            try SQLite3.query(
                db, #"SELECT "id", "group", "select", "id_2", "values", "index_id" FROM "Order" ORDER BY "id""#)
                == [
                    "1|order 0|0|100|0.0|1", "2|order 1|10|101|0.25|2", "3|order 2|20|102|0.5|3",
                    "4|order 3|30|103|0.75|1", "5|order 4|40|104|1.0|2",
                ])
        #expect(try SQLite3.value(db, #"SELECT count(*) FROM "Group""#) == "3")
        #expect(
            try SQLite3.query(
                db,
                #"SELECT "checks_id", "check_id", "check_position" FROM "Order_check" WHERE "checks_id" = 1 ORDER BY "check_position""#
            ) == ["1|2|0", "1|1|1"])
        #expect(try SQLite3.query(db, "PRAGMA foreign_key_check").isEmpty)
    }

    @Test func orderedAndSelfReferencingRelationshipsKeepTheirOrderAndEachPairOnce() throws {
        let dir = Tool.temporaryURL("links-export")
        let expected: [String: [String: [UInt64]]]
        do {
            let store = try ObjectStore.open(
                at: dir, schema: try ToolLinkTests.schema(), options: ToolLinkTests.options())
            let c = store.context
            let songs = try (0..<6).map { i in try c.insert(Song.self) { $0.title = "s\(i)" } }
            let mixtapes = try (0..<3).map { i in try c.insert(Mixtape.self) { $0.name = "m\(i)" } }
            mixtapes[0].songs = [songs[3], songs[0], songs[5]]
            mixtapes[1].songs = [songs[0], songs[1]]
            mixtapes[2].songs = [songs[5], songs[3]]
            let binder = try c.insert(Binder.self) { $0.label = "b" }
            let sheets = try (0..<4).map { i in try c.insert(Sheet.self) { $0.heading = "h\(i)" } }
            binder.sheets = [sheets[2], sheets[0], sheets[3]]
            let modules = try (0..<4).map { i in try c.insert(Module.self) { $0.name = "mod\(i)" } }
            modules[0].imports = [modules[1], modules[2]]
            modules[1].imports = [modules[2], modules[0]]
            modules[3].imports = [modules[3]]
            try c.save()
            expected = try ToolLinkTests.libraryLinks(c)
            try store.close()
        }
        // JSON Lines: every object's lists as the library reads them.
        let jsonl = try Tool.run(["export", dir.path, "--format", "jsonl"])
        #expect(jsonl.status == 0 && jsonl.stderr.isEmpty, "\(jsonl.stderr)")
        var exported: [String: [String: [UInt64]]] = [:]
        for (entity, objects) in try Self.parse(jsonl.stdout) where !["Article", "Keyword"].contains(entity) {
            for (id, object) in objects {
                var lists: [String: [UInt64]] = [:]
                for (name, value) in try #require(object["relationships"] as? [String: Any]) {
                    if let list = value as? [Int] {
                        lists[name] = list.map(UInt64.init)
                    } else {
                        lists[name] = (value as? Int).map { [UInt64($0)] } ?? []
                    }
                }
                if entity == "Module" {
                    lists = lists.mapValues { $0.sorted() }
                }
                exported["\(entity)/\(id)"] = lists
            }
        }
        #expect(exported == expected)
        guard SQLite3.isInstalled else { return }
        let db = Tool.temporaryURL("links.sqlite")
        let result = try Tool.run(["export", dir.path, "--format", "sqlite", "--output", db.path])
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result.stderr)")
        #expect(try SQLite3.query(db, "PRAGMA foreign_key_check").isEmpty)
        // Ordered both ways: each mixtape's songs, and each song's mixtapes, in order.
        #expect(
            try SQLite3.query(
                db,
                "SELECT mixtapes_id, group_concat(songs_id) FROM (SELECT * FROM Mixtape_songs ORDER BY songs_position) GROUP BY mixtapes_id ORDER BY mixtapes_id"
            )
                == ["1|4,1,6", "2|1,2", "3|6,4"])
        for (key, lists) in expected where key.hasPrefix("Song/") {
            let song = key.dropFirst("Song/".count)
            let order = try SQLite3.query(
                db, "SELECT mixtapes_id FROM Mixtape_songs WHERE songs_id = \(song) ORDER BY mixtapes_position")
            #expect(order == (lists["mixtapes"] ?? []).map { "\($0)" }, "\(key)")
        }
        #expect(try SQLite3.value(db, "SELECT count(*) FROM Mixtape_songs") == "7")
        // An ordered to-many whose inverse is a to-one: the to-one's column and the position.
        #expect(
            try SQLite3.query(
                db, "SELECT id, coalesce(binder_id, '-'), coalesce(sheets_position, '-') FROM Sheet ORDER BY id")
                == ["1|1|1", "2|-|-", "3|1|0", "4|1|2"])
        // A many-to-many of an entity with itself: each pair once.
        #expect(
            try SQLite3.query(db, "SELECT importedBy_id, imports_id FROM Module_imports ORDER BY 1, 2")
                == ["1|2", "1|3", "2|1", "2|3", "4|4"])
    }

    @Test(.enabled(if: SQLite3.isInstalled)) func everyAttributeTypeHasItsColumnType() throws {
        let fixture = Tool.fixtures.appendingPathComponent("v1-clean")
        let db = Tool.temporaryURL("everything.sqlite")
        let result = try Tool.run(["export", fixture.path, "--format", "sqlite", "--output", db.path])
        #expect(result.status == 0)
        #expect(
            result.stderr
                == "graph-journal: note: 1 uint64 value above 9223372036854775807 is stored as the 64-bit two's complement (a negative INTEGER)\ngraph-journal: note: Person.id is column \"id_2\" of table \"Person\"\n"
        )
        #expect(
            try SQLite3.value(
                db,
                "SELECT flag, typeof(flag), i8, u64, double, typeof(float), float, text, hex(blob), date, uuid, url, priority, level FROM Everything"
            )
                == "1|integer|-8|-1|0.25|real|-1.5|fixture text|DEAD|2027-01-15T08:00:00Z|01020304-0506-0708-090A-0B0C0D0E0F10|https://www.debian.org/|important|2"
        )
        // A Codable attribute's JSON is TEXT, for SQLite's JSON functions.
        #expect(
            try SQLite3.value(db, "SELECT typeof(checksum), json_extract(checksum, '$.hex') FROM Everything")
                == "text|00ff")
        #expect(try SQLite3.value(db, "SELECT count(*) FROM Person") == "16")
        #expect(try SQLite3.value(db, "SELECT datetime(date) FROM Everything") == "2027-01-15 08:00:00")
    }

    @Test func aDamagedStoreGetsTheSameErrorsAndNoOutput() throws {
        let out = Tool.temporaryURL("damaged.sqlite")
        let corrupt = Tool.fixtures.appendingPathComponent("corrupt-middle").path
        let result = try Tool.run(["export", corrupt, "--format", "sqlite", "--output", out.path])
        #expect(result.status == 3 && result.stdout.isEmpty)
        #expect(
            result.stderr == """
                graph-journal: corruption in 0000000001.log at byte 596: checksum mismatch
                graph-journal: nothing was exported; `graph-journal repair --keep-prefix` keeps the valid prefix

                """)
        #expect(!FileManager.default.fileExists(atPath: out.path))
        let jsonl = try Tool.run(["export", corrupt, "--format", "jsonl"])
        #expect(jsonl.status == 3 && jsonl.stdout.isEmpty)
        // A torn tail: the objects as of the records before it, as opening the store would keep.
        let torn = try Tool.run(["export", Tool.fixtures.appendingPathComponent("torn-tail").path, "--format", "jsonl"])
        #expect(torn.status == 0)
        #expect(
            torn.stderr
                == "graph-journal: note: torn tail in 0000000001.log at byte 1249 (record of 41 payload bytes extends past the end of the file); the objects as of the records before it were exported\n"
        )
        let clean = try Tool.run(["export", Tool.fixtures.appendingPathComponent("v1-clean").path, "--format", "jsonl"])
        #expect(torn.stdout == clean.stdout)
        // A missing store: the message every read-only command gives.
        let missing = Tool.temporaryURL("no-such-store").path
        let dump = try Tool.run(["dump", "--objects", missing])
        let export = try Tool.run(["export", missing, "--format", "sqlite", "--output", out.path])
        #expect(export.status == 1 && dump.status == 1)
        #expect(export.stderr == dump.stderr)
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }
}
