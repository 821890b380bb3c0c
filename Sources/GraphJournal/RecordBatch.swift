internal import Dispatch

/// Consecutive clean records of a segment window whose one-block payloads are decompressed
/// together, on every core, before they are lent in order (issue 6).
///
/// `verify` of a journal of many saves spent a quarter of its time in LZ4, one record after
/// the other on one core. A hand-off to another thread per record would cost a third of the
/// record's decompression, so the records of up to ``rawLimit`` decompressed bytes are
/// decompressed at once by `concurrentPerform`, each into its own part of one reused buffer
/// (small enough to stay in the cache until the records are read).
///
/// Only records with a one-block or raw payload join a batch; a chunked one is lent on its own
/// (its chunks are decompressed in parallel already). A record that does not decompress keeps
/// its error, which is reported when it is lent, in order, as when it is decompressed alone.
///
/// Not `Sendable`: one reader owns it.
struct RecordBatch {
    /// The most decompressed bytes a batch holds.
    static let rawLimit = 1 << 20
    /// The most records a batch holds.
    static let recordLimit = 256
    /// The least decompressed bytes worth handing to other threads; a smaller batch is
    /// decompressed on the calling thread.
    static let parallelMinimum = 64 << 10

    /// The records, in file order.
    private(set) var records: [ScannedRecord] = []
    /// For each record, where its payload was decompressed in `output` (nil when raw).
    private var ranges: [Range<Int>?] = []
    /// For each record, why its payload does not decompress, once ``decode(_:at:)`` ran.
    private var errors: [LZ4Error?] = []
    private var rawBytes = 0
    private let output: ReadBuffer
    private var memory = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// - Parameter output: the buffer the payloads are decompressed into, reused.
    init(output: ReadBuffer) {
        self.output = output
    }

    /// Empties the batch, keeping its storage.
    mutating func removeAll() {
        records.removeAll(keepingCapacity: true)
        ranges.removeAll(keepingCapacity: true)
        errors.removeAll(keepingCapacity: true)
        rawBytes = 0
    }

    /// Whether `record` may join: its payload is raw or one block that fits what is left.
    func admits(_ record: ScannedRecord) -> Bool {
        !record.chunked && records.count < Self.recordLimit && (!record.compressed || rawBytes + record.rawLength <= Self.rawLimit)
    }

    /// Adds a record that ``admits(_:)`` accepted.
    mutating func append(_ record: ScannedRecord) {
        records.append(record)
        if record.compressed {
            ranges.append(rawBytes..<(rawBytes + record.rawLength))
            rawBytes += record.rawLength
        } else {
            ranges.append(nil)
        }
        errors.append(nil)
    }

    /// Decompresses the compressed records' payloads, on every core when they are worth it.
    ///
    /// - Parameter bytes: the window the records lie in; `base` is its file offset.
    mutating func decode(_ bytes: UnsafeRawBufferPointer, at base: Int) {
        guard rawBytes > 0 else { return }
        if memory.count < rawBytes { memory = output.reserve(rawBytes) }
        let compressed = records.indices.filter { ranges[$0] != nil }
        if compressed.count < 2 || rawBytes < Self.parallelMinimum {
            for i in compressed { errors[i] = decode(i, bytes, at: base) }
            return
        }
        var found = [LZ4Error?](repeating: nil, count: compressed.count)
        found.withUnsafeMutableBufferPointer { found in
            let shared = UncheckedSendable((batch: self, found: found, bytes: bytes, compressed: compressed))
            DispatchQueue.concurrentPerform(iterations: compressed.count) { n in
                let (batch, found, bytes, compressed) = shared.value
                found[n] = batch.decode(compressed[n], bytes, at: base)
            }
        }
        for (n, i) in compressed.enumerated() { errors[i] = found[n] }
    }

    /// Decompresses record `i`'s payload into its range of the output.
    private func decode(_ i: Int, _ bytes: UnsafeRawBufferPointer, at base: Int) -> LZ4Error? {
        guard let range = ranges[i] else { return nil }
        let stored = records[i].payloadRange
        return LZ4.decompressBlock(
            UnsafeRawBufferPointer(rebasing: bytes[(stored.lowerBound - base)..<(stored.upperBound - base)]),
            into: UnsafeMutableRawBufferPointer(rebasing: memory[range]).bindMemory(to: UInt8.self))
    }

    /// Record `i`'s payload: its stored bytes in the window when raw, else what it was
    /// decompressed to or why it does not decompress. Valid until the batch changes.
    func payload(_ i: Int, in bytes: UnsafeRawBufferPointer, at base: Int) -> Result<UnsafeRawBufferPointer, LZ4Error> {
        if let error = errors[i] { return .failure(error) }
        guard let range = ranges[i] else {
            let stored = records[i].payloadRange
            return .success(UnsafeRawBufferPointer(rebasing: bytes[(stored.lowerBound - base)..<(stored.upperBound - base)]))
        }
        return .success(UnsafeRawBufferPointer(rebasing: memory[range]))
    }
}

/// Hands values that are not `Sendable` (buffer pointers, a batch read by every iteration and
/// written by none) to `concurrentPerform`'s iterations, each of which writes only its own
/// element.
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
