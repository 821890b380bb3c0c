internal import Dispatch
internal import Synchronization

/// Lends a chunked payload's raw bytes one chunk at a time, each decompressed into
/// one of a few reused 1 MiB slots, so that a payload of tens of MB is never materialized.
///
/// Materializing it cost more than checking it: the kernel zeroes every fresh 4 KiB page the
/// decompression first touches (about 1.4 µs a page on the reference VM, 20 ms for a 56 MB
/// payload), while the slots are faulted in once and then stay in the cache. The chunks are
/// claimed in order, at most ``slotCount`` ahead of the one the reader holds, by whichever is
/// free: one helper thread that decompresses ahead of the reader, or the reader (the caller of
/// ``next()``), when the chunk it needs is not claimed yet or, rather than wait while the
/// helper finishes it, a later one. On two cores both are busy until the end.
///
/// The first chunk that does not decompress ends the stream (``failure``); the chunks after it
/// are not looked at, as ``ChunkedPayload/decode(_:into:)`` names the first bad chunk. The
/// stored bytes and the slots must stay valid until the stream has ended (``finish()``): the
/// helper thread reads and writes them until then.
///
/// Not `Sendable`: one reader owns it; only the ``Shared`` state crosses to the helper.
final class ChunkStream {
    /// The slots: the chunk the reader holds and those decompressed ahead of it.
    static let slotCount = 4

    /// What the helper thread needs: the stored chunks and the slots (raw memory it touches
    /// only for the chunks it claims under ``Shared/state``'s lock).
    private struct Work: @unchecked Sendable {
        /// The record's stored payload: chunk table, then chunks.
        let stored: UnsafeRawBufferPointer
        /// Where each chunk starts in `stored`, and where the last ends.
        let starts: [Int]
        /// The payload's decompressed length.
        let rawLength: Int
        /// ``ChunkStream/slotCount`` slots of ``JournalFormat/chunkSize`` bytes.
        let slots: UnsafeMutableRawBufferPointer

        /// How many chunks the payload has.
        var chunkCount: Int { starts.count - 1 }

        /// Decompresses chunk `i` into its slot: nil, or what is wrong with it.
        func decode(_ i: Int) -> String? {
            let lower = (i % ChunkStream.slotCount) * JournalFormat.chunkSize
            let target = UnsafeMutableRawBufferPointer(
                rebasing: slots[lower..<(lower + ChunkedPayload.rawCount(of: i, in: rawLength))])
            return ChunkedPayload.decodeChunk(i, stored, starts: starts, into: target.bindMemory(to: UInt8.self))
        }

        /// The bytes chunk `i` was decompressed into.
        func bytes(of i: Int) -> UnsafeRawBufferPointer {
            let lower = (i % ChunkStream.slotCount) * JournalFormat.chunkSize
            return UnsafeRawBufferPointer(
                rebasing: slots[lower..<(lower + ChunkedPayload.rawCount(of: i, in: rawLength))])
        }
    }

    /// The state the reader and the helper share.
    private final class Shared: Sendable {
        /// What the lock guards.
        struct State {
            /// The next chunk to be claimed (by the helper or the reader): chunks are claimed
            /// in order, so chunks `released..<nextClaim` are being or have been decompressed.
            var nextClaim = 0
            /// The chunk the reader holds: those before it are done with, their slots free.
            var released = 0
            /// The helper must stop claiming (the stream ended or a chunk failed).
            var stop = false
            /// For each slot, the chunk the helper last finished in it, and its problem.
            var finished = [Int](repeating: -1, count: ChunkStream.slotCount)
            var problems = [String?](repeating: nil, count: ChunkStream.slotCount)
        }

        /// The claims and finished chunks, under one lock.
        let state = Mutex(State())
        /// Signalled when the reader frees a slot or stops the helper (the helper re-checks).
        let wake = DispatchSemaphore(value: 0)
        /// Signalled when the helper finishes a chunk (the reader re-checks).
        let ready = DispatchSemaphore(value: 0)
        /// Signalled once when the helper has returned.
        let exited = DispatchSemaphore(value: 0)
    }

    /// The stored chunks and the slots.
    private let work: Work
    /// The state shared with the helper.
    private let shared = Shared()
    /// The chunk the next ``next()`` lends.
    private var nextChunk = 0
    /// Whether the helper was started and has not been stopped.
    private var helperRunning = false
    /// Whether the stream ended: every chunk lent, one failed, or ``finish()`` ran.
    private var ended = false
    /// Why the stream ended early: the first chunk that does not decompress.
    private(set) var failure: String?

