import Foundation
import Testing

@testable import GraphJournal

/// The journal's encryption at rest: sealed records round-trip, the wrong or a missing key fails
/// the open and changes nothing, and records moved or copied are refused where they are.
@Suite struct EncryptionTests {
    static let key = try! JournalKey(id: "k1", hex: String(repeating: "0123456789abcdef", count: 4))
    static let otherKey = try! JournalKey(id: "k1", hex: String(repeating: "fedcba9876543210", count: 4))

    static func options(
        _ key: JournalKey = key, recovery: JournalOptions.Recovery = .tolerateTornTail
    )
        -> JournalOptions
    {
        JournalOptions(durability: .none, recovery: recovery, encryption: JournalEncryption(key: key))
    }

    @Test func sealedRecordsRoundTripAndHideTheirPayloads() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        let secret = Array("the quick brown fox jumps over the lazy dog, secretly".utf8)
        var written: [[UInt8]] = []
        do {
            let journal = try Journal.open(directory: directory, options: Self.options())
            for i in 0..<20 {
                let bytes = secret + payload(i, count: [0, 1, 13, 80, 200, 5000][i % 6])
                try journal.append(bytes, schema: Array("schema v1".utf8))
                written.append(bytes)
            }
            // A chunked payload, sealed in several units.
            let large = payload(99, count: 5 << 20)
            try journal.append(large)
            written.append(large)
            #expect(journal.keyIdentifiers == ["k1"])
            try journal.close()
        }
        for file in try liveSegments(directory) {
            let bytes = readBytes(file)
            #expect(bytes.firstRange(of: Array("quick brown fox".utf8)) == nil)
            #expect(bytes.firstRange(of: Array("schema v1".utf8)) == nil)
        }
        let records = try recordsAfterReopen(directory, options: Self.options())
        #expect(records.filter { $0.kind == .transaction }.map(\.payload) == written)
        #expect(records.first?.kind == .schema)
        #expect(records.first?.payload == Array("schema v1".utf8))
    }

    @Test func aMissingOrWrongKeyFailsTheOpenAndChangesNothing() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 10, options: Self.options())
        // A torn tail, which a successful open would cut.
        let last = try liveSegments(directory).last!
        writeBytes(last, readBytes(last) + [1, 2, 3])
        let before = try liveSegments(directory).map(readBytes)
        #expect {
            try Journal.open(directory: directory, options: JournalOptions(durability: .none))
        } throws: { ($0 as? JournalError)?.code == .keyUnavailable(keyID: "k1") }
        #expect {
            try Journal.open(directory: directory, options: Self.options(Self.otherKey))
        } throws: { ($0 as? JournalError)?.code == .wrongKey(keyID: "k1") }
        let other = try JournalKey(id: "k2", hex: String(repeating: "ab", count: 32))
        #expect {
            try Journal.open(directory: directory, options: Self.options(other))
        } throws: { ($0 as? JournalError)?.code == .keyUnavailable(keyID: "k1") }
        #expect(try liveSegments(directory).map(readBytes) == before)
        #expect(try recordsAfterReopen(directory, options: Self.options()).count == 11)
    }

    @Test func rotationThroughCompactionRetiresTheOldKey() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 6, options: Self.options())
        let newKey = try JournalKey(id: "k2", hex: String(repeating: "5a", count: 32))
        let both = try JournalEncryption(keys: [newKey, Self.key])
        do {
            let journal = try Journal.open(
                directory: directory, options: JournalOptions(durability: .none, encryption: both))
            try journal.append(Array("after rotation".utf8))
            #expect(journal.keyIdentifiers == ["k1", "k2"])
            try journal.compact(base: [Array("base".utf8)], schema: Array("schema v1".utf8))
            #expect(journal.keyIdentifiers == ["k2"])
            try journal.append(Array("after compaction".utf8))
            try journal.close()
        }
        let records = try recordsAfterReopen(directory, options: Self.options(newKey))
        #expect(
            records.map(\.payload) == [Array("schema v1".utf8), Array("base".utf8), Array("after compaction".utf8)])
    }

    @Test func aRecordCopiedElsewhereInTheJournalIsRefusedWhereItWasPut() throws {
        let directory = temporaryJournalPath()
        defer { removeDirectory(directory) }
        try writeSmallJournal(directory, count: 4, options: Self.options())
        let path = try liveSegments(directory).last!
        var bytes = readBytes(path)
        let header = try SegmentHeader.parse(bytes, file: path).get()
        var records: [ScannedRecord] = []
        _ = RecordCodec.scan(bytes, header: header) {
            records.append($0); return true
        }
        // Record 2's sealed payload copied over record 4's (same length class), renumbered, resealed.
        let copied = records[2]
        var replay = Array(bytes[copied.offset..<copied.end])
        replay.storeLittleEndian(records.last!.sequence + 1, at: JournalFormat.RecordHeaderField.sequence)
        RecordCodec.reseal(&replay, at: 0, seed: header.seed)
        bytes += replay
        writeBytes(path, bytes)
        #expect {
            try Journal.open(directory: directory, options: Self.options())
        } throws: { error in
            let error = error as? JournalError
            return error?.code == .corrupt && error?.message.contains("copied") == true
        }
    }
}
