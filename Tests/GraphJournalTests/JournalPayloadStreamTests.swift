import Foundation
import ObjectGraphTestSupport
import Testing

@testable import GraphJournal

/// `streamPayloads` lends a chunked payload chunk by chunk as it is decompressed: it
/// must lend the bytes `readPayloads` lends whole and report exactly what `readPayloads`
/// reports, damage included; a chunk that does not decompress ends the pieces early and
/// `finish()` says so.
@Suite struct JournalPayloadStreamTests {
    /// What a walk delivers: the report and each record's entry and payload; with streaming,
    /// only the payloads whose `finish()` was true (the others are reported as corrupt).
    struct Walk: Equatable, CustomStringConvertible {
        /// A delivered payload: its entry, length and CRC32C (payloads of MBs compare slowly).
        struct Delivered: Equatable {
            var entry: JournalReport.Entry
            var count: Int
            var checksum: UInt32
        }

        var report: JournalReport?
        var delivered: [Delivered] = []
        var unfinished: [Int64] = []
        var thrown: String?

        var description: String {
            let entries = report.map { "\($0.entries.count) entries, problems \($0.problems)" } ?? "no report"
            return
                "\(entries); delivered \(delivered.map { "\($0.entry.offset)#\($0.count)" }); unfinished \(unfinished)"
        }
    }

    struct Stop: Error {}

    /// Walks `directory` lending whole payloads (`streaming` false) or chunk by chunk; with
    /// `piecesRead`, streaming reads at most that many pieces of each payload before `finish()`.
    static func walk(
        _ directory: String, window: Int? = Journal.readWindow, streaming: Bool, piecesRead: Int = .max
    ) -> Walk {
        var walk = Walk()
        do {
            walk.report = try Journal.walkPayloads(
                directory: directory, io: .system, window: window, streamingChunks: streaming
            ) { entry, payload in
                var count = 0
                var checksum = CRC32C.seed(salt: 0)
                var pieces = 0
                while pieces < piecesRead, let piece = payload.next() {
                    count += piece.count
                    checksum = CRC32C.extend(checksum, piece)
                    pieces += 1
                }
                guard payload.finish() else {
                    walk.unfinished.append(entry.offset)
                    return
                }
                // A reader that stopped early read only part: only its entry is compared.
                if pieces == piecesRead { (count, checksum) = (0, 0) }
                walk.delivered.append(Walk.Delivered(entry: entry, count: count, checksum: checksum))
            }
        } catch {
            walk.thrown = "\(error)"
        }
        return walk
    }

