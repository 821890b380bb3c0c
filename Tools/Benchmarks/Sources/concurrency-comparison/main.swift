// Readers on snapshots while a writer imports: the figures of Docs/Concurrency.md.
//
//   swift run -c release concurrency-comparison [--count 1000000] [--readers 8] [--batch 10000]
//
// 1. Creates a store of `count` people with a unique id (one import, one save).
// 2. Opens it as an AsyncStore: the journal's replay, then the first snapshot's build.
// 3. Publish cost: 200 one-object saves; the median time the publish took after the commit.
// 4. Readers alone: `readers` tasks doing random unique-key lookups through `store.snapshot`
//    (one snapshot per lookup, as a request handler would) for a fixed time.
// 5. Writer alone: `count` updates imported in batches of `batch` with `performBatches`.
// 6. Both at once: the same readers while the writer imports another `count` updates.
// Prints a Markdown report (medians of the lookup latencies, p99, throughput, ratios).

import Foundation
import ObjectGraph
import PeopleWorkload
import Synchronization

struct Options {
    var count = 1_000_000
    var readers = 8
    var batch = 10_000
    var readSeconds = 3.0
    /// Stop after the open and the first snapshot (for profiling them).
    var openOnly = false

    init() {
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let a = args.next() {
            switch a {
            case "--count": count = args.next().flatMap(Int.init) ?? count
            case "--readers": readers = args.next().flatMap(Int.init) ?? readers
            case "--batch": batch = args.next().flatMap(Int.init) ?? batch
            case "--read-seconds": readSeconds = args.next().flatMap(Double.init) ?? readSeconds
            case "--open-only": openOnly = true
            default: print("unknown argument \(a)")
            }
        }
    }
}

/// The CPU seconds (user and system) the whole process has used so far, all threads.
func processCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// The lookups of one reader task: latencies in nanoseconds.
struct ReaderResult: Sendable {
    var latencies: [Int]
    var misses: Int
}

final class StopFlag: Sendable {
    let stopped = Atomic<Bool>(false)
}

