import Foundation
import MetricsTestKit
import ObjectGraph
import ObjectGraphReplication
import ObjectGraphTestSupport
import ServiceLifecycleTestKit
import Testing

@Suite(
    "Replication as a service: metrics, and what a shutdown leaves unshipped", .serialized,
    .disabled(if: NATSServer.executable == nil, "nats-server is not installed; Tools/install-deps.sh installs Debian's")
)
struct ReplicationServiceTests {
    @Test func shippingAndFollowingReportTheirFigures() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream())
        let writerMetrics = TestMetrics()
        var options = StoreOptions()
        options.metricsFactory = writerMetrics
        options.metricsLabel = "writer"
        let writer = try ReplicatedStore.open(
            at: replicationDirectory(), schema: pkgSchema, options: options, target: target)
        for round in 0..<20 { try syncRound(writer.context, round: round) }
        let last = writer.store.stats.lastSequence
        var replicaOptions = Follower.defaultOptions
        let followerMetrics = TestMetrics()
        replicaOptions.metricsFactory = followerMetrics
        replicaOptions.metricsLabel = "replica"
        let follower = try await ObjectStore.follow(
            at: replicationDirectory(), schema: pkgSchema, source: target, options: replicaOptions)
        #expect(await follower.waitUntilApplied(last, timeout: eventBound))
        let report = try writer.close()
        #expect(report.isComplete && report.lastSequence == last && report.unshippedRecords == 0)

        let w = [("store", "writer")]
        // Every record (the schema record and 20 transactions) shipped once, and none waits.
        #expect(try writerMetrics.expectCounter("objectgraph_shipped_records_total", w).totalValue == Int64(last))
        #expect(try writerMetrics.expectGauge("objectgraph_shipping_lag_records", w).lastValue == 0)
        #expect(try writerMetrics.expectGauge("objectgraph_shipping_lag_seconds", w).lastValue == 0)
        #expect(try writerMetrics.expectCounter("objectgraph_saves_total", w).totalValue == 20)
        let r = [("store", "replica")]
        // The follower applied the 20 transactions (schema records are not applied as changes).
        #expect(try followerMetrics.expectCounter("objectgraph_follower_applied_records_total", r).totalValue == 20)
        #expect(try followerMetrics.expectGauge("objectgraph_follower_lag_messages", r).lastValue == 0)
        try await follower.stop()
    }

    @Test func closingWithTheServersAwayReportsWhatDidNotShip() async throws {
        let server = try NATSServer.start()
        let target = ReplicationTarget(servers: [server.url], stream: freshStream(), timeout: .seconds(1))
        let dir = replicationDirectory()
        let writer = try ReplicatedStore.open(at: dir, schema: pkgSchema, target: target)
        for round in 0..<5 { try syncRound(writer.context, round: round) }
        try writer.shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
        let shipped = writer.store.stats.lastSequence
        server.kill()
        // Saves go on locally while the servers are away.
        for round in 5..<12 { try syncRound(writer.context, round: round) }
        let report = try writer.close(timeout: .milliseconds(300))
        #expect(!report.isComplete)
        #expect(report.shippedSequence == shipped)
        #expect(report.unshippedRecords == 7)
        #expect(report.description.contains("7 records"))
        // Nothing was dropped: the records are in the journal, and ship at the next open.
        let store = try ObjectStore.open(at: dir, schema: pkgSchema)
        #expect(store.stats.lastSequence == shipped + 7)
        try store.close()
    }

    @Test func theShipperServiceDrainsAtShutdownAndThrowsWhatItCouldNotShip() async throws {
        let server = try NATSServer.start()
        var target = ReplicationTarget(servers: [server.url], stream: freshStream(), timeout: .seconds(1))
        target.drainTimeout = .milliseconds(300)
        let writer = try ReplicatedStore.open(at: replicationDirectory(), schema: pkgSchema, target: target)
        let shipper = writer.shipper
        try await testGracefulShutdown { trigger in
            let running = Task { try await shipper.run() }
            for round in 0..<3 { try syncRound(writer.context, round: round) }
            try shipper.waitShipped(through: writer.store.stats.lastSequence, timeout: eventBound)
            server.kill()
            try syncRound(writer.context, round: 3)
            trigger.triggerGracefulShutdown()
            let error = await #expect(throws: ReplicationError.self) { try await running.value }
            #expect(error?.code == .notAcknowledged)
            #expect(error?.message.contains("1 record (") == true)
        }
        try writer.store.close()
    }
}
