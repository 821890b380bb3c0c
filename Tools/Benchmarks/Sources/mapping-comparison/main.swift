// Mapping a JSON API response into a store, ObjectGraph next to the usual Swift answer on
// Linux: `JSONDecoder` into `Codable` structs, upserted into SQLite through GRDB.
//
//     swift run -c release mapping-comparison [--records 1000000] [--repeats 3] [--out Results]
//         [--headline-only]
//
// (`make bench-mapping` from the repository root.) First the headline: a first run of the
// real shape (Sources/DebianShape: packages, their maintainer connected by e-mail, `depends` by a
// list of names, in a shuffled order) and of the flat people records, into an empty store,
// ObjectGraph and the peer alternating, each run in a fresh process; with `--headline-only`
// nothing else, the section replaced in the existing report. Then the flat records'
// workloads, each run `--repeats` times in a fresh temporary directory, medians reported:
//  (a) first run: one JSON array of N people records (the six attributes of the people
//      workload) mapped into an empty store, then one durable save;
//  (b) re-run: the same document with 10% of the records changed (a greater `score`), mapped
//      into the store of (a) with `score` as the modification attribute, then one durable save;
//  (c) per-record cost of (a) at 10k, 100k and N records, each run in a fresh process;
//  (d) `Codable` values upserted with `ModelContext.upsert(_:as:)` against a hand-written loop
//      of `insert` and typed sets, in memory.
// Writes <out>/mapping.md.

import DebianShape
import Foundation
import GRDB
import ObjectGraph
import PeopleWorkload

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}
let records = Int(option("--records") ?? "1000000") ?? 1_000_000
let repeats = max(1, Int(option("--repeats") ?? "3") ?? 3)
let outDirectory = URL(fileURLWithPath: option("--out") ?? "Results", isDirectory: true)

// MARK: The documents

/// One record as the API sends it, and as the peer decodes it.
struct PersonRecord: Codable, Sendable {
    var id: Int64
    var name: String
    var email: String
    var age: Int
    var city: String
    var score: Double
}

func record(_ i: Int, generation: Int) -> PersonRecord {
    let s = PersonSource(i, generation: generation)
    return PersonRecord(id: s.id, name: s.name, email: s.email, age: s.age, city: s.city, score: s.score)
}

/// The document of `n` records; with `changedEvery`, every such record is of generation 1;
/// `shuffled`: in a random order instead of the order of their IDs.
func document(_ n: Int, changedEvery: Int? = nil, shuffled: Bool = false) -> Data {
    var text = "["
    text.reserveCapacity(n * 110)
    var order = Array(0..<n)
    if shuffled {
        var rng = SplitMix(seed: 42)
        order.shuffle(using: &rng)
    }
    for (k, i) in order.enumerated() {
        let r = record(i, generation: changedEvery.map { i % $0 == 0 ? 1 : 0 } ?? 0)
        if k > 0 { text += "," }
        text +=
            #"{"id":\#(r.id),"name":"\#(r.name)","email":"\#(r.email)","age":\#(r.age),"city":"\#(r.city)","score":\#(r.score)}"#
    }
    text += "]"
    return Data(text.utf8)
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.isEmpty ? .nan : s[s.count / 2]
}
func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("mapping-bench-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ") ?? "?"
}

// MARK: ObjectGraph

func peopleMapping() throws -> EntityMapping<UniquePerson> {
    var m = EntityMapping(UniquePerson.self)
    try m.map("id", "name", "email", "age", "city", "score")
    return m
}

struct Phases {
    var parse = 0.0, map = 0.0, save = 0.0
    /// The page faults and the system CPU seconds of parse + map (from `getrusage`).
    var faults = 0, systemSeconds = 0.0
    var total: Double { parse + map + save }
}

/// This process's minor page faults and system CPU seconds so far.
func faultsAndSystemTime() -> (Int, Double) {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return (u.ru_minflt, Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6)
}

/// Maps `document` into `store` and saves: the three phases, and the run's result.
func mapAndSave(
    _ store: ObjectStore, _ document: Data, _ mapping: EntityMapping<UniquePerson>
) throws -> (Phases, MappingResult<UniquePerson>) {
    var p = Phases()
    let (faults, system) = faultsAndSystemTime()
    let r = try store.context.map(document, with: mapping)
    let (faultsAfter, systemAfter) = faultsAndSystemTime()
    p.parse = r.parseSeconds
    p.map = r.mapSeconds
    p.faults = faultsAfter - faults
    p.systemSeconds = systemAfter - system
    let t = now()
    try store.context.save()
    p.save = now() - t
    return (p, r)
}

