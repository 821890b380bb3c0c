internal import Dispatch

/// The chunked form of a large record payload (record flag bit 1, ``JournalFormat/flagChunked``).
///
/// One LZ4 block is compressed and decompressed by one core. A save of a million objects is a
/// payload of about 60 MB, and LZ4 took a third of the save and of a `verify` of it (callgrind,
/// perf). A payload of at least ``JournalFormat/chunkedThreshold`` bytes is therefore cut into
/// chunks of ``JournalFormat/chunkSize`` raw bytes (the last shorter), compressed and
/// decompressed independently, in parallel:
///
/// ```
/// u32 n                       number of chunks = ceil(rawLength / chunkSize)
/// u32 stored[0] … stored[n-1] bytes each chunk takes below
/// chunk 0 … chunk n-1         chunk i: one LZ4 block of raw bytes [i·chunkSize, …) when
///                             stored[i] is less than their count, else those bytes raw
/// ```
///
/// The record's CRC covers all of it, as for any payload.
enum ChunkedPayload {
    /// Appends `payload` in chunked form to `out` and returns the bytes appended, or returns
    /// nil (appending nothing) when that form would not be smaller than `payload`.
    static func append(_ payload: UnsafeRawBufferPointer, to out: inout [UInt8]) -> Int? {
        let chunkSize = JournalFormat.chunkSize
        let n = (payload.count + chunkSize - 1) / chunkSize
        guard n > 0 else { return nil }
        // Each chunk compressed on whichever core is free, into a block of its own.
        var blocks = [[UInt8]](repeating: [], count: n)
        blocks.withUnsafeMutableBufferPointer { slots in
            let shared = Unchecked((slots, payload))
            DispatchQueue.concurrentPerform(iterations: n) { i in
                let (slots, payload) = shared.value
                let chunk = UnsafeRawBufferPointer(
                    rebasing: payload[(i * chunkSize)..<min((i + 1) * chunkSize, payload.count)])
                var block: [UInt8] = []
                block.reserveCapacity(chunk.count)
                // else: stored raw
                if LZ4.appendBlock(chunk, to: &block, limit: chunk.count - 1) > 0 { slots[i] = block }
            }
        }
        var total = 4 + 4 * n
        for i in 0..<n { total += blocks[i].isEmpty ? rawCount(of: i, in: payload.count) : blocks[i].count }
        guard total < payload.count else { return nil }
        out.reserveCapacity(out.count + total)
        out.appendLittleEndian(UInt32(n))
        for i in 0..<n {
            out.appendLittleEndian(UInt32(blocks[i].isEmpty ? rawCount(of: i, in: payload.count) : blocks[i].count))
        }
        for i in 0..<n {
            if blocks[i].isEmpty {
                out.append(
                    contentsOf: UnsafeRawBufferPointer(
                        rebasing: payload[(i * chunkSize)..<(i * chunkSize + rawCount(of: i, in: payload.count))]))
            } else {
                out.append(contentsOf: blocks[i])
            }
        }
        return total
    }

    /// Decodes a chunked payload into `destination`, which it must fill exactly (the record's
    /// raw length). Returns nil on success, else what is wrong, naming the first bad chunk.
    static func decode(_ stored: UnsafeRawBufferPointer, into destination: UnsafeMutableBufferPointer<UInt8>) -> String?
    {
        let starts: [Int]
        switch chunkStarts(stored, rawLength: destination.count) {
        case .success(let found): starts = found
        case .failure(let problem): return problem.message
        }
        let n = starts.count - 1
        var errors = [String?](repeating: nil, count: n)
        errors.withUnsafeMutableBufferPointer { errors in
            let shared = Unchecked((errors, stored, destination, starts))
            DispatchQueue.concurrentPerform(iterations: n) { i in
                let (errors, stored, destination, starts) = shared.value
                let lower = i * JournalFormat.chunkSize
                let target = UnsafeMutableBufferPointer(
                    rebasing: destination[lower..<(lower + rawCount(of: i, in: destination.count))])
                errors[i] = decodeChunk(i, stored, starts: starts, into: target)
            }
        }
        return errors.lazy.compactMap { $0 }.first
    }

    /// The raw bytes of chunk `i` of a payload of `count` bytes.
    static func rawCount(of i: Int, in count: Int) -> Int {
        min(JournalFormat.chunkSize, count - i * JournalFormat.chunkSize)
    }
}

/// Hands values that are not `Sendable` (buffer pointers) to `concurrentPerform`'s iterations,
/// each of which touches only its own part of them (a chunk, a sealed unit).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
