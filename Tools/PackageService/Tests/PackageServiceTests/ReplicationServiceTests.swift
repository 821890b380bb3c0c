import Foundation
import ObjectGraphReplication
import PackageServiceKit
import Testing

/// A primary (`--replicate`) and a read replica (`--follow`) over a real nats-server with
/// JetStream, started by the test on free loopback ports, each service on its own port.
@Suite("package-service: primary and replica", .enabled(if: NATSTestServer.executable != nil))
struct ReplicationServiceTests {
    /// How long a replica may take to apply a change: generous, the machine may be loaded. The
    /// waits end as soon as the change is there.
    static let eventBound: Duration = .seconds(120)

    @Test("a sync on the primary reaches the replica, which serves it and refuses writes with 405")
    func syncReachesReplica() async throws {
        let nats = try await NATSTestServer.start()
        defer { nats.stop() }
        let primaryDirectory = try temporaryDirectory()
        let replicaDirectory = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: primaryDirectory)
            try? FileManager.default.removeItem(at: replicaDirectory)
        }
        _ = testMetrics
        let target = ReplicationTarget(servers: [nats.url], stream: "PKGTEST")
        let primary = try await openBackend(
            .objectgraph, directory: primaryDirectory, fixture: bundledFixture, logger: quietLogger,
            replication: .replicate(target))
        try await withService(backend: primary) { primaryClient in
            let started = try await primaryClient.get("/health").decode(HealthBody.self)
            #expect(started.role == "primary" && started.stream == "PKGTEST" && started.status == "ok")
            let loaded = try #require(started.lastSequence)

            let replica = try await openBackend(
                .objectgraph, directory: replicaDirectory, fixture: bundledFixture, logger: quietLogger,
                replication: .follow(target))
            try await withService(backend: replica) { replicaClient in
                // The replica starts from the stream: the primary's fixture load first.
                let caughtUp = try await waitForSequence(loaded, on: replicaClient)
                #expect(caughtUp.role == "replica" && caughtUp.stream == "PKGTEST")
                #expect(try await replicaClient.get("/packages/adduser").status == 200)

                // A sync on the primary: one package at a new version, one gone.
                var records = fixtureRecords.filter { $0.name != "zlib1g-dev" }
                let index = try #require(records.firstIndex { $0.name == "adduser" })
                records[index].version = "9.9-replicated"
                let synced = try await primaryClient.post("/sync", PackageRecord.jsonArray(records))
                #expect(synced.status == 200)
                let after = try #require(try await primaryClient.get("/health").decode(HealthBody.self).lastSequence)
                #expect(after > loaded)

                let health = try await waitForSequence(after, on: replicaClient)
                #expect(health.status == "ok")
                let adduser = try await replicaClient.get("/packages/adduser").decode(PackageBody.self)
                #expect(adduser.version == "9.9-replicated")
                #expect(try await replicaClient.get("/packages/zlib1g-dev").status == 404)
                let stats = try await replicaClient.get("/stats").decode(StatsBody.self)
                #expect(stats.packages == records.count)

                // Writes go to the primary.
                let refused = try await replicaClient.post("/sync", PackageRecord.jsonArray(fixtureRecords))
                #expect(refused.status == 405)
                #expect(refused.headers["allow"] == "GET, HEAD")
                #expect(try refused.decode(ErrorBody.self).error.contains("read replica"))
                #expect(
                    try await replicaClient.get("/packages/adduser").decode(PackageBody.self).version
                        == "9.9-replicated")

                let metrics = String(decoding: try await replicaClient.get("/metrics").body, as: UTF8.self)
                #expect(metrics.contains(#"package_service_healthy{role="replica"} 1.0"#))
                #expect(metrics.contains("package_service_replica_lag_messages "))
            }
        }
    }

    /// Polls the service's `/health` until its `lastSequence` reaches `sequence`, up to
    /// ``eventBound``; the answer that reached it.
    private func waitForSequence(_ sequence: UInt64, on client: ServiceClient) async throws -> HealthBody {
        let deadline = ContinuousClock.now + Self.eventBound
        var last: HealthBody?
        while ContinuousClock.now < deadline {
            let health = try await client.get("/health").decode(HealthBody.self)
            if let applied = health.lastSequence, applied >= sequence { return health }
            if health.status != "ok" { throw TestFailure("the replica cannot serve: \(health)") }
            last = health
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure(
            "the replica did not apply record \(sequence) within \(Self.eventBound): \(String(describing: last))")
    }
}
