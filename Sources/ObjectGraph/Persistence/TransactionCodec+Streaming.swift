public import GraphJournal

extension StoredSchema {
    /// Checks a transaction or base record's payload as ``validateTransaction(_:into:)`` does,
    /// with the same outline and the same error, reading the payload piece by piece as
    /// ``Journal/streamPayloads(directory:io:_:)`` lends it: a chunked payload of tens of MB is
    /// checked one decompressed chunk at a time, never held whole.
    ///
    /// When the pieces end before the payload does (a chunk that does not decompress), it
    /// returns false with `outline` incomplete; ``JournalPayload/finish()`` then returns false
    /// and the journal reports the record, so the caller should ignore it.
    ///
    /// ```swift
    /// var outline = TransactionOutline()
    /// _ = try Journal.streamPayloads(directory: path) { entry, payload in
    ///     guard entry.kind == .transaction else { return }
    ///     let checked = try schema.validateTransaction(payload, into: &outline)
    ///     if checked && payload.finish() { print(outline.blocks.count, "entities changed") }
    /// }
    /// ```
    ///
    /// - Parameter payload: the payload, from its first piece on.
    /// - Parameter outline: emptied (its storage kept), then filled with the payload's serials.
    /// - Returns: true when the whole payload was read; false when its pieces ended early.
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    public func validateTransaction(_ payload: JournalPayload, into outline: inout TransactionOutline) throws(StoreError) -> Bool {
        try TransactionCodec.validate(payload, stored: self, into: &outline)
    }
}

extension TransactionCodec {
    /// Checks a payload lent piece by piece as ``decodeChangeSet(_:stored:)`` reads it (same
    /// error for the same malformation) without building its values, listing the serials it
    /// touches in `outline`; reading each piece as it comes, `graph-journal verify` never
    /// materializes a chunked payload of tens of MB. The one-buffer ``validate(_:stored:into:)``
    /// is this on a single piece.
    ///
    /// - Returns: false, with `outline` incomplete, when the pieces ended before the payload's
    ///   length (a chunk that does not decompress: the journal reports the record).
    /// - Throws: ``StoreError`` with code `corruptPayload`, naming the byte offset.
    static func validate(_ payload: JournalPayload, stored: StoredSchema, into outline: inout TransactionOutline) throws(StoreError) -> Bool {
        outline.removeAll()
        var r = PayloadReader(payload)
        do throws(PayloadReader.Failure) {
            let v = try r.byte()
            guard v == version else { throw .malformed(ByteReader.Malformed(offset: 0, reason: "transaction payload version \(v)")) }
            for _ in 0..<(try r.count(limit: stored.entities.count)) {
                let entity = try r.count(limit: stored.entities.count - 1)
                let attributes = stored.entities[entity].attributes
                _ = try r.varint()
                let inserted = outline.serials.count
                var run: ClosedRange<UInt64>?
                let n: Int
                if outline.keepsInsertedRuns {
                    (n, run) = try streamInsertedSerials(&r, into: &outline.serials)
                } else {
                    try streamSerials(&r, into: &outline.serials)
                    n = outline.serials.count - inserted
                }
                if n > 0 {
                    for a in attributes {
                        let present = try streamNullFlag(&r) ? n - (try r.setBitsOfBitmap(n)) : n
                        try streamSkipValues(&r, type: a.type, count: present)
                    }
                }
                let updated = outline.serials.count
                for _ in 0..<(try r.count(limit: r.count)) {
                    let serial = try r.varint()
                    for _ in 0..<(try r.count(limit: attributes.count)) {
                        let f = try r.varint()
                        let j = Int(f >> 1)
                        guard j < attributes.count else { throw .malformed(ByteReader.Malformed(offset: r.offset, reason: "attribute \(j)")) }
                        if f & 1 == 0 { try streamSkipValues(&r, type: attributes[j].type, count: 1) }
                        outline.serials.append(serial)
                    }
                }
                let deleted = outline.serials.count
                try streamSerials(&r, into: &outline.serials)
                outline.blocks.append(.init(
                    entity: entity, inserted: inserted..<updated, insertedRun: run, updated: updated..<deleted,
                    deleted: deleted..<outline.serials.count))
            }
            guard r.isAtEnd else {
                throw .malformed(ByteReader.Malformed(offset: r.offset, reason: "\(r.count - r.offset) bytes after the last block"))
            }
            return true
        } catch {
            switch error {
            case .malformed(let malformed): throw StoreError(.corruptPayload, "\(malformed)")
            case .piecesEnded: return false
            }
        }
    }

