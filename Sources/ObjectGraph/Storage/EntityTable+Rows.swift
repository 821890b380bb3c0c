internal import GraphJournal

// Allocating, appending and freeing rows, and the instances of rows.

extension EntityTable {
    // MARK: Rows and serials

    var rowCount: Int { flags.count }

    func serial(ofRow row: Int) -> UInt64 { identity.serialOfRow[row] }

    func row(ofSerial serial: UInt64) -> Int? { identity.row(ofSerial: serial) }

    /// Allocates a row for `serial` with default values.
    func allocateRow(serial: UInt64) -> Int {
        let row: Int
        if let r = identity.freeRows.popLast() {
            row = Int(r)
            values.replaceSubrange(row * stride..<(row + 1) * stride, with: defaultValues)
            nulls.replaceSubrange(row * maskWords..<(row + 1) * maskWords, with: defaultNulls)
            flags[row] = Flags.live
            identity.serialOfRow[row] = serial
        } else {
            row = flags.count
            if values.count >= (row + 1) * stride && nulls.count >= (row + 1) * maskWords {
                // Room made by `reserveRows`: a copy into it, no append machinery.
                update { columns in columns.reset(row: row, cells: defaultRow, nulls: defaultNulls) }
            } else {
                appendDefaultCells()
            }
            flags.append(Flags.live)
            identity.serialOfRow.append(serial)
        }
        if UInt64(identity.rowOfSerial.count) + 1 == serial {
            identity.rowOfSerial.append(Int32(row))
        } else {
            if UInt64(identity.rowOfSerial.count) < serial {
                identity.rowOfSerial.append(
                    contentsOf: repeatElement(-1, count: Int(serial) - identity.rowOfSerial.count))
            }
            identity.rowOfSerial[Int(serial - 1)] = Int32(row)
        }
        if serial >= identity.nextSerial { identity.nextSerial = serial + 1 }
        identity.liveCount += 1
        if indexes.tracksRowKeys { touchIndexes(row: row) }
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
        identity.serialOfRow.append(contentsOf: serials)
        if identity.serialOfRow.isCounting && identity.rowOfSerial.count == first
            && identity.rowOfSerial.appendCounting(n)
        {
            // Serials `first + 1 ... first + n`, row `s - 1` each: both maps still count.
            if UInt64(first + n) >= identity.nextSerial { identity.nextSerial = UInt64(first + n) + 1 }
        } else {
            if let highest = serials.max() {
                if UInt64(identity.rowOfSerial.count) < highest {
                    identity.rowOfSerial.append(
                        contentsOf: repeatElement(-1, count: Int(highest) - identity.rowOfSerial.count))
                }
                if highest >= identity.nextSerial { identity.nextSerial = highest + 1 }
            }
            mapSerials(serials, toRowsFrom: first)
        }
        extendCells(toRows: first + n)  // room `reserveRows` made is used first
        if defaults {
            update { columns in columns.fill(rows: first..<first + n, cells: defaultValues, nulls: defaultNulls) }
        }
        identity.liveCount += n
        if indexes.tracksRowKeys { discardSecondaryIndexes() }
        if !indexes.referenceSlots.isEmpty { invalidateReferenceIndexes() }
        return first..<first + n
    }

    /// Pre-sizes the storage for `count` more rows. Grows geometrically: replay calls this
    /// once per record, and an exact `reserveCapacity` each time would copy every column once
    /// per record (quadratic in a journal of many small saves).
    ///
    /// A sixteenth more than needed: a store opened from one record (a compacted journal) got
    /// columns of exactly its rows, so the first object a sync then inserted copied every
    /// column into one twice its size (about 4 ms of a 63k-package resync's 0.09 s map).
    /// Capacity never written costs no memory: the pages of a large block are not touched.
    func reserve(_ count: Int) {
        let needed = flags.count + count
        guard needed > flags.capacity else { return }
        let rows = max(needed + needed / 16, flags.capacity * 2)
        values.reserveCapacity(rows * stride)
        // Large null words grow in `extendCells`, onto zero pages: a copy here would write them.
        if rows * maskWords * MemoryLayout<UInt64>.stride < ZeroPages.minimumBytes {
            nulls.reserveCapacity(rows * maskWords)
        }
        flags.reserveCapacity(rows)
        identity.serialOfRow.reserveCapacity(rows)
        let serials = identity.rowOfSerial.count + count
        identity.rowOfSerial.reserveCapacity(max(identity.rowOfSerial.capacity * 2, serials + serials / 16))
    }

