// Concurrent durable commits: `tasks` tasks each commit `commits` one-record transactions that
// must be durable when they return, against SQLite in WAL mode with synchronous=FULL through
// GRDB's DatabasePool (its writes are serialized on one connection, each commit synced).
//
//   swift run -c release commit-comparison [--tasks 8] [--commits 250] [--rounds 3]
//
// Rows, each round in this order, every system in a fresh directory:
//   - AsyncStore with `.always` durability (group commit: transactions of other tasks that
//     commit while one waits for its fdatasync share the next one);
//   - the same store type without group commit: AsyncStore(store:) over an ObjectStore opened
//     with `.always`, one fdatasync per transaction, taken in turn on the actor;
//   - SQLite: DatabasePool, WAL, `PRAGMA synchronous = FULL` on the writer connection (checked),
//     one `INSERT` per `write` transaction;
//   - Redis with `appendonly yes` and `appendfsync always` (it syncs once per event-loop turn
//     for every command that turn read: its own group commit), measured by Debian's
//     redis-benchmark with the same number of clients, each SET of a 64-byte value waiting for
//     its reply (no pipelining); skipped when redis-server or redis-benchmark is missing;
//   - the disk's raw rate: a 64-byte pwrite appended to a file, then fdatasync.
// Prints medians of the rounds' transactions per second, and the load average.

import Foundation
import GRDB
import ObjectGraph
import PeopleWorkload

struct Options {
    var tasks = 8
    var commits = 250
    var rounds = 3

    init() {
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let a = args.next() {
            switch a {
            case "--tasks": tasks = args.next().flatMap(Int.init) ?? tasks
            case "--commits": commits = args.next().flatMap(Int.init) ?? commits
            case "--rounds": rounds = args.next().flatMap(Int.init) ?? rounds
            default: print("unknown argument \(a)")
            }
        }
    }
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        ?? "?"
}

/// Runs `tasks` tasks of `commits` calls of `commit(task, i)`; returns transactions per second.
func measure(
    tasks: Int, commits: Int, _ commit: @escaping @Sendable (Int, Int) async throws -> Void
) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for t in 0..<tasks {
            group.addTask {
                for i in 0..<commits { try await commit(t, i) }
            }
        }
        try await group.waitForAll()
    }
    return Double(tasks * commits) / seconds(since: start)
}

func person(_ context: ModelContext, _ id: Int) throws {
    let source = PersonSource(id)
    _ = try context.insert(UniquePerson.self) {
        $0.id = source.id
        $0.name = source.name
        $0.email = source.email
        $0.age = source.age
        $0.city = source.city
        $0.score = source.score
    }
}

func groupCommit(_ o: Options) async throws -> (Double, GroupCommitStatistics) {
    let dir = Stores.temporaryDirectory("commits-group")
    defer { Stores.remove(dir) }
    let store = try AsyncStore(at: dir, schema: Importing.schema(), options: Stores.options(.always))
    let rate = try await measure(tasks: o.tasks, commits: o.commits) { t, i in
        try await store.perform { context in try person(context, t * 1_000_000 + i) }
    }
    let stats = store.groupCommitStatistics
    try await store.close()
    return (rate, stats)
}

func oneSyncEach(_ o: Options) async throws -> Double {
    let dir = Stores.temporaryDirectory("commits-each")
    defer { Stores.remove(dir) }
    let store = AsyncStore(
        store: try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.always)))
    let rate = try await measure(tasks: o.tasks, commits: o.commits) { t, i in
        try await store.perform { context in try person(context, t * 1_000_000 + i) }
    }
    try await store.close()
    return rate
}

func sqlite(_ o: Options) async throws -> Double {
    let dir = Stores.temporaryDirectory("commits-sqlite")
    defer { Stores.remove(dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let pool = try DatabasePool(path: dir.appendingPathComponent("people.sqlite").path)
    try await pool.writeWithoutTransaction { db in
        // GRDB sets NORMAL when it switches to WAL: FULL syncs the WAL at every commit.
        try db.execute(sql: "PRAGMA synchronous = FULL")
        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
            throw DatabaseError(message: "synchronous is not FULL")
        }
        try db.execute(
            sql: """
                CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
                                     age INTEGER NOT NULL, city TEXT NOT NULL, score REAL NOT NULL)
                """)
    }
    let rate = try await measure(tasks: o.tasks, commits: o.commits) { t, i in
        let s = PersonSource(t * 1_000_000 + i)
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO people (id, name, email, age, city, score) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [s.id, s.name, s.email, s.age, s.city, s.score])
        }
    }
    try pool.close()
    return rate
}

