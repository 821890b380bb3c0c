public import CoreMetrics
public import Foundation
public import GraphJournal
public import Logging
public import Tracing

/// A durable object graph: a ``ModelContext`` whose saves append to an LZ4-compressed
/// write-ahead journal in a directory, replayed when the store opens.
///
/// ```swift
/// let store = try ObjectStore.open(at: URL(fileURLWithPath: "/var/lib/pkgd/store"),
///                                  schema: try Schema(Package.self))
/// let context = store.context            // every object of the store, ready
/// let p = try context.insert(Package.self)
/// p.name = "zlib1g"
/// try context.save()                     // one journal record, durable per the policy
/// try store.close()
/// ```
///
/// ## Durability
/// ``StoreOptions/durability`` chooses what `save()` waits for (see `Docs/JournalFormat.md`):
/// - `.always`: an `fdatasync` covers the record before `save()` returns; neither a process
///   crash nor a power loss loses an acknowledged save.
/// - `.batched(milliseconds:)`: at most one `fdatasync` per interval; a process crash loses
///   nothing, a power loss at most the saves of the last interval.
/// - `.none`: left to the OS; a process crash loses nothing, a power loss whatever the kernel
///   had not written back.
///
/// ## Concurrency
/// A store and its context belong to one isolation domain (an actor you own). Opening takes an
/// exclusive lock on the directory: a second writer, in this or another process, gets a
/// ``StoreError`` with code `journal` saying the store is locked.
public final class ObjectStore {
    /// From this many rows replayed, open gives the heap's free memory back to the system
    /// (``HeapTrim``); below it, there is little to give.
    static let trimmedOpenRows = 1 << 16

    /// The directory holding the journal.
    public let directory: URL
    /// The context holding every object of the store.
    public let context: ModelContext
    /// What open found: a torn tail truncated, records dropped by point-in-time recovery.
    public let openReport: JournalOpenReport
    /// How long replay took, in seconds.
    public let replaySeconds: Double
    /// The model version the store was at when this open migrated it through
    /// ``StoreOptions/migrationPlan`` ("(unversioned)" for a store that named none); nil when
    /// the open migrated nothing. A shipping store uses it to put a base in front of the new
    /// version's records, so that replicas start that version from the writer's state.
    public internal(set) var migratedFrom: String?
    /// Whether that migration wrote a new base (a custom stage); a lightweight one replays the
    /// old records onto the new model and rewrites nothing.
    public internal(set) var migrationWroteBase = false

    /// The journal, behind the door the context saves through.
    let door: JournalDoor

    private init(
        directory: URL, context: ModelContext, door: JournalDoor, replaySeconds: Double,
        earlierReports: [JournalOpenReport]
    ) {
        self.directory = directory
        self.context = context
        self.door = door
        // What the opens before a reopen for an undecodable record did (leftovers removed,
        // segments adopted) belongs to this open too.
        var report = door.journal.openReport
        for earlier in earlierReports {
            report.removedFiles = earlier.removedFiles + report.removedFiles
            report.adoptedFiles = earlier.adoptedFiles + report.adoptedFiles
        }
        self.openReport = report
        self.replaySeconds = replaySeconds
    }

    /// Opens (or creates) the store in `directory` and replays its journal into a new context.
    ///
    /// Replay calls no lifecycle hook; `awakeFromFetch` runs when each object is first
    /// materialized. A journal written by an older model opens as long as the change is
    /// compatible: added attributes take their default, removed ones are dropped, renamed ones
    /// map through `@Attribute(originalName:)`, added entities start empty.
    ///
    /// ``StoreOptions/progress`` receives the replay's progress in bytes of the journal's
    /// segments. Opening checks whether its task was cancelled before it touches anything and
    /// at each report: a cancelled open closes the journal and throws ``StoreError`` with code
    /// `cancelled` (the store's typed errors carry it; the context's operations throw
    /// `CancellationError`).
    ///
    /// - Throws: ``StoreError``: `journal` (locked by another writer, corruption with file and
    ///   byte offset, I/O error), `incompatibleSchema` (an attribute's type changed, a removed
    ///   entity still has objects, or a live object's `Codable` value does not decode as the
    ///   attribute's current type: the message names the entity, attribute, object and decoding
    ///   error), `corruptPayload`, or `cancelled`. Nothing on disk is
    ///   modified when opening fails, except that a torn tail is reported (and cut at the next
    ///   append).
    public static func open(
        at directory: URL, schema: Schema, options: StoreOptions = StoreOptions()
    ) throws(StoreError) -> ObjectStore {
        try open(at: directory, options: options, replayingAtOpen: schema) { _ throws(StoreError) in schema }
    }

