extension JournalPayload {
    /// Lends the chunked payload of `record` to `body` as this payload, chunk by chunk as its
    /// chunks are decompressed into `slots`, then decompresses what `body` left unread, so
    /// that a bad chunk after it is found too (as when the payload is decompressed whole), and
    /// ends the stream's helper thread. The one way a chunked payload is lent, by every walk.
    ///
    /// Chunked payloads (4 MiB and more) never join a segment's history: their stored bytes
    /// alone decode them.
    ///
    /// - Parameter bytes: the segment file from offset `base` on, the record's stored payload
    ///   among them.
    /// - Parameter file: the segment's path or name, for the problem.
    /// - Returns: the problem of the chunk table or a chunk that does not decompress (`body`
    ///   is not called when the table does not), its sequence unset; and what `body` threw.
    func lendChunks(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int, file: String, slots: ReadBuffer,
        _ body: (JournalPayload) throws -> Void
    ) -> (problem: JournalError?, thrown: (any Error)?) {
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        let starts: [Int]
        switch ChunkedPayload.chunkStarts(stored, rawLength: record.rawLength) {
        case .success(let found): starts = found
        case .failure(let problem):
            return (RecordCodec.decompressionProblem(of: record, problem.message, file: file), nil)
        }
        let memory = slots.reserve(ChunkStream.slotCount * JournalFormat.chunkSize)
        reset(
            chunks: ChunkStream(stored: stored, starts: starts, rawLength: record.rawLength, slots: memory),
            rawLength: record.rawLength)
        defer { reset(pieces: []) }
        var thrown: (any Error)?
        do { try body(self) } catch { thrown = error }
        guard finish() else {
            return (
                RecordCodec.decompressionProblem(of: record, failure ?? "a chunk does not decompress", file: file),
                thrown
            )
        }
        return (nil, thrown)
    }
}
