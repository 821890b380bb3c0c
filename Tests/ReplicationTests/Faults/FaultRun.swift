import Foundation
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport

/// The faults the checker injects.
enum FaultKind: String, CaseIterable, Sendable, Comparable {
    /// SIGKILL the writer.
    case writerKill = "kill -9 of the writer"
    /// SIGSTOP the writer for longer than the lease, then SIGCONT.
    case writerPause = "SIGSTOP of the writer past the lease"
    /// SIGKILL a server, then start it again on its store.
    case serverKill = "kill -9 of a server, restarted"
    /// SIGKILL the plain follower, then start it again on its directory.
    case followerKill = "kill -9 of the follower, restarted"
    /// Cut one server off from every other process, then join it again.
    case serverPartition = "partition of a server"
    /// Cut the writer off from the servers for longer than the lease, then join it again.
    case writerPartition = "partition of the writer past the lease"

    var needsNetwork: Bool { self == .serverPartition || self == .writerPartition }

    static func < (a: FaultKind, b: FaultKind) -> Bool { a.rawValue < b.rawValue }
}

/// One process of a fault run: a writer, a standby or a plain follower.
final class FaultChild: @unchecked Sendable {
    enum Role: String, Sendable { case writer, standby, follower }

    /// Unique in the run; the writer's keys start with it.
    let name: String
    let directory: URL
    let keyLog: URL
    let output: URL
    let slot: Int
    let process: Process
    private let lock = NSLock()
    private var currentRole: Role

    var role: Role {
        get { lock.withLock { currentRole } }
        set { lock.withLock { currentRole = newValue } }
    }

    init(name: String, role: Role, directory: URL, keyLog: URL, output: URL, slot: Int, process: Process) {
        self.name = name
        self.currentRole = role
        self.directory = directory
        self.keyLog = keyLog
        self.output = output
        self.slot = slot
        self.process = process
    }

    var lines: [Substring] {
        guard let data = FileManager.default.contents(atPath: output.path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
    }

    var acknowledged: [HistoryChecker.Acknowledged] { HistoryChecker.readKeyLog(keyLog) }

    var acknowledgedCount: Int {
        guard let data = FileManager.default.contents(atPath: keyLog.path) else { return 0 }
        return data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }
}

/// The outcome of a fault run and its check.
struct FaultCheckResult: Sendable {
    var rounds = 0
    var faults: [FaultKind: Int] = [:]
    var failovers = 0
    /// After each SIGKILL of the writer: milliseconds until the standby's first acknowledged save.
    var failoverMilliseconds: [Double] = []
    var fencedWriters = 0
    var acknowledgedChecked = 0
    var history = HistoryReport()
    var restoresChecked = 0
    var followersChecked = 0
    var partitionsSkipped: String?
    /// Acknowledged saves missing from the stream's final state (or held under another record).
    var lost: [String] = []
    /// Everything else that failed: the history, a prefix, a restore, a process that stopped.
    var problems: [String] = []
    /// Where the processes kept every acknowledged save and one history but not the failover
    /// API's word: an old writer that stopped with another error than `fenced`. Reported, not
    /// failed: the checker fails on lost saves and broken histories.
    var deviations: [String] = []
    /// What went otherwise than expected without failing anything (a restore tried again).
    var notes: [String] = []

    var passed: Bool { lost.isEmpty && problems.isEmpty && history.problems.isEmpty }