    /// Opens a store with the schema its journal records, without the application's model
    /// code: every object is a ``DynamicObject``. For tools (dump, compact).
    ///
    /// - Throws: ``StoreError`` as ``open(at:schema:options:)``; `incompatibleSchema` when the
    ///   journal holds no schema record yet (an empty store).
    public static func openDynamic(
        at directory: URL, options: StoreOptions = StoreOptions()
    ) throws(StoreError) -> ObjectStore {
        try open(at: directory, options: options) { journal throws(StoreError) in
            guard let bytes = journal.schema else {
                throw StoreError(.incompatibleSchema, "\(directory.path) holds no schema record (an empty store)")
            }
            do {
                return try Schema(dynamic: try StoredSchema.decode(bytes))
            } catch let error as SchemaError {
                throw StoreError(.incompatibleSchema, "\(error)")
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(.corruptPayload, "schema record: \(error)")
            }
        }
    }

    /// Opens the journal and replays it.
    ///
    /// A record that passes its checksum but does not decode is damage like any other, and
    /// the journal decides what it means: the journal is reopened naming that record
    /// (``JournalOptions/UnreadableRecord``), so that a default open refuses with the record's
    /// file, byte offset and sequence, and `.pointInTime` keeps the records before it, saves
    /// the rest aside, and replays the prefix into a fresh context.
    ///
    /// With `replayingAtOpen` (the schema, known before the journal is read), the journal is
    /// replayed as it is checked, in one pass (`Journal.open(directory:options:progress:replay:)`);
    /// otherwise (`schema` needs the journal's own schema record) it is checked, then replayed.
    private static func open(
        at directory: URL, options: StoreOptions, replayingAtOpen known: Schema? = nil,
        schema: (Journal) throws(StoreError) -> Schema
    ) throws(StoreError) -> ObjectStore {
        var options = options
        // One set of instruments per store: made here, where the journal's I/O is set up, and
        // handed to its door through the options. A nested open (a migration's reopen) finds
        // them made and its syncs already timed.
        let instruments: StoreInstruments
        if let made = options.instruments {
            instruments = made
        } else {
            instruments = StoreInstruments(options: options, directory: directory)
            options.instruments = instruments
            options.journal.io = instruments.timingSyncs(options.journal.io)
        }
        let span = instruments.span("objectgraph.open")
        defer { span.end() }
        do throws(StoreError) {
            let store = try openUntraced(at: directory, options: options, replayingAtOpen: known, schema: schema)
            let stats = store.stats
            span.attributes["objectgraph.bytes"] = stats.bytesOnDisk
            span.attributes["objectgraph.records"] = stats.records
            instruments.journal(bytes: stats.bytesOnDisk, records: stats.records)
            return store
        } catch {
            span.fail(error)
            throw error
        }
    }

