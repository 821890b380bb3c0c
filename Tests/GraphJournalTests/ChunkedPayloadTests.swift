import Foundation
import ObjectGraphTestSupport
import Synchronization
import Testing

@testable import GraphJournal

/// Payloads of at least `JournalFormat.chunkedThreshold` bytes are stored in independently
/// compressed chunks (record flag bit 1). They must read back exactly, through every reader,
/// and any chunk table or chunk that does not decode must be a reported corruption.
@Suite struct ChunkedPayloadTests {
    /// Compressible, incompressible and half-and-half payloads around the threshold.
    func largePayloads() -> [[UInt8]] {
        let threshold = JournalFormat.chunkedThreshold, chunk = JournalFormat.chunkSize
        let mixed = payload(3, count: 2 * chunk, compressible: false) + payload(4, count: 2 * chunk + 77)
        return [
            payload(1, count: threshold),
            payload(2, count: threshold + chunk / 2 + 1),
            payload(5, count: threshold + 10, compressible: false),
            mixed,
            payload(6, count: 1000),
        ]
    }

    @Test func largePayloadsAreStoredInChunksAndReadBackExactlyAfterReopen() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let payloads = largePayloads()
        do {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            for p in payloads { try journal.append(p) }
            try journal.close()
        }
        let journal = try Journal.open(directory: directory)
        defer { try? journal.close() }
        #expect(try journal.records().transactions == payloads)
        #expect(journal.openReport.isClean)

