internal import Dispatch
internal import Synchronization

/// Consecutive clean records of a segment window whose one-block payloads are decompressed
/// together, away from the thread that reads them, before they are lent in order.
///
/// `verify` of a journal of many saves spent a quarter of its time in LZ4, one record after
/// the other on the reading thread. A hand-off to another thread per record would cost a third
/// of the record's decompression, so records are handed over in batches of up to ``rawLimit``
/// decompressed bytes, each decompressed into its own part of one reused buffer (small enough
/// to stay in the cache until the records are read). The walk keeps two batches: while the
/// reader lends one, a helper thread decompresses the next (``startDecoding(_:at:)``); when the
/// reader turns to that batch it decompresses, alongside the helper, the records the helper has
/// not claimed yet (so a helper that the machine's other work keeps off a core costs the reader
/// at most the record it is on, not the batch);
/// the first batch of a window, which nothing precedes, is decompressed on every core at once
/// (``decode(_:at:)``).
///
/// Only records with a one-block or raw payload join a batch, and only in a segment without a
/// history (version 1 or 3): a record that may copy from the ones before it is decompressed
/// after them, in order, by ``RecordHistory``; a chunked one is lent on its own (its chunks are
/// decompressed in parallel already); a sealed one is opened on its own, in order, by the walk. A record that does not decompress keeps
/// its error, which is reported when it is lent, in order, as when it is decompressed alone.
///
/// Not `Sendable`: one reader owns it. While a helper decompresses it, the reader leaves it
/// alone until ``waitForDecoding()`` (which every other method calls first).
final class RecordBatch {
    /// The most decompressed bytes a batch holds.
    static let rawLimit = 1 << 20
    /// The most records a batch holds.
    static let recordLimit = 256
    /// The least decompressed bytes worth splitting between threads; a smaller batch is
    /// decompressed on the calling thread by ``decode(_:at:)``.
    static let parallelMinimum = 64 << 10

    /// The records, in file order.
    private(set) var records: [ScannedRecord] = []
    /// For each record, where its payload is decompressed in the output (nil when raw).
    private var ranges: [Range<Int>?] = []
    /// For each record, why its payload does not decompress, once decompressed: memory of
    /// ``recordLimit`` elements that the decompressing threads write, each its record's.
    private let errors = UnsafeMutableBufferPointer<LZ4Error?>.allocate(capacity: RecordBatch.recordLimit)
    /// The decompressed bytes of the records so far.
    private var rawBytes = 0
    /// The buffer the payloads are decompressed into, reused from batch to batch.
    private let output = ReadBuffer()
    /// `output`'s memory, at least `rawBytes` long once decompressing starts.
    private var memory = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// The helper decompressing the batch, if one is, and the job it works on.
    private var pending: (group: DispatchGroup, job: Job)?

    /// An empty batch.
    init() {
        errors.initialize(repeating: nil)
    }

    /// Waits for a helper still decompressing, then frees the error slots.
    deinit {
        waitForDecoding()
        errors.deinitialize()
        errors.deallocate()
    }

    /// Whether the batch holds no record.
    var isEmpty: Bool { records.isEmpty }

    /// Empties the batch, keeping its storage.
    func removeAll() {
        waitForDecoding()
        for i in records.indices { errors[i] = nil }
        records.removeAll(keepingCapacity: true)
        ranges.removeAll(keepingCapacity: true)
        rawBytes = 0
    }

    /// Whether `record` may join: its payload is raw or one block that fits what is left, and
    /// not sealed (a sealed record is opened on its own, in order, by the walk).
    func admits(_ record: ScannedRecord) -> Bool {
        !record.sealed && !record.chunked && !record.history && records.count < Self.recordLimit
            && (!record.compressed || rawBytes + record.rawLength <= Self.rawLimit)
    }

    /// Adds a record that ``admits(_:)`` accepted.
    func append(_ record: ScannedRecord) {
        waitForDecoding()
        records.append(record)
        if record.compressed {
            ranges.append(rawBytes..<(rawBytes + record.rawLength))
            rawBytes += record.rawLength
        } else {
            ranges.append(nil)
        }
    }

