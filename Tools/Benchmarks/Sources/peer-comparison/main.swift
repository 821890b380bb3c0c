// ObjectGraph next to its peers on the same data: SQLite via GRDB and Redis's append-only
// file, the people workload (PeopleWorkload/Workload.swift) at N = 10k, 100k and 1M.
//
//     swift run -c release peer-comparison [--sizes 10000,100000,1000000] [--repeats 3]
//         [--tx 100000] [--tx-fsync 5000] [--tx-size 100000] [--out Results]
//     swift run -c release peer-comparison render --from Results/peers.json [--out DIR]
//
// (`make bench-peers` from the repository root installs redis-server if missing and runs this.)
// Workloads, each run `--repeats` times, medians reported:
//  (a) bulk: N records upserted by id, then a durable commit;
//  (b) small transactions of one changed record each, fsync on and off, on the store of
//      `--tx-size` records;
//  (c) cold start: open and load everything into memory (ObjectGraph twice: the open alone,
//      and the open plus reading every attribute of every object);
//  (d) bytes on disk; (e) resident memory after the load; (f) peak resident memory of the
//      bulk load and of the cold start.
// ObjectGraph and SQLite run each measurement in a child process of their own (`worker`, one
// phase each), so that resident memory and its peak are each one's alone; Redis is a
// redis-server that this process starts on 127.0.0.1 and a free port and stops afterwards, in
// two persistence configurations (RedisPersistence: the raw AOF, never rewritten, and Redis's
// defaults with one rewrite after the load). Everything lives under a temporary
// directory, removed at the end. Writes <out>/peers.md, <out>/peers.json (every run's value,
// with the medians) and the charts <out>/bulk-upsert.svg, cold-start.svg and memory.svg;
// `render` redraws the charts from a peers.json without measuring (ResultsFile.swift).

import Foundation
import PeopleWorkload

#if canImport(Glibc)
    import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "worker" { runWorker(Array(arguments.dropFirst())) }
if arguments.first == "render" { runRender(Array(arguments.dropFirst())) }

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
    case objectgraph, sqlite, redisRaw, redisDefault
    var title: String {
        switch self {
        case .objectgraph: return "ObjectGraph"
        case .sqlite: return "SQLite (GRDB)"
        case .redisRaw: return "Redis, raw AOF (rewrite off)"
        case .redisDefault: return "Redis, default persistence (RDB preamble, one rewrite after the load)"
        }
    }
    /// For the chart's legend.
    var shortTitle: String {
        switch self {
        case .objectgraph: return "ObjectGraph"
        case .sqlite: return "SQLite (GRDB)"
        case .redisRaw: return "Redis, raw AOF"
        case .redisDefault: return "Redis, default"
        }
    }
    var persistence: RedisPersistence? {
        switch self {
        case .redisRaw: return .rawAOF
        case .redisDefault: return .defaultPersistence
        default: return nil
        }
    }
    static let redis: [System] = [.redisRaw, .redisDefault]
}

/// Samples: results[system][metric][N].
var results: [System: [String: [Int: [Double]]]] = [:]
/// What each Redis configuration's server reported (`CONFIG GET` and the `appendonlydir`
/// listing after the bulk load), for the report's Configurations.
var redisFacts: [System: String] = [:]

@MainActor
func record(_ system: System, _ metric: String, _ n: Int, _ value: Double) {
    results[system, default: [:]][metric, default: [:]][n, default: []].append(value)
}

/// (f) A worker's peak resident memory as `<phase>_peak_rss_bytes`: its VmHWM (or `ru_maxrss`
/// where there is no /proc), and `ru_maxrss` as `<phase>_maxrss_bytes`. On Linux `ru_maxrss`
/// keeps, across the exec, the high-water mark of the address space the worker was spawned from
/// (posix_spawn's vfork shares this driver's), so for a worker smaller than this driver it
/// states the driver's peak; VmHWM belongs to the worker's own address space alone.
@MainActor
func recordPeak(_ system: System, _ phase: String, _ n: Int, _ values: [String: Double]) {
    let maxrss = values["peak_rss_bytes"] ?? .nan, hwm = values["hwm_bytes"] ?? 0
    record(system, phase + "_peak_rss_bytes", n, hwm > 0 ? hwm : maxrss)
    record(system, phase + "_maxrss_bytes", n, maxrss)
    peakCheck.workers += 1
    if !(abs(maxrss - hwm) <= Double(1 << 20)) {
        peakCheck.mismatches += 1
        peakCheck.driverPeak = max(peakCheck.driverPeak, Double(statusKilobytes("VmHWM:", pid: nil) * 1024))
        log(
            "  note: \(system.title) \(phase): ru_maxrss \(mb(maxrss / 1_048_576)) MB, VmHWM \(mb(hwm / 1_048_576)) MB (this driver's VmHWM: \(mb(peakCheck.driverPeak / 1_048_576)) MB)"
        )
    }
}

