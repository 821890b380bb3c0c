import Foundation
internal import GraphJournal

/// The compact storage of one entity's objects in one context.
///
/// Row-major: row `r` holds `stride` 64-bit cells (`values[r * stride + slot]`) and
/// `maskWords` words of null bits (both arrays may run past the last row: room a bulk import
/// made with `reserveRows`). Fixed-size attributes are stored as their bit pattern;
/// strings, data, UUIDs and URLs as an ``ArenaRef`` into `arena`, an append-only byte buffer.
/// Nothing is allocated per attribute value, and an object instance is only created when
/// somebody asks for it (then kept, so the same row always yields the same instance).
///
/// Single cells are read and written through the arrays. A loop over many cells takes the
/// columns' buffers once, through a ``ColumnsHandle`` (``read(_:)``, ``update(_:)``); the bulk
/// operations that copy whole rows (defaults, before-images) are in EntityTable+Columns.swift,
/// the one file that touches the columns' memory.
///
/// Change tracking: the first change of a committed row in a transaction copies the row
/// (cells and null bits) to a before-image; `rollback` copies it back and truncates the arena to
/// its committed length, which discards every byte the transaction appended.
///
/// The hot stored properties opt out of dynamic exclusivity checking: a table is confined to
/// its context's isolation domain and no method holds an inout access to one of them across a
/// call that touches the same property. Measured (callgrind, `Tools/Benchmarks`): the checks
/// were half to two thirds of the instructions of insert, update and rollback.
final class EntityTable {
    struct Flags {
        static let live: UInt8 = 1
        static let inserted: UInt8 = 2
        static let deleted: UInt8 = 4
        static let dirty: UInt8 = 8
        /// Inserted and deleted in the same transaction: invisible, freed at save or rollback.
        static let vanished: UInt8 = 16
    }

    let entity: EntityDescription
    let entityIndex: Int
    /// The context that owns this table. An object knows only its table, so everything an
    /// object does that involves the rest of its graph goes through here: `modelContext`,
    /// the ownership checks of insert, delete and observation (`table.context === self`),
    /// and a relationship set, which resolves the destination table
    /// (`context.tables[destination]`, on every relationship access) and inserts a
    /// destination not yet in a context. `unowned`: the context owns its tables (a strong
    /// reference back would be a cycle), and an unowned read is cheaper than a weak one on
    /// those paths; the context's `deinit` detaches the instances that outlive it.
    /// Persistence never goes through it: a context's saves go through its door.
    unowned let context: ModelContext
    let stride: Int
    let maskWords: Int
    let types: [AttributeType]
    /// Per slot, the check that an enum attribute's raw value is a case
    /// (``AttributeDescription/rawValueCheck``); nil for the other attributes. Replay and a
    /// change set's apply refuse a record storing one that is not (``RecordRules``).
    let rawValueChecks: [AttributeValidator?]
    /// Null bits of the attributes that must have a value.
    let requiredMask: [UInt64]
    /// The slots of the attributes with declared validators (`@Attribute(.range(…))`).
    let validatedSlots: [Int]
    /// The lifecycle hooks the context still calls on this entity's objects: starts as
    /// `Entity.implementedHooks` and loses a hook when its empty default runs (``EntityHooks``).
    /// The context creates no instance only to call a hook that is not here.
    var hooks: EntityHooks

    @exclusivity(unchecked) var values: [UInt64] = []
    @exclusivity(unchecked) var nulls: [UInt64] = []
    @exclusivity(unchecked) var arena = ByteArena()
    @exclusivity(unchecked) var flags: [UInt8] = []
    /// Per row, its serial (0 for a freed row): counting (stored as nothing) while row `r` has
    /// serial `r + 1` (``CountingArray``).
    @exclusivity(unchecked) var serialOfRow = CountingArray<UInt64>(offset: 1)
    /// Per row, its materialized instance, if any.
    @exclusivity(unchecked) var instances = RowSlots<AnyObject?>(absent: nil)
    /// Per row, the index of its before-image in `beforeValues`, or -1 when the row has none.
    @exclusivity(unchecked) var beforeIndex = RowSlots<Int32>(absent: -1)

    /// Unique index fills running on another core during replay (``IndexFillJob``).
    var indexFillJobs: [IndexFillJob] = []

    /// Row `serial - 1`; -1 for a serial with no live row. Counting while serial `s` is row
    /// `s - 1`.
    @exclusivity(unchecked) var rowOfSerial = CountingArray<Int32>(offset: 0)
    @exclusivity(unchecked) var nextSerial: UInt64 = 1
    @exclusivity(unchecked) var freeRows: [Int32] = []
    @exclusivity(unchecked) var liveCount = 0

    // The pending transaction.
    @exclusivity(unchecked) var insertedRows: [Int32] = []
    @exclusivity(unchecked) var deletedRows: [Int32] = []
    @exclusivity(unchecked) var dirtyRows: [Int32] = []
    /// Rows inserted and deleted in the same transaction: freed at save or rollback.
    @exclusivity(unchecked) var vanishedRows: [Int32] = []
    @exclusivity(unchecked) var beforeValues: [UInt64] = []
    @exclusivity(unchecked) var beforeNulls: [UInt64] = []
    var committedArenaCount = 0
    var committedGarbage = 0

