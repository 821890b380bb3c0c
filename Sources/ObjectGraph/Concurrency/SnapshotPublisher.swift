import Synchronization

/// The latest published snapshot, shared between the writer and every reader.
///
/// Readers take the current snapshot under a lock held for one reference copy; the writer
/// replaces it under the same lock. The lock also orders the writer's page writes before any
/// reader's reads of them (``TreeNode``).
final class SnapshotHub: Sendable {
    private struct State {
        var snapshot: StoreSnapshot
        var publishes = 0
        var lastPublish = Duration.zero
        var totalPublish = Duration.zero
    }

    private let state: Mutex<State>
    /// The version of the newest snapshot built, published or not (with group commit a
    /// snapshot is published once its save is durable).
    private let built = Atomic<UInt64>(0)

    init(_ first: StoreSnapshot) { state = Mutex(State(snapshot: first)) }

    var snapshot: StoreSnapshot { state.withLock { $0.snapshot } }

    var builtVersion: UInt64 { built.load(ordering: .acquiring) }

    /// Records that the writer built `version`, in `duration`.
    func didBuild(_ version: UInt64, took duration: Duration) {
        built.store(version, ordering: .releasing)
        state.withLock { s in
            s.publishes += 1
            s.lastPublish = duration
            s.totalPublish += duration
        }
    }

    /// Makes `snapshot` the current one unless a newer one is.
    func publishIfNewer(_ snapshot: StoreSnapshot) {
        let old: StoreSnapshot? = state.withLock { s in
            guard snapshot.version > s.snapshot.version else { return nil }
            defer { s.snapshot = snapshot }
            return s.snapshot
        }
        withExtendedLifetime(old) {}
    }

    func publish(_ snapshot: StoreSnapshot, took duration: Duration) {
        didBuild(snapshot.version, took: duration)
        // The old snapshot is released outside the lock: when no reader holds it any more,
        // freeing the pages only it had is the writer's work, not a reader's wait.
        publishIfNewer(snapshot)
    }

    var statistics: SnapshotStatistics {
        state.withLock { s in
            SnapshotStatistics(version: s.snapshot.version, publishes: s.publishes, lastPublish: s.lastPublish, totalPublish: s.totalPublish)
        }
    }
}

/// How publishing snapshots has gone so far: for a daemon's metrics.
public struct SnapshotStatistics: Sendable, Hashable {
    /// The version of the current snapshot (``StoreSnapshot/version``).
    public var version: UInt64
    /// The snapshots published after a save since the store opened.
    public var publishes: Int
    /// How long the last publish took (the writer's work after the save's commit).
    public var lastPublish: Duration
    /// How long every publish took in all.
    public var totalPublish: Duration
}

/// The writer's side of snapshots: its own copy of every entity's snapshot table, changed by
/// each save and then published.
///
/// Attached to a context (``ModelContext/snapshotPublisher``); a save calls
/// ``publish(_:pending:)`` after its commit, ``ModelContext/apply(_:)`` calls
/// ``publish(_:changes:)``. Only the rows a save changed are copied into the tables: their
/// pages, the pages of the unique indexes that hold their keys, and one directory node each.
final class SnapshotPublisher {
    private var tables: [SnapshotTable]
    private let schema: Schema
    /// The generation pages created from now on belong to; every published page belongs to an
    /// earlier one and is never written again.
    private var generation: UInt64 = 1
    private var version: UInt64 = 0
    let hub: SnapshotHub
    /// With group commit: a save's snapshot is kept here (``takeBuilt()``) instead of being
    /// published, until its record is durable.
    var defersPublication = false
    private var built: StoreSnapshot?

    /// The snapshot the last save built and did not publish, if any; clears it.
    func takeBuilt() -> StoreSnapshot? {
        defer { built = nil }
        return built
    }

    /// Builds the first snapshot from the context's committed state.
    init(context: ModelContext) {
        schema = context.schema
        var tables: [SnapshotTable] = []
        for t in context.tables {
            var table = SnapshotTable(layout: RowLayout(table: t))
            table.load(from: t, generation: 0)
            tables.append(table)
        }
        self.tables = tables
        hub = SnapshotHub(StoreSnapshot(version: 0, schema: context.schema, tables: tables))
    }

    /// Publishes the state a save just committed: `pending` lists each table's inserted,
    /// updated and deleted rows (the deleted ones not yet released).
    func publish(_ context: ModelContext, pending: [PendingRows]) {
        let start = ContinuousClock.now
        var changed = false
        for (i, (t, p)) in zip(context.tables, pending).enumerated() where !p.isEmpty {
            changed = true
            for row in p.inserts { tables[i].upsert(t.serial(ofRow: row), from: t, row: row, generation: generation) }
            for row in p.updates { tables[i].upsert(t.serial(ofRow: row), from: t, row: row, generation: generation) }
            for row in p.deletes { tables[i].remove(t.serial(ofRow: row), generation: generation) }
        }
        if changed { finish(start) }
    }

    /// Publishes the state ``ModelContext/apply(_:)`` just committed.
    func publish(_ context: ModelContext, changes: ChangeSet) {
        let start = ContinuousClock.now
        var changed = false
        for c in changes.entities where !c.isEmpty {
            guard let i = context.tables.firstIndex(where: { $0.entity.name == c.entityName }) else { continue }
            let t = context.tables[i]
            changed = true
            var upserted = Set<UInt64>()
            for serial in c.insertedSerials + c.updates.map(\.serial) where upserted.insert(serial).inserted {
                guard let row = t.row(ofSerial: serial) else { continue }
                tables[i].upsert(serial, from: t, row: row, generation: generation)
            }
            for serial in c.deletedSerials { tables[i].remove(serial, generation: generation) }
        }
        if changed { finish(start) }
    }

    private func finish(_ start: ContinuousClock.Instant) {
        version += 1
        let snapshot = StoreSnapshot(version: version, schema: schema, tables: tables)
        generation += 1
        if defersPublication {
            built = snapshot
            hub.didBuild(version, took: ContinuousClock.now - start)
        } else {
            hub.publish(snapshot, took: ContinuousClock.now - start)
        }
    }
}
