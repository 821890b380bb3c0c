/// What a savepoint remembers of one table: the lengths of the transaction's lists, so that
/// rolling back to it truncates them, and the insertion clock that tells rows inserted after
/// it (discarded wholesale) from rows that existed (restored from the undo log).
struct SavepointMark {
    let clock: UInt64
    /// The table's row count then: a row at or past it was appended since, so it is new.
    let rowCount: Int
    let undoCount: Int
    let insertedCount: Int
    let deletedCount: Int
    let vanishedCount: Int
    let dirtyCount: Int
    let arenaCount: Int
    let garbage: Int
}

/// One reversible step taken while a savepoint is active.
enum UndoEntry {
    /// A cell of a row that existed at the savepoint changed; its old bits and null flag.
    case cell(row: Int32, slot: Int32, bits: UInt64, wasNull: Bool)
    /// A committed row was marked deleted.
    case delete(row: Int32)
    /// A row inserted before the savepoint was deleted and vanished; its detached instance.
    case vanish(row: Int32, object: AnyObject?)
}

extension EntityTable {
    func beginSavepoint() {
        changes.insertClock += 1
        changes.savepoints.append(
            SavepointMark(
                clock: changes.insertClock, rowCount: rowCount, undoCount: changes.undo.count,
                insertedCount: changes.insertedRows.count,
                deletedCount: changes.deletedRows.count, vanishedCount: changes.vanishedRows.count,
                dirtyCount: changes.dirtyRows.count,
                arenaCount: arena.count, garbage: arena.garbage))
    }

    /// Forgets the innermost savepoint, keeping its changes (they belong to the enclosing one).
    func releaseSavepoint() {
        guard changes.savepoints.popLast() != nil else { return }
        if changes.savepoints.isEmpty { changes.undo.removeAll() }
    }

    func stampInsertion(row: Int) {
        if changes.stamps.count < rowCount {
            // One row at a time in an import: a plain append, not a generic `Repeated` one.
            if changes.stamps.count + 1 == rowCount {
                changes.stamps.append(0)
            } else {
                changes.stamps.append(contentsOf: repeatElement(0, count: rowCount - changes.stamps.count))
            }
        }
        changes.insertClock += 1
        changes.stamps[row] = changes.insertClock
    }

    /// Records a cell's value before it changes, unless the row is new since the savepoint or
    /// was first changed since it: then its before-image (taken by `willChange`, before this
    /// call) holds its state at the savepoint, and rolling back restores the row from it. A
    /// bulk import of updates thus logs no entry per cell (five per updated object before).
    @inline(__always)
    func logCell(row: Int, slot: Int) {
        if changes.isNewInInnermostSavepoint(row: row) { return }
        if let mark = changes.savepoints.last, Int(changes.beforeIndex[row]) >= mark.dirtyCount { return }
        changes.undo.append(
            .cell(
                row: Int32(row), slot: Int32(slot), bits: values[row * stride + slot],
                wasNull: isNull(row: row, slot: slot)))
    }

    /// Undoes everything since the innermost savepoint and forgets it.
    func rollbackToSavepoint() {
        guard let mark = changes.savepoints.popLast() else { return }
        if !indexes.referenceSlots.isEmpty { invalidateReferenceIndexes() }
        let isNew = { (row: Int) -> Bool in
            row >= mark.rowCount || (row < self.changes.stamps.count && self.changes.stamps[row] > mark.clock)
        }
        // Rows inserted since the mark go away wholesale.
        for r in changes.insertedRows[mark.insertedCount...] where flags[Int(r)] & Flags.inserted != 0 {
            if !indexes.uniqueIndexes.isEmpty { unindexAll(row: Int(r)) }
            detachInstance(row: Int(r))
            releaseRow(Int(r))
        }
        for r in changes.vanishedRows[mark.vanishedCount...] where isNew(Int(r)) { releaseRow(Int(r)) }
        // Everything else is in the undo log, newest first. Entries of rows new since the mark
        // are skipped: those rows were just freed (an inner savepoint, released into this one,
        // may have logged the vanishing of a row this one inserted).
        for entry in changes.undo[mark.undoCount...].reversed() {
            switch entry {
            case .cell(let r, _, _, _), .delete(let r), .vanish(let r, _):
                if isNew(Int(r)) { continue }
            }
            switch entry {
            case .cell(let r, let s, let bits, let wasNull):
                let row = Int(r), slot = Int(s)
                let indexed = !indexes.indexesBySlot[slot].isEmpty && isVisible(row: row)
                if indexed { unindex(row: row, slot: slot) }
                values[row * stride + slot] = bits
                let bit = UInt64(1) << UInt64(slot % 64)
                if wasNull {
                    nulls[row * maskWords + slot / 64] |= bit
                } else {
                    nulls[row * maskWords + slot / 64] &= ~bit
                }
                if indexed { reindex(row: row, slot: slot) }
                touchIndexes(row: row, slot: slot)
            case .delete(let r):
                flags[Int(r)] &= ~Flags.deleted
                if !indexes.uniqueIndexes.isEmpty { indexAll(row: Int(r)) }
            case .vanish(let r, let object):
                let row = Int(r)
                flags[row] = Flags.live | Flags.inserted
                identity.rowOfSerial[Int(identity.serialOfRow[row] - 1)] = r
                if let object, let e = object as? any Entity {
                    e._backing = ObjectBacking(table: self, row: r)
                    instances[row] = object
                }
                if !indexes.uniqueIndexes.isEmpty { indexAll(row: row) }
            }
        }
        // Rows first changed since the mark get their state at the mark back from their
        // before-images (their cell changes were not logged), and are clean again.
        for r in changes.dirtyRows[mark.dirtyCount...] {
            let row = Int(r)
            let b = Int(changes.beforeIndex[row])
            let reindexed = !indexes.uniqueIndexes.isEmpty && isVisible(row: row)
            if reindexed { unindexAll(row: row) }
            if b >= 0 {
                for i in 0..<stride { values[row * stride + i] = changes.beforeValues[b * stride + i] }
                for i in 0..<maskWords { nulls[row * maskWords + i] = changes.beforeNulls[b * maskWords + i] }
                touchIndexes(row: row)
            }
            if reindexed { indexAll(row: row) }
            flags[row] &= ~Flags.dirty
            changes.beforeIndex.clear(row)
        }
        changes.dirtyRows.removeSubrange(mark.dirtyCount...)
        changes.beforeValues.removeSubrange((mark.dirtyCount * stride)...)
        changes.beforeNulls.removeSubrange((mark.dirtyCount * maskWords)...)
        changes.insertedRows.removeSubrange(mark.insertedCount...)
        changes.deletedRows.removeSubrange(mark.deletedCount...)
        changes.vanishedRows.removeSubrange(mark.vanishedCount...)
        changes.undo.removeSubrange(mark.undoCount...)
        arena.truncate(to: mark.arenaCount, garbage: mark.garbage)
        if !indexes.uniqueIndexes.isEmpty {
            for index in indexes.uniqueIndexes {
                index.duplicates = index.duplicates.filter { isVisible(row: Int($0)) }
            }
        }
    }
}
