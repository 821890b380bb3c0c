import Foundation
internal import GraphJournal

extension TransactionCodec {
    /// Applies a payload straight to the context's tables as committed state (replay at open).
    ///
    /// `orphans` collects the live serials of stored entities the current model no longer has.
    static func replay(
        _ payload: UnsafeRawBufferPointer, stored: StoredSchema, mapping: SchemaMapping, into context: ModelContext,
        orphans: inout [Int: Set<UInt64>]
    ) throws(StoreError) {
        var visitor = ReplayVisitor(tables: context.tables, links: context.links, mapping: mapping, orphans: orphans)
        defer { orphans = visitor.orphans }
        for l in context.links { l.tracking = false }
        defer { for l in context.links { l.tracking = true } }
        var complete = false
        defer { if !complete { discardIndexFills(in: context) } }
        try PayloadDecoder.decode(payload, stored: stored, into: &visitor)
        try visitor.finish()
        complete = true
    }

    /// Waits for and drops every index fill started during a payload that was replayed only in
    /// part: it leaves its tables as they are, and no fill started for it may be taken for theirs.
    private static func discardIndexFills(in context: ModelContext) {
        for t in context.tables where !t.indexes.indexFillJobs.isEmpty { t.discardIndexFillJobs() }
    }

    /// ``replay(_:stored:mapping:into:orphans:)`` of a payload lent piece by piece
    /// (``Journal/forEachPayload(progress:_:)``): a large one is replayed chunk by chunk as it is
    /// decompressed, never held whole.
    ///
    /// - Returns: false, with the payload partly replayed, when its pieces ended before its
    ///   length (a chunk that does not decompress, which the journal then reports).
    static func replay(
        _ payload: JournalPayload, stored: StoredSchema, mapping: SchemaMapping, into context: ModelContext,
        orphans: inout [Int: Set<UInt64>]
    ) throws(StoreError) -> Bool {
        var visitor = ReplayVisitor(tables: context.tables, links: context.links, mapping: mapping, orphans: orphans)
        defer { orphans = visitor.orphans }
        for l in context.links { l.tracking = false }
        defer { for l in context.links { l.tracking = true } }
        var r = PayloadReader(payload)
        var complete = false
        defer { if !complete { discardIndexFills(in: context) } }
        do throws(PayloadReader.Failure) {
            try PayloadDecoder.decode(&r, stored: stored, into: &visitor)
        } catch {
            if case .piecesEnded = error { return false }
            throw StoreError(payload: error)
        }
        try visitor.finish()
        complete = true
        return true
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
    /// The block's attributes whose stored JSON becomes a native list, by stored attribute
    /// (``SchemaMapping/listConversions``).
    private var listConversions: [AttributeType?] = []
    /// The rows of the block's inserted objects, in payload order, when they are not
    /// `appendedRows`.
    private var rows: [Int] = []
    /// The rows of the block's inserted objects when they were appended together, in payload
    /// order: a range, not a list of a million row numbers (8 MB of fresh pages) to write and
    /// read back per column.
    private var appendedRows: Range<Int>?
    /// Whether the null words of `appendedRows` are all zero (not nil) and no default was
    /// written: the rows were appended past every earlier cell, with no defaults because the
    /// block's columns feed every slot. A column without nils then need not clear its bits.
    private var appendedNullsClear = false
    /// Whether the block's null words start as zero pages that were not warmed
    /// (``EntityTable/nullsStartAsZeroPages(rows:)``): the first column to write them warms them.
    private var nullsUnwarmed = false
    /// The serials a list was read into (reused).
    private var serials: [UInt64] = []
    /// The row of the object whose fields are being updated.
    private var updatedRow = 0

    let links: [LinkTable]
    /// The block's to-one slots whose relationship is now stored as links, by stored attribute.
    private var slotLinks: [(link: Int, side: Int)?] = []
    /// Stored to-one values bound for links (a migration), applied at the end of the payload,
    /// when every object it inserts exists: (link, side, row, destination serial or 0 for none).
    private var migrated: [(link: Int, side: Int, row: Int, destination: UInt64)] = []
    /// The current link table of the link block being read, and whether its sides are swapped.
    private var linkTable: LinkTable?
    private var linkSwapped = false

    init(tables: [EntityTable], links: [LinkTable], mapping: SchemaMapping, orphans: [Int: Set<UInt64>]) {
        self.tables = tables
        self.links = links
        self.mapping = mapping
        self.orphans = orphans
    }

    /// The current link block's additions, linked together when the block's additions end
    /// (``flushAdditions()``): runs of consecutive pairs of one side-0 row.
    private var additions = LinkRuns()
    /// Where the first addition of the block was read, for an error.
    private var additionsOffset = 0

    /// Links the block's additions read so far.
    private mutating func flushAdditions() throws(PayloadReader.Failure) {
        guard let l = linkTable, !additions.isEmpty else { return }
        let runs = additions
        additions = LinkRuns()
        if let (a, b) = l.linkMany(runs) {
            let s0 = l.table(0).identity.serialOfRow[Int(a)], s1 = l.table(1).identity.serialOfRow[Int(b)]
            let names = "\(l.table(0).entity.name)/\(s0) and \(l.table(1).entity.name)/\(s1)"
            let side = l.link.toOne[0] && l.listCount(0, Int(a)) > 0 ? 0 : 1
            let violation = RecordRules.link(
                names, linked: l.contains(Int(a), Int(b)),
                toOneHolding: (entity: l.table(side).entity.name, name: l.link.names[side]))
            if let violation { throw PayloadReader.violation(additionsOffset, violation) }
        }
    }

    /// Applies what waited for the whole payload (the last link block's additions, migrated
    /// to-one values).
    mutating func finish() throws(StoreError) {
        do throws(PayloadReader.Failure) {
            try flushAdditions()
            if let (offset, v) = rawValueViolation { throw PayloadReader.violation(offset, v) }
        } catch {
            throw StoreError(payload: error)
        }
        rows0 = CountingArray(offset: 0)  // no copy of the tables' arrays outlives the link section
        rows1 = CountingArray(offset: 0)
        for m in migrated {
            let l = links[m.link]
            let owner = m.row
            for old in l.members(m.side, owner) {
                _ = m.side == 0 ? l.unlink(owner, Int(old)) : l.unlink(Int(old), owner)
            }
            guard m.destination != 0 else { continue }
            guard let target = l.table(1 - m.side).row(ofSerial: m.destination) else {
                let violation = RecordRules.linkOfMissingObject(l.table(1 - m.side).entity.name, m.destination)
                throw StoreError(
                    .corruptPayload, "\(l.link.names[m.side]), a to-one now stored as links: \(violation.reason)")
            }
            _ = m.side == 0 ? l.link(owner, target) : l.link(target, owner)
        }
        migrated.removeAll()
    }

    mutating func beginLinks(link: Int) throws(PayloadReader.Failure) {
        try flushAdditions()
        runRow = -1
        if let (k, swapped) = mapping.links[link] ?? nil {
            linkTable = links[k]
            linkSwapped = swapped
            rows0 = links[k].table(0).identity.rowOfSerial
            rows1 = links[k].table(1).identity.rowOfSerial
        } else {
            linkTable = nil
            rows0 = CountingArray(offset: 0)
            rows1 = CountingArray(offset: 0)
        }
    }

    /// Per side of the current link table, its entity's rows by serial (`rowOfSerial`, which
    /// the link section does not change): looked up per pair without going through the tables.
    private var rows0 = CountingArray<Int32>(offset: 0)
    private var rows1 = CountingArray<Int32>(offset: 0)

    /// The row of `serial` on `side` of the current link table.
    @inline(__always)
    private func linkRow(_ side: Int, _ serial: UInt64, _ offset: Int) throws(PayloadReader.Failure) -> Int {
        let row = side == 0 ? Self.row(rows0, serial) : Self.row(rows1, serial)
        if row >= 0 { return row }
        let name = linkTable.map { $0.table(side).entity.name } ?? "?"
        throw PayloadReader.violation(offset, RecordRules.linkOfMissingObject(name, serial))
    }

    @inline(__always)
    private static func row(_ rows: CountingArray<Int32>, _ serial: UInt64) -> Int {
        serial >= 1 && serial <= UInt64(rows.count) ? Int(rows[Int(serial &- 1)]) : -1
    }

    mutating func linkPairs(removed: Bool, count: Int) {
        runRow = -1
        if !removed, linkTable != nil { additions.members.reserveCapacity(additions.members.count + count) }
    }

    /// The side-0 row of the run of additions being read, when its pairs go straight into
    /// ``additions`` (the sides not swapped); else -1.
    private var runRow: Int32 = -1

    mutating func beginRun(removed: Bool, _ serial0: UInt64, count: Int, at offset: Int) throws(PayloadReader.Failure) {
        runRow = -1
        guard !removed, !linkSwapped, linkTable != nil else { return }
        let a = Int32(try linkRow(0, serial0, offset))
        if additions.isEmpty { additionsOffset = offset }
        additions.rows.append(a)
        additions.ends.append(Int32(additions.members.count + count))
        runRow = a
    }

    mutating func linkPair(
        removed: Bool, _ serial0: UInt64, _ serial1: UInt64, at offset: Int
    ) throws(PayloadReader.Failure) {
        guard linkTable != nil else { return }
        if runRow >= 0 {
            // A member of the run begun: its side-0 row is the run's.
            additions.members.append(Int32(try linkRow(1, serial1, offset)))
            return
        }
        let (s0, s1) = linkSwapped ? (serial1, serial0) : (serial0, serial1)
        let a = try linkRow(0, s0, offset), b = try linkRow(1, s1, offset)
        if removed, let l = linkTable {
            if let v = RecordRules.unlink(
                "\(l.table(0).entity.name)/\(s0) and \(l.table(1).entity.name)/\(s1)", linked: l.unlink(a, b))
            {
                throw PayloadReader.violation(offset, v)
            }
        } else {
            if additions.isEmpty { additionsOffset = offset }
            additions.append(Int32(a), Int32(b))
        }
    }

    mutating func linkOrder(
        side storedSide: Int, owner: UInt64, placements: [(member: UInt64, index: Int)], at offset: Int
    ) throws(PayloadReader.Failure) {
        guard let l = linkTable else { return }
        try flushAdditions()
        let side = linkSwapped ? 1 - storedSide : storedSide
        guard l.link.ordered[side] else { return }  // no longer ordered: the order is dropped
        let row = try linkRow(side, owner, offset)
        var rows: [Int32] = []
        for p in placements { rows.append(Int32(try linkRow(1 - side, p.member, offset))) }
        if let v = RecordRules.order(
            l.table(side).entity.name, owner,
            applies: l.reorder(side, row, placing: Array(zip(rows, placements.map(\.index)))))
        {
            throw PayloadReader.violation(offset, v)
        }
    }

    mutating func beginBlock(
        entity: Int, attributes: [AttributeDescription], nextSerial: UInt64
    ) throws(PayloadReader.Failure) {
        if let t = mapping.entity[entity].map({ tables[$0] }), !t.indexes.indexFillJobs.isEmpty {
            t.discardIndexFillJobs()
        }
        self.entity = entity
        slots = mapping.slots[entity]
        listConversions = mapping.listConversions.indices.contains(entity) ? mapping.listConversions[entity] : []
        slotLinks = mapping.slotLinks.indices.contains(entity) ? mapping.slotLinks[entity] : []
        table = mapping.entity[entity].map { tables[$0] }
        if let t = table, nextSerial > t.identity.nextSerial { t.identity.nextSerial = nextSerial }
    }

    mutating func insertedSerials(_ r: inout PayloadReader, count n: Int) throws(PayloadReader.Failure) {
        let start = r.offset
        serials.removeAll(keepingCapacity: true)
        // A save of new objects and a snapshot write consecutive serials: read as a run, they
        // are never stored in a list (8 MB for a block of 1M). The reader keeps every serial
        // within `RecordRules.maximumSerial`, and the decoder bounded `n` by the bytes left,
        // before any row is allocated.
        let run = try r.serialRun(count: n, appendingTo: &serials)
        guard let t = table else {
            if let run {
                orphans[entity, default: []].formUnion(run)
            } else {
                orphans[entity, default: []].formUnion(serials)
            }
            return
        }
        t.reserve(n)
        t.warm(rows: n)
        nullsUnwarmed = t.nullsStartAsZeroPages(rows: t.rowCount + n)
        rows.removeAll(keepingCapacity: true)
        appendedRows = nil
        let zeroedOnAppend = mapping.feedsEverySlot[entity] && t.cellsEndAtLastRow
        if let run {
            if let s = run.first(where: { t.row(ofSerial: $0) != nil }) {
                throw PayloadReader.violation(start, RecordRules.insertOfLiveSerial(t.entity.name, s))
            }
            if t.identity.freeRows.isEmpty {
                appendedRows = t.appendRows(serials: run, defaults: !mapping.feedsEverySlot[entity])
            } else {
                for s in run { rows.append(t.allocateRow(serial: s)) }
            }
        } else if let s = serials.first(where: { t.row(ofSerial: $0) != nil }) {
            throw PayloadReader.violation(start, RecordRules.insertOfLiveSerial(t.entity.name, s))
        } else if t.identity.freeRows.isEmpty, zip(serials, serials.dropFirst()).allSatisfy({ $0 < $1 }) {
            // Saves and snapshots write serials in increasing order: distinct without hashing.
            appendedRows = t.appendRows(serials: serials, defaults: !mapping.feedsEverySlot[entity])
        } else {
            for s in serials {
                if let v = RecordRules.insert(t.entity.name, s, isLive: t.row(ofSerial: s) != nil) {
                    throw PayloadReader.violation(start, v)
                }
                rows.append(t.allocateRow(serial: s))
            }
        }
        appendedNullsClear = appendedRows != nil && zeroedOnAppend
        // The rest of the payload bounds the bytes this block can append.
        if n > 0, t.types.contains(where: \.isVariableLength) { t.arena.reserveAdditional(r.count - r.offset) }
    }

    mutating func insertedColumn(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, rows count: Int, nulls: NullBitmap?
    ) throws(PayloadReader.Failure) {
        let slot = slots[attribute]
        if table != nil, slot < 0, slotLinks.indices.contains(attribute), let (link, side) = slotLinks[attribute] {
            var migrated = self.migrated
            self.migrated = []
            defer { self.migrated = migrated }
            try forEachRow { i, row throws(PayloadReader.Failure) in
                let destination = nulls?.isNull(i) == true ? 0 : try r.varint()
                migrated.append((link, side, row, destination))
            }
            return
        }
        guard let t = table, slot >= 0 else {
            try r.skipValues(encoding, count: count - (nulls?.nullCount ?? 0))
            return
        }
        let columnOffset = r.offset
        // A column without nils whose rows' null words are still all zero, and that no other
        // column of the block writes, leaves the null words alone: clearing a bit per row is a
        // second strided pass over a row's memory (8 MB for 1M rows), per column.
        let clearsNulls = nulls != nil || !appendedNullsClear || slots.lazy.filter({ $0 == slot }).count != 1
        if clearsNulls, nullsUnwarmed, let rows = appendedRows {
            t.warmNulls(rows: rows)
            nullsUnwarmed = false
        }
        // One exclusive access to each column for the whole loop, not a uniqueness check per
        // cell (those were 7% of a 1M-object open); one loop per encoding, so that each reads
        // its values with the reader's inlined fast path instead of a call that switches per
        // value.
        try t.update { columns throws(PayloadReader.Failure) in
            if listConversions.indices.contains(attribute), let list = listConversions[attribute] {
                var arena = t.arena
                defer { t.arena = arena }
                try forEachRow { i, row throws(PayloadReader.Failure) in
                    if let nulls, nulls.isNull(i) {
                        columns.setNull(row: row, slot: slot, true)
                        return
                    }
                    let cell = try Self.convertedList(
                        &r, to: list, t, slot: slot, serial: t.identity.serialOfRow[row], into: &arena)
                    columns.setCell(row: row, slot: slot, cell)
                    columns.setNull(row: row, slot: slot, false)
                }
                return
            }
            switch encoding {
            case .bytes, .bytes16, .stringList, .intList:
                // The arena's storage is a reference: a local copy appends to the same memory,
                // and its count goes back to the table when the column is done.
                var arena = t.arena
                defer { t.arena = arena }
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in
                    try r.withBytesValue(encoding) { arena.append($0) }
                }
            case .signedVarint:
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in UInt64(bitPattern: try r.signed())
                }
            case .varint:
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in try r.varint()
                }
            case .fixed64:
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in try r.fixed64()
                }
            case .fixed32:
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in UInt64(try r.fixed32())
                }
            case .bool:
                try fill(columns, slot: slot, nulls: nulls, clearsNulls: clearsNulls, from: &r) {
                    r throws(PayloadReader.Failure) in try r.cell(.bool)
                }
            }
        }
        if let check = t.rawValueChecks[slot] {
            if let range = appendedRows {
                for row in range { checkRawValue(t, row: row, slot: slot, check, at: columnOffset) }
            } else {
                for row in rows { checkRawValue(t, row: row, slot: slot, check, at: columnOffset) }
            }
        }
        if nulls == nil { startIndexFills(t, slot: slot) }
    }

    /// Notes the first value of an enum attribute at `slot` that is not one of its cases
    /// (``RecordRules/rawValue(_:attribute:serial:_:check:)``), checked as each record writes
    /// it, so that open refuses the record that stored it, as a follower does. The refusal
    /// waits for the end of the payload (``finish()``): a payload malformed further on is
    /// refused as damage, as a follower, which decodes it whole first, refuses it.
    private mutating func checkRawValue(
        _ t: EntityTable, row: Int, slot: Int, _ check: AttributeValidator, at offset: Int
    ) {
        guard rawValueViolation == nil, let value = t.value(row: row, slot: slot),
            let v = RecordRules.rawValue(
                t.entity.name, attribute: t.entity.attributes[slot].name, serial: t.identity.serialOfRow[row], value,
                check: check)
        else { return }
        rawValueViolation = (offset, v)
    }

    /// The first enum raw value of the payload that is not a case, and where it was read.
    private var rawValueViolation: (offset: Int, violation: RecordViolation)?

    /// Starts the fill of each unique index of `slot` alone on another core
    /// (``IndexFillJob``), when the block's rows are all of a table that was empty and many
    /// enough, and the slot's cells, just written, are fixed-size and none nil.
    private func startIndexFills(_ t: EntityTable, slot: Int) {
        guard let rows = appendedRows, rows.lowerBound == 0, rows.count >= IndexFillJob.minimumRows,
            t.rowCount == rows.count, t.identity.liveCount == rows.count, !t.types[slot].isVariableLength,
            slots.lazy.filter({ $0 == slot }).count == 1  // no other column of the block writes these cells
        else { return }
        for index in t.indexes.uniqueIndexes
        where index.slots == [slot] && !t.indexes.indexFillJobs.contains(where: { $0.index === index }) {
            if let job = IndexFillJob(table: t, index: index, slot: slot, count: rows.count) {
                t.indexes.indexFillJobs.append(job)
            }
        }
    }

    /// Writes one value per inserted row into `slot` (read by `read`), or its null bit where
    /// `nulls` says the value is nil. With `clearsNulls` false (no `nulls`, and bits known to
    /// be clear), only the cells are written.
    @inline(__always)
    private func fill(
        _ columns: ColumnsHandle, slot: Int, nulls: NullBitmap?, clearsNulls: Bool, from r: inout PayloadReader,
        _ read: (inout PayloadReader) throws(PayloadReader.Failure) -> UInt64
    ) throws(PayloadReader.Failure) {
        if let nulls {
            try forEachRow { i, row throws(PayloadReader.Failure) in
                if nulls.isNull(i) {
                    columns.setNull(row: row, slot: slot, true)
                    return
                }
                columns.setCell(row: row, slot: slot, try read(&r))
                columns.setNull(row: row, slot: slot, false)
            }
        } else if clearsNulls {
            try forEachRow { _, row throws(PayloadReader.Failure) in
                columns.setCell(row: row, slot: slot, try read(&r))
                columns.setNull(row: row, slot: slot, false)
            }
        } else {
            try forEachRow { _, row throws(PayloadReader.Failure) in columns.setCell(row: row, slot: slot, try read(&r))
            }
        }
    }

    /// Calls `body` with each inserted row of the block and its position in the block.
    @inline(__always)
    private func forEachRow(
        _ body: (_ i: Int, _ row: Int) throws(PayloadReader.Failure) -> Void
    ) throws(PayloadReader.Failure) {
        if let range = appendedRows {
            for i in 0..<range.count { try body(i, range.lowerBound &+ i) }
        } else {
            for (i, row) in rows.enumerated() { try body(i, row) }
        }
    }

    mutating func updatedObject(serial: UInt64, at offset: Int) throws(PayloadReader.Failure) {
        guard let t = table else { return }
        if !t.indexes.indexFillJobs.isEmpty { t.discardIndexFillJobs() }
        guard let row = t.row(ofSerial: serial) else {
            throw PayloadReader.violation(offset, RecordRules.updateOfMissingSerial(t.entity.name, serial))
        }
        updatedRow = row
    }

    mutating func updatedField(
        _ r: inout PayloadReader, attribute: Int, encoding: PayloadEncoding, isNull: Bool
    ) throws(PayloadReader.Failure) {
        let slot = slots[attribute]
        if table != nil, slot < 0, slotLinks.indices.contains(attribute), let (link, side) = slotLinks[attribute] {
            migrated.append((link, side, updatedRow, isNull ? 0 : try r.varint()))
            return
        }
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
        let valueOffset = r.offset
        if listConversions.indices.contains(attribute), let list = listConversions[attribute] {
            var arena = t.arena
            defer { t.arena = arena }
            t.values[cell] = try Self.convertedList(
                &r, to: list, t, slot: slot, serial: t.identity.serialOfRow[row], into: &arena)
            t.nulls[row * t.maskWords + slot / 64] &= ~(1 << UInt64(slot % 64))
            return
        }
        switch encoding {
        case .bytes, .bytes16, .stringList, .intList:
            t.values[cell] = try r.withBytesValue(encoding) { t.arena.append($0) }
        default:
            t.values[cell] = try r.cell(encoding)
        }
        t.nulls[row * t.maskWords + slot / 64] &= ~(1 << UInt64(slot % 64))
        if let check = t.rawValueChecks[slot] { checkRawValue(t, row: row, slot: slot, check, at: valueOffset) }
    }

    /// Reads a stored `Codable` value (its JSON) of `t`'s `slot`, now a native list of type
    /// `list`, and appends its native encoding to `arena`; returns the cell. JSON that does not
    /// decode as the list is refused (`incompatibleSchema`), naming the object: the open fails
    /// and nothing on disk changes.
    private static func convertedList(
        _ r: inout PayloadReader, to list: AttributeType, _ t: EntityTable, slot: Int, serial: UInt64,
        into arena: inout ByteArena
    ) throws(PayloadReader.Failure) -> UInt64 {
        let start = r.offset
        return try r.withBytesValue(.bytes) { json throws(PayloadReader.Failure) in
            let native: [UInt8]
            do {
                native = try ListCoding.cell(convertingJSON: json, to: list)
            } catch {
                throw PayloadReader.violation(
                    start,
                    RecordRules.listNotConvertible(
                        t.entity.name, attribute: t.entity.attributes[slot], serial: serial, json: json, to: list,
                        error))
            }
            return native.withUnsafeBytes { arena.append($0) }
        }
    }

    mutating func deletedSerials(_ r: inout PayloadReader) throws(PayloadReader.Failure) {
        let start = r.offset
        serials.removeAll(keepingCapacity: true)
        _ = try r.serialList(appendingTo: &serials)
        guard let t = table else {
            orphans[entity, default: []].subtract(serials)
            return
        }
        if !serials.isEmpty, !t.indexes.indexFillJobs.isEmpty { t.discardIndexFillJobs() }
        for serial in serials {
            guard let row = t.row(ofSerial: serial) else {
                throw PayloadReader.violation(start, RecordRules.deleteOfMissingSerial(t.entity.name, serial))
            }
            for slot in 0..<t.stride where t.types[slot].isVariableLength && !t.isNull(row: row, slot: slot) {
                t.arena.garbage += ArenaRef(t.values[row * t.stride + slot]).length
            }
            t.releaseRow(row)
        }
    }
}
