// The pending transaction as a whole: what is pending, deletes, commit and rollback.

extension EntityTable {
    // MARK: State queries

    /// The rows inserted since the last save that are still inserted (not deleted again).
    var pendingInserts: [Int] { Self.rows(of: changes.insertedRows) { self.isInserted(row: $0) } }
    /// The committed rows whose values differ from their committed ones (not deleted).
    var pendingUpdates: [Int] { Self.rows(of: changes.dirtyRows) { self.isUpdated(row: $0) } }
    /// The committed rows deleted since the last save.
    var pendingDeletes: [Int] { Self.rows(of: changes.deletedRows) { self.isDeleted(row: $0) } }

    /// The pending inserts, updates and deletes, in that order, as one list.
    var pendingRowList: [Int32] {
        var list: [Int32] = []
        list.reserveCapacity(changes.insertedRows.count + changes.dirtyRows.count + changes.deletedRows.count)
        for r in changes.insertedRows where isInserted(row: Int(r)) { list.append(r) }
        for r in changes.dirtyRows where isUpdated(row: Int(r)) { list.append(r) }
        for r in changes.deletedRows where isDeleted(row: Int(r)) { list.append(r) }
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
    var pendingRows: PendingRows {
        PendingRows(inserts: pendingInsertRows, updates: pendingUpdates, deletes: pendingDeletes)
    }

    /// ``pendingInserts`` as 32-bit rows: the list of inserted rows itself (shared, not copied)
    /// when none of them was deleted again.
    var pendingInsertRows: [Int32] {
        let list = changes.insertedRows
        guard let first = list.firstIndex(where: { !isInserted(row: Int($0)) }) else { return list }
        var rows = Array(list[..<first])
        rows.reserveCapacity(list.count)
        for r in list[first...] where isInserted(row: Int(r)) { rows.append(r) }
        return rows
    }

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
        let b = Int(changes.beforeIndex[row])
        guard b >= 0 else { return false }
        let bit = UInt64(1) << UInt64(slot % 64)
        let nowNull = nulls[row * maskWords + slot / 64] & bit != 0
        let wasNull = changes.beforeNulls[b * maskWords + slot / 64] & bit != 0
        if nowNull != wasNull { return true }
        if nowNull { return false }
        let now = values[row * stride + slot]
        let was = changes.beforeValues[b * stride + slot]
        if now == was { return false }
        return !(types[slot].isVariableLength && arena.equal(ArenaRef(now), ArenaRef(was)))
    }

    var hasPendingChanges: Bool {
        changes.insertedRows.contains { isInserted(row: Int($0)) } || !changes.deletedRows.isEmpty
            || changes.dirtyRows.contains { isUpdated(row: Int($0)) }
    }

    // MARK: Delete

    /// Marks a row deleted. An inserted row vanishes instead (Docs/Semantics.md, rule 7).
    func delete(row: Int) {
        let f = flags[row]
        guard f & (Flags.deleted | Flags.vanished) == 0 else { return }
        if !indexes.uniqueIndexes.isEmpty { unindexAll(row: row) }
        if !indexes.referenceSlots.isEmpty { unreferenceAll(row: row) }
        if f & Flags.inserted != 0 {
            if !changes.savepoints.isEmpty && !changes.isNewInInnermostSavepoint(row: row) {
                changes.undo.append(.vanish(row: Int32(row), object: instances[row]))
            }
            detachInstance(row: row)
            flags[row] = Flags.live | Flags.vanished  // skipped by save and rollback
            identity.rowOfSerial[Int(identity.serialOfRow[row] - 1)] = -1  // invisible to lookups at once
            changes.vanishedRows.append(Int32(row))
            return
        }
        flags[row] |= Flags.deleted
        changes.deletedRows.append(Int32(row))
        if !changes.savepoints.isEmpty { changes.undo.append(.delete(row: Int32(row))) }
    }

    // MARK: Transaction end

    func rollback() {
        if !indexes.referenceSlots.isEmpty { invalidateReferenceIndexes() }
        changes.savepoints.removeAll()
        changes.undo.removeAll()
        if !indexes.uniqueIndexes.isEmpty {
            for r in changes.insertedRows where flags[Int(r)] & Flags.inserted != 0 { unindexAll(row: Int(r)) }
            for r in changes.dirtyRows where flags[Int(r)] & Flags.deleted == 0 { unindexAll(row: Int(r)) }
        }
        for r in changes.insertedRows where flags[Int(r)] & Flags.inserted != 0 {
            detachInstance(row: Int(r))
            releaseRow(Int(r))
        }
        for r in changes.vanishedRows { releaseRow(Int(r)) }
        if indexes.tracksRowKeys {
            for r in changes.dirtyRows where changes.beforeIndex[Int(r)] >= 0 { touchIndexes(row: Int(r)) }
        }
        restoreBeforeImages()
        for r in changes.deletedRows { flags[Int(r)] &= ~Flags.deleted }
        if !indexes.uniqueIndexes.isEmpty {
            for r in changes.dirtyRows where isVisible(row: Int(r)) { indexAll(row: Int(r)) }
            for r in changes.deletedRows where isVisible(row: Int(r)) && flags[Int(r)] & Flags.dirty == 0 {
                indexAll(row: Int(r))
            }
            for index in indexes.uniqueIndexes { index.duplicates.removeAll() }
        }
        arena.truncate(to: changes.committedArenaCount, garbage: changes.committedGarbage)
        changes.clearTransaction()
    }

    /// Makes the transaction the committed state. With `deferringDeleted`, deleted rows stay
    /// (flagged deleted, so their objects' `isDeleted` is still true in `didSave`) until
    /// ``releaseDeleted()``.
    func commit(deferringDeleted: Bool = false) {
        changes.savepoints.removeAll()
        changes.undo.removeAll()
        for r in changes.deletedRows where flags[Int(r)] & Flags.deleted != 0 {
            let row = Int(r)
            for slot in 0..<stride where types[slot].isVariableLength && !isNull(row: row, slot: slot) {
                arena.garbage += ArenaRef(values[row * stride + slot]).length
            }
            changes.awaitingRelease.append(r)
        }
        if !deferringDeleted { releaseDeletedRows() }
        for r in changes.vanishedRows { releaseRow(Int(r)) }
        for r in changes.insertedRows { flags[Int(r)] &= ~Flags.inserted }
        for r in changes.dirtyRows {
            flags[Int(r)] &= ~Flags.dirty
            changes.beforeIndex.clear(Int(r))
        }
        changes.clearTransaction()
        changes.committedArenaCount = arena.count
        changes.committedGarbage = arena.garbage
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
        for r in changes.awaitingRelease {
            detachInstance(row: Int(r))
            releaseRow(Int(r))
        }
        changes.awaitingRelease.removeAll()
    }

    private func compactArenaIfMostlyGarbage() {
        if arena.garbage > 1 << 20, arena.garbage > arena.count / 2 { compactCommittedArena() }
    }

    /// ``compactArena()`` when no pending change holds bytes in the arena: none appended since
    /// the last commit (a rollback truncates to that length) and no before-image (whose cells
    /// name committed bytes). `didSave` may have started the next transaction by the time the
    /// deleted rows are released.
    func compactCommittedArena() {
        guard arena.count == changes.committedArenaCount, changes.dirtyRows.isEmpty else { return }
        compactArena()
        changes.committedArenaCount = arena.count
        changes.committedGarbage = arena.garbage
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
