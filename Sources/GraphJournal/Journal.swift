public import Foundation
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

    init(directory: String, options: JournalOptions, report: JournalOpenReport, state: WriterState) {
        self.directory = directory
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

    // MARK: Opening

    /// Opens (creating if needed) the journal in `directory` for appending.
    ///
    /// Creates the directory (mode 0700) if it is missing, takes the exclusive lock (waiting up to
    /// about 240 ms for a lock held only for a moment), reads
    /// `MANIFEST` and checks every record of every live segment. A torn last record is a
    /// normal end: it is reported in ``openReport`` and truncated before the first append.
    /// Damage followed by valid data is corruption: `open` throws unless
    /// `options.recovery` is ``JournalOptions/Recovery/pointInTime``.
    ///
    /// ```swift
    /// let journal = try Journal.open(directory: "/var/lib/app/store",
    ///                                options: JournalOptions(durability: .always))
    /// ```
    ///
    /// - Parameter directory: the journal's directory.
    /// - Parameter options: durability, recovery, segment size, I/O layer and log sink.
    /// - Returns: the open journal.
    /// - Throws: ``JournalError`` with code ``JournalError/Code/locked`` (another writer),
    ///   ``JournalError/Code/corrupt`` (file and byte offset of the damage),
    ///   ``JournalError/Code/badHeader``, ``JournalError/Code/unsupportedVersion`` or
    ///   ``JournalError/Code/io(errno:operation:)``.
    public static func open(directory: String, options: JournalOptions = JournalOptions()) throws(JournalError) -> Journal {
        let fs = FileSystem(io: options.io)
        _ = try fs.makeDirectory(directory)
        let lockPath = directory + "/" + JournalFormat.lockFileName
        let lockFD = try fs.open(lockPath, .createOrOpen)
        do throws(JournalError) {
            // A lock can be held for a moment by a process being spawned (a fork's copy of a
            // descriptor lives until exec closes it), so a conflict is retried briefly before it
            // is reported.
            var attempts = 0
            while try !fs.lock(lockFD, lockPath) {
                attempts += 1
                guard attempts < Self.lockAttempts else {
                    throw JournalError(.locked, "another journal has \(directory) open for writing", file: lockPath)
                }
                usleep(20_000)
            }
            var opener = JournalOpener(fs: fs, directory: directory, options: options)
            var state = try opener.run()
            state.lockFD = lockFD
            let journal = Journal(directory: directory, options: options, report: opener.report, state: state)
            if case .batched(let milliseconds) = options.durability {
                startFlusher(for: journal, milliseconds: milliseconds)
            }
            return journal
        } catch {
            fs.closeQuietly(lockFD)
            throw error
        }
    }

    /// Opens the journal at a file URL; see ``open(directory:options:)-(String,_)``.
    ///
    /// - Parameter directory: a file URL of the journal's directory.
    /// - Parameter options: durability, recovery, segment size, I/O layer and log sink.
    /// - Returns: the open journal.
    /// - Throws: ``JournalError``, as the `String` variant.
    public static func open(directory: URL, options: JournalOptions = JournalOptions()) throws(JournalError) -> Journal {
        try open(directory: directory.path, options: options)
    }

    // MARK: Reading

    /// The latest schema payload, or nil if no schema was ever written.
    public var schema: [UInt8]? {
        state.withLock { $0.tail.schema }
    }

    /// Counters: segments, records, bytes, compression, last sequence.
    public var stats: JournalStats {
        state.withLock { s in
            JournalStats(
                segments: s.files.count,
                records: s.tail.records,
                bytesOnDisk: s.files.reduce(0) { $0 + $1.size },
                rawPayloadBytes: s.tail.rawBytes,
                storedPayloadBytes: s.tail.storedBytes,
                lastSequence: s.tail.nextSequence - 1,
                formatVersion: Int(s.files.map(\.header.version).max() ?? JournalFormat.formatVersion),
                schemaVersionsSeen: s.tail.schemaVersions)
        }
    }

    /// Calls `body` with every live record in sequence order: the base (a schema record and
    /// the base records) if the journal was compacted, then the log records (transactions,
    /// with a schema record before the first transaction that used a new schema).
    ///
    /// Records are read from disk, checked again and decompressed one segment at a time.
    /// Appends made during the walk are not included. A ``compact(base:schema:)`` that runs
    /// during the walk removes the files being read: the walk then throws.
    ///
    /// ```swift
    /// try journal.forEachRecord { record in
    ///     switch record.kind {
    ///     case .schema: model = try Model(decoding: record.payload)
    ///     case .base, .transaction: try model.apply(record.payload)
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter body: called once per record; an error it throws stops the walk.
    /// - Throws: what `body` throws, or ``JournalError`` if a file cannot be read or no
    ///   longer matches what `open` checked.
    public func forEachRecord(_ body: (JournalRecord) throws -> Void) throws {
        try forEachRecord(progress: { _, _ in }, body)
    }

    /// ``forEachRecord(_:)``, telling how far the walk got: after `body` returns for a record,
    /// `progress` gets the bytes of the live segments up to the end of that record (the
    /// segments before its own whole, headers included) and the size of all of them.
    ///
    /// ```swift
    /// try journal.forEachRecord(progress: { done, total in bar.update(done, of: total) }) { record in
    ///     try replay(record)
    /// }
    /// ```
    ///
    /// - Parameter progress: called once per record; an error it throws stops the walk.
    /// - Parameter body: called once per record; an error it throws stops the walk.
    /// - Throws: what `body` or `progress` throws, or ``JournalError`` as ``forEachRecord(_:)``.
    public func forEachRecord(
        progress: (_ bytesDone: Int64, _ bytesTotal: Int64) throws -> Void, _ body: (JournalRecord) throws -> Void
    ) throws {
        let total = state.withLock { s in s.files.reduce(Int64(0)) { $0 + $1.size } }
        try walkLiveRecords { record, _, _, fileStart, payload in
            guard let kind = JournalRecord.Kind(recordType: record.type) else { return }
            switch payload() {
            case .success(let payload):
                try body(JournalRecord(sequence: record.sequence, kind: kind, payload: payload))
                try progress(fileStart + Int64(record.end), total)
            case .failure(var error):
                error.sequence = record.sequence
                throw error
            }
        }
    }

    /// Reads each live segment whole and calls `visit` with each of its valid records, the
    /// segment's bytes, its path, where it starts among the segments, and a function that
    /// returns its payload, decompressed. A segment that no longer scans as `open` checked it
    /// is an error (it changed after open).
    ///
    /// The payloads are decompressed through the segment's history (``RecordHistory``): those
    /// `visit` does not ask for are decompressed all the same when later records may copy
    /// from them.
    ///
    /// - Throws: what `visit` throws (the walk stops), or ``JournalError``.
    func walkLiveRecords(
        _ visit: (_ record: ScannedRecord, _ bytes: UnsafeRawBufferPointer, _ path: String, _ fileStart: Int64,
                  _ payload: () -> Result<[UInt8], JournalError>) throws -> Void
    ) throws {
        let files = state.withLock { s in s.files }
        var fileStart: Int64 = 0
        for file in files {
            defer { fileStart += file.size }
            let path = self.path(file.name)
            let fd = try fs.open(path, .readOnly)
            let bytesResult: Result<[UInt8], JournalError>
            do throws(JournalError) { bytesResult = .success(try fs.read(fd, path, count: Int(file.size), at: 0)) } catch {
                bytesResult = .failure(error)
            }
            fs.closeQuietly(fd)
            let bytes = try bytesResult.get()
            var failure: (any Error)?
            let history = RecordHistory(header: file.header)
            let scan = bytes.withUnsafeBytes { raw in
                RecordCodec.scan(raw, header: file.header, end: raw.count) { record in
                    var decoded: Result<[UInt8], JournalError>?
                    defer { if decoded == nil { history.note(record, in: raw, file: path) } }
                    do {
                        // Decompressed on the first call only (a closure that does not escape).
                        try visit(record, raw, path, fileStart, {
                            if let decoded { return decoded }
                            let result = history.payload(of: record, in: raw, file: path)
                            decoded = result
                            return result
                        })
                    } catch {
                        failure = error
                        return false
                    }
                    return true
                }
            }
            if failure == nil, let damage = scan.damage {
                failure = JournalError(.corrupt, "\(damage.reason) (the file changed after open)", file: path, offset: Int64(damage.offset))
            }
            if let failure { throw failure }
            if scan.validEnd == bytes.count { adoptHistory(history, of: file) }
        }
    }

    /// Hands the history a walk rebuilt to the writer, when the walk read the whole active
    /// segment, nothing was appended since, and the writer has yet to rebuild it: a store that
    /// replays its journal at open then saves without reading its active segment again.
    private func adoptHistory(_ history: RecordHistory, of file: LiveFile) {
        guard history.enabled else { return }
        state.withLock { s in
            guard case .rebuild = s.history, s.activeHeader.number == file.header.number, s.tail.end == file.size,
                  s.pendingTruncation == nil else { return }
            _ = history.window { window in
                if let encoder = HistoryEncoder(window: window) { s.history = .ready(encoder) }
            }
        }
    }

    /// Every live record, in order; see ``forEachRecord(_:)``. Holds all payloads in memory.
    ///
    /// - Returns: the records.
    /// - Throws: ``JournalError`` if a file cannot be read or changed after open.
    public func records() throws(JournalError) -> [JournalRecord] {
        var records: [JournalRecord] = []
        do { try forEachRecord { records.append($0) } } catch let error as JournalError { throw error } catch {
            throw JournalError(.corrupt, "\(error)")  // unreachable: the body above does not throw
        }
        return records
    }

    // MARK: Appending

    /// Appends one transaction record atomically.
    ///
    /// The record (and the schema record before it, when `schema` is new) is written with one
    /// `pwrite` (a streamed one with several: ``append(_:schema:)-(PayloadStream,_)``). It is compressed as one LZ4 block when it has at least 64 bytes and
    /// compression shrinks it. With ``JournalOptions/Durability/always`` the call returns once
    /// an `fdatasync` covered the record.
    ///
    /// If the write or the `fdatasync` fails, the file is truncated back to where it was,
    /// nothing is acknowledged and the error is thrown; a later append can succeed.
    ///
    /// ```swift
    /// let sequence = try journal.append(changes, schema: schemaBytes)
    /// ```
    ///
    /// - Parameter payload: the transaction's bytes (may be empty), at most 1 GiB.
    /// - Parameter schema: the schema the payload was written with, or nil to keep the current.
    /// - Returns: the record's sequence number, one more than the previous record's.
    /// - Throws: ``JournalError`` of code ``JournalError/Code/io(errno:operation:)`` (for
    ///   example `ENOSPC`), ``JournalError/Code/payloadTooLarge``, ``JournalError/Code/closed``
    ///   or ``JournalError/Code/needsReopen``.
    @discardableResult
    public func append(_ payload: [UInt8], schema: [UInt8]? = nil) throws(JournalError) -> UInt64 {
        guard payload.count <= JournalFormat.maxPayloadSize else {
            throw JournalError(.payloadTooLarge, "payloads are limited to \(JournalFormat.maxPayloadSize) bytes")
        }
        let shipping = options.onDurable != nil
        return try appendRecord(storedBound: payload.count, schema: schema) { buffer, seed, sequence, history in
            let start = buffer.count
            let stored = RecordCodec.append(to: &buffer, seed: seed, sequence: sequence, type: .transaction, payload: payload, history: history)
            var selfContained: [UInt8]?
            if shipping, buffer[start + JournalFormat.RecordHeaderField.flags] == JournalFormat.flagHistory {
                var wire: [UInt8] = []
                RecordCodec.append(to: &wire, seed: ShippedRecord.wireSeed, sequence: sequence, type: .transaction, payload: payload)
                selfContained = wire
            }
            return AppendedRecord(raw: payload.count, stored: stored, selfContained: selfContained)
        }
    }

    /// Appends one transaction record whose payload was compressed while it was written
    /// (``PayloadStream``); otherwise as ``append(_:schema:)-([UInt8],_)``. The
    /// stored bytes are the same as for the whole payload.
    ///
    /// A chunked record is written with several `pwrite`s (the headers and chunk table, then
    /// the chunks); a crash between them leaves a torn tail, which `open` truncates.
    ///
    /// - Throws: as ``append(_:schema:)-([UInt8],_)``.
    @discardableResult
    public func append(_ stream: PayloadStream, schema: [UInt8]? = nil) throws(JournalError) -> UInt64 {
        guard let chunked = stream.finish() else {
            return try append(stream.bytes, schema: schema)
        }
        guard chunked.rawCount <= JournalFormat.maxPayloadSize else {
            throw JournalError(.payloadTooLarge, "payloads are limited to \(JournalFormat.maxPayloadSize) bytes")
        }
        guard chunked.storedCount < chunked.rawCount else {
            // Chunks that do not shrink the payload: stored raw, as the format requires.
            guard let raw = chunked.rawPayload() else {
                throw JournalError(.corrupt, "a chunked payload compressed in memory did not decompress again; nothing was written")
            }
            return try append(raw, schema: schema)
        }
        // Only the headers and the chunk table go through the buffer; the chunks are written
        // from where they are.
        return try appendRecord(storedBound: chunked.storedCount, bufferedPayload: chunked.table.count, schema: schema) { buffer, seed, sequence, _ in
            // Chunked payloads (4 MiB and more) never join a history.
            RecordCodec.appendChunkedHeader(to: &buffer, seed: seed, sequence: sequence, type: .transaction, chunked)
            return AppendedRecord(raw: chunked.rawCount, stored: chunked.storedCount, blocks: chunked.blocks)
        }
    }

    /// The common part of the appends: rolls the segment when the record would not fit,
    /// writes the schema record when `schema` is new and then what `record` puts in the buffer
    /// (plus the `blocks` it returns, written after it), and syncs as the durability asks.
    /// `storedBound`: at most the bytes the transaction record's payload takes;
    /// `bufferedPayload`: at most the part of them that `record` puts in the buffer (nil: all).
    private func appendRecord(
        storedBound: Int, bufferedPayload: Int? = nil, schema: [UInt8]?, origin: [UInt8]? = nil,
        _ record: (inout [UInt8], _ seed: UInt32, _ sequence: UInt64, _ history: HistoryEncoder?) -> AppendedRecord
    ) throws(JournalError) -> UInt64 {
        guard (schema?.count ?? 0) <= JournalFormat.maxPayloadSize else {
            throw JournalError(.payloadTooLarge, "payloads are limited to \(JournalFormat.maxPayloadSize) bytes")
        }
        let ticket = try state.withLock { (s) throws(JournalError) -> Ticket in
            try s.checkUsable()
            try applyPendingTruncation(&s)
            let newSchema = schema.flatMap { $0 == s.tail.schema ? nil : $0 }
            let worstCase = 3 * JournalFormat.recordHeaderSize + storedBound + (newSchema?.count ?? 0) + (origin?.count ?? 0)
            if s.tail.end + Int64(worstCase) > Int64(options.segmentSize),
               s.tail.end > Int64(JournalFormat.segmentHeaderSize) {
                try roll(&s)
            }
            var buffer: [UInt8] = []
            buffer.reserveCapacity(worstCase - storedBound + (bufferedPayload ?? storedBound))
            var tail = s.tail
            let seed = s.activeSeed
            let history = try activeHistory(&s)
            let schemaSequence = tail.nextSequence
            if let newSchema { Self.appendSchemaRecord(newSchema, to: &buffer, seed: seed, tail: &tail, history: history) }
            let schemaEnd = buffer.count
            // A leftover origin record (a torn shipped append) must not describe this record.
            if let origin = origin ?? (tail.pendingOrigin == nil ? nil : []) {
                let stored = RecordCodec.append(to: &buffer, seed: seed, sequence: tail.nextSequence, type: .origin, payload: origin, history: history)
                tail.add(rawBytes: origin.count, storedBytes: stored)
                tail.noteOrigin(type: JournalFormat.RecordType.origin.rawValue, payload: origin)
            }
            let recordStart = buffer.count
            let sequence = tail.nextSequence
            let appended = record(&buffer, seed, sequence, history)
            let (raw, stored, blocks) = (appended.raw, appended.stored, appended.blocks)
            tail.add(rawBytes: raw, storedBytes: stored)
            tail.noteOrigin(type: JournalFormat.RecordType.transaction.rawValue, payload: nil)
            tail.end = try writeAtEnd(buffer, blocks, &s)
            s.tail = tail
            s.files[s.files.count - 1].size = tail.end
            if options.onDurable != nil {
                buffer.withUnsafeBytes { b in
                    if newSchema != nil {
                        s.undelivered.append(ShippedRecord(
                            segmentRecord: UnsafeRawBufferPointer(rebasing: b[..<schemaEnd]), sequence: schemaSequence, kind: .schema))
                    }
                }
                // The bytes just written, shared, not copied: the record is put together on the
                // shipper's thread (a large save's record is tens of megabytes).
                if let selfContained = appended.selfContained {
                    // A record that copies from the segment's history travels self-contained.
                    s.undelivered.append(ShippedRecord(pieces: [selfContained[...]], sequence: sequence, kind: .transaction))
                } else {
                    s.undelivered.append(ShippedRecord(pieces: [buffer[recordStart...]] + blocks.map { $0[...] }, sequence: sequence, kind: .transaction))
                }
            }
            return Ticket(sequence: sequence, end: tail.end, epoch: s.epoch, segment: s.activeHeader.number, syncDue: isSyncDue(s))
        }
        switch options.durability {
        case .always: try syncThrough(ticket)
        case .batched: if ticket.syncDue { try syncThrough(ticket) }
        case .none: break
        }
        deliverDurable()
        return ticket.sequence
    }

    /// Appends a transaction record shipped from another journal (a replica's), its stored
    /// payload as it is, numbered in this journal's sequence; otherwise as
    /// ``append(_:schema:)-([UInt8],_)``, in one `pwrite`.
    ///
    /// With `origin`, an origin record carrying it is written just before the record, in the
    /// same `pwrite`: where the record came from (a replicated stream's position), which
    /// ``origin`` reports from then on, across reopens and compactions.
    ///
    /// - Parameter record: a checked transaction record (``ShippedRecord/init(wire:)``).
    /// - Parameter schema: the schema the payload was written with (raw), or nil to keep the current.
    /// - Parameter origin: an opaque position, at most 1 KiB; nil for none.
    /// - Returns: the record's sequence number in this journal.
    /// - Throws: ``JournalError`` as ``append(_:schema:)-([UInt8],_)``; code `corrupt` for a
    ///   record that is not a transaction, `payloadTooLarge` for an origin over 1 KiB.
    @discardableResult
    public func append(shipped record: ShippedRecord, schema: [UInt8]?, origin: [UInt8]?) throws(JournalError) -> UInt64 {
        guard record.kind == .transaction else {
            throw JournalError(.corrupt, "shipped record \(record.sequence) is a \(record.kind) record; only transactions are appended")
        }
        guard (origin?.count ?? 0) <= 1024 else { throw JournalError(.payloadTooLarge, "an origin is limited to 1024 bytes") }
        // The shipped payload is written as received; a small one still joins the history.
        let raw: [UInt8]? = record.rawLength <= JournalFormat.historyRecordLimit ? try record.payload() : nil
        return try appendRecord(storedBound: record.storedLength, schema: schema, origin: origin) { buffer, seed, sequence, history in
            let start = buffer.count
            buffer.append(contentsOf: record.wire)
            buffer.storeLittleEndian(sequence, at: start + JournalFormat.RecordHeaderField.sequence)
            RecordCodec.reseal(&buffer, at: start, seed: seed)
            if let history, let raw { _ = raw.withUnsafeBytes { history.add($0) } }
            return AppendedRecord(raw: record.rawLength, stored: record.storedLength)
        }
    }

    /// The origin of the last data record written with one
    /// (``append(shipped:schema:origin:)``, a compaction keeps it): where a replica's
    /// journal is in its source. Nil when no record had one.
    public var origin: [UInt8]? { state.withLock { $0.tail.origin } }

    /// Hands the records that are now durable to ``JournalOptions/onDurable``, in order.
    /// Called with no lock held; `delivery` keeps concurrent callers in sequence order.
    func deliverDurable() {
        guard let sink = options.onDurable else { return }
        delivery.withLock { _ in
            let ready: [ShippedRecord] = state.withLock { s in
                let n = s.undelivered.prefix { $0.sequence < s.durableBefore }.count
                guard n > 0 else { return [] }
                let records = Array(s.undelivered[..<n])
                s.undelivered.removeFirst(n)
                return records
            }
            if !ready.isEmpty { sink(ready) }
        }
    }

    /// What an append's record step wrote: the transaction record's raw and stored payload
    /// lengths, the chunks to write after the buffer, and, for a record that copies from the
    /// segment's history while records are shipped, its self-contained wire form.
    struct AppendedRecord {
        var raw: Int
        var stored: Int
        var blocks: [[UInt8]] = []
        var selfContained: [UInt8]?
    }

    /// The active segment's history for the next append, rebuilt from the segment's records
    /// when unknown; nil when the segment has none.
    private func activeHistory(_ s: inout WriterState) throws(JournalError) -> HistoryEncoder? {
        switch s.history {
        case .off: return nil
        case .ready(let encoder): return encoder
        case .rebuild:
            guard s.activeHeader.usesHistory else {
                s.history = .off
                return nil
            }
            let path = self.path(s.files[s.files.count - 1].name)
            let bytes = try fs.read(s.activeFD, path, count: Int(s.tail.end), at: 0)
            let reader = RecordHistory(header: s.activeHeader)
            _ = RecordCodec.scan(bytes, header: s.activeHeader, end: Int(s.tail.end)) { record in
                bytes.withUnsafeBytes { _ = reader.note(record, in: $0, file: path) }
                return true
            }
            var encoder: HistoryEncoder?
            // A segment whose last 64 KiB hold a record that does not decompress goes on
            // without a history: self-contained records are valid after anything.
            _ = reader.window { encoder = HistoryEncoder(window: $0) }
            s.history = encoder.map { .ready($0) } ?? .off
            return encoder
        }
    }

    /// Appends to `buffer` the record of a new schema, and counts it in `tail`.
    static func appendSchemaRecord(
        _ schema: [UInt8], to buffer: inout [UInt8], seed: UInt32, tail: inout Tail, history: HistoryEncoder? = nil
    ) {
        let stored = RecordCodec.append(to: &buffer, seed: seed, sequence: tail.nextSequence, type: .schema, payload: schema, history: history)
        tail.add(rawBytes: schema.count, storedBytes: stored)
        tail.schema = schema
        tail.schemaVersions += 1
    }

    /// Writes `buffer`, then `blocks`, at the end of the active segment.
    ///
    /// If a write fails, whatever part of them reached the file is cut off (now, or before
    /// the next append) and the error is thrown.
    ///
    /// - Returns: the segment's new end.
    private func writeAtEnd(_ buffer: [UInt8], _ blocks: [[UInt8]], _ s: inout WriterState) throws(JournalError) -> Int64 {
        let path = self.path(s.files[s.files.count - 1].name)
        do throws(JournalError) {
            var at = s.tail.end
            try fs.write(s.activeFD, path, buffer, at: at)
            at += Int64(buffer.count)
            for block in blocks {
                try fs.write(s.activeFD, path, block, at: at)
                at += Int64(block.count)
            }
            return at
        } catch {
            s.pendingTruncation = s.tail.end
            try? applyPendingTruncation(&s)
            // The history took in the records cut off: it is rebuilt from the file.
            s.history = .rebuild
            throw error
        }
    }

    /// Whether the `.batched` durability's interval since the last sync has passed.
    private func isSyncDue(_ s: WriterState) -> Bool {
        guard case .batched(let milliseconds) = options.durability else { return false }
        return ContinuousClock.now - s.lastSync >= .milliseconds(milliseconds)
    }

    /// Makes every appended record durable (`fdatasync`), whatever the durability policy.
    ///
    /// - Throws: ``JournalError`` if the `fdatasync` fails. With `.always`, unsynced records
    ///   are then truncated (none was acknowledged); with the other policies the journal
    ///   needs reopening (``JournalError/Code/needsReopen``), since acknowledged records may
    ///   have been lost.
    public func sync() throws(JournalError) {
        let ticket = try state.withLock { (s) throws(JournalError) -> Ticket in
            try s.checkUsable()
            return Ticket(sequence: s.tail.nextSequence - 1, end: s.tail.end, epoch: s.epoch, segment: s.activeHeader.number, syncDue: true)
        }
        try syncThrough(ticket)
        deliverDurable()
    }

    /// Syncs and closes the journal and releases the lock. Later calls throw
    /// ``JournalError/Code/closed``; closing twice does nothing.
    ///
    /// - Throws: ``JournalError`` if the final `fdatasync` or a `close` fails (the descriptors
    ///   and the lock are released anyway).
    public func close() throws(JournalError) {
        defer { deliverDurable() }
        try gate.withLock { (_) throws(JournalError) in
            try state.withLock { (s) throws(JournalError) in
                guard !s.closed else { return }
                s.closed = true
                var failure: JournalError?
                if s.broken == nil {
                    do throws(JournalError) {
                        try fs.fdatasync(s.activeFD, path(s.files[s.files.count - 1].name))
                        s.durableBefore = s.tail.nextSequence
                    } catch { failure = error }
                }
                for fd in s.retiredFDs + [s.activeFD] {
                    do throws(JournalError) { try fs.close(fd, nil) } catch { failure = failure ?? error }
                }
                s.retiredFDs = []
                fs.closeQuietly(s.lockFD)
                if let failure { throw failure }
            }
        }
    }

    // MARK: Internals

    func path(_ name: String) -> String { directory + "/" + name }

    func log(_ message: @autoclosure () -> String) {
        options.log?(message())
    }

    /// Truncates a torn tail or a failed append's partial bytes.
    func applyPendingTruncation(_ s: inout WriterState) throws(JournalError) {
        guard let length = s.pendingTruncation else { return }
        let path = self.path(s.files[s.files.count - 1].name)
        let size = try fs.fileSize(s.activeFD, path)
        if size > length {
            try fs.truncate(s.activeFD, path, to: length)
            log("truncated \(size - length) bytes at offset \(length) of \(path)")
        }
        s.pendingTruncation = nil
    }

    /// Waits until the record `ticket` describes is durable, syncing if nobody else did.
    func syncThrough(_ ticket: Ticket) throws(JournalError) {
        try syncThroughGated(ticket)
        // Returning without an error: the ticket's record and those before it are durable.
        state.withLock { s in s.durableBefore = max(s.durableBefore, ticket.sequence + 1) }
    }

    private func syncThroughGated(_ ticket: Ticket) throws(JournalError) {
        try gate.withLock { (g) throws(JournalError) in
            let snapshot = state.withLock { s in
                let retired = s.retiredFDs
                s.retiredFDs = []
                return (fd: s.activeFD, header: s.activeHeader, name: s.files[s.files.count - 1].name,
                        tail: s.tail, start: s.segmentStartTail, epoch: s.epoch, broken: s.broken,
                        closed: s.closed, retired: retired)
            }
            // Only fdatasync runs outside `state`, always under `gate`: closing retired
            // descriptors here cannot race with it.
            for fd in snapshot.retired { fs.closeQuietly(fd) }
            if snapshot.closed { throw JournalError(.closed, "the journal is closed", file: directory) }
            for cut in g.truncations where cut.epoch >= ticket.epoch && cut.segment == ticket.segment && ticket.end > cut.end {
                throw JournalError(.io(errno: 5, operation: "fdatasync"),
                                   "record \(ticket.sequence) was discarded: the fdatasync that should have covered it failed",
                                   file: path(snapshot.name))
            }
            if let broken = snapshot.broken { throw broken }
            if ticket.segment != snapshot.header.number { return }  // roll or compaction synced it
            if g.segment != snapshot.header.number {
                g.segment = snapshot.header.number
                g.synced = snapshot.start
            }
            if ticket.end <= g.synced.end { return }  // another caller's fdatasync covered it
            do throws(JournalError) {
                try fs.fdatasync(snapshot.fd, path(snapshot.name))
            } catch {
                state.withLock { s in
                    guard s.activeHeader.number == snapshot.header.number, s.epoch == snapshot.epoch else { return }
                    if case .always = options.durability {
                        // Nothing past the last good sync was acknowledged: cut it off.
                        g.truncations.append(.init(epoch: s.epoch, segment: snapshot.header.number, end: g.synced.end))
                        s.epoch += 1
                        s.tail = g.synced
                        s.undelivered.removeAll { $0.sequence >= g.synced.nextSequence }
                        s.files[s.files.count - 1].size = g.synced.end
                        s.pendingTruncation = g.synced.end
                        try? applyPendingTruncation(&s)
                        s.history = .rebuild
                        log("fdatasync failed (\(error)); truncated \(path(snapshot.name)) back to \(g.synced.end) bytes")
                    } else {
                        s.broken = JournalError(.needsReopen, "an fdatasync failed (\(error)); acknowledged records may be lost, reopen the journal",
                                                file: path(snapshot.name))
                    }
                }
                throw error
            }
            g.synced = snapshot.tail
            state.withLock { s in
                s.durableBefore = max(s.durableBefore, snapshot.tail.nextSequence)
                s.lastSync = .now
                s.lastSynced = (snapshot.header.number, snapshot.tail.end)
            }
        }
    }

    /// For `.batched`: a thread that syncs a dirty journal every `milliseconds`, so a quiet
    /// journal does not keep unsynced appends longer than that. It holds the journal weakly
    /// and ends when the journal is closed or released.
    static func startFlusher(for journal: Journal, milliseconds: Int) {
        let interval = Double(max(1, milliseconds)) / 1000
        let thread = Thread { [weak journal] in
            while true {
                Thread.sleep(forTimeInterval: interval)
                guard let journal else { return }
                let (usable, dirty) = journal.state.withLock { s in (!s.closed && s.broken == nil, s.isDirty) }
                guard usable else { return }
                if dirty { try? journal.sync() }
            }
        }
        thread.name = "GraphJournal flusher"
        thread.start()
    }

    /// Starts a new log segment: syncs the active one, creates the next file, lists it in
    /// MANIFEST. On failure before the MANIFEST rename nothing changes.
    func roll(_ s: inout WriterState) throws(JournalError) {
        let oldPath = path(s.files[s.files.count - 1].name)
        try fs.fdatasync(s.activeFD, oldPath)
        s.durableBefore = max(s.durableBefore, s.tail.nextSequence)
        let header = SegmentHeader(kind: .log, salt: .random(in: .min ... .max), number: s.nextFileNumber, firstSequence: s.tail.nextSequence,
                                   version: options.logVersion)
        let name = fileName(header.number, .log)
        try fs.writeNewFile(path(name) + JournalFormat.temporarySuffix, header.encoded())
        do throws(JournalError) { try fs.rename(path(name) + JournalFormat.temporarySuffix, path(name)) } catch {
            try? fs.unlink(path(name) + JournalFormat.temporarySuffix)
            throw error
        }
        var renamed = false
        do throws(JournalError) {
            try fs.replaceFile(path(JournalFormat.manifestFileName), with: Manifest(files: s.files.map(\.name) + [name]).encoded(),
                               directory: directory, renamed: &renamed)
        } catch {
            if renamed {
                s.broken = JournalError(.needsReopen, "MANIFEST was replaced but the directory fsync failed: \(error)", file: directory)
            } else {
                try? fs.unlink(path(name))
            }
            throw error
        }
        s.nextFileNumber += 1
        let fd: Int32
        do throws(JournalError) { fd = try fs.open(path(name), .readWrite) } catch {
            s.broken = JournalError(.needsReopen, "cannot open the new segment: \(error)", file: path(name))
            throw error
        }
        s.retiredFDs.append(s.activeFD)
        s.activeFD = fd
        s.activeHeader = header
        s.activeSeed = header.seed
        s.files.append(LiveFile(name: name, header: header, size: Int64(JournalFormat.segmentHeaderSize)))
        s.tail.end = Int64(JournalFormat.segmentHeaderSize)
        s.segmentStartTail = s.tail
        s.pendingTruncation = nil
        s.history = WriterState.freshHistory(for: header)
        log("rolled to segment \(name) at sequence \(header.firstSequence)")
    }
}

