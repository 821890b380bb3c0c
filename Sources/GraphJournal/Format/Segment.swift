/// A parsed segment header.
struct SegmentHeader: Sendable, Hashable {
    var kind: JournalFormat.SegmentKind
    var salt: UInt64
    var number: UInt64
    var firstSequence: UInt64
    /// The format version: ``JournalFormat/formatVersion`` for new logs, 1 for bases and for
    /// segments written before version 2.
    var version: UInt16 = JournalFormat.formatVersion

    /// Whether the segment's records may use a compression history (``RecordHistory``): version
    /// 2 only (an encrypted journal's version 3 segments have none).
    var usesHistory: Bool { version == 2 }

    /// The CRC seed of the segment's records.
    var seed: UInt32 { CRC32C.seed(salt: salt) }

    /// The 48 header bytes.
    func encoded() -> [UInt8] {
        typealias F = JournalFormat.SegmentHeaderField
        var bytes = JournalFormat.segmentMagic
        bytes.appendLittleEndian(version)
        bytes.append(JournalFormat.checksumCRC32C)
        bytes.append(kind.rawValue)
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(salt)
        bytes.appendLittleEndian(number)
        bytes.appendLittleEndian(firstSequence)
        bytes.appendLittleEndian(UInt32(0))
        assert(bytes.count == F.crc)
        bytes.appendLittleEndian(CRC32C.checksum(bytes))
        assert(bytes.count == JournalFormat.segmentHeaderSize)
        return bytes
    }

    /// Parses and checks a header; `file` names the file in errors.
    static func parse(_ bytes: UnsafeRawBufferPointer, file: String) -> Result<SegmentHeader, JournalError> {
        typealias F = JournalFormat.SegmentHeaderField
        guard bytes.count >= JournalFormat.segmentHeaderSize else {
            return .failure(
                JournalError(
                    .badHeader,
                    "file is \(bytes.count) bytes, shorter than the \(JournalFormat.segmentHeaderSize)-byte segment header",
                    file: file, offset: 0))
        }
        guard bytes.prefix(8).elementsEqual(JournalFormat.segmentMagic) else {
            return .failure(JournalError(.badHeader, "not a journal segment (bad magic)", file: file, offset: 0))
        }
        let crc: UInt32 = bytes.littleEndian(at: F.crc)
        guard crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<F.crc])) else {
            return .failure(
                JournalError(.badHeader, "segment header checksum mismatch", file: file, offset: Int64(F.crc)))
        }
        let version: UInt16 = bytes.littleEndian(at: F.version)
        guard JournalFormat.readableVersions.contains(version) else {
            return .failure(
                JournalError(
                    .unsupportedVersion,
                    "format version \(version); this code reads versions \(JournalFormat.readableVersions.lowerBound) to \(JournalFormat.readableVersions.upperBound)",
                    file: file, offset: Int64(F.version)))
        }
        guard bytes[F.checksum] == JournalFormat.checksumCRC32C else {
            return .failure(
                JournalError(
                    .unsupportedVersion, "checksum algorithm \(bytes[F.checksum]) is not CRC32C (1)", file: file,
                    offset: Int64(F.checksum)))
        }
        guard let kind = JournalFormat.SegmentKind(rawValue: bytes[F.kind]) else {
            return .failure(
                JournalError(
                    .unsupportedVersion, "unknown segment kind \(bytes[F.kind])", file: file, offset: Int64(F.kind)))
        }
        guard bytes.littleEndian(at: F.flags, as: UInt32.self) == 0,
            bytes.littleEndian(at: F.reserved, as: UInt32.self) == 0
        else {
            return .failure(
                JournalError(
                    .unsupportedVersion, "segment header has unknown flags", file: file, offset: Int64(F.flags)))
        }
        return .success(
            SegmentHeader(
                kind: kind, salt: bytes.littleEndian(at: F.salt), number: bytes.littleEndian(at: F.number),
                firstSequence: bytes.littleEndian(at: F.firstSequence), version: version))
    }

    /// Parses and checks the header at the start of a segment file's bytes held in an array;
    /// see ``parse(_:file:)-(UnsafeRawBufferPointer,_)``.
    static func parse(_ bytes: [UInt8], file: String) -> Result<SegmentHeader, JournalError> {
        bytes.withUnsafeBytes { parse($0, file: file) }
    }
}