    private static func openUntraced(
        at directory: URL, options: StoreOptions, replayingAtOpen known: Schema?,
        schema: (Journal) throws(StoreError) -> Schema
    ) throws(StoreError) -> ObjectStore {
        // Cancelled before it starts: nothing is created, locked or read.
        guard !Task.isCancelled else {
            throw StoreError(
                .cancelled,
                "opening \(directory.path) was cancelled before it started: its task was cancelled; nothing was touched"
            )
        }
        var progress = _WorkReporter(options.progress, .open, unit: .bytes, total: nil)
        var journalOptions = options.journal
        journalOptions.durability = options.durability
        journalOptions.recovery = options.recovery
        if let logger = options.logger, journalOptions.log == nil {
            journalOptions.log = { logger.debug("\($0)") }
        }
        // Like `mkdir -p` for the parents; the store directory itself is created 0700.
        try? FileManager.default.createDirectory(
            at: directory.deletingLastPathComponent(), withIntermediateDirectories: true)
        var earlierReports: [JournalOpenReport] = []
        var begins = true
        while let known {
            var opened: Journal?
            do throws(StoreError) {
                let start = ContinuousClock.now
                let context = ModelContext(schema: known)
                try JournalDoor.replay(
                    into: context, directory: directory, progress: &progress, begins: &begins, guardingVersion: true,
                    unversionedToo: options.migrationPlan != nil
                ) { walkProgress, body in
                    do {
                        opened = try Journal.open(
                            directory: directory.path, options: journalOptions, progress: walkProgress, replay: body)
                    } catch let failure as Journal.ReplayFailure {
                        throw failure.error
                    } catch let error as JournalError {
                        throw StoreError(journal: error)
                    }
                }
                guard let journal = opened else {
                    throw StoreError(.journal, "the journal of \(directory.path) did not open")
                }
                // The live segments' size as open settled them (the reports so far counted
                // the files as found, a torn tail included).
                progress.total = Int(journal.stats.bytesOnDisk)
                if begins {
                    // A journal without a record: the first report, as the replay made none.
                    do throws(CancellationError) { try progress.begin() } catch {
                        throw JournalDoor.openCancelled(directory)
                    }
                }
                let door = JournalDoor(
                    journal: journal, directory: directory, options: options,
                    schemaBytes: StoredSchema.recorded(known, after: journal.schema))
                return try make(
                    door: door, replayed: context, since: start, options: options, earlierReports: earlierReports,
                    progress: &progress)
            } catch  where error.versionMismatch {
                // A schema record of another version: nothing was replayed of it, nothing changed
                // on disk. The journal's last schema says where the store is; the plan, if any,
                // takes it from there.
                try? opened?.close()
                return try openMigrating(
                    at: directory, schema: known, options: options, journalOptions: journalOptions)
            } catch  where error.code == .corruptPayload && error.sequence != nil {
                // Nothing was changed on disk: the open stopped before it settled anything.
                try? opened?.close()
                guard let sequence = error.sequence, journalOptions.unreadableRecord?.sequence != sequence else {
                    throw error
                }
                journalOptions.unreadableRecord = JournalOptions.UnreadableRecord(
                    sequence: sequence, reason: error.message)
            } catch {
                try? opened?.close()
                throw error
            }
        }
        while true {
            let journal: Journal
            do {
                journal = try Journal.open(directory: directory, options: journalOptions)
            } catch {
                throw StoreError(journal: error)
            }
            do {
                let store = try make(
                    journal: journal, directory: directory, schema: try schema(journal), options: options,
                    earlierReports: earlierReports, progress: &progress)
                return store
            } catch  where error.code == .corruptPayload && error.sequence != nil {
                try? journal.close()
                guard let sequence = error.sequence, journalOptions.unreadableRecord?.sequence != sequence else {
                    throw error
                }
                // Reopen with the journal's verdict on that record: refusal with its location,
                // or the prefix before it.
                earlierReports.append(journal.openReport)
                journalOptions.unreadableRecord = JournalOptions.UnreadableRecord(
                    sequence: sequence, reason: error.message)
            } catch {
                try? journal.close()
                throw error
            }
        }
    }

    /// Replays `journal` into a new context and makes the store.
    ///
    /// `progress` makes the open's reports: the first one at the first attempt (a reopen for an
    /// undecodable record goes on from where the reports got), then the replay's, then the
    /// final one once the store is ready.
    static func make(
        journal: Journal, directory: URL, schema: Schema, options: StoreOptions, earlierReports: [JournalOpenReport],
        progress: inout _WorkReporter
    ) throws(StoreError) -> ObjectStore {
        let start = ContinuousClock.now
        let context = ModelContext(schema: schema)
        let door = JournalDoor(
            journal: journal, directory: directory, options: options,
            schemaBytes: StoredSchema.recorded(schema, after: journal.schema))
        progress.total = Int(journal.stats.bytesOnDisk)
        do throws(CancellationError) {
            if earlierReports.isEmpty { try progress.begin() }
        } catch {
            throw door.openCancelled()
        }
        try door.replay(into: context, progress: &progress)
        return try make(
            door: door, replayed: context, since: start, options: options, earlierReports: earlierReports,
            progress: &progress)
    }

