// A small standalone run of the benchmark workload, for profilers (callgrind, perf) and for a
// resident-memory figure without the benchmark harness's malloc interposer.
//
//     swift build -c release --product objectgraph-profile
//     valgrind --tool=callgrind .build/release/objectgraph-profile insert 100000
//
// Phases: `insert` (build strings inline), `insert-prebuilt`, `update`, `rollback`, `memory`,
// or `all` (default). Each measured loop is its own `measured…` function, so callgrind can
// count only it:
//
//     valgrind --tool=callgrind --toggle-collect='*measured*' .build/release/objectgraph-profile update 100000

import Foundation
import ObjectGraph
import PeopleWorkload

let args = CommandLine.arguments
let phase = args.count > 1 ? args[1] : "all"
let n = args.count > 2 ? Int(args[2]) ?? 100_000 : 100_000

func time(_ label: String, _ body: () throws -> Void) rethrows {
    let start = ContinuousClock.now
    try body()
    let d = start.duration(to: .now)
    let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    print("\(label): \(String(format: "%.3f", s)) s, \(String(format: "%.2f", Double(n) / s / 1e6))M objects/s")
}

@inline(never)
func insertPhase() throws -> ModelContext {
    let context = ModelContext(schema: People.schema())
    try time("insert \(n)") { try measuredInsert(context) }
    return context
}

@inline(never)
func measuredInsert(_ context: ModelContext) throws {
    for i in 0..<n {
        let p = try context.insert(Person.self)
        p.id = Int64(i)
        p.name = "Person \(i)"
        p.email = "p\(i)@example.com"
        p.age = 20 + i % 60
        p.city = "City \(i % 1000)"
        p.score = Double(i) * 0.5
    }
}

@inline(never)
func insertPrebuiltPhase() throws -> ModelContext {
    let context = ModelContext(schema: People.schema())
    let s = People.Strings(count: n)
    try time("insert \(n) (strings prebuilt)") { try measuredInsertPrebuilt(context, s) }
    return context
}

@inline(never)
func measuredInsertPrebuilt(_ context: ModelContext, _ s: People.Strings) throws {
    for i in 0..<n {
        let p = try context.insert(Person.self)
        p.id = Int64(i)
        p.name = s.names[i]
        p.email = s.emails[i]
        p.age = 20 + i % 60
        p.city = s.cities[i]
        p.score = Double(i) * 0.5
    }
}

@inline(never)
func updatePhase(_ people: [Person]) {
    time("update \(n)") { measuredUpdate(people) }
}

@inline(never)
func measuredUpdate(_ people: [Person]) {
    for (i, p) in people.enumerated() { p.score = Double(i) * 0.5 + 1 }
}

@inline(never)
func rollbackPhase(_ context: ModelContext) {
    time("rollback \(n)") { measuredRollback(context) }
}

@inline(never)
func measuredRollback(_ context: ModelContext) { context.rollback() }

do {
    switch phase {
    case "insert":
        _ = try insertPhase()
    case "insert-prebuilt":
        _ = try insertPrebuiltPhase()
    case "update":
        let (_, people) = try People.savedContext(count: n)
        updatePhase(people)
    case "rollback":
        let (context, people) = try People.savedContext(count: n)
        for (i, p) in people.enumerated() { p.score = Double(i) * 0.5 + 1 }
        rollbackPhase(context)
    case "memory":
        let before = residentSetSize()
        let context = try insertPhase()
        try context.save()
        let after = residentSetSize()
        print("VmRSS \(after >> 20) MB after inserting and saving \(n) (before: \(before >> 20) MB, +\((after - before) >> 20) MB)")
        withExtendedLifetime(context) {}
    default:
        _ = try insertPhase()
        _ = try insertPrebuiltPhase()
        let (context, people) = try People.savedContext(count: n)
        updatePhase(people)
        rollbackPhase(context)
        for (i, p) in people.enumerated() { p.score = Double(i) * 0.5 + 2 }
        rollbackPhase(context)
    }
} catch {
    print("error: \(error)")
    exit(1)
}
