internal import CLZ4

/// The compression history of a version 2 log segment, as its writer keeps it: the raw
/// payloads of the segment's records so far, which a small transaction's LZ4 block may copy
/// from (record flag bit 2, ``JournalFormat/flagHistory``; `Docs/JournalFormat.md`, "History").
///
/// Every record of at most ``JournalFormat/historyRecordLimit`` raw bytes joins the history,
/// whatever its type and however it is stored, in file order; larger records do not. The last
/// ``JournalFormat/historyWindow`` bytes are what a block may refer to. liblz4's streaming
/// compressor (`LZ4_compress_fast_continue`) keeps the window in a ring of raw bytes, indexed as
/// the records are added; when the ring is full, the window is moved to its start
/// (`LZ4_saveDict`, no re-indexing).
///
/// Not thread-safe: the journal touches it only under its state lock.
final class HistoryEncoder: @unchecked Sendable {
    /// The raw bytes the ring holds: the window plus room for records to be added.
    private static let ringSize = 4 * JournalFormat.historyWindow
    /// liblz4's streaming state.
    private let stream: UnsafeMutablePointer<LZ4_stream_t>
    /// The raw bytes of the records added, the latest ending at `end`.
    private let ring: UnsafeMutableRawBufferPointer
    /// Where the next record's raw bytes go in `ring`.
    private var end = 0
    /// The compressed block of the last record added.
    private let scratch: UnsafeMutableRawBufferPointer

    /// An empty history (a segment's start), or nil when liblz4 cannot allocate its state.
    init?() {
        guard let stream = LZ4_createStream() else { return nil }
        self.stream = stream
        ring = .allocate(byteCount: Self.ringSize, alignment: 16)
        scratch = .allocate(byteCount: Int(LZ4_compressBound(Int32(JournalFormat.historyRecordLimit))), alignment: 16)
    }

    /// A history that starts with `window` (at most ``JournalFormat/historyWindow`` bytes): the
    /// end of the raw bytes of a segment's records, when its writer resumes it.
    convenience init?(window: UnsafeRawBufferPointer) {
        self.init()
        let kept = min(window.count, JournalFormat.historyWindow)
        guard kept > 0, let source = window.baseAddress, let target = ring.baseAddress else { return }
        target.copyMemory(from: source + (window.count - kept), byteCount: kept)
        end = kept
        _ = LZ4_loadDict(stream, target.assumingMemoryBound(to: CChar.self), Int32(kept))
    }

    deinit {
        LZ4_freeStream(stream)
        ring.deallocate()
        scratch.deallocate()
    }

    /// Adds a record's raw payload to the history and returns its LZ4 block compressed against
    /// the history before it (valid until the next call), or nil when `payload` does not join
    /// the history (more than ``JournalFormat/historyRecordLimit`` bytes) or is empty.
    ///
    /// Each payload that joins must be added, in file order, whether the caller stores the
    /// block or not: the readers add every such record's raw bytes.
    func add(_ payload: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard !payload.isEmpty, payload.count <= JournalFormat.historyRecordLimit,
            let ringStart = ring.baseAddress, let source = payload.baseAddress, let out = scratch.baseAddress
        else { return nil }
        if end + payload.count > ring.count {
            // The window moves to the ring's start; liblz4 moves its tables' base with it.
            end = Int(
                LZ4_saveDict(stream, ringStart.assumingMemoryBound(to: CChar.self), Int32(JournalFormat.historyWindow)))
        }
        let input = ringStart + end
        input.copyMemory(from: source, byteCount: payload.count)
        let written = LZ4_compress_fast_continue(
            stream, input.assumingMemoryBound(to: CChar.self), out.assumingMemoryBound(to: CChar.self),
            Int32(payload.count), Int32(scratch.count), 1)
        end += payload.count
        // With a destination of LZ4_compressBound bytes, compression cannot fail; were it to, the
        // stream would be undefined, so it starts over from the window as it is.
        guard written > 0 else {
            let kept = min(end, JournalFormat.historyWindow)
            _ = LZ4_loadDict(stream, (ringStart + (end - kept)).assumingMemoryBound(to: CChar.self), Int32(kept))
            return nil
        }
        return UnsafeRawBufferPointer(start: out, count: Int(written))
    }
}

/// The compression history of one segment as a reader rebuilds it: every record of the
/// segment must come through ``withPayload(of:in:at:file:buffer:_:)`` (or ``note(_:in:at:file:)``),
/// in file order, so that a record that uses the history (``JournalFormat/flagHistory``) finds
/// the raw bytes of those before it.
///
/// In a version 1 segment nothing has a history: payloads are decompressed on their own, as
/// ``RecordCodec`` does, and nothing is kept. A record that does not decompress leaves a hole:
/// the history-dependent records after it fail too ("needs the history of record S") until
/// ``JournalFormat/historyWindow`` bytes of good records have pushed the hole out of the window.
///
/// Not `Sendable`: one reader owns it.
final class RecordHistory {
    /// The raw bytes kept: the window and room for the records decompressed after it.
    private static let bufferSize = 4 * JournalFormat.historyWindow
    /// Whether the segment's records may use the history (version 2).
    let enabled: Bool
    /// The raw bytes of the records so far, the latest ending at `count`; nil when disabled.
    private let buffer: UnsafeMutableRawBufferPointer?
    /// The bytes of `buffer` in use.
    private var count = 0
    /// The last record that did not decompress, and how many raw bytes of good records must
    /// still follow before the window no longer holds its hole.
    private var hole: (sequence: UInt64, remaining: Int)?

    /// The keys of sealed records, if the journal has any.
    let keyring: JournalKeyring?

