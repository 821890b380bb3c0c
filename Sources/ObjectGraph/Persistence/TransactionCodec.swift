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
        var blocks: [(EntityTable, [Int32], [Int], [Int])] = []
        // Sized up front: growing by doubling from a small buffer copied and faulted in about
        // twice the payload (64 MB for a save of 1M objects). An estimate, not a bound: cells
        // take at most 10 bytes as varints (most far fewer), and the variable-length bytes are
        // at most what the transaction appended to the arena.
        var estimate = 64
        for (t, p) in zip(context.tables, pending) where !p.isEmpty {
            blocks.append((t, p.inserts, p.updates, p.deletes))
            let changed = p.inserts.count + p.updates.count
            estimate +=
                32 + changed * (4 + t.stride * 3) + p.deletes.count * 4
                + max(0, t.arena.count - t.changes.committedArenaCount)
        }
        let links = pendingLinkBlocks(context)
        for b in links { estimate += (b.added.count + b.removed.count) * 8 }
        var w = ByteWriter(streaming: estimate)
        w.byte(links.isEmpty ? version : linkVersion)
        w.varint(blocks.count)
        for (t, inserted, updated, deleted) in blocks {
            w.varint(t.entityIndex)
            w.varint(t.identity.nextSerial)
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
            w.varint(t.identity.nextSerial)
            var rows: [Int32] = []
            rows.reserveCapacity(t.identity.liveCount)
            for row in 0..<t.rowCount
            where t.flags[row] & (EntityTable.Flags.live | EntityTable.Flags.inserted | EntityTable.Flags.vanished)
                == EntityTable.Flags.live
            {
                rows.append(Int32(row))
            }
            rows.sort { t.identity.serialOfRow[Int($0)] < t.identity.serialOfRow[Int($1)] }
            try writeInserts(t, rows: rows, committed: true, into: &w) { try afterColumn(t, rows.count, $0) }
            w.varint(0)  // updates
            w.varint(0)  // deletes
        }
        if !links.isEmpty { writeLinks(links, into: &w) }
        return w.bytes
    }

    /// The rows (or serials) a column or a serial list is written in at a time: its values
    /// are put in the writer's buffer in one go, and between batches a streaming writer may cut
    /// chunks off (``ByteWriter/cutIfFull()``).
    static let batchRows = 1 << 15

    /// Writes the serial list `serials(i)` for i in `0..<count`, as deltas, batch by batch:
    /// the list is never built (8 MB for the inserts of a 1M-object save), and the writer's
    /// buffer never takes more than a batch of varints past its last cut.
    private static func writeSerials(count: Int, into w: inout ByteWriter, _ serial: (Int) -> UInt64) {
        w.varint(count)
        var previous: Int64 = 0
        var lower = 0
        while lower < count {
            let upper = min(lower + batchRows, count)
            w.append(upTo: (upper - lower) * ByteWriter.maxVarintCount) { p in
                var o = 0
                for i in lower..<upper {
                    let s = Int64(bitPattern: serial(i))
                    ByteWriter.putSigned(s &- previous, p, &o)
                    previous = s
                }
                return o
            }
            w.cutIfFull()
            lower = upper
        }
    }

    private static func writeSerials(_ serials: [UInt64], into w: inout ByteWriter) {
        writeSerials(count: serials.count, into: &w) { serials[$0] }
    }

    /// Writes rows column by column. With `committed`, a dirty row contributes its
    /// before-image (a snapshot written while changes are pending records the saved state).
    ///
    /// A column's null bitmap comes before its values, so each column takes two passes: its
    /// null bits first (a bit a row), then its cells, gathered and written ``batchRows`` at a
    /// time, with the switch on the attribute's type outside the loop (per-value appends were
    /// most of the cost of a save of many inserted objects). So no whole column is gathered at
    /// once (8 bytes a row: 8 MB for a save of 1M objects).
    private static func writeInserts(
        _ t: EntityTable, rows: [Int32], committed: Bool = false, into w: inout ByteWriter,
        afterColumn: (_ columns: Int) throws -> Void
    ) rethrows {
        let serialOfRow = t.identity.serialOfRow
        writeSerials(count: rows.count, into: &w) { serialOfRow[Int(rows[$0])] }
        guard !rows.isEmpty else { return }
        var bitmap = [UInt8](repeating: 0, count: (rows.count + 7) / 8)
        var cells = [UInt64](repeating: 0, count: min(rows.count, batchRows))
        var batchNulls = [UInt8](repeating: 0, count: (cells.count + 7) / 8)
        for slot in 0..<t.stride {
            let nullCount = t.read { columns in
                bitmap.withUnsafeMutableBufferPointer { bitmap in
                    bitmap.update(repeating: 0)
                    var nullCount = 0
                    // The same cell the gather below reads: the before-image's when `committed`.
                    for (i, row) in rows.lazy.map({ Int($0) }).enumerated()
                    where columns.cell(row: row, slot: slot, committed: committed).isNull {
                        bitmap[i / 8] |= 1 << UInt8(i % 8)
                        nullCount += 1
                    }
                    return nullCount
                }
            }
            w.byte(nullCount > 0 ? 1 : 0)
            if nullCount > 0 { w.bytes.append(contentsOf: bitmap) }
            if nullCount < rows.count {
                var lower = 0
                while lower < rows.count {
                    let upper = min(lower + batchRows, rows.count)
                    let batch = rows[lower..<upper].map { Int($0) }
                    _ = t.read {
                        $0.gather(slot: slot, rows: batch, committed: committed, into: &cells, nulls: &batchNulls)
                    }
                    writeColumn(
                        cells, 0..<batch.count, nulls: batchNulls, hasNulls: nullCount > 0, type: t.types[slot],
                        table: t, into: &w)
                    w.cutIfFull()
                    lower = upper
                }
            }
            try afterColumn(slot + 1)
        }
    }

    /// Writes the non-nil cells of `cells[range]` (those without their bit in the bitmap
    /// `nulls`, when `hasNulls`) as values of `type`, straight into the writer's buffer.
    private static func writeColumn(
        _ cells: [UInt64], _ range: Range<Int>, nulls: [UInt8], hasNulls: Bool, type: AttributeType,
        table t: EntityTable,
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
                    p.storeBytes(
                        of: UInt32(truncatingIfNeeded: cells[i]).littleEndian, toByteOffset: o, as: UInt32.self)
                    o += 4
                }
                return o
            }
        case .bytes, .bytes16, .stringList, .intList:
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
        case .bytes, .bytes16, .stringList, .intList: table.arena.withBytes(ArenaRef(bits)) { w.blob($0) }
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
        case .bytes, .bytes16, .stringList, .intList: w.varint(0)
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
