public import Foundation
public import Logging

/// Opens the `kind` backend in `directory` and, when it holds no package, loads `fixture` into it
/// with a sync of the whole file.
///
/// - Throws: what opening throws (another process holding the store, a damaged journal),
///   ``FixtureError``, or what the fixture's sync throws; the backend is closed again then.
public func openBackend(
    _ kind: BackendKind, directory: URL, fixture: URL, logger: Logger
) async throws -> any PackageBackend {
    let start = ContinuousClock.now
    let backend: any PackageBackend =
        switch kind {
        case .objectgraph: try ObjectGraphBackend(directory: directory, logger: logger)
        case .grdb: try GRDBBackend(directory: directory, logger: logger)
        }
    do {
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
        return backend
    } catch {
        try? await backend.close()
        throw error
    }
}
