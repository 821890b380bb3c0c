// The first run of the real shape (Sources/DebianShape: Debian-like packages, their maintainer
// connected by e-mail, `depends` by a list of names), ObjectGraph and JSONDecoder + GRDB.

import DebianShape
import Foundation
import GRDB
import ObjectGraph

/// Maps the document into an empty durable store (one run: packages, their maintainers from the
/// packages' own fields) and saves once; then checks the counts and every link.
func objectGraphRealRun(_ document: Data, n: Int, maintainers expectedMaintainers: Int, links: Int) throws -> Phases {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let store = try ObjectStore.open(at: dir, schema: try Schema(RealPackage.self, RealMaintainer.self))
    var p = Phases()
    let r = try store.context.map(document, with: try realMapping())
    p.parse = r.parseSeconds
    p.map = r.mapSeconds
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
