public import GraphJournal

/// An error opening, saving or compacting a store, naming the file, byte offset, record,
/// entity or attribute concerned.
///
/// A failure of the journal layer keeps the journal's own error, with its code, file and
/// byte offset, so that a caller can tell a lock conflict from corruption:
///
/// ```swift
/// do {
///     let store = try ObjectStore.open(at: url, schema: schema)
/// } catch StoreError.Code.corruptPayload {
///     // a record passes its checksum but does not decode: open with .pointInTime to keep
///     // the records before it
/// } catch let error as StoreError where error.journalError?.code == .locked {
///     print("another process has the store open")
/// } catch let error as StoreError {
///     print(error.file ?? "", error.offset ?? -1, error.message)
/// }
/// ```
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// A record's payload does not decode (a bug or damage the checksum did not catch).
        case corruptPayload
        /// The journal was written with a schema the current model cannot read.
        case incompatibleSchema
        /// The journal layer failed (corruption, lock held by another process, I/O error):
        /// ``StoreError/journalError`` says which.
        case journal
        /// The store was used after `close()`.
        case closed
        /// The task running the open or the compaction was cancelled, and the operation undone:
        /// an open closed what it opened, a compaction removed its new files and left the
        /// journal as it was (`Docs/Progress.md`). The store's typed errors carry the
        /// cancellation that the context's operations throw as `CancellationError`.
        case cancelled
        /// A save with something to write reached a read-only store (a replica: its records
        /// come only from its source, ``ObjectStore/applyShipped(_:schema:origin:)``).
        case readOnly
        /// The store holds another version of the model than the code opening it, and no
        /// ``SchemaMigrationPlan`` says how to go from one to the other (or the store is newer
        /// than the code); or a migration stage failed. ``StoreError/storedVersion`` and
        /// ``StoreError/modelVersion`` name both versions. Nothing was written.
        case migration
    }

    /// The kind of failure.
    public let code: Code
    /// What went wrong, with file, offset, entity and attribute where known.
    public let message: String
    /// The journal's error, when the journal layer failed or located the damage.
    public let journalError: JournalError?
    /// The sequence number of the journal record concerned, when known.
    public let sequence: UInt64?
    /// The version of the model the store holds (``VersionedSchema/versionIdentifier``), for a
    /// ``Code/migration`` error; nil for an unversioned store or another error.
    public let storedVersion: String?
    /// The version of the model the code opening the store uses, for a ``Code/migration``
    /// error.
    public let modelVersion: String?
    /// Set by the replay when it meets a schema record of another version than the one it
    /// opens with: the open then reads the journal's last schema and runs the plan.
    let versionMismatch: Bool

    /// The journal file concerned, when known.
    public var file: String? { journalError?.file }
    /// The byte offset in ``file``, when known.
    public var offset: Int64? { journalError?.offset }

    init(
        _ code: Code, _ message: String, sequence: UInt64? = nil, journalError: JournalError? = nil,
        storedVersion: String? = nil, modelVersion: String? = nil, versionMismatch: Bool = false
    ) {
        self.code = code
        self.message = message
        self.sequence = sequence ?? journalError?.sequence
        self.journalError = journalError
        self.storedVersion = storedVersion
        self.modelVersion = modelVersion
        self.versionMismatch = versionMismatch
    }

    /// The `migration` error of a replica that met something its source wrote with another
    /// version of the model (a shipped record, a base): `what` names it; `stored` is the
    /// version it was written with, `model` the replica's. Nothing of it was applied.
    package static func replicaRefusal(
        _ what: String, storedVersion stored: String?, modelVersion model: String?, sequence: UInt64? = nil
    ) -> StoreError {
        StoreError(
            .migration,
            "\(what) was written with version \(stored ?? "(unversioned)") of the model and this replica's model is version \(model ?? "(unversioned)"): "
                + "run code whose migration plan reaches version \(stored ?? "(unversioned)") (a replica installs its source's migrated base); nothing was applied",
            sequence: sequence, storedVersion: stored, modelVersion: model)
    }

    /// A failure of the journal layer, keeping its error.
    package init(journal error: JournalError) {
        self.init(.journal, "\(error)", journalError: error)
    }

    public var description: String { message }
}

extension StoreError.Code {
    /// Whether `error` is a ``StoreError`` with this code, so that callers can write
    /// `catch StoreError.Code.incompatibleSchema`.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? StoreError)?.code == code
    }
}
