import Foundation
import ObjectGraphTestSupport
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

    @Test func aSegmentSwappedInFromAnotherStoreUnderTheSameKeyIsRefused() throws {
        let ours = temporaryJournalPath("ours")
        let theirs = temporaryJournalPath("theirs")
        defer {
            removeDirectory(ours)
            removeDirectory(theirs)
        }
        var options = Self.options()
        options.segmentSize = 4096
        // The same writes: the same file names and sequence numbers, other identities.
        for directory in [ours, theirs] { try writeSmallJournal(directory, count: 60, options: options) }
        let segments = try liveSegments(ours)
        #expect(segments.count >= 3)
        let swapped = segments[1]
        let name = String(swapped.split(separator: "/").last!)
        writeBytes(swapped, readBytes(theirs + "/" + name))
        for recovery in [JournalOptions.Recovery.tolerateTornTail] {
            #expect {
                try Journal.open(directory: ours, options: Self.options(recovery: recovery))
            } throws: { error in
                let error = error as? JournalError
                return error?.code == .corrupt && error?.message.contains("belongs to another journal") == true
            }
        }
        // Point-in-time recovery keeps our records before the swapped segment, and only them.
        let kept = try recordsAfterReopen(ours, options: Self.options(recovery: .pointInTime))
        let prefix = try recordsAfterReopen(theirs, options: Self.options()).prefix(kept.count)
        #expect(kept.count > 1 && kept.map(\.payload) == prefix.map(\.payload))
    }

    /// A replica seals its own schema records between the records its source sealed: two
    /// writer runs interleave in its journal, which opens again.
    @Test func aReplicaWhoseSourceChangesItsSchemaOpensAgain() throws {
        let source = temporaryJournalPath("source")
        let replica = temporaryJournalPath("replica")
        defer {
            removeDirectory(source)
            removeDirectory(replica)
        }
        let shipped = Locked<[ShippedRecord]>([])
        var sourceOptions = Self.options()
        sourceOptions.onDurable = { records in shipped.withLock { $0 += records } }
        let writer = try Journal.open(directory: source, options: sourceOptions)
        for i in 0..<9 { try writer.append(payload(i, count: 90), schema: Array("schema v\(1 + i / 3)".utf8)) }
        try writer.close()
        var schema: [UInt8]?
        let follower = try Journal.open(directory: replica, options: Self.options())
        for record in shipped.withLock({ $0 }) {
            if record.kind == .schema {
                schema = try record.payload(keyring: follower.keyring)
            } else {
                try follower.append(shipped: record, schema: schema, origin: Array("stream:\(record.sequence)".utf8))
            }
        }
        try follower.close()
        let records = try recordsAfterReopen(replica, options: Self.options())
        #expect(records.filter { $0.kind == .transaction }.map(\.payload) == (0..<9).map { payload($0, count: 90) })
        #expect(records.filter { $0.kind == .schema }.count == 3)
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

/// The seal's primitives against their published vectors, and the seal's own bytes against a
/// record sealed once and kept: a change to either is a change of the format.
@Suite struct EncryptionKnownAnswerTests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0..<($0 + 2)], as: UTF8.self), radix: 16)!
        }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// RFC 5869, appendix A, test case 1 (HKDF-SHA256).
    @Test func hkdfMatchesRFC5869TestCase1() {
        let okm = SealPrimitives.hkdfSHA256(
            key: [UInt8](repeating: 0x0b, count: 22), salt: Self.bytes("000102030405060708090a0b0c"),
            info: Self.bytes("f0f1f2f3f4f5f6f7f8f9"), count: 42)
        #expect(
            Self.hex(okm)
                == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    /// The GCM specification (McGrew and Viega), test case 16: AES-256, 96-bit IV, with
    /// additional authenticated data.
    @Test func aesGCMMatchesTheSpecificationsTestCase16() throws {
        let key = Self.bytes("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let nonce = Self.bytes("cafebabefacedbaddecaf888")
        let plaintext = Self.bytes(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
        )
        let aad = Self.bytes("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let sealed = try #require(SealPrimitives.seal(plaintext, key: key, nonce: nonce, aad: aad))
        #expect(
            Self.hex(Array(sealed.dropLast(16)))
                == "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
        )
        #expect(Self.hex(Array(sealed.suffix(16))) == "76fc6ece0f4e1768cddf8853bb2d551b")
        #expect(
            SealPrimitives.open(
                Array(sealed.dropLast(16)), tag: Array(sealed.suffix(16)), key: key, nonce: nonce, aad: aad)
                == plaintext)
        var wrongTag = Array(sealed.suffix(16))
        wrongTag[0] ^= 1
        #expect(SealPrimitives.open(Array(sealed.dropLast(16)), tag: wrongTag, key: key, nonce: nonce, aad: aad) == nil)
    }

    /// A record sealed with a fixed key, journal identity and salt: its bytes are the format's.
    @Test func aSealedPayloadIsTheFormatsBytes() throws {
        let key = try JournalKey(id: "k1", bytes: Array(0..<32))
        var sealer = Sealer(
            key: key, journalID: SealBytes16(low: 0x0102_0304_0506_0708, high: 0x1112_1314_1516_1718),
            salt: SealBytes16(low: 0x2122_2324_2526_2728, high: 0x3132_3334_3536_3738))
        let inner = Array("hello, sealed journal".utf8)
        var out: [UInt8] = []
        try inner.withUnsafeBytes {
            try sealer.seal(
                $0, type: JournalFormat.RecordType.transaction.rawValue, innerFlags: 0, rawLength: inner.count, to: &out
            )
        }
        #expect(Self.hex(out) == Self.goldenSeal, "the sealed payload changed: \(Self.hex(out))")
        let header = try out.withUnsafeBytes { SealHeader.parse($0) }.get()
        #expect(header.keyID == "k1" && header.counter == 1 && header.size == 52)
        let opened = out.withUnsafeBytes {
            Sealer.open(
                $0, header: header, key: sealer.key, type: JournalFormat.RecordType.transaction.rawValue, innerFlags: 0,
                rawLength: inner.count)
        }
        #expect((try? opened.get()) == inner)
        // The same bytes under another record type do not open: the type is authenticated.
        let retyped = out.withUnsafeBytes {
            Sealer.open(
                $0, header: header, key: sealer.key, type: JournalFormat.RecordType.base.rawValue, innerFlags: 0,
                rawLength: inner.count)
        }
        #expect((try? retyped.get()) == nil)
    }

    static let goldenSeal =
        "01026b310807060504030201181716151413121128272625242322213837363534333231dd069ea728bb2c52010000000000000084ae8cb16bf21b29ab5a3b9a412e2e257388bf09c48244f52b3b354be795db9386f5e94441"

    /// The same record put together from `Docs/JournalFormat.md`'s description alone, with the
    /// primitives: key derivation, header, nonce and authenticated data as documented.
    @Test func aSealedPayloadIsWhatTheFormatDocumentSays() throws {
        let keyBytes = Array(UInt8(0)..<32)
        let journalID = Self.bytes("0807060504030201" + "1817161514131211")
        let salt = Self.bytes("2827262524232221" + "3837363534333231")
        let material = SealPrimitives.hkdfSHA256(
            key: keyBytes, salt: journalID + salt,
            info: Array("objectgraph-journal-seal-1".utf8) + [0] + Array("k1".utf8),
            count: 40)
        let header =
            [1, 2] + Array("k1".utf8) + journalID + salt + Array(material[32..<40]) + [1, 0, 0, 0, 0, 0, 0, 0]
        let inner = Array("hello, sealed journal".utf8)
        let nonce: [UInt8] = [1, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0]
        let aad =
            header + [JournalFormat.RecordType.transaction.rawValue, 0] + [UInt8(inner.count), 0, 0, 0] + [1, 0, 0, 0]
            + [0, 0, 0, 0]
        let sealed = try #require(SealPrimitives.seal(inner, key: Array(material[..<32]), nonce: nonce, aad: aad))
        #expect(Self.hex(header + sealed) == Self.goldenSeal)
    }
}
