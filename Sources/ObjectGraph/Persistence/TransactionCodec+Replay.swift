extension TransactionCodec {
    /// Applies a payload straight to the context's tables as committed state (replay at open).
    ///
    /// `orphans` collects the live serials of stored entities the current model no longer has.
    static func replay(
        _ payload: UnsafeRawBufferPointer, stored: StoredSchema, mapping: SchemaMapping, into context: ModelContext,
        orphans: inout [Int: Set<UInt64>]
    ) throws(StoreError) {
        var visitor = ReplayVisitor(tables: context.tables, mapping: mapping, orphans: orphans)
        defer { orphans = visitor.orphans }
        try PayloadDecoder.decode(payload, stored: stored, into: &visitor)
    }
}

/// Replays a payload into entity tables: inserts become rows (values decoded straight into the
/// columns and the byte arena, without building values), updates overwrite cells, deletes
/// release rows. Blocks of entities the model no longer has are read (so they are checked) and
/// only their live serials kept.
struct ReplayVisitor: PayloadVisitor {
    let tables: [EntityTable]
    let mapping: SchemaMapping
    /// Per stored entity the model no longer has: its live serials.
    var orphans: [Int: Set<UInt64>]

    /// The block's table, or nil for an entity the model no longer has.
    private var table: EntityTable?
    /// The block's stored entity.
    private var entity = 0
    /// The block's current slot for each stored attribute (-1: dropped).
    private var slots: [Int] = []
    /// The rows of the block's inserted objects, in payload order.
    private var rows: [Int] = []
    /// The serials a list was read into (reused).
    private var serials: [UInt64] = []
    /// The row of the object whose fields are being updated.
    private var updatedRow = 0

    init(tables: [EntityTable], mapping: SchemaMapping, orphans: [Int: Set<UInt64>]) {
        self.tables = tables
        self.mapping = mapping
        self.orphans = orphans
    }

    mutating func beginBlock(entity: Int, attributes: [AttributeDescription], nextSerial: UInt64) throws(PayloadReader.Failure) {
        self.entity = entity
        slots = mapping.slots[entity]
        table = mapping.entity[entity].map { tables[$0] }
        if let t = table, nextSerial > t.nextSerial { t.nextSerial = nextSerial }
    }

    mutating func insertedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure) -> Int {
        let start = r.offset
        serials.removeAll(keepingCapacity: true)
        let n = try r.serialList(appendingTo: &serials)
        guard let t = table else {
            orphans[entity, default: []].formUnion(serials)
            return n
        }
        t.reserve(n)
        rows.removeAll(keepingCapacity: true)
        if let s = serials.first(where: { t.row(ofSerial: $0) != nil }) {
            throw PayloadReader.malformed(start, "\(t.entity.name)/\(s) inserted twice")
        }
        // Saves and snapshots write serials in increasing order: distinct without hashing.
        if t.freeRows.isEmpty, zip(serials, serials.dropFirst()).allSatisfy({ $0 < $1 }) {
            rows.append(contentsOf: t.appendRows(serials: serials))
        } else {
            for s in serials {
                guard t.row(ofSerial: s) == nil else { throw PayloadReader.malformed(start, "\(t.entity.name)/\(s) inserted twice") }
                rows.append(t.allocateRow(serial: s))
            }
        }
        // The rest of the payload bounds the bytes this block can append.
        if n > 0, t.types.contains(where: \.isVariableLength) { t.arena.reserveAdditional(r.count - r.offset) }
        return n
    }

    mutating func insertedColumn(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, rows count: Int, nulls: NullBitmap?
    ) throws(PayloadReader.Failure) {
        let slot = slots[attribute]
        guard let t = table, slot >= 0 else {
            try r.skipValues(encoding, count: count - (nulls?.nullCount ?? 0))
            return
        }
        // One exclusive access to each column for the whole loop, not a uniqueness check per
        // cell (those were 7% of a 1M-object open); one loop per encoding, so that each reads
        // its values with the reader's inlined fast path instead of a call that switches per
        // value.
        try t.update { columns throws(PayloadReader.Failure) in
            switch encoding {
            case .bytes, .bytes16:
                // The arena's storage is a reference: a local copy appends to the same memory,
                // and its count goes back to the table when the column is done.
                var arena = t.arena
                defer { t.arena = arena }
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in
                    try r.withBytesValue(encoding) { arena.append($0) }
                }
            case .signedVarint:
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in UInt64(bitPattern: try r.signed()) }
            case .varint:
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in try r.varint() }
            case .fixed64:
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in try r.fixed64() }
            case .fixed32:
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in UInt64(try r.fixed32()) }
            case .bool:
                try fill(columns, slot: slot, nulls: nulls, from: &r) { r throws(PayloadReader.Failure) in try r.cell(.bool) }
            }
        }
    }

    /// Writes one value per inserted row into `slot` (read by `read`), or its null bit where
    /// `nulls` says the value is nil.
    @inline(__always)
    private func fill(
        _ columns: ColumnsHandle, slot: Int, nulls: NullBitmap?, from r: inout PayloadReader,
        _ read: (inout PayloadReader) throws(PayloadReader.Failure) -> UInt64
    ) throws(PayloadReader.Failure) {
        for (i, row) in rows.enumerated() {
            if let nulls, nulls.isNull(i) {
                columns.setNull(row: row, slot: slot, true)
                continue
            }
            columns.setCell(row: row, slot: slot, try read(&r))
            columns.setNull(row: row, slot: slot, false)
        }
    }

    mutating func updatedObject(serial: UInt64, at offset: Int) throws(PayloadReader.Failure) {
        guard let t = table else { return }
        guard let row = t.row(ofSerial: serial) else {
            throw PayloadReader.malformed(offset, "update of \(t.entity.name)/\(serial), which does not exist")
        }
        updatedRow = row
    }

    mutating func updatedField(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, isNull: Bool
    ) throws(PayloadReader.Failure) {
        let slot = slots[attribute]
        guard let t = table, slot >= 0 else {
            if !isNull { try r.skipValues(encoding, count: 1) }
            return
        }
        let row = updatedRow
        let cell = row * t.stride + slot
        let variable = t.types[slot].isVariableLength
        if variable, !t.isNull(row: row, slot: slot) { t.arena.garbage += ArenaRef(t.values[cell]).length }
        if isNull {
            t.nulls[row * t.maskWords + slot / 64] |= 1 << UInt64(slot % 64)
            return
        }
        switch encoding {
        case .bytes, .bytes16:
            t.values[cell] = try r.withBytesValue(encoding) { t.arena.append($0) }
        default:
            t.values[cell] = try r.cell(encoding)
        }
        t.nulls[row * t.maskWords + slot / 64] &= ~(1 << UInt64(slot % 64))
    }

    mutating func deletedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure) {
        let start = r.offset
        serials.removeAll(keepingCapacity: true)
        _ = try r.serialList(appendingTo: &serials)
        guard let t = table else {
            orphans[entity, default: []].subtract(serials)
            return
        }
        for serial in serials {
            guard let row = t.row(ofSerial: serial) else {
                throw PayloadReader.malformed(start, "delete of \(t.entity.name)/\(serial), which does not exist")
            }
            for slot in 0..<t.stride where t.types[slot].isVariableLength && !t.isNull(row: row, slot: slot) {
                t.arena.garbage += ArenaRef(t.values[row * t.stride + slot]).length
            }
            t.releaseRow(row)
        }
    }
}
