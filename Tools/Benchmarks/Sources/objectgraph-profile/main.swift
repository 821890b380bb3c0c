// A small standalone run of the benchmark workload, for profilers (callgrind, perf) and for a
// resident-memory figure without the benchmark harness's malloc interposer.
//
//     swift build -c release --product objectgraph-profile
//     valgrind --tool=callgrind .build/release/objectgraph-profile insert 100000
//
// Phases: `insert` (build strings inline), `insert-prebuilt`, `update`, `rollback`, `memory`,
// or `all` (default); the durable store's (stores under the temporary directory,
// removed afterwards): `save` (one save of n inserted objects, `.always`), `reopen` (replay a
// store of n objects; prints its size on disk), `saves-none` / `saves-always [k]` (k saves of
// one changed object in a store of n; k defaults to 100,000 and 5,000), `fsync` (the disk's raw
// append+fdatasync rate), `compact` (n live objects + n superseded updates), or `store` (all of
// these); the import's: `import-empty` (importUniqueObjects of n sources into an
// empty store + durable save), `import-existing` (n sources, half updates, into a store of n),
// `upsert-scaling` (time per upsert with 10k vs 1M present), `upserts` (100k single upserts
// into a store of n, for `--toggle-collect='*measuredUpserts*'`), `import-duplicates` (a first
// import of 2n sources, every ID twice), or `import` (all four); relationships:
// `cascade` (cascade-delete a parent with n children, then roll back); memory under churn:
// `churn n DIR` / `survivors n DIR` (n inserted, nine in ten deleted, compacted / only the
// survivors inserted, compacted; the resident set then) and `open-rss DIR` (the resident set
// after opening and reading either store in a fresh process), `read-all DIR` (open, make
// every instance, read every attribute: each timed), `read-values DIR` (open, then every
// person decoded as a value with `forEach(_:as:_:)` into an array) and `read-rows DIR` (open,
// then every person read with `forEachRow(_:columns:_:)`, into an array and summed) and
// `read-snapshot DIR` (the same store as an `AsyncStore`: its snapshot read as rows, values
// and instances, each summed). Each measured loop is its own `measured…` function, so callgrind can
// count only it:
//
//     valgrind --tool=callgrind --toggle-collect='*measured*' .build/release/objectgraph-profile update 100000

import Foundation
import GraphJournal
import ObjectGraph
import PeopleWorkload

#if canImport(Glibc)
    import Glibc
#endif

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
        People.fill(try context.insert(Person.self), i)
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

// MARK: The durable store

let k = args.count > 3 ? Int(args[3]) : nil

@inline(never)
func savePhase() throws {
    let directory = Stores.temporaryDirectory("save")
    defer { Stores.remove(directory) }
    let store = try Stores.open(directory, durability: .always)
    try People.insert(0..<n, into: store.context)
    try time("save \(n) inserted objects (one save, .always)") { try measuredSave(store) }
    print(
        "  on disk: \(store.stats.bytesOnDisk) bytes (\(String(format: "%.1f", Double(store.stats.bytesOnDisk) / 1e6)) MB)"
    )
    try store.close()
}

@inline(never)
func measuredSave(_ store: ObjectStore) throws { try store.context.save() }

@inline(never)
func reopenPhase() throws {
    let directory = Stores.temporaryDirectory("reopen")
    defer { Stores.remove(directory) }
    try Stores.create(directory, count: n)
    let bytes = Stores.bytesOnDisk(directory)
    let before = residentSetSize()
    var store: ObjectStore?
    try time("reopen \(n)-object store") { store = try measuredReopen(directory) }
    let after = residentSetSize()
    print(
        "  on disk: \(bytes) bytes (\(String(format: "%.1f", Double(bytes) / 1e6)) MB); replaySeconds \(String(format: "%.3f", store!.replaySeconds)); VmRSS \(after >> 20) MB (+\((after - before) >> 20) MB)"
    )
    try store?.close()
}

@inline(never)
func measuredReopen(_ directory: URL) throws -> ObjectStore { try Stores.open(directory) }

