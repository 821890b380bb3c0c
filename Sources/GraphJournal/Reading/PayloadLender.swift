/// Lends the payloads of the records a walk of a whole segment visits (the walks of
/// ``Journal/walkLiveRecords(_:)`` and of `open`) to a replay as a ``JournalPayload``: a
/// chunked one chunk by chunk as it is decompressed (``JournalPayload/lendChunks(of:in:at:file:slots:_:)``),
/// any other in one piece. One lender serves a whole walk: the payload and the chunk slots are
/// reused from record to record.
///
/// Not `Sendable`: one walk runs on one thread.
final class PayloadLender {
    /// The payload lent, reset from record to record.
    private let lent = JournalPayload()
    /// The slots a chunked payload is decompressed into.
    private let slots = ReadBuffer()
    /// The keys of sealed records, if the journal has any.
    private let keyring: JournalKeyring?

    /// A lender for one walk; `keyring` opens sealed records.
    init(keyring: JournalKeyring? = nil) {
        self.keyring = keyring
    }

    /// Lends the payload of `record` (in `bytes`, its whole segment file, at `path`) to `body`
    /// with its sequence and kind; `payload` returns it decompressed. A record of a skippable
    /// type is not lent.
    ///
    /// - Returns: whether the record was lent.
    /// - Throws: a payload that does not decompress: a ``JournalError`` with the record's
    ///   sequence (for a chunk that does not, after `body` returned or threw, before what it
    ///   threw); or what `body` throws.
    func lend(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, path: String,
        payload: () -> Result<[UInt8], JournalError>,
        to body: (_ sequence: UInt64, _ kind: JournalRecord.Kind, _ payload: JournalPayload) throws -> Void
    ) throws -> Bool {
        guard let kind = JournalRecord.Kind(recordType: record.type) else { return false }
        guard record.sealed else {
            try lendPayload(of: record, in: bytes, at: 0, path: path, kind: kind, payload: payload, to: body)
            return true
        }
        // Opened into a buffer of its own, then lent as the record inside it is.
        var thrown: (any Error)?
        let opened = RecordCodec.withUnsealed(record, in: bytes, at: 0, keyring: keyring, file: path) {
            inner, innerBytes, base -> Result<Void, JournalError> in
            do {
                try lendPayload(
                    of: inner, in: innerBytes, at: base, path: path, kind: kind,
                    payload: { RecordCodec.payload(of: inner, in: innerBytes, file: path, base: base) }, to: body)
            } catch {
                thrown = error
            }
            return .success(())
        }
        if case .failure(var error) = opened {
            error.sequence = record.sequence
            throw error
        }
        if let thrown { throw thrown }
        return true
    }

    /// Lends the payload of `record` (its stored bytes in `bytes`, which start at file offset
    /// `base`): a chunked one chunk by chunk, any other whole as `payload` returns it.
    private func lendPayload(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int, path: String,
        kind: JournalRecord.Kind, payload: () -> Result<[UInt8], JournalError>,
        to body: (_ sequence: UInt64, _ kind: JournalRecord.Kind, _ payload: JournalPayload) throws -> Void
    ) throws {
        if record.chunked {
            let chunks = lent.lendChunks(of: record, in: bytes, at: base, file: path, slots: slots) { payload in
                try body(record.sequence, kind, payload)
            }
            // The chunk's problem first: what `body` did with the record is then void.
            if var problem = chunks.problem {
                problem.sequence = record.sequence
                throw problem
            }
            if let thrown = chunks.thrown { throw thrown }
            return
        }
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
}