    /// ``nullFlag(_:)`` on a lent payload.
    @inline(__always)
    private static func streamNullFlag(_ r: inout PayloadReader) throws(PayloadReader.Failure) -> Bool {
        let offset = r.offset
        let flag = try r.byte()
        guard flag <= 1 else { throw .malformed(ByteReader.Malformed(offset: offset, reason: "null flag \(flag)")) }
        return flag == 1
    }

    /// ``readSerials(_:into:)`` on a lent payload.
    @inline(__always)
    private static func streamSerials(_ r: inout PayloadReader, into serials: inout [UInt64]) throws(PayloadReader.Failure) {
        let n = try r.count(limit: r.count)
        let first = serials.count
        serials.append(contentsOf: repeatElement(0, count: n))
        try serials.withUnsafeMutableBufferPointer { out throws(PayloadReader.Failure) in
            try r.readSerials(into: UnsafeMutableBufferPointer(rebasing: out[first...]))
        }
    }

    /// ``streamSerials(_:into:)`` for the inserted serials of an outline that keeps runs
    /// (``TransactionOutline/keepsInsertedRuns``): returns their count, and the run when they
    /// are consecutive (then nothing is appended to `serials`). The same reads, so the same
    /// errors at the same offsets.
    private static func streamInsertedSerials(
        _ r: inout PayloadReader, into serials: inout [UInt64]
    ) throws(PayloadReader.Failure) -> (Int, ClosedRange<UInt64>?) {
        let n = try r.count(limit: r.count)
        guard n > 0 else { return (0, nil) }
        let start = r.offset
        let first = try r.signed()  // the first delta is from 0
        guard first >= 1 else { throw .malformed(ByteReader.Malformed(offset: start, reason: "serial \(first)")) }
        // Deltas of +1 after it are skipped without storing; a run that could pass Int64.max is
        // read as a list, whose reads report the overflow.
        let k = first <= Int64.max - Int64(n) ? try r.skipSerialIncrements(limit: n - 1) : 0
        if k == n - 1 { return (n, UInt64(first)...UInt64(first + Int64(k))) }
        serials.append(contentsOf: UInt64(first)...UInt64(first + Int64(k)))
        let rest = serials.count
        serials.append(contentsOf: repeatElement(0, count: n - 1 - k))
        try serials.withUnsafeMutableBufferPointer { out throws(PayloadReader.Failure) in
            try r.readSerials(into: UnsafeMutableBufferPointer(rebasing: out[rest...]), after: first + Int64(k))
        }
        return (n, nil)
    }

    /// Skips `count` values of `type`, failing where ``readValue(type:from:)`` would fail on
    /// them, with the same offset and reason.
    private static func streamSkipValues(_ r: inout PayloadReader, type: AttributeType, count: Int) throws(PayloadReader.Failure) {
        switch type {
        case .bool:
            for _ in 0..<count {
                let start = r.offset
                let b = try r.byte()
                guard b <= 1 else { throw .malformed(ByteReader.Malformed(offset: start, reason: "boolean byte \(b)")) }
            }
        case .int8, .int16, .int32, .int64, .uint8, .uint16, .uint32, .uint64:
            try r.skipVarints(count)
        case .double, .date:
            try r.skipFixed(count: count, width: 8)
        case .float:
            try r.skipFixed(count: count, width: 4)
        case .string, .data, .url:
            try r.skipBlobs(count)
        case .uuid:
            try r.skipBlobs(count, length: 16) { "UUID of \($0) bytes" }
        }
    }
}
