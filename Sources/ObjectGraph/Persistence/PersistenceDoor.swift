import GraphJournal

/// The one way a ``ModelContext`` reaches its persistence: a save hands the door its pending
/// changes, and after the save committed the door hears about it.
///
/// Three implementations: ``JournalDoor`` (an ``ObjectStore``'s journal), ``BackendDoor`` (a
/// public ``PersistenceBackend``) and ``GroupCommitDoor`` (an ``AsyncStore``'s journal under
/// group commit, which wraps the ``JournalDoor`` and holds back what a save makes visible until
/// its record is durable). The context holds its door strongly; a door never holds its
/// context (the store owns the context, the context owns the door), so the methods that need
/// the context's tables receive it.
protocol PersistenceDoor: AnyObject {
    /// Records one save's changes, all of them or (by throwing) none. The context keeps its
    /// pending changes when this throws.
    func persist(_ changes: PendingChanges) throws

    /// Called once a save committed in memory (after `didSave`, before observers hear of it).
    func didCommit(_ context: ModelContext)

    /// Called last by a save that committed: an error thrown here is thrown by `save()`, whose
    /// changes stay committed (``StoreOptions/saveConfirmation``).
    func confirmSave() throws

    /// Hands on the snapshot a committed save built for an ``AsyncStore``'s readers
    /// (``SnapshotPublisher``). Every door but ``GroupCommitDoor`` publishes it at once.
    func publish(_ snapshot: StoreSnapshot, to hub: SnapshotHub, took duration: Duration)

    /// Hands on a committed save's changes to an ``AsyncStore``'s subscribers
    /// (``AsyncStore/changes``). Every door but ``GroupCommitDoor`` delivers them at once.
    func deliver(_ changes: ContextChanges, to hub: ChangeHub)

    /// The store's metrics and spans; nil for a door without a store (a backend).
    var storeInstruments: StoreInstruments? { get }

    /// The stored bytes of the record the last save wrote (0 when it wrote none or the door
    /// does not know).
    var lastRecordBytes: Int { get }
}

extension PersistenceDoor {
    var storeInstruments: StoreInstruments? { nil }

    var lastRecordBytes: Int { 0 }

    func publish(_ snapshot: StoreSnapshot, to hub: SnapshotHub, took duration: Duration) {
        hub.publish(snapshot, took: duration)
    }

    func deliver(_ changes: ContextChanges, to hub: ChangeHub) { hub.deliver(changes) }
}

/// One save's pending changes as the context hands them to its door: each table's pending
/// rows, read-only. A door asks for the form it stores, built straight from the tables.
struct PendingChanges {
    /// The context whose tables `rows` index; held only while the save runs.
    private let context: ModelContext
    /// Per table of `context`, in schema order, its pending inserted, updated and deleted rows.
    let rows: [PendingRows]

    init(_ context: ModelContext, _ rows: [PendingRows]) {
        self.context = context
        self.rows = rows
    }

    /// Whether no table has a pending row and no link table logged a change. Links that net to
    /// nothing still encode to an empty payload, which the doors skip; asking
    /// ``LinkTable/hasChanges`` here would work out the net change once more before encoding.
    var isEmpty: Bool { !rows.contains { !$0.isEmpty } && !context.links.contains { !$0.log.isEmpty } }

    /// Whether these changes only add: inserted objects and new links, nothing updated,
    /// deleted, unlinked or moved. Such a record leaves nothing of the journal superseded.
    var onlyAdds: Bool {
        !rows.contains { !$0.updates.isEmpty || !$0.deletes.isEmpty }
            && !context.links.contains { $0.log.contains { $0.kind != .link } }
    }

    /// The journal payload of these changes (``TransactionCodec``), encoded from the tables
    /// and compressed as it goes.
    func journalPayload() -> PayloadStream { TransactionCodec.encodePending(context, rows) }

    /// These changes as a public ``ChangeSet``, for a ``PersistenceBackend``.
    func changeSet() -> ChangeSet { context.makeChangeSet(rows) }
}

/// The door of a context created with a ``PersistenceBackend``: each non-empty save becomes one
/// ``ChangeSet`` handed to the backend.
final class BackendDoor: PersistenceDoor {
    let backend: any PersistenceBackend

    init(_ backend: any PersistenceBackend) { self.backend = backend }

    func persist(_ changes: PendingChanges) throws {
        let changeSet = changes.changeSet()
        if !changeSet.isEmpty { try backend.persist(changeSet) }
    }

    func didCommit(_ context: ModelContext) {}

    func confirmSave() throws {}
}