/// One record as found in a segment (its payload stays in the segment's bytes).
struct ScannedRecord: Sendable, Hashable {
    var offset: Int
    var sequence: UInt64
    var type: UInt8
    /// One LZ4 block (flag bit 0).
    var compressed: Bool
    /// Chunks (flag bit 1, ``ChunkedPayload``).
    var chunked: Bool = false
    /// One LZ4 block that may copy from the segment's history (flag bit 2, ``RecordHistory``).
    var history: Bool = false
    /// Sealed (flag bit 3, ``SealFormat``): `compressed` and `chunked` are then false, and
    /// ``sealedFlags`` says how the stored bytes inside the seal are stored.
    var sealed: Bool = false
    /// The flags of the stored bytes inside a seal (bit 0 or 1, or none).
    var sealedFlags: UInt8 = 0
    var storedLength: Int
    var rawLength: Int

    var payloadRange: Range<Int> {
        (offset + JournalFormat.recordHeaderSize)..<(offset + JournalFormat.recordHeaderSize + storedLength)
    }
    var end: Int { payloadRange.upperBound }
}

/// Where and why a segment's records stop being valid.
struct SegmentDamage: Sendable, Hashable {
    /// The offset of the first byte that is not part of a valid record.
    var offset: Int
    var reason: String
    /// The offset of the first valid record after the damage; nil when none follows (a
    /// torn tail if this is the last segment).
    var resyncOffset: Int?
    /// Valid-looking records found after the damage (what point-in-time recovery drops).
    var recordsAfter: Int
    /// The damaged record's checksum matched (it is not a torn write).
    var checksumValid = false
    /// The damage is a whole record that checks but cannot be read
    /// (``JournalOptions/UnreadableRecord``): dropping it drops one more checked record.
    var damagedRecordIsValid = false

    /// The checked records that point-in-time recovery drops from the damage on.
    var recordsDropped: Int { recordsAfter + (damagedRecordIsValid ? 1 : 0) }

    /// Whether this can be a torn tail: nothing valid follows and the bytes are not a
    /// complete, checksummed record. Only the last log segment may end torn.
    var couldBeTornTail: Bool { resyncOffset == nil && !checksumValid }
}