/// (a) then, if given, (b) on the same store.
func objectGraphRun(_ first: Data, _ second: Data?) throws -> (Phases, Phases?) {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let store = try ObjectStore.open(at: dir, schema: Importing.schema())
    // A daemon that re-maps large documents keeps the parser's buffers for the next one.
    store.context.keepsJSONBuffers = true
    var mapping = try peopleMapping()
    let (a, r) = try mapAndSave(store, first, mapping)
    guard r.counts.inserted == records || first.count < 2_000_000 else {
        throw BenchError("inserted \(r.counts.inserted)")
    }
    guard let second else { try store.close(); return (a, nil) }
    try mapping.useModificationAttribute("score")
    let b = try measuredRerun(store, second, mapping)
    try store.close()
    return (a, b)
}

/// The re-run of `objectGraphRun`, a function of its own so that a profiler can attribute it
/// alone (`perf report --parent=measuredRerun -x`).
@inline(never)
func measuredRerun(_ store: ObjectStore, _ second: Data, _ mapping: EntityMapping<UniquePerson>) throws -> Phases {
    let (b, r2) = try mapAndSave(store, second, mapping)
    let expected = (r2.sourceCount + 9) / 10
    guard r2.counts.updated == expected else {
        throw BenchError("updated \(r2.counts.updated), skipped \(r2.counts.skippedUnmodified)")
    }
    return b
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

// MARK: JSONDecoder + GRDB

let createSQL = """
    CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
        age INTEGER NOT NULL, city TEXT NOT NULL, score REAL NOT NULL)
    """
/// The peer's modification attribute: the update applies only when the score is greater.
let upsertSQL = """
    INSERT INTO people (id, name, email, age, city, score) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT(id) DO UPDATE SET name = excluded.name, email = excluded.email,
        age = excluded.age, city = excluded.city, score = excluded.score
        WHERE excluded.score > people.score
    """

/// The peer's database in `dir`: WAL, `synchronous=FULL` (set after the open and read back:
/// GRDB sets NORMAL when it turns WAL on), the people table created.
func openPeer(_ dir: URL) throws -> DatabaseQueue {
    var config = Configuration()
    config.journalMode = .wal
    let queue = try DatabaseQueue(path: dir.appendingPathComponent("people.sqlite").path, configuration: config)
    try queue.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else { throw BenchError("synchronous is not FULL") }
        try db.execute(sql: createSQL)
    }
    return queue
}

func sqliteRun(_ first: Data, _ second: Data?) throws -> (Phases, Phases?) {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let queue = try openPeer(dir)
    func load(_ data: Data) throws -> Phases {
        var p = Phases()
        var t = now()
        let people = try JSONDecoder().decode([PersonRecord].self, from: data)
        p.parse = now() - t
        t = now()
        try queue.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                let statement = try db.makeStatement(sql: upsertSQL)
                for r in people {
                    try statement.execute(arguments: [r.id, r.name, r.email, r.age, r.city, r.score])
                }
                return .commit
            }
        }
        p.map = now() - t
        return p
    }
    let a = try load(first)
    let b = try second.map(load)
    return (a, b)
}

// MARK: Codable values

func codableRun(_ n: Int) throws -> (codable: Double, typed: Double) {
    let values = (0..<n).map { record($0, generation: 0) }
    let c1 = ModelContext(schema: Importing.schema())
    var t = now()
    _ = try c1.upsert(values, as: UniquePerson.self)
    let codable = now() - t
    let c2 = ModelContext(schema: Importing.schema())
    t = now()
    for v in values {
        let p = try c2.insert(UniquePerson.self)
        p.id = v.id
        p.name = v.name
        p.email = v.email
        p.age = v.age
        p.city = v.city
        p.score = v.score
    }
    let typed = now() - t
    guard try c1.count(of: UniquePerson.self) == n, try c2.count(of: UniquePerson.self) == n else {
        throw BenchError("codable counts")
    }
    return (codable, typed)
}

