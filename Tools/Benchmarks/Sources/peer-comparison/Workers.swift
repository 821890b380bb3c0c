// The measurements that run in a child process of their own (`peer-comparison worker …`), so that
// each one's resident memory is its own: ObjectGraph and SQLite via GRDB. Each prints
// `RESULT key=value` lines that the driver collects.

import Foundation
import GRDB
import GraphJournal
import ObjectGraph
import PeopleWorkload

#if canImport(Glibc)
    import Glibc
#endif

func report(_ key: String, _ value: Double) {
    print("RESULT \(key)=\(value)")
}

// MARK: ObjectGraph

enum ObjectGraphWorker {
    /// (a) A unique upsert of N records (`importUniqueObjects` by the unique `id`; the source
    /// structs, strings included, are built inside the timed region like the peers' rows) and
    /// one save with `.always`, timed together; then the store's bytes on disk after close.
    static func bulk(count: Int, directory: URL) throws {
        let store = try Stores.open(directory, durability: .always, schema: Importing.schema())
        let start = ContinuousClock.now
        let sources = Importing.sources(0..<count)
        _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
        try store.context.save()
        report("bulk_s", seconds(since: start))
        try store.close()
        report("disk_bytes", Double(Stores.bytesOnDisk(directory)))
    }

    /// (a) as ``bulk(count:directory:)``, but through `batchUpsert` (the values written into the
    /// table by `id`, no instance made): what a caller who keeps no objects writes. Not part of
    /// the report; `peer-comparison worker objectgraph bulk-values <N> <dir>`.
    static func bulkValues(count: Int, directory: URL) throws {
        let store = try Stores.open(directory, durability: .always, schema: Importing.schema())
        let start = ContinuousClock.now
        let sources = Importing.sources(0..<count)
        _ = try store.context.batchUpsert(sources, into: UniquePerson.self)
        try store.context.save()
        report("bulk_s", seconds(since: start))
        try store.close()
        report("disk_bytes", Double(Stores.bytesOnDisk(directory)))
    }

    /// (a) as ``bulk(count:directory:)``, but the sources built and imported `batch` at a time
    /// (`importUniqueObjects` per batch, all in one transaction and one save), as a caller
    /// streaming its records from a file or an API would: the peak resident memory without the
    /// N source structs alive at once (130 MiB of the 1M load's peak). Not part of the report;
    /// `peer-comparison worker objectgraph bulk-batched <N> <batch> <dir>`.
    static func bulkBatched(count: Int, batch: Int, directory: URL) throws {
        let store = try Stores.open(directory, durability: .always, schema: Importing.schema())
        let start = ContinuousClock.now
        var lower = 0
        while lower < count {
            let upper = min(count, lower + batch)
            _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(lower..<upper))
            lower = upper
        }
        // Where the peak comes from: before the save, the store and its instances alone.
        report("before_save_hwm_bytes", Double(statusKilobytes("VmHWM:", pid: nil) * 1024))
        report("before_save_rss_bytes", Double(statusKilobytes("VmRSS:", pid: nil) * 1024))
        try store.context.save()
        report("bulk_s", seconds(since: start))
        try store.close()
        report("disk_bytes", Double(Stores.bytesOnDisk(directory)))
    }

    /// (c) Open the store: replay the journal into a ready context holding every object; then
    /// (e) the process's VmRSS with the context alive.
    static func cold(directory: URL) throws {
        let before = residentSetSize()
        let start = ContinuousClock.now
        let store = try Stores.open(directory, durability: .none, schema: Importing.schema())
        report("cold_s", seconds(since: start))
        let after = residentSetSize()
        report("rss_bytes", Double(after))
        report("rss_delta_bytes", Double(after - before))
        report("objects", Double(try store.context.count(of: UniquePerson.self)))
        // OBJECTGRAPH_SMAPS=FILE: the process's memory map with each mapping's resident size,
        // copied after the open, to tell which buffers the resident memory is.
        if let path = ProcessInfo.processInfo.environment["OBJECTGRAPH_SMAPS"] {
            // Read to the end: a /proc file has no size for `Data(contentsOf:)` to go by.
            let smaps = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps")).readToEnd() ?? Data()
            try smaps.write(to: URL(fileURLWithPath: path))
        }
        withExtendedLifetime(store) {}
    }

    /// (c') Open the store as in ``cold(directory:)`` and then build what a reader reads: every
    /// object of the store as an instance (`context.objects(of:)`), and each of its six
    /// attributes read into an accumulator (`checksum`, reported, so that no read can be
    /// dropped), timed together; then (e) the process's VmRSS with the context, the instances
    /// and the array of them alive. The like-for-like row of SQLite's cursor into structs.
    static func coldRead(directory: URL) throws {
        let before = residentSetSize()
        let start = ContinuousClock.now
        let store = try Stores.open(directory, durability: .none, schema: Importing.schema())
        let people = try store.context.objects(of: UniquePerson.self)
        let sums = AttributeSums(readingEveryAttributeOf: people)
        report("cold_s", seconds(since: start))
        let after = residentSetSize()
        report("rss_bytes", Double(after))
        report("rss_delta_bytes", Double(after - before))
        report("objects", Double(people.count))
        report("checksum", sums.checksum)
        withExtendedLifetime((store, people)) {}
    }

    /// (b) `count` saves, each of one changed object (`score` of one of the first 1,000).
    static func transactions(directory: URL, count: Int, fsync: Bool) throws {
        let store = try Stores.open(directory, durability: fsync ? .always : .none, schema: Importing.schema())
        let people = Array(try store.context.objects(of: UniquePerson.self).prefix(1_000))
        let start = ContinuousClock.now
        for k in 0..<count {
            people[k % people.count].score = Double(k)
            try store.context.save()
        }
        report("tx_per_s", Double(count) / seconds(since: start))
        try store.close()
    }
}

