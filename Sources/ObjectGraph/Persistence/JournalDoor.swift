import Foundation
import GraphJournal
import Logging
internal import Tracing

/// The door of an ``ObjectStore``'s context: the journal it replays at open, appends one record
/// per save to, compacts and closes.
///
/// The store and its context both hold it; it holds neither. When the store is closed, or
/// released without closing (its `deinit` closes the journal), the door refuses every save that
/// has something to write, so a caller promised durability is never answered by an in-memory
/// commit.
final class JournalDoor: PersistenceDoor {
    enum State {
        case open
        /// ``ObjectStore/close()`` ran.
        case closed
        /// The store was released; its journal is closed.
        case released
    }

    let journal: Journal
    let directory: URL
    let options: StoreOptions
    /// The current schema's record, written ahead of the first record of each segment.
    let schemaBytes: [UInt8]
    private(set) var state = State.open
    /// The sequence of the record the last save appended, until its confirmation ran.
    private var unconfirmed: UInt64?
    /// A replica's schemas, decoded once: the raw schema record and its decoding.
    private var shippedSchema: (bytes: [UInt8], stored: StoredSchema)?
    /// Bytes on disk after the last compaction (or at open), plus the records since then that
    /// only added objects and links: the base for auto-compaction. Such a record supersedes
    /// nothing, so a compaction would write it again as it is (a first large import would be
    /// written twice).
    private var baselineBytes: Int64
    /// The store's metrics and spans.
    let instruments: StoreInstruments
    var storeInstruments: StoreInstruments? { instruments }
    /// The payload bytes of the record the last save appended.
    private(set) var lastRecordBytes = 0

    init(journal: Journal, directory: URL, options: StoreOptions, schemaBytes: [UInt8]) {
        self.journal = journal
        self.directory = directory
        self.options = options
        self.schemaBytes = schemaBytes
        self.baselineBytes = journal.stats.bytesOnDisk
        self.instruments = options.instruments ?? StoreInstruments(options: options, directory: directory)
    }

    // MARK: Replay

    /// Replays every record of the journal into `context` as committed state: schema records
    /// set the mapping from the stored model to the context's, base and transaction records go
    /// through ``TransactionCodec``.
    ///
    /// `progress` gets a report, and the task's cancellation is checked, each time the records
    /// replayed reach another 256 KiB of the journal's segments (bytes on disk).
    ///
    /// - Throws: ``StoreError``: `corruptPayload` (with the record's sequence) for a record
    ///   that does not decode, `incompatibleSchema` when a removed entity still has objects,
    ///   `journal` for a journal error, `cancelled` when the task was cancelled.
    func replay(into context: ModelContext, progress: inout _WorkReporter) throws(StoreError) {
        var begins = false
        try Self.replay(into: context, directory: directory, progress: &progress, begins: &begins) {
            walkProgress, body in
            try journal.forEachPayload(progress: walkProgress, body)
        }
    }

    /// The records a replay takes, in order: `records` calls its second argument once per
    /// record and its first with the progress in bytes (done, total), as
    /// `Journal.forEachPayload(progress:_:)` does.
    typealias RecordSource = (
        _ progress: (_ bytesDone: Int64, _ bytesTotal: Int64) throws -> Void,
        _ body: (_ sequence: UInt64, _ kind: JournalRecord.Kind, _ payload: JournalPayload) throws -> Void
    ) throws -> Void

