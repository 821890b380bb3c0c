import Foundation
import GraphJournal
import NATSJetStream
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import Testing

/// A target with a writer lease of `ttl` and the synchronous policy.
func leasedTarget(
    _ urls: [String], stream: String = freshStream(), ttl: Duration = .seconds(1), replicas: Int = 1
)
    -> ReplicationTarget
{
    var target = ReplicationTarget(
        servers: urls, stream: stream, replicas: replicas, policy: .synchronous(timeout: .seconds(30)))
    target.lease = WriterLease(holder: "writer-\(UUID().uuidString.prefix(6))", ttl: ttl)
    return target
}

/// The same target as another process would hold it: its own lease holder.
func asHolder(_ target: ReplicationTarget, _ holder: String) -> ReplicationTarget {
    var t = target
    t.lease?.holder = holder
    return t
}

/// Waits (up to `eventBound`) until `condition` holds.
func eventually(_ what: String, _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + eventBound
    while try !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("timed out waiting for \(what)")
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

@Suite(
    .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct FailoverTests {
    @Test func aStandbyTakesTheStreamOverAndTheOldWriterIsFenced() async throws {
        let server = try NATSServer.start()
        // A lease long enough that a loaded machine does not let it lapse by itself.
        let target = leasedTarget([server.url], ttl: .seconds(3))
        let oldDirectory = replicationDirectory()
        let old = try ReplicatedStore.open(at: oldDirectory, schema: pkgSchema, target: asHolder(target, "old"))
        for round in 0..<10 { try syncRound(old.context, round: round) }
        let follower = try await ObjectStore.follow(at: replicationDirectory(), schema: pkgSchema, source: target)
        let standby = try await ObjectStore.standby(
            at: replicationDirectory(), schema: pkgSchema, source: asHolder(target, "standby"))
        #expect(standby.status.phase == .following)
        #expect(await follower.waitUntilApplied(old.store.stats.lastSequence, timeout: eventBound))
        let before = try state(old.context)

        // The old writer stops renewing, as a paused process does: the lease lapses and the
        // standby takes the stream over under a new epoch.
        old.shipper.suspendLeaseRenewals(true)
        let writer = try await standby.promoted()
        guard case .promoted(let epoch) = standby.status.phase else {
            Issue.record("standby is \(standby.status.phase)")
            return
        }
        #expect(epoch > old.shipper.status.epoch)
        #expect(try state(writer.context) == before)
        for round in 10..<20 { try syncRound(writer.context, round: round) }
        #expect(writer.shipper.status.epoch == epoch)

        // The plain follower goes on across the takeover without a restart.
        #expect(await follower.waitUntilApplied(writer.store.stats.lastSequence, timeout: eventBound))
        #expect(try state(follower.store.snapshot) == state(writer.context))
        #expect(follower.status.failed == nil)

        // The old writer comes back: its next save that needs the stream is refused, typed; the
        // save stands in its own journal, kept aside and reported.
        old.shipper.suspendLeaseRenewals(false)
        // Its next renewal finds the lease in the standby's hands: it is fenced before it saves
        // anything (nothing it could publish would tell it).
        try await eventually("the old writer to find its lease taken") { old.shipper.status.fenced != nil }
        #expect(old.shipper.status.fenced?.contains("lost the writer lease") == true)
        #expect {
            try syncRound(old.context, round: 100)
        } throws: { ($0 as? ReplicationError)?.code == .fenced }
        #expect(old.shipper.status.fenced != nil)
        let report = try #require(FencedReport.read(from: oldDirectory))
        #expect(report.stream == target.stream)
        // The refused save is among the records kept aside.
        #expect(report.unshippedRecords >= 1)
        #expect(report.lastSequence == old.store.stats.lastSequence)
        _ = try? old.close()
        // The tool shows it, and which records stay here.
        let stats = try await ToolReplicationTests.tool(["stats", oldDirectory.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stdout.contains("writer of         stream \(target.stream) at epoch "), "\(stats.stdout)")
        #expect(
            stats.stdout.contains(
                "fenced            \(report.reason); \(report.unshippedRecords) record"), "\(stats.stdout)")

        // It cannot be opened as the writer again while its report is there.
        #expect {
            _ = try ReplicatedStore.open(at: oldDirectory, schema: pkgSchema, target: asHolder(target, "old"))
        } throws: { ($0 as? ReplicationError)?.code == .fenced }

        // Nothing of the old writer's refused save reached the stream: one history.
        let restored = replicationDirectory()
        try Restore.run(from: target, to: restored, at: .latest)
        let store = try ObjectStore.open(at: restored, schema: pkgSchema)
        #expect(try state(store.context) == state(writer.context))
        #expect(try store.context.object(Pkg.self, where: \.name, equals: "pkg-100-0") == nil)
        try store.close()
        try await follower.stop()
        try writer.close()
    }

    /// The standby takes over, then its own lease lapses with no one taking it (as when its
    /// server is cut off for longer than the lease): the old writer, back, finds the lease free
    /// but the stream written under a newer epoch. It is fenced, and leaves the lease alone; the
    /// new writer, back too, takes its lease again and goes on. Taking the lapsed lease, the old
    /// writer fenced the new one, and the stream was left with no writer at all.
    @Test func aWriterBackAfterANewerEpochWroteDoesNotTakeTheLapsedLeaseBack() async throws {
        let server = try NATSServer.start()
        let target = leasedTarget([server.url], ttl: .seconds(1))
        let old = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, target: asHolder(target, "old"))
        for round in 0..<3 { try syncRound(old.context, round: round) }
        let standby = try await ObjectStore.standby(
            at: replicationDirectory(), schema: pkgSchema, source: asHolder(target, "standby"))
        old.shipper.suspendLeaseRenewals(true)
        let writer = try await standby.promoted()
        guard case .promoted(let epoch) = standby.status.phase else {
            Issue.record("standby is \(standby.status.phase)")
            return
        }
        try syncRound(writer.context, round: 3)

        // The new writer stops renewing in turn; its lease lapses and no one takes it.
        writer.shipper.suspendLeaseRenewals(true)
        let lease = try #require(target.lease)
        let client = try JetStreamClient(servers: [server.url])
        let kv = try client.keyValue(bucket: lease.bucket, ttl: lease.ttl, replicas: 1)
        let key = WriterLease.key(target.stream)
        try await eventually("the new writer's lease to lapse") { try kv.get(key).map { $0.isDeleted } ?? true }

        old.shipper.suspendLeaseRenewals(false)
        try await eventually("the old writer to find the stream taken over") { old.shipper.status.fenced != nil }
        #expect(old.shipper.status.fenced?.contains("epoch \(epoch)") == true, "\(old.shipper.status.fenced ?? "")")
        #expect(try kv.get(key).map { $0.isDeleted } ?? true, "the old writer left the lapsed lease alone")

        writer.shipper.suspendLeaseRenewals(false)
        try syncRound(writer.context, round: 4)
        #expect(writer.shipper.status.fenced == nil)
        #expect(writer.shipper.status.epoch > epoch, "taken again under a new epoch")
        _ = try? old.close()
        try writer.close()
        withExtendedLifetime(client) {}
    }

    @Test func aWriterThatClosesHandsTheStreamOverAtOnce() async throws {
        let server = try NATSServer.start()
        // A lease far longer than the test may wait: only the release can hand it over.
        let target = leasedTarget([server.url], ttl: .seconds(600))
        let old = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: asHolder(target, "a"))
        for round in 0..<5 { try syncRound(old.context, round: round) }
        let expected = try state(old.context)
        let standby = try await ObjectStore.standby(
            at: replicationDirectory(), schema: pkgSchema, source: asHolder(target, "b"))
        // While the writer holds the lease, another writer is refused at open.
        #expect {
            _ = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: asHolder(target, "c"))
        } throws: { ($0 as? ReplicationError)?.code == .leaseHeld }
        let report = try old.close()
        #expect(report.isComplete)
        let writer = try await standby.promoted()
        #expect(try state(writer.context) == expected)
        try syncRound(writer.context, round: 5)
        try writer.close()
    }

    @Test func aCopyOfTheWriterIsRefusedEvenWhenItSavesTheSameSequences() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let directory = replicationDirectory()
        do {
            let writer = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
            for round in 0..<3 { try syncRound(writer.context, round: round) }
            try writer.close()
        }
        let copy = replicationDirectory()
        try FileManager.default.copyItem(at: directory, to: copy)
        try? FileManager.default.removeItem(at: copy.appendingPathComponent("LOCK"))
        let original = try ReplicatedStore.open(at: directory, schema: pkgSchema, target: target)
        let twin = try ReplicatedStore.open(at: copy, schema: pkgSchema, target: target)
        // The same record sequence, other contents, within the server's duplicate window.
        let a = try original.context.insert(Pkg.self)
        a.name = "only-in-original"
        try original.context.save()
        try original.shipper.waitShipped(through: original.store.stats.lastSequence, timeout: eventBound)
        let b = try twin.context.insert(Pkg.self)
        b.name = "only-in-copy"
        try twin.context.save()
        try await eventually("the copy to be refused") { twin.shipper.status.diverged != nil }
        #expect(twin.shipper.status.shippedSequence < twin.store.stats.lastSequence)
        _ = try twin.close()
        _ = try original.close()
        let restored = replicationDirectory()
        try Restore.run(from: target, to: restored, at: .latest)
        let store = try ObjectStore.open(at: restored, schema: pkgSchema)
        #expect(try store.context.object(Pkg.self, where: \.name, equals: "only-in-original") != nil)
        #expect(try store.context.object(Pkg.self, where: \.name, equals: "only-in-copy") == nil)
        try store.close()
    }

    @Test func aWriterOpensWhileTheServersAreAwayAndShipsWhenTheyReturn() async throws {
        let server = try NATSServer.start()
        server.kill()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }
        #expect(writer.shipper.status.shippedSequence == 0)
        #expect(writer.shipper.status.lastError != nil)

        // A target that requires the servers is refused at once, and says why.
        var strict = target
        strict.requireServersAtOpen = true
        #expect {
            _ = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: strict)
        } throws: { ($0 as? ReplicationError)?.code == .server }

        try server.restart()
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let expected = try state(writer.context)
        try writer.close()
        let restored = replicationDirectory()
        try Restore.run(from: target, to: restored, at: .latest)
        let store = try ObjectStore.open(at: restored, schema: pkgSchema)
        #expect(try state(store.context) == expected)
        try store.close()
    }
}