func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }

/// Runs `executable` with `arguments`; its standard output, or nil when it cannot run or fails.
func run(_ executable: String, _ arguments: [String]) -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil
}

/// Redis with `appendfsync always`: SETs per second from redis-benchmark with `tasks` clients
/// and `tasks × commits` requests; nil when Redis's tools are not installed.
func redis(_ o: Options) throws -> Double? {
    let server = "/usr/bin/redis-server", bench = "/usr/bin/redis-benchmark", cli = "/usr/bin/redis-cli"
    guard [server, bench, cli].allSatisfy(FileManager.default.isExecutableFile(atPath:)) else { return nil }
    let dir = Stores.temporaryDirectory("commits-redis")
    defer { Stores.remove(dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let port = String(20_000 + Int(ProcessInfo.processInfo.processIdentifier % 20_000))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: server)
    process.arguments = [
        "--port", port, "--bind", "127.0.0.1", "--dir", dir.path, "--appendonly", "yes", "--appendfsync", "always",
        "--save", "", "--daemonize", "no", "--logfile", "",
    ]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    defer {
        _ = run(cli, ["-p", port, "shutdown", "nosave"])
        process.waitUntilExit()
    }
    var ready = false
    for _ in 0..<100 where !ready {
        ready = run(cli, ["-p", port, "ping"])?.contains("PONG") == true
        if !ready { usleep(20_000) }
    }
    guard ready,
        let csv = run(
            bench,
            [
                "-p", port, "-c", "\(o.tasks)", "-n", "\(o.tasks * o.commits)", "-t", "set", "-d", "64", "-r",
                "1000000", "--csv",
            ])
    else { return nil }
    // "test","rps",…  then  "SET","13245.03",…
    let line = csv.split(separator: "\n").first { $0.hasPrefix("\"SET\"") }
    let fields = line?.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
    return fields.flatMap { $0.count > 1 ? Double($0[1]) : nil }
}

@main
struct CommitComparison {
    static func main() async throws {
        let o = Options()
        print("# Concurrent durable commits\n")
        print(
            "\(o.tasks) tasks × \(o.commits) one-record transactions each, durable when they return; \(o.rounds) rounds, medians. Load average before: \(loadAverage())\n"
        )
        var group: [Double] = [], each: [Double] = [], lite: [Double] = [], raw: [Double] = []
        var shared: [Double] = []
        var redisRates: [Double] = []
        for _ in 0..<o.rounds {
            let (g, stats) = try await groupCommit(o)
            group.append(g)
            shared.append(Double(stats.transactions) / Double(max(1, stats.syncs)))
            each.append(try await oneSyncEach(o))
            lite.append(try await sqlite(o))
            if let r = try redis(o) { redisRates.append(r) }
            let dir = Stores.temporaryDirectory("commits-raw")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            raw.append(Stores.rawFdatasyncRate(in: dir, iterations: 500))
            Stores.remove(dir)
        }
        print("| system | transactions/s (median) | rounds |\n|---|---|---|")
        func row(_ label: String, _ xs: [Double]) {
            print(
                "| \(label) | \(String(format: "%.0f", median(xs))) | \(xs.map { String(format: "%.0f", $0) }.joined(separator: ", ")) |"
            )
        }
        row("ObjectGraph AsyncStore, `.always`, group commit", group)
        row("ObjectGraph AsyncStore(store:), `.always`, one fdatasync per transaction", each)
        row("SQLite (GRDB DatabasePool, WAL, synchronous=FULL)", lite)
        if !redisRates.isEmpty {
            row(
                "Redis \(run("/usr/bin/redis-server", ["--version"])?.split(separator: " ").dropFirst(2).first ?? ""), appendfsync always (redis-benchmark, \(o.tasks) clients, SET of 64 bytes)",
                redisRates)
        }
        row("raw 64-byte append + fdatasync, one at a time", raw)
        print("")
        print(
            "Group commit: \(String(format: "%.1f", median(shared))) transactions per fdatasync (median); ratio to SQLite \(String(format: "%.2f", median(group) / median(lite)))×"
                + (redisRates.isEmpty
                    ? "." : ", to Redis \(String(format: "%.2f", median(group) / median(redisRates)))×."))
        print("\nLoad average after: \(loadAverage())")
    }
}
