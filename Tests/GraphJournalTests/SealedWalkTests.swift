import Foundation
import Testing

@testable import GraphJournal

/// The read-only walk (`readRecords`, `readPayloads`, `streamPayloads`, `inspect`) on an
/// encrypted journal: with the keyring it lends what `open` reads, streamed or whole; without
/// it it frames and counts the sealed records and lends none of their bytes.
@Suite struct SealedWalkTests {
    static let key = try! JournalKey(id: "walk-1", hex: String(repeating: "0f1e2d3c4b5a6978", count: 4))

    /// A journal of small, compressible and chunked sealed payloads; returns them in order.
    static func write(_ directory: String) throws -> [[UInt8]] {
        let options = JournalOptions(durability: .none, encryption: JournalEncryption(key: key))
        let journal = try Journal.open(directory: directory, options: options)
        var written: [[UInt8]] = []
        for i in 0..<12 {
            let bytes = payload(i, count: [0, 3, 90, 700, 4000, 70_000][i % 6])
            try journal.append(bytes)
            written.append(bytes)
        }
        let large = payload(77, count: 3 << 20)  // chunked inside its seal
        try journal.append(large)
        written.append(large)
        try journal.close()
        return written
    }

    @Test func withTheKeyringTheWalkLendsEveryPayloadOpened() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let written = try Self.write(directory)
        let keyring = JournalKeyring(JournalEncryption(key: Self.key))
        var read: [[UInt8]] = []
        let report = try Journal.readRecords(directory: directory, keyring: keyring) { read.append($0.payload) }
        #expect(read == written)
        #expect(report.verdict == .clean)
        #expect(report.sealedRecordsNotOpened == 0)
        #expect(report.keyIDs == ["walk-1"])
        #expect(report.entries.allSatisfy { $0.sealed && $0.keyID == "walk-1" })
        // Streamed chunk by chunk, and read whole without a window: the same bytes.
        var streamed: [[UInt8]] = []
        _ = try Journal.streamPayloads(directory: directory, keyring: keyring) { _, payload in
            var bytes: [UInt8] = []
            while let piece = payload.next() { bytes.append(contentsOf: piece) }
            if payload.finish() { streamed.append(bytes) }
        }
        #expect(streamed == written)
        var whole: [[UInt8]] = []
        _ = try Journal.readPayloads(directory: directory, io: .system, window: nil, keyring: keyring) {
            whole.append(Array($1))
        }
        #expect(whole == written)
    }

    @Test func withoutAKeyringSealedRecordsAreFramedAndCountedNotLent() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let written = try Self.write(directory)
        var lent = 0
        let report = try Journal.readRecords(directory: directory) { _ in lent += 1 }
        #expect(lent == 0)
        #expect(report.verdict == .clean)
        #expect(report.entries.count == written.count)
        #expect(report.sealedRecordsNotOpened == written.count)
        #expect(report.keyIDs == ["walk-1"])
    }

    @Test func aWrongKeyStopsTheWalkNamingTheKey() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        _ = try Self.write(directory)
        let wrong = try JournalKey(id: "walk-1", hex: String(repeating: "11", count: 32))
        do {
            _ = try Journal.inspect(directory: directory, keyring: JournalKeyring(JournalEncryption(key: wrong)))
            Issue.record("a wrong key was accepted")
        } catch {
            #expect(error.code == .wrongKey(keyID: "walk-1"))
        }
        let other = try JournalKey(id: "walk-2", hex: String(repeating: "11", count: 32))
        do {
            _ = try Journal.inspect(directory: directory, keyring: JournalKeyring(JournalEncryption(key: other)))
            Issue.record("a missing key was accepted")
        } catch {
            #expect(error.code == .keyUnavailable(keyID: "walk-1"))
        }
    }

    @Test func aSealedRecordCopiedOutOfItsWritersOrderIsCorruptionWithOrWithoutTheKey() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        _ = try Self.write(directory)
        let report = try Journal.inspect(directory: directory)
        // Append a copy of an earlier record, renumbered to continue the sequence.
        let entry = report.entries[2]
        let last = report.entries.last!
        let source = readBytes(directory + "/" + entry.file)
        var record = Array(source[Int(entry.offset)..<Int(entry.endOffset)])
        record.storeLittleEndian(last.sequence + 1, at: JournalFormat.RecordHeaderField.sequence)
        let segment = readBytes(directory + "/" + last.file)
        let header = try segment.withUnsafeBytes { try SegmentHeader.parse($0, file: last.file).get() }
        RecordCodec.reseal(&record, at: 0, seed: header.seed)
        let copied = segment[..<Int(last.endOffset)] + record
        try Data(copied).write(to: URL(fileURLWithPath: directory + "/" + last.file))
        for keyring in [nil, JournalKeyring(JournalEncryption(key: Self.key))] {
            let damaged = try Journal.inspect(directory: directory, keyring: keyring)
            #expect(damaged.verdict == .corrupt)
            #expect(damaged.problems.contains { $0.message.contains("it was copied") }, "\(damaged.problems)")
        }
    }
}
