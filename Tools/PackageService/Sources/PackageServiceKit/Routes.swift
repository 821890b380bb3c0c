import Foundation
public import Hummingbird
public import Logging
import NIOCore
public import Prometheus

/// Where and how the service listens.
public struct ServiceConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port (the tests do).
    public var port: Int
    /// The largest `POST /sync` body accepted (413 above).
    public var maxSyncBytes: Int

    public init(host: String = "127.0.0.1", port: Int = 8080, maxSyncBytes: Int = 64 << 20) {
        self.host = host
        self.port = port
        self.maxSyncBytes = maxSyncBytes
    }
}

/// The application: the routes of ``buildRouter(backend:configuration:logger:metrics:)`` on an
/// HTTP/1.1 server. `onServerRunning` receives the port bound.
public func makeApplication(
    backend: any PackageBackend, configuration: ServiceConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    Application(
        router: buildRouter(backend: backend, configuration: configuration, logger: logger, metrics: metrics),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "package-service"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger)
}

/// Limits of `GET /packages`.
public enum ListLimit {
    public static let `default` = 50
    public static let maximum = 1000
}

/// The service's routes over `backend`:
///
/// - `GET /packages/{name}`: the package, or 404;
/// - `GET /packages?section=…&limit=…`: the section's packages (every package without
///   `section`) sorted by name, `limit` 1…1000 (default 50), 400 for another limit;
/// - `POST /sync`: the body, a JSON array of fixture records, becomes the stored set (see
///   ``PackageBackend/sync(_:)``); 400 for a body that is not an array (an object, `null`) and
///   with the byte offset for malformed JSON; 409 for an empty array, or one that would delete
///   more than half of the stored packages;
/// - `GET /stats`: counts, snapshot version and publishing figures, where the store is;
/// - `GET /health`: 200 with the role, the last journal sequence and, for a replica, its lag;
///   503 (same body) when the service cannot serve (``HealthBody``);
/// - `GET /metrics`: `metrics` in Prometheus's text format: what swift-metrics recorded through
///   the `PrometheusMetricsFactory` the executable bootstrapped with it (every request's count
///   and duration by route and status, from Hummingbird's `MetricsMiddleware`; the library's
///   own metrics), and the service's `package_service_*` gauges, refreshed at each scrape.
///
/// A read replica answers `POST /sync` with 405. Every error answer is JSON (``ErrorBody``).
public func buildRouter(
    backend: any PackageBackend, configuration: ServiceConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry
) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    // Outermost, so that it counts the status each answer went out with, errors included.
    router.middlewares.add(MetricsMiddleware())
    router.middlewares.add(JSONErrorMiddleware(logger: logger))
    router.middlewares.add(LogRequestsMiddleware(.debug))

    router.get("/packages/:name") { _, context -> Response in
        let raw = try context.parameters.require("name")
        let name = raw.removingPercentEncoding ?? raw
        guard let package = try await backend.package(named: name) else {
            throw RequestRejected(.notFound, ErrorBody(error: "no package named '\(name)'"))
        }
        return try jsonResponse(package)
    }

    router.get("/packages") { request, _ -> Response in
        let query = request.uri.queryParameters
        let section = query.get("section")
        var limit = ListLimit.default
        if let raw = query.get("limit") {
            guard let value = Int(raw), (1...ListLimit.maximum).contains(value) else {
                throw RequestRejected(
                    .badRequest,
                    ErrorBody(
                        error: "limit must be an integer from 1 to \(ListLimit.maximum), not '\(raw)'", key: "limit"))
            }
            limit = value
        }
        let packages = try await backend.packages(section: section, limit: limit)
        return try jsonResponse(PackageList(section: section, limit: limit, count: packages.count, packages: packages))
    }

    router.post("/sync") { request, _ -> Response in
        var request = request
        let buffer = try await request.collectBody(upTo: configuration.maxSyncBytes)
        let body = Data(buffer.readableBytesView)
        if let problem = notAnArrayProblem(body) {
            throw RequestRejected(.badRequest, ErrorBody(error: problem, byteOffset: 0))
        }
        let result = try await backend.sync(body)
        logger.info(
            "synced",
            metadata: [
                "records": "\(result.records)", "inserted": "\(result.packages.inserted)",
                "updated": "\(result.packages.updated)",
                "deleted": "\(result.packages.deleted)", "ms": "\(String(format: "%.1f", result.milliseconds))",
            ])
        return try jsonResponse(result)
    }

    router.get("/stats") { _, _ -> Response in
        try jsonResponse(try await backend.stats())
    }

    router.get("/health") { _, _ -> Response in
        let health = await backend.health()
        return try jsonResponse(health, status: health.isHealthy ? .ok : .serviceUnavailable)
    }

    let gauges = ServiceGauges(registry: metrics)
    router.get("/metrics") { _, _ -> Response in
        gauges.update(await backend.health())
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        let text = metrics.emitToBuffer()
        headers[.contentLength] = String(text.count)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }
    return router
}

