public import Foundation
public import Logging
public import ObjectGraph
public import ObjectGraphReplication

/// The packages in an ObjectGraph store owned by an `AsyncStore`: reads from its current
/// snapshot on the request's task, syncs as transactions on its actor.
///
/// Three roles: a standalone store; a primary, whose saves also ship to a JetStream stream (a
/// `JournalShipper` attached to the `AsyncStore`'s journal); a read replica, whose `AsyncStore`
/// is a `Follower`'s, applying what the stream brings and refusing writes.
public final class ObjectGraphBackend: PackageBackend {
    /// What the store is to other stores.
    public enum Role: Sendable {
        case standalone
        /// Ships every durable save to `target`'s stream.
        case primary(JournalShipper, ReplicationTarget)
        /// Follows a stream; its store is read-only.
        case replica(Follower, ReplicationTarget)

        /// `standalone`, `primary` or `replica`.
        public var name: String {
            switch self {
            case .standalone: "standalone"
            case .primary: "primary"
            case .replica: "replica"
            }
        }
    }

    public var name: String { BackendKind.objectgraph.rawValue }
    public let store: AsyncStore
    public let role: Role
    private let maintainers: EntityMapping<DebianMaintainer>
    private let packages: EntityMapping<DebianPackage>

    /// The schema of the service's two entities.
    public static func schema() throws -> Schema { try Schema(DebianPackage.self, DebianMaintainer.self) }

    /// Opens (or creates) the store in `directory`.
    ///
    /// - Throws: `StoreError` when the directory cannot be opened (locked by another process,
    ///   a damaged journal), or a mapping error if the entities and mappings disagree.
    public convenience init(directory: URL, logger: Logger) throws {
        var options = StoreOptions()
        options.logger = logger
        try self.init(
            store: try AsyncStore(at: directory, schema: try Self.schema(), options: options), role: .standalone)
    }

    private init(store: AsyncStore, role: Role) throws {
        self.store = store
        self.role = role
        (maintainers, packages) = try Self.mappings()
    }

    /// Opens (or creates) the store in `directory` as a primary: every save, once durable
    /// locally, also ships to `target`'s stream (created when missing). The `AsyncStore` keeps
    /// its group commit: the shipper prepares the options (its durable-record feed, no automatic
    /// compaction), then attaches to the opened store's journal, first shipping what the stream
    /// lacks of it.
    ///
    /// - Throws: `ReplicationError` (`server`: no server answered; `diverged`: the stream holds
    ///   another store's history), or what opening the store throws.
    public static func primary(
        directory: URL, target: ReplicationTarget, logger: Logger
    ) async throws -> ObjectGraphBackend {
        let shipper = try JournalShipper(target: target)
        var options = StoreOptions()
        options.logger = logger
        shipper.prepare(&options)
        let store = try AsyncStore(at: directory, schema: try schema(), options: options)
        do {
            try shipper.attach(store.shippingSource)
            return try ObjectGraphBackend(store: store, role: .primary(shipper, target))
        } catch {
            shipper.stop()
            try? await store.close()
            throw error
        }
    }

    /// Opens (or creates) a read-only replica in `directory` that follows `source`'s stream: a
    /// `Follower`, whose `AsyncStore` publishes a snapshot after each of the writer's
    /// transactions it applies. It resumes where its journal says it stopped.
    ///
    /// - Throws: `ReplicationError` (`server`, `unavailable`), `StoreError` from the open.
    public static func replica(
        directory: URL, source: ReplicationTarget, logger: Logger
    ) async throws -> ObjectGraphBackend {
        var options = Follower.defaultOptions
        options.logger = logger
        let follower = try await ObjectStore.follow(
            at: directory, schema: try schema(), source: source, options: options)
        do {
            return try ObjectGraphBackend(store: follower.store, role: .replica(follower, source))
        } catch {
            try? await follower.stop()
            throw error
        }
    }

    /// How a sync document maps: maintainers identified by name; packages by name, skipped when
    /// their version is the stored one, connected to their maintainer by its name (as the
    /// demo's sync, Tools/Demo/Sync.swift).
    private static func mappings() throws -> (EntityMapping<DebianMaintainer>, EntityMapping<DebianPackage>) {
        var maintainers = EntityMapping(DebianMaintainer.self)
        try maintainers.map("maintainer", to: "name")
        try maintainers.identify(by: "name")
        var packages = EntityMapping(DebianPackage.self)
        try packages.map(
            "name", "version", "architecture", "section", "priority", "installedSize", "size", "maintainer",
            "homepage", "depends", "sha256")
        try packages.map("description", to: "summary")
        try packages.identify(by: "name")
        try packages.useModificationAttribute("version")
        try packages.connect("maintainedBy", by: ["maintainer": "name"])
        return (maintainers, packages)
    }

    public func package(named name: String) throws -> PackageBody? {
        try store.snapshot.object(DebianPackage.self, where: \.name, equals: name)?.decode(as: PackageBody.self)
    }

