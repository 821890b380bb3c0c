extension Journal {
    /// ``forEachRecord(progress:_:)``, each payload lent as a ``JournalPayload`` instead of an
    /// array: a chunked one (a save of tens of thousands of objects) one decompressed chunk at a
    /// time, so that it is never held whole (57 MB for a save of 1M objects, which would sit on
    /// top of the objects a replay builds from it), any other in one piece. What is lent is
    /// valid only during the call of `body`.
    ///
    /// A chunk that does not decompress is found only once `body` read up to it: the walk then
    /// throws the error ``forEachRecord(progress:_:)`` throws for that record (the same
    /// message, file, offset and sequence), after `body` returned or threw, and what `body` did
    /// with the record's first chunks must be discarded.
    ///
    /// ```swift
    /// try journal.forEachPayload(progress: { _, _ in }) { sequence, kind, payload in
    ///     while let piece = payload.next() { apply(piece) }
    /// }
    /// ```
    ///
    /// - Parameter progress: called once per record, as ``forEachRecord(progress:_:)`` calls it.
    /// - Parameter body: called once per record with its sequence, kind and payload; an error
    ///   it throws stops the walk.
    /// - Throws: what `body` or `progress` throws, or ``JournalError`` as ``forEachRecord(_:)``.
    package func forEachPayload(
        progress: (_ bytesDone: Int64, _ bytesTotal: Int64) throws -> Void,
        _ body: (_ sequence: UInt64, _ kind: JournalRecord.Kind, _ payload: JournalPayload) throws -> Void
    ) throws {
        let total = state.withLock { s in s.files.reduce(Int64(0)) { $0 + $1.size } }
        let lent = JournalPayload()
        let slots = ReadBuffer()
        try walkLiveRecords { record, bytes, path, fileStart, payload in
            guard let kind = JournalRecord.Kind(recordType: record.type) else { return }
            if record.chunked {
                // Chunked payloads (4 MiB and more) never join a segment's history: their
                // stored bytes alone decode them.
                try Self.lendChunks(of: record, in: bytes, file: path, slots: slots, lent: lent) { payload in
                    try body(record.sequence, kind, payload)
                }
            } else {
                switch payload() {
                case .success(let whole):
                    defer { lent.reset(pieces: []) }
                    try whole.withUnsafeBytes { buffer in
                        lent.reset(buffer)
                        try body(record.sequence, kind, lent)
                    }
                case .failure(var error):
                    error.sequence = record.sequence
                    throw error
                }
            }
            try progress(fileStart + Int64(record.end), total)
        }
    }

    /// Lends the chunked payload of `record` (in `bytes`, the whole segment file) to `body`
    /// chunk by chunk, decompressed into `slots`; then throws, before anything `body` threw,
    /// the error of a chunk that did not decompress.
    private static func lendChunks(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, file: String, slots: ReadBuffer, lent: JournalPayload,
        _ body: (JournalPayload) throws -> Void
    ) throws {
        func problem(_ message: String) -> JournalError {
            var error = RecordCodec.decompressionProblem(of: record, message, file: file)
            error.sequence = record.sequence
            return error
        }
        let stored = UnsafeRawBufferPointer(rebasing: bytes[record.payloadRange])
        let starts: [Int]
        switch ChunkedPayload.chunkStarts(stored, rawLength: record.rawLength) {
        case .success(let found): starts = found
        case .failure(let chunkProblem): throw problem(chunkProblem.message)
        }
        let memory = slots.reserve(ChunkStream.slotCount * JournalFormat.chunkSize)
        lent.reset(chunks: ChunkStream(stored: stored, starts: starts, rawLength: record.rawLength, slots: memory),
                   rawLength: record.rawLength)
        defer { lent.reset(pieces: []) }
        var thrown: (any Error)?
        do { try body(lent) } catch { thrown = error }
        // Decompresses what `body` did not read, so that a bad chunk after it is reported too
        // (as when the payload is decompressed whole), and ends the stream's helper thread.
        guard lent.finish() else { throw problem(lent.failure ?? "a chunk does not decompress") }
        if let thrown { throw thrown }
    }
}
