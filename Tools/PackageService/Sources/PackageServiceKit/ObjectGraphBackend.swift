public import Foundation
public import Logging
public import ObjectGraph

/// The packages in an ObjectGraph store owned by an `AsyncStore`: reads from its current
/// snapshot on the request's task, syncs as transactions on its actor.
public final class ObjectGraphBackend: PackageBackend {
    public var name: String { BackendKind.objectgraph.rawValue }
    public let store: AsyncStore
    private let maintainers: EntityMapping<DebianMaintainer>
    private let packages: EntityMapping<DebianPackage>

    /// Opens (or creates) the store in `directory`.
    ///
    /// - Throws: `StoreError` when the directory cannot be opened (locked by another process,
    ///   a damaged journal), or a mapping error if the entities and mappings disagree.
    public init(directory: URL, logger: Logger) throws {
        var options = StoreOptions()
        options.logger = logger
        store = try AsyncStore(
            at: directory, schema: try Schema(DebianPackage.self, DebianMaintainer.self), options: options)
        (maintainers, packages) = try Self.mappings()
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
        try await store.close()
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