    var summary: String {
        var lines: [String] = []
        lines.append(
            "fault check: \(rounds) rounds; faults injected: \(faults.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", "))"
        )
        if let partitionsSkipped { lines.append("fault check: partitions skipped: \(partitionsSkipped)") }
        lines.append("fault check: failovers observed \(failovers), writers fenced \(fencedWriters)")
        if !failoverMilliseconds.isEmpty {
            let sorted = failoverMilliseconds.sorted()
            lines.append(
                "fault check: from a SIGKILL of the writer to the standby's first acknowledged save: median \(Int(sorted[sorted.count / 2])) ms, longest \(Int(sorted.last!)) ms (lease \(FaultRun.leaseMilliseconds) ms)"
            )
        }
        lines.append(
            "fault check: stream: \(history.logMessages) log and \(history.baseMessages) base messages, \(history.recordSequences.count) records (\(history.transactionSequences.count) saves), epochs \(history.epochs.isEmpty ? "none" : "\(history.epochs.count) (\(history.epochs.first!) to \(history.epochs.last!), \(history.messagesPerEpoch.values.min() ?? 0) to \(history.messagesPerEpoch.values.max() ?? 0) messages each)"), \(history.abandonedBatches) batches abandoned mid-publish"
        )
        lines.append(
            "fault check: \(acknowledgedChecked) acknowledged saves checked, \(followersChecked) follower directories, \(restoresChecked) restores"
        )
        if lost.isEmpty {
            lines.append("fault check: nothing lost")
        } else {
            lines.append(
                "fault check: LOST \(lost.count) acknowledged saves: \(lost.prefix(20).joined(separator: "; "))")
        }
        for p in (history.problems + problems).prefix(40) { lines.append("fault check: PROBLEM \(p)") }
        for d in deviations.prefix(20) { lines.append("fault check: DEVIATION \(d)") }
        for n in notes.prefix(20) { lines.append("fault check: NOTE \(n)") }
        return lines.joined(separator: "\n")
    }
}

/// A run of the fault checker: a 3-server cluster, a writer, a standby and a plain follower,
/// faults injected one round at a time, then the check of everything they left.
final class FaultRun: @unchecked Sendable {
    static var childURL: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "objectgraph-fault-child")
    }

    /// How long a server stays cut off.
    static let outageSeconds: Double = 4
    /// The writer lease's time to live: the longest a dead, paused or cut-off writer keeps the
    /// stream from the standby.
    static let leaseMilliseconds = 2000

    let network: FaultNetwork?
    let cluster: FaultCluster
    let target: ReplicationTarget
    let work: URL
    private(set) var result = FaultCheckResult()
    /// One namespace per client slot (writer, standby, follower move between them).
    private var slots: [FaultNetwork.Node?] = [nil, nil, nil]
    private var children: [FaultChild] = []
    private var incarnation = 0
    private(set) var writer: FaultChild!
    private(set) var standby: FaultChild!
    private(set) var follower: FaultChild!
    var log: (String) -> Void = { print($0) }

    /// Starts the servers (in namespaces when `partitions` and the machine allows them) and the
    /// three processes, and waits until the writer acknowledged its first saves.
    init(partitions: Bool) throws {
        if partitions {
            let made = FaultNetwork.make()
            network = made.network
            if let reason = made.reason { result.partitionsSkipped = "ip netns is not allowed here (\(reason))" }
        } else {
            network = nil
            result.partitionsSkipped = "not asked for"
        }
        do {
            cluster = try FaultCluster.start(network: network)
            if let network { slots = try (0..<3).map { try network.addNode(11 + $0) } }
        } catch {
            network?.tearDown()
            throw error
        }
        target = ReplicationTarget(
            servers: cluster.urls, stream: "F" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12),
            replicas: 3, timeout: .seconds(5))
        work = FileManager.default.temporaryDirectory.appendingPathComponent(
            "objectgraph-faults-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        writer = try spawn(.writer, slot: 0)
        try waitForAcknowledgements(writer, more: 3)
        standby = try spawn(.standby, slot: 1)
        follower = try spawn(.follower, slot: 2)
    }

    /// Stops every process, removes the namespaces, the servers and the directories.
    func tearDown() {
        for child in children { signalChild(child.process, SIGKILL) }
        cluster.stop()
        network?.tearDown()
        try? FileManager.default.removeItem(at: work)
    }

    // MARK: Processes

    private func spawn(_ role: FaultChild.Role, slot: Int, directory: URL? = nil) throws -> FaultChild {
        incarnation += 1
        let name = "\(role.rawValue.prefix(1))\(incarnation)"
        let dir = directory ?? work.appendingPathComponent("\(name)-store")
        let keyLog = work.appendingPathComponent("\(name).keys")
        let output = work.appendingPathComponent("\(name).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let servers = target.servers.joined(separator: ",")
        let arguments: [String] =
            switch role {
            case .writer: ["write", dir.path, servers, target.stream, keyLog.path, name, "\(Self.leaseMilliseconds)"]
            case .standby:
                ["standby", dir.path, servers, target.stream, keyLog.path, name, "\(Self.leaseMilliseconds)"]
            case .follower: ["follow", dir.path, servers, target.stream]
            }
        let (command, commandArguments) =
            if let network, let node = slots[slot] {
                network.command(in: node, Self.childURL.path, arguments)
            } else {
                (Self.childURL.path, arguments)
            }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        let process = try ChildProcessSpawner.shared.spawn(
            executable: command, arguments: commandArguments, log: handle)
        let child = FaultChild(
            name: name, role: role, directory: dir, keyLog: keyLog, output: output, slot: slot, process: process)
        children.append(child)
        log("fault check: started \(role.rawValue) \(name) (pid \(process.processIdentifier))")
        return child
    }

    /// Waits until `child` logged `more` acknowledged saves than it has now, or fails if it
    /// exits first or nothing comes within the event bound.
    func waitForAcknowledgements(_ child: FaultChild, more: Int) throws {
        let goal = child.acknowledgedCount + more
        try waitFor("\(child.name) to acknowledge \(more) more saves", child) { child.acknowledgedCount >= goal }
    }

    /// Waits until the writer acknowledged `more` saves. A standby that took the stream over
    /// meanwhile (a writer starved past its lease on a loaded machine is fenced as a paused one
    /// is) counts as a failover, and the wait goes on with the new writer.
    func waitForWriterProgress(more: Int) throws {
        var goal = writer.acknowledgedCount + more
        let deadline = ContinuousClock.now + eventBound
        while writer.acknowledgedCount < goal {
            if Self.promotedAt(standby) != nil {
                log("fault check: \(standby.name) took the stream over without a fault injected")
                try takeOver(faultAt: nil)
                goal = writer.acknowledgedCount + more
                continue
            }
            if !writer.process.isRunning && !Self.wasFenced(writer) {
                throw NATSServerError(
                    description:
                        "writer \(writer.name) exited (\(writer.process.terminationStatus)): \(writer.lines.suffix(5).joined(separator: " | "))"
                )
            }
            if ContinuousClock.now > deadline {
                throw NATSServerError(description: "writer \(writer.name): no save acknowledged in \(eventBound)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    private func waitFor(_ what: String, _ child: FaultChild?, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + eventBound
        while !condition() {
            if let child, !child.process.isRunning {
                throw NATSServerError(
                    description:
                        "waiting for \(what): \(child.name) exited (\(child.process.terminationStatus)): \(child.lines.suffix(5).joined(separator: " | "))"
                )
            }
            if ContinuousClock.now > deadline {
                throw NATSServerError(description: "waiting for \(what): nothing after \(eventBound)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// When a standby said it took the stream over (CLOCK_MONOTONIC), or nil.
    static func promotedAt(_ child: FaultChild) -> UInt64? {
        child.lines.first { $0.hasPrefix("promoted ") }.flatMap { UInt64($0.dropFirst(9)) }
    }

    /// Whether a writer stopped because it was fenced (exit status 3).
    static func wasFenced(_ child: FaultChild) -> Bool {
        !child.process.isRunning && child.process.terminationReason == .exit && child.process.terminationStatus == 3
    }

    /// CLOCK_MONOTONIC in nanoseconds, the clock the children stamp their events with.
    static func monotonicNanoseconds() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// The standby takes the stream over: once it said so, it is the writer. The old writer, if
    /// it still runs, must stop fenced (exit status 3) once it reaches the servers; a new
    /// standby then starts in its slot, on a fresh directory, so that failovers repeat.
    /// `faultAt` (CLOCK_MONOTONIC of a SIGKILL) times the failover.
    private func takeOver(faultAt: UInt64?) throws {
        let old = writer!
        let new = standby!
        try waitFor("standby \(new.name) to take the stream over", new) { Self.promotedAt(new) != nil }
        new.role = .writer
        writer = new
        result.failovers += 1
        try waitFor("\(new.name)'s first acknowledged save", new) { new.acknowledgedCount > 0 }
        if let faultAt, let promoted = Self.promotedAt(new), let first = new.acknowledged.first {
            let promotion = Double(promoted - faultAt) / 1e6
            let save = Double(first.nanoseconds - faultAt) / 1e6
            result.failoverMilliseconds.append(save)
            log(
                "fault check: \(new.name) took over \(Int(promotion)) ms after the kill, first acknowledged save at \(Int(save)) ms"
            )
        }
        // The old writer must stop fenced once it reaches the servers. Waited for while the new
        // writer acknowledges 300 saves (seconds): one still running then has not noticed it
        // was fenced; it is stopped, and reported as a deviation (it wrote nothing to the
        // stream, which the check shows).
        let goal = new.acknowledgedCount + 300
        try waitFor("the old writer \(old.name) to stop", new) {
            !old.process.isRunning || new.acknowledgedCount >= goal
        }
        if old.process.isRunning {
            result.deviations.append(
                "the old writer \(old.name) still ran, not fenced, after \(new.name) acknowledged 300 saves: \(old.lines.suffix(2).joined(separator: " | "))"
            )
            signalChild(old.process, SIGKILL)
        } else if Self.wasFenced(old) {
            result.fencedWriters += 1
            log("fault check: the old writer \(old.name) stopped fenced")
        } else if old.process.terminationReason != .uncaughtSignal || old.process.terminationStatus != SIGKILL {
            result.deviations.append(
                "the old writer \(old.name) stopped with status \(old.process.terminationStatus), not 3 (fenced): \(old.lines.suffix(3).joined(separator: " | "))"
            )
        }
        standby = try spawn(.standby, slot: old.slot)
    }

    // MARK: Faults

    /// The kinds this run can inject.
    var availableKinds: [FaultKind] { FaultKind.allCases.filter { !$0.needsNetwork || network != nil } }

    /// Injects one fault and waits until the writer (the same or its successor) acknowledges
    /// saves again.
    func inject(_ kind: FaultKind) throws {
        guard !kind.needsNetwork || network != nil else { return }
        result.rounds += 1
        result.faults[kind, default: 0] += 1
        log("fault check: round \(result.rounds): \(kind.rawValue)")
        switch kind {
        case .writerKill:
            let killedAt = Self.monotonicNanoseconds()
            signalChild(writer.process, SIGKILL)
            try takeOver(faultAt: killedAt)
        case .writerPause:
            // Paused until the standby took over: past the lease by construction. Resumed, the
            // old writer must find itself fenced.
            kill(writer.process.processIdentifier, SIGSTOP)
            try waitFor("standby \(standby.name) to take over from the paused writer", standby) {
                Self.promotedAt(standby) != nil
            }
            kill(writer.process.processIdentifier, SIGCONT)
            try takeOver(faultAt: nil)
        case .serverKill:
            let server = cluster.servers.randomElement()!
            server.kill()
            try waitForWriterProgress(more: 3)
            try server.launch()
            try cluster.waitUntilReady()
        case .followerKill:
            signalChild(follower.process, SIGKILL)
            follower = try spawn(.follower, slot: follower.slot, directory: follower.directory)
        case .serverPartition:
            let server = cluster.servers.randomElement()!
            try network!.cut(server.node!)
            Thread.sleep(forTimeInterval: Self.outageSeconds)
            try network!.heal(server.node!)
        case .writerPartition:
            // Cut off until the standby took over; joined again, the old writer must find
            // itself fenced.
            let node = slots[writer.slot]!
            try network!.cut(node)
            try waitFor("standby \(standby.name) to take over from the cut-off writer", standby) {
                Self.promotedAt(standby) != nil
            }
            try network!.heal(node)
            try takeOver(faultAt: nil)
        }
        // Saves go on for a while between faults: the check has a history to look at.
        try waitForWriterProgress(more: 20)
    }

    /// What every process said last and how each server is, for a failed run's report.
    func diagnostics() -> String {
        var lines = ["fault check diagnostics: stream \(target.stream), lease \(Self.leaseMilliseconds) ms"]
        for child in children.suffix(8) {
            let state =
                child.process.isRunning
                ? "running"
                : "exited \(child.process.terminationReason == .exit ? "" : "by signal ")\(child.process.terminationStatus)"
            lines.append("--- \(child.role.rawValue) \(child.name), \(state), \(child.acknowledgedCount) acknowledged:")
            lines += child.lines.suffix(12).map { "    \($0)" }
        }
        for server in cluster.servers { lines.append(server.logTail(lines: 12)) }
        return lines.joined(separator: "\n")
    }

    // MARK: The check

    /// Stops every process, makes the cluster whole, then checks what the run left: the
    /// stream's history, every acknowledged save in its final state, each follower's directory
    /// a prefix of it, and restores at `restores` sequences.
    func check(restores: Int) throws -> FaultCheckResult {
        for child in children { signalChild(child.process, SIGKILL) }
        if let network {
            for node in cluster.servers.compactMap(\.node) + slots.compactMap({ $0 }) { try network.heal(node) }
        }
        for server in cluster.servers where !server.isRunning { try server.launch() }
        try cluster.waitUntilReady()

        let messages = try Self.retryingServerErrors { try HistoryChecker.readStream(target) }
        result.history = HistoryChecker.check(messages, logSubject: target.logSubject, baseSubject: target.baseSubject)

        let latest = try restoredState(at: .latest)
        let acknowledged = children.flatMap(\.acknowledged)
        result.acknowledgedChecked = acknowledged.count
        result.lost = HistoryChecker.lost(acknowledged, in: latest)
        // Each save inserted one object whose size is its record's sequence: the final state is
        // exactly the history's saves.
        let sizes = Set(latest.values.map { UInt64($0) })
        let saves = Set(result.history.transactionSequences)
        if sizes != saves {
            result.problems.append(
                "the final state's objects are records \(sizes.subtracting(saves).sorted().prefix(10)) beyond the history's saves, and lack \(saves.subtracting(sizes).sorted().prefix(10))"
            )
        }

        // Followers (and standbys never promoted) hold a prefix of the history.
        let replicas = Dictionary(
            children.filter { $0.role != .writer }.map { ($0.directory, $0) }, uniquingKeysWith: { $1 })
        for (directory, child) in replicas.sorted(by: { $0.key.path < $1.key.path }) {
            try checkPrefix(directory, name: child.name, latest: latest, withRestore: child === follower)
        }

        // Restores at a few points of the history.
        for sequence in result.history.transactionSequences.shuffled().prefix(restores).sorted() {
            let state = try restoredState(at: .sequence(sequence))
            result.restoresChecked += 1
            let expected = latest.filter { $0.value <= Int(sequence) }
            if state != expected {
                result.problems.append(
                    "a restore at record \(sequence) holds \(state.count) objects, the history's prefix \(expected.count)"
                )
            }
        }
        return result
    }

    /// Checks that a replica's directory holds exactly the history's state at the record it
    /// applied last (its origin), optionally against a restore at that record too.
    private func checkPrefix(_ directory: URL, name: String, latest: [String: Int], withRestore: Bool) throws {
        guard FileManager.default.fileExists(atPath: directory.path) else { return }
        var options = StoreOptions()
        options.readOnly = true
        let store = try ObjectStore.open(at: directory, schema: pkgSchema, options: options)
        let applied = Self.appliedSequence(store.origin)
        let state = try Self.state(store.context)
        try store.close()
        result.followersChecked += 1
        let expected = latest.filter { $0.value <= Int(applied) }
        if state != expected {
            result.problems.append(
                "\(name)'s directory applied record \(applied) and holds \(state.count) objects; the history's prefix holds \(expected.count)"
            )
        }
        if withRestore && applied > 0 {
            result.restoresChecked += 1
            let restored = try restoredState(at: .sequence(applied))
            if restored != state {
                result.problems.append("\(name)'s directory differs from a restore at record \(applied)")
            }
        }
    }

    /// The writer sequence a replica's origin names (`Position`: "OGR1", then the record and
    /// the stream message, u64 little-endian).
    static func appliedSequence(_ origin: [UInt8]?) -> UInt64 {
        guard let origin, origin.count >= 20, origin.prefix(4).elementsEqual("OGR1".utf8) else { return 0 }
        return (0..<8).reduce(0) { $0 | UInt64(origin[4 + $1]) << (8 * UInt64($1)) }
    }

    /// A store's objects as key → size (the sequence of the record that inserted it).
    static func state(_ context: ModelContext) throws -> [String: Int] {
        Dictionary(uniqueKeysWithValues: try context.fetch(FetchDescriptor<Pkg>()).map { ($0.name, $0.size) })
    }

    /// Runs `body` again while the servers answer that they cannot (a stream whose leader is
    /// still being elected after a partition healed or a server came back), up to the event bound.
    static func retryingServerErrors<T>(_ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + eventBound
        while true {
            do { return try body() } catch {
                let fromServers = error is JetStreamError || (error as? ReplicationError)?.code == .server
                guard fromServers, ContinuousClock.now < deadline else { throw error }
                Thread.sleep(forTimeInterval: 0.25)
            }
        }
    }

    private func restoredState(at point: Restore.Target) throws -> [String: Int] {
        let directory = work.appendingPathComponent("restore-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        var attempts = 0
        _ = try Self.retryingServerErrors {
            do {
                return try Restore.run(from: target, to: directory, at: point)
            } catch let error as ReplicationError where error.code == .unavailable && attempts < 5 {
                // Restore reads a base's parts with 2 s fetches and takes an empty one for a part
                // the stream lost; right after a partition healed, a loaded server can answer an
                // empty fetch for a part it holds. Nothing in these runs trims the stream: tried
                // again (a few times, so that a part really missing still fails), and reported.
                attempts += 1
                result.notes.append("a restore at \(point) was tried again: \(error)")
                throw ReplicationError(.server, "\(error)")
            }
        }
        let store = try ObjectStore.open(at: directory, schema: pkgSchema)
        defer { try? store.close() }
        return try Self.state(store.context)
    }
}