    var defaultValues: [UInt64] {
        didSet { defaultRow.set(defaultValues) }
    }
    /// A copy of `defaultValues` that a new row's cells are copied from without retaining the
    /// array (a retain and release per row of a bulk import).
    private let defaultRow: DefaultCells
    let defaultNulls: [UInt64]

    /// One hash index per unique constraint; `indexesBySlot[slot]` lists the indexes a slot
    /// is a key of.
    let uniqueIndexes: [UniqueIndex]
    let indexesBySlot: [[Int]]
    /// The declared non-unique indexes (SecondaryIndex.swift); `secondaryBySlot[slot]` lists
    /// the ones a slot is a key of.
    let secondaryIndexes: [SecondaryIndex]
    let secondaryBySlot: [[Int]]
    /// Bit `s` for each slot `s` below 64 that a secondary index keys, and bit 63 also for
    /// every slot from 63 on that one keys: a set of another slot skips the index hook at once.
    let secondarySlotMask: UInt64
    /// The hash indexes that conversions of Swift values made to find objects by attributes
    /// no unique constraint covers (IdentityIndex.swift), kept up to date by the same hooks as
    /// the secondary indexes.
    @exclusivity(unchecked) var identityIndexes: [IdentityIndex] = []
    /// ``secondarySlotMask`` for the identity indexes.
    @exclusivity(unchecked) var identitySlotMask: UInt64 = 0
    /// Whether any index keeps rows by key and must hear of every change of a row
    /// (``touchIndexes(row:)``).
    var tracksRowKeys: Bool { !secondaryIndexes.isEmpty || !identityIndexes.isEmpty }

    /// The entity's relationships, resolved against the context's schema.
    let relationships: [ResolvedRelationship]
    /// Per slot, the index of a to-one whose inverse is a to-many (ReferenceIndex.swift).
    let referenceIndexOfSlot: [ReferenceIndex?]
    /// The slots that have a reference index.
    let referenceSlots: [Int]
    /// The link tables this entity is a side of (relationships stored as links), with its side.
    var linkSides: [(LinkTable, Int)] = []
    /// Bit `s` for each slot `s` below 64 that no unique index keys and no reference index
    /// tracks: on a row inserted since the innermost savepoint, a set of such a slot needs only
    /// the write (``setCell(row:slot:_:primitive:)``).
    let plainSlots: UInt64

    // Savepoints (nested, for imports and transactions that roll back as a whole).
    @exclusivity(unchecked) var savepoints: [SavepointMark] = []
    @exclusivity(unchecked) var undo: [UndoEntry] = []
    /// Per row, the insertion clock of rows reused (from `freeRows`) while a savepoint was active
    /// (0 or stale otherwise: the clock only grows, so a stale stamp is older than any mark).
    @exclusivity(unchecked) var stamps: [UInt64] = []
    @exclusivity(unchecked) var insertClock: UInt64 = 0

    /// While `willSave` runs: the rows changed by normal (not primitive) sets or inserted, which
    /// get `willSave` again in the next pass. `nil` when not tracking.
    @exclusivity(unchecked) var willSaveTouched: Set<Int32>?
    /// Per row, the slots (below 64) changed since the last save by primitive sets only: saved,
    /// but not reported to observers (Docs/Semantics.md, rule 3).
    @exclusivity(unchecked) var primitiveOnly: [Int32: UInt64] = [:]
    /// Rows deleted by the save in progress, released after `didSave` ran on their objects.
    @exclusivity(unchecked) var awaitingRelease: [Int32] = []