// MARK: SQLite via GRDB

/// One row of the people table, as a plain Swift struct.
struct PersonRow {
    var id: Int64
    var name: String
    var email: String
    var age: Int
    var city: String
    var score: Double
}

enum SQLiteWorker {
    static let createSQL = """
        CREATE TABLE IF NOT EXISTS people (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
            age INTEGER NOT NULL, city TEXT NOT NULL, score REAL NOT NULL)
        """
    static let upsertSQL = """
        INSERT INTO people (id, name, email, age, city, score) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT(id) DO UPDATE SET name = excluded.name, email = excluded.email,
            age = excluded.age, city = excluded.city, score = excluded.score
        """

    /// A queue on `path` in WAL mode with `PRAGMA synchronous = <synchronous>`.
    /// Set after the open: GRDB itself sets `synchronous = NORMAL` when it switches a
    /// connection to WAL, after `prepareDatabase` has run. Checked by reading it back.
    static func open(_ path: String, synchronous: String) throws -> DatabaseQueue {
        var config = Configuration()
        config.journalMode = .wal
        let queue = try DatabaseQueue(path: path, configuration: config)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            let mode = try Int.fetchOne(db, sql: "PRAGMA synchronous")
            let journal = try String.fetchOne(db, sql: "PRAGMA journal_mode")
            let expected = ["OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3][synchronous]
            guard mode == expected, journal == "wal" else {
                throw RedisError(
                    "SQLite: synchronous is \(mode ?? -1), journal_mode \(journal ?? "?"), not \(synchronous)/wal")
            }
        }
        return queue
    }

    static func filesBytes(_ path: String) -> Double {
        var total = 0.0
        for suffix in ["", "-wal", "-shm"] {
            if let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix))?[.size] as? NSNumber {
                total += size.doubleValue
            }
        }
        return total
    }

    /// (a) N prepared upserts (strings built in the loop) in one transaction, committed with
    /// synchronous=FULL; then the database's bytes on disk after close (WAL checkpointed).
    static func bulk(count: Int, path: String) throws {
        let queue = try open(path, synchronous: "FULL")
        try queue.write { db in try db.execute(sql: createSQL) }
        let start = ContinuousClock.now
        try queue.inDatabase { db in
            try db.inTransaction(.immediate) {
                let statement = try db.makeStatement(sql: upsertSQL)
                for i in 0..<count {
                    try statement.execute(arguments: [
                        Int64(i), "Person \(i)", "p\(i)@example.com", 20 + i % 60, "City \(i % 1000)", Double(i) * 0.5,
                    ])
                }
                return .commit
            }
        }
        report("bulk_s", seconds(since: start))
        try queue.close()
        report("disk_bytes", filesBytes(path))
    }

    /// (c) Open the database and read every row into `PersonRow`s through a row cursor; then
    /// (e) the process's VmRSS with the rows alive.
    static func cold(path: String) throws {
        let before = residentSetSize()
        let start = ContinuousClock.now
        let queue = try DatabaseQueue(path: path)
        let rows: [PersonRow] = try queue.read { db in
            var rows: [PersonRow] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT id, name, email, age, city, score FROM people")
            while let row = try cursor.next() {
                rows.append(
                    PersonRow(id: row[0], name: row[1], email: row[2], age: row[3], city: row[4], score: row[5]))
            }
            return rows
        }
        report("cold_s", seconds(since: start))
        let after = residentSetSize()
        report("rss_bytes", Double(after))
        report("rss_delta_bytes", Double(after - before))
        report("objects", Double(rows.count))
        withExtendedLifetime((queue, rows)) {}
    }

    /// (b) `count` transactions, each one prepared `UPDATE … SET score` of one row (one of the
    /// first 1,000), with synchronous FULL (fsync on) or NORMAL (fsync off: in WAL mode a
    /// commit is not synced).
    static func transactions(path: String, count: Int, fsync: Bool) throws {
        let queue = try open(path, synchronous: fsync ? "FULL" : "NORMAL")
        let start = ContinuousClock.now
        try queue.inDatabase { db in
            let statement = try db.makeStatement(sql: "UPDATE people SET score = ? WHERE id = ?")
            for k in 0..<count {
                try db.inTransaction(.immediate) {
                    try statement.execute(arguments: [Double(k), Int64(k % 1_000)])
                    return .commit
                }
            }
        }
        report("tx_per_s", Double(count) / seconds(since: start))
        try queue.close()
    }

    static func version() -> String {
        (try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?" }) ?? "?"
    }
}

