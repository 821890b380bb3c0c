import Foundation
import PackageServiceKit
import Testing

/// `GET /metrics` and `GET /health` over real HTTP, on both backends.
@Suite("package-service: operators' endpoints")
struct OperatorsTests {
    @Test("GET /metrics is Prometheus text that counts the requests served, by route and status")
    func metricsCountRequests() async throws {
        try await withService(.objectgraph) { client in
            #expect(try await client.get("/packages/adduser").status == 200)
            #expect(try await client.get("/packages/no-such-package").status == 404)
            let answer = try await client.get("/metrics")
            #expect(answer.status == 200)
            #expect(answer.contentType?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = String(decoding: answer.body, as: UTF8.self)
            // Hummingbird's MetricsMiddleware through swift-metrics: `hb.requests` with its
            // dimensions, as the Prometheus registry names them.
            let lines = text.split(separator: "\n")
            #expect(lines.contains("# TYPE hb_requests counter"))
            let found = lines.first {
                $0.hasPrefix("hb_requests{") && $0.contains(#"http_route="/packages/{name}""#)
                    && $0.contains(#"http_response_status_code="200""#)
            }
            let count = try #require(found.flatMap { Double($0.split(separator: " ").last ?? "") }, "\(text)")
            #expect(count >= 1)
            #expect(
                lines.contains {
                    $0.hasPrefix("hb_requests{") && $0.contains(#"http_response_status_code="404""#)
                })
            #expect(lines.contains { $0.hasPrefix("http_server_request_duration_bucket{") })
            // The service's own gauges, set at the scrape.
            #expect(lines.contains(#"package_service_healthy{role="standalone"} 1.0"#))
            #expect(lines.contains { $0.hasPrefix(#"package_service_last_sequence{role="standalone"} "#) })
        }
    }

    @Test("GET /health of a standalone ObjectGraph store is 200 with its role and last sequence")
    func healthOfStandaloneStore() async throws {
        try await withService(.objectgraph) { client in
            let answer = try await client.get("/health")
            #expect(answer.status == 200)
            #expect(answer.contentType?.hasPrefix("application/json") == true)
            let before = try answer.decode(HealthBody.self)
            #expect(before.status == "ok" && before.role == "standalone" && before.backend == "objectgraph")
            let first = try #require(before.lastSequence)
            #expect(first >= 1)
            #expect(before.lagMessages == nil && before.stream == nil)

            // A sync that changes something is one more journal record.
            var records = fixtureRecords
            records[0].version += "+test1"
            #expect(try await client.post("/sync", PackageRecord.jsonArray(records)).status == 200)
            let after = try await client.get("/health").decode(HealthBody.self)
            #expect(after.lastSequence == first + 1)
        }
    }

    @Test("GET /health of the GRDB backend is 200, without a journal position")
    func healthOfGRDB() async throws {
        try await withService(.grdb) { client in
            let answer = try await client.get("/health")
            #expect(answer.status == 200)
            let health = try answer.decode(HealthBody.self)
            #expect(health.status == "ok" && health.role == "standalone" && health.backend == "grdb")
            #expect(health.lastSequence == nil)
        }
    }
}
