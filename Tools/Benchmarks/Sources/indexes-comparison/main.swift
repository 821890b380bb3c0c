// Secondary indexes (`#Index`) against SQLite's `CREATE INDEX` (GRDB), release build:
//
//     swift run -c release indexes-comparison [--count 1000000] [--rounds 5] [--out Results]
//
// (`make bench-indexes` from the repository root.) Every measurement runs in a fresh process
// of this binary (`--worker <name>`); a round runs each worker once, and the report gives the
// median over the rounds.
//
// The record: id, name "Person i", email "p<i>@example.com", age 20 + i % 60,
// section "Section <i % 100>" (1% of the objects each), rank (i * 7919) % N (a permutation:
// a 1% range is 1% of the objects, scattered), score i * 0.5.
//
//  (a) equality: `section == "Section k"` (10,000 of 1M objects) fetched into model objects
//      (ObjectGraph, instances created by the fetch) or into structs through a row cursor
//      (SQLite, `SELECT … WHERE section = ?` using its index). Five different sections per
//      process, after one unmeasured query; the process's figure is their median.
//  (b) range: `rank >= a && rank < a + N/100` likewise (`WHERE rank >= ? AND rank < ?`).
//  (c) import: N inserts into a fresh in-memory context with 0, 1 and 2 indexes (the index is
//      built lazily: the import marks it stale), then the first equality query, which builds
//      it; SQLite: N inserts in one transaction into a table with 0, 1, 2 indexes, and its
//      first query.
// Writes <out>/indexes.md.

import Foundation
import GRDB
import ObjectGraph

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}
let count = Int(option("--count") ?? "1000000") ?? 1_000_000
let rounds = max(1, Int(option("--rounds") ?? "5") ?? 5)
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
func report(_ key: String, _ value: Double) { print("\(key) \(value)") }

/// The five sections and range starts a process queries (after one unmeasured query).
let sections = [17, 42, 63, 88, 5]
func rangeStart(_ k: Int) -> Int { (count / 100) * ((k * 37) % 99) }

/// A fetched SQLite row.
struct MemberRow {
    var id: Int64
    var name: String
    var email: String
    var age: Int
    var section: String
    var rank: Int
    var score: Double
}

// MARK: ObjectGraph workers

protocol Member: Entity {
    init()
    var id: Int64 { get set }
    var name: String { get set }
    var email: String { get set }
    var age: Int { get set }
    var section: String { get set }
    var rank: Int { get set }
    var score: Double { get set }
}
extension Member0: Member {}
extension Member1: Member {}
extension Member2: Member {}

func fill<M: Member>(_ context: ModelContext, _ type: M.Type) throws {
    for i in 0..<count {
        let m = try context.insert(M.self)
        m.id = Int64(i)
        m.name = "Person \(i)"
        m.email = "p\(i)@example.com"
        m.age = 20 + i % 60
        m.section = "Section \(i % 100)"
        m.rank = (i &* 7919) % count
        m.score = Double(i) * 0.5
    }
}

