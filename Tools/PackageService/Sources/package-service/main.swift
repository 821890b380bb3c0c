// package-service: a Hummingbird 2 daemon serving Debian package records from an embedded
// ObjectGraph store (or from SQLite through GRDB, `--backend grdb`, for comparison).
//
//   package-service --store /tmp/pkgd [--port 8080] [--fixture Fixtures/debian-packages.jsonl.lz4]
//   package-service --store /tmp/primary --replicate nats://127.0.0.1:4222 --stream PKGD
//   package-service --store /tmp/replica --follow nats://127.0.0.1:4222 --stream PKGD --port 8081
//   package-service bench-data --out /tmp/bench      (the files bench.sh feeds to wrk and curl)

import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import ObjectGraphReplication
import PackageServiceKit
import Prometheus

@main
struct PackageServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "package-service",
        abstract: "Serves the Debian package fixture over HTTP from an ObjectGraph store.",
        subcommands: [Serve.self, BenchData.self],
        defaultSubcommand: Serve.self)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Opens the store (loading the fixture when it is empty) and serves it until SIGINT or SIGTERM.")

    @Option(help: "The store's directory; created when missing.")
    var store: String

    @Option(
        help: "The fixture loaded into an empty store (default: the repository's Fixtures/debian-packages.jsonl.lz4).")
    var fixture: String?

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port, logged).")
    var port = 8080

    @Option(help: "objectgraph (an AsyncStore) or grdb (SQLite through a GRDB DatabasePool).")
    var backend = BackendKind.objectgraph.rawValue

    @Option(help: "trace, debug, info, notice, warning, error or critical (debug logs every request).")
    var logLevel = "info"

    @Option(
        help: ArgumentHelp(
            "Be the primary: ship every save to the JetStream stream --stream on these NATS servers.",
            discussion: "Comma-separated URLs, e.g. nats://127.0.0.1:4222,nats://127.0.0.1:4223.",
            valueName: "nats-urls"))
    var replicate: String?

    @Option(
        help: ArgumentHelp(
            "Be a read replica: follow the JetStream stream --stream on these NATS servers; writes are refused (405).",
            valueName: "nats-urls"))
    var follow: String?

    @Option(help: "The JetStream stream of --replicate or --follow (created when missing).")
    var stream: String?

    @Option(help: "How many servers keep each message when the stream is created (default: the number of URLs).")
    var replicas: Int?

    /// The servers of `--replicate` or `--follow`.
    private var natsServers: [String] {
        (replicate ?? follow ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    private var replication: ReplicationMode {
        guard let stream else { return .none }
        let target = ReplicationTarget(servers: natsServers, stream: stream, replicas: replicas ?? natsServers.count)
        if replicate != nil { return .replicate(target) }
        if follow != nil { return .follow(target) }
        return .none
    }

    func validate() throws {
        if replicate != nil && follow != nil {
            throw ValidationError("--replicate and --follow exclude each other: a service is the primary or a replica")
        }
        if replicate != nil || follow != nil {
            guard stream?.isEmpty == false else { throw ValidationError("--replicate and --follow need --stream NAME") }
            guard !natsServers.isEmpty else { throw ValidationError("no NATS server URL given") }
            guard backend == BackendKind.objectgraph.rawValue else {
                throw ValidationError("only the objectgraph backend replicates")
            }
            if let replicas, !(1...5).contains(replicas) { throw ValidationError("--replicas must be 1…5") }
        } else if stream != nil || replicas != nil {
            throw ValidationError("--stream and --replicas go with --replicate or --follow")
        }
        guard BackendKind(rawValue: backend) != nil else {
            throw ValidationError(
                "--backend must be one of \(BackendKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level '\(logLevel)'")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        // Before the store opens, so that the library's metrics land in the registry too.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "package-service")
        let kind = BackendKind(rawValue: backend) ?? .objectgraph
        let fixtureURL = fixture.map { URL(fileURLWithPath: $0) } ?? bundledFixture
        let backend = try await openBackend(
            kind, directory: URL(fileURLWithPath: store), fixture: fixtureURL, logger: logger,
            replication: replication)
        let app = makeApplication(
            backend: backend, configuration: ServiceConfiguration(host: host, port: port), logger: logger,
            metrics: registry,
            onServerRunning: { port in logger.info("listening", metadata: ["address": "http://\(host):\(port)"]) })
        do {
            // Runs until SIGINT or SIGTERM, then lets the requests in flight finish.
            try await app.runService()
        } catch {
            try? await backend.close()
            throw error
        }
        try await backend.close()
        logger.info("closed the store", metadata: ["store": "\(store)"])
    }
}

struct BenchData: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-data",
        abstract: "Writes the files bench.sh uses: names.txt (wrk's names) and two sync documents.",
        discussion: """
            older.json lists every fixture package but every 97th (by name); newer.json lists them \
            all but the obsolete ones (section oldlibs or a -dbg name), with the largest \
            maintainer team's versions bumped ("+deb12u1"), as the demo's sync does. Syncing them \
            in turn inserts, updates and deletes packages each time. names.txt holds the names \
            present in both, so that every GET during the syncs finds its package.
            """)

    @Option(help: "The fixture (default: the repository's Fixtures/debian-packages.jsonl.lz4).")
    var fixture: String?

    @Option(help: "The directory to write into; created when missing.")
    var out: String

    func run() throws {
        let records = try PackageRecord.loadFixture(at: fixture.map { URL(fileURLWithPath: $0) } ?? bundledFixture)
            .sorted { $0.name < $1.name }
        let heldBack = Set(records.enumerated().filter { $0.offset % 97 == 96 }.map(\.element.name))
        let teams = Dictionary(grouping: records, by: \.maintainer)
        let team = Set(teams.max { ($0.value.count, $1.key) < ($1.value.count, $0.key) }?.value.map(\.name) ?? [])
        let obsolete = Set(records.filter { $0.section == "oldlibs" || $0.name.hasSuffix("-dbg") }.map(\.name))
        let older = records.filter { !heldBack.contains($0.name) }
        let newer = records.filter { !obsolete.contains($0.name) }.map { r in
            var r = r
            if team.contains(r.name) { r.version += "+deb12u1" }
            return r
        }
        let directory = URL(fileURLWithPath: out)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try PackageRecord.jsonArray(older).write(to: directory.appendingPathComponent("older.json"))
        try PackageRecord.jsonArray(newer).write(to: directory.appendingPathComponent("newer.json"))
        let names = records.map(\.name).filter { !heldBack.contains($0) && !obsolete.contains($0) }
        try Data((names.joined(separator: "\n") + "\n").utf8).write(to: directory.appendingPathComponent("names.txt"))
        print(
            "bench-data: \(names.count) names; older.json \(older.count) packages, newer.json \(newer.count) "
                + "(\(team.subtracting(obsolete).count) at a new version) in \(directory.path)")
    }
}
