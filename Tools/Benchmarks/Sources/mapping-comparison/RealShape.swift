// The shape an API mirror maps, next to the flat people records: Debian-like packages whose
// maintainer is an entity of its own, connected by e-mail (a to-one connected by an attribute),
// and whose `depends` is a many-to-many connected by a list of package names; the records in a
// shuffled order (neither by name nor as stored), the fields of the sizes the bundled Debian
// fixture has (about 500 bytes a record, 4 dependencies on average, one maintainer for about 8
// packages).

import Foundation
import GRDB
import ObjectGraph
import PeopleWorkload

@Entity final class RealPackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var architecture: String = ""
    var section: String = ""
    var priority: String?
    var installedSize: Int64?
    var size: Int64 = 0
    var maintainerEmail: String = ""
    var homepage: String?
    var summary: String = ""
    var dependsNames: [String] = []
    var sha256: String = ""
    @Relationship(inverse: "packages") var maintainedBy: RealMaintainer?
    @Relationship(inverse: "dependents") var depends: [RealPackage]
    @Relationship(inverse: "depends") var dependents: [RealPackage]
}

@Entity final class RealMaintainer {
    @Attribute(.unique) var email: String = ""
    var name: String = ""
    @Relationship(inverse: "maintainedBy") var packages: [RealPackage]
}

/// One record as the API sends it, and as the peer decodes it.
struct PackageJSON: Codable, Sendable {
    var name: String
    var version: String
    var architecture: String
    var section: String
    var priority: String?
    var installedSize: Int64?
    var size: Int64
    var maintainerName: String
    var maintainerEmail: String
    var homepage: String?
    var description: String
    var depends: [String]
    var sha256: String
}

/// The document of `n` package records, and what mapping it must produce.
struct RealDocument {
    var json: Data
    /// Distinct maintainers, and (package, dependency) pairs whose dependency is in the document.
    var maintainers: Int
    var links: Int
}

private let prefixes = ["lib", "python3-", "golang-", "node-", "r-cran-", "", "fonts-", "librust-"]
private let words = [
    "accounts", "service", "zlib", "glib", "crypt", "mesa", "xml", "yaml", "ssl", "curl", "tiff", "png", "gtk",
    "qt", "perl", "ruby", "sound", "video", "print", "net", "tools", "utils", "dev", "data", "common", "core",
    "kernel", "audio", "image", "font", "shell", "text",
]
private let sections = ["libs", "utils", "net", "devel", "python", "admin", "web", "doc", "x11", "sound"]

/// A package name: a prefix and a word chosen by a hash of `i`, then `i` in base 36 (unique).
func packageName(_ i: Int) -> String {
    var g = SplitMix(seed: UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ 7)
    let h = g.next()
    return "\(prefixes[Int(h % 8)])\(words[Int((h >> 8) % 32)])\(words[Int((h >> 16) % 32)])-\(String(i, radix: 36))"
}