func percentile(_ sorted: [Int], _ p: Double) -> Int {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// Runs `readers` lookup tasks until `stop` is set; returns their merged latencies and the
/// wall time they ran.
func runReaders(_ store: AsyncStore, readers: Int, count: Int, stop: StopFlag) async -> (ReaderResult, Double) {
    let start = ContinuousClock.now
    let results = await withTaskGroup(of: ReaderResult.self) { group in
        for r in 0..<readers {
            group.addTask {
                var rng = SplitMix(seed: UInt64(r + 1) &* 0x9E37_79B9)
                var result = ReaderResult(latencies: [], misses: 0)
                result.latencies.reserveCapacity(4_000_000)
                var n = 0
                while !stop.stopped.load(ordering: .relaxed) {
                    let id = Int64(rng.next() % UInt64(count))
                    let t0 = ContinuousClock.now
                    let age = try? store.snapshot.object(UniquePerson.self, where: \.id, equals: id)?.age
                    let t1 = ContinuousClock.now
                    if age == nil { result.misses += 1 }
                    let d = t1 - t0
                    result.latencies.append(
                        Int(d.components.seconds) * 1_000_000_000 + Int(d.components.attoseconds / 1_000_000_000))
                    n += 1
                    if n % 256 == 0 { await Task.yield() }
                }
                return result
            }
        }
        var all = ReaderResult(latencies: [], misses: 0)
        for await r in group {
            all.latencies += r.latencies
            all.misses += r.misses
        }
        return all
    }
    return (results, seconds(since: start))
}

func importUpdates(_ store: AsyncStore, count: Int, batch: Int, generation: Int) async throws -> Double {
    let batches = stride(from: 0, to: count, by: batch).map { $0..<min($0 + batch, count) }
    let start = ContinuousClock.now
    try await store.performBatches(batches) { context, range in
        _ = try context.importUniqueObjects(
            UniquePerson.self, sourceArray: Importing.sources(range, generation: generation))
    }
    return seconds(since: start)
}

func describe(_ label: String, _ r: ReaderResult, wall: Double) -> String {
    let sorted = r.latencies.sorted()
    let rate = Double(sorted.count) / wall
    return
        "| \(label) | \(sorted.count) | \(String(format: "%.0f", rate)) | \(percentile(sorted, 0.5)) | \(percentile(sorted, 0.99)) | \(percentile(sorted, 0.999)) | \(sorted.last ?? 0) | \(r.misses) |"
}

@main
struct ConcurrencyComparison {
    static func main() async throws {
        let o = Options()
        let dir = Stores.temporaryDirectory("concurrency")
        defer { Stores.remove(dir) }
        print("# Readers on snapshots while a writer imports\n")
        print(
            "\(o.count) people, \(o.readers) reader tasks, batches of \(o.batch); load average before: \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?")\n"
        )

        // 1. The store.
        do {
            let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.none))
            _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(0..<o.count))
            try store.context.save()
            try store.close()
        }

        // 2. Open, then the first snapshot.
        let t0 = ContinuousClock.now
        let plain = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.none))
        let openSeconds = seconds(since: t0)
        // The writer's import without snapshots, for what publishing them adds.
        let batches = stride(from: 0, to: o.count, by: o.batch).map { $0..<min($0 + o.batch, o.count) }
        let tPlain = ContinuousClock.now
        for range in batches {
            _ = try plain.context.importUniqueObjects(
                UniquePerson.self, sourceArray: Importing.sources(range, generation: 1))
            try plain.context.save()
        }
        let writerPlain = seconds(since: tPlain)
        let t1 = ContinuousClock.now
        let store = AsyncStore(store: plain)
        let buildSeconds = seconds(since: t1)
        print("| step | seconds |\n|---|---|")
        print("| open (replay) | \(String(format: "%.3f", openSeconds)) |")
        print("| first snapshot (every row and index copied once) | \(String(format: "%.3f", buildSeconds)) |\n")
        if o.openOnly {
            try await store.close()
            return
        }

        // 3. Publish cost of a one-object save.
        var publishes: [Double] = []
        var saves: [Double] = []
        for i in 0..<200 {
            let s = ContinuousClock.now
            try await store.perform { context in
                try context.object(UniquePerson.self, where: \.id, equals: Int64(i * 4999 % o.count))?.score += 1
            }
            saves.append(seconds(since: s) * 1e6)
            publishes.append(seconds(store.snapshotStatistics.lastPublish) * 1e6)
        }
        publishes.sort()
        saves.sort()
        print("| one-object save in a \(o.count)-object store | median µs | p99 µs |\n|---|---|---|")
        print(
            "| snapshot publish (after the commit) | \(String(format: "%.1f", publishes[100])) | \(String(format: "%.1f", publishes[198])) |"
        )
        print(
            "| whole `perform` (transaction, journal write without fsync, publish) | \(String(format: "%.1f", saves[100])) | \(String(format: "%.1f", saves[198])) |\n"
        )

        // 4. Readers alone.
        let stopAlone = StopFlag()
        let cpuReaders = processCPUSeconds()
        async let alone = runReaders(store, readers: o.readers, count: o.count, stop: stopAlone)
        try await Task.sleep(for: .seconds(o.readSeconds))
        stopAlone.stopped.store(true, ordering: .relaxed)
        let (readersAlone, aloneWall) = await alone
        let readersCPU = processCPUSeconds() - cpuReaders

        // 5. Writer alone.
        let statsBefore = store.snapshotStatistics
        let cpuWriter = processCPUSeconds()
        let writerAlone = try await importUpdates(store, count: o.count, batch: o.batch, generation: 2)
        let writerCPU = processCPUSeconds() - cpuWriter
        let statsAfter = store.snapshotStatistics
        let publishShare = seconds(statsAfter.totalPublish - statsBefore.totalPublish)

        // 6. Both.
        let stopBoth = StopFlag()
        let cpuBoth = processCPUSeconds()
        async let both = runReaders(store, readers: o.readers, count: o.count, stop: stopBoth)
        let writerWithReaders = try await importUpdates(store, count: o.count, batch: o.batch, generation: 3)
        stopBoth.stopped.store(true, ordering: .relaxed)
        let (readersBoth, bothWall) = await both
        let bothCPU = processCPUSeconds() - cpuBoth

        print(
            "| reader lookups | lookups | per second | p50 ns | p99 ns | p99.9 ns | max ns | misses |\n|---|---|---|---|---|---|---|---|"
        )
        print(describe("alone", readersAlone, wall: aloneWall))
        print(describe("during the import", readersBoth, wall: bothWall))
        let rateAlone = Double(readersAlone.latencies.count) / aloneWall
        let rateBoth = Double(readersBoth.latencies.count) / bothWall
        print("")
        print("| writer: \(o.count) updates in batches of \(o.batch) | seconds |\n|---|---|")
        print("| ObjectStore, no snapshots (same batches, one save each) | \(String(format: "%.3f", writerPlain)) |")
        print(
            "| alone | \(String(format: "%.3f", writerAlone)) (of which publishing snapshots \(String(format: "%.3f", publishShare))) |"
        )
        print("| with \(o.readers) readers | \(String(format: "%.3f", writerWithReaders)) |\n")
        print(
            "Ratios: reader throughput during the import / alone = \(String(format: "%.2f", rateBoth / rateAlone)); import with readers / alone = \(String(format: "%.2f", writerWithReaders / writerAlone))."
        )
        // What the cores allow. Readers that keep R cores busy alone, on c cores, beside a writer
        // that keeps u cores busy alone: an import stretched r times takes u/r cores, which
        // leaves the readers at most c - u/r, so at most (c - u/r)/R of their rate alone (when
        // a lookup costs the same CPU time in both phases).
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let u = writerCPU / writerAlone
        let readersBusy = readersCPU / aloneWall
        let r = writerWithReaders / writerAlone
        func bound(_ r: Double) -> String { String(format: "%.2f", (cores - u / r) / readersBusy) }
        print("")
        print("| phase | wall s | CPU s (all threads) | cores busy |\n|---|---|---|---|")
        print(
            "| readers alone | \(String(format: "%.3f", aloneWall)) | \(String(format: "%.3f", readersCPU)) | \(String(format: "%.2f", readersBusy)) |"
        )
        print(
            "| writer alone | \(String(format: "%.3f", writerAlone)) | \(String(format: "%.3f", writerCPU)) | \(String(format: "%.2f", u)) |"
        )
        print(
            "| both | \(String(format: "%.3f", bothWall)) | \(String(format: "%.3f", bothCPU)) | \(String(format: "%.2f", bothCPU / bothWall)) |\n"
        )
        print(
            """
            Bound from the cores: \(Int(cores)) cores; the readers alone keep R = \(String(format: "%.2f", readersBusy)) busy, \
            the writer alone u = \(String(format: "%.2f", u)). An import stretched r times leaves the readers at most \
            (cores - u/r)/R of their rate alone: \(bound(r)) at this run's r = \(String(format: "%.2f", r)), \
            \(bound(1.25)) at r = 1.25.
            """)
        print(
            "\nLoad average after: \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?")"
        )
        try await store.close()
    }
}
