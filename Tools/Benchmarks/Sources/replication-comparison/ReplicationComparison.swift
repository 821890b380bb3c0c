// Journal shipping to NATS JetStream: what it costs the writer, how far a follower lags, and
// how long a restore from the stream takes against a local cold start.
//
//   swift run -c release replication-comparison [--only small,async,bulk,lag,restore] [--count 1000000]
//       [--small-rounds 7] [--small-saves 1000] [--async-rounds 5] [--async-commits 1000]
//       [--bulk-rounds 3] [--lag-seconds 12] [--lag-rates 5000,1000] [--lag-workers 16]
//       [--restore-transactions 1000] [--restore-size 100]
//
// Starts Debian's nats-server (JetStream, file store in a temporary directory) on a free
// loopback port, and stops it at the end. Every store and stream is new.
//
// 1. small: one-record saves with `.always` durability, one writer: an ObjectStore against a
//    ReplicatedStore (asynchronous policy), interleaved rounds (the order alternates), median
//    saves/s; after each shipping round the shipper is drained, untimed, so that no round runs
//    while the other's shipper works.
// 2. async: `tasks` tasks committing one-record transactions on an AsyncStore with group commit,
//    with and without a JournalShipper attached (prepare + attach), interleaved rounds.
// 3. bulk: `count` objects inserted and saved in one transaction, ObjectStore against
//    ReplicatedStore; the time until save() returns, and until the shipper finished.
// 4. lag: an AsyncStore with group commit and a shipper, paced at each of `rates` one-record
//    transactions per second (the lower rate shows the lag when the shipper keeps up) by `workers` tasks, and a Follower in the same process. Each
//    transaction's journal sequence is known from the order its body ran on the actor (the
//    body and its save run there without a suspension between them). A thread polls, every
//    ~100 µs, the shipper's shipped sequence and the follower's applied sequence (set once
//    the follower's snapshot holds the record); the lag of a record is the time it was seen
//    applied minus the time its writer's perform returned.
// 5. restore: `count` objects saved, `ReplicatedStore.compact()` (ships the base), then
//    `restore-transactions` transactions of `restore-size` updates; then Restore.run(at:
//    .latest) into a new directory against ObjectStore.open of the writer's directory,
//    interleaved, 3 each.
//
// Prints a Markdown report with the load average before and after each part.

import Foundation
import ObjectGraph
import ObjectGraphReplication
import PeopleWorkload
import Synchronization

struct Options {
    var parts: Set<String> = ["small", "async", "bulk", "lag", "restore"]
    var count = 1_000_000
    var smallRounds = 7
    var smallSaves = 1_000
    var asyncRounds = 9
    var asyncTasks = 8
    var asyncCommits = 1_000
    var bulkRounds = 9
    var lagSeconds = 12.0
    var lagRates = [5_000.0, 1_000.0]
    var lagWorkers = 16
    var restoreTransactions = 1_000
    var restoreSize = 100
    var restoreRounds = 3

    init() {
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let a = args.next() {
            switch a {
            case "--only": parts = Set((args.next() ?? "").split(separator: ",").map(String.init))
            case "--count": count = args.next().flatMap(Int.init) ?? count
            case "--small-rounds": smallRounds = args.next().flatMap(Int.init) ?? smallRounds
            case "--small-saves": smallSaves = args.next().flatMap(Int.init) ?? smallSaves
            case "--async-rounds": asyncRounds = args.next().flatMap(Int.init) ?? asyncRounds
            case "--async-tasks": asyncTasks = args.next().flatMap(Int.init) ?? asyncTasks
            case "--async-commits": asyncCommits = args.next().flatMap(Int.init) ?? asyncCommits
            case "--bulk-rounds": bulkRounds = args.next().flatMap(Int.init) ?? bulkRounds
            case "--lag-seconds": lagSeconds = args.next().flatMap(Double.init) ?? lagSeconds
            case "--lag-rates": lagRates = (args.next() ?? "").split(separator: ",").compactMap { Double($0) }
            case "--lag-workers": lagWorkers = args.next().flatMap(Int.init) ?? lagWorkers
            case "--restore-transactions": restoreTransactions = args.next().flatMap(Int.init) ?? restoreTransactions
            case "--restore-size": restoreSize = args.next().flatMap(Int.init) ?? restoreSize
            case "--restore-rounds": restoreRounds = args.next().flatMap(Int.init) ?? restoreRounds
            default: print("unknown argument \(a)")
            }
        }
    }
}

