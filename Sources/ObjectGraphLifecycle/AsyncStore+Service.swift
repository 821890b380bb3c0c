public import ObjectGraph
public import ServiceLifecycle

/// An ``AsyncStore`` runs as a swift-service-lifecycle `Service`: it serves until graceful
/// shutdown, then closes (``AsyncStore/close()``): transactions already running finish, the
/// group commit's last `fdatasync` covers every save made, and the directory lock is released.
/// A transaction that starts after that is refused (``StoreError`` code `closed`) and rolled
/// back, so no save is acknowledged that the journal does not hold.
///
/// List the store before the services that use it: a `ServiceGroup` shuts its services down in
/// reverse order, so the writers stop first.
///
/// ```swift
/// let store = try AsyncStore(at: directory, schema: schema)
/// let group = ServiceGroup(
///     services: [store, httpServer],            // shut down: httpServer, then store
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
extension AsyncStore: Service {
    /// Waits for graceful shutdown (or cancellation), then closes the store.
    ///
    /// - Throws: ``StoreError`` from the close (the journal's final sync failed).
    public func run() async throws {
        try? await gracefulShutdown()
        try await close()
    }
}
