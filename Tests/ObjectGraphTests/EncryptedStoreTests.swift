import Foundation
import GraphJournal
import ObjectGraph
import Testing

/// A store encrypted at rest: what it saves reads back, nothing of it is in its files in the
/// clear, a wrong or missing key changes nothing, a rotation needs the old key until the
/// compaction, and a record altered behind a valid checksum is damage at that record.
@Suite struct EncryptedStoreTests {
    static func key(_ id: String, _ byte: UInt8) throws -> JournalKey {
        try JournalKey(id: id, bytes: [UInt8](repeating: byte, count: 32))
    }

    static func options(
        _ encryption: JournalEncryption?, recovery: JournalOptions.Recovery = .tolerateTornTail
    )
        -> StoreOptions
    {
        var options = StoreOptions(durability: .none, recovery: recovery)
        options.encryption = encryption
        options.autoCompactionRatio = nil
        return options
    }

    static func fill(_ store: ObjectStore, from first: Int, count: Int) throws {
        for i in first..<(first + count) {
            try store.context.insert(Person(id: Int64(i), name: "Confidential Person \(i)", email: "p\(i)@example.com"))
            try store.context.save()
        }
    }

    static func names(_ store: ObjectStore) throws -> [String] {
        try store.context.objects(of: Person.self).map(\.name).sorted()
    }