    init(entity: EntityDescription, index: Int, context: ModelContext) {
        self.entity = entity
        self.entityIndex = index
        self.context = context
        asEntity = Self.caster(entity.type)
        hooks = entity.type.implementedHooks
        stride = entity.attributes.count
        maskWords = max(1, (stride + 63) / 64)
        types = entity.attributes.map(\.type)
        rawValueChecks = entity.attributes.map(\.rawValueCheck)
        var required = Array(repeating: UInt64(0), count: maskWords)
        for (i, a) in entity.attributes.enumerated() where !a.isOptional {
            required[i / 64] |= 1 << UInt64(i % 64)
        }
        requiredMask = required
        validatedSlots = entity.attributes.indices.filter { !entity.attributes[$0].validators.isEmpty }
        // Defaults: cells and null bits every new row starts with. Default bytes live at the
        // start of the arena and are never garbage.
        var dv = Array(repeating: UInt64(0), count: stride)
        var dn = Array(repeating: UInt64(0), count: maskWords)
        var arena = ByteArena()
        for (i, a) in entity.attributes.enumerated() {
            if let d = a.defaultValue, let v = AttributeValue.coerce(attributeValue: d, to: a.type) {
                v.withCell { cell in
                    switch cell {
                    case .fixed(let bits): dv[i] = bits
                    case .bytes(let buffer): dv[i] = arena.append(buffer)
                    }
                }
            } else {
                dn[i / 64] |= 1 << UInt64(i % 64)
            }
        }
        defaultRow = DefaultCells(dv)
        defaultValues = dv
        defaultNulls = dn
        self.arena = arena
        uniqueIndexes = zip(entity.uniqueConstraints, entity.uniqueSlots).map { UniqueIndex(constraint: $0, slots: $1) }
        var bySlot = Array(repeating: [Int](), count: entity.attributes.count)
        for (i, slots) in entity.uniqueSlots.enumerated() { for s in Set(slots) { bySlot[s].append(i) } }
        indexesBySlot = bySlot
        secondaryIndexes = zip(entity.indexes, entity.indexSlots).map { SecondaryIndex(description: $0, slots: $1, entity: entity) }
        var secondaryBySlot = Array(repeating: [Int](), count: entity.attributes.count)
        for (i, index) in secondaryIndexes.enumerated() { for s in index.slots { secondaryBySlot[s].append(i) } }
        self.secondaryBySlot = secondaryBySlot
        var secondaryMask: UInt64 = 0
        for (s, indexes) in secondaryBySlot.enumerated() where !indexes.isEmpty { secondaryMask |= 1 << UInt64(min(s, 63)) }
        secondarySlotMask = secondaryMask
        relationships = context.schema.relationships.indices.contains(index) ? context.schema.relationships[index] : []
        var references = Array(repeating: ReferenceIndex?.none, count: entity.attributes.count)
        for r in relationships where r.slot >= 0 && r.inverseIsToMany { references[r.slot] = ReferenceIndex(slot: r.slot) }
        referenceIndexOfSlot = references
        referenceSlots = references.indices.filter { references[$0] != nil }
        var plain: UInt64 = 0
        for s in 0..<min(64, stride) where bySlot[s].isEmpty && references[s] == nil { plain |= 1 << UInt64(s) }
        plainSlots = plain
        committedArenaCount = arena.count
    }

    // MARK: Rows and serials

    var rowCount: Int { flags.count }

    func serial(ofRow row: Int) -> UInt64 { serialOfRow[row] }

    func row(ofSerial serial: UInt64) -> Int? {
        guard serial >= 1, serial <= UInt64(rowOfSerial.count) else { return nil }
        let r = rowOfSerial[Int(serial - 1)]
        return r < 0 ? nil : Int(r)
    }

    /// Allocates a row for `serial` with default values.
    func allocateRow(serial: UInt64) -> Int {
        let row: Int
        if let r = freeRows.popLast() {
            row = Int(r)
            values.replaceSubrange(row * stride..<(row + 1) * stride, with: defaultValues)
            nulls.replaceSubrange(row * maskWords..<(row + 1) * maskWords, with: defaultNulls)
            flags[row] = Flags.live
            serialOfRow[row] = serial
        } else {
            row = flags.count
            if values.count >= (row + 1) * stride && nulls.count >= (row + 1) * maskWords {
                // Room made by `reserveRows`: a copy into it, no append machinery.
                update { columns in columns.reset(row: row, cells: defaultRow, nulls: defaultNulls) }
            } else {
                appendDefaultCells()
            }
            flags.append(Flags.live)
            serialOfRow.append(serial)
        }
        if UInt64(rowOfSerial.count) + 1 == serial {
            rowOfSerial.append(Int32(row))
        } else {
            if UInt64(rowOfSerial.count) < serial {
                rowOfSerial.append(contentsOf: repeatElement(-1, count: Int(serial) - rowOfSerial.count))
            }
            rowOfSerial[Int(serial - 1)] = Int32(row)
        }
        if serial >= nextSerial { nextSerial = serial + 1 }
        liveCount += 1
        if tracksRowKeys { touchIndexes(row: row) }
        return row
    }

    /// Appends one committed row per serial, in bulk (replay). The serials must be new and
    /// distinct. Returns the rows.
    ///
    /// With `defaults`, each row holds its attributes' default values. Without, its cells and
    /// null bits are zero (non-nil zeros), for a caller that writes every cell and null bit of
    /// the rows next: writing the defaults first was one more pass over all of the rows' cells
    /// (3.7 ms of a 1M-object open).
    func appendRows<Serials: RandomAccessCollection<UInt64>>(serials: Serials, defaults: Bool = true) -> Range<Int> {
        let first = flags.count
        let n = serials.count
        guard n > 0 else { return first..<first }
        // The small arrays first, the cells last: the cells are most of the memory, and
        // ``warm(rows:)`` had another core fault them in meanwhile.
        flags.append(contentsOf: repeatElement(Flags.live, count: n))
        serialOfRow.append(contentsOf: serials)
        if serialOfRow.isCounting && rowOfSerial.count == first && rowOfSerial.appendCounting(n) {
            // Serials `first + 1 ... first + n`, row `s - 1` each: both maps still count.
            if UInt64(first + n) >= nextSerial { nextSerial = UInt64(first + n) + 1 }
        } else {
            if let highest = serials.max() {
                if UInt64(rowOfSerial.count) < highest {
                    rowOfSerial.append(contentsOf: repeatElement(-1, count: Int(highest) - rowOfSerial.count))
                }
                if highest >= nextSerial { nextSerial = highest + 1 }
            }
            mapSerials(serials, toRowsFrom: first)
        }
        extendCells(toRows: first + n)  // room `reserveRows` made is used first
        if defaults { update { columns in columns.fill(rows: first..<first + n, cells: defaultValues, nulls: defaultNulls) } }
        liveCount += n
        if tracksRowKeys { discardSecondaryIndexes() }
        if !referenceSlots.isEmpty { invalidateReferenceIndexes() }
        return first..<first + n
    }