/// How many workers reported a peak; for how many `ru_maxrss` and VmHWM differed by more than
/// 1 MiB; and this driver's own VmHWM when they did.
var peakCheck = (workers: 0, mismatches: 0, driverPeak: 0.0)

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
    s >= 10
        ? String(format: "%.1f", s)
        : s >= 1 ? String(format: "%.2f", s) : s >= 0.01 ? String(format: "%.3f", s) : String(format: "%.4f", s)
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
            recordPeak(.objectgraph, "bulk", n, og)
            // The same load with the sources built 10,000 at a time, as the peers' loops build
            // their rows: the peak without the N source structs alive at once.
            let batched = try worker(["objectgraph", "bulk-batched", String(n), "10000", ogDir + "-batched"])
            record(.objectgraph, "bulk_batched_s", n, batched["bulk_s"] ?? .nan)
            recordPeak(.objectgraph, "bulk_batched", n, batched)

            let dbPath = root.appendingPathComponent("sqlite-\(n)-\(rep).db").path
            let sq = try worker(["sqlite", "bulk", String(n), dbPath])
            record(.sqlite, "bulk_s", n, sq["bulk_s"] ?? .nan)
            record(.sqlite, "disk_bytes", n, sq["disk_bytes"] ?? .nan)
            recordPeak(.sqlite, "bulk", n, sq)

            var redisDirs: [System: URL] = [:]
            for system in System.redis {
                let redisDir = root.appendingPathComponent("\(system.rawValue)-\(n)-\(rep)")
                let server = try RedisServer(directory: redisDir, fsync: "always", persistence: system.persistence!)
                let start = ContinuousClock.now
                try server.bulkLoad(n)
                record(system, "bulk_s", n, seconds(since: start))
                if system == .redisDefault {
                    let rewriteStart = ContinuousClock.now
                    let automatic = try server.rewriteAOF()
                    record(system, "rewrite_s", n, seconds(since: rewriteStart))
                    record(system, "rewrite_automatic", n, automatic ? 1 : 0)
                }
                // (f) The server's peaks over the whole phase (load, and rewrite where there is one).
                record(system, "bulk_peak_rss_bytes", n, Double(server.peakResidentBytes()))
                record(system, "bulk_used_memory_peak", n, Double(try server.usedMemoryPeak()))
                if redisFacts[system] == nil {
                    let settings = try [
                        "appendonly", "appendfsync", "save", "aof-use-rdb-preamble", "auto-aof-rewrite-percentage",
                        "auto-aof-rewrite-min-size",
                    ]
                    .map { "`\($0) \(try server.config($0).isEmpty ? "\"\"" : try server.config($0))`" }
                    let aofDir = redisDir.appendingPathComponent("appendonlydir")
                    let files = (try? FileManager.default.contentsOfDirectory(atPath: aofDir.path))?.sorted() ?? []
                    let listing = files.map { name in
                        let size =
                            (try? FileManager.default.attributesOfItem(atPath: aofDir.appendingPathComponent(name).path))?[
                                .size] as? NSNumber
                        return "`\(name)` (\(size.map { $0.int64Value.formatted() } ?? "?") B)"
                    }
                    redisFacts[system] =
                        "As read back with `CONFIG GET`: \(settings.joined(separator: ", ")). The `appendonlydir` after the bulk load of N = \(n.formatted()): \(listing.joined(separator: ", "))"
                }
                server.stop()
                record(
                    system, "disk_bytes", n,
                    Double(Stores.bytesOnDisk(redisDir.appendingPathComponent("appendonlydir"))))
                redisDirs[system] = redisDir
            }
            log(
                "  bulk rep \(rep + 1): ObjectGraph \(fmt(og["bulk_s"] ?? .nan)) s, SQLite \(fmt(sq["bulk_s"] ?? .nan)) s, Redis raw \(fmt(results[.redisRaw]!["bulk_s"]![n]!.last!)) s, Redis default \(fmt(results[.redisDefault]!["bulk_s"]![n]!.last!)) s + rewrite \(fmt(results[.redisDefault]!["rewrite_s"]![n]!.last!)) s"
            )

            // Keep the last rep's stores for (c) and (b); remove the others.
            for (system, path) in last { removeStore(system, path) }
            last = [
                .objectgraph: ogDir, .sqlite: dbPath, .redisRaw: redisDirs[.redisRaw]!.path,
                .redisDefault: redisDirs[.redisDefault]!.path,
            ]
        }

        // (c) cold start, (e) memory after it and (f) its peak, each system in turn, `repeats` times.
        for rep in 0..<repeats {
            let og = try worker(["objectgraph", "cold", last[.objectgraph]!])
            for key in ["cold_s", "rss_bytes", "rss_delta_bytes"] { record(.objectgraph, key, n, og[key] ?? .nan) }
            recordPeak(.objectgraph, "cold", n, og)
            let ogRead = try worker(["objectgraph", "cold-read", last[.objectgraph]!])
            for key in ["cold_s", "rss_bytes", "rss_delta_bytes"] {
                record(.objectgraph, "read_" + key, n, ogRead[key] ?? .nan)
            }
            recordPeak(.objectgraph, "cold_read", n, ogRead)
            guard Int(ogRead["objects"] ?? 0) == n else {
                throw RedisError("ObjectGraph read \(Int(ogRead["objects"] ?? 0)) objects, not \(n)")
            }
            let sq = try worker(["sqlite", "cold", last[.sqlite]!])
            for key in ["cold_s", "rss_bytes", "rss_delta_bytes"] { record(.sqlite, key, n, sq[key] ?? .nan) }
            recordPeak(.sqlite, "cold", n, sq)
            var line =
                "  cold rep \(rep + 1): ObjectGraph open \(fmt(og["cold_s"] ?? .nan)) s (\(Int(og["objects"] ?? 0)) objects), open+read \(fmt(ogRead["cold_s"] ?? .nan)) s, SQLite \(fmt(sq["cold_s"] ?? .nan)) s (\(Int(sq["objects"] ?? 0)) rows)"
            for system in System.redis {
                let server = try RedisServer(
                    directory: URL(fileURLWithPath: last[system]!), fsync: "always", persistence: system.persistence!)
                record(system, "cold_s", n, server.secondsToPong)
                record(system, "used_memory", n, Double(try server.usedMemory()))
                record(system, "rss_bytes", n, Double(server.residentBytes()))
                record(system, "cold_peak_rss_bytes", n, Double(server.peakResidentBytes()))
                record(system, "cold_used_memory_peak", n, Double(try server.usedMemoryPeak()))
                let keys = try server.connection.command("DBSIZE").text
                server.stop()
                guard keys == String(n) else { throw RedisError("\(system.title) loaded \(keys) keys, not \(n)") }
                line += ", \(system.shortTitle) \(fmt(server.secondsToPong)) s (\(keys) keys)"
            }
            log(line)
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
                var line =
                    "  \(count) tx, fsync \(fsync ? "on" : "off"), rep \(rep + 1): ObjectGraph \(Int(og["tx_per_s"] ?? 0))/s, SQLite \(Int(sq["tx_per_s"] ?? 0))/s"
                for system in System.redis {
                    let server = try RedisServer(
                        directory: URL(fileURLWithPath: txStores[system]!), fsync: fsync ? "always" : "everysec",
                        persistence: system.persistence!)
                    let start = ContinuousClock.now
                    try server.smallTransactions(count)
                    record(system, key, txSize, Double(count) / seconds(since: start))
                    server.stop()
                    line += ", \(system.shortTitle) \(Int(results[system]![key]![txSize]!.last!))/s"
                }
                log(line)
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
let measurements = Measurements(sizes: sizes, repeats: repeats, samples: results)
let resultsFile = ResultsFile(
    measurements,
    generated: ISO8601DateFormatter().string(from: Date()),
    libraryCommit: libraryCommit(ProcessInfo.processInfo.environment["OBJECTGRAPH_PATH"] ?? "../..")
        .replacingOccurrences(of: "`", with: ""),
    arguments: arguments,
    transactions: .init(storeSize: txSize, fsyncOnCount: txFsyncCount, fsyncOffCount: txCount)
)
try resultsFile.encoded().write(to: outDirectory.appendingPathComponent("peers.json"), options: .atomic)
_ = try writeCharts(measurements, to: outDirectory)
print(markdown)
