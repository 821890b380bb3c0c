// libFuzzer target over the journal's reader, compiled into the GraphJournal module itself
// (`Tools/Fuzz/build.sh`) so that it reaches the parsers directly. Run by `make fuzz`.
//
// The first input byte chooses what the rest is:
//   0  a segment's bytes after a valid header: scanned, every record's payload decompressed
//   1  record specs sealed with correct checksums (so that the LZ4 block and chunk-table
//      decoders see hostile payloads behind a valid CRC): scanned and decompressed
//   2  a MANIFEST
//   3  a whole store (MANIFEST + one log segment holding the rest): the read-only walk and a
//      default open must agree, and point-in-time recovery must open whatever the walk can read
//   4  edits to an encrypted store (a real journal of sealed records, written once): pairs of a
//      2-byte offset and a byte XORed in there, every record's checksum then made valid again,
//      so that the seals' parsers, the tags and the order checks see hostile bytes; a default
//      open and point-in-time recovery with the key must either open or refuse with a key
//      error, never crash, and recovery must open whenever the default open does
// A crash, a sanitizer report or a broken agreement (a trap) is a finding.

internal import Foundation
internal import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func journalReaderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 5 {
    case 0: FuzzReader.scanSegment(records: bytes)
    case 1: FuzzReader.scanSegment(records: FuzzReader.sealed(bytes))
    case 2: _ = try? Manifest.parse(bytes, file: "MANIFEST")
    case 3: FuzzReader.openStore(records: data[0] & 0x80 != 0 ? FuzzReader.sealed(bytes) : bytes)
    default: FuzzReader.openEncryptedStore(edits: bytes)
    }
    return 0
}

enum FuzzReader {
    static let header = SegmentHeader(kind: .log, salt: 0x0123_4567_89AB_CDEF, number: 1, firstSequence: 1)

    /// Scans `records` behind a valid (version 2) header, decompressing every valid record's
    /// payload in order, through the segment's history.
    static func scanSegment(records: [UInt8]) {
        let segment = header.encoded() + records
        let history = RecordHistory(header: header)
        segment.withUnsafeBytes { raw in
            let scan = RecordCodec.scan(raw, header: header) { record in
                _ = history.payload(of: record, in: raw, file: "fuzz")
                return true
            }
            if scan.validEnd > raw.count { fail("scan ended past the segment") }
        }
    }

    /// Turns bytes into records with valid checksums: each spec is a type byte, a flags byte
    /// (its low two bits choose raw, one block, chunks or a history block),
    /// a 2-byte payload length, a 4-byte raw length, then the payload.
    static func sealed(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var at = 0
        var sequence: UInt64 = 1
        while at + 8 <= bytes.count {
            let type = bytes[at],
                flags = [0, JournalFormat.flagCompressed, JournalFormat.flagChunked, JournalFormat.flagHistory][
                    Int(bytes[at + 1] & 0x03)]
            let length = min(Int(bytes[at + 2]) | Int(bytes[at + 3]) << 8, bytes.count - at - 8)
            let raw =
                UInt32(bytes[at + 4]) | UInt32(bytes[at + 5]) << 8 | UInt32(bytes[at + 6]) << 16 | UInt32(
                    bytes[at + 7] & 0x3F) << 24
            let payload = bytes[(at + 8)..<(at + 8 + length)]
            at += 8 + length
            var record: [UInt8] = []
            record.appendLittleEndian(UInt32(0))
            record.appendLittleEndian(UInt32(payload.count))
            record.appendLittleEndian(sequence)
            record.append(type == 0 ? 1 : type)
            record.append(flags)
            record.appendLittleEndian(UInt16(0))
            record.appendLittleEndian(flags == 0 ? UInt32(payload.count) : raw)
            record += payload
            let crc = record.withUnsafeBytes { CRC32C.extend(header.seed, UnsafeRawBufferPointer(rebasing: $0[4...])) }
            record.storeLittleEndian(crc, at: 0)
            out += record
            sequence += 1
        }
        return out
    }

    /// Writes a store of one log holding `records`, and checks that the read-only walk and
    /// the opener agree on it.
    static func openStore(records: [UInt8]) {
        let dir = NSTemporaryDirectory() + "graph-journal-fuzz-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        defer { if getenv("JOURNAL_FUZZ_KEEP") == nil { try? FileManager.default.removeItem(atPath: dir) } }
        guard (try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)) != nil else {
            return
        }
        let log = fileName(1, .log)
        _ = FileManager.default.createFile(
            atPath: dir + "/" + JournalFormat.manifestFileName, contents: Data(Manifest(files: [log]).encoded()))
        _ = FileManager.default.createFile(atPath: dir + "/" + log, contents: Data(header.encoded() + records))

