/// An ``EntityTable``'s pending transaction: the rows it inserted, changed and deleted, the
/// before-images of the changed committed rows, the savepoints and their undo log, and what
/// the save in progress tracks.
///
/// Invariants:
/// - A row is in `insertedRows` once per insert since the last commit; `dirtyRows` lists the
///   committed rows with a before-image, in capture order: the row `dirtyRows[b]` has
///   `beforeIndex[row] == b`, and its cells and null words at the last commit are
///   `beforeValues[b * stride ..< (b + 1) * stride]` and
///   `beforeNulls[b * maskWords ..< (b + 1) * maskWords]`. Every other row has
///   `beforeIndex[row] == -1`.
/// - `committedArenaCount` and `committedGarbage` are the arena's length and garbage at the
///   last commit: a rollback truncates the arena to them.
/// - `savepoints` is innermost last; each mark's counts are prefixes of the lists above and of
///   `undo`, which holds only entries logged while a savepoint was active. `stamps[row]`
///   (when the row is below `stamps.count`) is the `insertClock` at which a row reused from
///   the free list was inserted while a savepoint was active.
struct TableChangeLog {
    /// Rows inserted since the last commit (some may have been deleted again: see their flags).
    var insertedRows: [Int32] = []
    /// Committed rows marked deleted since the last commit.
    var deletedRows: [Int32] = []
    /// Committed rows changed since the last commit, in the order of their before-images.
    var dirtyRows: [Int32] = []
    /// Rows inserted and deleted in the same transaction: freed at save or rollback.
    var vanishedRows: [Int32] = []
    /// Per row, the index of its before-image in `beforeValues`, or -1 when the row has none.
    var beforeIndex = RowSlots<Int32>(absent: -1)
    /// The before-images' cells, `stride` per image, and null words, `maskWords` per image.
    var beforeValues: [UInt64] = []
    var beforeNulls: [UInt64] = []
    /// The arena's length and garbage at the last commit.
    var committedArenaCount = 0
    var committedGarbage = 0

    // Savepoints (nested, for imports and transactions that roll back as a whole).
    var savepoints: [SavepointMark] = []
    var undo: [UndoEntry] = []
    /// Per row, the insertion clock of rows reused (from `freeRows`) while a savepoint was active
    /// (0 or stale otherwise: the clock only grows, so a stale stamp is older than any mark).
    var stamps: [UInt64] = []
    var insertClock: UInt64 = 0

    /// While `willSave` runs: the rows changed by normal (not primitive) sets or inserted, which
    /// get `willSave` again in the next pass. `nil` when not tracking.
    var willSaveTouched: Set<Int32>?
    /// Per row, the slots (below 64) changed since the last save by primitive sets only: saved,
    /// but not reported to observers (Docs/Semantics.md, rule 3).
    var primitiveOnly: [Int32: UInt64] = [:]
    /// Rows deleted by the save in progress, released after `didSave` ran on their objects.
    var awaitingRelease: [Int32] = []

    /// Whether `row` was inserted after the innermost savepoint began.
    @inline(__always)
    func isNewInInnermostSavepoint(row: Int) -> Bool {
        guard let mark = savepoints.last else { return false }
        return row >= mark.rowCount || (row < stamps.count && stamps[row] > mark.clock)
    }

    /// Keeps ``primitiveOnly`` up to date for a change of `slot`.
    @inline(__always)
    mutating func notePrimitive(_ primitive: Bool, row: Int, slot: Int) {
        guard slot < 64 else { return }
        let bit = UInt64(1) << UInt64(slot)
        if primitive {
            primitiveOnly[Int32(row), default: 0] |= bit
        } else if !primitiveOnly.isEmpty, let mask = primitiveOnly[Int32(row)] {
            primitiveOnly[Int32(row)] = mask & ~bit == 0 ? nil : mask & ~bit
        }
    }

    /// Forgets the transaction's lists and before-images once it is committed or rolled back.
    mutating func clearTransaction() {
        primitiveOnly.removeAll()
        insertedRows.removeAll(keepingCapacity: false)
        deletedRows.removeAll()
        vanishedRows.removeAll()
        dirtyRows.removeAll(keepingCapacity: false)
        beforeValues.removeAll(keepingCapacity: false)
        beforeNulls.removeAll(keepingCapacity: false)
    }
}
