// The ObjectGraph benchmarks: the "people" workload (`People` in PeopleWorkload/Workload.swift).
//
// Run from Tools/Benchmarks (or `make bench` from the repository root):
//
//     swift package --allow-writing-to-directory .benchmarkBaselines benchmark
//
// Every benchmark works on N = 1,000,000 records and uses `scalingFactor: .mega`, so one
// iteration is the whole million and the reported throughput (marked `*`) is objects per second.
// The targets the library aims for: insert ≥ 1.5M objects/s, update ≥ 5M/s,
// rollback of 1M updates ≤ 0.2 s, ≤ 200 MB resident for 1M saved objects; the durable
// store's targets are in StoreBenchmarks.swift.

import Benchmark
import ObjectGraph
import PeopleWorkload

/// A context with N saved people and their instances, shared by a benchmark's iterations.
final class SavedPeople {
    let context: ModelContext
    let people: [Person]

    init(count: Int) throws {
        (context, people) = try People.savedContext(count: count)
    }
}

/// Resident memory after inserting and saving, as reported by /proc/self/status (MB).
let vmRSSAfterSave = BenchmarkMetric.custom("VmRSS after save (MB)", polarity: .prefersSmaller, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    // These are big (up to a second per iteration): few iterations, no warmup. With the `.mega`
    // scaling factor the `*` metrics are per object: wall clock in ns per object, mallocs per
    // object; throughput is objects per second (the table rounds it to whole M/s: divide 10⁹
    // by the ns per object for the exact figure).
    let timed = Benchmark.Configuration(
        metrics: [.wallClock, .throughput, .peakMemoryResident, .mallocCountTotal],
        timeUnits: .nanoseconds,
        units: [.peakMemoryResident: .mega],
        warmupIterations: 0,
        scalingFactor: .mega,
        maxDuration: .seconds(12),
        maxIterations: 7
    )

    // 1. Insert: a fresh context, N inserts with six attribute sets each, strings built inline.
    Benchmark("insert 1M objects", configuration: timed) { benchmark in
        let context = ModelContext(schema: People.schema())
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            People.fill(try context.insert(Person.self), i)
        }
        benchmark.stopMeasurement()
        blackHole(context)  // freeing the million instances is not measured
    }

    // 1b. The same with the 3M strings built before the measurement: the library's share alone.
    Benchmark("insert 1M objects (strings prebuilt)", configuration: timed) { benchmark in
        let context = ModelContext(schema: People.schema())
        let strings = People.Strings(count: benchmark.scaledIterations.count)
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            let p = try context.insert(Person.self)
            p.id = Int64(i)
            p.name = strings.names[i]
            p.email = strings.emails[i]
            p.age = 20 + i % 60
            p.city = strings.cities[i]
            p.score = Double(i) * 0.5
        }
        benchmark.stopMeasurement()
        blackHole(context)
        blackHole(strings)
    }

    // 2. Update: N saved objects; set `score` on each (the first change of each object in the
    // transaction, so every set captures a before-image). Rolled back, unmeasured, after each
    // iteration so that every iteration starts from the saved state.
    Benchmark("update 1M objects (one attribute)", configuration: timed) { benchmark, saved in
        let bump = Double(benchmark.currentIteration + 1)
        benchmark.startMeasurement()
        for (i, p) in saved.people.enumerated() {
            p.score = Double(i) * 0.5 + bump
        }
        benchmark.stopMeasurement()
        saved.context.rollback()
    } setup: {
        try SavedPeople(count: People.count)
    }

    // 3. Rollback: N saved objects with `score` changed on each (unmeasured); roll back. One
    // rollback is one operation here (no scaling): wall clock is the whole rollback, in ms.
    var single = timed
    single.scalingFactor = .one
    single.timeUnits = .milliseconds
    single.units = [.throughput: .count, .peakMemoryResident: .mega]
    Benchmark("rollback 1M updates", configuration: single) { benchmark, saved in
        let bump = Double(benchmark.currentIteration + 1)
        for (i, p) in saved.people.enumerated() {
            p.score = Double(i) * 0.5 + bump
        }
        benchmark.startMeasurement()
        saved.context.rollback()
        benchmark.stopMeasurement()
        blackHole(saved.people[0].score)
    } setup: {
        try SavedPeople(count: People.count)
    }

    // 4. Resident memory: insert and save N objects, keep the context (and its instances)
    // alive, and report the process's resident set: sampled peak (`peakMemoryResident`) and
    // VmRSS right after the save (custom metric, also printed).
    Benchmark(
        "resident memory for 1M objects",
        configuration: .init(
            metrics: [.peakMemoryResident, .peakMemoryResidentDelta, .wallClock, .mallocCountTotal, vmRSSAfterSave],
            timeUnits: .nanoseconds,
            units: [.peakMemoryResident: .mega, .peakMemoryResidentDelta: .mega],
            warmupIterations: 0,
            scalingFactor: .mega,
            maxDuration: .seconds(10),
            // One iteration: a ModelContext holding instances is currently never freed (see
            // README), so later iterations would measure the earlier contexts too.
            maxIterations: 1
        )
    ) { benchmark in
        let before = residentSetSize()
        let context = ModelContext(schema: People.schema())
        for i in benchmark.scaledIterations {
            People.fill(try context.insert(Person.self), i)
        }
        try context.save()
        let after = residentSetSize()
        benchmark.measurement(vmRSSAfterSave, after >> 20)
        print(
            "resident memory for 1M objects: VmRSS \(after >> 20) MB after save (\(before >> 20) MB before the context, +\((after - before) >> 20) MB)"
        )
        blackHole(try context.count(of: Person.self))
        benchmark.stopMeasurement()
        blackHole(context)
    }

    // 5–8. The durable store: StoreBenchmarks.swift.
    storeBenchmarks()
    // 9–13. Relationships and fetching: GraphBenchmarks.swift.
    graphBenchmarks()
}
