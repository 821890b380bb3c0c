import Foundation
import ObjectGraphTestSupport
import Synchronization
import Testing

@testable import GraphJournal

/// Damage done on purpose, named after what it pins down (LevelDB's log_test.cc).
@Suite struct JournalRecoveryTests {
    @Test func truncatedTailAtEveryOffsetOfLastRecordIsTornTail() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let written = try writeSmallJournal(directory, count: 6)
        let segment = try liveSegments(directory)[0]
        let pristine = readBytes(segment)
        let lastOffset = Int(try Journal.inspect(directory: directory).entries.last!.offset)
        for cut in lastOffset..<pristine.count {
            writeBytes(segment, Array(pristine[..<cut]))
            let options = JournalOptions(durability: .none)
            do {
                let journal = try Journal.open(directory: directory, options: options)
                #expect(try journal.records().transactions == Array(written.dropLast()), "cut at \(cut)")
                if cut > lastOffset {
                    #expect(journal.openReport.tornTail?.offset == Int64(lastOffset), "cut at \(cut)")
                    #expect(journal.openReport.tornTail?.bytes == Int64(cut - lastOffset), "cut at \(cut)")
                    #expect(try Journal.inspect(directory: directory).verdict == .tornTailOnly)
                }
                try journal.append([0xAB, 0xCD])
                try journal.close()
            }
            let records = try recordsAfterReopen(directory, options: options)
            #expect(records.transactions == Array(written.dropLast()) + [[0xAB, 0xCD]], "cut at \(cut)")
            #expect(try Journal.inspect(directory: directory).verdict == .clean, "cut at \(cut)")
        }
    }

    @Test func tornTailIsLoggedWithByteCountAndOffsetAndInspectCallsItTornNotCorrupt() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 3)
        let segment = try liveSegments(directory)[0]
        let size = readBytes(segment).count
        truncateFile(segment, to: size - 3)
        let last = try Journal.inspect(directory: directory)
        #expect(last.verdict == .tornTailOnly)
        let torn = try #require(last.problems.first { $0.kind == .tornTail })
        #expect(torn.file == "0000000001.log" && torn.recordsAfter == 0)
        let lines = Mutex<[String]>([])
        let options = JournalOptions(log: { line in lines.withLock { $0.append(line) } })
        let journal = try Journal.open(directory: URL(fileURLWithPath: directory), options: options)
        let offset = try #require(torn.offset)
        let bytes = size - 3 - Int(offset)
        #expect(
            lines.withLock { $0 }.contains {
                $0.contains("torn tail: \(bytes) bytes at offset \(offset) of \(segment)")
            })
        // Open alone does not modify the file: only the first append truncates.
        #expect(readBytes(segment).count == size - 3)
        try journal.append([1])
        #expect(lines.withLock { $0 }.contains { $0.contains("truncated \(bytes) bytes at offset \(offset)") })
        try journal.close()
    }

    @Test func singleBitFlipsNeverCrashAndNeverLoseEarlierRecords() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let written = try writeSmallJournal(directory, count: 8)
        let segment = try liveSegments(directory)[0]
        let pristine = readBytes(segment)
        let entries = try Journal.inspect(directory: directory).entries
        var outcomes = (prefix: 0, torn: 0, corrupt: 0)
        for bit in 0..<(pristine.count * 8) {  // every bit of the segment
            writeBytes(segment, pristine)
            flipBit(segment, bit: bit)
            let damagedRecord = entries.lastIndex { Int($0.offset) * 8 <= bit }  // nil: the header
            switch openAndRead(directory) {
            case .success(let (records, openReport)):
                // Only ever a prefix of what was written, never a wrong record.
                let transactions = records.transactions
                #expect(Array(written.prefix(transactions.count)) == transactions, "bit \(bit)")
                #expect(
                    records.allSatisfy { $0.kind != .schema || $0.payload == Array("schema v1".utf8) }, "bit \(bit)")
                if transactions.count < written.count {
                    #expect(openReport.tornTail != nil, "bit \(bit): records lost without a torn tail")
                    #expect(damagedRecord == entries.count - 1, "bit \(bit): only the last record may be torn")
                    outcomes.torn += 1
                } else {
                    outcomes.prefix += 1
                }
            case .failure(let error):
                #expect(error.file == segment, "bit \(bit): \(error)")
                #expect(error.offset != nil, "bit \(bit): \(error)")
                #expect([.corrupt, .badHeader, .unsupportedVersion].contains(error.code), "bit \(bit): \(error)")
                if let damagedRecord, error.code == .corrupt {
                    #expect(error.offset == entries[damagedRecord].offset, "bit \(bit): \(error)")
                    // Everything before the damage is still readable by the inspector.
                    let report = try Journal.inspect(directory: directory)
                    #expect(report.entries.prefix(damagedRecord) == entries.prefix(damagedRecord), "bit \(bit)")
                    #expect(report.verdict == .corrupt)
                }
                outcomes.corrupt += 1
            }
        }
        #expect(outcomes.prefix == 0)  // every bit is covered by a checksum
        #expect(outcomes.torn > 0 && outcomes.corrupt > 0)
    }

    /// The search for valid records after damage tries every offset; it used to compute a
    /// checksum at each one whose bytes read as a fitting length, so one flipped bit in a large
    /// record took minutes to describe (a 16 MB save: over a minute in release). Now bounded.
    @Test func damageInsideALargeRecordIsDescribedQuickly() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let big = payload(11, count: 12 << 20, compressible: false)  // 12 MB stored raw
        do {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            try journal.append(payload(10, count: 100, compressible: false))
            try journal.append(big)
            try journal.append(payload(12, count: 100, compressible: false))
            try journal.close()
        }
        let file = try liveSegments(directory)[0]
        flipBit(file, bit: 8 * (JournalFormat.segmentHeaderSize + 2 * JournalFormat.recordHeaderSize + 100 + 6 << 20))
        let start = ContinuousClock.now
        let report = try Journal.inspect(directory: directory)
        let elapsed = ContinuousClock.now - start
        #expect(report.verdict == .corrupt)  // the small record after it still passes its checksum
        #expect(report.problems.first?.recordsAfter == 1)
        #expect(
            elapsed < atOnceBound, "describing the damage took \(elapsed): it reads the damaged record more than once")
        let salvage = try Journal.salvageableRecords(
            inSegment: file, from: Int64(JournalFormat.segmentHeaderSize + JournalFormat.recordHeaderSize + 100))
        #expect(salvage.count == 1)
        #expect(ContinuousClock.now - start < atOnceBound * 2)
    }

    @Test func checksumMismatchInAMiddleRecordIsCorruptionNamingFileAndOffset() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 5)
        let segment = try liveSegments(directory)[0]
        let third = try Journal.inspect(directory: directory).entries[3]
        flipBit(segment, bit: (Int(third.offset) + 30) * 8)
        #expect {
            _ = try Journal.open(directory: directory)
        } throws: { error in
            guard let error = error as? JournalError else { return false }
            return error.code == .corrupt && error.file == segment && error.offset == third.offset
                && error.message.contains("checksum mismatch") && error.message.contains("2 valid record(s) follow")
        }
    }

    @Test func pointInTimeRecoveryKeepsPrefixAndSavesDroppedBytes() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let written = try writeSmallJournal(directory, count: 10)
        let segment = try liveSegments(directory)[0]
        let pristine = readBytes(segment)
        let damaged = try Journal.inspect(directory: directory).entries[5]  // the 5th transaction
        flipBit(segment, bit: (Int(damaged.offset) + 26) * 8 + 3)
        let journal = try Journal.open(
            directory: directory, options: JournalOptions(durability: .none, recovery: .pointInTime))
        #expect(try journal.records().transactions == Array(written.prefix(4)))
        let report = journal.openReport
        #expect(report.recordsDropped == 5)
        #expect(report.dropped.count == 1)
        let dropped = try #require(report.dropped.first)
        #expect(dropped.file == segment && dropped.offset == damaged.offset)
        #expect(dropped.savedAs.hasPrefix(segment + ".dropped-"))
        var expectedSaved = Array(pristine[Int(damaged.offset)...])
        expectedSaved[26] ^= 1 << 3
        #expect(readBytes(dropped.savedAs) == expectedSaved)
        #expect(permissions(dropped.savedAs) == 0o600)
        try journal.append([7, 7])
        try journal.close()
        // The repaired journal opens cleanly with the strict default, and the saved bytes stay.
        #expect(
            try recordsAfterReopen(directory, options: JournalOptions()).transactions == Array(written.prefix(4)) + [
                [7, 7]
            ])
        #expect(FileManager.default.fileExists(atPath: dropped.savedAs))
    }

    @Test func pointInTimeRecoveryDropsLaterSegmentsWhole() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let options = JournalOptions(durability: .none, segmentSize: 1024)
        var written: [[UInt8]] = []
        do {
            let journal = try Journal.open(directory: directory, options: options)
            for index in 0..<40 {
                written.append(payload(index, count: 100, compressible: false))
                try journal.append(written.last!)
            }
            try journal.close()
        }
        let segments = try liveSegments(directory)
        #expect(segments.count >= 4)
        let before = try Journal.inspect(directory: directory)
        let firstOfSecond = try #require(
            before.entries.firstIndex { $0.file == (segments[1] as NSString).lastPathComponent })
        flipBit(segments[1], bit: (48 + 40) * 8)  // inside the first record of the second segment
        #expect(throws: JournalError.self) { _ = try Journal.open(directory: directory, options: options) }
        var recovering = options
        recovering.recovery = .pointInTime
        let journal = try Journal.open(directory: directory, options: recovering)
        #expect(try journal.records().transactions == Array(written.prefix(firstOfSecond)))
        #expect(journal.openReport.dropped.count == segments.count - 1)
        #expect(journal.openReport.recordsDropped == written.count - firstOfSecond - 1)
        try journal.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(names.filter { $0.contains(".dropped-") }.count == segments.count - 1)
    }

    @Test func unknownSkippableRecordTypeIsSkippedButKeepsItsSequenceNumber() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 2)
        let segment = try liveSegments(directory)[0]
        // 0x80 is the origin record; 0x81 has no meaning yet.
        try appendHandMadeRecord(segment, type: 0x81, payload: Array("from the future".utf8))
        let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        let sequence = try journal.append([42])
        try journal.close()
        #expect(sequence == 5)  // schema 1, transactions 2-3, skipped 4
        let records = try recordsAfterReopen(directory)
        #expect(records.map(\.sequence) == [1, 2, 3, 5])
        let report = try Journal.inspect(directory: directory)
        #expect(report.entries.map(\.type) == [3, 1, 1, 0x81, 1])
        #expect(report.entries[3].kind == nil)
    }

    @Test func badRecordTypeOutsideTheSkippableRangeIsCorruptionEvenAtTheTail() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 2)
        let segment = try liveSegments(directory)[0]
        let offset = readBytes(segment).count
        try appendHandMadeRecord(segment, type: 0x05, payload: [1, 2, 3])
        #expect {
            _ = try Journal.open(directory: directory)
        } throws: { error in
            (error as? JournalError)?.code == .corrupt && (error as? JournalError)?.offset == Int64(offset)
        }
    }

    @Test func missingManifestWithRecordsRefusesToOpen() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 2)
        try FileManager.default.removeItem(atPath: directory + "/MANIFEST")
        #expect(throws: JournalError.self) { _ = try Journal.open(directory: directory) }
    }

    @Test func damagedManifestIsABadHeaderError() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 2)
        flipBit(directory + "/MANIFEST", bit: 20)
        #expect {
            _ = try Journal.open(directory: directory)
        } throws: { error in
            (error as? JournalError)?.code == .badHeader
        }
    }

    func openAndRead(_ directory: String) -> Result<([JournalRecord], JournalOpenReport), JournalError> {
        do throws(JournalError) {
            let journal = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            defer { try? journal.close() }
            return .success((try journal.records(), journal.openReport))
        } catch {
            return .failure(error)
        }
    }

    /// Appends a record built by hand from the spec (header layout, salted CRC32C).
    func appendHandMadeRecord(_ segment: String, type: UInt8, payload: [UInt8]) throws {
        var bytes = readBytes(segment)
        let report = try Journal.inspect(directory: (segment as NSString).deletingLastPathComponent)
        let sequence = (report.entries.last?.sequence ?? 0) + 1
        let salt = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16, as: UInt64.self) }
        var record: [UInt8] = []
        record.appendLittleEndian(UInt32(0))
        record.appendLittleEndian(UInt32(payload.count))
        record.appendLittleEndian(sequence)
        record += [type, 0, 0, 0]
        record.appendLittleEndian(UInt32(payload.count))
        record += payload
        let crc = record.withUnsafeBytes {
            CRC32C.extend(CRC32C.seed(salt: UInt64(littleEndian: salt)), UnsafeRawBufferPointer(rebasing: $0[4...]))
        }
        record.storeLittleEndian(crc, at: 0)
        bytes += record
        writeBytes(segment, bytes)
    }
}
