internal import Foundation
internal import Synchronization

/// An append-only, checksummed, LZ4-compressed journal of opaque transaction payloads.
///
/// The journal knows nothing of what it stores: each ``append(_:schema:)`` writes one
/// transaction payload (bytes) as one atomic record, optionally preceded by a new schema
/// payload; ``forEachRecord(_:)`` gives them back in order after a restart. ``compact(base:schema:)``
/// replaces the whole history by a snapshot. The byte layout is in `Docs/JournalFormat.md`.
///
/// ```swift
/// let journal = try Journal.open(directory: "/var/lib/app/store")
/// try journal.forEachRecord { record in try replay(record) }
/// let sequence = try journal.append(encodedChanges, schema: encodedSchema)
/// try journal.close()
/// ```
///
/// ## Concurrency
///
/// A `Journal` is `Sendable`: every method may be called from any thread or task. Appends are
/// serialized by an internal lock; with ``JournalOptions/Durability/always`` an append then
/// waits for an `fdatasync`, and appends that wait at the same time share one (group commit):
/// one caller syncs, the others find their records already covered. The methods block the
/// calling thread while they do I/O; call them from a dedicated actor or thread, not from the
/// main actor of a UI.
///
/// ## One writer
///
/// `open` takes an exclusive `flock` on `DIR/LOCK`; a second `open` of the same directory, in
/// this process or another, fails with ``JournalError/Code/locked`` until the first is closed.
/// ``inspect(directory:)`` reads without the lock and never writes.
public final class Journal: Sendable {
    /// The journal's directory.
    public let directory: String
    /// The options it was opened with.
    public let options: JournalOptions
    /// What `open` found and repaired: a torn tail, dropped bytes, removed leftovers.
    public let openReport: JournalOpenReport

    /// How many times `open` tries the directory lock, 20 ms apart, before reporting `locked`.
    static let lockAttempts = 12

    let fs: FileSystem
    let state: Mutex<WriterState>
    /// Held while an `fdatasync` of the active segment runs (group commit); taken before
    /// `state` when both are needed.
    let gate: Mutex<SyncGate>
    /// Held while records are handed to ``JournalOptions/onDurable``; taken before `state`.
    let delivery = Mutex(())
    /// The keys of the journal's sealed records, when it is opened with encryption.
    public let keyring: JournalKeyring?

    init(
        directory: String, options: JournalOptions, report: JournalOpenReport, state: WriterState,
        keyring: JournalKeyring?
    ) {
        self.directory = directory
        self.keyring = keyring
        self.options = options
        self.openReport = report
        self.fs = FileSystem(io: options.io)
        self.gate = Mutex(SyncGate(segment: state.activeHeader.number, synced: state.tail))
        self.state = Mutex(state)
    }

    deinit {
        // Dropped without close(): release descriptors (and so the lock) without syncing.
        state.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            for fd in s.retiredFDs + [s.activeFD, s.lockFD] { fs.closeQuietly(fd) }
        }
    }

    // MARK: Internals

    func path(_ name: String) -> String { directory + "/" + name }

    func log(_ message: @autoclosure () -> String) {
        options.log?(message())
    }
}