extension JournalRecord.Kind {
    /// The public kind of a record type; nil for skippable types.
    init?(recordType: UInt8) {
        switch JournalFormat.RecordType(rawValue: recordType) {
        case .transaction: self = .transaction
        case .base: self = .base
        case .schema: self = .schema
        case .origin, nil: return nil
        }
    }
}

/// A live segment file.
struct LiveFile: Sendable {
    var name: String
    var header: SegmentHeader
    /// Bytes of valid records (the file may be longer while a torn tail awaits truncation).
    var size: Int64
}

/// The end of the log and the counters as of that end; kept as one value so a failed sync
/// can return to the last synced one.
struct Tail: Sendable, Hashable {
    var end: Int64
    var nextSequence: UInt64
    var schema: [UInt8]?
    var records = 0
    var rawBytes: Int64 = 0
    var storedBytes: Int64 = 0
    var schemaVersions = 0
    /// The payload of the origin record of the last data record that had one.
    var origin: [UInt8]?
    /// An origin record's payload that no data record followed yet.
    var pendingOrigin: [UInt8]?

    mutating func add(rawBytes raw: Int, storedBytes stored: Int) {
        nextSequence += 1
        records += 1
        rawBytes += Int64(raw)
        storedBytes += Int64(stored)
    }

    /// Tracks origins: an origin record is pending until a base or transaction record follows
    /// it (a schema record may come between), which it then describes; a second origin record
    /// replaces a pending one. An empty origin says the record after it has none: a writer
    /// puts one before a record without origin when an origin record is pending (left by a
    /// torn append), so that the leftover is never taken for that record.
    mutating func noteOrigin(type: UInt8, payload: @autoclosure () -> [UInt8]?) {
        switch JournalFormat.RecordType(rawValue: type) {
        case .origin: pendingOrigin = payload() ?? []
        case .transaction, .base: settleOrigin()
        case .schema, nil: break
        }
    }

