// The job a Debian mirror does, ObjectGraph next to the usual Swift answer on Linux
// (`JSONDecoder` into `Codable` structs, upserted into SQLite through GRDB), on a generated index
// of the size of Debian bookworm's main/amd64 (63,436 packages, Sources/DebianShape):
//
//  1. first sync: read the document from its file, parse, map, durable commit, into an empty store;
//     ObjectGraph also without maintainers and `Depends` (the packages alone);
//  2. second sync: the document with an overlay applied (as bookworm-security and
//     bookworm-updates are): about 1.5 % of the packages changed, a few hundred new, a few
//     dozen gone, which the sweep removes;
//  3. no-op resync: the second document again;
//  4. reopen and read: open the store in a fresh process, read every attribute of every package;
//  5. the peak resident memory of the first sync's process.
//
//     swift run -c release realjob-comparison [--rounds 7] [--packages 63436] [--out Results]
//
// (`make bench-realjob` from the repository root.) Every measured run is a fresh child process of
// this binary (`--child KIND`), ObjectGraph and the peer alternating, the order swapped every
// round; a round's phases run on that round's two stores, one after the other. Writes
// <out>/realjob.md.

import DebianShape
import Foundation
import GRDB
import ObjectGraph

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}
let packageCount = Int(option("--packages") ?? "63436") ?? 63_436
let rounds = max(1, Int(option("--rounds") ?? "7") ?? 7)
let outDirectory = URL(fileURLWithPath: option("--out") ?? "Results", isDirectory: true)

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}
func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ") ?? "?"
}
/// This process's peak resident set so far, in MiB (`ru_maxrss` is in KiB on Linux).
func peakResidentMiB() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_maxrss) / 1024
}
/// The bytes of the files in `dir`, recursively.
func directoryBytes(_ dir: URL) -> Int {
    guard let e = FileManager.default.enumerator(at: dir, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
    var total = 0
    for case let url as URL in e { total += (try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0) ?? 0 }
    return total
}

func log(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }

/// What a child's store must hold after its phase, and what the phase must have done; passed
/// as `--expect packages,maintainers,links,added,gone`.
struct Expected {
    var packages = 0, maintainers = 0, links = 0, added = 0, gone = 0
    init(_ d: RealDocument) {
        packages = d.packages
        maintainers = d.maintainers
        links = d.links
        added = d.added
        gone = d.gone
    }
    init?(_ text: String) {
        let f = text.split(separator: ",").compactMap { Int($0) }
        guard f.count == 5 else { return nil }
        (packages, maintainers, links, added, gone) = (f[0], f[1], f[2], f[3], f[4])
    }
    var argument: String { "\(packages),\(maintainers),\(links),\(added),\(gone)" }
}

/// Every attribute of a package, read as a value.
struct PackageRow: Decodable {
    var name: String
    var version: String
    var architecture: String
    var section: String
    var priority: String?
    var installedSize: Int64?
    var size: Int64
    var maintainerEmail: String
    var homepage: String?
    var summary: String
    var dependsNames: [String]
    var sha256: String
}

/// A child's figures, printed one `name value` per line and read back by the parent.
typealias Figures = [String: Double]
func emit(_ figures: Figures) {
    for (k, v) in figures.sorted(by: { $0.key < $1.key }) { print("\(k) \(v)") }
}

// MARK: ObjectGraph

/// The sweep limit of every ObjectGraph sync: a tenth of an entity's stored objects. A
/// security overlay removes a few dozen packages; a truncated or misread index would remove
/// most of them, which the sync then refuses rather than sweeping the mirror away.
let sweepLimit = SweepLimit.fraction(0.1)

func openObjectGraph(_ dir: URL, autoCompaction: Bool = true) throws -> ObjectStore {
    // Durability `.always`: every save waits for fdatasync, as `synchronous=FULL` does.
    var options = StoreOptions(durability: .always)
    if !autoCompaction { options.autoCompactionRatio = nil }
    return try ObjectStore.open(at: dir, schema: try Schema(RealPackage.self, RealMaintainer.self), options: options)
}

/// The packages alone: every attribute but the dependency names, no maintainer, no connection.
func packagesOnlyMapping() throws -> EntityMapping<RealPackage> {
    var packages = EntityMapping(RealPackage.self)
    try packages.map(
        "name", "version", "architecture", "section", "priority", "installedSize", "size", "maintainerEmail",
        "homepage", "sha256")
    try packages.map("description", to: "summary")
    try packages.identify(by: "name")
    try packages.useModificationAttribute("version")
    return packages
}

/// One sync of the document at `path` into `store`: read the file, then `sync` over packages
/// and maintainers (or packages alone), whose body maps the document once, and which marks,
/// sweeps and saves durably. The figures: `total`, `read` (the file), the mapping run's `parse`
/// and `map` (packages, their maintainers from the packages' own fields, both connections),
/// `finish` (what the sync does after its body: mark, sweep, the save and whatever follows the
/// save), the peak RSS right after, and the sync's counts.
func objectGraphSync(_ store: ObjectStore, _ path: String, full: Bool) throws -> (Figures, SyncResult) {
    var packages = try realMapping()
    // A package whose version did not change is skipped without being mapped (Docs/Mapping.md,
    // "Modification attribute"); its maintainer, mapped from its own fields, is still found and
    // compared, and its connections are still checked.
    try packages.useModificationAttribute("version")
    if !full { packages = try packagesOnlyMapping() }
    var f: Figures = [:]
    let t0 = now()
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let t1 = now()
    let entities: [any Entity.Type] = full ? [RealPackage.self, RealMaintainer.self] : [RealPackage.self]
    let result = try store.context.sync(entities, sweepLimit: sweepLimit) { sync in
        let r = try sync.map(data, with: packages)
        f["parse"] = r.parseSeconds
        f["map"] = r.mapSeconds
    }
    let t2 = now()
    f["peakMiB"] = peakResidentMiB()
    f["total"] = t2 - t0
    f["read"] = t1 - t0
    f["finish"] = t2 - t1 - (f["parse"] ?? 0) - (f["map"] ?? 0)
    return (f, result)
}

/// Checks the store's packages, maintainers and links (every package's `depends` and
/// `maintainedBy`), after the timing.
func checkObjectGraph(_ store: ObjectStore, _ e: Expected, full: Bool) throws {
    let all = try store.context.fetch(FetchDescriptor<RealPackage>())
    guard all.count == e.packages else { throw BenchError("ObjectGraph: \(all.count) packages, not \(e.packages)") }
    guard full else { return }
    let links = all.reduce(0) { $0 + $1.depends.count }
    let owned = all.reduce(0) { $0 + ($1.maintainedBy == nil ? 0 : 1) }
    let maintainers = try store.context.count(of: RealMaintainer.self)
    guard links == e.links, owned == e.packages, maintainers == e.maintainers else {
        throw BenchError(
            "ObjectGraph: \(links) links (not \(e.links)), \(owned) owned, \(maintainers) maintainers (not \(e.maintainers))"
        )
    }
}

/// One child's ObjectGraph phase on the store in `dir`.
func objectGraphChild(_ kind: String, dir: URL, doc: String?, expected e: Expected) throws -> Figures {
    switch kind {
    case "og-first", "og-first-lite", "og-first-nocompaction":
        guard let doc else { throw BenchError("\(kind) needs --doc") }
        let full = kind != "og-first-lite"
        let store = try openObjectGraph(dir, autoCompaction: kind != "og-first-nocompaction")
        let before = store.stats
        let (synced, result) = try objectGraphSync(store, doc, full: full)
        var f = synced
        let after = store.stats
        // A compaction writes a base segment next to the log: the parent compares the segments
        // after this save with those after the same save with the automatic compaction off.
        f["segmentsBefore"] = Double(before.segments)
        f["journalRecords"] = Double(after.records)
        f["journalSegments"] = Double(after.segments)
        f["journalBytes"] = Double(after.bytesOnDisk)
        if kind == "og-first-nocompaction" {
            // The compaction the default options would have run after that save, timed alone.
            let t = now()
            try store.compact()
            f["compaction"] = now() - t
        }
        let c = result.counts["RealPackage"] ?? SyncCounts()
        guard c.inserted == e.packages else { throw BenchError("\(kind): inserted \(c.inserted)") }
        try checkObjectGraph(store, e, full: full)
        try store.close()
        return f
    case "og-second", "og-resync":
        guard let doc else { throw BenchError("\(kind) needs --doc") }
        let t = now()
        let store = try openObjectGraph(dir)
        let open = now() - t
        let (synced, result) = try objectGraphSync(store, doc, full: true)
        var f = synced
        f["open"] = open
        let c = result.counts["RealPackage"] ?? SyncCounts()
        let m = result.counts["RealMaintainer"] ?? SyncCounts()
        f["inserted"] = Double(c.inserted)
        f["updated"] = Double(c.updated)
        f["swept"] = Double(c.swept)
        f["maintainersSwept"] = Double(m.swept)
        if kind == "og-second" {
            guard c.inserted == e.added, c.swept == e.gone, c.updated >= e.packages / 100 else {
                throw BenchError("og-second: \(c)")
            }
        } else {
            guard c.inserted == 0, c.swept == 0, c.updated == 0, m.inserted == 0, m.swept == 0, m.updated == 0
            else { throw BenchError("og-resync changed something: packages \(c), maintainers \(m)") }
        }
        try checkObjectGraph(store, e, full: true)
        try store.close()
        return f
    case "og-resync-loop":
        // For a profiler: the no-op resync `OBJECTGRAPH_RESYNCS` times (default 20) in this one
        // process, so that the syncs outweigh the open. Prints the median sync's figures.
        guard let doc else { throw BenchError("\(kind) needs --doc") }
        let store = try openObjectGraph(dir)
        let times = Int(ProcessInfo.processInfo.environment["OBJECTGRAPH_RESYNCS"] ?? "") ?? 20
        var runs: [Figures] = []
        for _ in 0..<max(1, times) { runs.append(try objectGraphSync(store, doc, full: true).0) }
        try store.close()
        return runs.sorted { ($0["total"] ?? 0) < ($1["total"] ?? 0) }[runs.count / 2]
    case "og-read":
        // As an application does: open, fetch the packages, read each property.
        let t0 = now()
        let store = try openObjectGraph(dir)
        let t1 = now()
        let packages = try store.context.fetch(FetchDescriptor<RealPackage>())
        var sum = 0
        for p in packages {
            sum &+= p.name.utf8.count &+ p.version.utf8.count &+ p.architecture.utf8.count &+ p.section.utf8.count
            sum &+= (p.priority?.utf8.count ?? 0) &+ Int(p.installedSize ?? 0) &+ Int(p.size)
            sum &+= p.maintainerEmail.utf8.count &+ (p.homepage?.utf8.count ?? 0) &+ p.summary.utf8.count
            sum &+= p.sha256.utf8.count &+ (p.maintainedBy?.name.utf8.count ?? 0)
            for d in p.dependsNames { sum &+= d.utf8.count }
        }
        let t2 = now()
        var f: Figures = ["total": t2 - t0, "open": t1 - t0, "read": t2 - t1, "checksum": Double(sum)]
        f["peakMiB"] = peakResidentMiB()
        try checkObjectGraph(store, e, full: true)
        try store.close()
        return f
    case "og-readvalues":
        // The same read as values, one at a time (`forEach(_:as:_:)`, as the peer walks a row
        // cursor): no instance per package, no array of them. Relationships are not decoded, so
        // the maintainer's name is not read here (the peer's row holds it).
        let t0 = now()
        let store = try openObjectGraph(dir)
        let t1 = now()
        var sum = 0
        try store.context.forEach(FetchDescriptor<RealPackage>(), as: PackageRow.self) { p in
            sum &+= p.name.utf8.count &+ p.version.utf8.count &+ p.architecture.utf8.count &+ p.section.utf8.count
            sum &+= (p.priority?.utf8.count ?? 0) &+ Int(p.installedSize ?? 0) &+ Int(p.size)
            sum &+= p.maintainerEmail.utf8.count &+ (p.homepage?.utf8.count ?? 0) &+ p.summary.utf8.count
            sum &+= p.sha256.utf8.count
            for d in p.dependsNames { sum &+= d.utf8.count }
        }
        let t2 = now()
        var f: Figures = ["total": t2 - t0, "open": t1 - t0, "read": t2 - t1, "checksum": Double(sum)]
        f["peakMiB"] = peakResidentMiB()
        try store.close()
        return f
    case "og-readrows":
        // The same read as rows (`forEachRow(_:columns:_:)`, GRDB's `Row`): each column read
        // where it is stored, with no instance and no `Decoder`.
        let t0 = now()
        let store = try openObjectGraph(dir)
        let t1 = now()
        var sum = 0
        let columns: [PartialKeyPath<RealPackage>] = [
            \.name, \.version, \.architecture, \.section, \.priority, \.installedSize, \.size,
            \.maintainerEmail, \.homepage, \.summary, \.sha256, \.dependsNames,
        ]
        try store.context.forEachRow(FetchDescriptor<RealPackage>(), columns: columns) { row in
            for c in [0, 1, 2, 3, 7, 9, 10] { sum &+= (try row[c] as String).utf8.count }
            sum &+= (try row[4] as String?)?.utf8.count ?? 0
            sum &+= Int(try row[5] as Int64? ?? 0) &+ Int(try row[6] as Int64)
            sum &+= (try row[8] as String?)?.utf8.count ?? 0
            for d in try row[11] as [String] { sum &+= d.utf8.count }
        }
        let t2 = now()
        var f: Figures = ["total": t2 - t0, "open": t1 - t0, "read": t2 - t1, "checksum": Double(sum)]
        f["peakMiB"] = peakResidentMiB()
        try store.close()
        return f
    default:
        throw BenchError("unknown --child \(kind)")
    }
}

// MARK: JSONDecoder + GRDB

/// One flat table keyed by name: the maintainer's name and e-mail and the dependency names (as
/// JSON text) are columns of the package's row.
let peerSchemaSQL = """
    CREATE TABLE IF NOT EXISTS package (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
        version TEXT NOT NULL, architecture TEXT NOT NULL, section TEXT NOT NULL, priority TEXT,
        installedSize INTEGER, size INTEGER NOT NULL, maintainerName TEXT NOT NULL,
        maintainerEmail TEXT NOT NULL, homepage TEXT, summary TEXT NOT NULL, depends TEXT NOT NULL,
        sha256 TEXT NOT NULL)
    """
/// The upsert, which leaves a row whose version did not change alone: the peer's counterpart of
/// ObjectGraph's modification attribute.
let peerUpsertSQL = """
    INSERT INTO package (name, version, architecture, section, priority, installedSize, size, maintainerName,
        maintainerEmail, homepage, summary, depends, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(name) DO UPDATE SET version = excluded.version, architecture = excluded.architecture,
        section = excluded.section, priority = excluded.priority, installedSize = excluded.installedSize,
        size = excluded.size, maintainerName = excluded.maintainerName,
        maintainerEmail = excluded.maintainerEmail, homepage = excluded.homepage, summary = excluded.summary,
        depends = excluded.depends, sha256 = excluded.sha256
        WHERE package.version IS NOT excluded.version
    """
let peerColumns =
    "name, version, architecture, section, priority, installedSize, size, maintainerName, maintainerEmail, "
    + "homepage, summary, depends, sha256"

/// The peer's database in `dir`: WAL, `synchronous=FULL` (set after the open and read back:
/// GRDB sets NORMAL when it turns WAL on), the table created if missing.
func openPeer(_ dir: URL) throws -> DatabaseQueue {
    var config = Configuration()
    config.journalMode = .wal
    let queue = try DatabaseQueue(path: dir.appendingPathComponent("packages.sqlite").path, configuration: config)
    try queue.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else { throw BenchError("synchronous is not FULL") }
        try db.execute(sql: peerSchemaSQL)
    }
    return queue
}

