internal import GraphJournal

/// The binary form of one save (a transaction record's payload) and of a base snapshot.
///
/// Column-wise per entity, so similar values sit together and compress well, and decoded
/// straight into the entity tables at open without building intermediate values.
///
/// ```
/// payload    := u8 version(=1) varint blockCount block*   (nothing after the last block)
///             | u8 version(=2) varint blockCount block* links   (TransactionCodec+Links.swift)
/// block      := varint entity (index in the journal's schema) varint nextSerial inserts updates deletes
/// inserts    := varint n  signed-varint serialDelta × n  column × attributeCount
/// column     := u8 hasNulls (0 or 1)  [bitmap of n bits, 1 = nil, if hasNulls]  value × (non-nil count)
/// updates    := varint rows  (varint serial  varint fields  (varint attribute<<1|isNil  [value])×fields)×rows
/// deletes    := varint n  signed-varint serialDelta × n
/// value      := bool: u8 | int8…int64: zig-zag varint | uint8…uint64: varint
///             | double, date: 8 bytes LE | float: 4 bytes LE | string, data, uuid, url: varint length + bytes
/// ```
enum TransactionCodec {
    static let version: UInt8 = 1

    // MARK: Encoding

    /// Encodes the context's pending changes (what `save()` persists); `pending` lists each
    /// table's pending rows.
    ///
    /// Streamed: once the payload is large, its chunks are compressed on another core while
    /// the rest is encoded, and the raw payload is never held whole (``PayloadStream``).
    static func encodePending(_ context: ModelContext, _ pending: [PendingRows]) -> PayloadStream {
        var blocks: [(EntityTable, [Int], [Int], [Int])] = []
        // Sized up front: growing by doubling from a small buffer copied and faulted in about
        // twice the payload (64 MB for a save of 1M objects). An estimate, not a bound: cells
        // take at most 10 bytes as varints (most far fewer), and the variable-length bytes are
        // at most what the transaction appended to the arena.
        var estimate = 64
        for (t, p) in zip(context.tables, pending) where !p.isEmpty {
            blocks.append((t, p.inserts, p.updates, p.deletes))
            let changed = p.inserts.count + p.updates.count
            estimate += 32 + changed * (4 + t.stride * 3) + p.deletes.count * 4 + max(0, t.arena.count - t.committedArenaCount)
        }
        let links = pendingLinkBlocks(context)
        for b in links { estimate += (b.added.count + b.removed.count) * 8 }
        var w = ByteWriter(streaming: estimate)
        w.byte(links.isEmpty ? version : linkVersion)
        w.varint(blocks.count)
        for (t, inserted, updated, deleted) in blocks {
            w.varint(t.entityIndex)
            w.varint(t.nextSerial)
            writeInserts(t, rows: inserted, into: &w) { _ in }
            w.varint(updated.count)
            for row in updated {
                w.varint(t.serial(ofRow: row))
                // Counted, then written: a filtered array per row was an allocation per
                // updated object.
                var changed = 0
                for slot in 0..<t.stride where t.slotDiffers(row: row, slot: slot) { changed += 1 }
                w.varint(changed)
                for slot in 0..<t.stride where t.slotDiffers(row: row, slot: slot) {
                    let isNull = t.isNull(row: row, slot: slot)
                    w.varint(UInt64(slot) << 1 | (isNull ? 1 : 0))
                    if !isNull { writeCell(t.values[row * t.stride + slot], type: t.types[slot], table: t, into: &w) }
                }
                w.cutIfFull()
            }
            writeSerials(deleted.map { t.serial(ofRow: $0) }.sorted(), into: &w)
        }
        if !links.isEmpty { writeLinks(links, into: &w) }
        return w.finish()
    }

    /// Encodes every live, committed object of the context as inserts (a base snapshot).
    ///
    /// `afterColumn` gets each table, its objects in the snapshot and its columns written so
    /// far, after each column (a compaction's progress); what it throws stops the encoding.
    static func encodeSnapshot(
        _ context: ModelContext, afterColumn: (_ table: EntityTable, _ rows: Int, _ columns: Int) throws -> Void
    ) rethrows -> [UInt8] {
        let links = snapshotLinkBlocks(context)
        var w = ByteWriter(capacity: 1 << 16)
        w.byte(links.isEmpty ? version : linkVersion)
        w.varint(context.tables.count)
        for t in context.tables {
            w.varint(t.entityIndex)
            w.varint(t.nextSerial)
            var rows: [Int] = []
            rows.reserveCapacity(t.liveCount)
            for row in 0..<t.rowCount
            where t.flags[row] & (EntityTable.Flags.live | EntityTable.Flags.inserted | EntityTable.Flags.vanished) == EntityTable.Flags.live {
                rows.append(row)
            }
            rows.sort { t.serialOfRow[$0] < t.serialOfRow[$1] }
            try writeInserts(t, rows: rows, committed: true, into: &w) { try afterColumn(t, rows.count, $0) }
            w.varint(0)  // updates
            w.varint(0)  // deletes
        }
        if !links.isEmpty { writeLinks(links, into: &w) }
        return w.bytes
    }

    private static func writeSerials(_ serials: [UInt64], into w: inout ByteWriter) {
        w.varint(serials.count)
        w.append(upTo: serials.count * ByteWriter.maxVarintCount) { p in
            var o = 0
            var previous: Int64 = 0
            for s in serials {
                ByteWriter.putSigned(Int64(bitPattern: s) &- previous, p, &o)
                previous = Int64(bitPattern: s)
            }
            return o
        }
    }