    /// - Parameter stored: the record's stored payload.
    /// - Parameter starts: where its chunks start (``ChunkedPayload/chunkStarts(_:rawLength:)``).
    /// - Parameter slots: at least ``slotCount`` × ``JournalFormat/chunkSize`` bytes.
    init(stored: UnsafeRawBufferPointer, starts: [Int], rawLength: Int, slots: UnsafeMutableRawBufferPointer) {
        precondition(slots.count >= Self.slotCount * JournalFormat.chunkSize, "ChunkStream: slots too small")
        work = Work(stored: stored, starts: starts, rawLength: rawLength, slots: slots)
    }

    /// Stops the helper if the stream was dropped before it ended.
    deinit { stopHelper() }

    /// The next chunk's raw bytes, valid until the next call; nil once every chunk was lent
    /// or at the first chunk that does not decompress (then ``failure`` says why).
    func next() -> UnsafeRawBufferPointer? {
        guard !ended else { return nil }
        let k = nextChunk
        guard k < work.chunkCount else {
            end()
            return nil
        }
        if !helperRunning && k + 1 < work.chunkCount {
            helperRunning = true
            let work = work, shared = shared
            DispatchQueue.global(qos: .userInitiated).async { Self.help(work, shared) }
        }
        // Chunk k - 1, lent last, is done with: its slot is free.
        shared.state.withLock { $0.released = k }
        if helperRunning { shared.wake.signal() }
        var problem: String?
        wait: while true {
            enum Step {
                case take(String?)
                case decode
                case decodeAhead(Int)
                case wait
            }
            let step = shared.state.withLock { s -> Step in
                if s.finished[k % Self.slotCount] == k { return .take(s.problems[k % Self.slotCount]) }
                if s.nextClaim == k {
                    s.nextClaim += 1
                    return .decode
                }
                // The helper is decompressing chunk k: decompress a later one meanwhile, rather
                // than wait (the reader is then not idle when the helper is the slower one).
                if !s.stop && s.nextClaim < work.chunkCount && s.nextClaim - s.released < Self.slotCount {
                    s.nextClaim += 1
                    return .decodeAhead(s.nextClaim - 1)
                }
                return .wait
            }
            switch step {
            case .take(let found): problem = found
            case .decode: problem = work.decode(k)
            case .decodeAhead(let i):
                Self.publish(i, problem: work.decode(i), shared)
                continue wait
            case .wait:
                shared.ready.wait()
                continue wait
            }
            break
        }
        if let problem {
            failure = problem
            end()
            return nil
        }
        nextChunk = k + 1
        return work.bytes(of: k)
    }

    /// Lends (decompresses) the chunks not lent yet; true when every chunk decompressed.
    /// The stored bytes and slots are not touched after it returns.
    func finish() -> Bool {
        while next() != nil {}
        return failure == nil
    }

    /// Ends the stream: no chunk is lent after it, and the helper has returned.
    private func end() {
        ended = true
        stopHelper()
    }

    /// Tells the helper to stop claiming and waits until it has returned.
    private func stopHelper() {
        guard helperRunning else { return }
        shared.state.withLock { $0.stop = true }
        shared.wake.signal()
        shared.exited.wait()
        helperRunning = false
    }

    /// The helper thread: claims the next chunk while it has a free slot, decompresses it and
    /// says so, until every chunk is claimed, one fails, or the reader stops it.
    private static func help(_ work: Work, _ shared: Shared) {
        defer { shared.exited.signal() }
        while true {
            enum Step {
                case decode(Int)
                case wait, exit
            }
            let step = shared.state.withLock { s -> Step in
                if s.stop || s.nextClaim >= work.chunkCount { return .exit }
                if s.nextClaim - s.released >= slotCount { return .wait }
                s.nextClaim += 1
                return .decode(s.nextClaim - 1)
            }
            switch step {
            case .exit: return
            case .wait: shared.wake.wait()
            case .decode(let i):
                publish(i, problem: work.decode(i), shared)
                shared.ready.signal()
            }
        }
    }

    /// Records that chunk `i` was decompressed ahead of the reader, in its slot, with its
    /// problem if any (which stops further claims: the chunks after it are not needed).
    private static func publish(_ i: Int, problem: String?, _ shared: Shared) {
        shared.state.withLock { s in
            s.finished[i % slotCount] = i
            s.problems[i % slotCount] = problem
            if problem != nil { s.stop = true }
        }
    }
}