@inline(never)
func savesPhase(_ durability: JournalOptions.Durability, count: Int) throws {
    let directory = Stores.temporaryDirectory("saves")
    defer { Stores.remove(directory) }
    let store = try Stores.open(directory, durability: durability)
    let people = Array(try People.insert(0..<n, into: store.context).prefix(1_000))
    try store.context.save()
    let label = durability == .always ? ".always" : ".none"
    if durability == .always {
        // Interleaved with 2,000 raw append+fdatasync (the disk is shared and noisy).
        let (raw, rate) = try Stores.savesAgainstRawSync(in: directory, saves: count) { i in
            people[i % people.count].score = Double(i)
            try store.context.save()
        }
        print(
            "\(count) saves of one changed object (\(label), store of \(n)): \(Int(rate)) saves/s; raw append+fdatasync \(Int(raw))/s (interleaved): \(Int((rate / raw * 100).rounded()))%"
        )
    } else {
        let start = ContinuousClock.now
        try measuredSaves(store, people, count)
        let s = seconds(since: start)
        print(
            "\(count) saves of one changed object (\(label), store of \(n)): \(String(format: "%.3f", s)) s, \(Int(Double(count) / s)) saves/s"
        )
    }
    try store.close()
}

@inline(never)
func measuredSaves(_ store: ObjectStore, _ people: [Person], _ count: Int) throws {
    for i in 0..<count {
        people[i % people.count].score = Double(i)
        try store.context.save()
    }
}

@inline(never)
func fsyncPhase() {
    let directory = Stores.temporaryDirectory("fsync")
    defer { Stores.remove(directory) }
    let rate = Stores.rawFdatasyncRate(in: directory, iterations: k ?? 2_000)
    print("raw append (64 B pwrite) + fdatasync: \(Int(rate))/s (\(String(format: "%.0f", 1e6 / rate)) µs each)")
}

@inline(never)
func compactPhase() throws {
    let directory = Stores.temporaryDirectory("compact")
    defer { Stores.remove(directory) }
    let store = try Stores.open(directory, durability: .none)
    let people = try People.insert(0..<n, into: store.context)
    try store.context.save()
    for (i, p) in people.enumerated() { p.score = Double(i) * 0.5 + 1 }
    try store.context.save()
    let before = store.stats.bytesOnDisk
    try time("compact \(n) live + \(n) superseded updates") { try measuredCompact(store) }
    print("  on disk: \(before) → \(store.stats.bytesOnDisk) bytes")
    try store.close()
}

@inline(never)
func measuredCompact(_ store: ObjectStore) throws { try store.compact() }

// MARK: Import

/// The import alone, for callgrind's `--toggle-collect='*measuredImport*'`.
@inline(never)
func measuredImport(_ context: ModelContext, _ sources: [PersonSource]) throws -> [UniquePerson] {
    try context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
}

/// importUniqueObjects of n sources into an empty store, then a durable save.
@inline(never)
func importEmptyPhase() throws {
    let dir = Stores.temporaryDirectory("import-empty")
    defer { Stores.remove(dir) }
    let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.always))
    let sources = Importing.sources(0..<n)
    let start = ContinuousClock.now
    let objects = try measuredImport(store.context, sources)
    let imported = seconds(since: start)
    try store.context.save()
    let total = seconds(since: start)
    print(
        "import \(n) into an empty store: \(String(format: "%.3f", imported)) s import + save (fsync) = \(String(format: "%.3f", total)) s; \(objects.count) objects"
    )
    try store.close()
}

/// importUniqueObjects of n sources, half of them updates of existing objects, into a store
/// already holding n objects, then a durable save.
@inline(never)
func importExistingPhase() throws {
    let dir = Stores.temporaryDirectory("import-existing")
    defer { Stores.remove(dir) }
    do {
        let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.none))
        _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(0..<n))
        try store.context.save()
        try store.close()
    }
    let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.always))
    let sources = Importing.sources(n / 2..<n + n / 2, generation: 1)
    let start = ContinuousClock.now
    let objects = try measuredImportExisting(store.context, sources)
    let imported = seconds(since: start)
    try store.context.save()
    let total = seconds(since: start)
    print(
        "import \(n) (half updates) into a store of \(n): \(String(format: "%.3f", imported)) s import + save (fsync) = \(String(format: "%.3f", total)) s; \(objects.count) objects"
    )
    try store.close()
}

