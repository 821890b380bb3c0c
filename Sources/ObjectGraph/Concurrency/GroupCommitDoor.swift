/// The door of an ``AsyncStore``'s context under group commit: it wraps the store's
/// ``JournalDoor`` and holds back what a save makes visible until its record is durable.
///
/// Records are appended through the journal's door as always (the journal itself does not sync
/// them: its durability is `.none`, the syncs are the ``GroupCommitter``'s). What this door
/// changes is when a committed save becomes visible outside the actor:
///
/// - its snapshot is built but not published (``publish(_:to:took:)`` keeps it);
/// - its changes are staged in the ``ChangeHub`` rather than handed to subscribers
///   (``deliver(_:to:)``);
/// - its ``StoreOptions/saveConfirmation`` is not run (``confirmSave()`` does nothing).
///
/// The ``AsyncStore`` takes what the last saves hold (``takeHeld()``), waits for the shared
/// sync, which publishes the snapshot and releases the staged changes, and then confirms the
/// record. So no reader, subscriber or replica hears of a save that a crash could take back.
final class GroupCommitDoor: PersistenceDoor {
    /// What the saves since the last ``takeHeld()`` hold back: the newest snapshot they built
    /// and the record of the last one, awaiting its confirmation.
    struct Held {
        var snapshot: StoreSnapshot
        var sequence: UInt64?
    }

    /// The store's own door, through which records are appended.
    let journal: JournalDoor
    /// The syncs the transactions share.
    let committer: GroupCommitter
    /// The snapshot the last save built, published once its record is durable.
    private var built: StoreSnapshot?

    init(wrapping journal: JournalDoor, snapshots: SnapshotHub, changes: ChangeHub) {
        self.journal = journal
        committer = GroupCommitter(
            journal: journal.journal, snapshots: snapshots, changes: changes, directory: journal.directory.path,
            sizes: journal.instruments.groupCommitSize)
    }

    func persist(_ changes: PendingChanges) throws { try journal.persist(changes) }

    var storeInstruments: StoreInstruments? { journal.instruments }

    var lastRecordBytes: Int { journal.lastRecordBytes }

    func didCommit(_ context: ModelContext) { journal.didCommit(context) }

    /// Nothing yet: the record is not durable until the shared sync ran, after which the
    /// ``AsyncStore`` confirms it (``takeHeld()``).
    func confirmSave() throws {}

    /// Keeps `snapshot` until the shared sync covered its save's record.
    func publish(_ snapshot: StoreSnapshot, to hub: SnapshotHub, took duration: Duration) {
        hub.didBuild(snapshot.version, took: duration)
        built = snapshot
    }

    /// Stages `changes` until the snapshot that shows them is published.
    func deliver(_ changes: ContextChanges, to hub: ChangeHub) { hub.stage(changes) }

    /// What the saves since the last call hold back, handed over once; nil when none of them
    /// built a snapshot (nothing changed).
    func takeHeld() -> Held? {
        guard let snapshot = built else { return nil }
        built = nil
        return Held(snapshot: snapshot, sequence: journal.takeUnconfirmed())
    }
}
