import Foundation
import Glibc
import Synchronization
import Testing

@testable import GraphJournal

/// `readPayloads` streams each segment through a small window; with any window it
/// must report and deliver exactly what reading each segment whole does, damage included.
@Suite struct JournalStreamingReadTests {
    /// Windows from one byte (every record grows it) to larger than the test journals.
    static let windows = [1, 24, 64, 100, 4096, Journal.readWindow]

    /// What a walk returns and delivers: the report, each record's entry and payload, and
    /// the error `body` threw, if any.
    struct Walk: Equatable, CustomStringConvertible {
        var report: JournalReport?
        var delivered: [JournalReadRecord] = []
        var thrown: String?

        /// Short enough for a failure message: the problems in full, the rest summarised.
        var description: String {
            let entries = report.map { "\($0.entries.count) entries, problems \($0.problems)" } ?? "no report"
            let offsets = delivered.map { "\($0.entry.file)@\($0.entry.offset)#\($0.payload.count)" }
            return "\(entries); delivered \(offsets); thrown \(thrown ?? "nothing")"
        }
    }

    struct Stop: Error, CustomStringConvertible {
        var description: String { "stopped by body" }
    }

    /// Walks `directory` with `window` (nil: whole files), throwing from `body` at the
    /// `stopAt`-th record when given.
    static func walk(_ directory: String, window: Int?, io: JournalIO = .system, stopAt: Int? = nil) -> Walk {
        var walk = Walk()
        do {
            walk.report = try Journal.readPayloads(directory: directory, io: io, window: window) { entry, payload in
                walk.delivered.append(JournalReadRecord(entry: entry, payload: Array(payload)))
                if walk.delivered.count == stopAt { throw Stop() }
            }
        } catch {
            walk.thrown = "\(error)"
        }
        return walk
    }