@inline(never)
func measuredImportExisting(_ context: ModelContext, _ sources: [PersonSource]) throws -> [UniquePerson] {
    try context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
}

/// Time per upsert with `present` objects in the context: 100k upserts of existing IDs.
@inline(never)
func upsertCost(present: Int) throws -> Double {
    let context = ModelContext(schema: Importing.schema())
    _ = try context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(0..<present))
    try context.save()
    let k = 100_000
    var rng = SystemRandomNumberGenerator()
    let ids = (0..<k).map { _ in Int64.random(in: 0..<Int64(present), using: &rng) }
    let start = ContinuousClock.now
    try measuredUpserts(context, ids)
    return seconds(since: start) / Double(k)
}

/// One `upsert` per ID, each changing an existing object's score.
@inline(never)
func measuredUpserts(_ context: ModelContext, _ ids: [Int64]) throws {
    for (i, id) in ids.enumerated() {
        try context.upsert(UniquePerson.self, where: \.id, equals: id) { $0.score = Double(i) }
    }
}

@inline(never)
func upsertScalingPhase() throws {
    var small: [Double] = [], large: [Double] = []
    var bulkSmall: [Double] = [], bulkLarge: [Double] = []
    for _ in 0..<3 {
        small.append(try upsertCost(present: 10_000))
        large.append(try upsertCost(present: 1_000_000))
        bulkSmall.append(try bulkUpsertCost(present: 10_000))
        bulkLarge.append(try bulkUpsertCost(present: 1_000_000))
    }
    let s = small.sorted()[1], l = large.sorted()[1]
    print(
        "upsert: \(String(format: "%.0f", s * 1e9)) ns with 10k present, \(String(format: "%.0f", l * 1e9)) ns with 1M present; ratio \(String(format: "%.2f", l / s)) (median of 3)"
    )
    let bs = bulkSmall.sorted()[1], bl = bulkLarge.sorted()[1]
    print(
        "upsert in importUniqueObjects: \(String(format: "%.0f", bs * 1e9)) ns with 10k present, \(String(format: "%.0f", bl * 1e9)) ns with 1M present; ratio \(String(format: "%.2f", bl / bs)) (median of 3)"
    )
}

/// Time per upsert when 10k upserts of distinct random existing IDs come as one importUniqueObjects
/// (its lookups prefetch the IDs ahead; single `upsert` calls cannot).
@inline(never)
func bulkUpsertCost(present: Int) throws -> Double {
    let context = ModelContext(schema: Importing.schema())
    _ = try context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(0..<present))
    try context.save()
    // 10k distinct IDs in random order, whatever the store size: the same batch (duplicates
    // would make one case cheaper per source, a larger batch would spread the import's fixed
    // costs thinner), so only where the objects lie differs.
    let ids = (0..<present).shuffled().prefix(10_000)
    let k = ids.count
    let sources = ids.map { PersonSource($0, generation: 1 + $0 % 7) }
    let start = ContinuousClock.now
    _ = try context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
    return seconds(since: start) / Double(k)
}

/// A first import of n sources where every ID appears twice.
@inline(never)
func importDuplicatesPhase() throws {
    let context = ModelContext(schema: Importing.schema())
    let sources = Importing.sources(0..<n) + Importing.sources(0..<n, generation: 1)
    let start = ContinuousClock.now
    let objects = try context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
    let s = seconds(since: start)
    print(
        "first import of \(sources.count) sources, every ID twice: \(String(format: "%.3f", s)) s, \(String(format: "%.2f", Double(sources.count) / s / 1e6))M sources/s; \(objects.count) objects"
    )
}

// MARK: Relationships

func measuredCascadeDelete(_ context: ModelContext, _ home: Household) { context.delete(home) }
func measuredCascadeRollback(_ context: ModelContext) { context.rollback() }

