// The durable store's benchmarks: save, reopen, small saves and compaction of the
// people workload in an `ObjectStore` under the system's temporary directory. Registered by
// `storeBenchmarks()`, called from `benchmarks` in ObjectGraphBenchmarks.swift.
//
// Targets: one save of 1M inserted objects with fsync ≤ 0.4 s; reopen of a
// 1M-object store ≤ 0.3 s and ≤ 40 MB on disk; ≥ 200k saves/s of one changed object with
// `.none`, and with `.always` ≥ 80% of the disk's raw fdatasync rate measured in the same run;
// compaction of 1M live objects + 1M superseded updates ≤ 1.5 s.

import Benchmark
import Foundation
import GraphJournal
import ObjectGraph
import PeopleWorkload

/// State shared by a benchmark's setup, iterations and teardown (the harness runs them on one
/// thread, one after the other).
final class StoreFixture: @unchecked Sendable {
    var directory: URL?
    var store: ObjectStore?
    var people: [Person] = []
    var bytesOnDisk: Int64 = 0

    func tearDown() {
        try? store?.close()
        store = nil
        people = []
        if let directory { Stores.remove(directory) }
        directory = nil
    }
}

/// Bytes on disk of the store, in MB (10⁶ bytes).
let storeMegabytes = BenchmarkMetric.custom("on disk (MB)", polarity: .prefersSmaller, useScalingFactor: false)
/// Saves per second of the measured loop.
let savesPerSecond = BenchmarkMetric.custom("saves/s", polarity: .prefersLarger, useScalingFactor: false)
/// The disk's raw append+fdatasync rate, measured in the same iteration.
let rawSyncsPerSecond = BenchmarkMetric.custom("raw fdatasync/s", polarity: .prefersLarger, useScalingFactor: false)
/// Saves per second as a percentage of the raw fdatasync rate.
let savesPercentOfRaw = BenchmarkMetric.custom(
    "saves/s % of raw fdatasync", polarity: .prefersLarger, useScalingFactor: false)
/// `ObjectStore.replaySeconds` of the open, in ms.
let replayMilliseconds = BenchmarkMetric.custom("replay (ms)", polarity: .prefersSmaller, useScalingFactor: false)

/// The number of saves of the `.always` small-save benchmark: 100k at ~7k fdatasync/s would take
/// ~15 s per iteration, so it is scaled down to 5k (the rate is what matters).
let alwaysSaves = 5_000
/// The number of saves of the `.none` small-save benchmark.
let noneSaves = 100_000

