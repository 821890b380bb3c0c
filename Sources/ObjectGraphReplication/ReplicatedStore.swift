public import Foundation
public import ObjectGraph

/// An ``ObjectStore`` that ships its journal to a JetStream stream (``JournalShipper``).
///
/// ```swift
/// let target = ReplicationTarget(servers: ["nats://127.0.0.1:4222"], stream: "PKGD")
/// let replicated = try ReplicatedStore.open(at: directory, schema: schema, target: target)
/// let p = try replicated.context.insert(Package.self) { $0.name = "zlib1g" }
/// try replicated.context.save()        // durable locally; ships in the background
/// try replicated.compact()             // a new base, shipped to the base subject
/// try replicated.close()
/// ```
///
/// Saves behave as an ``ObjectStore``'s; with ``ShippingPolicy/synchronous(timeout:)`` a save
/// also waits for the stream's acknowledgement and throws ``ReplicationError`` with code
/// `notAcknowledged` when it does not come (the save stands). Automatic compaction is off:
/// ``compact(progress:)`` ships the base it writes.
public final class ReplicatedStore {
    /// The store.
    public let store: ObjectStore
    /// The shipper.
    public let shipper: JournalShipper

    /// Its context.
    public var context: ModelContext { store.context }

    init(store: ObjectStore, shipper: JournalShipper) {
        self.store = store
        self.shipper = shipper
    }

    /// Connects to the target, opens the store and starts shipping: first what the stream lacks
    /// of the journal, then every save.
    ///
    /// With ``StoreOptions/migrationPlan`` set, a store at an earlier version of the model is
    /// migrated at open, and the stream gets the migration as a base: the journal then starts
    /// with a base of the new version (a lightweight migration, which rewrites nothing, is
    /// compacted here to make one), which ships on the base subject before any record saved
    /// after it. Replicas of the new version install that base; replicas of the old one refuse
    /// it (``Follower``). Old records the stream had not acknowledged yet are in the base, not
    /// on the log (Docs/Replication.md, "Migrations").
    ///
    /// - Throws: ``ReplicationError`` (`server`: no server answered; `diverged`: the stream
    ///   holds another history, see ``JournalShipper/attach(_:)``), or ``StoreError`` from the
    ///   open. Nothing is shipped when it throws.
    public static func open(
        at directory: URL, schema: Schema, options: StoreOptions = StoreOptions(), target: ReplicationTarget
    ) throws -> ReplicatedStore {
        let shipper = try JournalShipper(target: target)
        var options = options
        shipper.prepare(&options)
        let store = try ObjectStore.open(at: directory, schema: schema, options: options)
        do {
            if store.migratedFrom != nil, !store.migrationWroteBase {
                // Records of the old version followed by the new schema: a base of the new
                // version in front of what follows, as a custom stage's migration writes.
                try store.compact()
            }
            try shipper.attach(store.shippingSource)
        } catch {
            try? store.close()
            throw error
        }
        return ReplicatedStore(store: store, shipper: shipper)
    }

    /// Ships what is not shipped yet, compacts, and ships the new base to the base subject, so
    /// that followers and restores need not replay the whole history.
    ///
    /// - Parameter timeout: how long to wait for the backlog and then the base to ship.
    /// - Throws: ``ReplicationError`` with code `notAcknowledged` when the backlog does not
    ///   ship in time (nothing was compacted) or the base does not (the store is compacted; the
    ///   base ships when the servers answer); ``StoreError`` from the compaction.
    public func compact(timeout: Duration = .seconds(30), progress: ProgressHandler? = nil) throws {
        try shipper.waitShipped(through: store.stats.lastSequence, timeout: timeout)
        try store.compact(progress: progress)
        try shipper.shipBase(timeout: timeout)
    }

    /// Waits up to `timeout` for the backlog to ship, stops the shipper and closes the store.
    /// What did not ship stays in the journal and ships at the next open; the report says how
    /// much that is, and why (check ``ShippingReport/isComplete``: until the next open those
    /// records exist on this machine only).
    ///
    /// With a writer lease (``ReplicationTarget/lease``), a close that shipped everything
    /// releases it: a standby takes the stream over at once. Otherwise the lease lapses after
    /// its time to live.
    ///
    /// ```swift
    /// let report = try replicated.close()
    /// if !report.isComplete { logger.warning("\(report)") }
    /// ```
    ///
    /// - Returns: what shipped and what did not.
    /// - Throws: ``StoreError`` from the close (the store is closed whatever the shipping did).
    @discardableResult
    public func close(timeout: Duration = .seconds(5)) throws -> ShippingReport {
        let report = shipper.drain(timeout: timeout)
        shipper.stop(releasingLease: report.isComplete)
        try store.close()
        return report
    }
}
