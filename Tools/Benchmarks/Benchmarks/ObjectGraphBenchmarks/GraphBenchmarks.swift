// Relationships and fetching: cascade-delete a parent with 100k children and roll it
// back (targets: ≤ 0.2 s each); fetch over 1M people filtered by a Swift closure (≥ 10M
// objects scanned/s) and by a `#Predicate`, both translated into a column scan and evaluated by
// Foundation object by object (measured, to say how far apart they are). Registered by
// `graphBenchmarks()`, called from `benchmarks` in ObjectGraphBenchmarks.swift.

import Benchmark
import Foundation
import ObjectGraph
import PeopleWorkload

/// A saved household and its context, shared by a benchmark's iterations.
final class SavedHousehold {
    let context: ModelContext
    let home: Household

    init(children: Int) throws {
        (context, home) = try Households.savedContext(children: children)
    }
}

func graphBenchmarks() {
    let single = Benchmark.Configuration(
        metrics: [.wallClock, .peakMemoryResident, .mallocCountTotal],
        timeUnits: .milliseconds,
        units: [.peakMemoryResident: .mega],
        warmupIterations: 0,
        scalingFactor: .one,
        maxDuration: .seconds(10),
        maxIterations: 7
    )

    // 9. Cascade: delete the household (prepareForDeletion on it and on each of the 100k
    // residents, each marked deleted); rolled back unmeasured after each iteration.
    Benchmark("cascade-delete a parent with 100k children", configuration: single) { benchmark, saved in
        benchmark.startMeasurement()
        saved.context.delete(saved.home)
        benchmark.stopMeasurement()
        blackHole(try saved.context.count(of: Resident.self))
        saved.context.rollback()
    } setup: {
        try SavedHousehold(children: 100_000)
    }

    // 10. Rollback of that cascade: every resident and the household back, inverses included.
    Benchmark("rollback a cascade of 100k children", configuration: single) { benchmark, saved in
        saved.context.delete(saved.home)
        benchmark.startMeasurement()
        saved.context.rollback()
        benchmark.stopMeasurement()
        blackHole(saved.home.residents.count)
    } setup: {
        try SavedHousehold(children: 100_000)
    }

    // 11–13. Fetch over 1M saved people; `*` metrics are per object scanned.
    let scan = Benchmark.Configuration(
        metrics: [.wallClock, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 1,
        scalingFactor: .mega,
        maxDuration: .seconds(10),
        maxIterations: 9
    )
    Benchmark("fetch 1M objects filtered by a closure", configuration: scan) { benchmark, saved in
        benchmark.startMeasurement()
        blackHole(try saved.context.count(Person.self) { $0.age > 30 })
        benchmark.stopMeasurement()
    } setup: {
        try SavedPeople(count: People.count)
    }
    Benchmark("fetch 1M objects filtered by a #Predicate (translated)", configuration: scan) { benchmark, saved in
        let descriptor = FetchDescriptor<Person>(predicate: #Predicate { $0.age > 30 })
        benchmark.startMeasurement()
        blackHole(try saved.context.fetchCount(descriptor))
        benchmark.stopMeasurement()
    } setup: {
        try SavedPeople(count: People.count)
    }
    Benchmark("fetch 1M objects filtered by a #Predicate (Foundation evaluation)", configuration: scan) {
        benchmark, saved in
        let predicate = #Predicate<Person> { $0.age > 30 }
        benchmark.startMeasurement()
        var n = 0
        for p in saved.people where try predicate.evaluate(p) { n += 1 }
        benchmark.stopMeasurement()
        blackHole(n)
    } setup: {
        try SavedPeople(count: People.count)
    }
}