    /// ``replay(into:progress:)`` from the records `records` walks: the journal's, or those an
    /// open hands on as it checks them (`ObjectStore.open`). With `begins`, the first progress
    /// report is made when `records` first reports, and `begins` is then cleared.
    ///
    /// With `guardingVersion`, a schema record that names another version than the context's
    /// schema (or, with `unversionedToo`, none) stops the replay with a `versionMismatch`
    /// error before anything of that version is replayed: the open then runs its migration
    /// plan, or refuses naming both versions (``ObjectStore``'s migration). With `permissive`
    /// (a custom migration stage's new context), attributes whose type changed are dropped
    /// (`SchemaMapping(permissive:)`) and objects of removed entities are left out.
    static func replay(
        into context: ModelContext, directory: URL, progress: inout _WorkReporter, begins: inout Bool,
        guardingVersion: Bool = false, unversionedToo: Bool = false, permissive: Bool = false,
        records: RecordSource
    ) throws(StoreError) {
        var stored: StoredSchema?
        var mapping: SchemaMapping?
        var orphans: [Int: Set<UInt64>] = [:]
        var orphanNames: [String: Int] = [:]
        do {
            // Each payload lent piece by piece: a large save's is replayed chunk by chunk as it
            // is decompressed, never held whole (57 MB for a save of 1M objects).
            try records({ done, total in
                progress.total = Int(total)
                do throws(CancellationError) {
                    if begins {
                        begins = false
                        try progress.begin()
                    }
                    try progress.advance(to: Int(done))
                } catch {
                    throw openCancelled(directory)
                }
            }) { sequence, kind, payload in
                switch kind {
                case .schema:
                    // Objects of removed entities under the previous schema stay counted by name.
                    if let s = stored {
                        for (e, live) in orphans where !live.isEmpty {
                            orphanNames[s.entities[e].name, default: 0] += live.count
                        }
                    }
                    orphans = [:]
                    // A chunk that does not decompress: the journal reports the record.
                    guard let bytes = payload.readRest() else { return }
                    let s: StoredSchema
                    do { s = try StoredSchema.decode(bytes) } catch let error as StoreError {
                        throw StoreError(error.code, "record \(sequence): \(error.message)", sequence: sequence)
                    }
                    if guardingVersion, let expected = context.schema.versionIdentifier,
                        s.versionIdentifier != expected, s.versionIdentifier != nil || unversionedToo
                    {
                        throw StoreError(
                            .migration,
                            "record \(sequence) is a schema of version \(s.versionIdentifier ?? "(unversioned)"); the model is version \(expected)",
                            sequence: sequence, storedVersion: s.versionIdentifier, modelVersion: expected,
                            versionMismatch: true)
                    }
                    stored = s
                    let m = try SchemaMapping(stored: s, current: context.schema, permissive: permissive)
                    mapping = m
                    // Codable attributes this record declared with another Swift type.
                    for (i, e) in s.entities.enumerated() {
                        guard let index = m.entity[i] else { continue }
                        let current = context.schema.entities[index].attributes
                        for (j, a) in e.attributes.enumerated() where m.slots[i][j] >= 0 {
                            let now = current[m.slots[i][j]]
                            if now.valueKind == .codable && a.swiftTypeName != now.swiftTypeName {
                                context.codableSlotsWrittenAsOtherTypes.insert(
                                    ModelContext.codableSlotKey(table: index, slot: m.slots[i][j]))
                            }
                        }
                    }
                case .base, .transaction:
                    guard let s = stored, let m = mapping else {
                        throw StoreError(
                            .corruptPayload, "record \(sequence) precedes any schema record", sequence: sequence)
                    }
                    do throws(StoreError) {
                        // False: a chunk did not decompress, which the journal reports once this returns.
                        _ = try TransactionCodec.replay(
                            payload, stored: s, mapping: m, into: context, orphans: &orphans)
                    } catch {
                        throw StoreError(error.code, "record \(sequence): \(error.message)", sequence: sequence)
                    }
                }
            }
        } catch let error as StoreError {
            throw error
        } catch let error as JournalError where error.code == .corrupt && error.sequence != nil {
            // A record that checks but whose payload does not decompress.
            throw StoreError(.corruptPayload, error.message, sequence: error.sequence)
        } catch let error as JournalError {
            throw StoreError(journal: error)
        } catch {
            throw StoreError(.corruptPayload, "\(error)")
        }
        if let s = stored {
            for (e, live) in orphans where !live.isEmpty { orphanNames[s.entities[e].name, default: 0] += live.count }
        }
        if !orphanNames.isEmpty && !permissive {
            throw StoreError(
                .incompatibleSchema,
                "incompatible schema change: "
                    + orphanNames.sorted { $0.key < $1.key }
                    .map {
                        "entity '\($0.key)' was removed from the model but the store still holds \($0.value) of its objects"
                    }
                    .joined(separator: "; "))
        }
        finishReplay(context)
    }

