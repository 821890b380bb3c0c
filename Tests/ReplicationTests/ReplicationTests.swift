import Foundation
import GraphJournal
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// A package as the example daemon keeps it: a unique name and a version.
@Entity final class Pkg {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
    var size: Int = 0
}

let pkgSchema: Schema = {
    do { return try Schema(Pkg.self) } catch { preconditionFailure("\(error)") }
}()

/// A directory under the temporary directory, unique to the call.
func replicationDirectory(_ name: String = #function) -> URL {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("objectgraph-replication-tests")
        .appendingPathComponent("\(name.filter(\.isLetter))-\(UUID().uuidString.prefix(8))")
    try? FileManager.default.removeItem(at: dir)
    return dir
}

/// A stream name no other test uses.
func freshStream() -> String { "T" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12) }

/// The packages of a context or snapshot as name → version@size, for comparing states.
func state(_ context: ModelContext) throws -> [String: String] {
    Dictionary(
        uniqueKeysWithValues: try context.fetch(FetchDescriptor<Pkg>()).map { ($0.name, "\($0.version)@\($0.size)") })
}

func state(_ snapshot: StoreSnapshot) throws -> [String: String] {
    Dictionary(uniqueKeysWithValues: try snapshot.objects(of: Pkg.self).map { ($0.name, "\($0.version)@\($0.size)") })
}

/// One transaction: inserts `new` packages, updates one, deletes one, as a daemon's sync does.
func syncRound(_ context: ModelContext, round: Int, new: Int = 3) throws {
    for i in 0..<new {
        let p = try context.insert(Pkg.self)
        p.name = "pkg-\(round)-\(i)"
        p.version = "1.\(round)"
        p.size = round * 10 + i
    }
    if round > 0, let p = try context.object(Pkg.self, where: \.name, equals: "pkg-\(round - 1)-0") {
        p.version = "2.\(round)"
    }
    if round > 1, let p = try context.object(Pkg.self, where: \.name, equals: "pkg-\(round - 2)-1") {
        context.delete(p)
    }
    try context.save()
}

/// Every record on the stream's log subject, in order: each message's batch (`OG-First` to
/// `OG-Seq`, its parts put together) decoded and checked, each record once, its `OG-Prev` the
/// record before it.
func checkLogChain(_ target: ReplicationTarget) throws -> [UInt64] {
    let client = try JetStreamClient(servers: target.servers)
    defer { client.close() }
    let reader = try client.reader(stream: target.stream, subject: target.logSubject, from: 1)
    defer { reader.close() }
    var sequences: [UInt64] = []
    var previous: UInt64 = 0
    var blob: [UInt8] = []
    while true {
        let batch = try reader.next(max: 256, timeout: .milliseconds(300))
        if batch.isEmpty { break }
        for m in batch {
            guard let first = m.headers["OG-First"].flatMap(UInt64.init),
                let last = m.headers["OG-Seq"].flatMap(UInt64.init),
                let prev = m.headers["OG-Prev"].flatMap(UInt64.init),
                let count = m.headers["OG-Count"].flatMap(Int.init),
                let part = m.headers["OG-Part"].flatMap(Int.init), let parts = m.headers["OG-Parts"].flatMap(Int.init)
            else { throw ReplicationError(.badMessage, "message \(m.sequence) lacks headers") }
            if part == 0 { blob = [] }
            blob += m.payload
            guard part == parts - 1 else { continue }
            var records: [UInt64] = []
            var offset = 0
            while offset < blob.count {
                let n = (0..<4).reduce(0) { $0 | Int(blob[offset + $1]) << (8 * $1) }
                records.append(try ShippedRecord(wire: Array(blob[offset + 4..<offset + 4 + n])).sequence)
                offset += 4 + n
            }
            #expect(records.count == count && records.first == first && records.last == last, "message \(m.sequence)")
            #expect(prev == previous, "records \(first)...\(last) follow \(prev) but \(previous) shipped before them")
            #expect(zip(records, records.dropFirst()).allSatisfy { $0 < $1 } && first > previous)
            previous = last
            sequences += records
        }
    }
    return sequences
}

