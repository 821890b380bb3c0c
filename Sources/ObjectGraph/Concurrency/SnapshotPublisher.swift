internal import CoreMetrics
internal import HashTreeCollections
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

    /// Times each publish for the store's metrics (nil: no store, no metrics).
    private let publishTimer: CoreMetrics.Timer?

    init(_ first: StoreSnapshot, publishTimer: CoreMetrics.Timer? = nil) {
        state = Mutex(State(snapshot: first))
        self.publishTimer = publishTimer
    }

    var snapshot: StoreSnapshot { state.withLock { $0.snapshot } }

    var builtVersion: UInt64 { built.load(ordering: .acquiring) }

    /// Records that the writer built `version`, in `duration`.
    func didBuild(_ version: UInt64, took duration: Duration) {
        built.store(version, ordering: .releasing)
        publishTimer?.recordNanoseconds(StoreInstruments.nanoseconds(duration))
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
            SnapshotStatistics(
                version: s.snapshot.version, publishes: s.publishes, lastPublish: s.lastPublish,
                totalPublish: s.totalPublish)
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

    /// Builds the first snapshot from the context's committed state.
    init(context: ModelContext, publishTimer: CoreMetrics.Timer? = nil) {
        schema = context.schema
        var tables: [SnapshotTable] = []
        for t in context.tables {
            var table = SnapshotTable(layout: RowLayout(table: t))
            table.load(from: t, generation: 0)
            tables.append(table)
        }
        self.tables = tables
        links = context.links.map { l in
            l.collectsTouched = true
            l.touched = [[], []]
            var s = SnapshotLinks()
            for side in 0..<2 {
                let t = l.table(side)
                for row in l.rowsWithLinks(side) where row < t.rowCount && t.isVisible(row: row) {
                    s.refresh(side, row: row, of: l)
                }
            }
            return s
        }
        hub = SnapshotHub(
            StoreSnapshot(version: 0, schema: context.schema, tables: tables, links: links), publishTimer: publishTimer)
    }

    /// Per link table of the context: its lists as of the last publication.
    private var links: [SnapshotLinks]

    /// Copies the lists the last transaction changed into the snapshot's links: the owners its
    /// link changes touched and the partners of the objects it deleted (`deleted`: per entity,
    /// the serials and, while they are not freed yet, the rows). Returns whether any changed.
    private func publishLinks(_ context: ModelContext, deleted: [(entity: Int, serials: [UInt64], rows: [Int])]) -> Bool
    {
        var changed = false
        for (k, l) in context.links.enumerated() {
            for side in 0..<2 {
                let entity = l.link.entities[side]
                for d in deleted where d.entity == entity {
                    for serial in d.serials where links[k].sides[side][serial] != nil {
                        links[k].sides[side][serial] = nil
                        changed = true
                    }
                    for row in d.rows { for m in l.members(side, row) { l.touched[1 - side].insert(m) } }
                }
            }
            for side in 0..<2 {
                let t = l.table(side)
                for r in l.touched[side] where Int(r) < t.rowCount && t.isVisible(row: Int(r)) {
                    links[k].refresh(side, row: Int(r), of: l)
                    changed = true
                }
            }
            l.touched = [[], []]
        }
        return changed
    }

    /// Publishes the state a save just committed: `pending` lists each table's inserted,
    /// updated and deleted rows (the deleted ones not yet released).
    func publish(_ context: ModelContext, pending: [PendingRows]) {
        let start = ContinuousClock.now
        var changed = false
        for (i, (t, p)) in zip(context.tables, pending).enumerated() where !p.isEmpty {
            changed = true
            for r in p.inserts {
                let row = Int(r)
                tables[i].upsert(t.serial(ofRow: row), from: t, row: row, generation: generation)
            }
            for row in p.updates { tables[i].upsert(t.serial(ofRow: row), from: t, row: row, generation: generation) }
            for row in p.deletes { tables[i].remove(t.serial(ofRow: row), generation: generation) }
        }
        if !context.links.isEmpty {
            let deleted = zip(context.tables, pending).enumerated().compactMap { i, tp in
                tp.1.deletes.isEmpty ? nil : (i, tp.1.deletes.map { tp.0.serial(ofRow: $0) }, tp.1.deletes)
            }
            if publishLinks(context, deleted: deleted) { changed = true }
        }
        if changed { finish(start, context) }
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
        if !context.links.isEmpty {
            // The deleted objects' rows are freed already; their partners were noted then.
            let deleted = changes.entities.compactMap { c in
                c.deletedSerials.isEmpty
                    ? nil : context.schema.indexByName[c.entityName].map { ($0, c.deletedSerials, [Int]()) }
            }
            if publishLinks(context, deleted: deleted) { changed = true }
        }
        if changed { finish(start, context) }
    }

    /// Builds the next snapshot and hands it to the context's door, which publishes it at once
    /// or, under group commit, once the save's record is durable (``GroupCommitDoor``).
    private func finish(_ start: ContinuousClock.Instant, _ context: ModelContext) {
        version += 1
        let snapshot = StoreSnapshot(version: version, schema: schema, tables: tables, links: links)
        generation += 1
        let took = ContinuousClock.now - start
        if let door = context.door {
            door.publish(snapshot, to: hub, took: took)
        } else {
            hub.publish(snapshot, took: took)
        }
    }
}

/// One link table's lists in a snapshot: per side, each object's related objects by serial, in
/// order for an ordered side. Persistent: a publication copies the lists that changed.
struct SnapshotLinks: Sendable {
    var sides: [TreeDictionary<UInt64, [UInt64]>] = [[:], [:]]

    /// Copies `row`'s visible list on `side` from the context's link table.
    mutating func refresh(_ side: Int, row: Int, of l: LinkTable) {
        let other = l.table(1 - side)
        let serial = l.table(side).identity.serialOfRow[row]
        let members = l.visibleMembers(side, row).map { other.identity.serialOfRow[$0] }
        sides[side][serial] = members.isEmpty ? nil : members
    }
}