func storeBenchmarks() {
    // One operation per iteration, wall clock in ms; a few iterations, each a second or more of
    // unmeasured preparation.
    let config = Benchmark.Configuration(
        metrics: [.wallClock, .peakMemoryResident, .mallocCountTotal],
        timeUnits: .milliseconds,
        units: [.peakMemoryResident: .mega],
        warmupIterations: 0,
        scalingFactor: .one,
        maxDuration: .seconds(25),
        maxIterations: 5
    )

    // 1. One save of N inserted objects with `.always`: the LZ4 transaction record, its write
    // and its fdatasync. A fresh store per iteration; the inserts are not measured.
    var saveConfig = config
    saveConfig.metrics += [storeMegabytes]
    Benchmark("save 1M inserted objects (one save, fsync)", configuration: saveConfig) { benchmark in
        let directory = Stores.temporaryDirectory("save")
        defer { Stores.remove(directory) }
        let store = try Stores.open(directory, durability: .always)
        try People.insert(0..<People.count, into: store.context)
        benchmark.startMeasurement()
        try store.context.save()
        benchmark.stopMeasurement()
        benchmark.measurement(storeMegabytes, Int(store.stats.bytesOnDisk / 1_000_000))
        try store.close()
    }

    // 2. Reopen: replay a store of N saved objects (one insert record) into a ready context.
    // The store is written once (setup); each iteration opens, then closes unmeasured.
    let reopen = StoreFixture()
    var reopenConfig = config
    reopenConfig.metrics += [storeMegabytes, replayMilliseconds]
    Benchmark("reopen 1M-object store (replay into a ready context)", configuration: reopenConfig) { benchmark in
        guard let directory = reopen.directory else { return }
        benchmark.startMeasurement()
        let store = try Stores.open(directory)
        benchmark.stopMeasurement()
        blackHole(try store.context.count(of: Person.self))
        benchmark.measurement(storeMegabytes, Int(reopen.bytesOnDisk / 1_000_000))
        benchmark.measurement(replayMilliseconds, Int(store.replaySeconds * 1000))
        try store.close()
    } setup: {
        let directory = Stores.temporaryDirectory("reopen")
        reopen.directory = directory
        try Stores.create(directory, count: People.count)
        reopen.bytesOnDisk = Stores.bytesOnDisk(directory)
        print("reopen 1M-object store: \(reopen.bytesOnDisk) bytes on disk (\(reopen.bytesOnDisk / 1_000_000) MB)")
    } teardown: {
        reopen.tearDown()
    }

    // 3. Small saves: a store of N saved objects; each save changes `score` of one object
    // (a different one of the first 1,000 each time). `.none` does no fdatasync; `.always` does
    // one per save, compared with the disk's raw append+fdatasync rate (2,000 × a 64-byte
    // pwrite + fdatasync on a file in the store's directory, interleaved with the saves).
    for (durability, count, label) in [
        (JournalOptions.Durability.none, noneSaves, "100k saves of one changed object (.none)"),
        (
            JournalOptions.Durability.always, alwaysSaves,
            "100k saves of one changed object (.always; scaled to 5k saves)"
        ),
    ] {
        let fixture = StoreFixture()
        var savesConfig = config
        savesConfig.metrics = [.wallClock, .mallocCountTotal, savesPerSecond]
        if durability == .always { savesConfig.metrics += [rawSyncsPerSecond, savesPercentOfRaw] }
        Benchmark(label, configuration: savesConfig) { benchmark in
            guard let store = fixture.store, let directory = fixture.directory else { return }
            let people = fixture.people
            let bump = Double(benchmark.currentIteration * count)
            if durability == .always {
                // Raw append+fdatasync and saves interleaved in 10 rounds (the disk is shared and
                // noisy); the wall clock then includes the 2,000 raw syncs too: read `saves/s`.
                benchmark.startMeasurement()
                let (raw, rate) = try Stores.savesAgainstRawSync(in: directory, saves: count) { k in
                    people[k % people.count].score = bump + Double(k)
                    try store.context.save()
                }
                benchmark.stopMeasurement()
                let percent = Int((rate / raw * 100).rounded())
                benchmark.measurement(savesPerSecond, Int(rate))
                benchmark.measurement(rawSyncsPerSecond, Int(raw))
                benchmark.measurement(savesPercentOfRaw, percent)
                print("\(label): \(Int(rate)) saves/s, raw append+fdatasync \(Int(raw))/s: \(percent)%")
            } else {
                let start = ContinuousClock.now
                benchmark.startMeasurement()
                for k in 0..<count {
                    people[k % people.count].score = bump + Double(k)
                    try store.context.save()
                }
                benchmark.stopMeasurement()
                benchmark.measurement(savesPerSecond, Int(Double(count) / seconds(since: start)))
            }
        } setup: {
            let directory = Stores.temporaryDirectory("saves")
            fixture.directory = directory
            let store = try Stores.open(directory, durability: durability)
            fixture.store = store
            let all = try People.insert(0..<People.count, into: store.context)
            try store.context.save()
            fixture.people = Array(all.prefix(1_000))
        } teardown: {
            fixture.tearDown()
        }
    }

    // 4. Compaction: N live objects whose journal also holds N superseded updates (every object's
    // `score` changed and saved once since the base). Each iteration makes the N updates and
    // saves them unmeasured, then measures `compact()`.
    let compaction = StoreFixture()
    var compactConfig = config
    compactConfig.metrics += [storeMegabytes]
    Benchmark("compact 1M live objects + 1M superseded updates", configuration: compactConfig) { benchmark in
        guard let store = compaction.store else { return }
        let bump = Double(benchmark.currentIteration + 1)
        for (i, p) in compaction.people.enumerated() { p.score = Double(i) * 0.5 + bump }
        try store.context.save()
        benchmark.startMeasurement()
        try store.compact()
        benchmark.stopMeasurement()
        benchmark.measurement(storeMegabytes, Int(store.stats.bytesOnDisk / 1_000_000))
    } setup: {
        let directory = Stores.temporaryDirectory("compact")
        compaction.directory = directory
        let store = try Stores.open(directory, durability: .none)
        compaction.store = store
        compaction.people = try People.insert(0..<People.count, into: store.context)
        try store.context.save()
    } teardown: {
        compaction.tearDown()
    }
}