    /// A pending origin becomes the origin (an empty one changes nothing).
    mutating func settleOrigin() {
        if let p = pendingOrigin, !p.isEmpty { origin = p }
        pendingOrigin = nil
    }
}

/// Everything `state` protects.
struct WriterState: Sendable {
    var files: [LiveFile]
    var activeFD: Int32
    var activeHeader: SegmentHeader
    var activeSeed: UInt32
    var tail: Tail
    /// The tail when the active segment started (durable: roll and compaction sync).
    var segmentStartTail: Tail
    var pendingTruncation: Int64?
    var nextFileNumber: UInt64
    var lockFD: Int32 = -1
    var epoch: UInt64 = 0
    var closed = false
    var broken: JournalError?
    var lastSync = ContinuousClock.now
    /// Descriptors of segments no longer active, closed under `gate`.
    var retiredFDs: [Int32] = []
    /// Segment number and end of the last successful fdatasync.
    var lastSynced: (segment: UInt64, end: Int64) = (0, 0)
    /// Records below this sequence are durable (for ``JournalOptions/onDurable``).
    var durableBefore: UInt64 = 0
    /// Records appended but not yet handed to ``JournalOptions/onDurable``, in order.
    var undelivered: [ShippedRecord] = []
    /// The active segment's compression history (``HistoryEncoder``).
    var history: WriterHistory = .rebuild