/// Encoding and scanning of records.
enum RecordCodec {
    /// Appends one record to `out`.
    ///
    /// - Parameter history: the active segment's history (a version 2 log), which the payload
    ///   joins when it is small enough; a transaction or base payload is then stored as a block
    ///   compressed against it when that is shorter (flag bit 2). Nil: no history.
    /// - Returns: the number of bytes the payload takes on disk.
    @discardableResult
    static func append(
        to out: inout [UInt8], seed: UInt32, sequence: UInt64,
        type: JournalFormat.RecordType, payload: UnsafeRawBufferPointer, history: HistoryEncoder? = nil
    ) -> Int {
        typealias F = JournalFormat.RecordHeaderField
        let start = out.count
        out.appendLittleEndian(UInt32(0))  // CRC, filled below
        out.appendLittleEndian(UInt32(0))  // stored length, filled below
        out.appendLittleEndian(sequence)
        out.append(type.rawValue)
        out.append(0)  // flags, filled below
        out.appendLittleEndian(UInt16(0))
        out.appendLittleEndian(UInt32(payload.count))
        // Compressed straight into `out`, kept only when smaller than the payload; a large
        // payload in chunks compressed in parallel.
        var stored = 0
        // Every payload that joins the history is added to it, whether its block is kept or not.
        let historyBlock = history?.add(payload)
        if let historyBlock, type == .transaction || type == .base {
            if historyBlock.count < payload.count {
                out.append(contentsOf: historyBlock)
                stored = historyBlock.count
                out[start + F.flags] = JournalFormat.flagHistory
            }
        } else if payload.count >= JournalFormat.chunkedThreshold {
            if let chunked = ChunkedPayload.append(payload, to: &out) {
                stored = chunked
                out[start + F.flags] = JournalFormat.flagChunked
            }
        } else if payload.count >= JournalFormat.compressionThreshold {
            stored = LZ4.appendBlock(payload, to: &out, limit: payload.count - 1)
            if stored > 0 { out[start + F.flags] = JournalFormat.flagCompressed }
        }
        if stored == 0 {
            out.append(contentsOf: payload)
            stored = payload.count
        }
        out.storeLittleEndian(UInt32(stored), at: start + F.storedLength)
        let crc = out.withUnsafeBytes { CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(start + 4)...])) }
        out.storeLittleEndian(crc, at: start)
        return stored
    }

    /// Appends one record whose payload an array holds; see
    /// ``append(to:seed:sequence:type:payload:)-(_,_,_,_,UnsafeRawBufferPointer)``.
    ///
    /// - Returns: the number of bytes the payload takes on disk.
    @discardableResult
    @inline(__always)
    static func append(
        to out: inout [UInt8], seed: UInt32, sequence: UInt64, type: JournalFormat.RecordType, payload: [UInt8],
        history: HistoryEncoder? = nil
    ) -> Int {
        payload.withUnsafeBytes {
            append(to: &out, seed: seed, sequence: sequence, type: type, payload: $0, history: history)
        }
    }

    /// Appends the header and chunk table of a chunked record whose chunks (`chunked.blocks`)
    /// the caller writes right after them; the CRC covers the chunks too. The bytes are those
    /// ``append(to:seed:sequence:type:payload:)`` writes for the same payload.
    static func appendChunkedHeader(
        to out: inout [UInt8], seed: UInt32, sequence: UInt64, type: JournalFormat.RecordType,
        _ chunked: PayloadStream.Stored
    ) {
        typealias F = JournalFormat.RecordHeaderField
        let start = out.count
        out.appendLittleEndian(UInt32(0))  // CRC, filled below
        out.appendLittleEndian(UInt32(chunked.storedCount))
        out.appendLittleEndian(sequence)
        out.append(type.rawValue)
        out.append(JournalFormat.flagChunked)
        out.appendLittleEndian(UInt16(0))
        out.appendLittleEndian(UInt32(chunked.rawCount))
        out.append(contentsOf: chunked.table)
        var crc = out.withUnsafeBytes {
            CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: $0[(start + F.crc + 4)...]))
        }
        for block in chunked.blocks { crc = block.withUnsafeBytes { CRC32C.extend(crc, $0) } }
        out.storeLittleEndian(crc, at: start + F.crc)
    }

    /// Checks the record at `offset`; returns it or why it is not valid.
    static func record(
        in bytes: UnsafeRawBufferPointer, at offset: Int, seed: UInt32, end: Int
    ) -> Result<ScannedRecord, RecordProblem> {
        typealias F = JournalFormat.RecordHeaderField
        let available = end - offset
        guard available >= JournalFormat.recordHeaderSize else {
            return .failure(
                RecordProblem("incomplete record header (\(available) of \(JournalFormat.recordHeaderSize) bytes)"))
        }
        let storedLength = Int(bytes.littleEndian(at: offset + F.storedLength, as: UInt32.self))
        guard storedLength <= available - JournalFormat.recordHeaderSize else {
            return .failure(RecordProblem("record of \(storedLength) payload bytes extends past the end of the file"))
        }
        let recordEnd = offset + JournalFormat.recordHeaderSize + storedLength
        let stored: UInt32 = bytes.littleEndian(at: offset + F.crc)
        let actual = CRC32C.extend(seed, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<recordEnd]))
        guard stored == actual else {
            return .failure(RecordProblem("checksum mismatch"))
        }
        if let problem = fieldProblem(in: bytes, at: offset, storedLength: storedLength) {
            return .failure(RecordProblem(problem.message, checksumValid: true))
        }
        let flags = bytes[offset + F.flags]
        let sealed = flags & JournalFormat.flagSealed != 0
        return .success(
            ScannedRecord(
                offset: offset, sequence: bytes.littleEndian(at: offset + F.sequence), type: bytes[offset + F.type],
                compressed: !sealed && flags & JournalFormat.flagCompressed != 0,
                chunked: !sealed && flags & JournalFormat.flagChunked != 0,
                history: flags & JournalFormat.flagHistory != 0, sealed: sealed,
                sealedFlags: sealed ? flags & ~JournalFormat.flagSealed : 0, storedLength: storedLength,
                rawLength: Int(bytes.littleEndian(at: offset + F.rawLength, as: UInt32.self))))
    }

    /// A header field no valid record has.
    private enum FieldProblem {
        case flags(UInt8)
        case type(UInt8)
        case lengths(stored: Int, raw: Int)

        var message: String {
            switch self {
            case .flags(let flags): "record has unknown flags 0x\(String(flags, radix: 16))"
            case .type(let type): "unknown record type \(type) (not in the skippable range 0x80...0xFF)"
            case .lengths(let stored, let raw): "record lengths are inconsistent (stored \(stored), raw \(raw))"
            }
        }
    }

    /// The checks of the header at `offset` besides its length fitting and its checksum:
    /// flags (at most one storage bit, the history only on transaction and base records, reserved
    /// zero), type, and lengths consistent
    /// with the flags. ``record(in:at:seed:end:)`` makes them after the checksum (a failure
    /// then is a writer's, not a torn write); ``isPlausibleHeader(in:at:end:)`` before it.
    private static func fieldProblem(
        in bytes: UnsafeRawBufferPointer, at offset: Int, storedLength: Int
    ) -> FieldProblem? {
        typealias F = JournalFormat.RecordHeaderField
        let flags = bytes[offset + F.flags]
        let type = bytes[offset + F.type]
        let sealed = flags & JournalFormat.flagSealed != 0
        let storage = flags & ~JournalFormat.flagSealed
        // At most one storage bit; the history only for transaction and base records, never sealed.
        let single =
            storage == 0 || storage == JournalFormat.flagCompressed || storage == JournalFormat.flagChunked
            || (!sealed && storage == JournalFormat.flagHistory
                && (type == JournalFormat.RecordType.transaction.rawValue
                    || type == JournalFormat.RecordType.base.rawValue))
        guard single, bytes.littleEndian(at: offset + F.reserved, as: UInt16.self) == 0 else { return .flags(flags) }
        guard JournalFormat.RecordType(rawValue: type) != nil || JournalFormat.skippableRecordTypes.contains(type)
        else {
            return .type(type)
        }
        let rawLength = Int(bytes.littleEndian(at: offset + F.rawLength, as: UInt32.self))
        // A compressed form is only ever stored when it is strictly shorter than the payload; a
        // seal's lengths are checked when it is opened.
        let lengthsHold =
            sealed
            ? rawLength <= JournalFormat.maxPayloadSize && storedLength >= SealFormat.smallestSealed
            : flags == 0
                ? rawLength == storedLength
                : rawLength <= JournalFormat.maxPayloadSize && storedLength > 0 && storedLength < rawLength
        guard lengthsHold else {
            return .lengths(stored: storedLength, raw: rawLength)
        }
        return nil
    }

    /// Walks the records of a segment from just after its header.
    ///
    /// Every record must be valid and numbered `firstSequence`, `firstSequence + 1`, ... .
    /// At the first that is not, scanning stops and the damage is described, with a search
    /// for any valid record after it (to tell a torn tail from corruption).
    ///
    /// - Parameter start: where to start, when records before it were already walked (by a
    ///   streaming reader); the header's end by default.
    /// - Parameter sequence: the sequence number expected at `start`; the header's first by
    ///   default.
    /// - Parameter body: called for each valid record with the segment's bytes; return false
    ///   to stop early.
    static func scan(
        _ bytes: UnsafeRawBufferPointer, header: SegmentHeader, end: Int? = nil,
        from start: Int = JournalFormat.segmentHeaderSize, sequence firstSequence: UInt64? = nil,
        unreadable: JournalOptions.UnreadableRecord? = nil,
        judge: RecordJudge? = nil,
        _ body: (ScannedRecord) -> Bool = { _ in true }
    ) -> (validEnd: Int, nextSequence: UInt64, damage: SegmentDamage?) {
        let end = end ?? bytes.count
        let seed = header.seed
        var offset = start
        var sequence = firstSequence ?? header.firstSequence
        while offset < end {
            switch record(in: bytes, at: offset, seed: seed, end: end) {
            case .success(let record):
                guard record.sequence == sequence else {
                    var damage = describe(
                        bytes, damageAt: offset, seed: seed, end: end,
                        reason: "sequence \(record.sequence) where \(sequence) was expected",
                        searchFrom: record.end)
                    damage.checksumValid = true
                    return (offset, sequence, damage)
                }
                if let unreadable, unreadable.sequence == record.sequence {
                    var damage = describe(
                        bytes, damageAt: offset, seed: seed, end: end,
                        reason: "\(unreadable.reason) (the record passes its checksum)",
                        searchFrom: record.end)
                    damage.checksumValid = true
                    damage.damagedRecordIsValid = true
                    return (offset, sequence, damage)
                }
                if let judge, let reason = judge.reason(record) {
                    var damage = describe(
                        bytes, damageAt: offset, seed: seed, end: end, reason: reason, searchFrom: record.end)
                    damage.checksumValid = true
                    damage.damagedRecordIsValid = true
                    return (offset, sequence, damage)
                }
                if !body(record) { return (record.end, sequence + 1, nil) }
                offset = record.end
                sequence += 1
            case .failure(let problem):
                var damage = describe(
                    bytes, damageAt: offset, seed: seed, end: end, reason: problem.reason, searchFrom: offset + 1)
                damage.checksumValid = problem.checksumValid
                return (offset, sequence, damage)
            }
        }
        return (offset, sequence, nil)
    }

    /// Scans a segment file's bytes held in an array; see
    /// ``scan(_:header:end:from:sequence:unreadable:_:)-(UnsafeRawBufferPointer,_,_,_,_,_,_)``.
    static func scan(
        _ bytes: [UInt8], header: SegmentHeader, end: Int? = nil,
        from start: Int = JournalFormat.segmentHeaderSize, sequence firstSequence: UInt64? = nil,
        unreadable: JournalOptions.UnreadableRecord? = nil,
        judge: RecordJudge? = nil,
        _ body: (ScannedRecord) -> Bool = { _ in true }
    ) -> (validEnd: Int, nextSequence: UInt64, damage: SegmentDamage?) {
        bytes.withUnsafeBytes { raw in
            scan(
                raw, header: header, end: end, from: start, sequence: firstSequence, unreadable: unreadable,
                judge: judge, body)
        }
    }

    /// Whether the header at `offset` passes every check ``record(in:at:seed:end:)`` makes
    /// besides the checksum: a necessary condition for a valid record, decided from 24 bytes.
    ///
    /// A search for valid records after damage tries every byte offset. Computing the
    /// checksum at each one costs up to the rest of the file whenever the bytes there read as
    /// a length that fits, which made one flipped bit in a 16 MB record take minutes to
    /// describe (quadratic); these checks reject nearly every offset first.
    static func isPlausibleHeader(in bytes: UnsafeRawBufferPointer, at offset: Int, end: Int) -> Bool {
        guard end - offset >= JournalFormat.recordHeaderSize else { return false }
        let storedLength = Int(
            bytes.littleEndian(at: offset + JournalFormat.RecordHeaderField.storedLength, as: UInt32.self))
        return storedLength <= end - offset - JournalFormat.recordHeaderSize
            && fieldProblem(in: bytes, at: offset, storedLength: storedLength) == nil
    }

    /// Looks for valid records after damage at `offset`.
    private static func describe(
        _ bytes: UnsafeRawBufferPointer, damageAt offset: Int, seed: UInt32, end: Int,
        reason: String, searchFrom: Int
    ) -> SegmentDamage {
        var resync: Int?
        var count = 0
        var position = searchFrom
        while position + JournalFormat.recordHeaderSize <= end {
            if isPlausibleHeader(in: bytes, at: position, end: end),
                case .success(let record) = record(in: bytes, at: position, seed: seed, end: end)
            {
                if resync == nil { resync = position }
                count += 1
                position = record.end
            } else {
                position += 1
            }
        }
        return SegmentDamage(offset: offset, reason: reason, resyncOffset: resync, recordsAfter: count)
    }

    /// The payload of a valid record, decompressed on its own: a record that uses its segment's
    /// history is an error here (``RecordHistory`` reads those).
    ///
    /// - Parameter base: the file offset of `bytes`' first byte.
    static func payload(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, file: String, base: Int = 0,
        keyring: JournalKeyring? = nil
    ) -> Result<[UInt8], JournalError> {
        if record.sealed {
            return withUnsealed(record, in: bytes, at: base, keyring: keyring, file: file) { inner, bytes, base in
                payload(of: inner, in: bytes, file: file, base: base)
            }
        }
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        if record.history { return .failure(historyProblem(of: record, file: file)) }
        if record.chunked {
            var problem: String?
            let payload = [UInt8](unsafeUninitializedCapacity: record.rawLength) { buffer, initialized in
                problem = ChunkedPayload.decode(stored, into: buffer)
                initialized = problem == nil ? record.rawLength : 0
            }
            if let problem {
                return .failure(decompressionProblem(of: record, problem, file: file))
            }
            return .success(payload)
        }
        guard record.compressed else { return .success(Array(stored)) }
        do {
            return .success(try LZ4.decompressBlock(stored, originalSize: record.rawLength))
        } catch {
            return .failure(decompressionProblem(of: record, "\(error)", file: file))
        }
    }

    /// The payload of a valid record of a segment file's bytes held in an array, decompressed.
    static func payload(
        of record: ScannedRecord, in bytes: [UInt8], file: String, keyring: JournalKeyring? = nil
    ) -> Result<[UInt8], JournalError> {
        bytes.withUnsafeBytes { payload(of: record, in: $0, file: file, keyring: keyring) }
    }

    /// The error of a record that uses a history where none is kept: in a version 1 segment, or
    /// larger than the records that join a history.
    static func historyProblem(of record: ScannedRecord, file: String) -> JournalError {
        decompressionProblem(
            of: record,
            "it copies from its segment's history (flag 0x4), which a version 1 segment or a record over \(JournalFormat.historyRecordLimit) bytes has not",
            file: file)
    }

    /// The error of a valid record whose payload does not decompress; `problem` says why.
    static func decompressionProblem(of record: ScannedRecord, _ problem: String, file: String) -> JournalError {
        JournalError(
            .corrupt, "record \(record.sequence) passes its checksum but does not decompress: \(problem)",
            file: file, offset: Int64(record.offset))
    }

    /// Lends the payload of a valid record to `body` without allocating: the stored bytes
    /// themselves when raw, else decompressed into `buffer` (grown when too small, reused by
    /// the next call). The error is the one ``payload(of:in:file:)`` returns.
    ///
    /// - Parameter base: the file offset of `bytes`' first byte, when they are a window of the
    ///   segment rather than all of it (the record's offsets are file offsets).
    static func withPayload(
        of record: ScannedRecord, in bytes: UnsafeRawBufferPointer, at base: Int = 0, file: String, buffer: ReadBuffer,
        keyring: JournalKeyring? = nil, _ body: (UnsafeRawBufferPointer) -> Void
    ) -> JournalError? {
        if record.sealed {
            let lent = withUnsealed(record, in: bytes, at: base, keyring: keyring, file: file) {
                inner, bytes, base -> Result<Void, JournalError> in
                if let error = withPayload(of: inner, in: bytes, at: base, file: file, buffer: buffer, body) {
                    return .failure(error)
                }
                return .success(())
            }
            if case .failure(let error) = lent { return error }
            return nil
        }
        let range = record.payloadRange
        let stored = UnsafeRawBufferPointer(rebasing: bytes[(range.lowerBound - base)..<(range.upperBound - base)])
        if record.history { return historyProblem(of: record, file: file) }
        guard record.compressed || record.chunked else {
            body(stored)
            return nil
        }
        let output = buffer.reserve(record.rawLength)
        let payload = UnsafeMutableBufferPointer(rebasing: output.bindMemory(to: UInt8.self)[..<record.rawLength])
        if record.chunked {
            if let problem = ChunkedPayload.decode(stored, into: payload) {
                return decompressionProblem(of: record, problem, file: file)
            }
            body(UnsafeRawBufferPointer(payload))
            return nil
        }
        if let error = LZ4.decompressBlock(stored, into: payload) {
            return decompressionProblem(of: record, "\(error)", file: file)
        }
        body(UnsafeRawBufferPointer(payload))
        return nil
    }
}

/// A check of each valid record beyond its bytes (what its seal shows: ``SealOrder``): the
/// reason to treat it as damage, or nil.
struct RecordJudge {
    let reason: (ScannedRecord) -> String?
}

/// Why the bytes at an offset are not a valid record.
struct RecordProblem: Error, Sendable {
    var reason: String
    /// The record's checksum matched: the writer wrote exactly these bytes, so this is not a
    /// torn write (an unknown type or flags from a newer writer, or a wrong sequence).
    var checksumValid: Bool
    init(_ reason: String, checksumValid: Bool = false) {
        self.reason = reason
        self.checksumValid = checksumValid
    }
}