    /// What follows the last record replayed into `context`: the arenas' committed marks, the
    /// link lists flattened.
    static func finishReplay(_ context: ModelContext) {
        for t in context.tables {
            t.changes.committedArenaCount = t.arena.count; t.changes.committedGarbage = t.arena.garbage
        }
        for l in context.links { l.flattenIfWorthIt() }
    }

    /// The error of an open whose task was cancelled.
    func openCancelled() -> StoreError {
        Self.openCancelled(directory)
    }

    /// The error of an open of `directory` whose task was cancelled.
    static func openCancelled(_ directory: URL) -> StoreError {
        StoreError(
            .cancelled,
            "opening \(directory.path) was cancelled: its task was cancelled; the journal was closed, nothing was written"
        )
    }

    // MARK: Saving

    /// Appends the changes as one record; nothing when nothing changed.
    ///
    /// - Throws: ``StoreError`` with code `closed` when the store was closed or released, or
    ///   `journal` when the append fails; nothing was written then.
    func persist(_ changes: PendingChanges) throws(StoreError) {
        guard !changes.isEmpty else { return }
        switch state {
        case .open:
            break
        case .closed:
            throw StoreError(
                .closed, "the store at \(directory.path) is closed; the changes stay pending and nothing was written")
        case .released:
            throw StoreError(
                .closed,
                "the store this context belonged to was closed; the changes stay pending and nothing was written")
        }
        if options.readOnly {
            throw StoreError(
                .readOnly,
                "the store at \(directory.path) is read-only (a replica); the changes stay pending and nothing was written"
            )
        }
        lastRecordBytes = 0
        let payload = changes.journalPayload()
        guard payload.count > 2 else { return }  // version byte + zero blocks: nothing changed
        let bytesBefore = changes.onlyAdds ? journal.stats.bytesOnDisk : nil
        do {
            unconfirmed = try journal.append(payload, schema: schemaBytes)
        } catch {
            throw StoreError(journal: error)
        }
        lastRecordBytes = payload.count
        if let bytesBefore { baselineBytes += max(0, journal.stats.bytesOnDisk - bytesBefore) }
    }

    func confirmSave() throws {
        try confirm(takeUnconfirmed())
    }

    /// The last save's record that awaits its confirmation, handed over once (under group
    /// commit, ``GroupCommitDoor/takeHeld()`` takes it before the ``AsyncStore`` waits for the
    /// shared sync, during which other transactions save).
    func takeUnconfirmed() -> UInt64? {
        defer { unconfirmed = nil }
        return unconfirmed
    }

    /// Runs ``StoreOptions/saveConfirmation`` for `sequence` (nil: nothing to confirm).
    func confirm(_ sequence: UInt64?) throws {
        guard let sequence else { return }
        try options.saveConfirmation?(sequence)
    }

    // MARK: Replicas