    /// Where the writer stands with the active segment's history.
    enum WriterHistory: Sendable {
        /// The segment has none (version 1), or it could not be rebuilt: records are written
        /// self-contained until the next segment.
        case off
        /// Unknown (after open, or after an append was cut off): rebuilt from the segment's
        /// records before the next append.
        case rebuild
        /// Up to date with the segment's last record.
        case ready(HistoryEncoder)
    }

    /// The history of a segment just started with `header`.
    static func freshHistory(for header: SegmentHeader) -> WriterHistory {
        guard header.usesHistory, let encoder = HistoryEncoder() else { return .off }
        return .ready(encoder)
    }

    /// Whether records were written since the last fdatasync.
    var isDirty: Bool { lastSynced != (activeHeader.number, tail.end) }

    func checkUsable() throws(JournalError) {
        if closed { throw JournalError(.closed, "the journal is closed") }
        if let broken { throw broken }
    }
}

/// Group-commit bookkeeping, protected by `gate`.
struct SyncGate: Sendable {
    struct Truncation: Sendable { var epoch: UInt64; var segment: UInt64; var end: Int64 }
    /// The segment `synced` describes.
    var segment: UInt64
    /// The tail as of the last successful fdatasync of `segment`.
    var synced: Tail
    /// Failed syncs that cut records off (rare; kept so late waiters learn their fate).
    var truncations: [Truncation] = []
}

/// What an append hands to the sync step.
struct Ticket: Sendable {
    var sequence: UInt64
    var end: Int64
    var epoch: UInt64
    var segment: UInt64
    var syncDue: Bool
}