    /// Makes the store from `context`, into which `door`'s journal was replayed from `start` on.
    private static func make(
        door: JournalDoor, replayed context: ModelContext, since start: ContinuousClock.Instant, options: StoreOptions,
        earlierReports: [JournalOpenReport], progress: inout _WorkReporter
    ) throws(StoreError) -> ObjectStore {
        let journal = door.journal
        let directory = door.directory
        do throws(CancellationError) { try progress.checkCancellation() } catch { throw door.openCancelled() }
        // Every stored `Codable` value the model reads must decode as its current type: found
        // here, before any read, rather than by a getter that cannot report it.
        var codable = CodableValueCheck(context.tables, retyped: context.codableSlotsWrittenAsOtherTypes)
        if !codable.isEmpty { try codable.checkLiveObjects() }
        var duplicates = 0
        for t in context.tables { duplicates += t.rebuildIndexes() }
        if context.tables.reduce(0, { $0 + $1.rowCount }) >= Self.trimmedOpenRows {
            // Replay sized each arena for the rest of the payload and warmed pages ahead of its
            // strings: the room past them goes back. It freed its buffers (decompressed chunks,
            // the index fill's hashes), which the heap keeps resident until trimmed: 23 MB
            // after opening 1M objects.
            for t in context.tables { t.arena.shrinkToFit() }
            HeapTrim.trim()
        }
        if duplicates > 0 {
            options.logger?.debug(
                "\(duplicates) stored objects violate a unique constraint of the current model; saves that touch them will fail"
            )
        }
        let elapsed = (ContinuousClock.now - start).components
        let store = ObjectStore(
            directory: directory, context: context, door: door,
            replaySeconds: Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18,
            earlierReports: earlierReports)
        context.door = door
        if let torn = journal.openReport.tornTail {
            options.logger?.debug(
                "torn tail: \(torn.bytes) bytes at offset \(torn.offset) of \(torn.file) will be truncated before the next append (\(torn.reason))"
            )
        }
        progress.finish(progress.total ?? 0)
        return store
    }

    /// Journal statistics: segments, records, bytes on disk, compression.
    public var stats: JournalStats { journal.stats }

    /// The model versions this store went through, oldest first, as its schema record lists
    /// them: the last is the version it is at (``VersionedSchema/versionIdentifier``). Empty for
    /// a store only ever opened without versions.
    public var schemaVersions: [String] {
        (try? StoredSchema.decode(door.schemaBytes))?.versions ?? []
    }

    /// The journal the store's door owns (a `Journal` is `Sendable`: its figures and shipping
    /// are read from any thread).
    var journal: Journal { door.journal }

    // MARK: Replication

    /// Calls `body` with the wire form of every live schema, transaction and base record above
    /// `sequence`, in order (GraphJournal's `Journal.forEachShippedRecord(after:_:)`): what a shipper sends
    /// to replicas when it catches up from the files.
    ///
    /// - Throws: what `body` throws, or ``StoreError`` with code `journal`.
    public func forEachShippedRecord(after sequence: UInt64, _ body: (ShippedRecord) throws -> Void) throws {
        try door.journal.forEachShippedRecord(after: sequence, body)
    }

    /// The origin of the last record applied with ``applyShipped(_:schema:origin:)`` (kept
    /// across reopens and compactions): where this replica is in its source. Nil for a store
    /// that never applied one.
    public var origin: [UInt8]? { door.journal.origin }