// MARK: Helpers

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        ?? "?"
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func f(_ x: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", x) }

func list(_ xs: [Double], _ digits: Int = 0) -> String { xs.map { f($0, digits) }.joined(separator: ", ") }

/// Monotonic nanoseconds (CLOCK_MONOTONIC), comparable across threads.
@inline(__always) func nanos() -> Int64 { Int64(DispatchTime.now().uptimeNanoseconds) }

/// CPU seconds (user + system) from a /proc `stat` file (clock ticks: 10 ms resolution).
func cpuSeconds(stat path: String) -> Double {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8), let close = text.lastIndex(of: ")") else {
        return 0
    }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12 else { return 0 }
    return ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The IDs of this process's threads.
func threadIDs() -> Set<String> { Set((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []) }

/// CPU seconds of the threads `ids` that are still alive.
func threadCPU(_ ids: Set<String>) -> Double {
    ids.reduce(0) { $0 + cpuSeconds(stat: "/proc/self/task/\($1)/stat") }
}

/// Runs `body` and returns what it returns with the threads it started (a shipper's thread and
/// its NATS connection's; Foundation leaves thread names unset on Linux, so they are found so).
func startingThreads<R>(_ body: () throws -> R) rethrows -> (R, Set<String>) {
    let before = threadIDs()
    let result = try body()
    return (result, threadIDs().subtracting(before))
}

/// CPU seconds of this whole process.
func processCPU() -> Double { cpuSeconds(stat: "/proc/self/stat") }

/// A stream name no other part uses.
func freshStream(_ label: String) -> String { "BENCH_\(label.uppercased())_\(UInt32.random(in: 0 ... .max))" }

func person(_ context: ModelContext, _ id: Int) throws {
    let source = PersonSource(id)
    _ = try context.insert(UniquePerson.self) {
        $0.id = source.id
        $0.name = source.name
        $0.email = source.email
        $0.age = source.age
        $0.city = source.city
        $0.score = source.score
    }
}

/// Per-record timestamps, written by one thread or task per slot, read after they joined.
final class Timeline: @unchecked Sendable {
    let count: Int
    let slots: UnsafeMutablePointer<Int64>

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        slots.initialize(repeating: 0, count: count)
    }

    deinit { slots.deallocate() }

    subscript(i: Int) -> Int64 {
        get { slots[i] }
        set { slots[i] = newValue }
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

final class StopFlag: Sendable {
    let stopped = Atomic<Bool>(false)
}

/// Runs `tasks` tasks of `commits` calls of `commit(task, i)`; returns transactions per second.
func measure(
    tasks: Int, commits: Int, _ commit: @escaping @Sendable (Int, Int) async throws -> Void
) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for t in 0..<tasks {
            group.addTask {
                for i in 0..<commits { try await commit(t, i) }
            }
        }
        try await group.waitForAll()
    }
    return Double(tasks * commits) / seconds(since: start)
}

// MARK: 1. One writer, one-record saves

func smallSaves(_ o: Options, server: NATSProcess) throws {
    print("## 1a. One writer, one-record saves with `.always` durability\n")
    print(
        "ObjectStore against ReplicatedStore (asynchronous policy) on the same disk, and an ObjectStore whose `onDurable` drops the records, all open throughout; \(o.smallRounds) interleaved rounds of \(o.smallSaves) saves each (the order rotates); after each shipping round the shipper is drained, untimed. Load average before: \(loadAverage())\n"
    )
    let plainDir = Stores.temporaryDirectory("small-plain"), shipDir = Stores.temporaryDirectory("small-ship")
    let copyDir = Stores.temporaryDirectory("small-copy")
    defer {
        Stores.remove(plainDir)
        Stores.remove(shipDir)
        Stores.remove(copyDir)
    }
    let target = ReplicationTarget(servers: [server.url], stream: freshStream("small"))
    let plain = try ObjectStore.open(at: plainDir, schema: Importing.schema(), options: Stores.options(.always))
    let (replicated, shipperThreads) = try startingThreads {
        try ReplicatedStore.open(
            at: shipDir, schema: Importing.schema(), options: Stores.options(.always), target: target)
    }
    let shipperCPU = { threadCPU(shipperThreads) }
    // The records handed over as a shipping store hands them (copied, re-sealed), to no one.
    var copyOptions = Stores.options(.always)
    copyOptions.journal.onDurable = { _ in }
    let copying = try ObjectStore.open(at: copyDir, schema: Importing.schema(), options: copyOptions)
    var next = 0
    func run(_ context: ModelContext, _ n: Int) throws -> Double {
        let start = ContinuousClock.now
        for _ in 0..<n {
            try person(context, next)
            try context.save()
            next += 1
        }
        return Double(n) / seconds(since: start)
    }
    // Warm-up: the schema record, the first segment, the connection.
    _ = try run(plain.context, 100)
    _ = try run(replicated.context, 100)
    _ = try run(copying.context, 100)
    try replicated.shipper.waitShipped(through: replicated.store.stats.lastSequence, timeout: .seconds(30))
    var plainRates: [Double] = [], shipRates: [Double] = [], copyRates: [Double] = [], backlogs: [Double] = [],
        drains: [Double] = []
    var shipperSeconds = 0.0, serverSeconds = 0.0, writerProcessSeconds = 0.0, plainProcessSeconds = 0.0
    for round in 0..<o.smallRounds {
        func plainRound() throws {
            let p0 = processCPU()
            plainRates.append(try run(plain.context, o.smallSaves))
            plainProcessSeconds += processCPU() - p0
        }
        func shippingRound() throws {
            let c0 = shipperCPU(), s0 = server.cpuSeconds, p0 = processCPU()
            shipRates.append(try run(replicated.context, o.smallSaves))
            backlogs.append(Double(replicated.store.stats.lastSequence - replicated.shipper.status.shippedSequence))
            let t = ContinuousClock.now
            try replicated.shipper.waitShipped(through: replicated.store.stats.lastSequence, timeout: .seconds(60))
            drains.append(seconds(since: t) * 1000)
            shipperSeconds += shipperCPU() - c0
            serverSeconds += server.cpuSeconds - s0
            writerProcessSeconds += processCPU() - p0
        }
        func copyRound() throws { copyRates.append(try run(copying.context, o.smallSaves)) }
        let order: [() throws -> Void] = [plainRound, shippingRound, copyRound]
        for i in 0..<3 { try order[(round + i) % 3]() }
    }
    let status = replicated.shipper.status
    try copying.close()
    try plain.close()
    try replicated.close()
    // Each round runs the three writers back to back: the cost is the median of the rounds'.
    let pairCosts = zip(shipRates, plainRates).map { 1 - $0 / $1 }
    let cost = median(pairCosts)
    print("| writer | saves/s (median) | rounds |\n|---|---|---|")
    print("| ObjectStore, `.always` | \(f(median(plainRates))) | \(list(plainRates)) |")
    print("| ReplicatedStore, `.always`, asynchronous shipping | \(f(median(shipRates))) | \(list(shipRates)) |")
    print(
        "| ObjectStore, `.always`, `onDurable` set to a sink that drops the records (the copy a shipping store makes, nothing shipped) | \(f(median(copyRates))) | \(list(copyRates)) |\n"
    )
    let shipped = Double(o.smallRounds * o.smallSaves)
    print(
        "Shipping costs the writer \(f(cost * 100, 1))% of its save rate, the median of each round's (\(pairCosts.map { f($0 * 100, 1) + "%" }.joined(separator: ", "))); the medians of the rates give \(f((1 - median(shipRates) / median(plainRates)) * 100, 1))% (target ≤ 10%: \(cost <= 0.10 ? "met" : "missed")); the record copy alone \(f((1 - median(copyRates) / median(plainRates)) * 100, 1))%. Records not yet shipped when a round's last save returned: \(list(backlogs)); the drain after it took \(list(drains, 1)) ms. Messages published: \(status.messagesPublished). CPU per shipped record (rounds and drains; 10 ms clock ticks): the shipper's threads (its own and its NATS connection's) \(f(shipperSeconds / shipped * 1e6)) µs, nats-server \(f(serverSeconds / shipped * 1e6)) µs; this process per save \(f(writerProcessSeconds / shipped * 1e6)) µs with shipping against \(f(plainProcessSeconds / shipped * 1e6)) µs without.\n"
    )
    print("Load average after: \(loadAverage())\n")
}

// MARK: 2. Group commit, eight tasks

func groupCommitSaves(_ o: Options, server: NATSProcess) async throws {
    print("## 1b. AsyncStore with group commit, \(o.asyncTasks) tasks\n")
    print(
        "\(o.asyncTasks) tasks × \(o.asyncCommits) one-record transactions, `.always` (group commit), a new store per round; with shipping: a JournalShipper prepared the options and is attached to `store.shippingSource`. \(o.asyncRounds) interleaved rounds (the order alternates); the shipper is drained after the timed part. Load average before: \(loadAverage())\n"
    )
    var plainRates: [Double] = [], shipRates: [Double] = [], backlogs: [Double] = [], drains: [Double] = [],
        perSync: [Double] = []
    var shipRatesDuring: [Double] = [], drainRates: [Double] = [], shipperSeconds = 0.0, serverSeconds = 0.0
    func plainRound() async throws {
        let dir = Stores.temporaryDirectory("async-plain")
        defer { Stores.remove(dir) }
        let store = try AsyncStore(at: dir, schema: Importing.schema(), options: Stores.options(.always))
        plainRates.append(
            try await measure(tasks: o.asyncTasks, commits: o.asyncCommits) { t, i in
                try await store.perform { context in try person(context, t * 1_000_000 + i) }
            })
        try await store.close()
    }
    func shippingRound() async throws {
        let dir = Stores.temporaryDirectory("async-ship")
        defer { Stores.remove(dir) }
        var options = Stores.options(.always)
        let (shipper, connectionThreads) = try startingThreads {
            try JournalShipper(target: ReplicationTarget(servers: [server.url], stream: freshStream("async")))
        }
        shipper.prepare(&options)
        let store = try AsyncStore(at: dir, schema: Importing.schema(), options: options)
        let ((), shipperThread) = try startingThreads { try shipper.attach(store.shippingSource) }
        let shipperCPU = { threadCPU(connectionThreads.union(shipperThread)) }
        let c0 = shipperCPU(), s0 = server.cpuSeconds
        let first = store.shippingSource.lastSequence
        let t0 = ContinuousClock.now
        shipRates.append(
            try await measure(tasks: o.asyncTasks, commits: o.asyncCommits) { t, i in
                try await store.perform { context in try person(context, t * 1_000_000 + i) }
            })
        let timed = seconds(since: t0)
        let last = store.shippingSource.lastSequence
        let shippedThen = shipper.status.shippedSequence
        backlogs.append(Double(last - shippedThen))
        shipRatesDuring.append(Double(shippedThen - first) / timed)
        let t = ContinuousClock.now
        try shipper.waitShipped(through: last, timeout: .seconds(60))
        drains.append(seconds(since: t) * 1000)
        drainRates.append(Double(last - shippedThen) / seconds(since: t))
        shipperSeconds += shipperCPU() - c0
        serverSeconds += server.cpuSeconds - s0
        let stats = store.groupCommitStatistics
        perSync.append(Double(stats.transactions) / Double(max(1, stats.syncs)))
        shipper.stop()
        try await store.close()
    }
    for round in 0..<o.asyncRounds {
        if round % 2 == 0 {
            try await plainRound()
            try await shippingRound()
        } else {
            try await shippingRound()
            try await plainRound()
        }
    }
    // The rounds drift (the file system warms up: 16k to 28k transactions/s within one run),
    // so the cost is the median over the rounds of each round's pair, run back to back.
    let pairCosts = zip(shipRates, plainRates).map { 1 - $0 / $1 }
    let cost = median(pairCosts)
    print("| writer | transactions/s (median) | rounds |\n|---|---|---|")
    print("| AsyncStore, group commit | \(f(median(plainRates))) | \(list(plainRates)) |")
    print("| AsyncStore, group commit, JournalShipper attached | \(f(median(shipRates))) | \(list(shipRates)) |\n")
    print(
        "Shipping costs the writers \(f(cost * 100, 1))% of their commit rate, the median of each round's pair (\(pairCosts.map { f($0 * 100, 1) + "%" }.joined(separator: ", "))); the medians of the rates give \(f((1 - median(shipRates) / median(plainRates)) * 100, 1))% (target ≤ 10%: \(cost <= 0.10 ? "met" : "missed")). With shipping: \(f(median(perSync), 1)) transactions per fdatasync (median); records not yet shipped when the last commit returned: \(list(backlogs)); the drain after it took \(list(drains, 1)) ms. The shipper's rate: \(list(shipRatesDuring)) records/s while the writers ran, \(list(drainRates)) records/s draining alone. CPU per shipped record (10 ms clock ticks): the shipper's threads \(f(shipperSeconds / Double(o.asyncRounds * o.asyncTasks * o.asyncCommits) * 1e6)) µs, nats-server \(f(serverSeconds / Double(o.asyncRounds * o.asyncTasks * o.asyncCommits) * 1e6)) µs.\n"
    )
    print("Load average after: \(loadAverage())\n")
}

// MARK: 3. Bulk save

func bulkSave(_ o: Options, server: NATSProcess) throws {
    print("## 1c. Bulk save of \(o.count) objects\n")
    print(
        "\(o.count) UniquePerson objects inserted (importUniqueObjects from prepared sources) and saved in one transaction, `.always`, a new store per round; ObjectStore against ReplicatedStore (asynchronous policy, 1 MiB messages), and an ObjectStore whose `onDurable` drops the records. \(o.bulkRounds) interleaved rounds (the order rotates). Load average before: \(loadAverage())\n"
    )
    let sources = Importing.sources(0..<o.count)
    var plainSave: [Double] = [], shipSave: [Double] = [], plainTotal: [Double] = [], shipTotal: [Double] = []
    var shipped: [Double] = [], messages: [Double] = [], journalBytes: [Double] = [], copySave: [Double] = []
    func plainRound() throws {
        let dir = Stores.temporaryDirectory("bulk-plain")
        defer { Stores.remove(dir) }
        let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.always))
        let t0 = ContinuousClock.now
        _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
        let t1 = ContinuousClock.now
        try store.context.save()
        plainSave.append(seconds(since: t1))
        plainTotal.append(seconds(since: t0))
        journalBytes.append(Double(store.stats.bytesOnDisk))
        try store.close()
    }
    func copyRound() throws {
        let dir = Stores.temporaryDirectory("bulk-copy")
        defer { Stores.remove(dir) }
        var options = Stores.options(.always)
        options.journal.onDurable = { _ in }
        let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: options)
        _ = try store.context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
        let t1 = ContinuousClock.now
        try store.context.save()
        copySave.append(seconds(since: t1))
        try store.close()
    }
    func shippingRound() throws {
        let dir = Stores.temporaryDirectory("bulk-ship")
        defer { Stores.remove(dir) }
        let target = ReplicationTarget(servers: [server.url], stream: freshStream("bulk"))
        let replicated = try ReplicatedStore.open(
            at: dir, schema: Importing.schema(), options: Stores.options(.always), target: target)
        let t0 = ContinuousClock.now
        _ = try replicated.context.importUniqueObjects(UniquePerson.self, sourceArray: sources)
        let t1 = ContinuousClock.now
        try replicated.context.save()
        shipSave.append(seconds(since: t1))
        shipTotal.append(seconds(since: t0))
        try replicated.shipper.waitShipped(through: replicated.store.stats.lastSequence, timeout: .seconds(300))
        shipped.append(seconds(since: t1))
        messages.append(Double(replicated.shipper.status.messagesPublished))
        try replicated.close()
    }
    for round in 0..<o.bulkRounds {
        let order: [() throws -> Void] = [plainRound, shippingRound, copyRound]
        for i in 0..<3 { try order[(round + i) % 3]() }
    }
    let cost = median(shipSave) / median(plainSave) - 1
    print("| writer | save() s (median) | rounds | insert + save s (median) | rounds |\n|---|---|---|---|---|")
    print(
        "| ObjectStore | \(f(median(plainSave), 3)) | \(list(plainSave, 3)) | \(f(median(plainTotal), 3)) | \(list(plainTotal, 3)) |"
    )
    print(
        "| ReplicatedStore | \(f(median(shipSave), 3)) | \(list(shipSave, 3)) | \(f(median(shipTotal), 3)) | \(list(shipTotal, 3)) |"
    )
    print(
        "| ObjectStore, `onDurable` set to a sink that drops the records (the copy only) | \(f(median(copySave), 3)) | \(list(copySave, 3)) | | |\n"
    )
    print(
        "Shipping adds \(f(cost * 100, 1))% to save() (target ≤ 10%: \(cost <= 0.10 ? "met" : "missed")). Shipped (acknowledged by the stream) \(f(median(shipped), 3)) s after save() began (median; \(list(shipped, 3))), in \(f(median(messages))) messages; the journal holds \(f(median(journalBytes) / 1_048_576, 1)) MiB.\n"
    )
    print("Load average after: \(loadAverage())\n")
}