/// One sync: read the file, `JSONDecoder`, then one `BEGIN IMMEDIATE` transaction: every record's
/// name into a temporary table and its upsert (prepared statements), then the rows whose name
/// the payload lacks deleted with `DELETE … WHERE name NOT IN (SELECT name FROM payload_names)`,
/// and the commit.
func peerSync(_ queue: DatabaseQueue, _ path: String) throws -> Figures {
    let t0 = now()
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let t1 = now()
    let records = try JSONDecoder().decode([PackageJSON].self, from: data)
    let t2 = now()
    var written = 0, swept = 0
    try queue.writeWithoutTransaction { db in
        try db.inTransaction(.immediate) {
            try db.execute(sql: "CREATE TEMP TABLE payload_names (name TEXT PRIMARY KEY) WITHOUT ROWID")
            let upsert = try db.makeStatement(sql: peerUpsertSQL)
            let listed = try db.makeStatement(sql: "INSERT OR IGNORE INTO payload_names (name) VALUES (?)")
            let encoder = JSONEncoder()
            for r in records {
                try listed.execute(arguments: [r.name])
                let depends = String(decoding: try encoder.encode(r.depends), as: UTF8.self)
                try upsert.execute(arguments: [
                    r.name, r.version, r.architecture, r.section, r.priority, r.installedSize, r.size, r.maintainerName,
                    r.maintainerEmail, r.homepage, r.description, depends, r.sha256,
                ])
                written += db.changesCount
            }
            try db.execute(sql: "DELETE FROM package WHERE name NOT IN (SELECT name FROM temp.payload_names)")
            swept = db.changesCount
            try db.execute(sql: "DROP TABLE temp.payload_names")
            return .commit
        }
    }
    let t3 = now()
    return [
        "peakMiB": peakResidentMiB(), "total": t3 - t0, "read": t1 - t0, "decode": t2 - t1, "write": t3 - t2,
        "written": Double(written), "swept": Double(swept),
    ]
}