/// Cascade-deletes a household with n residents and rolls it back, three times.
func cascadePhase() throws {
    let (context, home) = try Households.savedContext(children: n)
    _ = home.residents.count  // the first use builds the to-many index
    for _ in 0..<3 {
        time("cascade-delete a parent with \(n) children") { measuredCascadeDelete(context, home) }
        time("rollback of that cascade") { measuredCascadeRollback(context) }
        time("first read of the to-many after the rollback (rebuilds its index)") { _ = home.residents.count }
    }
    print("residents after rollback: \(home.residents.count)")
}

// MARK: Memory under churn

/// `churn DIR n`: n people inserted and saved, nine in ten deleted and saved, then compacted;
/// `survivors DIR n`: only the n / 10 that survive the churn (the same objects) inserted and
/// saved, then compacted. Each prints the resident set after the compaction, then the store is
/// closed; `open-rss DIR` opens it in a fresh process, reads every object and prints the
/// resident set. The two give the memory a store keeps for the serials its deleted objects
/// used, against a store that never had them.
func churnPhase(_ directory: URL, survivorsOnly: Bool) throws {
    let store = try Stores.open(directory, durability: .none)
    let context = store.context
    var people: [Person] = []
    for i in 0..<n where !survivorsOnly || i % 10 == 0 {
        let p = try context.insert(Person.self)
        People.fill(p, i)
        people.append(p)
    }
    try context.save()
    if !survivorsOnly {
        for p in people where p.id % 10 != 0 { context.delete(p) }
        try context.save()
    }
    people = []
    let start = ContinuousClock.now
    try store.compact()
    let compactSeconds = (ContinuousClock.now - start) / .seconds(1)
    let resident = residentSetSize()
    // glibc's malloc_trim (malloc.h is not in the Glibc module), looked up by name.
    if let trim = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim").map({
        unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self)
    }) {
        _ = trim(0)
    }
    print("compact \(String(format: "%.3f", compactSeconds)) s")
    // OBJECTGRAPH_MALLOC_STATS=1: glibc's per-arena bytes in use against bytes from the system
    // (on standard error), which tells live memory from a fragmented heap.
    if ProcessInfo.processInfo.environment["OBJECTGRAPH_MALLOC_STATS"] != nil,
        let stats = dlsym(dlopen(nil, RTLD_NOW), "malloc_stats").map({
            unsafeBitCast($0, to: (@convention(c) () -> Void).self)
        })
    {
        stats()
    }
    print(
        "rss-after-compact \(resident >> 10) KiB, after malloc_trim \(residentSetSize() >> 10) KiB, objects \(try context.fetchCount(FetchDescriptor<Person>()))"
    )
    try store.close()
}

/// `read-all DIR`: peer-comparison's `cold-read` split into its three steps (open, every
/// instance made, every attribute read), then the reads again over the same instances.
func readAllPhase(_ directory: URL) throws {
    let start = ContinuousClock.now
    let store = try Stores.open(directory, durability: .none, schema: Importing.schema())
    let opened = seconds(since: start)
    let made = ContinuousClock.now
    let people = try measuredObjects(store.context)
    let making = seconds(since: made)
    var reads: [Double] = []
    var checksum = 0.0
    for _ in 0..<3 {
        let read = ContinuousClock.now
        checksum += AttributeSums(readingEveryAttributeOf: people).checksum
        reads.append(seconds(since: read))
    }
    let ms = { (s: Double) in String(format: "%.1f ms", s * 1e3) }
    print(
        "open \(ms(opened)), objects(of:) \(ms(making)), reads \(reads.map(ms).joined(separator: " / ")) (first / again / again); \(people.count) objects, checksum \(checksum)"
    )
    withExtendedLifetime(store) {}
}

/// One person as a plain value, as SQLite's row cursor fills one.
struct PersonValue: Decodable {
    var id: Int64
    var name: String
    var email: String
    var age: Int
    var city: String
    var score: Double
}

