internal import Dispatch
internal import Synchronization

/// A record payload that is cut into compressed chunks while it is still being written.
///
/// A save of a million objects is a payload of about 60 MB. Built whole and then compressed,
/// it was written into 60 MB of fresh memory, and each fresh 4 KiB page costs ~1.4 µs on the
/// VM this is measured on (page faults were a fifth of a 1M save, perf). A stream holds at most
/// a few MiB of raw bytes: once it has ``JournalFormat/chunkedThreshold`` bytes, which makes
/// the payload chunked (`Docs/JournalFormat.md`, "Chunks"), every whole chunk of
/// ``JournalFormat/chunkSize`` bytes is handed to another core to compress while the writer
/// goes on. The stored bytes are exactly those of ``ChunkedPayload/append(_:to:)``.
///
/// The raw bytes waiting for a core stay bounded when the cores are busy (other processes,
/// a loaded machine): once ``maxQueuedChunks`` cut chunks wait, the writer compresses the oldest
/// itself before it goes on, so a save that outruns the pool slows down to its pace instead of
/// holding its whole raw payload in queued chunks (a 1M-object save: up to 57 MiB). Each
/// compressed chunk is kept in a buffer of its own size, not of the 1 MiB it was compressed
/// into.
///
/// ```swift
/// var stream = PayloadStream()
/// for row in rows {
///     encode(row, into: &stream.bytes)
///     stream.cutIfFull()
/// }
/// try journal.append(stream, schema: schemaBytes)
/// ```
///
/// One writer uses a stream; copies of it share the chunks already cut.
public struct PayloadStream: Sendable {
    /// The bytes written and not yet cut into chunks; the writer appends here. Until the stream
    /// reaches ``JournalFormat/chunkedThreshold`` bytes, this is the whole payload.
    public var bytes: [UInt8] = []
    /// The raw bytes already cut into chunks.
    private var cutCount = 0
    /// The raw bytes of a chunk: ``cutIfFull()`` has work only when ``bytes`` holds at least
    /// this many.
    public static let chunkSize = JournalFormat.chunkSize
    /// The compressed chunks, in order, filled by other threads; made at the first cut (most
    /// saves are small and never cut).
    private var chunks: Chunks?
    /// The most cut chunks that wait for a core at once: past this many, the writer compresses
    /// the oldest waiting chunk itself. Four chunks keep both cores of a small machine busy
    /// while the writer encodes the next one.
    static let maxQueuedChunks = 4

    /// The most chunks that were queued at once, waiting for a core, in this stream so far
    /// (never more than ``maxQueuedChunks``); 0 when the stream never cut a chunk.
    var mostQueuedChunks: Int { chunks?.mostQueued ?? 0 }
    /// How many of the chunks cut so far the writer compressed itself because
    /// ``maxQueuedChunks`` were waiting.
    var chunksCompressedByWriter: Int { chunks?.compressedByWriter ?? 0 }

    /// Whether cut chunks are handed to Dispatch's pool; without it the writer compresses
    /// every chunk itself (tests that count what the writer compresses).
    private let compressesOnPool: Bool

    /// A stream with room for `capacity` bytes before its first cut.
    public init(capacity: Int = 0) {
        self.init(capacity: capacity, compressesOnPool: true)
    }

    init(capacity: Int, compressesOnPool: Bool) {
        self.compressesOnPool = compressesOnPool
        bytes.reserveCapacity(min(capacity, JournalFormat.chunkedThreshold + JournalFormat.chunkSize))
    }

    /// The payload's length so far.
    public var count: Int { cutCount + bytes.count }

    /// Whether ``cutIfFull()`` would hand chunks off now.
    private var isFull: Bool { bytes.count >= cutThreshold }

    /// ``bytes``'s length at which whole chunks are cut off.
    private var cutThreshold: Int { cutCount == 0 ? JournalFormat.chunkedThreshold : JournalFormat.chunkSize }