// MARK: 4. Follower lag

func followerLag(_ o: Options, rate: Double, server: NATSProcess) async throws {
    let count = Int(o.lagSeconds * rate)
    print(
        "## 2. Follower lag at \(f(rate)) transactions per second\(rate == o.lagRates.first ? "" : " (below the target's rate: the lag when the shipper keeps up)")\n"
    )
    print(
        "An AsyncStore with group commit and a JournalShipper; \(count) one-record transactions paced at \(f(rate))/s for \(f(o.lagSeconds)) s by \(o.lagWorkers) tasks (transaction i starts no earlier than i / rate); a Follower (ObjectStore.follow, default options) in the same process. A thread polls the shipper's and the follower's sequences every ~100 µs. Lag = follower applied it (its snapshot holds it) − the writer's perform returned. Load average before: \(loadAverage())\n"
    )
    let writerDir = Stores.temporaryDirectory("lag-writer"), followerDir = Stores.temporaryDirectory("lag-follower")
    Stores.remove(followerDir)
    defer {
        Stores.remove(writerDir)
        Stores.remove(followerDir)
    }
    let target = ReplicationTarget(servers: [server.url], stream: freshStream("lag"))
    let (shipper, connectionThreads) = try startingThreads { try JournalShipper(target: target) }
    var options = Stores.options(.always)
    shipper.prepare(&options)
    let store = try AsyncStore(at: writerDir, schema: Importing.schema(), options: options)
    let ((), shipperThread) = try startingThreads { try shipper.attach(store.shippingSource) }
    let shipperCPU = { threadCPU(connectionThreads.union(shipperThread)) }
    for i in 0..<100 { try await store.perform { context in try person(context, 10_000_000 + i) } }
    let follower = try await ObjectStore.follow(at: followerDir, schema: Importing.schema(), source: target)
    guard await follower.waitUntilApplied(store.shippingSource.lastSequence, timeout: .seconds(30)) else {
        print("The follower did not catch up with the warm-up: \(follower.status)")
        return
    }
    let base = store.shippingSource.lastSequence
    let returned = Timeline(count: count), applied = Timeline(count: count), shippedAt = Timeline(count: count)
    let scheduled = Counter(), ordinal = Counter(), stop = StopFlag()
    let samples = SampleBox()

    // The poller: a plain thread, so that its polls do not wait for the cooperative pool.
    let pollerDone = DispatchSemaphore(value: 0)
    let poller = Thread {
        var seenApplied = base, seenShipped = base
        var iterations = 0
        while !stop.stopped.load(ordering: .relaxed) {
            let now = nanos()
            let a = follower.status.appliedSequence
            if a > seenApplied {
                for s in (seenApplied + 1)...a where s > base && s <= base + UInt64(count) {
                    applied[Int(s - base - 1)] = now
                }
                seenApplied = a
            }
            let shipperStatus = shipper.status
            let sh = shipperStatus.shippedSequence
            if sh > seenShipped {
                for s in (seenShipped + 1)...sh where s > base && s <= base + UInt64(count) {
                    shippedAt[Int(s - base - 1)] = now
                }
                seenShipped = sh
            }
            iterations += 1
            if iterations % 1000 == 0 {
                samples.maxShipperBacklog = max(samples.maxShipperBacklog, shipperStatus.backlogRecords)
                samples.maxFollowerLagMessages = max(samples.maxFollowerLagMessages, Int(follower.status.lagMessages))
            }
            usleep(100)
        }
        samples.pollerIterations = iterations
        pollerDone.signal()
    }
    poller.name = "lag poller"
    poller.start()

    let interval = 1.0 / rate
    let c0 = shipperCPU(), s0 = server.cpuSeconds, p0 = processCPU()
    let start = ContinuousClock.now
    let startNanos = nanos()
    let late = Timeline(count: count)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<o.lagWorkers {
            group.addTask {
                while true {
                    let i = scheduled.value.add(1, ordering: .relaxed).oldValue
                    if i >= count { return }
                    let due = start + .nanoseconds(Int64(Double(i) * interval * 1e9))
                    if due > .now { try await Task.sleep(until: due, clock: .continuous) }
                    late[i] = Int64(seconds(due.duration(to: .now)) * 1e9)
                    let k = try await store.perform { context in
                        let k = ordinal.value.add(1, ordering: .relaxed).oldValue
                        try person(context, 20_000_000 + k)
                        return k
                    }
                    returned[k] = nanos()
                }
            }
        }
        try await group.waitForAll()
    }
    let writerSeconds = Double(nanos() - startNanos) / 1e9
    let last = store.shippingSource.lastSequence
    let caughtUp = await follower.waitUntilApplied(base + UInt64(count), timeout: .seconds(120))
    try await Task.sleep(for: .milliseconds(20))
    stop.stopped.store(true, ordering: .relaxed)
    pollerDone.wait()
    let shipperSeconds = shipperCPU() - c0, serverSeconds = server.cpuSeconds - s0, processSeconds = processCPU() - p0
    let totalSeconds = Double(nanos() - startNanos) / 1e9
    let followerStatus = follower.status
    let present =
        try follower.store.snapshot.object(UniquePerson.self, where: \.id, equals: Int64(20_000_000 + count - 1)) != nil
    try await follower.stop()
    shipper.stop()
    try await store.close()

    var lags: [Double] = [], shipLags: [Double] = [], followLags: [Double] = [], lateness: [Double] = []
    var missing = 0
    for k in 0..<count {
        lateness.append(Double(late[k]) / 1e6)
        guard returned[k] > 0, applied[k] > 0 else {
            missing += 1
            continue
        }
        lags.append(Double(applied[k] - returned[k]) / 1e6)
        if shippedAt[k] > 0 {
            shipLags.append(Double(shippedAt[k] - returned[k]) / 1e6)
            followLags.append(Double(applied[k] - shippedAt[k]) / 1e6)
        }
    }
    lags.sort()
    shipLags.sort()
    followLags.sort()
    lateness.sort()
    let achieved = Double(count) / writerSeconds
    print(
        "Writer: \(count) transactions in \(f(writerSeconds, 2)) s = \(f(achieved)) /s achieved (asked \(f(rate))); a transaction started late by p50 \(f(percentile(lateness, 0.5), 2)) ms, p99 \(f(percentile(lateness, 0.99), 2)) ms, max \(f(lateness.last ?? 0, 2)) ms. Journal sequences \(base + 1)...\(last) (expected \(base + UInt64(count))). Follower caught up: \(caughtUp), last object present in its snapshot: \(present), records applied \(followerStatus.recordsApplied), failed: \(followerStatus.failed ?? "no"). Poller iterations: \(samples.pollerIterations) (\(f(writerSeconds * 1e6 / Double(max(1, samples.pollerIterations)), 0)) µs apart while the writer ran, or more). Largest shipper backlog seen: \(samples.maxShipperBacklog) records; largest follower lag seen: \(samples.maxFollowerLagMessages) messages.\n"
    )
    print("| ms | p50 | p90 | p99 | p99.9 | max | records |\n|---|---|---|---|---|---|---|")
    func row(_ label: String, _ xs: [Double]) {
        print(
            "| \(label) | \(f(percentile(xs, 0.5), 2)) | \(f(percentile(xs, 0.9), 2)) | \(f(percentile(xs, 0.99), 2)) | \(f(percentile(xs, 0.999), 2)) | \(f(xs.last ?? .nan, 2)) | \(xs.count) |"
        )
    }
    row("**lag: save returned → follower's snapshot holds it**", lags)
    row("of which: save returned → stream acknowledged (shipper)", shipLags)
    row("of which: stream acknowledged → follower applied", followLags)
    print("")
    // The shipper's rate over time, against its backlog (records returned to the writer, not yet
    // acknowledged by the stream).
    let shippedTimes = (0..<count).map { shippedAt[$0] }.filter { $0 > 0 }.sorted()
    let returnedTimes = (0..<count).map { returned[$0] }.filter { $0 > 0 }.sorted()
    if let lastShipped = shippedTimes.last {
        let span = Double(lastShipped - startNanos) / 1e9
        let window = max(1.0, (span / 12).rounded(.up))
        print("The shipper over time (windows of \(f(window)) s from the writer's start):\n")
        print("| window s | records shipped/s | backlog at its start |\n|---|---|---|")
        var w = 0.0
        var si = 0, ri = 0
        while w < span {
            let from = startNanos + Int64(w * 1e9), to = startNanos + Int64((w + window) * 1e9)
            while ri < returnedTimes.count && returnedTimes[ri] < from { ri += 1 }
            while si < shippedTimes.count && shippedTimes[si] < from { si += 1 }
            let backlog = ri - si
            var n = si
            while n < shippedTimes.count && shippedTimes[n] < to { n += 1 }
            print("| \(f(w))–\(f(w + window)) | \(f(Double(n - si) / window)) | \(backlog) |")
            w += window
        }
        print("")
    }
    print(
        "CPU from the writer's start until the follower caught up (\(f(totalSeconds, 1)) s, 10 ms clock ticks): the shipper's threads (its own and its NATS connection's) \(f(shipperSeconds, 2)) s (\(f(shipperSeconds / Double(count) * 1e6)) µs per record), nats-server \(f(serverSeconds, 2)) s (\(f(serverSeconds / Double(count) * 1e6)) µs per record), this whole process \(f(processSeconds, 2)) s.\n"
    )
    let met =
        percentile(lags, 0.5) <= 50 && percentile(lags, 0.99) <= 50 && (lags.last ?? .infinity) <= 50 && missing == 0
    print(
        "Target p50/p99/max ≤ 50 ms: \(met ? "met" : "missed")\(missing > 0 ? " (\(missing) records never seen applied)" : "").\n"
    )
    print("Load average after: \(loadAverage())\n")
}