/// `read-values DIR`: open, then every person read as a `PersonValue` into an array.
func readValuesPhase(_ directory: URL) throws {
    let start = ContinuousClock.now
    let store = try Stores.open(directory, durability: .none, schema: Importing.schema())
    let opened = seconds(since: start)
    var reads: [Double] = []
    var count = 0
    for _ in 0..<3 {
        let read = ContinuousClock.now
        count = try measuredValues(store.context).count
        reads.append(seconds(since: read))
    }
    let ms = { (s: Double) in String(format: "%.1f ms", s * 1e3) }
    print("open \(ms(opened)), values \(reads.map(ms).joined(separator: " / ")); \(count) values")
}

@inline(never)
func measuredValues(_ context: ModelContext) throws -> [PersonValue] {
    var values: [PersonValue] = []
    try context.forEach(FetchDescriptor<UniquePerson>(), as: PersonValue.self) { values.append($0) }
    return values
}

/// `read-rows DIR`: open, then every person read through a row loop into an array of
/// `PersonValue`, as SQLite's row cursor fills one.
func readRowsPhase(_ directory: URL) throws {
    let start = ContinuousClock.now
    let store = try Stores.open(directory, durability: .none, schema: Importing.schema())
    let opened = seconds(since: start)
    var reads: [Double] = []
    var count = 0
    for _ in 0..<3 {
        let read = ContinuousClock.now
        count = try measuredRows(store.context).count
        reads.append(seconds(since: read))
    }
    var sums: [Double] = []
    var checksum = 0.0
    for _ in 0..<3 {
        let read = ContinuousClock.now
        checksum = try measuredRowSums(store.context)
        sums.append(seconds(since: read))
    }
    let ms = { (s: Double) in String(format: "%.1f ms", s * 1e3) }
    print(
        "open \(ms(opened)), rows into an array \(reads.map(ms).joined(separator: " / ")), rows summed \(sums.map(ms).joined(separator: " / ")); \(count) values, checksum \(checksum)"
    )
}

@inline(never)
func measuredRows(_ context: ModelContext) throws -> [PersonValue] {
    var values: [PersonValue] = []
    try context.forEachRow(FetchDescriptor<UniquePerson>(), columns: RowSums.columns) { row in
        values.append(
            PersonValue(
                id: try row[0], name: try row[1], email: try row[2], age: try row[3], city: try row[4],
                score: try row[5]))
    }
    return values
}

/// `read-snapshot DIR`: open as an `AsyncStore`, then every person of its snapshot read with a
/// row loop and summed, as values summed, and as instances summed.
func readSnapshotPhase(_ directory: URL) throws {
    let store = try AsyncStore(at: directory, schema: Importing.schema(), options: Stores.options(.none))
    let snapshot = store.snapshot
    var rows: [Double] = [], values: [Double] = [], objects: [Double] = []
    var checksums: Set<Double> = []
    for _ in 0..<3 {
        var t = ContinuousClock.now
        checksums.insert(try measuredSnapshotRows(snapshot))
        rows.append(seconds(since: t))
        t = ContinuousClock.now
        checksums.insert(try measuredSnapshotValues(snapshot))
        values.append(seconds(since: t))
        t = ContinuousClock.now
        checksums.insert(
            AttributeSums(readingEveryAttributeOf: try snapshot.fetch(FetchDescriptor<UniquePerson>())).checksum)
        objects.append(seconds(since: t))
    }
    let ms = { (s: [Double]) in s.map { String(format: "%.1f ms", $0 * 1e3) }.joined(separator: " / ") }
    print("snapshot: rows \(ms(rows)), values \(ms(values)), instances \(ms(objects)); checksums \(checksums.sorted())")
}

@inline(never)
func measuredSnapshotRows(_ snapshot: StoreSnapshot) throws -> Double {
    var sums = RowSums()
    try snapshot.forEachRow(FetchDescriptor<UniquePerson>(), columns: RowSums.columns) { try sums.add($0) }
    return sums.checksum
}