/// Checks the peer's rows, distinct maintainers and the dependency names that name a stored
/// package (each pair once, as ObjectGraph's many-to-many holds them), after the timing.
func checkPeer(_ queue: DatabaseQueue, _ e: Expected) throws {
    let (packages, maintainers, links) = try queue.read { db in
        (
            try Int.fetchOne(db, sql: "SELECT count(*) FROM package") ?? -1,
            try Int.fetchOne(db, sql: "SELECT count(DISTINCT maintainerEmail) FROM package") ?? -1,
            try Int.fetchOne(
                db,
                sql: """
                    SELECT count(*) FROM (SELECT DISTINCT p.id, q.id FROM package p, json_each(p.depends) d
                        JOIN package q ON q.name = d.value WHERE q.id <> p.id)
                    """) ?? -1
        )
    }
    guard packages == e.packages, maintainers == e.maintainers, links == e.links else {
        throw BenchError(
            "GRDB: \(packages) packages (not \(e.packages)), \(maintainers) maintainers (not \(e.maintainers)), "
                + "\(links) links (not \(e.links))")
    }
}

/// One child's peer phase on the database in `dir`.
func peerChild(_ kind: String, dir: URL, doc: String?, expected e: Expected) throws -> Figures {
    switch kind {
    case "grdb-first", "grdb-second", "grdb-resync":
        guard let doc else { throw BenchError("\(kind) needs --doc") }
        let t = now()
        let queue = try openPeer(dir)
        let open = now() - t
        var f = try peerSync(queue, doc)
        f["open"] = open
        let written = Int(f["written"] ?? -1), swept = Int(f["swept"] ?? -1)
        switch kind {
        case "grdb-first":
            guard written == e.packages, swept == 0 else { throw BenchError("\(kind): \(written), \(swept)") }
        case "grdb-second":
            guard written >= e.added + e.packages / 100, swept == e.gone else {
                throw BenchError("\(kind): \(written) written, \(swept) swept")
            }
        default:
            guard written == 0, swept == 0 else { throw BenchError("\(kind): \(written) written, \(swept) swept") }
        }
        try checkPeer(queue, e)
        try queue.close()
        return f
    case "grdb-read":
        // A careful GRDB reader: a row cursor over one prepared SELECT, each column read by its
        // index with `Row.decode` (no per-row dictionary), the dependency names decoded from the
        // column's bytes in place with one reused JSONDecoder.
        let t0 = now()
        var config = Configuration()
        config.journalMode = .wal
        let queue = try DatabaseQueue(path: dir.appendingPathComponent("packages.sqlite").path, configuration: config)
        let t1 = now()
        let decoder = JSONDecoder()
        let sum = try queue.read { db in
            var sum = 0
            let rows = try Row.fetchCursor(db, sql: "SELECT \(peerColumns) FROM package")
            while let row = try rows.next() {
                sum &+= try row.decode(String.self, atIndex: 0).utf8.count
                sum &+= try row.decode(String.self, atIndex: 1).utf8.count
                sum &+= try row.decode(String.self, atIndex: 2).utf8.count
                sum &+= try row.decode(String.self, atIndex: 3).utf8.count
                sum &+= try row.decode(String?.self, atIndex: 4)?.utf8.count ?? 0
                sum &+= Int(try row.decode(Int64?.self, atIndex: 5) ?? 0)
                sum &+= Int(try row.decode(Int64.self, atIndex: 6))
                sum &+= try row.decode(String.self, atIndex: 7).utf8.count
                sum &+= try row.decode(String.self, atIndex: 8).utf8.count
                sum &+= try row.decode(String?.self, atIndex: 9)?.utf8.count ?? 0
                sum &+= try row.decode(String.self, atIndex: 10).utf8.count
                let depends = try row.withUnsafeData(atIndex: 11) { data in
                    try decoder.decode([String].self, from: data ?? Data())
                }
                for d in depends { sum &+= d.utf8.count }
                sum &+= try row.decode(String.self, atIndex: 12).utf8.count
            }
            return sum
        }
        let t2 = now()
        var f: Figures = ["total": t2 - t0, "open": t1 - t0, "read": t2 - t1, "checksum": Double(sum)]
        f["peakMiB"] = peakResidentMiB()
        try checkPeer(queue, e)
        try queue.close()
        return f
    default:
        throw BenchError("unknown --child \(kind)")
    }
}