/// The document of `n` packages in a shuffled order.
func realDocument(_ n: Int) -> RealDocument {
    let maintainerCount = max(n / 8, 1)
    var order = Array(0..<n)
    var shuffler = SplitMix(seed: 4242)
    order.shuffle(using: &shuffler)
    var text = "["
    text.reserveCapacity(n * 520)
    var usedMaintainers = Set<Int>()
    var links = 0
    for (k, i) in order.enumerated() {
        var g = SplitMix(seed: UInt64(i) &+ 0x5151)
        let h = g.next()
        let name = packageName(i)
        let m = Int(g.next() % UInt64(maintainerCount))
        usedMaintainers.insert(m)
        var depends: [String] = []
        var targets = Set<Int>()
        // An eighth of the packages depend on nothing, the others on 1 to 8; one name in twenty
        // is a virtual package the document does not list.
        if h % 8 != 0 {
            for _ in 0..<Int(g.next() % 8) + 1 {
                if g.next() % 20 == 0 {
                    depends.append("virtual-\(words[Int(g.next() % 32)])-\(g.next() % 500)")
                } else {
                    var j = Int(g.next() % UInt64(n))
                    if j == i { j = (j + 1) % n }
                    if j != i { targets.insert(j) }
                    depends.append(packageName(j))
                }
            }
        }
        links += targets.count
        let word = words[Int((h >> 24) % 32)], other = words[Int((h >> 32) % 32)]
        let version =
            "\(1 + h % 40).\((h >> 8) % 17).\((h >> 12) % 9)-\(1 + (h >> 16) % 5)\(h % 3 == 0 ? "+deb12u1" : "")"
        let priority = h % 11 == 0 ? "null" : (h % 5 == 0 ? "\"important\"" : "\"optional\"")
        let homepage = h % 6 == 0 ? "null" : "\"https://www.\(word)\(other).org/projects/\(name)/\""
        var sha = ""
        sha.reserveCapacity(64)
        for _ in 0..<4 {
            let hex = String(g.next(), radix: 16)
            sha += String(repeating: "0", count: 16 - hex.count) + hex
        }
        let dependsJSON = depends.map { "\"\($0)\"" }.joined(separator: ",")
        if k > 0 { text += "," }
        text +=
            #"{"name":"\#(name)","version":"\#(version)","architecture":"\#(h % 4 == 0 ? "all" : "amd64")","#
            + #""section":"\#(sections[Int((h >> 40) % 10)])","priority":\#(priority),"#
            + #""installedSize":\#((h >> 20) % 90_000),"size":\#((h >> 28) % 5_000_000),"#
            + #""maintainerName":"Debian \#(words[m % 32]) \#(words[(m / 32) % 32]) Team \#(m)","#
            + #""maintainerEmail":"pkg-\#(words[m % 32])-\#(m)@lists.alioth.debian.org","#
            + #""homepage":\#(homepage),"description":"\#(word) \#(other) library for \#(name) - runtime files","#
            + #""depends":[\#(dependsJSON)],"sha256":"\#(sha)"}"#
    }
    text += "]"
    return RealDocument(json: Data(text.utf8), maintainers: usedMaintainers.count, links: links)
}

// MARK: ObjectGraph

/// The two mappings, as Docs/Mapping.md declares them: maintainers mapped from the packages'
/// own fields and identified by e-mail; packages identified by name, connected to their
/// maintainer by e-mail and to their dependencies by the list of names.
func realMappings() throws -> (EntityMapping<RealMaintainer>, EntityMapping<RealPackage>) {
    var maintainers = EntityMapping(RealMaintainer.self)
    try maintainers.map(["maintainerEmail": "email", "maintainerName": "name"])
    try maintainers.identify(by: "email")
    var packages = EntityMapping(RealPackage.self)
    try packages.map(
        "name", "version", "architecture", "section", "priority", "installedSize", "size", "maintainerEmail",
        "homepage", "sha256")
    try packages.map("description", to: "summary")
    try packages.map(["depends": "dependsNames"])
    try packages.identify(by: "name")
    try packages.connect("maintainedBy", by: ["maintainerEmail": "email"])
    try packages.connect("depends", by: ["dependsNames": "name"])
    return (maintainers, packages)
}

/// Maps the document into an empty durable store (maintainers, then packages) and saves once;
/// then checks the counts and every link.
func objectGraphRealRun(_ document: Data, n: Int, maintainers expectedMaintainers: Int, links: Int) throws -> Phases {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let store = try ObjectStore.open(at: dir, schema: try Schema(RealPackage.self, RealMaintainer.self))
    let (maintainers, packages) = try realMappings()
    var p = Phases()
    let r1 = try store.context.map(document, with: maintainers)
    let r2 = try store.context.map(document, with: packages)
    p.parse = r1.parseSeconds + r2.parseSeconds
    p.map = r1.mapSeconds + r2.mapSeconds
    let t = now()
    try store.context.save()
    p.save = now() - t
    let all = try store.context.fetch(FetchDescriptor<RealPackage>())
    let linked = all.reduce(0) { $0 + $1.depends.count }
    let owned = all.reduce(0) { $0 + ($1.maintainedBy == nil ? 0 : 1) }
    guard all.count == n, owned == n, linked == links,
        try store.context.count(of: RealMaintainer.self) == expectedMaintainers
    else {
        throw BenchError("ObjectGraph real shape: \(all.count) packages, \(owned) owned, \(linked) links")
    }
    try store.close()
    return p
}

// MARK: JSONDecoder + GRDB