    /// Pre-sizes the storage for `count` more rows. Grows geometrically: replay calls this
    /// once per record, and an exact `reserveCapacity` each time would copy every column once
    /// per record (quadratic in a journal of many small saves).
    func reserve(_ count: Int) {
        let needed = flags.count + count
        guard needed > flags.capacity else { return }
        let rows = max(needed, flags.capacity * 2)
        values.reserveCapacity(rows * stride)
        nulls.reserveCapacity(rows * maskWords)
        flags.reserveCapacity(rows)
        serialOfRow.reserveCapacity(rows)
        rowOfSerial.reserveCapacity(max(rowOfSerial.capacity * 2, rowOfSerial.count + count))
    }

    /// ``reserve(_:)``, and makes `values` and `nulls` long enough for `count` more rows, so
    /// that allocating each of them copies its defaults in place instead of appending (the
    /// append machinery of two arrays was ~180 instructions per row of a bulk import).
    ///
    /// `values` and `nulls` may thus be longer than the rows need; nothing reads past the last
    /// row, and a row allocated there gets its defaults written as any new row does.
    func reserveRows(_ count: Int) {
        reserve(count)
        extendCells(toRows: flags.count + count)
    }

    /// Whether the cells and null words end at the last row: no room ``reserveRows(_:)`` made
    /// lies past it, so rows appended next get zeroed cells and null words.
    var cellsEndAtLastRow: Bool { values.count == flags.count * stride && nulls.count == flags.count * maskWords }

    /// Makes `values` and `nulls` at least `rows` rows long (zeros), keeping what is there.
    ///
    /// The first null words of a table come as zero pages (``nullsStartAsZeroPages(rows:)``):
    /// they cost no memory until a nil is written, and an entity whose values are never nil
    /// never writes them (8 MB for a million rows of up to 64 attributes).
    private func extendCells(toRows rows: Int) {
        if values.count < rows * stride { values.append(contentsOf: repeatElement(0, count: rows * stride - values.count)) }
        if nulls.count < rows * maskWords {
            if nullsStartAsZeroPages(rows: rows) {
                nulls = ZeroPages.zeros(count: rows * maskWords, capacity: nulls.capacity)
            } else {
                nulls.append(contentsOf: repeatElement(0, count: rows * maskWords - nulls.count))
            }
        }
    }

    /// Whether the null words of the first `rows` rows of this table, which has none yet, are
    /// made as zero pages rather than written (``ZeroPages``): when they are many enough.
    func nullsStartAsZeroPages(rows: Int) -> Bool {
        nulls.isEmpty && rows * maskWords * MemoryLayout<UInt64>.stride >= ZeroPages.minimumBytes
    }

    /// Inserts a new row (a pending insert) and returns it.
    ///
    /// With `indexed: false` the caller sets the row's key attributes and then calls
    /// ``indexAll(row:)`` itself, which saves indexing the defaults first (a bulk import would
    /// otherwise park every new row among the duplicates of the default key for a moment).
    func insertRow(indexed: Bool = true) -> Int {
        let appended = freeRows.isEmpty
        let row = allocateRow(serial: nextSerial)
        flags[row] |= Flags.inserted
        insertedRows.append(Int32(row))
        // An appended row is past every active savepoint's row count, which tells it is new;
        // only a reused row needs the clock.
        if !savepoints.isEmpty && !appended { stampInsertion(row: row) }
        if indexed && !uniqueIndexes.isEmpty { indexAll(row: row) }
        willSaveTouched?.insert(Int32(row))
        return row
    }

    /// Writes a cell of a row inserted in this transaction, before it is indexed: no change
    /// tracking, undo or index maintenance is needed for it.
    func writeFresh(row: Int, slot: Int, _ cell: RawCell) {
        switch cell {
        case .fixed(let bits): values[row * stride + slot] = bits
        case .bytes(let buffer): values[row * stride + slot] = arena.append(buffer)
        }
        nulls[row * maskWords + slot / 64] &= ~(1 << UInt64(slot % 64))
        if !referenceSlots.isEmpty && referenceIndexOfSlot[slot] != nil { invalidateReferenceIndexes() }
        touchIndexes(row: row, slot: slot)
    }