        guard let report = try? Journal.inspect(directory: dir) else {
            fail("the walk could not read a store with a valid MANIFEST")
        }
        var options = JournalOptions(durability: .none)
        let openResult = Result { () throws(JournalError) -> Journal in
            try Journal.open(directory: dir, options: options)
        }
        let opened = try? openResult.get()
        try? opened?.close()
        // The verdict predicts a default open: it opens unless the walk found corruption.
        // (A chunked payload that does not decompress is found by the walk, which
        // decompresses, and by the replay above the journal, not by the opener.)
        let undecompressable = report.problems.contains { $0.message.contains("does not decompress") }
        if !undecompressable, (opened != nil) != (report.verdict != .corrupt) {
            fail("verify's verdict \(report.verdict) and open disagree: \(report.problems); open: \(openResult)")
        }
        options.recovery = .pointInTime
        guard let recovered = try? Journal.open(directory: dir, options: options) else {
            fail("point-in-time recovery failed on a store the walk reads: \(report.problems)")
        }
        try? recovered.close()
    }

    /// The key of the encrypted store of mode 4.
    static let key: JournalKey? = try? JournalKey(id: "fuzz", bytes: [UInt8](repeating: 0x5A, count: 32))

    /// The log segment of an encrypted journal: a schema record and twelve transactions of
    /// assorted sizes (raw, one block), sealed; written once per process.
    static let encryptedLog: [UInt8] = {
        guard let key else { return [] }
        let dir = NSTemporaryDirectory() + "graph-journal-fuzz-sealed-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let options = JournalOptions(durability: .none, encryption: JournalEncryption(key: key))
        guard let journal = try? Journal.open(directory: dir, options: options) else { return [] }
        for i in 0..<12 {
            let text = Array("record \(i) of the encrypted fuzz store; ".utf8)
            _ = try? journal.append((0..<[3, 70, 300][i % 3]).map { text[$0 % text.count] }, schema: [1, 2, 3])
        }
        try? journal.close()
        return (try? Data(contentsOf: URL(fileURLWithPath: dir + "/" + fileName(1, .log)))).map { Array($0) } ?? []
    }()

    /// Mode 4: `edits` applied to ``encryptedLog``, its records' checksums made valid again, then
    /// opened with the key, by default and with point-in-time recovery.
    static func openEncryptedStore(edits: [UInt8]) {
        guard let key, encryptedLog.count > JournalFormat.segmentHeaderSize else { fail("no encrypted store") }
        var log = encryptedLog
        var at = 0
        while at + 3 <= edits.count {
            let offset = JournalFormat.segmentHeaderSize + (Int(edits[at]) | Int(edits[at + 1]) << 8)
            if offset < log.count { log[offset] ^= edits[at + 2] }
            at += 3
        }
        // Every record that still frames gets a valid checksum: the damage is behind it.
        let seed = CRC32C.seed(salt: log.withUnsafeBytes { $0.littleEndian(at: JournalFormat.SegmentHeaderField.salt) })
        var offset = JournalFormat.segmentHeaderSize
        while offset + JournalFormat.recordHeaderSize <= log.count {
            let stored = Int(log.withUnsafeBytes { $0.littleEndian(at: offset + 4, as: UInt32.self) })
            let end = offset + JournalFormat.recordHeaderSize + stored
            guard end <= log.count else { break }
            let crc = log.withUnsafeBytes {
                CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(offset + 4)..<end]))
            }
            log.storeLittleEndian(crc, at: offset)
            offset = end
        }
        let dir = NSTemporaryDirectory() + "graph-journal-fuzz-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        defer { if getenv("JOURNAL_FUZZ_KEEP") == nil { try? FileManager.default.removeItem(atPath: dir) } }
        guard (try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)) != nil else {
            return
        }
        let name = fileName(1, .log)
        _ = FileManager.default.createFile(
            atPath: dir + "/" + JournalFormat.manifestFileName, contents: Data(Manifest(files: [name]).encoded()))
        _ = FileManager.default.createFile(atPath: dir + "/" + name, contents: Data(log))
        var options = JournalOptions(durability: .none, encryption: JournalEncryption(key: key))
        let opened = Result { () throws(JournalError) -> Journal in try Journal.open(directory: dir, options: options) }
        if let journal = try? opened.get() {
            // Every record the open kept reads back, or is reported, never a crash.
            try? journal.forEachRecord { _ in }
            try? journal.close()
        }
        options.recovery = .pointInTime
        let recovered = Result { () throws(JournalError) -> Journal in
            try Journal.open(directory: dir, options: options)
        }
        switch recovered {
        case .success(let journal):
            try? journal.forEachRecord { _ in }
            try? journal.close()
        case .failure(let error):
            switch error.code {
            case .keyUnavailable, .wrongKey, .notEncrypted, .unsupportedVersion, .badHeader: break
            default:
                if case .success = opened { fail("point-in-time recovery failed where a default open did: \(error)") }
            }
        }
    }

    /// Reports a broken agreement on standard error and aborts (libFuzzer saves the input).
    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data(("journal-reader-fuzz: " + message + "\n").utf8))
        abort()
    }
}