/// Seconds per value of `upsert(structValue:as:)`, which reads each struct with `Mirror`.
func mirrorRun(_ n: Int) throws -> Double {
    let values = (0..<n).map { record($0, generation: 0) }
    let context = ModelContext(schema: Importing.schema())
    let t = now()
    for v in values { try context.upsert(structValue: v, as: UniquePerson.self) }
    let elapsed = now() - t
    guard try context.count(of: UniquePerson.self) == n else { throw BenchError("mirror count") }
    return elapsed / Double(n)
}

// MARK: A sync

/// The people record with a tombstone flag, for the sync benchmark.
@Entity
final class SyncedPerson {
    @Attribute(.unique) var id: Int64 = 0
    var name: String = ""
    var email: String = ""
    var age: Int = 0
    var city: String = ""
    var score: Double = 0
    var isDeleted: Bool = false
}

/// A sync payload as the peer decodes it: a tombstone has only `id` and `deleted`.
struct SyncRecord: Codable {
    var id: Int64
    var name: String?
    var email: String?
    var age: Int?
    var city: String?
    var score: Double?
    var deleted: Bool?
}

/// The payload over `n` stored records: every tenth changed, one in a hundred missing (to be
/// swept), one in a hundred a tombstone, and n/100 new records at the end.
func syncPayload(_ n: Int) -> Data {
    var text = "["
    text.reserveCapacity(n * 110)
    var first = true
    func add(_ s: String) {
        if !first { text += "," }
        first = false
        text += s
    }
    for i in 0..<(n + n / 100) {
        if i < n && i % 100 == 50 { continue }
        if i < n && i % 100 == 99 {
            add(#"{"id":\#(i),"deleted":true}"#)
            continue
        }
        let r = record(i, generation: i % 10 == 0 ? 1 : 0)
        add(
            #"{"id":\#(r.id),"name":"\#(r.name)","email":"\#(r.email)","age":\#(r.age),"city":"\#(r.city)","score":\#(r.score)}"#
        )
    }
    text += "]"
    return Data(text.utf8)
}

/// ObjectGraph: the whole sync (parse, map, mark, sweep, durable save), on a store of n.
func objectGraphSync(_ initial: Data, _ payload: Data, n: Int) throws -> Double {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let store = try ObjectStore.open(at: dir, schema: try Schema(SyncedPerson.self))
    store.context.keepsJSONBuffers = true  // as the re-run: the sync parses into the kept buffers
    var mapping = EntityMapping(SyncedPerson.self)
    try mapping.map("id", "name", "email", "age", "city", "score")
    try mapping.map("deleted", to: "isDeleted")
    try store.context.map(initial, with: mapping)
    try store.context.save()
    try mapping.useModificationAttribute("score")
    mapping.deletionPredicate = #Predicate { $0.isDeleted }
    let t = now()
    let result = try store.context.sync([SyncedPerson.self]) { sync in
        try sync.map(payload, with: mapping)
    }
    let elapsed = now() - t
    let c = result.counts["SyncedPerson"] ?? SyncCounts()
    // Every tenth record changed, except those among the missing ones (i % 100 == 50).
    guard c.swept == n / 100, c.tombstoned == n / 100, c.inserted == n / 100, c.updated == n / 10 - n / 100 else {
        throw BenchError("sync counts: \(c)")
    }
    try store.close()
    return elapsed
}

/// JSONDecoder + GRDB: upsert every record, delete the tombstones, then delete what the payload
/// does not list through a temporary table of its IDs, in one transaction.
func sqliteSync(_ initial: Data, _ payload: Data) throws -> Double {
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let queue = try openPeer(dir)
    try queue.writeWithoutTransaction { db in
        let people = try JSONDecoder().decode([PersonRecord].self, from: initial)
        try db.inTransaction(.immediate) {
            let statement = try db.makeStatement(sql: upsertSQL)
            for r in people { try statement.execute(arguments: [r.id, r.name, r.email, r.age, r.city, r.score]) }
            return .commit
        }
    }
    let t = now()
    let records = try JSONDecoder().decode([SyncRecord].self, from: payload)
    try queue.writeWithoutTransaction { db in
        try db.inTransaction(.immediate) {
            try db.execute(sql: "CREATE TEMP TABLE payload_ids (id INTEGER PRIMARY KEY)")
            let upsert = try db.makeStatement(sql: upsertSQL)
            let delete = try db.makeStatement(sql: "DELETE FROM people WHERE id = ?")
            let listed = try db.makeStatement(sql: "INSERT INTO payload_ids (id) VALUES (?)")
            for r in records {
                try listed.execute(arguments: [r.id])
                if r.deleted == true {
                    try delete.execute(arguments: [r.id])
                } else {
                    try upsert.execute(arguments: [r.id, r.name, r.email, r.age, r.city, r.score])
                }
            }
            try db.execute(sql: "DELETE FROM people WHERE id NOT IN (SELECT id FROM payload_ids)")
            try db.execute(sql: "DROP TABLE payload_ids")
            return .commit
        }
    }
    return now() - t
}

// MARK: Run

// `--headline-child KIND --doc FILE`: one first run of the document in FILE in this fresh
// process, KIND one of og-real, grdb-real, og-flat, grdb-flat (the real shape also takes
// `--maintainers` and `--links`, what the mapping must produce). Prints the seconds of parse,
// map (the peer: its transaction and commit) and save.
if let kind = option("--headline-child"), let path = option("--doc") {
    let doc = try Data(contentsOf: URL(fileURLWithPath: path))
    let expectedMaintainers = Int(option("--maintainers") ?? "0") ?? 0
    let links = Int(option("--links") ?? "0") ?? 0
    let p: Phases
    switch kind {
    case "og-real":
        p = try objectGraphRealRun(doc, n: records, maintainers: expectedMaintainers, links: links)
    case "grdb-real": p = try sqliteRealRun(doc, n: records, maintainers: expectedMaintainers, links: links)
    case "og-flat": p = try objectGraphRun(doc, nil).0
    case "grdb-flat": p = try sqliteRun(doc, nil).0
    default: throw BenchError("unknown --headline-child \(kind)")
    }
    print(String(format: "%.6f %.6f %.6f", p.parse, p.map, p.save))
    exit(0)
}

// `--profile-real N`: only ObjectGraph's first run of the real shape (`--records` packages), N
// times, the parse, the map and the save apart, for perf and callgrind.
if let rounds = option("--profile-real").flatMap(Int.init) {
    let doc = realDocument(records)
    for _ in 0..<rounds {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ObjectStore.open(at: dir, schema: try Schema(RealPackage.self, RealMaintainer.self))
        let r = try store.context.map(doc.json, with: try realMapping())
        let t = now()
        try store.context.save()
        let save = now() - t
        let t2 = now()
        try store.close()
        print(
            String(
                format: "parse %.3f map %.3f  save %.3f  close %.3f", r.parseSeconds, r.mapSeconds, save,
                now() - t2))
    }
    exit(0)
}

// `--profile N`: only ObjectGraph's first run and re-run, N times, for perf and callgrind;
// with `--shuffled`, the re-run's records in a random order.
if let rounds = option("--profile").flatMap(Int.init) {
    let doc = document(records)
    let changed = document(records, changedEvery: 10, shuffled: arguments.contains("--shuffled"))
    for _ in 0..<rounds {
        let (a, b) = try objectGraphRun(doc, changed)
        print(
            String(
                format: "first: parse %.3f  map %.3f  save %.3f   re-run: parse %.3f  map %.3f  save %.3f",
                a.parse, a.map, a.save, b?.parse ?? 0, b?.map ?? 0, b?.save ?? 0))
    }
    exit(0)
}

// `--first-run`: one first run (parse, map, save) of `--records` records, the measurement of
// the per-record scaling; `firstRunInFreshProcess` starts this binary with it once per size and
// round. With `--warm-up N`, N records are mapped into another store first, in the same process.
// Prints the seconds of the three phases, then the page faults and system seconds of parse + map.
if arguments.contains("--first-run") {
    if let n = option("--warm-up").flatMap(Int.init), n > 0 { _ = try objectGraphRun(document(n), nil) }
    let doc = document(records)
    let (a, _) = try objectGraphRun(doc, nil)
    print(String(format: "%.6f %.6f %.6f %d %.3f", a.parse, a.map, a.save, a.faults, a.systemSeconds))
    exit(0)
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

// `--profile-codable N`: only the Codable upsert and its hand-written loop, N times.
if let rounds = option("--profile-codable").flatMap(Int.init) {
    for _ in 0..<rounds {
        let (c, t) = try codableRun(records)
        print(String(format: "codable %.3f s  typed %.3f s  %.2fx", c, t, c / t))
    }
    exit(0)
}

// `--profile-sync N`: only ObjectGraph's sync, N times.
if let rounds = option("--profile-sync").flatMap(Int.init) {
    let initial = document(records)
    let payload = syncPayload(records)
    for _ in 0..<rounds { print(String(format: "sync %.3f s", try objectGraphSync(initial, payload, n: records))) }
    exit(0)
}

/// The first run of `n` records in a new process of this binary (`--first-run`), after a warm-up
/// of `warmUp` records in that process.
func firstRunInFreshProcess(_ n: Int, warmUp: Int) throws -> Phases {
    let child = Process()
    child.executableURL = URL(
        fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments = ["--first-run", "--records", "\(n)", "--warm-up", "\(warmUp)"]
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    let f = out.split(whereSeparator: \.isWhitespace)
    guard child.terminationStatus == 0, f.count == 5, let parse = Double(f[0]), let map = Double(f[1]),
        let save = Double(f[2]),
        let faults = Int(f[3]), let system = Double(f[4])
    else { throw BenchError("--first-run \(n): \(out)") }
    return Phases(parse: parse, map: map, save: save, faults: faults, systemSeconds: system)
}

/// One first run of `kind` in a new process of this binary (`--headline-child`).
func headlineRunInFreshProcess(_ kind: String, doc: URL, extra: [String]) throws -> Phases {
    let child = Process()
    child.executableURL = URL(
        fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    child.arguments = ["--headline-child", kind, "--doc", doc.path, "--records", "\(records)"] + extra
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    let f = out.split(whereSeparator: \.isWhitespace)
    guard child.terminationStatus == 0, f.count == 3, let parse = Double(f[0]), let map = Double(f[1]),
        let save = Double(f[2])
    else { throw BenchError("--headline-child \(kind): \(out)") }
    return Phases(parse: parse, map: map, save: save)
}

/// The headline table: first runs of the real shape and of the flat records, ObjectGraph and
/// the peer alternating, each run in a fresh process (the documents written to files first,
/// reading them not timed); the order of the two stores swaps every round. Returns the
/// report's section.
func headlineSection() throws -> String {
    let rounds = max(repeats, 3)
    let dir = temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    FileHandle.standardError.write(Data("headline: generating documents (\(records) records)…\n".utf8))
    let real = realDocument(records)
    let realURL = dir.appendingPathComponent("real.json"), flatURL = dir.appendingPathComponent("flat.json")
    try real.json.write(to: realURL)
    let flatBytes = document(records)
    try flatBytes.write(to: flatURL)
    let realExtra = ["--maintainers", "\(real.maintainers)", "--links", "\(real.links)"]
    let before = loadAverage()
    var runs: [String: [Phases]] = [:]
    for round in 0..<rounds {
        FileHandle.standardError.write(Data("headline round \(round + 1)/\(rounds)\n".utf8))
        let stores = round % 2 == 0 ? ["og", "grdb"] : ["grdb", "og"]
        for shape in ["real", "flat"] {
            for store in stores {
                let kind = "\(store)-\(shape)"
                runs[kind, default: []].append(
                    try headlineRunInFreshProcess(
                        kind, doc: shape == "real" ? realURL : flatURL, extra: shape == "real" ? realExtra : []))
            }
        }
    }
    let after = loadAverage()
    func f(_ x: Double) -> String { String(format: "%.3f", x) }
    func line(_ title: String, _ shape: String) -> String {
        let o = runs["og-\(shape)"] ?? [], g = runs["grdb-\(shape)"] ?? []
        let ratios = zip(o, g).map { $1.total / $0.total }
        return "| \(title) | \(f(m(\.parse, o))) + \(f(m(\.map, o))) + \(f(m(\.save, o))) = **\(f(m(\.total, o)))** | "
            + "\(f(m(\.parse, g))) + \(f(m(\.map, g))) = **\(f(m(\.total, g)))** | "
            + "**\(String(format: "%.1f", median(ratios)))×** (\(ratios.map { String(format: "%.1f", $0) }.joined(separator: ", "))) |"
    }
    return """
        <!-- headline -->
        ## First run into an empty store: the real shape, and flat records

        Measured by `make bench-mapping` at commit \(libraryCommit()), \(isoNow()), release build, \(records)
        records of each shape, \(rounds) rounds; each run in a fresh process, ObjectGraph and the peer
        alternating (the order swapped every round), medians in seconds. Load average before: \(before);
        after: \(after).

        | document | ObjectGraph: parse + map + save | JSONDecoder + GRDB: decode + write & commit | peer / ObjectGraph, median of the rounds' ratios (each round) |
        |---|---|---|---|
        \(line("**real shape**: packages, a maintainer by e-mail, `depends` by names (\(real.json.count / 1_000_000) MB)", "real"))
        \(line("flat people records, in ID order (\(flatBytes.count / 1_000_000) MB)", "flat"))

        **The real shape.** \(records) Debian-like package records in a shuffled order (about
        \(real.json.count / records) bytes each, the field sizes of the bundled fixture: name, version,
        architecture, section, priority, installedSize, size, maintainerName, maintainerEmail,
        homepage, description, depends, sha256); \(real.maintainers) maintainers, \(real.links)
        dependency links to packages of the document (one dependency name in twenty names a package it
        does not list). ObjectGraph (`Sources/DebianShape`, `Sources/mapping-comparison/RealShape.swift`): one
        run of one `EntityMapping` over the document, as Docs/Mapping.md declares it: `RealPackage`
        identified by `name`, its maintainer mapped from the package's own fields,
        `map(to: "maintainedBy", with: maintainers)` (a `RealMaintainer` identified by `email`,
        named by `maintainerName`; a to-one, its inverse `packages`), and
        `connect("depends", by: ["dependsNames": "name"])` (a many-to-many, its inverse
        `dependents`); an `ObjectStore` with durability `.always` (fsync per save), one
        save. The peer: `JSONDecoder` into `Codable` structs, then one `BEGIN IMMEDIATE`
        transaction of prepared statements: `INSERT INTO maintainer … ON CONFLICT(email) DO UPDATE …
        RETURNING id` the first time the run meets an e-mail (the IDs kept in a dictionary), `INSERT INTO
        package … ON CONFLICT(name) DO UPDATE … RETURNING id` per record, then one `INSERT OR IGNORE
        INTO depends (package, dependency)` per dependency name found in the dictionary of package IDs
        (a `WITHOUT ROWID` join table keyed by the pair, an index on `dependency` for the inverse, an
        index on `package.maintainerId` for a maintainer's packages); WAL, `synchronous=FULL`, the
        durability ObjectGraph's `.always` has (the commit is fsynced). The peer does not store the
        dependency names (ObjectGraph keeps `dependsNames`, which the connection reads). Both runs
        check their counts and links after the timing.

        **The flat records** are the people records of the tables below, mapped as described there.
        <!-- /headline -->
        """
}

func isoNow() -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    return f.string(from: Date())
}

// `--headline-only`: the headline section alone, spliced into the existing report (the other
// sections keep the figures and the commit of the run that wrote them).
if arguments.contains("--headline-only") {
    let section = try headlineSection()
    let url = outDirectory.appendingPathComponent("mapping.md")
    var text = (try? String(contentsOf: url, encoding: .utf8)) ?? "# Mapping JSON into a store\n"
    if let start = text.range(of: "<!-- headline -->"), let end = text.range(of: "<!-- /headline -->") {
        text.replaceSubrange(start.lowerBound..<end.upperBound, with: section)
    } else if let firstLine = text.firstIndex(of: "\n") {
        text.insert(contentsOf: "\n" + section + "\n", at: text.index(after: firstLine))
    }
    try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
    try text.write(to: url, atomically: true, encoding: .utf8)
    print(section)
    exit(0)
}

let headline = try headlineSection()

let loadBefore = loadAverage()

// (c) first, while this process holds no documents: each size in a fresh process, the sizes one
// after the other in each round, so that each round measures them under the same conditions.
// Each process first maps 100 records into a scratch store, which pays the process's one-time
// costs (code pages, lazy binding, type metadata) without handing its freed memory to the
// measured run: every size then pays the page faults of its own fresh memory, as 1M must.
let scalingSizes = Set([10_000, 100_000, records].filter { $0 <= records }).sorted()
let scalingRounds = max(repeats, 5)
let scalingWarmUp = 100
let scaling = try { () throws -> [Int: [Phases]] in
    var runs: [Int: [Phases]] = [:]
    for round in 0..<scalingRounds {
        FileHandle.standardError.write(Data("per-record scaling, round \(round + 1)/\(scalingRounds)\n".utf8))
        for n in scalingSizes { runs[n, default: []].append(try firstRunInFreshProcess(n, warmUp: scalingWarmUp)) }
    }
    return runs
}()

FileHandle.standardError.write(Data("generating documents (\(records) records)…\n".utf8))
let first = document(records)
let second = document(records, changedEvery: 10)
let shuffledSecond = document(records, changedEvery: 10, shuffled: true)

var og: [(Phases, Phases)] = []
var sql: [(Phases, Phases)] = []
var ogShuffled: [Phases] = []
var codable: [(Double, Double)] = []
var mirror: [Double] = []
var ogSync: [Double] = []
var sqlSync: [Double] = []
let payload = syncPayload(records)
for round in 0..<repeats {
    FileHandle.standardError.write(Data("round \(round + 1)/\(repeats)\n".utf8))
    let (a, b) = try objectGraphRun(first, second)
    og.append((a, b ?? Phases()))
    let (c, d) = try sqliteRun(first, second)
    sql.append((c, d ?? Phases()))
    ogShuffled.append(try objectGraphRun(first, shuffledSecond).1 ?? Phases())
    codable.append(try codableRun(records))
    mirror.append(try mirrorRun(100_000))
    ogSync.append(try objectGraphSync(first, payload, n: records))
    sqlSync.append(try sqliteSync(first, payload))
}
let loadAfter = loadAverage()

func m(_ f: (Phases) -> Double, _ xs: [Phases]) -> Double { median(xs.map(f)) }
let ogA = og.map(\.0), ogB = og.map(\.1), sqA = sql.map(\.0), sqB = sql.map(\.1)
func row(_ title: String, _ o: [Phases], _ s: [Phases]) -> String {
    let ot = m(\.total, o), st = m(\.total, s)
    return
        "| \(title) | \(String(format: "%.3f", m(\.parse, o))) + \(String(format: "%.3f", m(\.map, o))) + \(String(format: "%.3f", m(\.save, o))) = **\(String(format: "%.3f", ot))** | "
        + "\(String(format: "%.3f", m(\.parse, s))) + \(String(format: "%.3f", m(\.map, s))) = **\(String(format: "%.3f", st))** | **\(String(format: "%.1f", st / ot))×** |"
}
let parseMap = { (p: Phases) in p.parse + p.map }
/// Microseconds per record of `f` at `n` records (median over the rounds).
func perRecord(_ n: Int, _ f: (Phases) -> Double) -> Double { m(f, scaling[n] ?? []) / Double(n) * 1e6 }
/// The median over the rounds of the per-round ratio of `f` per record at `records` to at 10k.
func roundRatio(_ f: (Phases) -> Double) -> Double {
    guard let small = scaling[10_000], let large = scaling[records] else { return .nan }
    return median(zip(small, large).map { f($1) / Double(records) / (f($0) / 10_000) })
}
let smallPM = perRecord(10_000, parseMap), largePM = perRecord(records, parseMap)
let smallTotal = perRecord(10_000, \.total), largeTotal = perRecord(records, \.total)
let scalingLine = scalingSizes.map { n in
    "\(n >= 1_000_000 ? "\(n / 1_000_000)M" : "\(n / 1000)k") \(String(format: "%.3f", perRecord(n, parseMap)))"
}.joined(separator: ", ")
let faultsLine = scalingSizes.map { n in String(format: "%.3f", m({ Double($0.faults) }, scaling[n] ?? []) / Double(n))
}.joined(separator: ", ")
let scalingRatio =
    "per-record cost, parse + map, \(scalingLine) µs: \(String(format: "%.2f", largePM / smallPM))× (10k → \(records))"
let codableMedian = median(codable.map(\.0)), typedMedian = median(codable.map(\.1))

let report = """
    # Mapping JSON into a store: ObjectGraph and JSONDecoder + GRDB

    \(headline)

    ## The flat records: first run, re-run, scaling, a sync

    Generated by `make bench-mapping` (`Tools/Benchmarks/Sources/mapping-comparison`) at commit \(libraryCommit()),
    release build, \(records) records, \(repeats) rounds, medians in seconds, on the project's 2-core VM.
    Load average before: \(loadBefore); after: \(loadAfter).

    **Configurations.** The document is one JSON array of \(records) people records (\(first.count / 1_000_000) MB;
    `id`, `name`, `email`, `age`, `city`, `score`). ObjectGraph: `EntityMapping(UniquePerson.self)` mapping the six
    keys, identification inferred (`id`, a unique attribute), an `ObjectStore` with durability `.always` (fsync
    per save), one save. The peer: `JSONDecoder` into a `Codable` struct array, then one `BEGIN IMMEDIATE`
    transaction of a prepared `INSERT … ON CONFLICT(id) DO UPDATE … WHERE excluded.score > people.score` per record
    into `people(id INTEGER PRIMARY KEY, …)`, SQLite in WAL mode with `synchronous=FULL`, through GRDB. Both
    start from an empty directory; the re-run maps the same document with every tenth record's `score` raised,
    ObjectGraph with `score` as the modification attribute, the peer with the `WHERE` clause above.

    | run | ObjectGraph: parse + map + save | JSONDecoder + GRDB: decode + upsert & commit | peer / ObjectGraph |
    |---|---|---|---|
    \(row("first run into an empty store", ogA, sqA))
    \(row("re-run, 10% changed", ogB, sqB))

    - Re-run / first run, ObjectGraph: **\(String(format: "%.2f", m(\.total, ogB) / m(\.total, ogA)))×**. The document lists
      the records in the order they were stored, as an API with a stable order does; identification then finds
      each object at the row after the last one (a check of that row before the index probe). The same re-run
      with the records shuffled: \(String(format: "%.3f", m(\.parse, ogShuffled))) + \(String(format: "%.3f", m(\.map, ogShuffled))) + \(String(format: "%.3f", m(\.save, ogShuffled))) = \(String(format: "%.3f", m(\.total, ogShuffled))) s,
      **\(String(format: "%.2f", m(\.total, ogShuffled) / m(\.total, ogA)))×** the first run.
    - Per-record cost of the first run, parse + map, each size in a fresh process (\(scalingRounds) rounds, the
      sizes one after the other in each round, medians; each process maps \(scalingWarmUp) records into a scratch store
      first, so that its one-time costs are not charged to the small run, without lending it memory):
      \(scalingLine) µs: **\(String(format: "%.2f", largePM / smallPM))×** from 10k to \(records)
      (median of the rounds' own ratios: \(String(format: "%.2f", roundRatio(parseMap)))×). Page faults per record:
      \(faultsLine). With the save: \(String(format: "%.2f", smallTotal)) and \(String(format: "%.2f", largeTotal)) µs,
      **\(String(format: "%.2f", largeTotal / smallTotal))×** (at 1M the store's automatic compaction runs after the first
      save, rewriting the journal as a base; at 10k the journal is below its 8 MiB threshold).
    - `Codable` values, in memory: `upsert(_:as:)` of \(records) `PersonRecord`s \(String(format: "%.3f", codableMedian)) s,
      a hand-written loop of `insert` and six typed sets \(String(format: "%.3f", typedMedian)) s:
      **\(String(format: "%.2f", codableMedian / typedMedian))×**.
    - A struct read with `Mirror` (`upsert(structValue:as:)`, one call per value, 100k values):
      **\(String(format: "%.2f", median(mirror) * 1e6)) µs per value**.

    **A sync** over the \(records) stored records: a payload in which every tenth record changed, one in a
    hundred is missing (swept), one in a hundred is a tombstone (`{"id": …, "deleted": true}`) and \(records / 100) are new.
    ObjectGraph: `sync` with the mapping above, `score` as the modification attribute and a deletion predicate on
    `isDeleted` (parse, map, mark, sweep and durable save): **\(String(format: "%.3f", median(ogSync))) s**. The peer:
    `JSONDecoder`, then in one transaction the upsert above for each record, a `DELETE` by id for each tombstone,
    every listed id into a temporary table and `DELETE FROM people WHERE id NOT IN (SELECT id FROM payload_ids)`:
    **\(String(format: "%.3f", median(sqlSync))) s**, **\(String(format: "%.1f", median(sqlSync) / median(ogSync)))×** ObjectGraph's time.
    """
try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
try report.write(to: outDirectory.appendingPathComponent("mapping.md"), atomically: true, encoding: .utf8)
print(report)
print("")
print(scalingRatio)