@inline(never)
func measuredSnapshotValues(_ snapshot: StoreSnapshot) throws -> Double {
    var ids: Int64 = 0, ages = 0, score = 0.0, bytes = 0
    try snapshot.forEach(FetchDescriptor<UniquePerson>(), as: PersonValue.self) { p in
        ids &+= p.id
        bytes &+= p.name.utf8.count &+ p.email.utf8.count &+ p.city.utf8.count
        ages &+= p.age
        score += p.score
    }
    return Double(ids) + Double(ages) + score + Double(bytes)
}

/// The six attributes of people read from rows and summed, as ``AttributeSums`` sums
/// instances' attributes.
struct RowSums {
    static var columns: [PartialKeyPath<UniquePerson>] { [\.id, \.name, \.email, \.age, \.city, \.score] }
    var ids: Int64 = 0, ages = 0, score = 0.0, bytes = 0

    /// Adds `row`, read with ``columns``.
    @inline(__always)
    mutating func add(_ row: borrowing ObjectRow) throws {
        ids &+= try row[0] as Int64
        bytes &+= (try row[1] as String).utf8.count &+ (try row[2] as String).utf8.count
        ages &+= try row[3] as Int
        bytes &+= (try row[4] as String).utf8.count
        score += try row[5] as Double
    }

    var checksum: Double { Double(ids) + Double(ages) + score + Double(bytes) }
}

/// Every attribute of every person read through a row loop and summed.
@inline(never)
func measuredRowSums(_ context: ModelContext) throws -> Double {
    var sums = RowSums()
    try context.forEachRow(FetchDescriptor<UniquePerson>(), columns: RowSums.columns) { try sums.add($0) }
    return sums.checksum
}

@inline(never)
func measuredObjects(_ context: ModelContext) throws -> [UniquePerson] {
    try context.objects(of: UniquePerson.self)
}

func openRSSPhase(_ directory: URL) throws {
    let before = residentSetSize()
    let store = try Stores.open(directory, durability: .none)
    var total = 0.0
    for p in try store.context.fetch(FetchDescriptor<Person>()) { total += p.score }
    print("rss-after-open \(residentSetSize() >> 10) KiB (before open \(before >> 10) KiB), checksum \(total)")
    try store.close()
}

do {
    switch phase {
    case "churn", "survivors":
        try churnPhase(URL(fileURLWithPath: args[3]), survivorsOnly: phase == "survivors")
    case "read-all":
        try readAllPhase(URL(fileURLWithPath: args[2]))
    case "open-rss":
        try openRSSPhase(URL(fileURLWithPath: args[2]))
    case "cascade":
        try cascadePhase()
    case "import-empty":
        try importEmptyPhase()
    case "import-existing":
        try importExistingPhase()
    case "upsert-scaling":
        try upsertScalingPhase()
    case "read-snapshot":
        try readSnapshotPhase(URL(fileURLWithPath: args[2]))
    case "read-rows":
        try readRowsPhase(URL(fileURLWithPath: args[2]))
    case "read-values":
        try readValuesPhase(URL(fileURLWithPath: args[2]))
    case "upserts":
        print("upsert: \(String(format: "%.0f", try upsertCost(present: n) * 1e9)) ns with \(n) present")
    case "import-duplicates":
        try importDuplicatesPhase()
    case "import":
        try importEmptyPhase()
        try importExistingPhase()
        try upsertScalingPhase()
        try importDuplicatesPhase()
    case "save":
        try savePhase()
    case "reopen":
        try reopenPhase()
    case "saves-none":
        try savesPhase(.none, count: k ?? 100_000)
    case "saves-always":
        try savesPhase(.always, count: k ?? 5_000)
    case "fsync":
        fsyncPhase()
    case "compact":
        try compactPhase()
    case "store":
        try savePhase()
        try reopenPhase()
        try savesPhase(.none, count: k ?? 100_000)
        fsyncPhase()
        try savesPhase(.always, count: 5_000)
        try compactPhase()
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
        print(
            "VmRSS \(after >> 20) MB after inserting and saving \(n) (before: \(before >> 20) MB, +\((after - before) >> 20) MB)"
        )
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