    /// Frees a row: its serial is retired for good, its instance reference dropped.
    func releaseRow(_ row: Int) {
        for (links, side) in linkSides { links.drop(side, row) }
        let serial = serialOfRow[row]
        if serial >= 1, Int(serial) <= rowOfSerial.count { rowOfSerial[Int(serial - 1)] = -1 }
        serialOfRow[row] = 0
        flags[row] = 0
        instances.clear(row)
        beforeIndex.clear(row)
        freeRows.append(Int32(row))
        liveCount -= 1
        if tracksRowKeys { touchIndexes(row: row) }
    }

    /// Turns a stored instance back into `any Entity` without a dynamic cast: every instance
    /// of this table is exactly of `entity.type` (measured: the `as?` cast was a third of the
    /// cost of running the save hooks over 1M objects).
    let asEntity: (AnyObject) -> any Entity

    private static func caster<T: Entity>(_ type: T.Type) -> (AnyObject) -> any Entity {
        { unsafeDowncast($0, to: T.self) }
    }

    func instance(row: Int) -> any Entity {
        if let object = instances[row] { return asEntity(object) }
        return makeInstance(row: row)
    }

    /// Creates, keeps and returns the instance of `row`, which has none yet: `awakeFromFetch`
    /// runs on it unless the row was inserted in this transaction.
    func makeInstance(row: Int) -> any Entity {
        let object = entity.type.init(_backing: ObjectBacking(table: self, row: Int32(row)))
        instances[row] = object
        if flags[row] & Flags.inserted == 0 && hooks.contains(.awakeFromFetch) {
            context.rowsInUse += 1
            object.awakeFromFetch()
            context.rowsInUse -= 1
        }
        return object
    }

    /// Turns the row's instance, if any, into a standalone object holding the row's current
    /// values, so that it stays readable after its row is freed.
    func detachInstance(row: Int) {
        guard let object = instances[row], let e = object as? any Entity else { return }
        let snapshot = StandaloneValues(entity: entity)
        for slot in 0..<stride { snapshot.values[slot] = .some(value(row: row, slot: slot)) }
        e._backing = ObjectBacking(standalone: snapshot)
        instances.clear(row)
    }

    // MARK: State queries

    /// The rows inserted since the last save that are still inserted (not deleted again).
    var pendingInserts: [Int] { Self.rows(of: insertedRows) { self.isInserted(row: $0) } }
    /// The committed rows whose values differ from their committed ones (not deleted).
    var pendingUpdates: [Int] { Self.rows(of: dirtyRows) { self.isUpdated(row: $0) } }
    /// The committed rows deleted since the last save.
    var pendingDeletes: [Int] { Self.rows(of: deletedRows) { self.isDeleted(row: $0) } }

    /// The pending inserts, updates and deletes, in that order, as one list.
    var pendingRowList: [Int32] {
        var list: [Int32] = []
        list.reserveCapacity(insertedRows.count + dirtyRows.count + deletedRows.count)
        for r in insertedRows where isInserted(row: Int(r)) { list.append(r) }
        for r in dirtyRows where isUpdated(row: Int(r)) { list.append(r) }
        for r in deletedRows where isDeleted(row: Int(r)) { list.append(r) }
        return list
    }

    /// The rows of `list` that `keep` keeps. The result is allocated once, at the list's
    /// length: appended to from empty, a list of 1M rows went through every power of two,
    /// the last two alive at once, and raised a bulk save's peak memory.
    private static func rows(of list: [Int32], where keep: (Int) -> Bool) -> [Int] {
        var rows: [Int] = []
        rows.reserveCapacity(list.count)
        for r in list where keep(Int(r)) { rows.append(Int(r)) }
        return rows
    }

    /// The pending inserts, updates and deletes, listed once: a save lists them after
    /// `willSave` settled and hands the lists to every later step.
    var pendingRows: PendingRows { PendingRows(inserts: pendingInserts, updates: pendingUpdates, deletes: pendingDeletes) }

    /// Whether a row is an object that lookups see: live, not deleted, not vanished.
    func isVisible(row: Int) -> Bool {
        flags[row] & (Flags.live | Flags.deleted | Flags.vanished) == Flags.live
    }

    func isInserted(row: Int) -> Bool { row >= 0 && flags[row] & Flags.inserted != 0 }
    func isDeleted(row: Int) -> Bool { row >= 0 && flags[row] & Flags.deleted != 0 }

    func isUpdated(row: Int) -> Bool {
        guard row >= 0 else { return false }
        let f = flags[row]
        guard f & Flags.dirty != 0, f & (Flags.inserted | Flags.deleted) == 0 else { return false }
        return differsFromCommitted(row: row)
    }

    func differsFromCommitted(row: Int) -> Bool {
        for slot in 0..<stride where slotDiffers(row: row, slot: slot) { return true }
        return false
    }