@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct ReplicationTests {
    @Test func aFollowerConvergesToTheWriterAndRefusesSaves() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        for round in 0..<20 { try syncRound(writer.context, round: round) }
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        // Saves go on while it follows; it keeps up.
        for round in 20..<40 { try syncRound(writer.context, round: round) }
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        let snapshot = follower.store.snapshot
        #expect(try state(snapshot) == state(writer.context))
        #expect(try snapshot.object(Pkg.self, where: \.name, equals: "pkg-39-2")?.size == 392)
        #expect(follower.status.lagMessages == 0)
        #expect(follower.status.failed == nil)
        // A replica takes records only from its source.
        let refused = await #expect(throws: StoreError.self) {
            try await follower.store.perform { context in
                let p = try context.insert(Pkg.self)
                p.name = "local"
            }
        }
        #expect(refused?.code == .readOnly)
        try await follower.stop()
        try writer.close()
        _ = try checkLogChain(target)
    }

    @Test func aRestartedFollowerResumesWithoutReplayingOrSkipping() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        let replica = replicationDirectory()
        var applied = 0
        for cycle in 0..<4 {
            for round in (cycle * 10)..<(cycle * 10 + 10) { try syncRound(writer.context, round: round) }
            let follower = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target)
            #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
            #expect(try state(follower.store.snapshot) == state(writer.context))
            applied += follower.status.recordsApplied
            try await follower.stop()
        }
        // Each transaction applied exactly once over the four runs.
        #expect(applied == 40)
        try writer.close()
    }

    @Test func aRestartedWriterShipsItsBacklogWithoutGapOrDuplicate() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream(), timeout: .seconds(10))
        let directory = replicationDirectory()
        var writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // The servers go away: saves go on locally (asynchronous policy).
        server.kill()
        for round in 5..<10 { try syncRound(writer.context, round: round) }
        let expected = try state(writer.context)
        let last = writer.store.stats.lastSequence
        #expect(writer.shipper.status.shippedSequence < last)
        writer.shipper.stop()
        try writer.store.close()
        try server.restart()
        // The writer comes back: what the stream lacks ships first.
        writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        try writer.shipper.waitShipped(through: last, timeout: eventBound)
        for round in 10..<12 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let shipped = try checkLogChain(target)
        #expect(shipped == Array(1...writer.store.stats.lastSequence))
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(await follower.waitUntilApplied(last, timeout: eventBound))
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        #expect(expected.count > 0)
        try await follower.stop()
        try writer.close()
    }

    @Test func theSynchronousPolicyFailsSavesTheStreamDidNotAcknowledgeAndKeepsThem() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(
            // Generous: the first save must be acknowledged on a loaded machine; the save after
            // the kill waits the whole policy timeout before it fails, whatever its length.
            servers: [server.url], stream: freshStream(), policy: .synchronous(timeout: .seconds(30)),
            timeout: .seconds(10))
        let directory = replicationDirectory()
        let writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        try syncRound(writer.context, round: 0)
        #expect(writer.shipper.status.shippedSequence == writer.store.stats.lastSequence)
        server.kill()
        let error = #expect(throws: ReplicationError.self) { try syncRound(writer.context, round: 1) }
        #expect(error?.code == .notAcknowledged)
        // The save stands locally: committed in the context, durable in the journal.
        #expect(!writer.context.hasChanges)
        #expect(try writer.context.object(Pkg.self, where: \.name, equals: "pkg-1-0") != nil)
        let local = try state(writer.context)
        try server.restart()
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        try syncRound(writer.context, round: 2)  // acknowledged again
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        #expect(local.count > 0)
        try await follower.stop()
        try writer.close()
    }

    @Test func aSecondWriterOrAnOlderCopyIsRefusedInsteadOfForkingTheHistory() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let directory = replicationDirectory()
        let writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        for round in 0..<3 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // A copy taken now, restored later: the writer goes on meanwhile.
        let backup = replicationDirectory()
        try FileManager.default.copyItem(at: directory, to: backup)
        try? FileManager.default.removeItem(at: backup.appendingPathComponent("LOCK"))
        for round in 3..<6 { try syncRound(writer.context, round: round) }
        try writer.close()
        let older = #expect(throws: ReplicationError.self) {
            _ = try ReplicatedStore.open(at: backup, schema: pkgSchema, target: target)
        }
        #expect(older?.code == .diverged)
        // Another store with its own history, pointed at the same stream.
        let other = try ObjectStore.open(at: replicationDirectory(), schema: pkgSchema)
        for round in 0..<8 { try syncRound(other.context, round: round + 100) }
        try other.close()
        let second = #expect(throws: ReplicationError.self) {
            _ = try ReplicatedStore.open(at: other.directory, schema: pkgSchema, target: target)
        }
        #expect(second?.code == .diverged)
    }

    @Test func compactionShipsABaseThatNewFollowersAndRestoresStartFrom() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream(), maxMessageBytes: 16 << 10)
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        var states: [UInt64: [String: String]] = [:]
        for round in 0..<10 {
            try syncRound(writer.context, round: round, new: 200)  // records above a message: parts
            states[writer.store.stats.lastSequence] = try state(writer.context)
        }
        let early = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        try writer.compact()
        for round in 10..<14 {
            try syncRound(writer.context, round: round, new: 5)
            states[writer.store.stats.lastSequence] = try state(writer.context)
        }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // A follower that was running crosses the base; a new one starts from it.
        #expect(await early.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(early.store.snapshot) == state(writer.context))
        let late = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(await late.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(late.store.snapshot) == state(writer.context))
        #expect(late.status.recordsApplied == 4)
        try await early.stop()
        try await late.stop()
        // Point-in-time: before the base (replayed from the start), after it (from the base).
        for (sequence, expected) in states {
            let restored = replicationDirectory()
            try Restore.run(from: target, to: restored, at: .sequence(sequence))
            let store = try ObjectStore.open(at: restored, schema: pkgSchema)
            #expect(try state(store.context) == expected, "restored to \(sequence)")
            try store.close()
        }
        try writer.close()
    }

    @Test func savesThatComeFasterThanMessagesShareThemAndEveryReaderTakesThemApart() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream(), batchDelay: .milliseconds(200))
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        var states: [UInt64: [String: String]] = [:]
        for round in 0..<30 {
            try syncRound(writer.context, round: round)
            states[writer.store.stats.lastSequence] = try state(writer.context)
        }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // 31 records (a schema and 30 transactions) in a few messages.
        let published = writer.shipper.status.messagesPublished
        #expect(published < 10, "\(published) messages for 31 records")
        #expect(try checkLogChain(target) == Array(1...writer.store.stats.lastSequence))
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        // A restore stops inside a message's batch, at the record asked for.
        for sequence in [UInt64(5), 17, 29] {
            let restored = replicationDirectory()
            try Restore.run(from: target, to: restored, at: .sequence(sequence))
            let store = try ObjectStore.open(at: restored, schema: pkgSchema)
            #expect(try state(store.context) == states[sequence], "restored to \(sequence)")
            try store.close()
        }
        try writer.close()
    }

    @Test func trimmingBelowABaseKeepsFollowersAndLaterRestoresWorking() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        for round in 0..<10 { try syncRound(writer.context, round: round) }
        let early = writer.store.stats.lastSequence
        let replica = replicationDirectory()
        let behind = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target)
        #expect(await behind.waitUntilApplied(early, timeout: eventBound))
        try await behind.stop()
        try writer.compact()
        for round in 10..<20 { try syncRound(writer.context, round: round) }
        let covered = writer.store.stats.lastSequence
        try writer.compact()
        for round in 20..<25 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        // Nothing to trim while fewer bases than asked for exist.
        #expect(try writer.shipper.trim(keepingBases: 3) == nil)
        let kept = try #require(try writer.shipper.trim(keepingBases: 1))
        let client = try JetStreamClient(servers: target.servers)
        #expect(try client.streamState(target.stream).firstSequence == kept)
        client.close()
        // The follower the stream was trimmed past is rebuilt from the kept base.
        let resumed = try await ObjectStore.follow(at: replica, schema: pkgSchema, source: target)
        #expect(await resumed.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(resumed.store.snapshot) == state(writer.context))
        try await resumed.stop()
        // A restore before the kept base is no longer possible; one after it is.
        let refused = #expect(throws: ReplicationError.self) {
            try Restore.run(from: target, to: replicationDirectory(), at: .sequence(early))
        }
        #expect(refused?.code == .unavailable)
        let restored = replicationDirectory()
        try Restore.run(from: target, to: restored, at: .latest)
        let store = try ObjectStore.open(at: restored, schema: pkgSchema)
        #expect(try state(store.context) == state(writer.context))
        try store.close()
        #expect(covered > early)
        try writer.close()
    }

    @Test func aClusterMemberKilledWhileTheWriterSavesLosesNothingAcknowledged() async throws {
        let cluster = try NATSCluster.start()
        let target = ReplicationTarget(
            servers: cluster.urls, stream: freshStream(), replicas: 3, policy: .synchronous(timeout: .seconds(5)),
            timeout: .seconds(30))
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        var acknowledged: UInt64 = 0
        for round in 0..<60 {
            if round == 15 { cluster.kill(1) }
            if round == 40 { try cluster.restart(1) }
            do {
                try syncRound(writer.context, round: round)
                acknowledged = writer.store.stats.lastSequence
            } catch let error as ReplicationError where error.code == .notAcknowledged {
                // A leader election can outlast the timeout; the save stands and ships later.
            }
        }
        #expect(acknowledged > 0)
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        try await follower.stop()
        try writer.close()
        #expect(try checkLogChain(target) == Array(1...writer.store.stats.lastSequence))
    }
}