    /// The history at the start of the segment whose header is `header`; `keyring` opens its
    /// sealed records.
    init(header: SegmentHeader, keyring: JournalKeyring? = nil) {
        self.keyring = keyring
        enabled = header.usesHistory
        buffer = enabled ? .allocate(byteCount: Self.bufferSize, alignment: 16) : nil
    }

    deinit { buffer?.deallocate() }

    /// The last ``JournalFormat/historyWindow`` raw bytes (or fewer), when they hold no hole; a
    /// writer resuming the segment starts from them. Nil when they do hold one.
    func window(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard hole == nil else { return false }
        guard let buffer else {
            body(UnsafeRawBufferPointer(start: nil, count: 0))
            return true
        }
        let kept = min(count, JournalFormat.historyWindow)
        body(UnsafeRawBufferPointer(rebasing: buffer[(count - kept)..<count]))
        return true
    }

    /// Decompresses the payload of the next record of the segment and lends it to `body`, or
    /// returns why it does not decompress (`body` is then not called).
    ///
    /// - Parameter bytes: the segment's bytes from file offset `base` on.
    func withPayload(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int = 0, file: String,
        buffer payloadBuffer: ReadBuffer,
        _ body: (UnsafeRawBufferPointer) -> Void
    ) -> JournalError? {
        guard joins(record) else {
            // Not part of the history: decompressed on its own (a history block here is damage).
            return RecordCodec.withPayload(
                of: record, in: bytes, at: base, file: file, buffer: payloadBuffer, keyring: keyring, body)
        }
        switch next(record, in: bytes, at: base, file: file) {
        case .success(let payload):
            body(payload)
            return nil
        case .failure(let error):
            return error
        }
    }

    /// The payload of the next record of the segment, decompressed into a new array.
    func payload(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int = 0, file: String
    ) -> Result<[UInt8], JournalError> {
        guard joins(record) else {
            return RecordCodec.payload(of: record, in: bytes, file: file, base: base, keyring: keyring)
        }
        return next(record, in: bytes, at: base, file: file).map { Array($0) }
    }

    /// Takes in the next record of the segment when its payload is not needed: in a version 2
    /// segment it is decompressed all the same (the records after it may copy from it). Returns
    /// why it does not decompress, when it had to be decompressed.
    @discardableResult
    func note(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int = 0, file: String
    ) -> JournalError? {
        guard joins(record) else { return nil }
        if case .failure(let error) = next(record, in: bytes, at: base, file: file) { return error }
        return nil
    }

    /// Whether `record` joins the history (and is decompressed into it).
    private func joins(_ record: ScannedRecord) -> Bool {
        enabled && !record.sealed && record.rawLength <= JournalFormat.historyRecordLimit
    }

    /// Decompresses the next record, which joins the history, into the history's buffer:
    /// its raw bytes there (valid until the next record), or why it does not decompress.
    private func next(
        _ record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int, file: String
    ) -> Result<UnsafeRawBufferPointer, JournalError> {
        guard let buffer, let bufferStart = buffer.baseAddress else {
            return .failure(RecordCodec.historyProblem(of: record, file: file))
        }
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        let n = record.rawLength
        if count + n > buffer.count {
            let kept = min(count, JournalFormat.historyWindow)
            bufferStart.copyMemory(from: bufferStart + (count - kept), byteCount: kept)
            count = kept
        }
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[count..<(count + n)])
        let problem: String?
        if record.history, let hole {
            problem = "it needs the history of record \(hole.sequence), which does not decompress"
        } else if record.history {
            problem = Self.decodeHistoryBlock(
                stored, into: target, history: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        } else if record.chunked {
            problem = ChunkedPayload.decode(stored, into: target.bindMemory(to: UInt8.self))
        } else if record.compressed {
            problem = LZ4.decompressBlock(stored, into: target.bindMemory(to: UInt8.self)).map { "\($0)" }
        } else {
            if let from = stored.baseAddress, let to = target.baseAddress { to.copyMemory(from: from, byteCount: n) }
            problem = nil
        }
        count += n
        if let problem {
            // The record's bytes are unknown: the hole widens, still named after its first record.
            hole = (hole?.sequence ?? record.sequence, JournalFormat.historyWindow)
            return .failure(RecordCodec.decompressionProblem(of: record, problem, file: file))
        }
        if let open = hole {
            hole = open.remaining > n ? (open.sequence, open.remaining - n) : nil
        }
        return .success(UnsafeRawBufferPointer(target))
    }

    /// Decompresses a history block into `target` (which it must fill exactly), the raw bytes
    /// before it in the segment being `history`; nil, or what is wrong.
    private static func decodeHistoryBlock(
        _ stored: UnsafeRawBufferPointer, into target: UnsafeMutableRawBufferPointer, history: UnsafeRawBufferPointer
    ) -> String? {
        guard let source = stored.baseAddress, !stored.isEmpty else { return "a history block is at least 1 byte" }
        guard let destination = target.baseAddress else { return "empty history block" }
        let window = min(history.count, JournalFormat.historyWindow)
        let dictionary = history.baseAddress.map { $0 + (history.count - window) }
        let decoded = LZ4_decompress_safe_usingDict(
            source.assumingMemoryBound(to: CChar.self), destination.assumingMemoryBound(to: CChar.self),
            Int32(stored.count), Int32(target.count),
            dictionary?.assumingMemoryBound(to: CChar.self), Int32(window))
        if Int(decoded) == target.count { return nil }
        return decoded < 0
            ? "the history block is malformed or copies from before its \(window)-byte history (LZ4_decompress_safe_usingDict returned \(decoded))"
            : "the history block decodes to \(decoded) bytes, but its raw length is \(target.count)"
    }
}