    /// Appends a transaction record shipped from another store's journal, then applies it to
    /// `context` as committed state.
    ///
    /// The record is durable (per the durability policy) before the context changes: if the
    /// append fails, nothing changed. A record that was appended but does not apply (the replica
    /// diverged from its source) leaves the journal ahead of the context: the door then refuses
    /// everything until the store is reopened, whose replay reports that record.
    func applyShipped(
        _ record: ShippedRecord, schema: [UInt8], origin: [UInt8], to context: ModelContext
    ) throws(StoreError) {
        switch state {
        case .open: break
        case .closed, .released: throw StoreError(.closed, "the store at \(directory.path) is closed")
        }
        guard !context.hasChanges else {
            throw StoreError(.readOnly, "a shipped record cannot be applied over pending changes; roll them back first")
        }
        let stored: StoredSchema
        if let cached = shippedSchema, cached.bytes == schema {
            stored = cached.stored
        } else {
            stored = try StoredSchema.decode(schema)
            shippedSchema = (schema, stored)
        }
        // A record of another version of the model: refused before anything is written, so the
        // replica stays as it was, at its version.
        if let mine = context.schema.versionIdentifier, let theirs = stored.versionIdentifier, theirs != mine {
            throw StoreError.replicaRefusal(
                "shipped record \(record.sequence)", storedVersion: theirs, modelVersion: mine,
                sequence: record.sequence)
        }
        // A sealed record opens with this store's keys: without them (or with others) it is
        // refused, naming the key, before anything is written.
        let payload: [UInt8]
        do {
            payload = try record.payload(keyring: journal.keyring)
        } catch {
            switch error.code {
            case .keyUnavailable, .wrongKey: throw StoreError(journal: error)
            default:
                throw StoreError(
                    .corruptPayload, "shipped record \(record.sequence): \(error)", sequence: record.sequence,
                    journalError: error)
            }
        }
        var changes: ChangeSet
        do {
            changes = try stored.decodeTransaction(payload)
        } catch {
            throw StoreError(
                error.code, "shipped record \(record.sequence): \(error.message)", sequence: record.sequence)
        }
        // A writer that still stores `[String]`/`[Int]` as JSON (a release before native lists,
        // during a rolling upgrade): its values become this model's lists as open's replay
        // converts them. One that is not such a list is refused before anything is written.
        do throws(RecordViolation) {
            changes = try changes.convertingJSONLists(stored: stored, to: context.schema)
        } catch {
            throw StoreError(
                error.storeErrorCode,
                "shipped record \(record.sequence) does not apply here (\(error.reason)): its writer stores \(error.entity ?? "the entity").\(error.key ?? "the attribute") as JSON that this model, which declares it a native list, cannot convert; nothing was written and the replica stays at the record before it: correct the value on the writer (a JSON array of the list's elements), or follow with a model that declares the attribute as the writer does until the writer is upgraded",
                sequence: record.sequence)
        }
        do {
            try journal.append(shipped: record, schema: schema, origin: origin)
        } catch {
            throw StoreError(journal: error)
        }
        do throws(RecordViolation) {
            // The rules open's replay holds the record to (`RecordRules`), so that reopening
            // reaches the same verdict on it.
            try context.applyCommitted(changes)
        } catch {
            state = .closed
            try? journal.close()
            let consequence =
                switch error.rule {
                case .rawValueNotACase: "this replica's model lacks a case its source has"
                case .codableNotDecodable: "this replica's model reads the value as a type of another shape"
                default: "the replica diverged from its source"
                }
            throw StoreError(
                error.storeErrorCode,
                "shipped record \(record.sequence) was written but does not apply here (\(error.reason)): \(consequence); the store was closed, reopen it to see the record named",
                sequence: record.sequence)
        }
    }

    /// Compacts when the journal outgrew its baseline by the options' ratio.
    func didCommit(_ context: ModelContext) {
        guard state != .released else { return }
        // One read of the journal's figures per save: the gauges and the compaction check.
        let stats = journal.stats
        instruments.journal(bytes: stats.bytesOnDisk, records: stats.records)
        guard let ratio = options.autoCompactionRatio else { return }
        let bytes = stats.bytesOnDisk
        guard bytes > max(options.autoCompactionMinimumBytes, Int64(Double(baselineBytes) * ratio)) else { return }
        do {
            try compact(context, progress: nil)
        } catch  where error.code == .cancelled {
            options.logger?.debug("automatic compaction abandoned, its task was cancelled; the journal is unchanged")
        } catch {
            options.logger?.debug("automatic compaction failed, the journal is unchanged: \(error)")
        }
    }

    // MARK: Compaction and closing

