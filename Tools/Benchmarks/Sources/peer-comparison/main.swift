// ObjectGraph next to its peers on the same data: SQLite via GRDB and Redis's append-only
// file, the people workload (PeopleWorkload/Workload.swift) at N = 10k, 100k and 1M.
//
//     swift run -c release peer-comparison [--sizes 10000,100000,1000000] [--repeats 3]
//         [--tx 100000] [--tx-fsync 5000] [--tx-size 100000] [--out Results]
//
// (`make bench-peers` from the repository root installs redis-server if missing and runs this.)
// Workloads, each run `--repeats` times, medians reported:
//  (a) bulk: N records upserted by id, then a durable commit;
//  (b) small transactions of one changed record each, fsync on and off, on the store of
//      `--tx-size` records;
//  (c) cold start: open and load everything into memory;
//  (d) bytes on disk; (e) resident memory after the load.
// ObjectGraph and SQLite run each measurement in a child process of their own (`worker`), so
// that resident memory is each one's alone; Redis is a redis-server that this process starts
// on 127.0.0.1 and a free port and stops afterwards. Everything lives under a temporary
// directory, removed at the end. Writes <out>/peers.md and <out>/cold-start.svg.

import Foundation
import PeopleWorkload

#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "worker" { runWorker(Array(arguments.dropFirst())) }

// MARK: Options

func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}

let sizes = (option("--sizes") ?? "10000,100000,1000000").split(separator: ",").compactMap { Int($0) }
let repeats = max(1, Int(option("--repeats") ?? "3") ?? 3)
let txCount = Int(option("--tx") ?? "100000") ?? 100_000
let txFsyncCount = Int(option("--tx-fsync") ?? "5000") ?? 5_000
let txSize = Int(option("--tx-size") ?? "100000") ?? 100_000
let outDirectory = URL(fileURLWithPath: option("--out") ?? "Results", isDirectory: true)

enum System: String, CaseIterable {
    case objectgraph, sqlite, redis
    var title: String {
        switch self {
        case .objectgraph: return "ObjectGraph"
        case .sqlite: return "SQLite (GRDB)"
        case .redis: return "Redis AOF"
        }
    }
}

/// Samples: results[system][metric][N].
var results: [System: [String: [Int: [Double]]]] = [:]

@MainActor
func record(_ system: System, _ metric: String, _ n: Int, _ value: Double) {
    results[system, default: [:]][metric, default: [:]][n, default: []].append(value)
}

func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

@MainActor
func med(_ system: System, _ metric: String, _ n: Int) -> Double? {
    median(results[system]?[metric]?[n] ?? [])
}

// MARK: Child processes

let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()

/// Runs `peer-comparison worker <args>` and returns its RESULT values.
func worker(_ args: [String]) throws -> [String: Double] {
    let p = Process()
    p.executableURL = executable
    p.arguments = ["worker"] + args
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw RedisError("worker \(args) failed with status \(p.terminationStatus)") }
    var values: [String: Double] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix("RESULT ") {
        let kv = line.dropFirst(7).split(separator: "=", maxSplits: 1)
        if kv.count == 2, let v = Double(kv[1]) { values[String(kv[0])] = v }
    }
    return values
}

func output(_ text: String) -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", text]
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = FileHandle.nullDevice
    guard (try? p.run()) != nil else { return "?" }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

func fmt(_ s: Double) -> String {
    s >= 10 ? String(format: "%.1f", s) : s >= 1 ? String(format: "%.2f", s) : s >= 0.01 ? String(format: "%.3f", s) : String(format: "%.4f", s)
}

/// Progress, unbuffered (stdout may be a pipe).
func log(_ text: String) { FileHandle.standardOutput.write((text + "\n").data(using: .utf8)!) }

func removeStore(_ system: System, _ path: String) {
    try? FileManager.default.removeItem(atPath: path)
    if system == .sqlite { for s in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + s) } }
}

// MARK: Runs

let root = Stores.temporaryDirectory("peers")
defer { Stores.remove(root) }
let runStart = ContinuousClock.now
let loadAtStart = output("cat /proc/loadavg | cut -d' ' -f1-3")
/// The stores of N = txSize that (b) works on, one per system.
var txStores: [System: String] = [:]

