import Foundation
import Testing

@testable import GraphJournal

/// A ``PayloadStream`` holds a bounded part of a large payload raw: at most
/// ``PayloadStream/maxQueuedChunks`` cut chunks wait for a core, whatever the pool's pace (past
/// that the writer compresses the oldest itself), and each compressed chunk is kept at its own
/// size. The stored bytes stay those of the whole payload compressed in chunks.
@Suite struct PayloadStreamBoundTests {
    /// Writes `payload` into `stream` as a save does: small appends, `cutIfFull()` between them.
    static func write(_ payload: [UInt8], into stream: inout PayloadStream) {
        var at = 0
        while at < payload.count {
            let end = min(at + 65_536, payload.count)
            stream.bytes.append(contentsOf: payload[at..<end])
            stream.cutIfFull()
            at = end
        }
    }

    /// The stored bytes of `payload` chunked in one go (`ChunkedPayload.append`).
    static func chunkedWhole(_ payload: [UInt8]) -> [UInt8] {
        var stored: [UInt8] = []
        _ = payload.withUnsafeBytes { ChunkedPayload.append($0, to: &stored) }
        return stored
    }

    /// The stored bytes a finished stream's chunks make: the table, then the blocks.
    static func storedBytes(_ stored: PayloadStream.Stored) -> [UInt8] {
        stored.blocks.reduce(stored.table) { $0 + $1 }
    }

    @Test func aWriterThatOutrunsThePoolCompressesTheChunksPastTheBoundItself() throws {
        // No pool at all: the slowest pool there is. 24 chunks are cut while the payload is
        // written; only four may wait, so the writer compresses every one past the fourth.
        let chunks = 24
        let raw = payload(1, count: chunks * JournalFormat.chunkSize)
        var stream = PayloadStream(capacity: raw.count, compressesOnPool: false)
        Self.write(raw, into: &stream)
        #expect(stream.mostQueuedChunks == PayloadStream.maxQueuedChunks)
        #expect(stream.chunksCompressedByWriter == chunks - PayloadStream.maxQueuedChunks)
        let stored = try #require(stream.finish())
        #expect(Self.storedBytes(stored) == Self.chunkedWhole(raw))
    }

    @Test func aStreamOnThePoolNeverQueuesMoreThanTheBoundAndStoresTheSameBytes() throws {
        let raw = payload(2, count: 20 * JournalFormat.chunkSize + 12_345)
        var stream = PayloadStream(capacity: raw.count)
        Self.write(raw, into: &stream)
        // At most the bound (how many wait at a time depends on how fast the pool takes them:
        // on a loaded machine the writer may see none waiting at all).
        #expect(stream.mostQueuedChunks <= PayloadStream.maxQueuedChunks)
        let stored = try #require(stream.finish())
        #expect(Self.storedBytes(stored) == Self.chunkedWhole(raw))
        // Each compressed chunk in a buffer of its own size, not the 1 MiB it was compressed into.
        #expect(stored.blocks.allSatisfy { $0.count < JournalFormat.chunkSize / 2 && $0.capacity - $0.count < 1024 })
    }

    @Test func aBoundedStreamAppendsTheRecordTheWholePayloadWouldAndReadsBack() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let raw = payload(3, count: 9 * JournalFormat.chunkSize + 999)
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        var stream = PayloadStream(capacity: raw.count, compressesOnPool: false)
        Self.write(raw, into: &stream)
        try journal.append(stream, schema: Array("schema".utf8))
        try journal.append(raw)
        try journal.close()
        let records = try recordsAfterReopen(directory).filter { $0.kind == .transaction }
        #expect(records.map(\.payload) == [raw, raw])
        // Both records stored alike: the same stored length after the same header.
        let report = try Journal.inspect(directory: directory)
        let lengths = report.entries.filter { $0.kind == .transaction }.map(\.storedLength)
        #expect(lengths.count == 2 && lengths[0] == lengths[1])
    }
}
