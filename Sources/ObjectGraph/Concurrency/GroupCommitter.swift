internal import CoreMetrics
import Dispatch
import GraphJournal
import Synchronization

/// Group commit for an ``AsyncStore`` with `.always` durability: a save appends its record
/// without waiting, the transaction that made it waits (suspended, off the actor) for an
/// `fdatasync` that covers it, and one `fdatasync` covers every record appended while the
/// previous one ran.
///
/// While one transaction waits for the disk, the actor runs the next ones: eight tasks that each
/// commit one-record transactions share their syncs instead of queueing one sync each. A
/// transaction still returns only once its record is durable, and its snapshot is published
/// and its changes delivered only then, so no reader sees a save that a crash could take back.
///
/// An `fdatasync` that fails is final: the records it should have covered may be lost while
/// the context already holds them, so every waiting transaction throws, the store refuses
/// further writes, and it must be reopened (the journal then holds what was durable). This is
/// what PostgreSQL does when an `fsync` fails.
final class GroupCommitter: Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<Void, any Error>
        /// The snapshot the transaction's save built, published once the record is durable.
        let snapshot: StoreSnapshot?
    }

    private struct State {
        var waiting: [Waiter] = []
        var draining = false
        var failure: StoreError?
        var syncs = 0
        var covered = 0
    }

    private let journal: Journal
    private let snapshots: SnapshotHub
    private let changes: ChangeHub
    private let directory: String
    private let state = Mutex(State())
    /// Where the syncs run: blocking `fdatasync` calls stay off Swift's cooperative pool.
    private let queue = DispatchQueue(label: "ObjectGraph.group-commit")

    /// Records how many transactions each sync covered, for the store's metrics.
    private let sizes: Recorder?

    init(journal: Journal, snapshots: SnapshotHub, changes: ChangeHub, directory: String, sizes: Recorder? = nil) {
        self.sizes = sizes
        self.journal = journal
        self.snapshots = snapshots
        self.changes = changes
        self.directory = directory
    }

    /// The error every write gets after a sync failed; nil while the store is healthy.
    var failure: StoreError? { state.withLock { $0.failure } }

    /// How many syncs ran and how many transactions they covered.
    var counts: (syncs: Int, transactions: Int) { state.withLock { ($0.syncs, $0.covered) } }

    /// Waits until an `fdatasync` covered every record appended so far, then publishes
    /// `snapshot` (if newer than the current one) and delivers the changes staged up to it.
    func waitDurable(publishing snapshot: StoreSnapshot?) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let start: Bool? = state.withLock { s in
                if s.failure != nil { return nil }
                s.waiting.append(Waiter(continuation: continuation, snapshot: snapshot))
                defer { s.draining = true }
                return !s.draining
            }
            switch start {
            case nil: continuation.resume(throwing: failure ?? StoreError(.journal, "the store must be reopened"))
            case true?: queue.async { self.drain() }
            case false?: break
            }
        }
    }

    /// Syncs for the waiters present, resumes them, and goes on while more arrived meanwhile.
    private func drain() {
        while true {
            let batch: [Waiter] = state.withLock { s in
                defer { s.waiting.removeAll() }
                if s.waiting.isEmpty { s.draining = false }
                return s.waiting
            }
            if batch.isEmpty { return }
            do {
                try journal.sync()
            } catch {
                let failure = StoreError(
                    .journal,
                    "an fdatasync of \(directory) failed (\(error)); saves that were not yet durable may be lost: "
                        + "the store refuses writes until it is reopened")
                let rest = state.withLock { s in
                    s.failure = failure
                    defer { s.waiting.removeAll() }
                    return s.waiting
                }
                for w in batch + rest { w.continuation.resume(throwing: failure) }
                return
            }
            if let newest = batch.compactMap(\.snapshot).max(by: { $0.version < $1.version }) {
                snapshots.publishIfNewer(newest)
                changes.release(through: newest.version)
            }
            state.withLock { s in
                s.syncs += 1
                s.covered += batch.count
            }
            // Transactions only: a close's wait carries no snapshot.
            let transactions = batch.count { $0.snapshot != nil }
            if transactions > 0 { sizes?.record(transactions) }
            for w in batch { w.continuation.resume() }
        }
    }
}