    /// The checksum a walk records for `bytes`.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { CRC32C.extend(CRC32C.seed(salt: 0), $0) }
    }

    /// Expects the streaming walk to deliver and report what the whole-payload walk does, for
    /// the segment windows given; returns the whole-payload walk.
    @discardableResult
    static func expectSameWalks(
        _ directory: String, windows: [Int?] = [nil, 4096, Journal.readWindow], _ label: String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Walk {
        let reference = walk(directory, window: nil, streaming: false)
        #expect(reference.unfinished.isEmpty, sourceLocation: sourceLocation)
        for window in windows {
            var streamed = walk(directory, window: window, streaming: true)
            streamed.unfinished = []  // reported as problems: compared through the report
            #expect(
                streamed == reference, "window \(window.map(String.init) ?? "whole") \(label)",
                sourceLocation: sourceLocation)
        }
        return reference
    }

    /// Large payloads of several chunk counts (compressible, incompressible, mixed) between
    /// small ones; returns the payloads written.
    @discardableResult
    static func writeChunkedJournal(_ directory: String) throws -> [[UInt8]] {
        let chunk = JournalFormat.chunkSize, threshold = JournalFormat.chunkedThreshold
        let payloads = [
            payload(1, count: 100),
            payload(2, count: threshold),
            payload(3, count: 5 * chunk + 77),
            payload(4, count: 2 * chunk, compressible: false) + payload(5, count: 2 * chunk + 1),
            payload(6, count: 3000),
            payload(7, count: threshold + chunk / 2 + 1),
        ]
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        for p in payloads { try journal.append(p, schema: Array("schema v1".utf8)) }
        try journal.close()
        return payloads
    }

    /// The chunked records of a segment file, with the segment's CRC seed.
    static func chunkedRecords(_ segment: String) -> (records: [ScannedRecord], seed: UInt32) {
        readBytes(segment).withUnsafeBytes { raw in
            guard case .success(let header) = SegmentHeader.parse(raw, file: segment) else { return ([], 0) }
            var found: [ScannedRecord] = []
            _ = RecordCodec.scan(raw, header: header) { record in
                if record.chunked { found.append(record) }
                return true
            }
            return (found, header.seed)
        }
    }

    /// Re-seals the checksum of the record at `record.offset` after its bytes were changed.
    static func reseal(_ bytes: inout [UInt8], _ record: ScannedRecord, seed: UInt32) {
        let crc = bytes.withUnsafeBytes {
            CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(record.offset + 4)..<record.end]))
        }
        bytes.storeLittleEndian(crc, at: record.offset)
    }

    @Test func chunkedPayloadsArriveChunkByChunkWithTheBytesReadPayloadsLends() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let payloads = try Self.writeChunkedJournal(directory)
        let reference = Self.expectSameWalks(directory)
        #expect(reference.report?.verdict == .clean)
        #expect(
            reference.delivered.filter { $0.entry.kind == .transaction }.map(\.checksum) == payloads.map(Self.checksum))
        // A chunked payload comes in pieces of one chunk each.
        var pieceCounts: [Int] = []
        _ = try Journal.streamPayloads(directory: directory) { entry, payload in
            var count = 0
            while let piece = payload.next() {
                #expect(piece.count <= JournalFormat.chunkSize)
                count += 1
            }
            #expect(payload.finish())
            #expect(payload.next() == nil)
            if entry.kind == .transaction { pieceCounts.append(count) }
        }
        #expect(
            pieceCounts
                == payloads.map {
                    $0.count < JournalFormat.chunkedThreshold
                        ? min($0.count, 1) : ($0.count + JournalFormat.chunkSize - 1) / JournalFormat.chunkSize
                })
    }

    @Test func aReaderThatStopsEarlyLeavesTheRestToFinish() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try Self.writeChunkedJournal(directory)
        let reference = Self.walk(directory, window: nil, streaming: false)
        for piecesRead in 0...3 {
            let streamed = Self.walk(directory, streaming: true, piecesRead: piecesRead)
            #expect(streamed.report == reference.report, "\(piecesRead) pieces read")
            #expect(streamed.unfinished.isEmpty && streamed.thrown == nil)
        }
        // A body that throws mid-payload stops the walk with its error.
        var seen = 0
        #expect(throws: Stop.self) {
            _ = try Journal.streamPayloads(directory: directory) { _, payload in
                seen += 1
                if payload.count >= JournalFormat.chunkedThreshold, payload.next() != nil { throw Stop() }
            }
        }
        #expect(seen == 3)
    }

    /// Moving the boundary between chunks i and i+1 (and re-sealing the checksum, as a buggy
    /// writer would) makes chunk i fail to decompress: the stream ends there, the record is
    /// reported exactly as `readPayloads` reports it, and the chunks before were lent.
    @Test func aChunkThatDoesNotDecompressEndsThePiecesAndIsReportedAsWhenDecodedWhole() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try Self.writeChunkedJournal(directory)
        let segment = try #require(try liveSegments(directory).first)
        let pristine = readBytes(segment)
        let (records, seed) = Self.chunkedRecords(segment)
        #expect(records.count == 4)
        var checked = 0
        for record in records {
            let table = record.offset + JournalFormat.recordHeaderSize
            let n = Int(pristine.withUnsafeBytes { $0.littleEndian(at: table, as: UInt32.self) })
            for i in 0..<(n - 1) {
                var bytes = pristine
                let length = Int(bytes.withUnsafeBytes { $0.littleEndian(at: table + 4 + 4 * i, as: UInt32.self) })
                let next = Int(bytes.withUnsafeBytes { $0.littleEndian(at: table + 8 + 4 * i, as: UInt32.self) })
                guard length > 5, next + 5 <= ChunkedPayload.rawCount(of: i + 1, in: record.rawLength) else { continue }
                bytes.storeLittleEndian(UInt32(length - 5), at: table + 4 + 4 * i)
                bytes.storeLittleEndian(UInt32(next + 5), at: table + 8 + 4 * i)
                Self.reseal(&bytes, record, seed: seed)
                writeBytes(segment, bytes)
                let reference = Self.expectSameWalks(
                    directory, windows: [Journal.readWindow], "record at \(record.offset), chunk \(i) cut short")
                let problem = reference.report?.problems.first { $0.offset == Int64(record.offset) }
                #expect(
                    problem?.message.contains(
                        "passes its checksum but does not decompress: chunk \(i) does not decompress") == true,
                    "\(problem?.message ?? "no problem")")
                // The streaming body saw chunks 0..<i, then the end; finish() was false.
                var lent = 0
                var finished = true
                _ = try Journal.streamPayloads(directory: directory) { entry, payload in
                    guard entry.offset == Int64(record.offset) else { return }
                    while payload.next() != nil { lent += 1 }
                    finished = payload.finish()
                }
                #expect(lent == i && !finished, "chunk \(i): \(lent) lent")
                checked += 1
            }
        }
        writeBytes(segment, pristine)
        #expect(checked > 5)
    }

    /// Bit flips anywhere in a chunked record's stored bytes, with the checksum re-sealed (a
    /// chunk table that no longer adds up, a chunk that does not decode, or one that decodes to
    /// other bytes), and without (a torn or corrupt record): the streaming walk reports and
    /// delivers what the whole-payload walk does.
    @Test func bitFlipsInAChunkedRecordStreamAsWholePayloadsDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.append(payload(1, count: 300), schema: Array("schema v1".utf8))
        try journal.append(payload(2, count: JournalFormat.chunkedThreshold + 1000))
        try journal.append(payload(3, count: 90))
        try journal.close()
        let segment = try #require(try liveSegments(directory).first)
        let pristine = readBytes(segment)
        let (records, seed) = Self.chunkedRecords(segment)
        let record = try #require(records.first)
        let seedForOffsets = UInt64.random(in: 0 ... .max)
        print("bitFlipsInAChunkedRecordStreamAsWholePayloadsDo seed \(seedForOffsets)")
        var generator = SeededGenerator(seed: seedForOffsets)
        let payloadStart = record.offset + JournalFormat.recordHeaderSize
        // Every byte of the header and chunk table, then random bytes of the chunks.
        let tableEnd =
            payloadStart + 4 + 4 * ((record.rawLength + JournalFormat.chunkSize - 1) / JournalFormat.chunkSize)
        let offsets =
            Array(record.offset..<tableEnd)
            + (0..<24).map { _ in Int.random(in: tableEnd..<record.end, using: &generator) }
        for (n, offset) in offsets.enumerated() {
            var bytes = pristine
            bytes[offset] ^= UInt8(1 << (n % 8))
            writeBytes(segment, bytes)
            Self.expectSameWalks(directory, windows: [Journal.readWindow], "byte \(offset) flipped")
            guard offset >= record.offset + 4 else { continue }
            Self.reseal(&bytes, record, seed: seed)
            writeBytes(segment, bytes)
            Self.expectSameWalks(
                directory, windows: [nil, Journal.readWindow], "byte \(offset) flipped, checksum re-sealed")
        }
        writeBytes(segment, pristine)
    }

    /// A journal cut inside a small chunked record (a torn append), or in the record after it,
    /// streams as the whole-payload walk reads it: at every byte of the record's header, chunk
    /// table and the 64 bytes around each chunk boundary, of the record after it, and every
    /// 61st byte elsewhere. (A cut record is never lent, so the bytes in between add nothing
    /// but minutes to a debug build.)
    @Test func truncationInAChunkedRecordStreamsAsWholePayloadsDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        // Highly compressible: four chunks of a few KiB each.
        let small = [UInt8](repeating: 7, count: JournalFormat.chunkedThreshold + 1)
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.append(payload(1, count: 300), schema: Array("schema v1".utf8))
        try journal.append(small)
        try journal.append(payload(2, count: 90))
        try journal.close()
        let segment = try #require(try liveSegments(directory).first)
        let pristine = readBytes(segment)
        let record = try #require(Self.chunkedRecords(segment).records.first)
        #expect(record.end - record.offset < 20_000)
        let starts = try pristine.withUnsafeBytes { raw in
            try ChunkedPayload.chunkStarts(
                UnsafeRawBufferPointer(rebasing: raw[record.payloadRange]), rawLength: record.rawLength
            ).get()
        }
        var cuts = Set(record.offset..<(record.payloadRange.lowerBound + starts[0])).union(
            stride(from: record.offset, to: record.end, by: 61))
        for start in starts {
            cuts.formUnion(
                (record.payloadRange.lowerBound + start - 32)..<(record.payloadRange.lowerBound + start + 32))
        }
        cuts.formUnion(record.end...pristine.count)
        for cut in cuts.sorted() where cut <= pristine.count {
            truncateFile(segment, to: cut)
            let reference = Self.walk(directory, window: nil, streaming: false)
            var streamed = Self.walk(directory, streaming: true)
            streamed.unfinished = []
            #expect(streamed == reference, "cut at \(cut)")
        }
        writeBytes(segment, pristine)
        #expect(Self.expectSameWalks(directory).delivered.map(\.checksum).contains(Self.checksum(small)))
    }

    /// The stream on its own: every chunk count and every point at which a reader may stop
    /// gives the bytes the whole decode gives, and nothing after `finish()`.
    @Test func aChunkStreamLendsWhatTheWholeDecodeDecodes() throws {
        let chunk = JournalFormat.chunkSize
        let buffer = ReadBuffer()
        defer { withExtendedLifetime(buffer) {} }
        let slots = buffer.reserve(ChunkStream.slotCount * chunk)
        for raw in [4 * chunk, 4 * chunk + 1, 6 * chunk + chunk / 3] {
            let original = payload(raw, count: chunk / 2, compressible: false) + payload(raw, count: raw - chunk / 2)
            var stored: [UInt8] = []
            _ = try original.withUnsafeBytes { try #require(ChunkedPayload.append($0, to: &stored)) }
            let n = (raw + chunk - 1) / chunk
            try stored.withUnsafeBytes { stored in
                let starts = try ChunkedPayload.chunkStarts(stored, rawLength: raw).get()
                for stop in 0...n {
                    let stream = ChunkStream(stored: stored, starts: starts, rawLength: raw, slots: slots)
                    var checksum = CRC32C.seed(salt: 0)
                    for _ in 0..<stop {
                        guard let piece = stream.next() else { break }
                        checksum = CRC32C.extend(checksum, piece)
                    }
                    #expect(
                        checksum == Self.checksum(Array(original[..<min(stop * chunk, raw)])),
                        "\(raw) bytes, \(stop) pieces")
                    #expect(stream.finish())
                    #expect(stream.next() == nil && stream.failure == nil)
                }
            }
        }
    }
}