    /// Writes the committed objects of `context` as a new base and switches the journal to it.
    ///
    /// `progress` gets reports in objects: each table's objects count as encoded column by
    /// column, up to the share of one column more, which with the rest of the table count when
    /// the base is written and switched to (the final report). The task's cancellation is
    /// checked at the reports and once more just before the switch.
    ///
    /// - Throws: ``StoreError`` with code `closed`, `journal` (the old journal is then still
    ///   in force), or `cancelled` (the new files are removed; the old journal is in force).
    func compact(
        _ context: ModelContext, progress handler: ProgressHandler?, numberingFrom firstSequence: UInt64? = nil
    ) throws(StoreError) {
        let span = instruments.span("objectgraph.compaction")
        defer { span.end() }
        let start = ContinuousClock.now
        let objects: Int
        do throws(StoreError) {
            objects = try compactUntraced(context, progress: handler, numberingFrom: firstSequence)
        } catch {
            span.fail(error)
            if error.code != .cancelled { instruments.failedCompactions.increment() }
            throw error
        }
        instruments.compactions.increment()
        instruments.compactionDuration.recordNanoseconds(StoreInstruments.nanoseconds(ContinuousClock.now - start))
        let stats = journal.stats
        instruments.journal(bytes: stats.bytesOnDisk, records: stats.records)
        span.attributes["objectgraph.objects"] = objects
        span.attributes["objectgraph.bytes"] = stats.bytesOnDisk
    }

    /// The compaction itself (``compact(_:progress:)`` wraps it in its span and metrics);
    /// returns the objects written.
    private func compactUntraced(
        _ context: ModelContext, progress handler: ProgressHandler?, numberingFrom firstSequence: UInt64?
    ) throws(StoreError) -> Int {
        guard state == .open else { throw StoreError(.closed, "the store at \(directory.path) is closed") }
        let cancelled = StoreError(
            .cancelled,
            "the compaction of \(directory.path) was cancelled: its task was cancelled; the journal is unchanged")
        var progress = _WorkReporter(handler, .compaction, unit: .objects, total: Self.snapshotCount(context))
        guard try writeBase(of: context, progress: &progress, numberingFrom: firstSequence) else { throw cancelled }
        baselineBytes = journal.stats.bytesOnDisk
        // The new base holds only the live objects; the context's tables drop the rows of the
        // rest, and the heap gives the freed memory back to the system. The base's encoded
        // bytes are gone by now (they lived in `writeBase`), so the trim returns them too.
        if context.releaseFreedRows() { HeapTrim.trim() }
        progress.finish(progress.total ?? 0)
        return progress.total ?? 0
    }

    /// Encodes the committed objects of `context` as a base and switches the journal to it;
    /// false when the task was cancelled first (the old journal is then in force).
    private func writeBase(
        of context: ModelContext, progress: inout _WorkReporter, numberingFrom firstSequence: UInt64?
    ) throws(StoreError) -> Bool {
        // The objects-equivalent of the tables encoded so far.
        var encoded = 0
        let snapshot: [UInt8]
        do {
            try progress.begin()
            snapshot = try TransactionCodec.encodeSnapshot(context) { table, rows, columns in
                let share = rows * columns / (table.stride + 1)
                try progress.advance(to: encoded + share)
                if columns == table.stride { encoded += share }
            }
        } catch {
            return false
        }
        do {
            return try journal.compact(
                base: [snapshot], schema: schemaBytes, origin: nil, numberingFrom: firstSequence,
                proceed: { !Task.isCancelled })
        } catch {
            throw StoreError(journal: error)
        }
    }

    /// The objects a snapshot of `context` holds: the live, committed ones.
    private static func snapshotCount(_ context: ModelContext) -> Int {
        typealias Flags = EntityTable.Flags
        var count = 0
        for t in context.tables {
            for row in 0..<t.rowCount where t.flags[row] & (Flags.live | Flags.inserted | Flags.vanished) == Flags.live
            { count += 1 }
        }
        return count
    }

    /// Flushes, syncs and closes the journal; later saves are refused.
    ///
    /// - Throws: ``StoreError`` with code `journal` when the final sync fails.
    func close() throws(StoreError) {
        guard state == .open else { return }
        state = .closed
        do {
            try journal.close()
        } catch {
            throw StoreError(journal: error)
        }
    }

    /// The store is going away: closes the journal if it is still open (errors ignored, there
    /// is nobody to tell), and refuses later saves as a released store's.
    func release() {
        if state == .open { try? journal.close() }
        state = .released
    }
}