// MARK: Peak memory

/// The peak resident memory of this process: `peak_rss_bytes`, `ru_maxrss` of
/// `getrusage(RUSAGE_SELF)` (kB on Linux), and `hwm_bytes`, `VmHWM` of /proc/self/status, the
/// high-water mark of this process image's own address space. The driver reports VmHWM:
/// `ru_maxrss` also holds the high-water mark of the address space that the worker was exec'd
/// from (the driver's, which `posix_spawn` shares until the exec); see `recordPeak`.
func reportPeakMemory() {
    var usage = rusage()
    if getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 {
        report("peak_rss_bytes", Double(usage.ru_maxrss) * 1024)
    }
    report("hwm_bytes", Double(statusKilobytes("VmHWM:", pid: nil) * 1024))
}

/// A `kB` field (`VmRSS:`, `VmHWM:`, …) of /proc/<pid or self>/status, in kB; 0 if absent.
func statusKilobytes(_ field: String, pid: Int32?) -> Int {
    let path = "/proc/\(pid.map(String.init) ?? "self")/status"
    guard let status = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
        return line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
            ?? 0
    }
    return 0
}

/// Runs `peer-comparison worker <system> <task> <args…>` and exits.
func runWorker(_ args: [String]) -> Never {
    do {
        guard args.count >= 2 else { throw RedisError("worker: expected <system> <task> …") }
        switch (args[0], args[1]) {
        case ("objectgraph", "bulk"):
            try ObjectGraphWorker.bulk(count: Int(args[2])!, directory: URL(fileURLWithPath: args[3]))
        case ("objectgraph", "bulk-values"):
            try ObjectGraphWorker.bulkValues(count: Int(args[2]) ?? 0, directory: URL(fileURLWithPath: args[3]))
        case ("objectgraph", "bulk-batched"):
            guard args.count == 5, let count = Int(args[2]), let batch = Int(args[3]), batch > 0 else {
                throw RedisError("worker: expected objectgraph bulk-batched <count> <batch> <directory>")
            }
            try ObjectGraphWorker.bulkBatched(count: count, batch: batch, directory: URL(fileURLWithPath: args[4]))
        case ("objectgraph", "cold"): try ObjectGraphWorker.cold(directory: URL(fileURLWithPath: args[2]))
        case ("objectgraph", "cold-read"): try ObjectGraphWorker.coldRead(directory: URL(fileURLWithPath: args[2]))
        case ("objectgraph", "tx"):
            try ObjectGraphWorker.transactions(
                directory: URL(fileURLWithPath: args[2]), count: Int(args[3])!, fsync: args[4] == "on")
        case ("sqlite", "bulk"): try SQLiteWorker.bulk(count: Int(args[2])!, path: args[3])
        case ("sqlite", "cold"): try SQLiteWorker.cold(path: args[2])
        case ("sqlite", "tx"):
            try SQLiteWorker.transactions(path: args[2], count: Int(args[3])!, fsync: args[4] == "on")
        default: throw RedisError("worker: unknown task \(args)")
        }
        // (f) Every worker does exactly one phase, so its peak is that phase's.
        reportPeakMemory()
        exit(0)  // flushes stdout; freeing a million objects is no part of any figure
    } catch {
        FileHandle.standardError.write("worker \(args): \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}