/// The answer of `GET /packages`.
public struct PackageList: Codable, Sendable, Hashable {
    public var section: String?
    public var limit: Int
    public var count: Int
    public var packages: [PackageBody]
}

/// `value` as a JSON response: sorted keys, slashes unescaped.
func jsonResponse(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let data = try encoder.encode(value)
    var headers = HTTPFields()
    headers[.contentType] = "application/json; charset=utf-8"
    headers[.contentLength] = String(data.count)
    return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
}

/// Answers a ``RequestRejected`` with its status and JSON body, Hummingbird's HTTP errors with
/// their status and a JSON body, and any other error with a logged 500 and a JSON body.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let rejected as RequestRejected {
            let status: HTTPResponse.Status =
                switch rejected.kind {
                case .badRequest: .badRequest
                case .notFound: .notFound
                case .conflict: .conflict
                case .readOnly: .methodNotAllowed
                }
            var response = try jsonResponse(rejected.body, status: status)
            if rejected.kind == .readOnly { response.headers[.allow] = "GET, HEAD" }
            return response
        } catch let error as any HTTPResponseError {
            // Hummingbird's own refusals (413 for a body above the limit, 404 for no route).
            let reason =
                error.status == .contentTooLarge
                ? "the body is larger than the service accepts" : error.status.reasonPhrase
            return try jsonResponse(ErrorBody(error: reason), status: error.status)
        } catch {
            logger.error(
                "request failed",
                metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            return try jsonResponse(ErrorBody(error: "\(error)"), status: .internalServerError)
        }
    }
}

/// The service's own gauges in the registry `GET /metrics` renders, set from ``HealthBody`` at
/// each scrape: they describe the moment of the scrape, so nothing has to update them between.
struct ServiceGauges: Sendable {
    let registry: PrometheusCollectorRegistry

    func update(_ health: HealthBody) {
        let role = [("role", health.role)]
        gauge("healthy", "1 when GET /health answers 200, 0 when it answers 503", labels: role)
            .set(health.isHealthy ? 1.0 : 0.0)
        if let last = health.lastSequence {
            gauge("last_sequence", "The last journal record the store holds, in the writer's numbering", labels: role)
                .set(Double(last))
        }
        if let shipped = health.shippedSequence {
            gauge("shipped_sequence", "Primary: the last record the stream acknowledged").set(Double(shipped))
        }
        if let backlog = health.backlogRecords {
            gauge("shipping_backlog_records", "Primary: records saved locally and not acknowledged by the stream yet")
                .set(Double(backlog))
        }
        if let lag = health.lagMessages {
            gauge("replica_lag_messages", "Replica: stream messages not applied yet").set(Double(lag))
        }
    }

    /// The gauge `package_service_<name>`, registered at its first use.
    private func gauge(_ name: String, _ help: String, labels: [(String, String)] = []) -> Gauge {
        let descriptor = MetricNameDescriptor(
            namespace: "package_service", metricName: name, unitName: "", helpText: help)
        return labels.isEmpty
            ? registry.makeGauge(descriptor: descriptor) : registry.makeGauge(descriptor: descriptor, labels: labels)
    }
}