let realSchemaSQL = """
    CREATE TABLE maintainer (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
    CREATE TABLE package (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, version TEXT NOT NULL,
        architecture TEXT NOT NULL, section TEXT NOT NULL, priority TEXT, installedSize INTEGER,
        size INTEGER NOT NULL, maintainerId INTEGER NOT NULL REFERENCES maintainer(id), homepage TEXT,
        summary TEXT NOT NULL, sha256 TEXT NOT NULL);
    CREATE INDEX package_maintainer ON package(maintainerId);
    CREATE TABLE depends (package INTEGER NOT NULL REFERENCES package(id),
        dependency INTEGER NOT NULL REFERENCES package(id), PRIMARY KEY (package, dependency)) WITHOUT ROWID;
    CREATE INDEX depends_dependency ON depends(dependency);
    """
let realMaintainerUpsertSQL = """
    INSERT INTO maintainer (email, name) VALUES (?, ?)
    ON CONFLICT(email) DO UPDATE SET name = excluded.name RETURNING id
    """
let realPackageUpsertSQL = """
    INSERT INTO package (name, version, architecture, section, priority, installedSize, size, maintainerId,
        homepage, summary, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(name) DO UPDATE SET version = excluded.version, architecture = excluded.architecture,
        section = excluded.section, priority = excluded.priority, installedSize = excluded.installedSize,
        size = excluded.size, maintainerId = excluded.maintainerId, homepage = excluded.homepage,
        summary = excluded.summary, sha256 = excluded.sha256
    RETURNING id
    """

/// `JSONDecoder` into structs, then one `BEGIN IMMEDIATE` transaction of prepared statements:
/// a maintainer upsert (by its unique e-mail) the first time the run meets each e-mail, the IDs
/// kept in a dictionary; a package upsert (by its unique name) per record, its ID kept; then
/// the join rows, each dependency name looked up in that dictionary (names the document does not
/// list skipped, a name listed twice linked once). WAL, `synchronous=FULL`.
func sqliteRealRun(_ document: Data, n: Int, maintainers expectedMaintainers: Int, links: Int) throws -> Phases {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    var config = Configuration()
    config.journalMode = .wal
    let queue = try DatabaseQueue(path: dir.appendingPathComponent("packages.sqlite").path, configuration: config)
    try queue.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else { throw BenchError("synchronous is not FULL") }
        try db.execute(sql: realSchemaSQL)
    }
    var p = Phases()
    var t = now()
    let records = try JSONDecoder().decode([PackageJSON].self, from: document)
    p.parse = now() - t
    t = now()
    try queue.writeWithoutTransaction { db in
        try db.inTransaction(.immediate) {
            let maintainer = try db.makeStatement(sql: realMaintainerUpsertSQL)
            let package = try db.makeStatement(sql: realPackageUpsertSQL)
            let link = try db.makeStatement(sql: "INSERT OR IGNORE INTO depends (package, dependency) VALUES (?, ?)")
            var maintainerIDs: [String: Int64] = [:]
            var packageIDs: [String: Int64] = [:]
            packageIDs.reserveCapacity(records.count)
            for r in records {
                let owner: Int64
                if let id = maintainerIDs[r.maintainerEmail] {
                    owner = id
                } else {
                    guard let id = try Int64.fetchOne(maintainer, arguments: [r.maintainerEmail, r.maintainerName])
                    else { throw BenchError("maintainer upsert returned nothing") }
                    maintainerIDs[r.maintainerEmail] = id
                    owner = id
                }
                guard
                    let id = try Int64.fetchOne(
                        package,
                        arguments: [
                            r.name, r.version, r.architecture, r.section, r.priority, r.installedSize, r.size, owner,
                            r.homepage, r.description, r.sha256,
                        ])
                else { throw BenchError("package upsert returned nothing") }
                packageIDs[r.name] = id
            }
            for r in records where !r.depends.isEmpty {
                guard let id = packageIDs[r.name] else { continue }
                for name in r.depends {
                    if let dependency = packageIDs[name] { try link.execute(arguments: [id, dependency]) }
                }
            }
            return .commit
        }
    }
    p.map = now() - t
    let (packages, maintainers, joined) = try queue.read { db in
        (
            try Int.fetchOne(db, sql: "SELECT count(*) FROM package") ?? 0,
            try Int.fetchOne(db, sql: "SELECT count(*) FROM maintainer") ?? 0,
            try Int.fetchOne(db, sql: "SELECT count(*) FROM depends") ?? 0
        )
    }
    guard packages == n, maintainers == expectedMaintainers, joined == links else {
        throw BenchError("GRDB real shape: \(packages) packages, \(maintainers) maintainers, \(joined) links")
    }
    try queue.close()
    return p
}