func equality<M: Member>(_ context: ModelContext, _ type: M.Type, _ k: Int) throws -> Int {
    let s = "Section \(k)"
    return try context.fetch(FetchDescriptor<M>(predicate: #Predicate { $0.section == s })).count
}

func range<M: Member>(_ context: ModelContext, _ type: M.Type, _ k: Int) throws -> Int {
    let a = rangeStart(k), b = rangeStart(k) + count / 100
    return try context.fetch(FetchDescriptor<M>(predicate: #Predicate { $0.rank >= a && $0.rank < b })).count
}

/// (c) import into a fresh context, then the first query.
func ogImport<M: Member>(_ type: M.Type) throws {
    let context = ModelContext(schema: try Schema(M.self))
    let start = now()
    try fill(context, M.self)
    try context.save()
    report("import_s", now() - start)
    let q = now()
    let n = try equality(context, M.self, 3)
    report("first_query_s", now() - q)
    guard n == count / 100 else { throw BenchError("equality returned \(n)") }
    let r = now()
    let m = try range(context, M.self, 3)
    report("first_range_s", now() - r)
    guard m == count / 100 else { throw BenchError("range returned \(m)") }
}

/// (a) and (b) on a context with both indexes (or none, for the scan's figure).
func ogQuery<M: Member>(_ type: M.Type) throws {
    let context = ModelContext(schema: try Schema(M.self))
    try fill(context, M.self)
    try context.save()
    _ = try equality(context, M.self, 1)
    _ = try range(context, M.self, 1)
    var eq: [Double] = [], rg: [Double] = []
    for k in sections {
        let t = now()
        let n = try equality(context, M.self, k)
        eq.append(now() - t)
        guard n == count / 100 else { throw BenchError("equality returned \(n)") }
        let u = now()
        let m = try range(context, M.self, k)
        rg.append(now() - u)
        guard m == count / 100 else { throw BenchError("range returned \(m)") }
    }
    report("equality_s", median(eq))
    report("range_s", median(rg))
}

// MARK: SQLite workers

let columns = "id INTEGER PRIMARY KEY, name TEXT, email TEXT, age INTEGER, section TEXT, rank INTEGER, score REAL"

func sqliteFill(_ path: String, indexes: Int) throws -> (DatabaseQueue, Double) {
    var config = Configuration()
    config.journalMode = .wal
    let queue = try DatabaseQueue(path: path, configuration: config)
    try queue.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
    try queue.write { db in
        try db.execute(sql: "CREATE TABLE people(\(columns))")
        if indexes >= 1 { try db.execute(sql: "CREATE INDEX people_section ON people(section)") }
        if indexes >= 2 { try db.execute(sql: "CREATE INDEX people_rank ON people(rank)") }
    }
    let start = now()
    try queue.inDatabase { db in
        try db.inTransaction(.immediate) {
            let statement = try db.makeStatement(sql: "INSERT INTO people VALUES (?, ?, ?, ?, ?, ?, ?)")
            for i in 0..<count {
                try statement.execute(arguments: [
                    Int64(i), "Person \(i)", "p\(i)@example.com", 20 + i % 60, "Section \(i % 100)",
                    (i &* 7919) % count, Double(i) * 0.5,
                ])
            }
            return .commit
        }
    }
    return (queue, now() - start)
}

func sqliteRows(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [MemberRow] {
    var rows: [MemberRow] = []
    let cursor = try Row.fetchCursor(db, sql: sql, arguments: arguments)
    while let row = try cursor.next() {
        rows.append(
            MemberRow(
                id: row[0], name: row[1], email: row[2], age: row[3], section: row[4], rank: row[5], score: row[6]))
    }
    return rows
}

let selectEquality = "SELECT id, name, email, age, section, rank, score FROM people WHERE section = ?"
let selectRange = "SELECT id, name, email, age, section, rank, score FROM people WHERE rank >= ? AND rank < ?"

func sqliteImport(indexes: Int, directory: URL) throws {
    let (queue, seconds) = try sqliteFill(directory.appendingPathComponent("db.sqlite").path, indexes: indexes)
    report("import_s", seconds)
    let q = now()
    let n = try queue.read { db in try sqliteRows(db, selectEquality, ["Section 3"]).count }
    report("first_query_s", now() - q)
    guard n == count / 100 else { throw BenchError("SQLite equality returned \(n)") }
    try queue.close()
}

func sqliteQuery(directory: URL) throws {
    let (queue, _) = try sqliteFill(directory.appendingPathComponent("db.sqlite").path, indexes: 2)
    let plan = try queue.read { db in
        try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + selectEquality, arguments: ["x"]).map { "\($0)" }
    }
    print("plan \(plan.joined(separator: "; "))")
    try queue.read { db in
        _ = try sqliteRows(db, selectEquality, ["Section 1"])
        _ = try sqliteRows(db, selectRange, [rangeStart(1), rangeStart(1) + count / 100])
        var eq: [Double] = [], rg: [Double] = []
        for k in sections {
            let t = now()
            let n = try sqliteRows(db, selectEquality, ["Section \(k)"]).count
            eq.append(now() - t)
            guard n == count / 100 else { throw BenchError("SQLite equality returned \(n)") }
            let u = now()
            let m = try sqliteRows(db, selectRange, [rangeStart(k), rangeStart(k) + count / 100]).count
            rg.append(now() - u)
            guard m == count / 100 else { throw BenchError("SQLite range returned \(m)") }
        }
        report("equality_s", median(eq))
        report("range_s", median(rg))
    }
    try queue.close()
}

// MARK: Driver

if let worker = option("--worker") {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("indexes-\(getpid())")
    try? FileManager.default.removeItem(at: directory)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    switch worker {
    case "og-import-0": try ogImport(Member0.self)
    case "og-import-1": try ogImport(Member1.self)
    case "og-import-2": try ogImport(Member2.self)
    case "og-query": try ogQuery(Member2.self)
    case "og-query-scan": try ogQuery(Member0.self)
    case "sqlite-import-0": try sqliteImport(indexes: 0, directory: directory)
    case "sqlite-import-1": try sqliteImport(indexes: 1, directory: directory)
    case "sqlite-import-2": try sqliteImport(indexes: 2, directory: directory)
    case "sqlite-query": try sqliteQuery(directory: directory)
    default: throw BenchError("unknown worker \(worker)")
    }
    exit(0)
}

@MainActor func run(_ worker: String) throws -> [String: Double] {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    p.arguments = ["--worker", worker, "--count", "\(count)"]
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw BenchError("\(worker) exited with \(p.terminationStatus)") }
    var result: [String: Double] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(separator: " ", maxSplits: 1)
        if parts.count == 2, let v = Double(parts[1]) { result[String(parts[0])] = v }
        if parts.first == "plan", parts.count == 2 { sqlitePlan = String(parts[1]) }
    }
    return result
}

var sqlitePlan = ""

func uptime() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: ", ") ?? "?"
}