// MARK: Child

// `--child KIND --dir DIR [--doc FILE] --expect P,M,L,A,G`: one phase in this fresh process, on
// the store or database in DIR; prints its figures.
if let kind = option("--child") {
    guard let dir = option("--dir").map({ URL(fileURLWithPath: $0, isDirectory: true) }),
        let expected = option("--expect").flatMap(Expected.init)
    else {
        log("--child needs --dir and --expect P,M,L,A,G")
        exit(2)
    }
    let figures =
        kind.hasPrefix("og-")
        ? try objectGraphChild(kind, dir: dir, doc: option("--doc"), expected: expected)
        : try peerChild(kind, dir: dir, doc: option("--doc"), expected: expected)
    emit(figures)
    exit(0)
}

// `--write-documents DIR`: writes the two documents a round syncs (main.json and overlay.json) to
// DIR and prints each one's `--expect` argument, so that one phase can be run alone under a
// profiler: `--child og-first --dir STORE --doc DIR/main.json --expect …`.
if let out = option("--write-documents") {
    let dir = URL(fileURLWithPath: out, isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    for (name, document) in [("main", realDocument(packageCount)), ("overlay", overlaidDocument(packageCount))] {
        try document.json.write(to: dir.appendingPathComponent("\(name).json"))
        print("\(name).json --expect \(Expected(document).argument)")
    }
    exit(0)
}

// MARK: Parent

/// Runs one phase in a new process of this binary and reads its figures back.
func runChild(_ kind: String, dir: URL, doc: URL?, expected: Expected) throws -> Figures {
    let child = Process()
    child.executableURL = URL(
        fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments =
        ["--child", kind, "--dir", dir.path, "--expect", expected.argument] + (doc.map { ["--doc", $0.path] } ?? [])
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    guard child.terminationStatus == 0 else { throw BenchError("--child \(kind) failed: \(out)") }
    var f: Figures = [:]
    for line in out.split(separator: "\n") {
        let parts = line.split(separator: " ")
        if parts.count == 2, let v = Double(parts[1]) { f[String(parts[0])] = v }
    }
    guard f["total"] != nil else { throw BenchError("--child \(kind) printed no total: \(out)") }
    return f
}

/// The library's commit, for the report (empty when git is not at hand).
func libraryCommit() -> String {
    let git = Process()
    git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    git.arguments = ["git", "-C", "../..", "rev-parse", "--short", "HEAD"]
    let pipe = Pipe()
    git.standardOutput = pipe
    git.standardError = FileHandle.nullDevice
    guard (try? git.run()) != nil else { return "" }
    git.waitUntilExit()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return out.trimmingCharacters(in: .whitespacesAndNewlines)
}

func isoNow() -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    return f.string(from: Date())
}

let work = FileManager.default.temporaryDirectory.appendingPathComponent("realjob-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)

log("generating the documents (\(packageCount) packages)…")
let mainDocument = realDocument(packageCount)
let overlayDocument = overlaidDocument(packageCount)
let mainURL = work.appendingPathComponent("main.json"), overlayURL = work.appendingPathComponent("overlay.json")
try mainDocument.json.write(to: mainURL)
try overlayDocument.json.write(to: overlayURL)
let mainExpected = Expected(mainDocument), overlayExpected = Expected(overlayDocument)

/// Each kind's figures, one per round.
var runs: [String: [Figures]] = [:]
var storeBytes: [String: [Double]] = [:]
let loadBefore = loadAverage()
for round in 0..<rounds {
    log("round \(round + 1)/\(rounds)  (load average \(loadAverage()))")
    let sides = round % 2 == 0 ? ["og", "grdb"] : ["grdb", "og"]
    let dirs = Dictionary(uniqueKeysWithValues: sides.map { ($0, work.appendingPathComponent("\($0)-\(round)")) })
    for d in dirs.values { try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true) }
    let phases: [(String, URL?, Expected)] = [
        ("first", mainURL, mainExpected), ("second", overlayURL, overlayExpected),
        ("resync", overlayURL, overlayExpected), ("read", nil, overlayExpected),
    ]
    for (phase, doc, expected) in phases {
        for side in sides {
            guard let dir = dirs[side] else { continue }
            runs["\(side)-\(phase)", default: []].append(
                try runChild("\(side)-\(phase)", dir: dir, doc: doc, expected: expected))
            if phase == "first" { storeBytes[side, default: []].append(Double(directoryBytes(dir))) }
        }
        // The same store read again as values, in a fresh process.
        if phase == "read", let dir = dirs["og"] {
            runs["og-readvalues", default: []].append(
                try runChild("og-readvalues", dir: dir, doc: nil, expected: expected))
            runs["og-readrows", default: []].append(
                try runChild("og-readrows", dir: dir, doc: nil, expected: expected))
        }
    }
    for d in dirs.values { try? FileManager.default.removeItem(at: d) }
    // The packages alone, and the first sync with the automatic compaction off (then a compaction
    // asked for), each into a fresh store.
    for kind in ["og-first-lite", "og-first-nocompaction"] {
        let dir = work.appendingPathComponent("\(kind)-\(round)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        runs[kind, default: []].append(try runChild(kind, dir: dir, doc: mainURL, expected: mainExpected))
        try? FileManager.default.removeItem(at: dir)
    }
}
let loadAfter = loadAverage()
try? FileManager.default.removeItem(at: work)

// MARK: Report

@MainActor func values(_ kind: String, _ key: String = "total") -> [Double] {
    (runs[kind] ?? []).map { $0[key] ?? .nan }
}
@MainActor func med(_ kind: String, _ key: String = "total") -> Double { median(values(kind, key)) }
func s3(_ x: Double) -> String { String(format: "%.3f", x) }
func s2(_ x: Double) -> String { String(format: "%.2f", x) }

struct Line {
    var title: String, og: [Double], peer: [Double], target: Double?, unit: String
    var ratios: [Double] { zip(og, peer).map { $0 / $1 } }
    var ratio: Double { median(ratios) }
    var met: String {
        guard let target else { return "—" }
        return ratio <= target ? "**met** (≤ \(s2(target))×)" : "**not met** (≤ \(s2(target))×)"
    }
    func figure(_ x: Double) -> String { unit == "MiB" ? String(format: "%.0f MiB", x) : s3(x) + " s" }
    var row: String {
        "| \(title) | \(figure(median(og))) | \(figure(median(peer))) | **\(s2(ratio))×** (\(ratios.map(s2).joined(separator: ", "))) | \(met) |"
    }
}

let lines = [
    Line(
        title: "first sync (read file, parse, map, durable commit)", og: values("og-first"),
        peer: values("grdb-first"), target: 0.33, unit: "s"),
    Line(
        title: "same, without maintainers and `Depends` (ObjectGraph: packages alone)", og: values("og-first-lite"),
        peer: values("grdb-first"), target: nil, unit: "s"),
    Line(
        title: "second sync with sweep", og: values("og-second"), peer: values("grdb-second"), target: 0.1,
        unit: "s"),
    Line(title: "no-op resync", og: values("og-resync"), peer: values("grdb-resync"), target: nil, unit: "s"),
    Line(
        title: "reopen and read every package (fresh process: open + read)", og: values("og-read"),
        peer: values("grdb-read"), target: 0.5, unit: "s"),
    Line(
        title: "same, read as values one at a time (`forEach(_:as:_:)`, no instances; the maintainer's name not read)",
        og: values("og-readvalues"), peer: values("grdb-read"), target: nil, unit: "s"),
    Line(
        title:
            "same, read as rows (`forEachRow(_:columns:_:)`, no instances, no `Decoder`; the maintainer's name not read)",
        og: values("og-readrows"), peer: values("grdb-read"), target: nil, unit: "s"),
    Line(
        title: "peak resident memory, first sync's process", og: values("og-first", "peakMiB"),
        peer: values("grdb-first", "peakMiB"), target: 1.0, unit: "MiB"),
]

/// The rounds whose measured first sync left more journal segments than the same sync with the
/// automatic compaction off: a compaction (a new base segment) followed the save.
let compactedRounds = zip(values("og-first", "journalSegments"), values("og-first-nocompaction", "journalSegments"))
    .filter { $0 > $1 }.count
let breakdownRows = [
    ("read the file", med("og-first", "read"), med("og-first-nocompaction", "read")),
    ("parse", med("og-first", "parse"), med("og-first-nocompaction", "parse")),
    (
        "map (packages, their maintainers from the packages' own fields, both connections)",
        med("og-first", "map"), med("og-first-nocompaction", "map")
    ),
    (
        "after the body: mark, sweep, durable save (and, by default, the automatic compaction)",
        med("og-first", "finish"), med("og-first-nocompaction", "finish")
    ),
    ("**the sync, in all**", med("og-first"), med("og-first-nocompaction")),
]
let breakdown = breakdownRows.map { "| \($0.0) | \(s3($0.1)) | \(s3($0.2)) |" }.joined(separator: "\n")
let compaction = med("og-first-nocompaction", "compaction")
let secondDetail =
    "ObjectGraph open \(s3(med("og-second", "open"))) s before its timed sync (not counted), "
    + "the peer's open \(s3(med("grdb-second", "open"))) s; ObjectGraph's second sync: parse "
    + "\(s3(med("og-second", "parse"))), map \(s3(med("og-second", "map"))), after the body "
    + "\(s3(med("og-second", "finish"))) s; the peer: decode \(s3(med("grdb-second", "decode"))) s, "
    + "transaction \(s3(med("grdb-second", "write"))) s"
let resyncDetail =
    "ObjectGraph: parse \(s3(med("og-resync", "parse"))), map \(s3(med("og-resync", "map"))), after the body "
    + "\(s3(med("og-resync", "finish"))) s; the peer: decode \(s3(med("grdb-resync", "decode"))) s, "
    + "transaction \(s3(med("grdb-resync", "write"))) s"
let readDetail =
    "ObjectGraph: open \(s3(med("og-read", "open"))) + read \(s3(med("og-read", "read"))) s; the peer: open "
    + "\(s3(med("grdb-read", "open"))) + read \(s3(med("grdb-read", "read"))) s; peak RSS of the reading "
    + "process: ObjectGraph \(String(format: "%.0f", med("og-read", "peakMiB"))) MiB, the peer "
    + "\(String(format: "%.0f", med("grdb-read", "peakMiB"))) MiB"
let firstDetail =
    "the peer: read \(s3(med("grdb-first", "read"))) + decode \(s3(med("grdb-first", "decode"))) + transaction "
    + "and commit \(s3(med("grdb-first", "write"))) s. On disk after the first sync: ObjectGraph "
    + "\(String(format: "%.1f", median(storeBytes["og"] ?? []) / 1_048_576)) MiB, the peer "
    + "\(String(format: "%.1f", median(storeBytes["grdb"] ?? []) / 1_048_576)) MiB (the database and its WAL)"

let mib = Double(1 << 20)
let report = """
    # The real job: a Debian mirror's syncs, ObjectGraph and JSONDecoder + GRDB

    Generated by `make bench-realjob` (`Tools/Benchmarks/Sources/realjob-comparison`) at commit
    \(libraryCommit()), \(isoNow()), release build, \(packageCount) packages, \(rounds) rounds, on the
    project's 2-core VM (shared). Load average before: \(loadBefore); after: \(loadAfter). Each figure is
    the median of the rounds; each measured run is a fresh process; ObjectGraph and the peer
    alternate, the order swapped every round. The ratio is ObjectGraph / peer: the median of the
    rounds' own ratios, each round's in parentheses.

    | phase | ObjectGraph | JSONDecoder + GRDB | ratio ObjectGraph / peer (each round) | target |
    |---|---|---|---|---|
    \(lines.map(\.row).joined(separator: "\n"))

    - First sync: \(firstDetail).
    - Second sync: \(secondDetail).
    - No-op resync: \(resyncDetail).
    - Reopen and read: \(readDetail).
    - The row "without maintainers and `Depends`" compares ObjectGraph's packages alone with the
      peer's full first sync of the same round: the peer's flat table holds the maintainer and the
      dependency names as columns of the package row, so it has no cheaper variant.

    ## The data

    Generated (`Sources/DebianShape`), the shape of Debian's index at bookworm's size: the first
    document, "main", is \(mainDocument.packages) package records (\(String(format: "%.1f", Double(mainDocument.json.count) / mib)) MiB of JSON, one array, in a
    shuffled order; name, version, architecture, section, priority, installedSize, size,
    maintainerName, maintainerEmail, homepage, description, depends, sha256), \(mainDocument.maintainers)
    maintainers, \(mainDocument.links) dependency links to packages of the document (one dependency
    name in twenty names a virtual package nobody lists). The second document is main with an
    overlay applied, as bookworm-security and bookworm-updates apply to bookworm: \(overlayDocument.changed)
    packages (1.5 %) with a new version, size and sha256, \(overlayDocument.added) new packages,
    \(overlayDocument.gone) packages gone (\(overlayDocument.packages) records,
    \(String(format: "%.1f", Double(overlayDocument.json.count) / mib)) MiB, \(overlayDocument.maintainers) maintainers,
    \(overlayDocument.links) links). The no-op resync syncs the second document again. The documents are
    written to files before the rounds; each sync reads its file, and that read is timed.

    ## Configurations

    **ObjectGraph** (`RealPackage`, `RealMaintainer` in `Sources/DebianShape`): an `ObjectStore` with
    durability `.always` (every save waits for `fdatasync`) and the default `StoreOptions` otherwise
    (automatic compaction at 4× the journal's baseline, not below 8 MiB). Every sync is
    `context.sync([RealPackage.self, RealMaintainer.self], sweepLimit: .fraction(0.1))`, whose body
    maps the document once, as Docs/Mapping.md declares it (`realMapping()`): `RealPackage`
    identified by `name`, `version` as its modification attribute (a package whose version did not
    change is skipped, its connections still checked), its maintainer mapped from the package's
    own fields, `map(to: "maintainedBy", with: maintainers)` (RestKit's nil key path: a
    `RealMaintainer` identified by `email`, its name and e-mail from the record's `maintainerName`
    and `maintainerEmail`; a to-one, inverse `packages`; found and compared for a skipped package
    too, so that the sync marks it), and `connect("depends", by: ["dependsNames": "name"])` (a
    many-to-many, inverse `dependents`; the names kept in `dependsNames: [String]`). The sweep
    limit, a tenth of an entity's stored objects, lets a security overlay remove its few dozen
    packages and refuses a truncated index's mass removal. The sync marks, sweeps and saves once
    (one journal record). "Without maintainers and `Depends`": `context.sync([RealPackage.self], …)`
    with one mapping of the package's other attributes, no connection. Reopen and read: a fresh
    process opens the store, fetches every `RealPackage` (`FetchDescriptor`), reads each attribute
    (`dependsNames` included) and its maintainer's `name`, summing their lengths.

    **The peer**: `JSONDecoder` into `[PackageJSON]` (`Codable`), then GRDB 7 on the system SQLite,
    WAL, `synchronous=FULL` (set after the open and read back: GRDB sets NORMAL with WAL), one
    flat table `package(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, version, architecture,
    section, priority, installedSize, size, maintainerName, maintainerEmail, homepage, summary,
    depends, sha256)`, `depends` the list as JSON text (`JSONEncoder`, one encoder reused). Every
    sync, the first included, is one `BEGIN IMMEDIATE` transaction of prepared statements: each
    record's name into `CREATE TEMP TABLE payload_names (name TEXT PRIMARY KEY) WITHOUT ROWID`
    and its `INSERT … ON CONFLICT(name) DO UPDATE SET … WHERE package.version IS NOT excluded.version`
    (the counterpart of the modification attribute: an unchanged row is not rewritten), then
    `DELETE FROM package WHERE name NOT IN (SELECT name FROM temp.payload_names)` (the sweep), then
    the commit. Reopen and read: a fresh process opens the database and walks
    `Row.fetchCursor(db, sql: "SELECT <the 13 columns> FROM package")`, reading each column by
    index with `Row.decode` and the dependency names with a reused `JSONDecoder` from the column's
    bytes (`withUnsafeData`), summing the same lengths.

    **What is timed.** A sync: from reading the document's file to the durable commit, in a fresh
    process on the store of the previous phase (opening the store or database is not counted, and
    is given above). Reopen and read: from the open to the last property read. Peak resident
    memory: the first sync's process's `ru_maxrss`, read right after the timed sync (before the
    checks, which create every object). After the timing, each side checks the packages, the
    distinct maintainers and the dependency links its store holds (ObjectGraph: every package's
    `depends` and `maintainedBy`; the peer: the `json_each` pairs whose name is a stored package),
    and what the sync did (inserted, written, swept), and fails the run if any is wrong.

    ## Where ObjectGraph's first sync goes

    Medians of the \(rounds) rounds, in seconds. Left, the measured first sync (default options; the
    automatic compaction ran after its save in \(compactedRounds) of \(rounds) rounds, judged by the
    journal's segments after the sync: \(String(format: "%.0f", med("og-first", "journalSegments"))), against
    \(String(format: "%.0f", med("og-first-nocompaction", "journalSegments"))) with the compaction off; journal
    \(String(format: "%.1f", med("og-first", "journalBytes") / mib)) MiB). Right, the same first sync in
    another fresh process with `autoCompactionRatio = nil`, so that its "after the body" is the
    mark, sweep and save alone (one journal record of \(String(format: "%.1f", med("og-first-nocompaction", "journalBytes") / mib)) MiB
    on disk); that process then asked for the compaction the default would have run
    (`ObjectStore.compact()`): **\(s3(compaction)) s**. The part after the body: \(s3(med("og-first", "finish"))) s with the
    automatic compaction, \(s3(med("og-first-nocompaction", "finish"))) s without.

    | part | default options | automatic compaction off |
    |---|---|---|
    \(breakdown)
    """
try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
try report.write(to: outDirectory.appendingPathComponent("realjob.md"), atomically: true, encoding: .utf8)
print(report)