    func slotDiffers(row: Int, slot: Int) -> Bool {
        let b = Int(beforeIndex[row])
        guard b >= 0 else { return false }
        let bit = UInt64(1) << UInt64(slot % 64)
        let nowNull = nulls[row * maskWords + slot / 64] & bit != 0
        let wasNull = beforeNulls[b * maskWords + slot / 64] & bit != 0
        if nowNull != wasNull { return true }
        if nowNull { return false }
        let now = values[row * stride + slot]
        let was = beforeValues[b * stride + slot]
        if now == was { return false }
        return !(types[slot].isVariableLength && arena.equal(ArenaRef(now), ArenaRef(was)))
    }

    var hasPendingChanges: Bool {
        insertedRows.contains { isInserted(row: Int($0)) } || !deletedRows.isEmpty
            || dirtyRows.contains { isUpdated(row: Int($0)) }
    }

    // MARK: Reading

    @inline(__always)
    func isNull(row: Int, slot: Int) -> Bool {
        nulls[row * maskWords + slot / 64] & (1 << UInt64(slot % 64)) != 0
    }

    @inline(__always)
    func read<T: PrimitiveAttribute>(row: Int, slot: Int, as type: T.Type) -> T? {
        if isNull(row: row, slot: slot) { return nil }
        let cell = values[row * stride + slot]
        if types[slot].isVariableLength {
            // The arena's stored fields, not the arena: see `ByteArena.unretainedBase`.
            return T._decode(.bytes(ByteArena.bytes(ArenaRef(cell), base: arena.unretainedBase, count: arena.count)))
        }
        return T._decode(.fixed(cell))
    }

    func value(row: Int, slot: Int) -> AttributeValue? {
        if isNull(row: row, slot: slot) { return nil }
        return decode(cell: values[row * stride + slot], slot: slot)
    }

    func decode(cell: UInt64, slot: Int) -> AttributeValue {
        let type = types[slot]
        if type.isVariableLength {
            return arena.withBytes(ArenaRef(cell)) { AttributeValue.decode(.bytes($0), as: type) }
        }
        return AttributeValue.decode(.fixed(cell), as: type)
    }

    func committedValue(row: Int, slot: Int) -> AttributeValue? {
        let b = Int(beforeIndex[row])
        guard b >= 0 else { return value(row: row, slot: slot) }
        if beforeNulls[b * maskWords + slot / 64] & (1 << UInt64(slot % 64)) != 0 { return nil }
        return decode(cell: beforeValues[b * stride + slot], slot: slot)
    }

    func slots(forKeys keys: [String]?) throws(ObjectGraphError) -> [Int] {
        guard let keys else { return Array(0..<stride) }
        var result: [Int] = []
        for key in keys {
            guard let s = entity.slot(forKey: key) else {
                throw ObjectGraphError(.unknownKey, "\(entity.name) has no attribute '\(key)'", entity: entity.name, key: key)
            }
            result.append(s)
        }
        return result
    }

    func changedValues(row: Int) -> [String: AttributeValue?] {
        guard row >= 0 else { return [:] }
        var result: [String: AttributeValue?] = [:]
        if flags[row] & Flags.inserted != 0 {
            for slot in 0..<stride where !isNull(row: row, slot: slot) {
                result[entity.attributes[slot].name] = .some(value(row: row, slot: slot))
            }
            return result
        }
        for slot in 0..<stride where slotDiffers(row: row, slot: slot) {
            result[entity.attributes[slot].name] = .some(value(row: row, slot: slot))
        }
        return result
    }

    func committedValues(row: Int, slots: [Int]) -> [String: AttributeValue?] {
        guard row >= 0, flags[row] & Flags.inserted == 0 else { return [:] }
        var result: [String: AttributeValue?] = [:]
        for slot in slots { result[entity.attributes[slot].name] = .some(committedValue(row: row, slot: slot)) }
        return result
    }

    // MARK: Writing

    @inline(__always)
    func willChange(row: Int) {
        if flags[row] & (Flags.inserted | Flags.dirty) == 0 { captureBeforeImage(row: row) }
    }

    func captureBeforeImage(row: Int) {
        beforeIndex[row] = Int32(dirtyRows.count)
        dirtyRows.append(Int32(row))
        appendBeforeImage(ofRow: row)
        flags[row] |= Flags.dirty
    }

    func write<T: PrimitiveAttribute>(row: Int, slot: Int, _ value: T) {
        value._withCell { setCell(row: row, slot: slot, $0) }
    }

    func set(row: Int, slot: Int, value: AttributeValue?, primitive: Bool = false) {
        guard let value else {
            if isNull(row: row, slot: slot) { return }
            willChange(row: row)
            notePrimitive(primitive, row: row, slot: slot)
            if !primitive { willSaveTouched?.insert(Int32(row)) }
            if !savepoints.isEmpty { logCell(row: row, slot: slot) }
            let indexed = !indexesBySlot[slot].isEmpty
            if indexed { unindex(row: row, slot: slot) }
            if !referenceSlots.isEmpty && isVisible(row: row) { unreference(row: row, slot: slot) }
            if types[slot].isVariableLength { arena.garbage += ArenaRef(values[row * stride + slot]).length }
            nulls[row * maskWords + slot / 64] |= 1 << UInt64(slot % 64)
            if indexed { reindex(row: row, slot: slot) }
            touchIndexes(row: row, slot: slot)
            return
        }
        value.withCell { setCell(row: row, slot: slot, $0, primitive: primitive) }
    }

