public import Foundation
public import GraphJournal

/// An ``ObjectStore`` owned by an actor, for daemons written with Swift concurrency: writes run
/// as transactions on the actor, reads run on any task from snapshots without waiting for the
/// writer (GRDB's `DatabasePool`, SwiftData's `@ModelActor`, CoreStore's `perform`).
///
/// ```swift
/// let store = try AsyncStore(at: URL(fileURLWithPath: "/var/lib/pkgd/store"), schema: try Schema(Package.self))
///
/// // A writer: one transaction, saved when the closure returns, rolled back when it throws.
/// let count = try await store.perform { context in
///     try context.upsert(Package.self, where: \.name, equals: "zlib1g") { $0.version = "1:1.3" }
///     return try context.count(of: Package.self)
/// }
///
/// // Readers, on any task, never waiting for the writer: the last published save.
/// let snapshot = store.snapshot
/// let zlib = try snapshot.object(Package.self, where: \.name, equals: "zlib1g")
///
/// // Every save's changes, coalesced for a slow consumer.
/// for await saved in store.changes { print(saved.changes.inserted.count, "inserted") }
/// ```
///
/// ## Isolation
/// The store and its ``ModelContext`` live inside the actor and never leave it: the context is
/// handed to the closures of ``perform(_:)`` and ``performBatches(_:_:)``, which run on the
/// actor and must return `Sendable` values. The compiler enforces this (the closures are
/// `@Sendable`, the context is not `Sendable`), not a runtime check. The objects a transaction
/// touches are not `Sendable` either: return values (IDs, counts, `decode(as:)` structs).
///
/// Snapshots are `Sendable` and immutable. After each save that changed something, the actor
/// publishes a new one before the save returns: a reader that takes ``snapshot`` after
/// `perform` returned sees that save. Publishing copies only the pages the save changed
/// (`Docs/Concurrency.md` has the design and its figures).
///
/// ## Long work
/// A `perform` runs to its end on the actor: other writers wait for it (readers do not).
/// ``performBatches(_:_:)`` runs one transaction per batch and lets other work on the actor run
/// between batches; each batch is visible to readers once it is saved.
public actor AsyncStore {
    private let store: ObjectStore
    private let publisher: SnapshotPublisher
    private nonisolated let snapshots: SnapshotHub
    private nonisolated let changeHub: ChangeHub
    /// With `.always` durability: the context's door, which holds back each save's snapshot,
    /// changes and confirmation until the shared sync covered its record.
    private let groupCommit: GroupCommitDoor?
    /// With `.always` durability: the syncs that transactions share.
    private nonisolated let committer: GroupCommitter?
    /// The store's journal, for its figures (a `Journal` is `Sendable`).
    private nonisolated let journal: Journal
    /// The store's metrics and spans.
    package nonisolated let instruments: StoreInstruments

    /// The directory holding the journal.
    public nonisolated let directory: URL
    /// What open found (``ObjectStore/openReport``).
    public nonisolated let openReport: JournalOpenReport

    /// Opens (or creates) the store in `directory`, replays its journal and builds the first
    /// snapshot, like ``ObjectStore/open(at:schema:options:)``.
    ///
    /// With `.always` durability (the default) transactions commit in groups: a transaction
    /// returns once an `fdatasync` covered its record, and transactions of other tasks that
    /// commit meanwhile share the next one (``perform(_:)``).
    ///
    /// - Throws: what ``ObjectStore/open(at:schema:options:)`` throws.
    public init(at directory: URL, schema: Schema, options: StoreOptions = StoreOptions()) throws(StoreError) {
        var journalOptions = options
        let groupCommit = if case .always = options.durability { true } else { false }
        // The syncs are the group committer's: the journal itself does not wait for them.
        if groupCommit { journalOptions.durability = .none }
        self.init(
            store: try ObjectStore.open(at: directory, schema: schema, options: journalOptions),
            groupCommit: groupCommit)
    }

    /// Takes over `store`, which must not be used elsewhere afterwards (the compiler checks:
    /// it is `sending`). Builds the first snapshot from its committed state. Saves are as
    /// durable as the store's own durability makes them, one `fdatasync` each with `.always`.
    public init(store: sending ObjectStore) {
        self.init(store: store, groupCommit: false)
    }

    private init(store: sending ObjectStore, groupCommit: Bool) {
        let publisher = SnapshotPublisher(
            context: store.context, publishTimer: store.door.instruments.snapshotPublishDuration)
        store.context.snapshotPublisher = publisher
        let changeHub = ChangeHub(snapshots: publisher.hub)
        store.context.ensureObservers().changeHub = changeHub
        // With group commit a save is published, delivered and confirmed once the shared sync
        // made it durable: the context saves through a door that holds them back until then.
        let door =
            groupCommit ? GroupCommitDoor(wrapping: store.door, snapshots: publisher.hub, changes: changeHub) : nil
        if let door { store.context.door = door }
        self.groupCommit = door
        committer = door?.committer
        journal = store.journal
        instruments = store.door.instruments
        self.store = store
        self.publisher = publisher
        self.snapshots = publisher.hub
        self.changeHub = changeHub
        self.directory = store.directory
        self.openReport = store.openReport
    }

    deinit {
        changeHub.finish()
    }

    // MARK: Writing

    /// Runs `body` as one transaction on the store's context: saved (one journal record, then a
    /// new snapshot) when it returns, rolled back when it throws, as
    /// ``ModelContext/transaction(_:)``.
    ///
    /// ```swift
    /// let id = try await store.perform { context in
    ///     let p = try context.insert(Package.self) { $0.name = "zlib1g" }
    ///     return p.objectID
    /// }
    /// ```
    ///
    /// ## Durability and group commit
    /// With `.always` durability and a store opened by ``init(at:schema:options:)``, the save
    /// appends its record, and the transaction then waits, suspended, for an `fdatasync` that
    /// covers it; meanwhile the actor runs other transactions, whose records the next
    /// `fdatasync` covers together. The snapshot of the save is published, and its changes
    /// delivered, once the record is durable. If that `fdatasync` fails, the transaction throws a
    /// ``StoreError`` with code `journal`, and so does every later write: the context holds saves
    /// the disk may have lost, so the store must be closed and reopened.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, or what the save throws (``ValidationError``,
    ///   ``StoreError``); the context is then as before the call.
    @discardableResult
    public func perform<R: Sendable>(_ body: @Sendable (ModelContext) throws -> R) async throws -> R {
        if let failure = committer?.failure {
            store.door.instruments.saveFailed(failure)
            throw failure
        }
        let start = ContinuousClock.now
        let context = store.context
        let result: R
        do {
            // No savepoint: every transaction of the actor ends with nothing pending (saved or
            // rolled back), so a rollback undoes exactly this one. Under a savepoint every
            // change also records how to undo it, which made a batched import measurably slower
            // (concurrency-comparison).
            result = try body(context)
            try context.save()
        } catch {
            // A failed save keeps its changes pending; a transaction of this actor leaves none.
            context.rollback()
            // A body that saved before it threw: that save stands, so it is made durable and
            // published like any other before the error is passed on.
            if let committer, let held = groupCommit?.takeHeld() {
                try await committer.waitDurable(publishing: held.snapshot)
                try? store.door.confirm(held.sequence)
            }
            throw error
        }
        // Taken before the wait: other transactions save meanwhile.
        if let committer, let held = groupCommit?.takeHeld() {
            do {
                try await committer.waitDurable(publishing: held.snapshot)
            } catch {
                store.door.instruments.saveFailed(error)
                throw error
            }
            store.door.instruments.saved(since: start)
            try store.door.confirm(held.sequence)
        }
        return result
    }

    // MARK: Replication

    /// Applies transaction records shipped from another store's journal, in order, each as
    /// ``ObjectStore/applyShipped(_:schema:origin:)`` does: one snapshot is published per
    /// record, so readers see whole transactions of the source only.
    ///
    /// - Parameter records: each record with its source's schema payload and its origin.
    /// - Returns: how many were applied (all, unless it throws).
    /// - Throws: ``StoreError`` of the first record that fails (the ones before it stay
    ///   applied), or the group commit's sync failure.
    @discardableResult
    public func applyShipped(_ records: [(record: ShippedRecord, schema: [UInt8], origin: [UInt8])]) async throws -> Int
    {
        for r in records {
            try store.applyShipped(r.record, schema: r.schema, origin: r.origin)
            // With group commit the record is durable, and its snapshot published, once the
            // shared sync covered it.
            if let committer, let held = groupCommit?.takeHeld() {
                try await committer.waitDurable(publishing: held.snapshot)
            }
        }
        return records.count
    }

    /// The journal, for ``shippingSource``.
    nonisolated var journalForShipping: Journal { journal }

    /// Runs `body` once per element of `batches`, each in its own transaction, and lets other
    /// work on the actor run between batches (a long import that does not shut out other
    /// writers for its whole length).
    ///
    /// ```swift
    /// let saved = try await store.performBatches(records.chunked(into: 10_000)) { context, batch in
    ///     _ = try context.upsert(batch, as: Package.self)
    /// }
    /// ```
    ///
    /// Cancellation (`Task.cancel()`) is checked before each batch: the batches already saved
    /// stay saved, the one that was running when the task was cancelled is completed or, if it
    /// throws, rolled back, and no further batch starts; it then throws `CancellationError`.
    ///
    /// - Returns: the number of batches saved.
    /// - Throws: `CancellationError`, or what a batch throws (that batch is rolled back, the
    ///   earlier ones stay saved).
    @discardableResult
    public func performBatches<S: Sequence & Sendable>(
        _ batches: S, _ body: @Sendable (ModelContext, S.Element) throws -> Void
    ) async throws -> Int where S.Element: Sendable {
        var saved = 0
        for batch in batches {
            try Task.checkCancellation()
            try await perform { context in try body(context, batch) }
            saved += 1
            await Task.yield()
        }
        return saved
    }

    /// Writes the committed objects as a new base and removes the old segments
    /// (``ObjectStore/compact(progress:)``, which also gives back the memory of deleted objects).
    /// Snapshots are unaffected: compaction changes no object.
    ///
    /// - Parameter progress: Receives the objects written, done out of the total
    ///   (`Docs/Progress.md`).
    /// - Throws: ``StoreError``: `journal` (the old journal is then still in force), or
    ///   `cancelled` when the task was cancelled (the new files are removed, nothing changed).
    public func compact(progress: ProgressHandler? = nil) throws(StoreError) {
        try store.compact(progress: progress)
    }

    /// Flushes and syncs the journal and releases the directory lock (``ObjectStore/close()``).
    /// Snapshots taken before stay readable; ``changes`` sequences end.
    public func close() async throws(StoreError) {
        // The transactions still waiting for their sync get it before the journal closes. The
        // journal is closed (and its lock released) whatever happened to the syncs.
        var failure: StoreError?
        if let committer {
            do { try await committer.waitDurable(publishing: nil) } catch let error as StoreError {
                failure = error
            } catch {}
        }
        store.context.observers?.changeHub = nil
        changeHub.finish()
        try store.close()
        if let failure { throw failure }
    }

    // MARK: Reading

    /// The snapshot of the last save (or of the state at open): immutable, `Sendable`, taken
    /// without waiting for the writer.
    public nonisolated var snapshot: StoreSnapshot { snapshots.snapshot }

    /// Calls `body` with the current ``snapshot``, on the caller's task: GRDB's `read`.
    public nonisolated func read<R>(_ body: (StoreSnapshot) throws -> R) rethrows -> R {
        try body(snapshots.snapshot)
    }

    /// The journal's figures: records, bytes on disk, segments (``ObjectStore/stats``). Read
    /// without waiting for the writer.
    public nonisolated var stats: JournalStats { journal.stats }

    /// How long publishing snapshots took: the last one and in all.
    public nonisolated var snapshotStatistics: SnapshotStatistics { snapshots.statistics }

    /// With group commit (``init(at:schema:options:)`` with `.always` durability): how many
    /// `fdatasync`s made transactions durable, and how many transactions they covered. Zeros
    /// without group commit.
    public nonisolated var groupCommitStatistics: GroupCommitStatistics {
        guard let c = committer?.counts else { return GroupCommitStatistics(syncs: 0, transactions: 0) }
        return GroupCommitStatistics(syncs: c.syncs, transactions: c.transactions)
    }

    /// A new sequence of the changes of every save made after this property is read, usable
    /// from any task.
    ///
    /// Each element is one save's ``ContextChanges``, or several saves' merged into one when the
    /// consumer was slower than the writer (``SavedChanges/saves`` says how many): an object
    /// inserted and then updated is reported as inserted, one inserted and then deleted not at
    /// all, updated keys are united. A slow consumer therefore holds at most one pending element
    /// whose size is bounded by the number of distinct objects changed, never a queue of saves.
    /// The sequence ends when the store is closed or released.
    public nonisolated var changes: StoreChanges { StoreChanges(hub: changeHub) }
}

/// How group commit has gone so far (``AsyncStore/groupCommitStatistics``).
public struct GroupCommitStatistics: Sendable, Hashable {
    /// The `fdatasync`s run for transactions.
    public var syncs: Int
    /// The transactions they made durable.
    public var transactions: Int
}