    /// Cuts the whole chunks off ``bytes`` and starts compressing them, once there are enough
    /// (``JournalFormat/chunkedThreshold`` bytes at first, then one chunk). Cheap to call often:
    /// a writer calls it between values.
    public mutating func cutIfFull() {
        if isFull { cut() }
    }

    private mutating func cut() {
        let size = JournalFormat.chunkSize
        let whole = bytes.count / size
        guard whole > 0 else { return }
        // The full buffer goes to the compressing thread; the writer goes on in a new one that
        // starts with the bytes past the last whole chunk (less than one value's worth).
        var next: [UInt8] = []
        next.reserveCapacity(2 * size)
        bytes.withUnsafeBytes { next.append(contentsOf: $0[(whole * size)...]) }
        let full = bytes
        bytes = next
        let chunks = self.chunks ?? Chunks(usesPool: compressesOnPool)
        self.chunks = chunks
        for i in 0..<whole { chunks.compress(full, range: (i * size)..<((i + 1) * size)) }
        cutCount += whole * size
    }

    /// Finishes the stream: nil when it never reached the chunked size (``bytes`` is then the
    /// whole payload), else the stored form of the payload's chunks, waiting for the compressions
    /// still running.
    func finish() -> Stored? {
        guard cutCount > 0, let chunks else { return nil }
        if !bytes.isEmpty { chunks.compress(bytes, range: 0..<bytes.count) }
        let blocks = chunks.wait()
        let raw = cutCount + bytes.count
        var table: [UInt8] = []
        table.reserveCapacity(4 + 4 * blocks.count)
        table.appendLittleEndian(UInt32(blocks.count))
        for block in blocks { table.appendLittleEndian(UInt32(block.count)) }
        return Stored(table: table, blocks: blocks, rawCount: raw)
    }

    /// The stored bytes of a chunked payload: `table` (`n` and the stored sizes) followed by the
    /// `blocks`.
    struct Stored {
        var table: [UInt8]
        var blocks: [[UInt8]]
        var rawCount: Int

        var storedCount: Int { blocks.reduce(table.count) { $0 + $1.count } }

        /// The payload itself, decoded again: for the rare payload that chunks do not shrink,
        /// which the format stores raw (`Docs/JournalFormat.md`, "Chunks").
        func rawPayload() -> [UInt8]? {
            var stored = table
            for block in blocks { stored.append(contentsOf: block) }
            var raw = [UInt8](repeating: 0, count: rawCount)
            let problem = stored.withUnsafeBytes { s in
                raw.withUnsafeMutableBufferPointer { ChunkedPayload.decode(s, into: $0) }
            }
            return problem == nil ? raw : nil
        }
    }

    /// The chunks being compressed, by index. Each cut chunk is queued here and a block is
    /// sent to Dispatch's pool to compress one queued chunk; at the end the writer compresses
    /// whatever is still queued itself and waits only for chunks a pool thread has taken. So a
    /// save never waits for the pool to find a thread (a save running on a pool thread, as a
    /// Swift task may, would otherwise wait for its own pool).
    private final class Chunks: Sendable {
        private struct Job {
            let index: Int
            let buffer: [UInt8]
            let range: Range<Int>
            /// Room for the chunk's stored form (at most its own size), allocated by the writer
            /// (see ``trimFinished()``).
            var output: [UInt8]
        }

        private struct State {
            /// The chunks cut and not yet taken, oldest first: a handful (the writer keeps it to
            /// ``PayloadStream/maxQueuedChunks``), each holding its buffer until taken.
            var queued: [Job] = []
            var next = 0
            var blocks: [Int: [UInt8]] = [:]
            /// The blocks still in the chunk-sized room they were compressed into.
            var untrimmed: [Int] = []
            var mostQueued = 0
            var compressedByWriter = 0
        }

        private let state = Mutex(State())
        /// Signalled each time a pool thread finishes a chunk.
        private let finished = DispatchSemaphore(value: 0)
        private let usesPool: Bool

        init(usesPool: Bool) { self.usesPool = usesPool }