let workers = [
    "og-import-0", "og-import-1", "og-import-2", "og-query", "og-query-scan",
    "sqlite-import-0", "sqlite-import-1", "sqlite-import-2", "sqlite-query",
]
var samples: [String: [String: [Double]]] = [:]
let loadBefore = uptime()
for round in 0..<rounds {
    // Rotate the order so that each worker meets the machine's moods alike.
    for j in 0..<workers.count {
        let worker = workers[(j + round) % workers.count]
        let figures = try run(worker)
        FileHandle.standardError.write("round \(round + 1) \(worker): \(figures)\n".data(using: .utf8) ?? Data())
        for (k, v) in figures { samples[worker, default: [:]][k, default: []].append(v) }
    }
}
let loadAfter = uptime()

@MainActor func m(_ worker: String, _ key: String) -> Double { median(samples[worker]?[key] ?? []) }
func ms(_ s: Double) -> String { String(format: "%.1f ms", s * 1000) }
func sec(_ s: Double) -> String { String(format: "%.2f s", s) }
func pct(_ x: Double, _ base: Double) -> String { String(format: "%+.1f%%", (x / base - 1) * 100) }
func ratio(_ a: Double, _ b: Double) -> String { String(format: "%.2f×", a / b) }

let eqOG = m("og-query", "equality_s"), eqSQL = m("sqlite-query", "equality_s"),
    eqScan = m("og-query-scan", "equality_s")
let rgOG = m("og-query", "range_s"), rgSQL = m("sqlite-query", "range_s"), rgScan = m("og-query-scan", "range_s")
let imp = (0...2).map { m("og-import-\($0)", "import_s") }
let first = (0...2).map { m("og-import-\($0)", "first_query_s") }
let firstRange = (0...2).map { m("og-import-\($0)", "first_range_s") }
let sImp = (0...2).map { m("sqlite-import-\($0)", "import_s") }
let sFirst = (0...2).map { m("sqlite-import-\($0)", "first_query_s") }