    /// Keeps ``primitiveOnly`` up to date for a change of `slot`.
    @inline(__always)
    func notePrimitive(_ primitive: Bool, row: Int, slot: Int) {
        guard slot < 64 else { return }
        let bit = UInt64(1) << UInt64(slot)
        if primitive {
            primitiveOnly[Int32(row), default: 0] |= bit
        } else if !primitiveOnly.isEmpty, let mask = primitiveOnly[Int32(row)] {
            primitiveOnly[Int32(row)] = mask & ~bit == 0 ? nil : mask & ~bit
        }
    }

    /// Whether a (non-primitive) set of `slot` on `row` only has to write the cell: the row was
    /// inserted in this transaction and since the innermost savepoint, no `willSave` pass or
    /// primitive set is being tracked, and no index covers the slot.
    @inline(__always)
    private func isFreshWrite(row: Int, slot: Int, primitive: Bool) -> Bool {
        guard !primitive, slot < 64, plainSlots & (1 << UInt64(slot)) != 0,
              flags[row] & Flags.inserted != 0, willSaveTouched == nil, primitiveOnly.isEmpty
        else { return false }
        return savepoints.isEmpty || isNewInInnermostSavepoint(row: row)
    }

    func setCell(row: Int, slot: Int, _ cell: RawCell, primitive: Bool = false) {
        let index = row * stride + slot
        let maskIndex = row * maskWords + slot / 64
        let bit = UInt64(1) << UInt64(slot % 64)
        let wasNull = nulls[maskIndex] & bit != 0
        switch cell {
        case .fixed(let bits):
            if !wasNull && values[index] == bits { return }
        case .bytes(let buffer):
            if !wasNull && arena.equal(ArenaRef(values[index]), buffer) { return }
        }
        // A row inserted since the innermost savepoint, as an import's `didInsert` writes them:
        // the bookkeeping below would all be no-ops (no before-image, already in
        // `willSaveTouched` when that is tracked, no undo inside its savepoint, no index on the
        // slot), so only the write is left.
        let fresh = isFreshWrite(row: row, slot: slot, primitive: primitive)
        if !fresh {
            willChange(row: row)
            notePrimitive(primitive, row: row, slot: slot)
            if !primitive { willSaveTouched?.insert(Int32(row)) }
            if !savepoints.isEmpty { logCell(row: row, slot: slot) }
        }
        let indexed = !fresh && !indexesBySlot[slot].isEmpty  // a fresh row's slot has no index
        if indexed { unindex(row: row, slot: slot) }
        let referenced = !fresh && !referenceSlots.isEmpty && referenceIndexOfSlot[slot] != nil && isVisible(row: row)
        if referenced { unreference(row: row, slot: slot) }
        switch cell {
        case .fixed(let bits):
            values[index] = bits
        case .bytes(let buffer):
            if !wasNull { arena.garbage += ArenaRef(values[index]).length }
            values[index] = arena.append(buffer)
        }
        if wasNull { nulls[maskIndex] &= ~bit }
        if indexed { reindex(row: row, slot: slot) }
        touchIndexes(row: row, slot: slot)
        if referenced { rereference(row: row, slot: slot) }
    }

    // MARK: Delete

    /// Marks a row deleted. An inserted row vanishes instead (Docs/Semantics.md, rule 7).
    func delete(row: Int) {
        let f = flags[row]
        guard f & (Flags.deleted | Flags.vanished) == 0 else { return }
        if !uniqueIndexes.isEmpty { unindexAll(row: row) }
        if !referenceSlots.isEmpty { unreferenceAll(row: row) }
        if f & Flags.inserted != 0 {
            if !savepoints.isEmpty && !isNewInInnermostSavepoint(row: row) {
                undo.append(.vanish(row: Int32(row), object: instances[row]))
            }
            detachInstance(row: row)
            flags[row] = Flags.live | Flags.vanished  // skipped by save and rollback
            rowOfSerial[Int(serialOfRow[row] - 1)] = -1  // invisible to lookups at once
            vanishedRows.append(Int32(row))
            return
        }
        flags[row] |= Flags.deleted
        deletedRows.append(Int32(row))
        if !savepoints.isEmpty { undo.append(.delete(row: Int32(row))) }
    }

    // MARK: Transaction end

