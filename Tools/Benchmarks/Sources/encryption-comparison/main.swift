// Encryption at rest against no encryption, on the people workload of `peer-comparison`:
//
//  1. bulk: 1M records upserted by id (`importUniqueObjects`, the sources built in the timed
//     region) and one durable save (`.always`), into an empty store;
//  2. cold open: open that store in a fresh process, replaying its journal into a ready context.
//
//     swift run -c release encryption-comparison [--rounds 25] [--count 1000000] [--out Results]
//
// (`make bench-encryption` from the repository root.) Every measured run is a fresh child process
// of this binary (`--child bulk|cold plain|sealed DIR`); the two configurations alternate, their
// order swapped every round, and each round's ratio is its sealed time over its plain time. The
// sealed store uses one AES-256 key (`JournalEncryption(key:)`); everything else is the same
// options. Writes <out>/encryption.md.

import Foundation
import GraphJournal
import ObjectGraph
import PeopleWorkload

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: " ") ?? "?"
}

/// The options of both configurations: `.always`, no automatic compaction; sealed adds the key.
func storeOptions(sealed: Bool) throws -> StoreOptions {
    var options = Stores.options(.always)
    if sealed {
        options.encryption = JournalEncryption(key: try JournalKey(id: "bench", bytes: (0..<32).map { UInt8($0 * 7) }))
    }
    return options
}

// MARK: Children

if arguments.first == "--child", arguments.count == 4 {
    let (kind, sealed, directory) = (arguments[1], arguments[2] == "sealed", URL(fileURLWithPath: arguments[3]))
    let options = try storeOptions(sealed: sealed)
    switch kind {
    case "bulk":
        let count = Int(ProcessInfo.processInfo.environment["ENCRYPTION_COUNT"] ?? "") ?? People.count
        let store = try ObjectStore.open(at: directory, schema: Importing.schema(), options: options)
        let start = ContinuousClock.now
        let sources = Importing.sources(0..<count)
        _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
        try store.context.save()
        print("RESULT seconds=\(seconds(since: start))")
        try store.close()
        print("RESULT bytes=\(Stores.bytesOnDisk(directory))")
    case "cold":
        let start = ContinuousClock.now
        let store = try ObjectStore.open(at: directory, schema: Importing.schema(), options: options)
        print("RESULT seconds=\(seconds(since: start))")
        print("RESULT objects=\(try store.context.count(of: UniquePerson.self))")
        withExtendedLifetime(store) {}
    default:
        throw BenchError("unknown child \(kind)")
    }
    exit(0)
}

// MARK: Driver

let rounds = max(1, Int(option("--rounds") ?? "25") ?? 25)
let count = Int(option("--count") ?? "") ?? People.count
let outDirectory = URL(fileURLWithPath: option("--out") ?? "Results", isDirectory: true)

/// Runs a child and returns its `RESULT` values.
func child(_ kind: String, sealed: Bool, _ directory: URL) throws -> [String: Double] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["--child", kind, sealed ? "sealed" : "plain", directory.path]
    process.environment = ProcessInfo.processInfo.environment.merging(["ENCRYPTION_COUNT": String(count)]) { $1 }
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw BenchError("child \(kind) failed: \(output)") }
    var values: [String: Double] = [:]
    for line in output.split(separator: "\n") where line.hasPrefix("RESULT ") {
        let pair = line.dropFirst(7).split(separator: "=")
        if pair.count == 2, let value = Double(pair[1]) { values[String(pair[0])] = value }
    }
    return values
}

var times: [String: [Bool: [Double]]] = ["bulk": [true: [], false: []], "cold": [true: [], false: []]]
var ratios: [String: [Double]] = ["bulk": [], "cold": []]
var bytes: [Bool: Double] = [:]
let loadBefore = loadAverage()
print("encryption-comparison: \(rounds) rounds of \(count) records, load \(loadBefore)")
for round in 0..<rounds {
    var measured: [String: [Bool: Double]] = ["bulk": [:], "cold": [:]]
    let order = round % 2 == 0 ? [false, true] : [true, false]
    var directories: [Bool: URL] = [:]
    for sealed in order {
        let directory = Stores.temporaryDirectory(sealed ? "sealed" : "plain")
        directories[sealed] = directory
        let bulk = try child("bulk", sealed: sealed, directory)
        measured["bulk"]?[sealed] = bulk["seconds"]
        bytes[sealed] = bulk["bytes"]
    }
    for sealed in order {
        guard let directory = directories[sealed] else { continue }
        let cold = try child("cold", sealed: sealed, directory)
        guard cold["objects"] == Double(count) else {
            throw BenchError("the cold open found \(cold["objects"] ?? -1) objects")
        }
        measured["cold"]?[sealed] = cold["seconds"]
        Stores.remove(directory)
    }
    for phase in ["bulk", "cold"] {
        guard let plain = measured[phase]?[false], let sealed = measured[phase]?[true] else { continue }
        times[phase]?[false]?.append(plain)
        times[phase]?[true]?.append(sealed)
        ratios[phase]?.append(sealed / plain)
    }
    print(
        "  round \(round + 1): bulk \(String(format: "%.3f", measured["bulk"]?[false] ?? .nan)) / \(String(format: "%.3f", measured["bulk"]?[true] ?? .nan)) s, cold open \(String(format: "%.3f", measured["cold"]?[false] ?? .nan)) / \(String(format: "%.3f", measured["cold"]?[true] ?? .nan)) s (plain / sealed), load \(loadAverage())"
    )
}

@MainActor func row(_ phase: String, _ title: String) -> String {
    let plain = median(times[phase]?[false] ?? [])
    let sealed = median(times[phase]?[true] ?? [])
    let r = ratios[phase] ?? []
    return
        "| \(title) | \(String(format: "%.3f", plain)) s | \(String(format: "%.3f", sealed)) s | **\(String(format: "%.3f", median(r)))×** | \(r.map { String(format: "%.3f", $0) }.joined(separator: ", ")) |"
}
let report = """
    # Encryption at rest: sealed against plain

    `encryption-comparison --rounds \(rounds) --count \(count)` (`make bench-encryption`), release build, \
    \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(loadBefore) before and \(loadAverage()) after.
    Every run is a fresh process; the two configurations alternate, their order swapped every round. \
    Both use `.always` durability and no automatic compaction; the sealed store adds \
    `JournalEncryption(key:)` (AES-256-GCM, `Docs/Encryption.md`). The ratio is each round's sealed \
    time over its plain time; the table gives the medians.

    | phase | plain | sealed | sealed / plain (median) | per round |
    |---|---|---|---|---|
    \(row("bulk", "bulk upsert of \(count) records + durable save"))
    \(row("cold", "cold open (replay into a ready context)"))

    Bytes on disk after the bulk load: plain \(Int(bytes[false] ?? 0)), sealed \(Int(bytes[true] ?? 0)).

    """
try FileManager.default.createDirectory(at: outDirectory, withIntermediateDirectories: true)
try report.write(to: outDirectory.appendingPathComponent("encryption.md"), atomically: true, encoding: .utf8)
print(report)
