internal import Synchronization

extension Journal {
    /// The latest schema payload, or nil if no schema was ever written.
    public var schema: [UInt8]? {
        state.withLock { $0.tail.schema }
    }

    /// The identifiers of the keys the journal's live sealed records name: a key not listed is
    /// no longer needed to read the journal (after a rotation, once a compaction sealed
    /// everything with the new key). Empty for a journal without sealed records.
    public var keyIdentifiers: Set<String> {
        state.withLock { $0.keyIDs }
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
        _ visit: (
            _ record: ScannedRecord, _ bytes: UnsafeRawBufferPointer, _ path: String, _ fileStart: Int64,
            _ payload: () -> Result<[UInt8], JournalError>
        ) throws -> Void
    ) throws {
        let files = state.withLock { s in s.files }
        // The chain `open` settled: no gap to fill, no unlisted log to add, no torn tail (each
        // file is read up to the end of its checked records).
        var chain = SegmentChain(settled: files.map(\.name))
        var fileStart: Int64 = 0
        while let link = chain.current {
            let file = files[link.index]
            let path = self.path(file.name)
            let fd = try fs.open(path, .readOnly)
            let bytesResult: Result<[UInt8], JournalError>
            do throws(JournalError) {
                bytesResult = .success(try fs.read(fd, path, count: Int(file.size), at: 0))
            } catch {
                bytesResult = .failure(error)
            }
            fs.closeQuietly(fd)
            let bytes = try bytesResult.get()
            var failure: (any Error)?
            let history = RecordHistory(header: file.header, keyring: keyring)
            let scan = bytes.withUnsafeBytes { raw in
                RecordCodec.scan(raw, header: file.header, end: raw.count) { record in
                    do {
                        try history.visit(record, in: raw, file: path) { payload in
                            try visit(record, raw, path, fileStart, payload)
                        }
                    } catch {
                        failure = error
                        return false
                    }
                    return true
                }
            }
            if failure == nil, let damage = scan.damage {
                failure = JournalError(
                    .corrupt, "\(damage.reason) (the file changed after open)", file: path, offset: Int64(damage.offset)
                )
            }
            if let failure { throw failure }
            if scan.validEnd == bytes.count { adoptHistory(history, of: file) }
            fileStart += file.size
            chain.advance(endsTorn: false, nextSequence: scan.nextSequence)
        }
    }

    /// Hands the history a walk rebuilt to the writer, when the walk read the whole active
    /// segment, nothing was appended since, and the writer has yet to rebuild it: a store that
    /// replays its journal at open then saves without reading its active segment again.
    private func adoptHistory(_ history: RecordHistory, of file: LiveFile) {
        guard history.enabled else { return }
        state.withLock { s in
            guard case .rebuild = s.history, s.activeHeader.number == file.header.number, s.tail.end == file.size,
                s.pendingTruncation == nil
            else { return }
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
}