    /// What a thread decompressing the batch needs: the window, the records and where their
    /// payloads go (memory only this job writes until it is waited for).
    private struct Job: @unchecked Sendable {
        /// The window the records lie in.
        let bytes: UnsafeRawBufferPointer
        /// The window's file offset.
        let base: Int
        /// The batch's records.
        let records: [ScannedRecord]
        /// Where each record's payload goes in `memory` (nil when raw).
        let ranges: [Range<Int>?]
        /// The decompressed payloads' memory.
        let memory: UnsafeMutableRawBufferPointer
        /// The batch's error slots.
        let errors: UnsafeMutableBufferPointer<LZ4Error?>
        /// The next record to claim: each is decompressed by whichever thread claims it.
        let claims = Claims()

        /// The claim counter, shared by the threads that decompress the job.
        final class Claims: Sendable {
            /// The index of the next record to claim.
            let next = Atomic<Int>(0)
        }

        /// Decompresses the records no other thread has claimed, one claim at a time.
        func decodeUnclaimed() {
            while true {
                let i = claims.next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard i < records.count else { return }
                decode(i)
            }
        }

        /// Decompresses record `i`'s payload into its range, noting why it does not decompress.
        func decode(_ i: Int) {
            guard let range = ranges[i] else { return }
            let stored = records[i].payloadRange
            errors[i] = LZ4.decompressBlock(
                UnsafeRawBufferPointer(rebasing: bytes[(stored.lowerBound - base)..<(stored.upperBound - base)]),
                into: UnsafeMutableRawBufferPointer(rebasing: memory[range]).bindMemory(to: UInt8.self))
        }
    }

    /// The job for the current records.
    private func job(_ bytes: UnsafeRawBufferPointer, at base: Int) -> Job {
        if memory.count < rawBytes { memory = output.reserve(rawBytes) }
        return Job(bytes: bytes, base: base, records: records, ranges: ranges, memory: memory, errors: errors)
    }

    /// Decompresses the payloads now, split between every core when they are worth it.
    ///
    /// - Parameter bytes: the window the records lie in; `base` is its file offset.
    func decode(_ bytes: UnsafeRawBufferPointer, at base: Int) {
        waitForDecoding()
        guard rawBytes > 0 else { return }
        let job = job(bytes, at: base)
        if rawBytes >= Self.parallelMinimum {
            DispatchQueue.concurrentPerform(iterations: job.records.count) { job.decode($0) }
        } else {
            for i in job.records.indices { job.decode(i) }
        }
    }

    /// Starts decompressing the payloads on a helper thread; the window must stay as it is
    /// until ``waitForDecoding()``, which any use of the batch calls first.
    func startDecoding(_ bytes: UnsafeRawBufferPointer, at base: Int) {
        waitForDecoding()
        guard rawBytes > 0 else { return }
        let job = job(bytes, at: base)
        let group = DispatchGroup()
        pending = (group, job)
        DispatchQueue.global(qos: .userInitiated).async(group: group) { job.decodeUnclaimed() }
    }

    /// Decompresses the records the helper started by ``startDecoding(_:at:)`` has not claimed
    /// yet, then waits for those it has.
    func waitForDecoding() {
        guard let (group, job) = pending else { return }
        job.decodeUnclaimed()
        group.wait()
        pending = nil
    }

    /// Record `i`'s payload: its stored bytes in the window when raw, else what it was
    /// decompressed to or why it does not decompress. Valid until the batch changes.
    func payload(_ i: Int, in bytes: UnsafeRawBufferPointer, at base: Int) -> Result<UnsafeRawBufferPointer, LZ4Error> {
        waitForDecoding()
        if let error = errors[i] { return .failure(error) }
        guard let range = ranges[i] else {
            let stored = records[i].payloadRange
            return .success(
                UnsafeRawBufferPointer(rebasing: bytes[(stored.lowerBound - base)..<(stored.upperBound - base)]))
        }
        return .success(UnsafeRawBufferPointer(rebasing: memory[range]))
    }
}