/// Records of tens of KB, several to a window, are decompressed in batches on every core
/// (`RecordBatch`) before they are lent in order: the walk must deliver and report exactly what
/// the whole-file walk, which decompresses one record at a time, does.
@Suite struct RecordBatchTests {
    /// 48 records of 20 to 70 KB, most compressible, in one segment.
    /// Batches exist only in version 1 segments (a version 2 segment's records are decompressed
    /// in order, through its history), so the journal is written as version 1 unless asked.
    static func writeJournal(_ directory: String, version: UInt16 = JournalFormat.historyFreeVersion) throws {
        var options = JournalOptions(durability: .none)
        options.logVersion = version
        let journal = try Journal.open(directory: directory, options: options)
        for index in 0..<48 {
            try journal.append(
                payload(index, count: [20_000, 41_000, 70_000][index % 3], compressible: index % 11 != 5),
                schema: Array("schema v1".utf8))
        }
        try journal.close()
    }

    @Test(arguments: [JournalFormat.historyFreeVersion, JournalFormat.formatVersion])
    func batchesStreamAsWholeFilesDo(version: UInt16) throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try Self.writeJournal(directory, version: version)
        let reference = JournalStreamingReadTests.expectSameWalks(directory)
        #expect(reference.report?.verdict == .clean && reference.delivered.count == 49)
        for stop in [1, 2, 3, 17, 30, 49] {
            JournalStreamingReadTests.expectSameWalks(directory, stopAt: stop, "stop at \(stop)")
        }
    }

    /// Records whose checksum is right but whose block decodes to fewer bytes than they claim,
    /// in the middle and at the ends of batches: each is reported when its turn comes.
    @Test func recordsOfABatchThatDoNotDecompressAreReportedInTheirTurn() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try Self.writeJournal(directory)
        let segment = try #require(try liveSegments(directory).first)
        var bytes = readBytes(segment)
        let (records, seed) = bytes.withUnsafeBytes { raw -> ([ScannedRecord], UInt32) in
            guard case .success(let header) = SegmentHeader.parse(raw, file: segment) else { return ([], 0) }
            var found: [ScannedRecord] = []
            _ = RecordCodec.scan(raw, header: header) {
                found.append($0); return true
            }
            return (found, header.seed)
        }
        var damaged = 0
        for (i, record) in records.enumerated() where record.compressed && (i % 5 == 1 || i == records.count - 1) {
            bytes.storeLittleEndian(
                UInt32(record.rawLength + 1), at: record.offset + JournalFormat.RecordHeaderField.rawLength)
            JournalPayloadStreamTests.reseal(&bytes, record, seed: seed)
            damaged += 1
        }
        writeBytes(segment, bytes)
        #expect(damaged > 5)
        let reference = JournalStreamingReadTests.expectSameWalks(directory)
        #expect(reference.report?.problems.filter { $0.message.contains("does not decompress") }.count == damaged)
        JournalStreamingReadTests.expectSameWalks(directory, stopAt: 20, "stop at 20")
    }
}