    /// Applies a transaction record shipped from another store's journal: appends it to this
    /// store's journal (its stored payload as it is, with `origin` in the same write), then
    /// applies it to ``context`` as committed state, as a replay does. A replica's only way
    /// in; open it with ``StoreOptions/readOnly`` so that nothing else writes.
    ///
    /// A record whose writer stores a `[String]` or `[Int]` attribute as JSON (a `Codable`
    /// value, as releases before native lists did) applies to a model that declares it a native
    /// list: each value is converted as open's replay converts it (`Docs/Replication.md`,
    /// "Upgrading a writer and its followers").
    ///
    /// The record is durable (per the durability policy) before the context changes. No
    /// lifecycle hook runs; snapshots and observers of an ``AsyncStore`` see the record as one
    /// transaction. A sealed record (its source encrypts its journal) opens with this store's
    /// keys, those of its options' `journal.encryption`; it is written sealed as it came.
    ///
    /// ```swift
    /// try replica.applyShipped(record, schema: schemaRecordPayload, origin: position)
    /// ```
    ///
    /// - Parameter record: a checked transaction record (GraphJournal's `ShippedRecord.init(wire:)`).
    /// - Parameter schema: the payload of the source's schema record in force for `record`.
    /// - Parameter origin: where the record came from (at most 1 KiB), reported by ``origin``.
    /// - Throws: ``StoreError`` naming the record's sequence: `corruptPayload` when the record
    ///   does not decode with `schema` or claims a size or serial it cannot hold (nothing
    ///   changed), or decodes but does not apply (the replica diverged: the store is closed, and
    ///   reopening it reports the record); `incompatibleSchema` when it stores an enum raw value
    ///   that is not a case of this model's enum, or `Codable` JSON that does not decode as
    ///   this model's type (the store is closed likewise), or JSON that is not the native list
    ///   this model declares (nothing changed), or for its schema; `journal`
    ///   when the append fails (nothing changed), or when the record is sealed with a key this
    ///   store lacks (journal code `keyUnavailable`) or does not match (`wrongKey`), or is not
    ///   sealed and this store is encrypted (`notEncrypted`), nothing changed; `readOnly` when
    ///   the context has pending changes; `closed`.
    public func applyShipped(_ record: ShippedRecord, schema: [UInt8], origin: [UInt8]) throws(StoreError) {
        try door.applyShipped(record, schema: schema, origin: origin, to: context)
    }

    // MARK: Compaction and closing

    /// Writes the committed objects as a new base and switches to it atomically, then removes
    /// the old segments. Pending changes stay pending. A crash at any step leaves a store that
    /// opens with nothing lost.
    ///
    /// Then the context gives back the memory of the objects deleted since: each table moves its
    /// live rows to the front and drops the rest (with its indexes, link lists and serial map),
    /// instances nothing but the context holds are released (the next lookup materializes a
    /// fresh one), and glibc's `malloc_trim` returns the freed heap to the system. The objects
    /// you hold stay valid and keep their ``ObjectID``s. Skipped, memory staying as it is until
    /// the next compaction, when called inside a transaction, import, sync or save, or from a
    /// lifecycle hook (`Docs/Performance.md`, "Compaction and memory").
    ///
    /// `progress` receives ``WorkProgress`` reports (operation `compaction`, unit `objects`, out
    /// of the live committed objects): the first before anything is written, then as the objects
    /// are encoded (a large entity's objects count column by column), the final one once the
    /// journal switched to the new base. Compaction checks whether its task was cancelled at
    /// each report and once more just before the switch: cancelled, it removes the files it
    /// wrote and throws ``StoreError`` with code `cancelled`; the old journal is still in force,
    /// unchanged, and the store stays open and usable.
    ///
    /// - Throws: ``StoreError`` with code `journal` (the old journal is then still in force),
    ///   `closed`, or `cancelled`.
    public func compact(progress: ProgressHandler? = nil) throws(StoreError) {
        try door.compact(context, progress: progress)
    }

    /// ``compact(progress:)`` whose base starts at sequence `firstSequence` or later: a replica
    /// promoted to writer continues its source's numbering (Docs/JournalFormat.md, "Compaction").
    package func compact(numberingFrom firstSequence: UInt64) throws(StoreError) {
        try door.compact(context, progress: nil, numberingFrom: firstSequence)
    }

    /// Flushes and syncs the journal and releases the directory lock. Pending changes that were
    /// not saved are not written.
    ///
    /// - Throws: ``StoreError`` with code `journal` when the final sync fails.
    public func close() throws(StoreError) {
        try door.close()
    }

    /// A store released without ``close()`` closes its journal; its context's later saves that
    /// have something to write throw ``StoreError`` with code `closed`.
    deinit {
        door.release()
    }
}

