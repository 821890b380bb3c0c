import Synchronization

/// The changes of one or more saves, as an element of ``AsyncStore/changes``.
public struct SavedChanges: Sendable, Hashable {
    /// What the saves changed, merged: see ``AsyncStore/changes`` for the rules.
    public var changes: ContextChanges
    /// How many saves this element covers: 1 unless the consumer fell behind.
    public var saves: Int
    /// The version of the snapshot published by the last of these saves
    /// (``StoreSnapshot/version``): a snapshot with this version or later shows them.
    public var version: UInt64
}

extension ContextChanges {
    /// These changes followed by `later`'s, as one record: what an observer that missed the
    /// saves in between needs to know.
    ///
    /// An object inserted and then deleted disappears; inserted and then updated stays
    /// inserted; updated and then deleted is deleted; the keys of two updates are united. The
    /// order is that of first appearance.
    public func merged(with later: ContextChanges) -> ContextChanges {
        let laterDeleted = Set(later.deleted)
        var inserted = inserted.filter { !laterDeleted.contains($0) }
        let insertedSet = Set(self.inserted)
        inserted += later.inserted.filter { !laterDeleted.contains($0) }
        let allInserted = Set(inserted)
        var keys: [ObjectID: Set<String>] = [:]
        var order: [ObjectID] = []
        for u in updated + later.updated where !allInserted.contains(u.objectID) && !laterDeleted.contains(u.objectID) {
            if keys[u.objectID] == nil { order.append(u.objectID) }
            keys[u.objectID, default: []].formUnion(u.changedKeys)
        }
        let deleted = deleted + later.deleted.filter { !insertedSet.contains($0) }
        return ContextChanges(
            inserted: inserted, updated: order.map { Update(objectID: $0, changedKeys: keys[$0] ?? []) },
            deleted: deleted)
    }
}

/// The subscribers of an ``AsyncStore``'s changes. Each has at most one pending element, into
/// which saves merge while its consumer is away, and at most one waiting consumer.
final class ChangeHub: Sendable {
    private struct Subscriber {
        var pending: SavedChanges?
        var waiter: CheckedContinuation<SavedChanges?, Never>?
    }

    private struct State {
        var nextID: UInt64 = 0
        var subscribers: [UInt64: Subscriber] = [:]
        var finished = false
        /// With group commit: saves waiting for their record to be durable.
        var staged: [SavedChanges] = []
    }

    private let state = Mutex(State())
    /// Where the version of the snapshot a save published is read.
    private let snapshots: SnapshotHub

    init(snapshots: SnapshotHub) {
        self.snapshots = snapshots
    }

    /// Whether anybody subscribes: when not, a save builds no ``ContextChanges``.
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    /// Registers a subscriber; nil when the hub has finished.
    func subscribe() -> UInt64? {
        state.withLock { s in
            guard !s.finished else { return nil }
            s.nextID += 1
            s.subscribers[s.nextID] = Subscriber()
            return s.nextID
        }
    }

    func unsubscribe(_ id: UInt64) {
        let waiter = state.withLock { $0.subscribers.removeValue(forKey: id)?.waiter }
        waiter?.resume(returning: nil)
    }

    /// Hands one save's changes to every subscriber: to its waiting consumer, or merged into its
    /// pending element.
    func deliver(_ changes: ContextChanges) {
        hand(SavedChanges(changes: changes, saves: 1, version: snapshots.builtVersion))
    }

    /// Keeps one save's changes until ``release(through:)`` reaches the version of the snapshot
    /// it built (group commit: once its record is durable).
    func stage(_ changes: ContextChanges) {
        let element = SavedChanges(changes: changes, saves: 1, version: snapshots.builtVersion)
        state.withLock { $0.staged.append(element) }
    }

    /// Delivers the staged saves whose snapshot `version` or an earlier one shows.
    func release(through version: UInt64) {
        let ready: [SavedChanges] = state.withLock { s in
            let n = s.staged.prefix { $0.version <= version }.count
            defer { s.staged.removeFirst(n) }
            return Array(s.staged.prefix(n))
        }
        for element in ready { hand(element) }
    }

    private func hand(_ element: SavedChanges) {
        let changes = element.changes, version = element.version
        let ready: [(CheckedContinuation<SavedChanges?, Never>, SavedChanges)] = state.withLock { s in
            var ready: [(CheckedContinuation<SavedChanges?, Never>, SavedChanges)] = []
            for id in s.subscribers.keys {
                if let waiter = s.subscribers[id]?.waiter {
                    s.subscribers[id]?.waiter = nil
                    ready.append((waiter, element))
                } else if let pending = s.subscribers[id]?.pending {
                    s.subscribers[id]?.pending = SavedChanges(
                        changes: pending.changes.merged(with: changes), saves: pending.saves + 1, version: version)
                } else {
                    s.subscribers[id]?.pending = element
                }
            }
            return ready
        }
        for (waiter, element) in ready { waiter.resume(returning: element) }
    }

    /// Ends every sequence: their consumers get what is pending, then nil.
    func finish() {
        let waiters = state.withLock { s in
            s.finished = true
            var waiters: [CheckedContinuation<SavedChanges?, Never>] = []
            for id in s.subscribers.keys {
                if let w = s.subscribers[id]?.waiter {
                    waiters.append(w)
                    s.subscribers[id] = nil
                }
            }
            return waiters
        }
        for w in waiters { w.resume(returning: nil) }
    }

    /// The next element for `id`: the pending one at once, else waits for a save; nil once the
    /// hub finished (after the pending element) or the consumer's task is cancelled.
    func next(_ id: UInt64) async -> SavedChanges? {
        enum Take {
            case element(SavedChanges)
            case end
            case wait
        }
        let take: Take = state.withLock { s in
            if let pending = s.subscribers[id]?.pending {
                s.subscribers[id]?.pending = nil
                return .element(pending)
            }
            if s.finished || s.subscribers[id] == nil {
                s.subscribers[id] = nil
                return .end
            }
            return .wait
        }
        switch take {
        case .element(let e): return e
        case .end: return nil
        case .wait: break
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SavedChanges?, Never>) in
                let resumeNow: SavedChanges?? = state.withLock { s in
                    if let pending = s.subscribers[id]?.pending {
                        s.subscribers[id]?.pending = nil
                        return .some(pending)
                    }
                    if s.finished || s.subscribers[id] == nil || Task.isCancelled { return .some(nil) }
                    s.subscribers[id]?.waiter = continuation
                    return .none
                }
                if let value = resumeNow { continuation.resume(returning: value) }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<SavedChanges?, Never>? in
                defer { s.subscribers[id]?.waiter = nil }
                return s.subscribers[id]?.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}

/// The changes of an ``AsyncStore``'s saves, as an `AsyncSequence` (``AsyncStore/changes``).
///
/// The subscription starts when the sequence is created and ends when it is released; one
/// sequence is meant for one consumer (two iterators of the same sequence share its pending
/// element).
public final class StoreChanges: AsyncSequence, Sendable {
    public typealias Element = SavedChanges
    public typealias Failure = Never

    private let hub: ChangeHub
    private let id: UInt64?

    init(hub: ChangeHub) {
        self.hub = hub
        id = hub.subscribe()
    }

    deinit {
        if let id { hub.unsubscribe(id) }
    }

    /// The iterator of a ``StoreChanges`` sequence.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let changes: StoreChanges

        /// The next save's changes (merged with the ones the consumer missed), or nil when the
        /// store closed or the task was cancelled.
        public mutating func next() async -> SavedChanges? {
            guard let id = changes.id else { return nil }
            return await changes.hub.next(id)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(changes: self) }
}