        /// Queues `buffer[range]`, the next chunk, and asks the pool to compress it; then, while
        /// more than ``PayloadStream/maxQueuedChunks`` chunks wait, compresses the oldest
        /// waiting one on the calling (writer's) thread.
        func compress(_ buffer: [UInt8], range: Range<Int>) {
            var output: [UInt8] = []
            output.reserveCapacity(range.count)
            state.withLock { s in
                s.queued.append(Job(index: s.next, buffer: buffer, range: range, output: output))
                s.next += 1
            }
            if usesPool {
                DispatchQueue.global().async { [self] in
                    guard var job = take() else { return }  // the writer took it
                    finish(&job)
                    finished.signal()
                }
            }
            while var job = takeIfOverLimit() { finish(&job) }
            state.withLock { s in s.mostQueued = max(s.mostQueued, s.queued.count) }
            trimFinished()
        }

        /// Copies each block finished since the last call out of its chunk-sized room into an
        /// array of its own size. Called by the writer only, so that every buffer the stream
        /// keeps is allocated by the writer's thread: glibc gives each thread that allocates an
        /// arena of its own, and memory a pool thread allocated and freed stays resident in that
        /// thread's arena (`malloc_trim` returns only the main arena's top), 10 MB after a
        /// million-object save. The pool threads only write into rooms the writer allocated.
        private func trimFinished() {
            state.withLock { s in
                for i in s.untrimmed {
                    guard let block = s.blocks[i] else { continue }
                    s.blocks[i] = [UInt8](unsafeUninitializedCapacity: block.count) { out, initialized in
                        block.withUnsafeBytes { bytes in
                            if let base = bytes.baseAddress, let destination = out.baseAddress {
                                UnsafeMutableRawPointer(destination).copyMemory(from: base, byteCount: bytes.count)
                            }
                        }
                        initialized = block.count
                    }
                }
                s.untrimmed.removeAll()
            }
        }

        var mostQueued: Int { state.withLock { $0.mostQueued } }
        var compressedByWriter: Int { state.withLock { $0.compressedByWriter } }

        /// The oldest waiting job when more than ``PayloadStream/maxQueuedChunks`` wait.
        private func takeIfOverLimit() -> Job? {
            state.withLock { s in
                guard s.queued.count > PayloadStream.maxQueuedChunks else { return nil }
                s.compressedByWriter += 1
                return Self.takeFirst(&s)
            }
        }

        /// Compresses the queued chunks left, waits for those being compressed, and returns
        /// them all in order.
        func wait() -> [[UInt8]] {
            while var job = take() { finish(&job) }
            while true {
                let (done, total) = state.withLock { ($0.blocks.count, $0.next) }
                if done == total { break }
                finished.wait()
            }
            trimFinished()
            return state.withLock { s in (0..<s.next).map { s.blocks[$0] ?? [] } }
        }

        private func take() -> Job? {
            state.withLock { s in Self.takeFirst(&s) }
        }

        /// Removes and returns the oldest waiting job: once it is compressed, nothing holds its
        /// buffer any more.
        private static func takeFirst(_ s: inout State) -> Job? {
            s.queued.isEmpty ? nil : s.queued.removeFirst()
        }

        private func finish(_ job: inout Job) {
            // Taken out of the job, so that the room has one owner and is written in place.
            var output: [UInt8] = []
            swap(&output, &job.output)
            job.buffer.withUnsafeBytes { all in
                let chunk = UnsafeRawBufferPointer(rebasing: all[job.range])
                // Kept raw unless LZ4 makes it strictly shorter, as ChunkedPayload.append. The
                // room holds the chunk's size, so neither form reallocates it here.
                if LZ4.appendBlock(chunk, to: &output, limit: chunk.count - 1) == 0 {
                    output.removeAll(keepingCapacity: true)
                    output.append(contentsOf: chunk)
                }
            }
            state.withLock { s in
                s.blocks[job.index] = output
                s.untrimmed.append(job.index)
            }
        }
    }
}