/// How an ``ObjectStore`` writes, recovers and compacts.
public struct StoreOptions: Sendable {
    /// What `save()` waits for; see ``ObjectStore``'s discussion. Default `.always`.
    public var durability: JournalOptions.Durability = .always
    /// What opening does with a damaged journal. Default: a torn tail is cut, other damage
    /// refuses to open; `.pointInTime` keeps the valid prefix and saves the rest aside.
    public var recovery: JournalOptions.Recovery = .tolerateTornTail
    /// Compact automatically once the journal is this many times its size after the last
    /// compaction (or open), counting the saves that only inserted objects and added links as
    /// part of that size (they supersede nothing a compaction could reclaim); `nil` turns
    /// automatic compaction off. Default 4.
    public var autoCompactionRatio: Double? = 4
    /// No automatic compaction below this many bytes on disk. Default 8 MiB.
    public var autoCompactionMinimumBytes: Int64 = 8 << 20
    /// Receives the journal's notable events (torn tail cut, segment rolled, compaction), at
    /// `debug` level: the store reports what matters through its results, errors and metrics,
    /// and logs only for whoever turns debugging on. Nil (the default): no logging.
    public var logger: Logger?
    /// Where the store's metrics go (Docs/Observability.md lists them). Nil (the default): the
    /// factory the application bootstrapped with `MetricsSystem.bootstrap`, a no-op until it
    /// does. Set it to keep one store's figures apart, as a test does with `TestMetrics`.
    public var metricsFactory: (any MetricsFactory)?
    /// Where the store's spans go (`objectgraph.open`, `objectgraph.save`, …). Nil (the
    /// default): `InstrumentationSystem.tracer`, a no-op until the application bootstraps one.
    public var tracer: (any Tracer)?
    /// The value of the `store` dimension every metric of the store carries. Nil (the
    /// default): the store directory's name.
    public var metricsLabel: String?
    /// The store's instruments once its open made them (``ObjectStore/open(at:schema:options:)``).
    var instruments: StoreInstruments?
    /// Lower-level journal options (segment size, the I/O layer for fault injection).
    public var journal = JournalOptions()
    /// Encryption at rest (`Docs/Encryption.md`): every record the store writes is sealed with
    /// the current key, and records are read with the keys its provider gives. A store opened
    /// with the wrong key, or without a key it needs, fails with ``StoreError`` code `journal`
    /// (the journal error's code says which key) and changes nothing. Nil (the default): no
    /// encryption. The same as `journal.encryption`.
    ///
    /// ```swift
    /// var options = StoreOptions()
    /// options.encryption = JournalEncryption(key: try JournalKey(id: "2026-11", hex: secret))
    /// let store = try ObjectStore.open(at: url, schema: schema, options: options)
    /// ```
    public var encryption: JournalEncryption? {
        get { journal.encryption }
        set { journal.encryption = newValue }
    }
    /// The versions of the model and the stages between them. When set, opening a store
    /// written at an earlier version of the plan migrates it first, stage after stage, to the
    /// version of the schema opened with (``Schema/init(versioned:)``, normally the plan's
    /// last). ``ObjectStore/open(at:migrationPlan:options:)`` sets it; set it yourself for an
    /// ``AsyncStore`` or a replicated store. Nil (the default): a store at another version
    /// than the schema's fails to open with ``StoreError`` code `migration`.
    public var migrationPlan: (any SchemaMigrationPlan.Type)?
    /// Receives the progress of opening the store: ``WorkProgress`` reports (operation `open`,
    /// unit `bytes`: the journal's segments replayed, out of their size on disk), the first once
    /// the journal is opened and checked, then one each time the replay passes another 256 KiB,
    /// the final one once the store is ready. Nil (the default): no reports.
    public var progress: ProgressHandler?
    /// A read-only store refuses every save that has something to write with ``StoreError``
    /// code `readOnly`; its records come from elsewhere (a replica's source, through
    /// ``ObjectStore/applyShipped(_:schema:origin:)``). Default false.
    public var readOnly = false
    /// Called by each save that wrote a journal record, with the record's sequence number, once
    /// the record is durable and the save committed (observers told). An error it throws is
    /// thrown by `save()` (or ``AsyncStore/perform(_:)``) after the commit: the save stands, the
    /// error says a further guarantee failed. Replication's synchronous policy waits here for
    /// the replicas' acknowledgement. Called on the saving thread; nil (the default): nothing.
    ///
    /// It runs where the record is durable: with `.always` durability at the end of `save()`
    /// (for an ``AsyncStore`` with group commit, once the shared `fdatasync` covered it); with
    /// `.batched` and `.none`, at the end of `save()` too, before the record is necessarily
    /// durable.
    public var saveConfirmation: (@Sendable (_ sequence: UInt64) throws -> Void)?

    /// Creates options with the defaults.
    public init(durability: JournalOptions.Durability = .always, recovery: JournalOptions.Recovery = .tolerateTornTail)
    {
        self.durability = durability
        self.recovery = recovery
    }
}