    public func packages(section: String?, limit: Int) throws -> [PackageBody] {
        var descriptor = FetchDescriptor<DebianPackage>(sortBy: [SortDescriptor(\.name)])
        if let section { descriptor.predicate = #Predicate { $0.section == section } }
        descriptor.fetchLimit = limit
        return try store.snapshot.fetch(descriptor, as: PackageBody.self)
    }

    public func sync(_ document: Data) async throws -> SyncBody {
        if case .replica(_, let source) = role {
            throw RequestRejected(
                .readOnly,
                ErrorBody(
                    error:
                        "this service is a read replica following stream \(source.stream): it accepts no writes; send POST /sync to the primary"
                ))
        }
        let (maintainers, packages) = (self.maintainers, self.packages)
        let start = ContinuousClock.now
        let (result, records): (SyncResult, Int)
        do {
            (result, records) = try await store.perform { context in
                var records = 0
                let result = try context.sync([DebianPackage.self, DebianMaintainer.self]) { sync in
                    try sync.map(document, with: maintainers)
                    records = try sync.map(document, with: packages).sourceCount
                }
                return (result, records)
            }
        } catch let error as MappingError {
            throw RequestRejected(
                .badRequest,
                ErrorBody(
                    error: error.message, byteOffset: error.byteOffset, record: error.sourceIndex, key: error.keyPath))
        } catch let error as SyncError where error.code == .emptySync {
            let stored = (try? store.snapshot.count(of: DebianPackage.self)) ?? error.wouldRemove
            throw RequestRejected(.conflict, ErrorBody(error: emptyDocumentMessage(wouldDelete: stored)))
        } catch let error as SyncError where error.code == .sweepLimitExceeded {
            guard error.entity == "DebianPackage", let stored = try? store.snapshot.count(of: DebianPackage.self) else {
                throw RequestRejected(.conflict, ErrorBody(error: error.message))
            }
            throw RequestRejected(
                .conflict, ErrorBody(error: sweepRefusedMessage(wouldDelete: error.wouldRemove, of: stored)))
        }
        let elapsed = ContinuousClock.now - start
        func counts(_ entity: String) -> SyncCountsBody {
            let c = result.counts[entity] ?? SyncCounts()
            return SyncCountsBody(
                inserted: c.inserted, updated: c.updated, unchanged: c.unchanged,
                deleted: c.swept + c.tombstoned + c.invalid)
        }
        return SyncBody(
            packages: counts("DebianPackage"), maintainers: counts("DebianMaintainer"), records: records,
            milliseconds: elapsed.milliseconds.rounded(places: 3), snapshotVersion: store.snapshot.version)
    }

    public func stats() throws -> StatsBody {
        let snapshot = store.snapshot
        let publishing = store.snapshotStatistics
        return StatsBody(
            backend: name,
            packages: try snapshot.count(of: DebianPackage.self),
            maintainers: try snapshot.count(of: DebianMaintainer.self),
            snapshotVersion: snapshot.version,
            snapshotPublishing: PublishStatsBody(
                publishes: publishing.publishes,
                lastPublishMicroseconds: (publishing.lastPublish.milliseconds * 1000).rounded(places: 1),
                totalPublishMilliseconds: publishing.totalPublish.milliseconds.rounded(places: 3)),
            store: store.directory.path,
            bytesOnDisk: store.stats.bytesOnDisk)
    }

    public func isEmpty() throws -> Bool {
        try store.snapshot.count(of: DebianPackage.self) == 0
    }

    public func close() async throws {
        switch role {
        case .standalone:
            try await store.close()
        case .primary(let shipper, _):
            // What did not ship in time stays in the journal and ships at the next start.
            try? shipper.waitShipped(through: store.shippingSource.lastSequence, timeout: .seconds(5))
            shipper.stop()
            try await store.close()
        case .replica(let follower, _):
            try await follower.stop()
        }
    }

    public func health() async -> HealthBody {
        switch role {
        case .standalone:
            return HealthBody(role: role.name, backend: name, lastSequence: store.shippingSource.lastSequence)
        case .primary(let shipper, let target):
            let status = shipper.status
            return HealthBody(
                status: status.diverged == nil ? "ok" : "failing", role: role.name, backend: name,
                lastSequence: store.shippingSource.lastSequence, stream: target.stream,
                shippedSequence: status.shippedSequence, backlogRecords: status.backlogRecords,
                error: status.diverged ?? status.lastError)
        case .replica(let follower, let source):
            let status = follower.status
            return HealthBody(
                status: status.failed == nil ? "ok" : "failing", role: role.name, backend: name,
                lastSequence: status.appliedSequence, stream: source.stream, lagMessages: status.lagMessages,
                streamLastSequence: status.streamLastSequence,
                appliedMessageAgeSeconds: status.appliedMessageTime.map {
                    Date().timeIntervalSince($0).rounded(places: 3)
                },
                error: status.failed ?? status.lastError)
        }
    }
}

extension Duration {
    /// This duration in milliseconds.
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}

extension Double {
    /// Rounded to `places` decimal places, for figures in answers.
    func rounded(places: Int) -> Double {
        let scale = (0..<places).reduce(1.0) { value, _ in value * 10 }
        return (self * scale).rounded() / scale
    }
}