do {
    for n in sizes {
        log("== N = \(n)")
        // (a) bulk, interleaving the systems; each rep writes a fresh store.
        var last: [System: String] = [:]
        for rep in 0..<repeats {
            let ogDir = root.appendingPathComponent("og-\(n)-\(rep)").path
            let og = try worker(["objectgraph", "bulk", String(n), ogDir])
            record(.objectgraph, "bulk_s", n, og["bulk_s"] ?? .nan)
            record(.objectgraph, "disk_bytes", n, og["disk_bytes"] ?? .nan)

            let dbPath = root.appendingPathComponent("sqlite-\(n)-\(rep).db").path
            let sq = try worker(["sqlite", "bulk", String(n), dbPath])
            record(.sqlite, "bulk_s", n, sq["bulk_s"] ?? .nan)
            record(.sqlite, "disk_bytes", n, sq["disk_bytes"] ?? .nan)

            let redisDir = root.appendingPathComponent("redis-\(n)-\(rep)")
            let server = try RedisServer(directory: redisDir, fsync: "always")
            let start = ContinuousClock.now
            try server.bulkLoad(n)
            record(.redis, "bulk_s", n, seconds(since: start))
            server.stop()
            record(.redis, "disk_bytes", n, Double(Stores.bytesOnDisk(redisDir.appendingPathComponent("appendonlydir"))))
            log("  bulk rep \(rep + 1): ObjectGraph \(fmt(og["bulk_s"] ?? .nan)) s, SQLite \(fmt(sq["bulk_s"] ?? .nan)) s, Redis \(fmt(results[.redis]!["bulk_s"]![n]!.last!)) s")

            // Keep the last rep's stores for (c) and (b); remove the others.
            for (system, path) in last { removeStore(system, path) }
            last = [.objectgraph: ogDir, .sqlite: dbPath, .redis: redisDir.path]
        }

        // (c) cold start and (e) memory, each system in turn, `repeats` times.
        for rep in 0..<repeats {
            let og = try worker(["objectgraph", "cold", last[.objectgraph]!])
            for key in ["cold_s", "rss_bytes", "rss_delta_bytes"] { record(.objectgraph, key, n, og[key] ?? .nan) }
            let sq = try worker(["sqlite", "cold", last[.sqlite]!])
            for key in ["cold_s", "rss_bytes", "rss_delta_bytes"] { record(.sqlite, key, n, sq[key] ?? .nan) }
            let server = try RedisServer(directory: URL(fileURLWithPath: last[.redis]!), fsync: "always")
            record(.redis, "cold_s", n, server.secondsToPong)
            record(.redis, "used_memory", n, Double(try server.usedMemory()))
            record(.redis, "rss_bytes", n, Double(server.residentBytes()))
            let keys = try server.connection.command("DBSIZE").text
            server.stop()
            log("  cold rep \(rep + 1): ObjectGraph \(fmt(og["cold_s"] ?? .nan)) s (\(Int(og["objects"] ?? 0)) objects), SQLite \(fmt(sq["cold_s"] ?? .nan)) s (\(Int(sq["objects"] ?? 0)) rows), Redis \(fmt(server.secondsToPong)) s (\(keys) keys)")
        }

        if n == txSize {
            txStores = last
        } else {
            for (system, path) in last { removeStore(system, path) }
        }
    }

    // (b) small transactions on the stores of N = txSize.
    if !txStores.isEmpty {
        log("== small transactions on the \(txSize)-record stores")
        for (fsync, count) in [(true, txFsyncCount), (false, txCount)] {
            let key = fsync ? "tx_fsync_per_s" : "tx_nofsync_per_s"
            for rep in 0..<repeats {
                let og = try worker(["objectgraph", "tx", txStores[.objectgraph]!, String(count), fsync ? "on" : "off"])
                record(.objectgraph, key, txSize, og["tx_per_s"] ?? .nan)
                let sq = try worker(["sqlite", "tx", txStores[.sqlite]!, String(count), fsync ? "on" : "off"])
                record(.sqlite, key, txSize, sq["tx_per_s"] ?? .nan)
                let server = try RedisServer(directory: URL(fileURLWithPath: txStores[.redis]!), fsync: fsync ? "always" : "everysec")
                let start = ContinuousClock.now
                try server.smallTransactions(count)
                record(.redis, key, txSize, Double(count) / seconds(since: start))
                server.stop()
                log("  \(count) tx, fsync \(fsync ? "on" : "off"), rep \(rep + 1): ObjectGraph \(Int(og["tx_per_s"] ?? 0))/s, SQLite \(Int(sq["tx_per_s"] ?? 0))/s, Redis \(Int(results[.redis]![key]![txSize]!.last!))/s")
            }
        }
    }
} catch {
    print("peer-comparison: \(error)")
    exit(1)
}

let totalSeconds = seconds(since: runStart)
log("== done in \(Int(totalSeconds)) s")

// MARK: Report

try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
let markdown = makeMarkdown(totalSeconds: totalSeconds)
try markdown.write(to: outDirectory.appendingPathComponent("peers.md"), atomically: true, encoding: .utf8)
try makeSVG().write(to: outDirectory.appendingPathComponent("cold-start.svg"), atomically: true, encoding: .utf8)
print(markdown)
