internal import Synchronization

extension Journal {

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
        return try appendRecord(storedBound: payload.count, schema: schema) {
            (buffer, seed, sequence, history, sealer) throws(JournalError) in
            let start = buffer.count
            var stored = RecordCodec.append(
                to: &buffer, seed: seed, sequence: sequence, type: .transaction, payload: payload, history: history)
            if var running = sealer {
                try RecordCodec.seal(&buffer, at: start, seed: seed, sealer: &running)
                sealer = running
                stored = buffer.count - start - JournalFormat.recordHeaderSize
            }
            var selfContained: [UInt8]?
            if shipping, buffer[start + JournalFormat.RecordHeaderField.flags] == JournalFormat.flagHistory {
                var wire: [UInt8] = []
                RecordCodec.append(
                    to: &wire, seed: ShippedRecord.wireSeed, sequence: sequence, type: .transaction, payload: payload)
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
                throw JournalError(
                    .corrupt, "a chunked payload compressed in memory did not decompress again; nothing was written")
            }
            return try append(raw, schema: schema)
        }
        // Only the headers and the chunk table go through the buffer; the chunks are written
        // from where they are.
        let sealing = options.encryption != nil
        return try appendRecord(
            storedBound: chunked.storedCount, bufferedPayload: sealing ? nil : chunked.table.count, schema: schema
        ) { (buffer, seed, sequence, _, sealer) throws(JournalError) in
            // Chunked payloads (4 MiB and more) never join a history.
            let start = buffer.count
            RecordCodec.appendChunkedHeader(to: &buffer, seed: seed, sequence: sequence, type: .transaction, chunked)
            guard var running = sealer else {
                return AppendedRecord(raw: chunked.rawCount, stored: chunked.storedCount, blocks: chunked.blocks)
            }
            // Sealed, the chunks are one payload: encrypted in units of 1 MiB, in parallel.
            for block in chunked.blocks { buffer.append(contentsOf: block) }
            try RecordCodec.seal(&buffer, at: start, seed: seed, sealer: &running)
            sealer = running
            return AppendedRecord(raw: chunked.rawCount, stored: buffer.count - start - JournalFormat.recordHeaderSize)
        }
    }

    /// The common part of the appends: rolls the segment when the record would not fit,
    /// writes the schema record when `schema` is new and then what `record` puts in the buffer
    /// (plus the `blocks` it returns, written after it), and syncs as the durability asks.
    /// `storedBound`: at most the bytes the transaction record's payload takes;
    /// `bufferedPayload`: at most the part of them that `record` puts in the buffer (nil: all).
    private func appendRecord(
        storedBound: Int, bufferedPayload: Int? = nil, schema: [UInt8]?, origin: [UInt8]? = nil,
        check: (inout WriterState) throws(JournalError) -> Void = { _ throws(JournalError) in },
        _ record: (
            inout [UInt8], _ seed: UInt32, _ sequence: UInt64, _ history: HistoryEncoder?, _ sealer: inout Sealer?
        ) throws(JournalError) -> AppendedRecord
    ) throws(JournalError) -> UInt64 {
        guard (schema?.count ?? 0) <= JournalFormat.maxPayloadSize else {
            throw JournalError(.payloadTooLarge, "payloads are limited to \(JournalFormat.maxPayloadSize) bytes")
        }
        let ticket = try state.withLock { (s) throws(JournalError) -> Ticket in
            try s.checkUsable()
            try check(&s)
            try applyPendingTruncation(&s)
            let newSchema = schema.flatMap { $0 == s.tail.schema ? nil : $0 }
            let sealOverhead =
                s.sealer == nil
                ? 0 : SealFormat.overhead(inner: storedBound) + SealFormat.overhead(inner: newSchema?.count ?? 0)
            let worstCase =
                3 * JournalFormat.recordHeaderSize + storedBound + (newSchema?.count ?? 0) + (origin?.count ?? 0)
                + sealOverhead
            // Sealed records go to a version 3 segment, records in the clear to an earlier one.
            let wrongVersion = (s.sealer != nil) != (s.activeHeader.version == JournalFormat.sealedVersion)
            if wrongVersion
                || (s.tail.end + Int64(worstCase) > Int64(options.segmentSize)
                    && s.tail.end > Int64(JournalFormat.segmentHeaderSize))
            {
                try roll(&s)
            }
            var buffer: [UInt8] = []
            buffer.reserveCapacity(worstCase - storedBound + (bufferedPayload ?? storedBound))
            var tail = s.tail
            let seed = s.activeSeed
            let history = try activeHistory(&s)
            let schemaSequence = tail.nextSequence
            if let newSchema {
                try Self.appendSchemaRecord(
                    newSchema, to: &buffer, seed: seed, tail: &tail, history: history, sealer: &s.sealer)
            }
            let schemaEnd = buffer.count
            // A leftover origin record (a torn shipped append) must not describe this record.
            if let origin = origin ?? (tail.pendingOrigin == nil ? nil : []) {
                let stored = RecordCodec.append(
                    to: &buffer, seed: seed, sequence: tail.nextSequence, type: .origin, payload: origin,
                    history: history)
                tail.add(rawBytes: origin.count, storedBytes: stored)
                tail.noteOrigin(type: JournalFormat.RecordType.origin.rawValue, payload: origin)
            }
            let recordStart = buffer.count
            let sequence = tail.nextSequence
            let sealedBefore = s.sealer?.counter
            let appended = try record(&buffer, seed, sequence, history, &s.sealer)
            let (raw, stored, blocks) = (appended.raw, appended.stored, appended.blocks)
            if let sealer = s.sealer, sealer.counter != sealedBefore {
                s.holdsSealedRecords = true
                s.keyIDs.insert(sealer.keyID)
            }
            tail.add(rawBytes: raw, storedBytes: stored)
            tail.noteOrigin(type: JournalFormat.RecordType.transaction.rawValue, payload: nil)
            tail.end = try writeAtEnd(buffer, blocks, &s)
            s.tail = tail
            s.files[s.files.count - 1].size = tail.end
            if options.onDurable != nil {
                buffer.withUnsafeBytes { b in
                    if newSchema != nil {
                        s.undelivered.append(
                            ShippedRecord(
                                segmentRecord: UnsafeRawBufferPointer(rebasing: b[..<schemaEnd]),
                                sequence: schemaSequence, kind: .schema))
                    }
                }
                // The bytes just written, shared, not copied: the record is put together on the
                // shipper's thread (a large save's record is tens of megabytes).
                if let selfContained = appended.selfContained {
                    // A record that copies from the segment's history travels self-contained.
                    s.undelivered.append(
                        ShippedRecord(pieces: [selfContained[...]], sequence: sequence, kind: .transaction))
                } else {
                    s.undelivered.append(
                        ShippedRecord(
                            pieces: [buffer[recordStart...]] + blocks.map { $0[...] }, sequence: sequence,
                            kind: .transaction))
                }
            }
            return Ticket(
                sequence: sequence, end: tail.end, epoch: s.epoch, segment: s.activeHeader.number, syncDue: isSyncDue(s)
            )
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
    public func append(shipped record: ShippedRecord, schema: [UInt8]?, origin: [UInt8]?) throws(JournalError) -> UInt64
    {
        guard record.kind == .transaction else {
            throw JournalError(
                .corrupt, "shipped record \(record.sequence) is a \(record.kind) record; only transactions are appended"
            )
        }
        guard (origin?.count ?? 0) <= 1024 else {
            throw JournalError(.payloadTooLarge, "an origin is limited to 1024 bytes")
        }
        // The shipped payload is written as received; a small one still joins the history (a
        // sealed one goes to a version 3 segment, which has none).
        let sealHeader = try record.sealHeader()
        let raw: [UInt8]? =
            sealHeader == nil && record.rawLength <= JournalFormat.historyRecordLimit ? try record.payload() : nil
        return try appendRecord(
            storedBound: record.storedLength, schema: schema, origin: origin,
            check: { (s) throws(JournalError) in try admitShipped(record, sealHeader, &s) }
        ) { (buffer, seed, sequence, history, _) throws(JournalError) in
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
        _ schema: [UInt8], to buffer: inout [UInt8], seed: UInt32, tail: inout Tail, history: HistoryEncoder? = nil,
        sealer: inout Sealer?
    ) throws(JournalError) {
        let start = buffer.count
        var stored = RecordCodec.append(
            to: &buffer, seed: seed, sequence: tail.nextSequence, type: .schema, payload: schema, history: history)
        if var running = sealer {
            try RecordCodec.seal(&buffer, at: start, seed: seed, sealer: &running)
            sealer = running
            stored = buffer.count - start - JournalFormat.recordHeaderSize
        }
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
    private func writeAtEnd(
        _ buffer: [UInt8], _ blocks: [[UInt8]], _ s: inout WriterState
    ) throws(JournalError) -> Int64 {
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

    /// Refuses a shipped record this journal cannot hold: a sealed one without the key or
    /// from another journal, or one in the clear when the journal refuses those. The first
    /// sealed record a journal takes gives it its identity.
    private func admitShipped(
        _ record: ShippedRecord, _ header: SealHeader?, _ s: inout WriterState
    ) throws(JournalError) {
        guard let header else {
            if let encryption = options.encryption, encryption.plaintextRecords == .refuse || s.holdsSealedRecords {
                throw JournalError(
                    .notEncrypted,
                    "shipped record \(record.sequence) is not sealed, and this journal is encrypted: its writer must seal its records",
                    sequence: record.sequence)
            }
            return
        }
        guard let keyring, let sealer = s.sealer else {
            throw JournalError(
                .keyUnavailable(keyID: header.keyID),
                "shipped record \(record.sequence) is sealed with key \(header.keyID), and this journal was opened without encryption",
                sequence: record.sequence)
        }
        if case .failure(let failure) = keyring.sealKey(for: header) { throw failure.error(sequence: record.sequence) }
        if header.journalID != sealer.journalID {
            guard !s.holdsSealedRecords else {
                throw JournalError(
                    .corrupt,
                    "shipped record \(record.sequence) belongs to journal \(header.journalID), and this journal is \(sealer.journalID)",
                    sequence: record.sequence)
            }
            // A replica takes the identity of the journal it receives.
            s.sealer = Sealer(key: sealer.master, journalID: header.journalID)
        }
        s.holdsSealedRecords = true
        s.keyIDs.insert(header.keyID)
    }
}
