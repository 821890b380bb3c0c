extension ChunkedPayload {
    /// Checks a chunked payload's chunk table against the record's raw length and returns
    /// where each chunk starts in `stored` (`n + 1` offsets, the last `stored.count`), or what
    /// is wrong, as ``decode(_:into:)`` says it.
    static func chunkStarts(_ stored: UnsafeRawBufferPointer, rawLength raw: Int) -> Result<[Int], ChunkProblem> {
        let expected = (raw + JournalFormat.chunkSize - 1) / JournalFormat.chunkSize
        guard stored.count >= 4 else { return .failure(ChunkProblem("chunk table cut short (\(stored.count) bytes)")) }
        let n = Int(stored.littleEndian(at: 0, as: UInt32.self))
        guard n == expected else { return .failure(ChunkProblem("\(n) chunks where \(raw) bytes take \(expected)")) }
        let table = 4 + 4 * n
        guard stored.count >= table else {
            return .failure(ChunkProblem("chunk table of \(n) chunks cut short (\(stored.count) bytes)"))
        }
        var starts = [Int](repeating: 0, count: n + 1)
        starts[0] = table
        for i in 0..<n {
            let length = Int(stored.littleEndian(at: 4 + 4 * i, as: UInt32.self))
            let rawLength = rawCount(of: i, in: raw)
            guard length > 0, length <= rawLength else {
                return .failure(ChunkProblem("chunk \(i) stored in \(length) bytes for \(rawLength) raw bytes"))
            }
            starts[i + 1] = starts[i] + length
            guard starts[i + 1] <= stored.count else {
                return .failure(ChunkProblem("chunk \(i) runs past the payload's \(stored.count) bytes"))
            }
        }
        guard starts[n] == stored.count else {
            return .failure(ChunkProblem("chunks end at byte \(starts[n]) of \(stored.count)"))
        }
        return .success(starts)
    }

    /// Decodes chunk `i` (stored at `stored[starts[i]..<starts[i + 1]]`) into `target`, which
    /// holds exactly its raw bytes: nil, or what ``decode(_:into:)`` says of it.
    static func decodeChunk(
        _ i: Int, _ stored: UnsafeRawBufferPointer, starts: [Int], into target: UnsafeMutableBufferPointer<UInt8>
    ) -> String? {
        let source = UnsafeRawBufferPointer(rebasing: stored[starts[i]..<starts[i + 1]])
        if source.count == target.count {
            UnsafeMutableRawBufferPointer(target).copyMemory(from: source)
            return nil
        }
        return LZ4.decompressBlock(source, into: target).map { "chunk \(i) does not decompress: \($0)" }
    }
}

/// Why a chunked payload does not decode (``ChunkedPayload``).
struct ChunkProblem: Error, Sendable {
    /// What is wrong, naming the chunk or the table.
    var message: String
    /// A problem saying `message`.
    init(_ message: String) { self.message = message }
}