    /// ``reserve(_:)``, and makes `values` and `nulls` long enough for `count` more rows, so
    /// that allocating each of them copies its defaults in place instead of appending (the
    /// append machinery of two arrays was ~180 instructions per row of a bulk import).
    ///
    /// `values` and `nulls` may thus be longer than the rows need; nothing reads past the last
    /// row, and a row allocated there gets its defaults written as any new row does.
    func reserveRows(_ count: Int) {
        reserve(count)
        extendCells(toRows: flags.count + count, nullsAhead: true)
    }

    /// Whether the cells and null words end at the last row: no room ``reserveRows(_:)`` made
    /// lies past it, so rows appended next get zeroed cells and null words.
    var cellsEndAtLastRow: Bool { values.count == flags.count * stride && nulls.count == flags.count * maskWords }

    /// Makes `values` and `nulls` at least `rows` rows long (zeros), keeping what is there.
    ///
    /// The first null words of a table come as zero pages (``nullsStartAsZeroPages(rows:)``):
    /// they cost no memory until a nil is written, and an entity whose values are never nil
    /// never writes them (8 MB for a million rows of up to 64 attributes). With `nullsAhead`
    /// (the room of ``reserveRows(_:)``), null words that grow past ``ZeroPages/minimumBytes``
    /// grow to twice their rows at once, onto zero pages, copying only the words that are not
    /// zero: appending zeros within an array's capacity would write them, so an import in
    /// batches keeps them unwritten too.
    private func extendCells(toRows rows: Int, nullsAhead: Bool = false) {
        if values.count < rows * stride {
            values.append(contentsOf: repeatElement(0, count: rows * stride - values.count))
        }
        if nulls.count < rows * maskWords {
            let words = rows * maskWords
            if nullsStartAsZeroPages(rows: rows) {
                nulls = ZeroPages.zeros(count: words, capacity: nulls.capacity)
            } else if nullsAhead && words * MemoryLayout<UInt64>.stride >= ZeroPages.minimumBytes {
                nulls = ZeroPages.zeros(count: max(words, 2 * nulls.count), keepingNonzeroOf: nulls)
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
        let appended = identity.freeRows.isEmpty
        let row = allocateRow(serial: identity.nextSerial)
        flags[row] |= Flags.inserted
        changes.insertedRows.append(Int32(row))
        // An appended row is past every active savepoint's row count, which tells it is new;
        // only a reused row needs the clock.
        if !changes.savepoints.isEmpty && !appended { stampInsertion(row: row) }
        if indexed && !indexes.uniqueIndexes.isEmpty { indexAll(row: row) }
        changes.willSaveTouched?.insert(Int32(row))
        return row
    }

    /// Writes a cell of a row inserted in this transaction, before it is indexed: no change
    /// tracking, undo or index maintenance is needed for it.
    func writeFresh(row: Int, slot: Int, _ cell: RawCell) {
        switch cell {
        case .fixed(let bits): values[row * stride + slot] = bits
        case .bytes(let buffer): values[row * stride + slot] = arena.append(buffer)
        }
        let bit = UInt64(1) << UInt64(slot % 64)
        if nulls[row * maskWords + slot / 64] & bit != 0 { nulls[row * maskWords + slot / 64] &= ~bit }
        if !indexes.referenceSlots.isEmpty && indexes.referenceIndexOfSlot[slot] != nil { invalidateReferenceIndexes() }
        touchIndexes(row: row, slot: slot)
    }

    /// Frees a row: its serial is retired for good, its instance reference dropped.
    func releaseRow(_ row: Int) {
        for (links, side) in linkSides { links.drop(side, row) }
        let serial = identity.serialOfRow[row]
        if serial >= 1, Int(serial) <= identity.rowOfSerial.count { identity.rowOfSerial[Int(serial - 1)] = -1 }
        identity.serialOfRow[row] = 0
        flags[row] = 0
        instances.clear(row)
        changes.beforeIndex.clear(row)
        identity.freeRows.append(Int32(row))
        identity.liveCount -= 1
        if indexes.tracksRowKeys { touchIndexes(row: row) }
    }

    func instance(row: Int) -> any Entity {
        if let object = instances[row] { return asEntity(object) }
        return makeInstance(row: row)
    }

    /// Creates, keeps and returns the instance of `row`, which has none yet: `awakeFromFetch`
    /// runs on it unless the row was inserted in this transaction.
    func makeInstance(row: Int) -> any Entity {
        let object = entity.type.init(_backing: ObjectBacking(table: self, row: Int32(row)))
        register(object, row: row)
        if flags[row] & Flags.inserted == 0 && hooks.contains(.awakeFromFetch) {
            context.rowsInUse += 1
            object.awakeFromFetch()
            context.rowsInUse -= 1
        }
        return object
    }

    /// Runs `body`, which makes instances into a result its caller holds (a fetch's array), with
    /// no sweep meanwhile: each would find every instance of the result held, and a fetch of a
    /// million objects made them check about two million. Afterwards the next sweep starts once
    /// as many instances again as the result's were made, as after a sweep that kept them all;
    /// a sweep due when a result starts runs first, so that results built one after another
    /// (an import in batches, each batch's objects let go by the caller) keep a bounded number.
    func buildingResult<R>(_ body: () throws -> R) rethrows -> R {
        // The instances made before are let go first if a sweep is due: none is held by this
        // result, and none would be swept while it is built.
        if resultsBeingBuilt == 0 && sweepRows.count >= sweepThreshold && !retainsInstances {
            sweepUnheldInstances(keeping: -1)
        }
        let before = sweepRows.count
        resultsBeingBuilt += 1
        defer {
            resultsBeingBuilt -= 1
            if resultsBeingBuilt == 0 && sweepRows.count >= sweepThreshold {
                sweepThreshold = max(sweepFloor, 2 * (sweepRows.count - before))
            }
        }
        return try body()
    }

    /// Makes `object` the instance of `row`, and has the sweeps look at it unless the context
    /// retains every instance; runs a sweep when one is due (never while a result is built).
    @inline(__always)
    func register(_ object: AnyObject, row: Int) {
        instances[row] = object
        guard !retainsInstances else { return }
        sweepRows.append(Int32(row))
        if sweepRows.count >= sweepThreshold && resultsBeingBuilt == 0 { sweepUnheldInstances(keeping: row) }
    }

    /// The save hooks a context calls on the instances of inserted objects, and of updated
    /// ones: while it still calls one of them, it keeps those instances.
    static let insertSaveHooks: EntityHooks = [.willSave, .didSave, .validateForInsert]
    static let updateSaveHooks: EntityHooks = [.willSave, .didSave, .validateForUpdate]

    /// The flags of the rows whose instances a sweep keeps however unheld: deleted objects
    /// always, and inserted or updated ones unless a fresh instance serves as well, that is
    /// when the entity's instances hold no state of their own and the context calls none of
    /// the save hooks such an object gets (Docs/Semantics.md, rule 1).
    var flagsKeepingInstances: UInt8 {
        var kept = Flags.deleted | Flags.vanished
        if instancesHoldState || !hooks.isDisjoint(with: Self.insertSaveHooks) { kept |= Flags.inserted }
        if instancesHoldState || !hooks.isDisjoint(with: Self.updateSaveHooks) { kept |= Flags.dirty }
        return kept
    }

    /// Lets go of the instances of ``sweepRows`` that nothing but this table holds, except
    /// `row`'s, and whose objects have no pending change, or only an insert or update that
    /// needs no instance (``flagsKeepingInstances``); keeps the rest for the next sweep,
    /// which starts once as many instances again were made (at least ``sweepFloor``).
    func sweepUnheldInstances(keeping row: Int) {
        let pending = flagsKeepingInstances
        var kept: [Int32] = []
        for r in sweepRows {
            let candidate = Int(r)
            guard candidate < rowCount, instances[candidate] != nil else { continue }
            if candidate != row, flags[candidate] & pending == 0, isKnownUniquelyReferenced(&instances[candidate]) {
                instances.clear(candidate)
            } else {
                kept.append(r)
            }
        }
        sweepRows = kept
        sweepThreshold = max(sweepFloor, 2 * kept.count)
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
}
