public import Foundation
public import Logging
public import ObjectGraphReplication

/// Whether the store replicates, and how (ObjectGraph only).
public enum ReplicationMode: Sendable {
    /// A store of its own.
    case none
    /// The primary: saves ship to the target's stream (``ObjectGraphBackend/primary(directory:target:logger:)``).
    case replicate(ReplicationTarget)
    /// A read replica of the target's stream (``ObjectGraphBackend/replica(directory:source:logger:)``).
    case follow(ReplicationTarget)
}

/// Opens the `kind` backend in `directory` and, when it holds no package, loads `fixture` into it
/// with a sync of the whole file. A replica (`.follow`) loads nothing: its packages come from the
/// stream, and it may still be catching up when this returns.
///
/// - Throws: what opening throws (another process holding the store, a damaged journal, no
///   NATS server answering), ``FixtureError``, or what the fixture's sync throws; the backend is
///   closed again then.
public func openBackend(
    _ kind: BackendKind, directory: URL, fixture: URL, logger: Logger, replication: ReplicationMode = .none
) async throws -> any PackageBackend {
    let start = ContinuousClock.now
    let backend: any PackageBackend =
        switch (kind, replication) {
        case (.objectgraph, .none): try ObjectGraphBackend(directory: directory, logger: logger)
        case (.objectgraph, .replicate(let target)):
            try await ObjectGraphBackend.primary(directory: directory, target: target, logger: logger)
        case (.objectgraph, .follow(let source)):
            try await ObjectGraphBackend.replica(directory: directory, source: source, logger: logger)
        case (.grdb, .none): try GRDBBackend(directory: directory, logger: logger)
        case (.grdb, _): throw ReplicationUnsupported()
        }
    do {
        if case .follow(let source) = replication {
            let health = await backend.health()
            logger.info(
                "following",
                metadata: [
                    "stream": "\(source.stream)", "servers": "\(source.servers.joined(separator: ","))",
                    "store": "\(directory.path)", "appliedSequence": "\(health.lastSequence ?? 0)",
                ])
            return backend
        }
        if try await backend.isEmpty() {
            let records = try PackageRecord.loadFixture(at: fixture)
            let result = try await backend.sync(try PackageRecord.jsonArray(records))
            logger.info(
                "loaded the fixture",
                metadata: [
                    "fixture": "\(fixture.path)", "packages": "\(result.packages.inserted)",
                    "maintainers": "\(result.maintainers.inserted)",
                    "ms": "\(String(format: "%.1f", result.milliseconds))",
                ])
        }
        let stats = try await backend.stats()
        logger.info(
            "store ready",
            metadata: [
                "backend": "\(kind.rawValue)", "store": "\(stats.store)", "packages": "\(stats.packages)",
                "maintainers": "\(stats.maintainers)",
                "ms": "\(String(format: "%.1f", (ContinuousClock.now - start).milliseconds))",
            ])
        if case .replicate(let target) = replication {
            let health = await backend.health()
            logger.info(
                "replicating",
                metadata: [
                    "stream": "\(target.stream)", "servers": "\(target.servers.joined(separator: ","))",
                    "lastSequence": "\(health.lastSequence ?? 0)", "shippedSequence": "\(health.shippedSequence ?? 0)",
                ])
        }
        return backend
    } catch {
        try? await backend.close()
        throw error
    }
}

/// `--replicate` and `--follow` with another backend than ObjectGraph.
public struct ReplicationUnsupported: Error, CustomStringConvertible {
    public var description: String { "only the objectgraph backend replicates" }
}
