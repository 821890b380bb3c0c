import Foundation
import Testing

@testable import GraphJournal

/// Records that pass their checksum but that the readers once judged differently: found by
/// the reader's fuzz target (`Tools/Fuzz`), kept here as tests.
@Suite struct JournalReaderAgreementTests {
    /// A log holding `records` (type, flags, raw length, stored payload) with valid checksums.
    static func writeSealedLog(
        _ directory: String, _ records: [(type: UInt8, flags: UInt8, raw: UInt32, payload: [UInt8])]
    ) throws {
        let header = SegmentHeader(kind: .log, salt: 42, number: 1, firstSequence: 1)
        var bytes = header.encoded()
        for (i, r) in records.enumerated() {
            var record: [UInt8] = []
            record.appendLittleEndian(UInt32(0))
            record.appendLittleEndian(UInt32(r.payload.count))
            record.appendLittleEndian(UInt64(i + 1))
            record.append(r.type)
            record.append(r.flags)
            record.appendLittleEndian(UInt16(0))
            record.appendLittleEndian(r.raw)
            record += r.payload
            let crc = record.withUnsafeBytes { CRC32C.extend(header.seed, UnsafeRawBufferPointer(rebasing: $0[4...])) }
            record.storeLittleEndian(crc, at: 0)
            bytes += record
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        writeBytes(directory + "/" + JournalFormat.manifestFileName, Manifest(files: [fileName(1, .log)]).encoded())
        writeBytes(directory + "/" + fileName(1, .log), bytes)
    }

    @Test func aCompressedRecordNotShorterThanItsPayloadIsCorruptForEveryReader() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        // Flag "one LZ4 block" with a raw length of 0: no writer stores that (a compressed
        // form is kept only when strictly shorter); one reader decoded it as empty, another
        // refused it.
        try Self.writeSealedLog(
            directory,
            [
                (type: 3, flags: 0, raw: 9, payload: Array("schema v1".utf8)),
                (type: 1, flags: JournalFormat.flagCompressed, raw: 0, payload: [0x10, 0x41, 0x42, 0x43]),
                (type: 1, flags: 0, raw: 2, payload: [1, 2]),
            ])
        let report = try Journal.inspect(directory: directory)
        #expect(report.verdict == .corrupt)
        #expect(report.problems.first?.message.contains("record lengths are inconsistent") == true)
        #expect(throws: JournalError.self) {
            try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        }
        let recovered = try Journal.open(
            directory: directory, options: JournalOptions(durability: .none, recovery: .pointInTime))
        #expect(try recovered.records().count == 1)
        try recovered.close()
    }

    @Test func aLastSchemaRecordThatDoesNotDecompressIsDamageThatPointInTimeRecoveryDrops() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        // An LZ4 block whose match offset points before the start of the output.
        try Self.writeSealedLog(
            directory,
            [
                (type: 3, flags: 0, raw: 9, payload: Array("schema v1".utf8)),
                (type: 1, flags: 0, raw: 2, payload: [1, 2]),
                (type: 3, flags: JournalFormat.flagCompressed, raw: 64, payload: [0x1F, 0x41, 0xFF, 0x7F, 0x00, 0x00]),
                (type: 1, flags: 0, raw: 2, payload: [3, 4]),
            ])
        #expect(try Journal.inspect(directory: directory).verdict == .corrupt)
        do {
            _ = try Journal.open(directory: directory, options: JournalOptions(durability: .none))
            Issue.record("a default open succeeded")
        } catch {
            #expect(error.code == .corrupt)
            #expect(error.sequence == 3)
            #expect(error.offset != nil)
        }
        let recovered = try Journal.open(
            directory: directory, options: JournalOptions(durability: .none, recovery: .pointInTime))
        #expect(try recovered.records().map(\.sequence) == [1, 2])
        #expect(recovered.schema == Array("schema v1".utf8), "the schema in force is the one before the dropped record")
        #expect(recovered.openReport.recordsDropped == 2)
        try recovered.close()
    }
}
