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
        let lender = PayloadLender(keyring: keyring)
        try walkLiveRecords { record, bytes, path, fileStart, payload in
            guard try lender.lend(record, in: bytes, path: path, payload: payload, to: body) else { return }
            try progress(fileStart + Int64(record.end), total)
        }
    }
}
