import Foundation
import ObjectGraph
import Testing

@testable import GraphJournal

/// An open replays a large save's payload chunk by chunk as it is decompressed, never whole
/// (`Journal.forEachPayload`): the pieces are at most a chunk, they make the payload
/// `forEachRecord` reads whole, and a chunk that does not decompress is the same damage, with
/// the same error, as when the payload was decompressed first: a default open refuses naming
/// that record, and `.pointInTime` keeps the saves before it.
@Suite("Replay reads large payloads chunk by chunk")
struct StreamingReplayTests {
    /// A store with a small save, a save of `count` people (a chunked record), and another
    /// small save; returns the directory.
    static func makeStore(count: Int = 100_000) throws -> URL {
        let dir = temporaryStoreDirectory()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        let first = try store.context.insert(Person.self)
        first.id = -1; first.name = "first"; first.email = "f"
        try store.context.save()
        for i in 0..<count {
            let p = try store.context.insert(Person.self)
            p.id = Int64(i); p.name = "Person \(i)"; p.email = "p\(i)@example.com";
            p.city = i % 3 == 0 ? nil : "City \(i % 100)"
        }
        try store.context.save()
        let last = try store.context.insert(Person.self)
        last.id = -2; last.name = "last"; last.email = "l"
        try store.context.save()
        try store.close()
        return dir
    }

    /// The chunked records of the store's only segment, the segment's path and its CRC seed.
    static func chunkedRecords(_ dir: URL) throws -> (path: String, records: [ScannedRecord], seed: UInt32) {
        let name = try #require(try Journal.inspect(directory: dir.path).files.first)
        let path = dir.appendingPathComponent(name).path
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return bytes.withUnsafeBytes { raw in
            guard case .success(let header) = SegmentHeader.parse(raw, file: path) else { return (path, [], 0) }
            var found: [ScannedRecord] = []
            _ = RecordCodec.scan(raw, header: header) { record in
                if record.chunked { found.append(record) }
                return true
            }
            return (path, found, header.seed)
        }
    }

    @Test func aChunkedPayloadIsLentInChunksThatMakeThePayloadReadWhole() throws {
        let dir = try Self.makeStore()
        let journal = try Journal.open(directory: dir.path, options: JournalOptions(durability: .none))
        let whole = try journal.records()
        var lent: [(UInt64, JournalRecord.Kind, [UInt8])] = []
        var largestPiece = 0, chunkedPieces = 0
        try journal.forEachPayload(progress: { _, _ in }) { sequence, kind, payload in
            var bytes: [UInt8] = []
            while let piece = payload.next() {
                bytes.append(contentsOf: piece)
                largestPiece = max(largestPiece, payload.count >= JournalFormat.chunkedThreshold ? piece.count : 0)
                if payload.count >= JournalFormat.chunkedThreshold { chunkedPieces += 1 }
            }
            #expect(payload.finish())
            lent.append((sequence, kind, bytes))
        }
        #expect(lent.map(\.0) == whole.map(\.sequence))
        #expect(lent.map(\.1) == whole.map(\.kind))
        #expect(lent.map(\.2) == whole.map(\.payload))
        let chunked = try #require(whole.first { $0.payload.count >= JournalFormat.chunkedThreshold })
        #expect(largestPiece == JournalFormat.chunkSize)
        #expect(chunkedPieces == (chunked.payload.count + JournalFormat.chunkSize - 1) / JournalFormat.chunkSize)
        try journal.close()
        let store = try ObjectStore.open(at: dir, schema: storeSchema)
        #expect(try store.context.count(of: Person.self) == 100_002)
        try store.close()
    }

    @Test func aChunkThatDoesNotDecompressIsTheDamageItWasWhenThePayloadWasReadWhole() throws {
        let dir = try Self.makeStore()
        let (path, records, seed) = try Self.chunkedRecords(dir)
        let record = try #require(records.first)
        // Moves the boundary between chunks 2 and 3 and re-seals the checksum, as a buggy
        // writer would: chunk 2 no longer decompresses.
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let table = record.offset + JournalFormat.recordHeaderSize
        let length = Int(bytes.withUnsafeBytes { $0.littleEndian(at: table + 4 + 4 * 2, as: UInt32.self) })
        let next = Int(bytes.withUnsafeBytes { $0.littleEndian(at: table + 4 + 4 * 3, as: UInt32.self) })
        bytes.storeLittleEndian(UInt32(length - 5), at: table + 4 + 4 * 2)
        bytes.storeLittleEndian(UInt32(next + 5), at: table + 4 + 4 * 3)
        let crc = bytes.withUnsafeBytes {
            CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(record.offset + 4)..<record.end]))
        }
        bytes.storeLittleEndian(crc, at: record.offset)
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        // The walk throws what forEachRecord throws, whether the body reads every piece or
        // throws at the first.
        struct Stop: Error {}
        let journal = try Journal.open(directory: dir.path, options: JournalOptions(durability: .none))
        var wholeError: JournalError?
        do { try journal.forEachRecord { _ in } } catch let error as JournalError { wholeError = error }
        let expected = try #require(wholeError)
        #expect(expected.sequence == record.sequence && expected.message.contains("chunk 2 does not decompress"))
        for stopsEarly in [false, true] {
            var streamedError: JournalError?
            do {
                try journal.forEachPayload(progress: { _, _ in }) { _, _, payload in
                    if stopsEarly, payload.count >= JournalFormat.chunkedThreshold { throw Stop() }
                    while payload.next() != nil {}
                }
            } catch let error as JournalError { streamedError = error }
            #expect(streamedError?.message == expected.message, "body stops early: \(stopsEarly)")
            #expect(streamedError?.sequence == expected.sequence && streamedError?.offset == expected.offset)
        }
        try journal.close()

        // A default open refuses, naming the record; point-in-time recovery keeps the save before.
        #expect {
            _ = try ObjectStore.open(at: dir, schema: storeSchema)
        } throws: { error in
            "\(error)".contains("does not decompress") && "\(error)".contains("\(record.sequence)")
        }
        var options = StoreOptions()
        options.recovery = .pointInTime
        let store = try ObjectStore.open(at: dir, schema: storeSchema, options: options)
        #expect(try store.context.objects(of: Person.self).map(\.name) == ["first"])
        try store.close()
    }
}