        // The flags byte on disk: chunks for the large compressible payloads, raw for the
        // incompressible one (chunks would not be smaller), and for the small one a block that
        // may copy from the segment's history (a version 2 log).
        var flags: [UInt8] = []
        var read: [[UInt8]] = []
        let report = try Journal.readPayloads(directory: directory) { _, payload in read.append(Array(payload)) }
        #expect(read == payloads)
        #expect(report.problems.isEmpty)
        let bytes = readBytes(directory + "/" + report.files[0])
        for entry in report.entries { flags.append(bytes[Int(entry.offset) + JournalFormat.RecordHeaderField.flags]) }
        #expect(
            flags == [
                JournalFormat.flagChunked, JournalFormat.flagChunked, 0, JournalFormat.flagChunked,
                JournalFormat.flagHistory,
            ])
        #expect(report.entries.map(\.compressed) == [true, true, false, true, true])
        #expect(report.entries[0].storedLength < payloads[0].count / 4)
    }

    /// A chunked record whose checksum matches but whose chunk table or chunks are wrong (what
    /// a buggy writer could produce) is described, never trusted or crashed on.
    @Test(arguments: ChunkDamage.allCases)
    func aDamagedChunkTableOrChunkIsACorruptionNamingIt(_ damage: ChunkDamage) throws {
        let original = payload(7, count: JournalFormat.chunkedThreshold + 12345)
        var record: [UInt8] = []
        let seed: UInt32 = 0x1234_5678
        original.withUnsafeBytes {
            _ = RecordCodec.append(to: &record, seed: seed, sequence: 1, type: .transaction, payload: $0)
        }
        #expect(record[JournalFormat.RecordHeaderField.flags] == JournalFormat.flagChunked)
        let table = JournalFormat.recordHeaderSize
        func length(_ i: Int) -> Int {
            Int(record.withUnsafeBytes { $0.littleEndian(at: table + 4 + 4 * i, as: UInt32.self) })
        }
        func setLength(_ i: Int, _ value: Int) { record.storeLittleEndian(UInt32(value), at: table + 4 + 4 * i) }
        let expected: String
        switch damage {
        case .chunkCount:
            record.storeLittleEndian(UInt32(6), at: table)
            expected = "6 chunks where"
        case .zeroLength:
            setLength(2, 0)
            expected = "chunk 2 stored in 0 bytes"
        case .lengthsDoNotAddUp:
            setLength(4, length(4) - 1)
            expected = "chunks end at byte"
        case .chunkBoundaryMoved:
            setLength(1, length(1) - 5)
            setLength(2, length(2) + 5)
            expected = "chunk 1 does not decompress"
        }
        // A checksum that matches the damaged bytes, as the writer that produced them would have.
        let crc = record.withUnsafeBytes { CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[4...])) }
        record.storeLittleEndian(crc, at: 0)
        try record.withUnsafeBytes { bytes in
            let scanned = try RecordCodec.record(in: bytes, at: 0, seed: seed, end: bytes.count).get()
            #expect(scanned.chunked)
            guard case .failure(let error) = RecordCodec.payload(of: scanned, in: bytes, file: "f") else {
                Issue.record("a damaged chunked payload decoded")
                return
            }
            #expect(error.message.contains("passes its checksum but does not decompress"))
            #expect(error.message.contains(expected), "\(error.message)")
            let buffer = ReadBuffer()
            let problem = RecordCodec.withPayload(of: scanned, in: bytes, file: "f", buffer: buffer) { _ in
                Issue.record("body called for a damaged payload")
            }
            #expect(problem?.message == error.message)
        }
    }

    enum ChunkDamage: CaseIterable, Sendable {
        case chunkCount, zeroLength, lengthsDoNotAddUp, chunkBoundaryMoved
    }

    /// A payload written through a ``PayloadStream`` in pieces of random sizes (cut whenever
    /// the stream is full, as a save does) is stored exactly as the whole payload is: the same
    /// flags and the same stored bytes after the header, so readers cannot tell them apart.
    @Test func streamedPayloadsAreStoredExactlyAsWholeOnes() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("streamedPayloadsAreStoredExactlyAsWholeOnes seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        let payloads =
            largePayloads() + [
                payload(8, count: JournalFormat.chunkedThreshold - 1),
                payload(9, count: 2 * JournalFormat.chunkedThreshold + JournalFormat.chunkSize),
                [],
            ]
        let whole = temporaryJournalPath(), streamed = temporaryJournalPath()
        defer { removeDirectory(whole); removeDirectory(streamed) }
        do {
            let a = try Journal.open(directory: whole, options: JournalOptions(durability: .none))
            let b = try Journal.open(directory: streamed, options: JournalOptions(durability: .none))
            for p in payloads {
                try a.append(p, schema: [1, 2, 3])
                var stream = PayloadStream(capacity: Int.random(in: 0...p.count + 1, using: &generator))
                var at = 0
                while at < p.count {
                    let piece = min(p.count - at, Int.random(in: 1...300_000, using: &generator))
                    stream.bytes.append(contentsOf: p[at..<(at + piece)])
                    stream.cutIfFull()
                    at += piece
                }
                #expect(stream.count == p.count)
                try b.append(stream, schema: [1, 2, 3])
            }
            try a.close()
            try b.close()
        }
        var stored: [[[UInt8]]] = []
        for directory in [whole, streamed] {
            var read: [[UInt8]] = []
            let report = try Journal.readPayloads(directory: directory) { entry, payload in
                if entry.kind == .transaction { read.append(Array(payload)) }
            }
            #expect(report.problems.isEmpty)
            #expect(read == payloads)
            let bytes = readBytes(directory + "/" + report.files[0])
            stored.append(
                report.entries.map { entry in
                    let start = Int(entry.offset) + JournalFormat.RecordHeaderField.flags
                    return Array(
                        bytes[start..<(Int(entry.offset) + JournalFormat.recordHeaderSize + entry.storedLength)])
                })
        }
        #expect(stored[0] == stored[1])
    }

    /// Streamed saves running on every thread of Dispatch's pool at once (as saves from Swift
    /// tasks may) finish: the writer compresses the chunks no pool thread took.
    @Test func streamedAppendsOnEveryPoolThreadFinish() throws {
        let writers = 4 * ProcessInfo.processInfo.activeProcessorCount
        let directories = (0..<writers).map { _ in temporaryJournalPath() }
        defer { directories.forEach(removeDirectory) }
        let big = payload(10, count: JournalFormat.chunkedThreshold + 2 * JournalFormat.chunkSize)
        let failures = Mutex(0)
        let group = DispatchGroup()
        for directory in directories {
            DispatchQueue.global().async(group: group) {
                do {
                    let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
                    var stream = PayloadStream()
                    stream.bytes = big
                    stream.cutIfFull()
                    try journal.append(stream)
                    try journal.close()
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(group.wait(timeout: .now() + 120) == .success, "streamed appends on the pool did not finish")
        #expect(failures.withLock { $0 } == 0)
        for directory in directories { #expect(try Journal.open(directory: directory).records().transactions == [big]) }
    }

    /// Arbitrary bytes as a chunked payload of arbitrary length: an error or the right number
    /// of bytes, never a crash (the seed is printed to replay a failure).
    @Test func arbitraryBytesNeverCrashTheChunkDecoder() {
        let seed = UInt64.random(in: 0 ... .max)
        print("arbitraryBytesNeverCrashTheChunkDecoder seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<300 {
            let raw = Int.random(in: 0...3 * JournalFormat.chunkSize, using: &generator)
            let n = (raw + JournalFormat.chunkSize - 1) / JournalFormat.chunkSize
            var stored: [UInt8] = []
            stored.appendLittleEndian(
                UInt32(Bool.random(using: &generator) ? n : Int.random(in: 0...5, using: &generator)))
            for _ in 0..<n { stored.appendLittleEndian(UInt32.random(in: 1...40, using: &generator)) }
            stored += (0..<Int.random(in: 0...200, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            let destination = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: raw)
            defer { destination.deallocate() }
            _ = stored.withUnsafeBytes { ChunkedPayload.decode($0, into: destination) }
        }
    }
}