var md = """
    # Secondary indexes against SQLite's CREATE INDEX

    `swift run -c release indexes-comparison --count \(count) --rounds \(rounds)` (`make bench-indexes`),
    release build, every figure the median over \(rounds) rounds, each worker a fresh process per
    round (order rotated). Load average (1, 5, 15 min) before: \(loadBefore); after: \(loadAfter).
    The machine: 2 x86_64 cores, shared with other builds.

    The record: \(count) objects of `id`, `name`, `email`, `age`, `section` (100 values, 1% each),
    `rank` (a permutation of 0..<N, so a 1% range is scattered over the table), `score`.
    ObjectGraph: a `ModelContext` in memory; `#Index<Member2>([\\.section], [\\.rank])`; a fetch returns
    model objects (the instances are created by the fetch: each query asks for a different
    section or range). SQLite \((try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") }) ?? "?") through GRDB: a WAL
    database, `synchronous=NORMAL`, `CREATE INDEX` on `section` and on `rank`, rows read through a
    row cursor into structs. Query plan of the equality: `\(sqlitePlan)`.

    ## (a, b) Fetches of 1% of the objects

    Each process: one unmeasured query, then five queries with different constants; the process's
    figure is their median.

    | query | ObjectGraph, indexed | ObjectGraph, scan (no index) | SQLite, indexed | ObjectGraph ÷ SQLite | target |
    |---|---|---|---|---|---|
    | (a) `section == "Section k"` | \(ms(eqOG)) | \(ms(eqScan)) | \(ms(eqSQL)) | \(ratio(eqOG, eqSQL)) | ≤ 0.2× |
    | (b) `rank >= a && rank < a + N/100` | \(ms(rgOG)) | \(ms(rgScan)) | \(ms(rgSQL)) | \(ratio(rgOG, rgSQL)) | ≤ 0.2× |

    ## (c) Bulk import with 0, 1 and 2 indexes

    ObjectGraph: \(count) inserts (six attribute sets each) into a fresh context and a save (no
    store: only the in-memory work the index adds). The index is built lazily: the import only
    marks it stale, and the first query after the import sorts it. SQLite: \(count) prepared inserts
    in one transaction into a table that already has its indexes.

    | indexes | ObjectGraph import | added | first equality after it | first range after that | import + both first queries, added | SQLite import | added | SQLite first equality |
    |---|---|---|---|---|---|---|---|---|
    | 0 | \(sec(imp[0])) | — | \(ms(first[0])) (scan) | \(ms(firstRange[0])) (scan) | — | \(sec(sImp[0])) | — | \(ms(sFirst[0])) (scan) |
    | 1 | \(sec(imp[1])) | \(pct(imp[1], imp[0])) | \(ms(first[1])) (builds `section`) | \(ms(firstRange[1])) (scan) | \(pct(imp[1] + first[1] + firstRange[1], imp[0] + first[0] + firstRange[0])) | \(sec(sImp[1])) | \(pct(sImp[1], sImp[0])) | \(ms(sFirst[1])) |
    | 2 | \(sec(imp[2])) | \(pct(imp[2], imp[0])) | \(ms(first[2])) (builds `section`) | \(ms(firstRange[2])) (builds `rank`) | \(pct(imp[2] + first[2] + firstRange[2], imp[0] + first[0] + firstRange[0])) | \(sec(sImp[2])) | \(pct(sImp[2], sImp[0])) | \(ms(sFirst[2])) |

    Target: at most 25% added per index. "added" compares with the row of 0 indexes; the last
    ObjectGraph column counts the import and the two first queries together (each first query
    builds the index it reads; with no index both scan). The import figures vary by ±10% from
    process to process on this machine: compare medians, not single rounds.

    """
try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
try md.write(to: outDirectory.appendingPathComponent("indexes.md"), atomically: true, encoding: .utf8)
print(md)
