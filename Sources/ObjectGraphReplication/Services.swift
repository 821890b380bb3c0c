import Dispatch
import ObjectGraph
public import ServiceLifecycle

/// A shipper runs as a swift-service-lifecycle `Service`: until graceful shutdown, it ships
/// (it already does from ``attach(_:)`` on); then it drains what is left for
/// ``ReplicationTarget/drainTimeout`` and stops.
///
/// List it after its store and before the services that write, so that it shuts down after
/// the writers and before the store (a `ServiceGroup` shuts its services down in reverse
/// order):
///
/// ```swift
/// let group = ServiceGroup(
///     services: [store, shipper, httpServer],   // shut down: httpServer, shipper, store
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
extension JournalShipper: Service {
    /// Waits for graceful shutdown (or cancellation), then drains and stops.
    ///
    /// - Throws: ``ReplicationError`` with code `notAcknowledged` when records are left
    ///   unshipped after the drain: the message is the ``ShippingReport``'s (how many, which,
    ///   why). They are safe in the local journal and ship at the next open.
    public func run() async throws {
        try? await gracefulShutdown()
        let timeout = target.drainTimeout
        let report = await withCheckedContinuation { (done: CheckedContinuation<ShippingReport, Never>) in
            // `drain` blocks while it waits: off the cooperative pool.
            DispatchQueue.global().async { done.resume(returning: self.drain(timeout: timeout)) }
        }
        stop(releasingLease: report.isComplete)
        if !report.isComplete { throw ReplicationError(.notAcknowledged, report.description) }
    }
}

/// A follower runs as a swift-service-lifecycle `Service`: it follows until graceful shutdown,
/// then stops and closes its replica (``stop()``).
extension Follower: Service {
    /// Waits for graceful shutdown (or cancellation), then stops following and closes the
    /// replica.
    ///
    /// - Throws: ``StoreError`` from closing the replica.
    public func run() async throws {
        try? await gracefulShutdown()
        try await stop()
    }
}
