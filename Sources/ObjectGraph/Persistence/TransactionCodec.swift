internal import GraphJournal

/// The binary form of one save (a transaction record's payload) and of a base snapshot.
///
/// Column-wise per entity, so similar values sit together and compress well, and decoded
/// straight into the entity tables at open without building intermediate values.
///
/// ```
/// payload    := u8 version(=1) varint blockCount block*   (nothing after the last block)
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
        var w = ByteWriter(streaming: estimate)
        w.byte(version)
        w.varint(blocks.count)
        for (t, inserted, updated, deleted) in blocks {
            w.varint(t.entityIndex)
            w.varint(t.nextSerial)
            writeInserts(t, rows: inserted, into: &w)
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
        return w.finish()
    }

    /// Encodes every live, committed object of the context as inserts (a base snapshot).
    static func encodeSnapshot(_ context: ModelContext) -> [UInt8] {
        var w = ByteWriter(capacity: 1 << 16)
        w.byte(version)
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
            writeInserts(t, rows: rows, committed: true, into: &w)
            w.varint(0)  // updates
            w.varint(0)  // deletes
        }
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
    private static func writeInserts(_ t: EntityTable, rows: [Int], committed: Bool = false, into w: inout ByteWriter) {
        writeSerials(rows.map { t.serialOfRow[$0] }, into: &w)
        guard !rows.isEmpty else { return }
        let mw = t.maskWords, stride = t.stride
        var cells = [UInt64](repeating: 0, count: rows.count)
        var bitmap = [UInt8](repeating: 0, count: (rows.count + 7) / 8)
        for slot in 0..<stride {
            let word = slot / 64, bit = UInt64(1) << UInt64(slot % 64)
            var nullCount = 0
            cells.withUnsafeMutableBufferPointer { cells in
                bitmap.withUnsafeMutableBufferPointer { bitmap in
                    bitmap.update(repeating: 0)
                    t.values.withUnsafeBufferPointer { values in
                        t.nulls.withUnsafeBufferPointer { nulls in
                            for (i, row) in rows.enumerated() {
                                let b = committed ? Int(t.beforeIndex[row]) : -1
                                let isNull: Bool
                                if b >= 0 {
                                    isNull = t.beforeNulls[b * mw + word] & bit != 0
                                    cells[i] = t.beforeValues[b * stride + slot]
                                } else {
                                    isNull = nulls[row * mw + word] & bit != 0
                                    cells[i] = values[row * stride + slot]
                                }
                                if isNull {
                                    bitmap[i / 8] |= 1 << UInt8(i % 8)
                                    nullCount += 1
                                }
                            }
                        }
                    }
                }
            }
            w.byte(nullCount > 0 ? 1 : 0)
            if nullCount > 0 { w.bytes.append(contentsOf: bitmap) }
            writeColumn(cells, nulls: bitmap, count: rows.count - nullCount, type: t.types[slot], table: t, into: &w)
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
        switch type {
        case .bool:
            w.append(upTo: count) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: cells[i] != 0 ? 1 : 0, toByteOffset: o, as: UInt8.self)
                    o += 1
                }
                return o
            }
        case .int8, .int16, .int32, .int64:
            w.append(upTo: count * ByteWriter.maxVarintCount) { p in
                var o = 0
                for i in range where !isNull(i) { ByteWriter.putSigned(Int64(bitPattern: cells[i]), p, &o) }
                return o
            }
        case .uint8, .uint16, .uint32, .uint64:
            w.append(upTo: count * ByteWriter.maxVarintCount) { p in
                var o = 0
                for i in range where !isNull(i) { ByteWriter.putVarint(cells[i], p, &o) }
                return o
            }
        case .double, .date:
            w.append(upTo: count * 8) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: cells[i].littleEndian, toByteOffset: o, as: UInt64.self)
                    o += 8
                }
                return o
            }
        case .float:
            w.append(upTo: count * 4) { p in
                var o = 0
                for i in range where !isNull(i) {
                    p.storeBytes(of: UInt32(truncatingIfNeeded: cells[i]).littleEndian, toByteOffset: o, as: UInt32.self)
                    o += 4
                }
                return o
            }
        case .string, .data, .uuid, .url:
            t.arena.withAllBytes { all in
                var total = 0
                for i in range where !isNull(i) {
                    total += ByteArena.bytes(ArenaRef(cells[i]), in: all).count + ByteWriter.maxVarintCount
                }
                w.append(upTo: total) { p in
                    var o = 0
                    for i in range where !isNull(i) {
                        let value = ByteArena.bytes(ArenaRef(cells[i]), in: all)
                        ByteWriter.putVarint(UInt64(value.count), p, &o)
                        if let source = value.baseAddress, value.count > 0 {
                            (p + o).copyMemory(from: source, byteCount: value.count)
                            o += value.count
                        }
                    }
                    return o
                }
            }
        }
    }

    @inline(__always)
    static func writeCell(_ bits: UInt64, type: AttributeType, table: EntityTable, into w: inout ByteWriter) {
        switch type {
        case .bool: w.byte(bits != 0 ? 1 : 0)
        case .int8, .int16, .int32, .int64: w.signed(Int64(bitPattern: bits))
        case .uint8, .uint16, .uint32, .uint64: w.varint(bits)
        case .double, .date: w.fixed64(bits)
        case .float: w.fixed32(UInt32(truncatingIfNeeded: bits))
        case .string, .data, .uuid, .url: table.arena.withBytes(ArenaRef(bits)) { w.blob($0) }
        }
    }

    static func writeValue(_ value: AttributeValue, type: AttributeType, into w: inout ByteWriter) {
        let v = AttributeValue.coerce(attributeValue: value, to: type) ?? value
        v.withCell { cell in
            switch cell {
            case .fixed(let bits):
                switch type {
                case .bool: w.byte(bits != 0 ? 1 : 0)
                case .int8, .int16, .int32, .int64: w.signed(Int64(bitPattern: bits))
                case .uint8, .uint16, .uint32, .uint64: w.varint(bits)
                case .double, .date: w.fixed64(bits)
                case .float: w.fixed32(UInt32(truncatingIfNeeded: bits))
                case .string, .data, .uuid, .url: w.varint(0)
                }
            case .bytes(let buffer): w.blob(buffer)
            }
        }
    }

    // MARK: Decoding

    /// Reads one value's cell. Fixed values come back as their bits; variable-length ones are
    /// appended to `arena` (when given) and come back as their reference.
    @inline(__always)
    static func readCell(type: AttributeType, from r: inout ByteReader, arena: UnsafeMutablePointer<ByteArena>?) throws(ByteReader.Malformed) -> UInt64 {
        switch type {
        case .bool:
            let start = r.offset
            let b = try r.byte()
            guard b <= 1 else { throw ByteReader.Malformed(offset: start, reason: "boolean byte \(b)") }
            return UInt64(b)
        case .int8, .int16, .int32, .int64: return UInt64(bitPattern: try r.signed())
        case .uint8, .uint16, .uint32, .uint64: return try r.varint()
        case .double, .date: return try r.fixed64()
        case .float: return UInt64(try r.fixed32())
        case .string, .data, .uuid, .url:
            let start = r.offset
            let blob = try r.blob()
            if type == .uuid && blob.count != 16 {
                throw ByteReader.Malformed(offset: start, reason: "UUID of \(blob.count) bytes")
            }
            return arena?.pointee.append(blob) ?? 0
        }
    }

    static func readValue(type: AttributeType, from r: inout ByteReader) throws(ByteReader.Malformed) -> AttributeValue {
        switch type {
        case .string, .data, .uuid, .url:
            let start = r.offset
            let blob = try r.blob()
            if type == .uuid && blob.count != 16 { throw ByteReader.Malformed(offset: start, reason: "UUID of \(blob.count) bytes") }
            return AttributeValue.decode(.bytes(blob), as: type)
        default:
            return AttributeValue.decode(.fixed(try readCell(type: type, from: &r, arena: nil)), as: type)
        }
    }

    /// Applies a payload straight to the context's tables as committed state (replay).
    ///
    /// `orphans` collects the live serials of stored entities the current model no longer has.
    static func replay(
        _ payload: UnsafeRawBufferPointer, stored: StoredSchema, mapping: SchemaMapping, into context: ModelContext,
        orphans: inout [Int: Set<UInt64>]
    ) throws(StoreError) {
        var r = ByteReader(payload)
        do {
            let v = try r.byte()
            guard v == version else { throw ByteReader.Malformed(offset: 0, reason: "transaction payload version \(v)") }
            let blocks = try r.count(limit: stored.entities.count)
            for _ in 0..<blocks {
                let e = try r.count(limit: stored.entities.count - 1)
                let storedEntity = stored.entities[e]
                let nextSerial = try r.varint()
                if let current = mapping.entity[e] {
                    try replayBlock(&r, table: context.tables[current], attributes: storedEntity.attributes, slots: mapping.slots[e])
                    let t = context.tables[current]
                    if nextSerial > t.nextSerial { t.nextSerial = nextSerial }
                } else {
                    try skipBlock(&r, attributes: storedEntity.attributes, live: &orphans[e, default: []])
                }
            }
            try expectEnd(r)
        } catch {
            throw StoreError(.corruptPayload, "\(error)")
        }
    }

    /// Reads a column's null flag, which is 0 (no bitmap follows) or 1 (a bitmap follows).
    @inline(__always)
    private static func nullFlag(_ r: inout ByteReader) throws(ByteReader.Malformed) -> Bool {
        let offset = r.offset
        let flag = try r.byte()
        guard flag <= 1 else { throw ByteReader.Malformed(offset: offset, reason: "null flag \(flag)") }
        return flag == 1
    }

    /// Checks that a payload ends where its last block ended: bytes after it mean the length or
    /// a count is wrong, so the payload is not what its writer wrote.
    @inline(__always)
    private static func expectEnd(_ r: ByteReader) throws(ByteReader.Malformed) {
        guard r.isAtEnd else {
            throw ByteReader.Malformed(offset: r.offset, reason: "\(r.buffer.count - r.offset) bytes after the last block")
        }
    }

    private static func readSerials(_ r: inout ByteReader) throws(ByteReader.Malformed) -> [UInt64] {
        var serials: [UInt64] = []
        try readSerials(&r, into: &serials)
        return serials
    }

    /// Reads a serial list, appending its serials to `serials`.
    @inline(__always)
    private static func readSerials(_ r: inout ByteReader, into serials: inout [UInt64]) throws(ByteReader.Malformed) {
        let n = try r.count(limit: r.buffer.count)
        let first = serials.count
        // Sized once and written through one buffer access, not an append per serial.
        serials.append(contentsOf: repeatElement(0, count: n))
        try serials.withUnsafeMutableBufferPointer { out throws(ByteReader.Malformed) in
            var previous: Int64 = 0
            for i in first..<(first + n) {
                let start = r.offset
                previous = previous &+ (try r.signed())
                guard previous >= 1 else { throw ByteReader.Malformed(offset: start, reason: "serial \(previous)") }
                out[i] = UInt64(previous)
            }
        }
    }

    private static func replayBlock(
        _ r: inout ByteReader, table t: EntityTable, attributes: [AttributeDescription], slots: [Int]
    ) throws(ByteReader.Malformed) {
        // Inserts.
        let serialsOffset = r.offset
        let serials = try readSerials(&r)
        t.reserve(serials.count)
        for s in serials where t.row(ofSerial: s) != nil {
            throw ByteReader.Malformed(offset: serialsOffset, reason: "\(t.entity.name)/\(s) inserted twice")
        }
        let rows: [Int]
        // Saves and snapshots write serials in increasing order: distinct without hashing.
        if t.freeRows.isEmpty, zip(serials, serials.dropFirst()).allSatisfy({ $0 < $1 }) {
            rows = Array(t.appendRows(serials: serials))
        } else {
            var allocated: [Int] = []
            allocated.reserveCapacity(serials.count)
            for s in serials {
                guard t.row(ofSerial: s) == nil else {
                    throw ByteReader.Malformed(offset: serialsOffset, reason: "\(t.entity.name)/\(s) inserted twice")
                }
                allocated.append(t.allocateRow(serial: s))
            }
            rows = allocated
        }
        let stride = t.stride
        let mw = t.maskWords
        if !serials.isEmpty {
            // The rest of the payload bounds the bytes this block can append.
            if t.types.contains(where: \.isVariableLength) { t.arena.reserveAdditional(r.buffer.count - r.offset) }
            for (j, a) in attributes.enumerated() {
                let slot = slots[j]
                let bitmap: UnsafeRawBufferPointer? = try nullFlag(&r) ? try r.bitmap(rows.count) : nil
                let word = slot >= 0 ? slot / 64 : 0
                let bit = slot >= 0 ? UInt64(1) << UInt64(slot % 64) : 0
                let variable = a.type.isVariableLength
                // One exclusive access to each column for the whole loop (not a uniqueness check
                // per cell: callgrind showed those at 7% of a 1M-object open).
                try withUnsafeMutablePointer(to: &t.arena) { arena throws(ByteReader.Malformed) in
                    try t.values.withUnsafeMutableBufferPointer { values throws(ByteReader.Malformed) in
                        try t.nulls.withUnsafeMutableBufferPointer { nulls throws(ByteReader.Malformed) in
                            for (i, row) in rows.enumerated() {
                                if let bitmap, bitmap[i / 8] & (1 << UInt8(i % 8)) != 0 {
                                    if slot >= 0 { nulls[row * mw + word] |= bit }
                                    continue
                                }
                                let bits = try readCell(type: a.type, from: &r, arena: slot >= 0 && variable ? arena : nil)
                                if slot >= 0 {
                                    values[row * stride + slot] = bits
                                    nulls[row * mw + word] &= ~bit
                                }
                            }
                        }
                    }
                }
            }
        }
        // Updates.
        let updatedRows = try r.count(limit: r.buffer.count)
        for _ in 0..<updatedRows {
            let start = r.offset
            let serial = try r.varint()
            guard let row = t.row(ofSerial: serial) else {
                throw ByteReader.Malformed(offset: start, reason: "update of \(t.entity.name)/\(serial), which does not exist")
            }
            let fields = try r.count(limit: attributes.count)
            for _ in 0..<fields {
                let fieldOffset = r.offset
                let f = try r.varint()
                let j = Int(f >> 1)
                guard j < attributes.count else { throw ByteReader.Malformed(offset: fieldOffset, reason: "attribute \(j)") }
                let slot = slots[j]
                let isNull = f & 1 == 1
                if slot >= 0, t.types[slot].isVariableLength, !t.isNull(row: row, slot: slot) {
                    t.arena.garbage += ArenaRef(t.values[row * stride + slot]).length
                }
                if isNull {
                    if slot >= 0 { t.nulls[row * mw + slot / 64] |= 1 << UInt64(slot % 64) }
                    continue
                }
                let bits = try withUnsafeMutablePointer(to: &t.arena) { arena throws(ByteReader.Malformed) in
                    try readCell(type: attributes[j].type, from: &r, arena: slot >= 0 && attributes[j].type.isVariableLength ? arena : nil)
                }
                if slot >= 0 {
                    t.values[row * stride + slot] = bits
                    t.nulls[row * mw + slot / 64] &= ~(1 << UInt64(slot % 64))
                }
            }
        }
        // Deletes.
        let deletesOffset = r.offset
        for serial in try readSerials(&r) {
            guard let row = t.row(ofSerial: serial) else {
                throw ByteReader.Malformed(offset: deletesOffset, reason: "delete of \(t.entity.name)/\(serial), which does not exist")
            }
            for slot in 0..<stride where t.types[slot].isVariableLength && !t.isNull(row: row, slot: slot) {
                t.arena.garbage += ArenaRef(t.values[row * stride + slot]).length
            }
            t.releaseRow(row)
        }
    }

    /// Parses a block of an entity the current model no longer has, tracking which of its
    /// objects are still alive.
    private static func skipBlock(_ r: inout ByteReader, attributes: [AttributeDescription], live: inout Set<UInt64>) throws(ByteReader.Malformed) {
        let serials = try readSerials(&r)
        live.formUnion(serials)
        if !serials.isEmpty {
            for a in attributes {
                let bitmap: UnsafeRawBufferPointer? = try nullFlag(&r) ? try r.bitmap(serials.count) : nil
                for i in 0..<serials.count {
                    if let bitmap, bitmap[i / 8] & (1 << UInt8(i % 8)) != 0 { continue }
                    _ = try readCell(type: a.type, from: &r, arena: nil)
                }
            }
        }
        for _ in 0..<(try r.count(limit: r.buffer.count)) {
            _ = try r.varint()
            for _ in 0..<(try r.count(limit: attributes.count)) {
                let f = try r.varint()
                let j = Int(f >> 1)
                guard j < attributes.count else { throw ByteReader.Malformed(offset: r.offset, reason: "attribute \(j)") }
                if f & 1 == 0 { _ = try readCell(type: attributes[j].type, from: &r, arena: nil) }
            }
        }
        live.subtract(try readSerials(&r))
    }

    /// Decodes a payload into a ``ChangeSet`` (for tools, observers and tests; replay uses the
    /// direct path above).
    static func decodeChangeSet(_ payload: UnsafeRawBufferPointer, stored: StoredSchema) throws(StoreError) -> ChangeSet {
        var r = ByteReader(payload)
        var result = ChangeSet()
        do {
            let v = try r.byte()
            guard v == version else { throw ByteReader.Malformed(offset: 0, reason: "transaction payload version \(v)") }
            for _ in 0..<(try r.count(limit: stored.entities.count)) {
                let e = stored.entities[try r.count(limit: stored.entities.count - 1)]
                _ = try r.varint()
                var c = EntityChanges(entityName: e.name, attributeNames: e.attributes.map(\.name))
                c.insertedSerials = try readSerials(&r)
                let n = c.insertedSerials.count
                if n > 0 {
                    var columns: [[AttributeValue?]] = []
                    for a in e.attributes {
                        let bitmap: UnsafeRawBufferPointer? = try nullFlag(&r) ? try r.bitmap(n) : nil
                        var column: [AttributeValue?] = []
                        for i in 0..<n {
                            if let bitmap, bitmap[i / 8] & (1 << UInt8(i % 8)) != 0 { column.append(nil); continue }
                            column.append(try readValue(type: a.type, from: &r))
                        }
                        columns.append(column)
                    }
                    for i in 0..<n { for column in columns { c.insertedValues.append(column[i]) } }
                }
                for _ in 0..<(try r.count(limit: r.buffer.count)) {
                    let serial = try r.varint()
                    for _ in 0..<(try r.count(limit: e.attributes.count)) {
                        let f = try r.varint()
                        let j = Int(f >> 1)
                        guard j < e.attributes.count else { throw ByteReader.Malformed(offset: r.offset, reason: "attribute \(j)") }
                        let value: AttributeValue? = f & 1 == 1 ? nil : try readValue(type: e.attributes[j].type, from: &r)
                        c.updates.append(.init(serial: serial, attribute: j, value: value))
                    }
                }
                c.deletedSerials = try readSerials(&r)
                result.entities.append(c)
            }
            try expectEnd(r)
        } catch {
            throw StoreError(.corruptPayload, "\(error)")
        }
        return result
    }

    // MARK: Validating

    /// Checks a payload as ``decodeChangeSet(_:stored:)`` reads it, throwing the same error for
    /// the same malformation, without building its values; lists the serials it touches in
    /// `outline` (cleared first). For `graph-journal verify`, which needs to know that each
    /// payload decodes and what it does to which objects, not the values.
    ///
    /// The payload as one piece of the streaming check (``validate(_:stored:into:)-(JournalPayload,_,_)``
    /// in `TransactionCodec+Streaming.swift`): one skim for both, so they cannot drift apart.
    static func validate(_ payload: UnsafeRawBufferPointer, stored: StoredSchema, into outline: inout TransactionOutline) throws(StoreError) {
        // One whole piece cannot end early, so the result is always true.
        _ = try validate(JournalPayload(pieces: [payload]), stored: stored, into: &outline)
    }
}