    /// Writes rows column by column. With `committed`, a dirty row contributes its
    /// before-image (a snapshot written while changes are pending records the saved state).
    ///
    /// Each column is gathered first (its cells and null bitmap), then its values are written
    /// straight into the writer's buffer in one go (``ByteWriter/append(upTo:_:)``), with the
    /// switch on the attribute's type outside the loop: per-value appends were most of the
    /// cost of a save of many inserted objects.
    private static func writeInserts(
        _ t: EntityTable, rows: [Int], committed: Bool = false, into w: inout ByteWriter,
        afterColumn: (_ columns: Int) throws -> Void
    ) rethrows {
        writeSerials(rows.map { t.serialOfRow[$0] }, into: &w)
        guard !rows.isEmpty else { return }
        var cells = [UInt64](repeating: 0, count: rows.count)
        var bitmap = [UInt8](repeating: 0, count: (rows.count + 7) / 8)
        for slot in 0..<t.stride {
            let nullCount = t.read { $0.gather(slot: slot, rows: rows, committed: committed, into: &cells, nulls: &bitmap) }
            w.byte(nullCount > 0 ? 1 : 0)
            if nullCount > 0 { w.bytes.append(contentsOf: bitmap) }
            writeColumn(cells, nulls: bitmap, count: rows.count - nullCount, type: t.types[slot], table: t, into: &w)
            try afterColumn(slot + 1)
        }
    }

    /// Writes the non-nil `cells` (those without their bit in the bitmap `nulls`; `count` of
    /// them) as values of `type`, straight into the writer's buffer, in batches between which a
    /// streaming writer may cut chunks off (``ByteWriter/cutIfFull()``).
    private static func writeColumn(
        _ cells: [UInt64], nulls: [UInt8], count: Int, type: AttributeType, table t: EntityTable, into w: inout ByteWriter
    ) {
        guard count > 0 else { return }
        let batch = 1 << 15
        var lower = 0
        while lower < cells.count {
            let upper = min(lower + batch, cells.count)
            writeColumn(cells, lower..<upper, nulls: nulls, hasNulls: count < cells.count, type: type, table: t, into: &w)
            w.cutIfFull()
            lower = upper
        }
    }

    /// Writes the non-nil cells of `cells[range]`, as ``writeColumn(_:nulls:count:type:table:into:)``.
    private static func writeColumn(
        _ cells: [UInt64], _ range: Range<Int>, nulls: [UInt8], hasNulls: Bool, type: AttributeType, table t: EntityTable,
        into w: inout ByteWriter
    ) {
        @inline(__always) func isNull(_ i: Int) -> Bool { hasNulls && nulls[i / 8] & (1 << UInt8(i % 8)) != 0 }
        let count = range.count
        switch type.payloadEncoding {
        case .bool:
            w.append(upTo: count) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: cells[i] != 0 ? 1 : 0, toByteOffset: o, as: UInt8.self)
                    o += 1
                }
                return o
            }
        case .signedVarint:
            w.append(upTo: count * ByteWriter.maxVarintCount) { p in
                var o = 0
                for i in range where !isNull(i) { ByteWriter.putSigned(Int64(bitPattern: cells[i]), p, &o) }
                return o
            }
        case .varint:
            w.append(upTo: count * ByteWriter.maxVarintCount) { p in
                var o = 0
                for i in range where !isNull(i) { ByteWriter.putVarint(cells[i], p, &o) }
                return o
            }
        case .fixed64:
            w.append(upTo: count * 8) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: cells[i].littleEndian, toByteOffset: o, as: UInt64.self)
                    o += 8
                }
                return o
            }
        case .fixed32:
            w.append(upTo: count * 4) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: UInt32(truncatingIfNeeded: cells[i]).littleEndian, toByteOffset: o, as: UInt32.self)
                    o += 4
                }
                return o
            }
        case .bytes, .bytes16:
            t.arena.read { arena in
                var total = 0
                for i in range where !isNull(i) { total += arena.count(ArenaRef(cells[i])) + ByteWriter.maxVarintCount }
                w.append(upTo: total) { p in
                    var o = 0
                    for i in range where !isNull(i) { arena.putBlob(ArenaRef(cells[i]), p, &o) }
                    return o
                }
            }
        }
    }

    @inline(__always)
    static func writeCell(_ bits: UInt64, type: AttributeType, table: EntityTable, into w: inout ByteWriter) {
        switch type.payloadEncoding {
        case .bytes, .bytes16: table.arena.withBytes(ArenaRef(bits)) { w.blob($0) }
        case let encoding: writeFixed(bits, encoding, into: &w)
        }
    }

    /// Writes a value whose cell holds its bits (every encoding but the byte strings).
    @inline(__always)
    private static func writeFixed(_ bits: UInt64, _ encoding: PayloadEncoding, into w: inout ByteWriter) {
        switch encoding {
        case .bool: w.byte(bits != 0 ? 1 : 0)
        case .signedVarint: w.signed(Int64(bitPattern: bits))
        case .varint: w.varint(bits)
        case .fixed64: w.fixed64(bits)
        case .fixed32: w.fixed32(UInt32(truncatingIfNeeded: bits))
        case .bytes, .bytes16: w.varint(0)
        }
    }

    /// Writes an attribute value (a schema's default value) as a value of `type`.
    static func writeValue(_ value: AttributeValue, type: AttributeType, into w: inout ByteWriter) {
        let v = AttributeValue.coerce(attributeValue: value, to: type) ?? value
        v.withCell { cell in
            switch cell {
            case .fixed(let bits): writeFixed(bits, type.payloadEncoding, into: &w)
            case .bytes(let buffer): w.blob(buffer)
            }
        }
    }
}
