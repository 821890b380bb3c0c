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
// A crash, a sanitizer report or a broken agreement (a trap) is a finding.

internal import Foundation
internal import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func journalReaderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 4 {
    case 0: FuzzReader.scanSegment(records: bytes)
    case 1: FuzzReader.scanSegment(records: FuzzReader.sealed(bytes))
    case 2: _ = try? Manifest.parse(bytes, file: "MANIFEST")
    default: FuzzReader.openStore(records: data[0] & 0x80 != 0 ? FuzzReader.sealed(bytes) : bytes)
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

    /// Reports a broken agreement on standard error and aborts (libFuzzer saves the input).
    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data(("journal-reader-fuzz: " + message + "\n").utf8))
        abort()
    }
}
