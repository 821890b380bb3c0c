import Foundation
import Logging
import Metrics
import PackageServiceKit
import Prometheus
import ServiceLifecycle

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A new, empty directory under the system's temporary directory.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "package-service-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The fixture's records, read once.
let fixtureRecords: [PackageRecord] = (try? PackageRecord.loadFixture(at: bundledFixture)) ?? []

/// The registry every service of the test process renders at `GET /metrics`: swift-metrics can
/// be bootstrapped once per process, so the first use bootstraps it (before a store opens, as
/// the executable does) and every test shares it.
let testMetrics: PrometheusCollectorRegistry = {
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
}()

/// A logger that drops everything.
let quietLogger = Logger(label: "package-service-tests") { _ in SwiftLogNoOpLogHandler() }

/// An HTTP/1.1 client of one running service: Foundation's (curl underneath on Linux), a real
/// TCP connection to 127.0.0.1.
struct ServiceClient: Sendable {
    let port: Int

    struct Answer: Sendable {
        let status: Int
        let contentType: String?
        let body: Data
        /// Every header, by lowercased name.
        var headers: [String: String] = [:]

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            do {
                return try JSONDecoder().decode(T.self, from: body)
            } catch {
                throw TestFailure(
                    "status \(status), body \(String(decoding: body, as: UTF8.self).prefix(300)): \(error)")
            }
        }
    }

    func send(_ method: String, _ path: String, body: Data? = nil) async throws -> Answer {
        guard let url = URL(string: "http://127.0.0.1:\(port)\(path)") else { throw TestFailure("bad path \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw TestFailure("not an HTTP answer") }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let name = key.base as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Answer(
            status: http.statusCode, contentType: http.value(forHTTPHeaderField: "Content-Type"), body: data,
            headers: headers)
    }

    func get(_ path: String) async throws -> Answer { try await send("GET", path) }
    func post(_ path: String, _ body: Data) async throws -> Answer { try await send("POST", path, body: body) }
}

/// Opens `kind` in `directory` (a new one when nil, removed at the end; loading the fixture when
/// empty), serves it on a free loopback port, runs `body` with a client of it, then shuts the
/// server down gracefully and closes the store, as the executable does on SIGTERM.
func withService(
    _ kind: BackendKind, directory: URL? = nil, maxSyncBytes: Int = 64 << 20,
    _ body: (ServiceClient) async throws -> Void
) async throws {
    let owned = directory == nil
    let directory = try directory ?? temporaryDirectory()
    defer { if owned { try? FileManager.default.removeItem(at: directory) } }
    _ = testMetrics
    let backend = try await openBackend(kind, directory: directory, fixture: bundledFixture, logger: quietLogger)
    try await withService(backend: backend, maxSyncBytes: maxSyncBytes, body)
}

/// Serves `backend` (already open) on a free loopback port, runs `body` with a client of it, then
/// shuts the server down gracefully and closes the backend.
func withService(
    backend: any PackageBackend, maxSyncBytes: Int = 64 << 20, _ body: (ServiceClient) async throws -> Void
) async throws {
    let logger = quietLogger
    let (ports, portContinuation) = AsyncStream<Int>.makeStream()
    let app = makeApplication(
        backend: backend, configuration: ServiceConfiguration(port: 0, maxSyncBytes: maxSyncBytes), logger: logger,
        metrics: testMetrics
    ) { port in
        portContinuation.yield(port)
    }
    let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
    var failure: (any Error)?
    do {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { portContinuation.finish() }
                try await group.run()
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                try await tasks.waitForAll()
                throw TestFailure("the server stopped before it listened")
            }
            do {
                try await body(ServiceClient(port: port))
            } catch {
                failure = error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    } catch {
        failure = failure ?? error
    }
    try await backend.close()
    if let failure { throw failure }
}