    static func files(_ directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "log" || $0.pathExtension == "base" }
    }

    @Test func anEncryptedStoreReadsBackAndKeepsNothingInTheClear() throws {
        let directory = temporaryStoreDirectory("encrypted")
        defer { try? FileManager.default.removeItem(at: directory) }
        let encryption = JournalEncryption(key: try Self.key("k1", 7))
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
            try Self.fill(store, from: 0, count: 30)
            try store.close()
        }
        for file in try Self.files(directory) {
            let bytes = try Data(contentsOf: file)
            #expect(bytes.range(of: Data("Confidential".utf8)) == nil, "\(file.lastPathComponent) holds plaintext")
            #expect(bytes.range(of: Data("Person".utf8)) == nil, "\(file.lastPathComponent) holds the schema")
        }
        let store = try ObjectStore.open(
            at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
        #expect(try Self.names(store) == (0..<30).map { "Confidential Person \($0)" }.sorted())
        try store.compact()
        try store.close()
        let reopened = try ObjectStore.open(
            at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
        #expect(try Self.names(reopened).count == 30)
        try reopened.close()
    }

    @Test func aWrongOrMissingKeyFailsTheOpenAndChangesNothing() throws {
        let directory = temporaryStoreDirectory("encrypted-wrong")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self),
                options: Self.options(JournalEncryption(key: try Self.key("k1", 7))))
            try Self.fill(store, from: 0, count: 5)
            try store.close()
        }
        let before = try Self.files(directory).map { try Data(contentsOf: $0) }
        let attempts: [(JournalEncryption?, JournalError.Code)] = [
            (nil, .keyUnavailable(keyID: "k1")),
            (JournalEncryption(key: try Self.key("k1", 8)), .wrongKey(keyID: "k1")),
            (JournalEncryption(key: try Self.key("k2", 7)), .keyUnavailable(keyID: "k1")),
        ]
        for (encryption, code) in attempts {
            let error = try #require(throws: StoreError.self) {
                try ObjectStore.open(at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
            }
            #expect(error.journalError?.code == code, "\(error)")
        }
        #expect(try Self.files(directory).map { try Data(contentsOf: $0) } == before)
    }

    @Test func aPlainStoreIsEncryptedOnceThroughACompaction() throws {
        let directory = temporaryStoreDirectory("encrypt-existing")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try ObjectStore.open(at: directory, schema: try Schema(Person.self), options: Self.options(nil))
            try Self.fill(store, from: 0, count: 5)
            try store.close()
        }
        let key = try Self.key("k1", 7)
        let refused = try #require(throws: StoreError.self) {
            try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(JournalEncryption(key: key)))
        }
        #expect(refused.journalError?.code == .notEncrypted)
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self),
                options: Self.options(JournalEncryption(key: key, plaintextRecords: .accept)))
            try store.compact()
            try Self.fill(store, from: 5, count: 2)
            try store.close()
        }
        let store = try ObjectStore.open(
            at: directory, schema: try Schema(Person.self), options: Self.options(JournalEncryption(key: key)))
        #expect(try Self.names(store).count == 7)
        try store.close()
    }

    @Test func aRotationNeedsTheOldKeyOnlyUntilTheCompaction() throws {
        let directory = temporaryStoreDirectory("encrypted-rotation")
        defer { try? FileManager.default.removeItem(at: directory) }
        let old = try Self.key("2026-05", 1)
        let new = try Self.key("2026-11", 2)
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(JournalEncryption(key: old)))
            try Self.fill(store, from: 0, count: 5)
            try store.close()
        }
        let both = try JournalEncryption(keys: [new, old])
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(both))
            try Self.fill(store, from: 5, count: 5)
            try store.close()
        }
        // Records of both keys: the new key alone does not open it.
        let error = try #require(throws: StoreError.self) {
            try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(JournalEncryption(key: new)))
        }
        #expect(error.journalError?.code == .keyUnavailable(keyID: "2026-05"))
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(both))
            try store.compact()
            try store.close()
        }
        let store = try ObjectStore.open(
            at: directory, schema: try Schema(Person.self), options: Self.options(JournalEncryption(key: new)))
        #expect(try Self.names(store).count == 10)
        try store.close()
    }

    @Test func aRecordAlteredBehindAValidChecksumIsDamageAtThatRecord() throws {
        let directory = temporaryStoreDirectory("encrypted-tampered")
        defer { try? FileManager.default.removeItem(at: directory) }
        let encryption = JournalEncryption(key: try Self.key("k1", 7))
        do {
            let store = try ObjectStore.open(
                at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
            try Self.fill(store, from: 0, count: 10)
            try store.close()
        }
        // Record 8 (the schema is record 1, save i record i + 2: save 6): one ciphertext bit
        // flipped and the checksum computed again, as an attacker who knows the format can.
        let log = try #require(try Self.files(directory).first { $0.pathExtension == "log" })
        var bytes = [UInt8](try Data(contentsOf: log))
        var offset = 48
        var target: (offset: Int, length: Int)?
        while offset + 24 <= bytes.count {
            let length = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6]) << 16
            let sequence = Int(bytes[offset + 8])
            if sequence == 8 { target = (offset, length) }
            offset += 24 + length
        }
        let record = try #require(target)
        bytes[record.offset + 24 + record.length - 20] ^= 0x10
        let salt = bytes[16..<24].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        let crc = crc32c(seed: salt, Array(bytes[(record.offset + 4)..<(record.offset + 24 + record.length)]))
        for i in 0..<4 { bytes[record.offset + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        try Data(bytes).write(to: log)

        let refused = try #require(throws: StoreError.self) {
            try ObjectStore.open(at: directory, schema: try Schema(Person.self), options: Self.options(encryption))
        }
        #expect(refused.journalError?.code == .corrupt, "\(refused)")
        #expect("\(refused)".contains("seal does not open"), "\(refused)")
        let recovered = try ObjectStore.open(
            at: directory, schema: try Schema(Person.self), options: Self.options(encryption, recovery: .pointInTime))
        #expect(try Self.names(recovered) == (0..<6).map { "Confidential Person \($0)" }.sorted())
        try recovered.close()
    }
}

/// CRC32C (Castagnoli) of `bytes` seeded as the journal seeds a record's checksum: with the
/// segment's salt as 8 little-endian bytes first.
func crc32c(seed salt: UInt64, _ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    let input = (0..<8).map { UInt8(truncatingIfNeeded: salt >> (8 * UInt64($0))) } + bytes
    for byte in input {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}