/// Figures the poller thread samples, read after it stopped.
final class SampleBox: @unchecked Sendable {
    var maxShipperBacklog = 0
    var maxFollowerLagMessages = 0
    var pollerIterations = 0
}

// MARK: 5. Restore

func restore(_ o: Options, server: NATSProcess) throws {
    let updates = o.restoreTransactions * o.restoreSize
    print("## 3. Restore from the stream against a local cold start\n")
    print(
        "\(o.count) objects saved in one transaction, `ReplicatedStore.compact()` (ships the base), then \(o.restoreTransactions) transactions of \(o.restoreSize) updates (\(updates) updated objects), shipped; the writer closed. Then, interleaved \(o.restoreRounds) times each: `Restore.run(from:to:at: .latest)` into a new directory (the base from the stream, then the later records) against `ObjectStore.open` of the writer's directory (its base and later records, from the local journal, page cache warm for both). Load average before: \(loadAverage())\n"
    )
    let dir = Stores.temporaryDirectory("restore-writer")
    defer { Stores.remove(dir) }
    let target = ReplicationTarget(servers: [server.url], stream: freshStream("restore"))
    let buildStart = ContinuousClock.now
    let replicated = try ReplicatedStore.open(
        at: dir, schema: Importing.schema(), options: Stores.options(.always), target: target)
    _ = try replicated.context.importUniqueObjects(UniquePerson.self, sourceArray: Importing.sources(0..<o.count))
    try replicated.context.save()
    let t = ContinuousClock.now
    try replicated.compact(timeout: .seconds(300))
    let compactSeconds = seconds(since: t)
    for tx in 0..<o.restoreTransactions {
        for j in 0..<o.restoreSize {
            let id = Int64((tx * o.restoreSize + j) * 7 % o.count)
            try replicated.context.object(UniquePerson.self, where: \.id, equals: id)?.score += 1
        }
        try replicated.context.save()
    }
    let lastSequence = replicated.store.stats.lastSequence
    try replicated.shipper.waitShipped(through: lastSequence, timeout: .seconds(120))
    let published = replicated.shipper.status.messagesPublished
    try replicated.close()
    let buildSeconds = seconds(since: buildStart)
    let localBytes = Stores.bytesOnDisk(dir)

    var opens: [Double] = [], restores: [Double] = [], restoreReported: [Double] = [], reopen: [Double] = []
    var baseOnly: [Double] = [], restoreCPU: [Double] = [], restoreServerCPU: [Double] = []
    var reports: [Restore.Report] = []
    var checks: [String] = []
    for _ in 0..<o.restoreRounds {
        do {
            let t0 = ContinuousClock.now
            let store = try ObjectStore.open(at: dir, schema: Importing.schema(), options: Stores.options(.always))
            opens.append(seconds(since: t0))
            try store.close()
        }
        let restored = FileManager.default.temporaryDirectory.appendingPathComponent(
            "objectgraph-bench-\(getpid())-restored-\(UInt32.random(in: 0 ... .max))")
        defer { Stores.remove(restored) }
        let c0 = processCPU(), s0 = server.cpuSeconds
        let t0 = ContinuousClock.now
        let report = try Restore.run(from: target, to: restored, at: .latest)
        restores.append(seconds(since: t0))
        restoreCPU.append(processCPU() - c0)
        restoreServerCPU.append(server.cpuSeconds - s0)
        do {
            // The base alone: the same restore stopped at the record the base covers.
            let baseDir = restored.appendingPathExtension("base")
            defer { Stores.remove(baseDir) }
            let t = ContinuousClock.now
            try Restore.run(from: target, to: baseDir, at: .sequence(report.baseCovers))
            baseOnly.append(seconds(since: t))
        }
        restoreReported.append(report.seconds)
        reports.append(report)
        let t1 = ContinuousClock.now
        let store = try ObjectStore.open(at: restored, schema: Importing.schema(), options: Stores.options(.always))
        reopen.append(seconds(since: t1))
        let n = try store.context.fetchCount(FetchDescriptor<UniquePerson>())
        let updated = try store.context.object(
            UniquePerson.self, where: \.id, equals: Int64((updates - 1) * 7 % o.count))?.score
        checks.append("\(n) objects, last updated score \(updated.map { f($0, 1) } ?? "missing")")
        try store.close()
    }
    let ratio = median(restores) / median(opens)
    print(
        "Built in \(f(buildSeconds, 1)) s (compaction + shipping the base \(f(compactSeconds, 2)) s); the writer's journal ends at record \(lastSequence), \(f(Double(localBytes) / 1_048_576, 1)) MiB on disk; \(published) messages published; the server's store holds \(f(Double(server.storeBytes) / 1_048_576, 1)) MiB.\n"
    )
    print("| step | seconds (median) | rounds |\n|---|---|---|")
    print(
        "| `ObjectStore.open` of the writer's directory (local cold start) | \(f(median(opens), 3)) | \(list(opens, 3)) |"
    )
    print("| `Restore.run(at: .latest)` | \(f(median(restores), 3)) | \(list(restores, 3)) |")
    print(
        "| `Restore.run(at: .sequence(base covers))`: the base alone, no later record | \(f(median(baseOnly), 3)) | \(list(baseOnly, 3)) |"
    )
    print("| then `ObjectStore.open` of the restored directory | \(f(median(reopen), 3)) | \(list(reopen, 3)) |\n")
    print(
        "During `Restore.run(at: .latest)`: this process used \(list(restoreCPU, 2)) s of CPU and nats-server \(list(restoreServerCPU, 2)) s (10 ms clock ticks), against \(list(restores, 3)) s of wall time: the rest is waiting.\n"
    )
    let r = reports[0]
    print(
        "Restore report: base covers record \(r.baseCovers), \(r.recordsApplied) records applied after it, last record \(r.lastSequence); its own timing \(list(restoreReported, 3)) s. Restored stores: \(Set(checks).sorted().joined(separator: "; ")).\n"
    )
    print("Restore / cold start = \(f(ratio, 2))× (target ≤ 2×: \(ratio <= 2 ? "met" : "missed")).\n")
    print("Load average after: \(loadAverage())\n")
}

// MARK: Main

@main
struct ReplicationComparison {
    static func main() async throws {
        let o = Options()
        let server = try NATSProcess.start()
        defer { server.stop() }
        print("# Journal shipping to NATS JetStream\n")
        print(
            "\(NATSProcess.version) with JetStream (file store in a temporary directory on the same disk), on 127.0.0.1; asynchronous shipping policy. Load average at the start: \(loadAverage())\n"
        )
        do {
            if o.parts.contains("small") { try smallSaves(o, server: server) }
            if o.parts.contains("async") { try await groupCommitSaves(o, server: server) }
            if o.parts.contains("bulk") { try bulkSave(o, server: server) }
            if o.parts.contains("lag") {
                for rate in o.lagRates { try await followerLag(o, rate: rate, server: server) }
            }
            if o.parts.contains("restore") { try restore(o, server: server) }
        } catch {
            print("\nFailed: \(error)\n\(server.logTail())")
            throw error
        }
        print("Load average at the end: \(loadAverage())")
    }
}