    /// Expects every window to walk `directory` as the whole-file read does; returns that walk.
    @discardableResult
    static func expectSameWalks(
        _ directory: String, stopAt: Int? = nil, _ label: String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Walk {
        let reference = walk(directory, window: nil, stopAt: stopAt)
        for window in windows {
            let streamed = walk(directory, window: window, stopAt: stopAt)
            #expect(streamed == reference, "window \(window) \(label)", sourceLocation: sourceLocation)
        }
        return reference
    }

    /// Three log segments of records of assorted sizes, raw and compressed; returns the
    /// segment paths.
    static func writeJournal(_ directory: String, count: Int = 12) throws -> [String] {
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .none, segmentSize: 2000))
        let sizes = [0, 1, 13, 64, 200, 900, 5000]
        for index in 0..<count {
            try journal.append(
                payload(index, count: sizes[index % sizes.count], compressible: index % 3 != 0),
                schema: Array("schema v1".utf8))
        }
        try journal.close()
        return try liveSegments(directory)
    }

    @Test func cleanJournalsStreamAsWholeFilesDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory)
        #expect(segments.count > 2)
        let reference = Self.expectSameWalks(directory)
        #expect(reference.report?.verdict == .clean)
        #expect(reference.delivered.count == reference.report?.entries.count)
        #expect(reference.delivered.contains { $0.entry.compressed })
        // A compacted journal: a base segment before the log.
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        try journal.compact(base: (0..<40).map { payload($0, count: 300) }, schema: Array("schema v2".utf8))
        try journal.append(payload(99, count: 3000))
        try journal.close()
        let compacted = Self.expectSameWalks(directory, "after compaction")
        #expect(compacted.report?.files.first?.hasSuffix(".base") == true)
        // An empty journal.
        let empty = temporaryJournalPath()
        defer { removeDirectory(empty) }
        try Journal.open(directory: empty, options: JournalOptions(durability: .none)).close()
        Self.expectSameWalks(empty, "empty")
    }

    @Test func cleanSegmentsAreReadInWindowSizedPiecesNeverWhole() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory)
        let largestRecord =
            try Journal.inspect(directory: directory).entries
            .map { JournalFormat.recordHeaderSize + $0.storedLength }.max() ?? 0
        let reads = Mutex<[Int]>([])
        var io = JournalIO.system
        io.pread = { fd, buffer, offset throws(JournalIO.Failure) in
            reads.withLock { $0.append(buffer.count) }
            return try JournalIO.system.pread(fd, buffer, offset)
        }
        for window in [64, 512] {
            reads.withLock { $0 = [] }
            let streamed = Self.walk(directory, window: window, io: io)
            #expect(streamed == Self.walk(directory, window: nil))
            let sizes = reads.withLock { $0 }.dropFirst()  // MANIFEST
            #expect(sizes.count > segments.count, "window \(window)")
            #expect(sizes.allSatisfy { $0 <= max(window, largestRecord) }, "window \(window): \(sizes)")
        }
    }

    @Test func truncationAtEveryOffsetStreamsAsWholeFilesDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory, count: 10)
        // The last segment (a torn tail) and the first (corruption: more segments follow).
        for segment in [segments[segments.count - 1], segments[0]] {
            let pristine = readBytes(segment)
            for cut in 0..<pristine.count {
                truncateFile(segment, to: cut)
                Self.expectSameWalks(directory, "\(segment) cut at \(cut)")
            }
            writeBytes(segment, pristine)
        }
    }

    @Test func bitFlipsAnywhereStreamAsWholeFilesDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory, count: 10)
        for segment in [segments[0], segments[segments.count - 1]] {
            let pristine = readBytes(segment)
            // One bit of every byte (rotating which bit): headers, lengths, sequences, payloads.
            for byte in 0..<pristine.count {
                flipBit(segment, bit: byte * 8 + byte % 8)
                Self.expectSameWalks(directory, "\(segment) byte \(byte) flipped")
                writeBytes(segment, pristine)
            }
        }
    }

    @Test func recordsThatPassTheirChecksumButDoNotDecompressStreamAsWholeFilesDo() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory)
        var damaged = 0
        for segment in segments {
            var bytes = readBytes(segment)
            let records = bytes.withUnsafeBytes { raw -> [ScannedRecord] in
                guard case .success(let header) = SegmentHeader.parse(raw, file: segment) else { return [] }
                var found: [ScannedRecord] = []
                _ = RecordCodec.scan(raw, header: header) {
                    found.append($0); return true
                }
                return found
            }
            let seed = bytes.withUnsafeBytes { raw in
                (try? SegmentHeader.parse(raw, file: segment).get())?.seed
            }
            guard let seed else { continue }
            for record in records where record.compressed || record.history {
                // Claim one byte more than the block decodes to, and re-seal the checksum.
                bytes.storeLittleEndian(
                    UInt32(record.rawLength + 1), at: record.offset + JournalFormat.RecordHeaderField.rawLength)
                let crc = bytes.withUnsafeBytes {
                    CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(record.offset + 4)..<record.end]))
                }
                bytes.storeLittleEndian(crc, at: record.offset)
                damaged += 1
            }
            writeBytes(segment, bytes)
        }
        #expect(damaged > 0)
        let reference = Self.expectSameWalks(directory)
        #expect(reference.report?.verdict == .corrupt)
    }

    @Test func bodyThatThrowsStopsTheStreamWhereItStopsTheWholeFileWalk() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory)
        let count = Self.walk(directory, window: nil).delivered.count
        for stop in 1...count {
            let reference = Self.expectSameWalks(directory, stopAt: stop, "stop at \(stop)")
            #expect(reference.delivered.count == stop && reference.thrown == "stopped by body")
        }
        // Also when damage follows the record the body stops at.
        truncateFile(segments[0], to: readBytes(segments[0]).count - 5)
        for stop in 1...count {
            Self.expectSameWalks(directory, stopAt: stop, "damaged, stop at \(stop)")
        }
    }

    @Test func readFailureMidStreamReportsTheFileUnreadableAsAFailedWholeFileReadDoes() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let segments = try Self.writeJournal(directory)
        let files = try Journal.inspect(directory: directory).files
        let plan = JournalIO.FaultPlan()
        let io = JournalIO.faulty(plan)
        for window in [64, 4096] {
            plan.arm(.error(EIO), atCall: Int.max, of: [.pread])
            _ = Self.walk(directory, window: window, io: io)
            let reads = plan.callCount
            #expect(reads > segments.count)
            for call in 1...reads {
                plan.arm(.error(EIO), atCall: call, of: [.pread])
                let streamed = Self.walk(directory, window: window, io: io)
                #expect(plan.hasFired)
                guard call > 1 else {
                    // The MANIFEST read: nothing is walked.
                    #expect(streamed.report == nil && streamed.thrown != nil)
                    continue
                }
                let unreadable =
                    streamed.report?.problems.filter { $0.message.hasPrefix("listed in MANIFEST but unreadable") } ?? []
                #expect(unreadable.count == 1, "window \(window), pread \(call)")
                guard let file = unreadable.first?.file, let index = files.firstIndex(of: file) else { continue }
                // The whole-file walk reads MANIFEST then each segment with one pread.
                plan.arm(.error(EIO), atCall: index + 2, of: [.pread])
                let whole = Self.walk(directory, window: nil, io: io)
                #expect(streamed.report == whole.report, "window \(window), pread \(call)")
                #expect(streamed.thrown == nil && whole.thrown == nil)
            }
        }
    }
}