    func rollback() {
        if !referenceSlots.isEmpty { invalidateReferenceIndexes() }
        savepoints.removeAll()
        undo.removeAll()
        if !uniqueIndexes.isEmpty {
            for r in insertedRows where flags[Int(r)] & Flags.inserted != 0 { unindexAll(row: Int(r)) }
            for r in dirtyRows where flags[Int(r)] & Flags.deleted == 0 { unindexAll(row: Int(r)) }
        }
        for r in insertedRows where flags[Int(r)] & Flags.inserted != 0 {
            detachInstance(row: Int(r))
            releaseRow(Int(r))
        }
        for r in vanishedRows { releaseRow(Int(r)) }
        if tracksRowKeys {
            for r in dirtyRows where beforeIndex[Int(r)] >= 0 { touchIndexes(row: Int(r)) }
        }
        restoreBeforeImages()
        for r in deletedRows { flags[Int(r)] &= ~Flags.deleted }
        if !uniqueIndexes.isEmpty {
            for r in dirtyRows where isVisible(row: Int(r)) { indexAll(row: Int(r)) }
            for r in deletedRows where isVisible(row: Int(r)) && flags[Int(r)] & Flags.dirty == 0 { indexAll(row: Int(r)) }
            for index in uniqueIndexes { index.duplicates.removeAll() }
        }
        arena.truncate(to: committedArenaCount, garbage: committedGarbage)
        clearTransaction()
    }

    /// Makes the transaction the committed state. With `deferringDeleted`, deleted rows stay
    /// (flagged deleted, so their objects' `isDeleted` is still true in `didSave`) until
    /// ``releaseDeleted()``.
    func commit(deferringDeleted: Bool = false) {
        savepoints.removeAll()
        undo.removeAll()
        for r in deletedRows where flags[Int(r)] & Flags.deleted != 0 {
            let row = Int(r)
            for slot in 0..<stride where types[slot].isVariableLength && !isNull(row: row, slot: slot) {
                arena.garbage += ArenaRef(values[row * stride + slot]).length
            }
            awaitingRelease.append(r)
        }
        if !deferringDeleted { releaseDeletedRows() }
        for r in vanishedRows { releaseRow(Int(r)) }
        for r in insertedRows { flags[Int(r)] &= ~Flags.inserted }
        for r in dirtyRows {
            flags[Int(r)] &= ~Flags.dirty
            beforeIndex.clear(Int(r))
        }
        clearTransaction()
        committedArenaCount = arena.count
        committedGarbage = arena.garbage
        if !deferringDeleted { compactArenaIfMostlyGarbage() }
    }

    /// Detaches and frees the rows a save deleted, then compacts the arena when most of it is
    /// garbage. Only then: until their rows are freed, the deleted objects' bytes are still
    /// read (by `didSave`, and to detach their instances), and an arena compacted before would
    /// copy them along.
    func releaseDeleted() {
        releaseDeletedRows()
        compactArenaIfMostlyGarbage()
    }

    private func releaseDeletedRows() {
        for r in awaitingRelease {
            detachInstance(row: Int(r))
            releaseRow(Int(r))
        }
        awaitingRelease.removeAll()
    }

    private func compactArenaIfMostlyGarbage() {
        if arena.garbage > 1 << 20, arena.garbage > arena.count / 2 { compactCommittedArena() }
    }

    /// ``compactArena()`` when no pending change holds bytes in the arena: none appended since
    /// the last commit (a rollback truncates to that length) and no before-image (whose cells
    /// name committed bytes). `didSave` may have started the next transaction by the time the
    /// deleted rows are released.
    func compactCommittedArena() {
        guard arena.count == committedArenaCount, dirtyRows.isEmpty else { return }
        compactArena()
        committedArenaCount = arena.count
        committedGarbage = arena.garbage
    }

    private func clearTransaction() {
        primitiveOnly.removeAll()
        insertedRows.removeAll(keepingCapacity: false)
        deletedRows.removeAll()
        vanishedRows.removeAll()
        dirtyRows.removeAll(keepingCapacity: false)
        beforeValues.removeAll(keepingCapacity: false)
        beforeNulls.removeAll(keepingCapacity: false)
    }

    /// Rewrites the arena with only the bytes live rows (and defaults) still reference.
    func compactArena() {
        var fresh = ByteArena()
        fresh.reserve(arena.count - arena.garbage)
        let variable = (0..<stride).filter { types[$0].isVariableLength }
        var dv = defaultValues
        for slot in variable where defaultNulls[slot / 64] & (1 << UInt64(slot % 64)) == 0 {
            dv[slot] = arena.withBytes(ArenaRef(defaultValues[slot])) { fresh.append($0) }
        }
        for row in 0..<rowCount where flags[row] & Flags.live != 0 {
            for slot in variable where !isNull(row: row, slot: slot) {
                let i = row * stride + slot
                values[i] = arena.withBytes(ArenaRef(values[i])) { fresh.append($0) }
            }
        }
        fresh.shrinkToFit()
        arena = fresh
        defaultValues = dv
    }
}

/// One table's pending changes, listed once (``EntityTable/pendingRows``): the rows of
/// `pendingInserts`, `pendingUpdates` and `pendingDeletes` at that moment.
struct PendingRows {
    var inserts: [Int]
    var updates: [Int]
    var deletes: [Int]

    var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty }
}
