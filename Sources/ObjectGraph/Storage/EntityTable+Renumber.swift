// Giving back the memory of freed rows: after a compaction, each table moves its live rows to
// the front and every structure that names rows is rewritten with the new numbers.

extension EntityTable {
    /// Whether ``renumberRows()`` is worth its copy of every live row: an eighth of the rows or
    /// more are free, or the row storage has a quarter more room than the rows use (room a bulk
    /// import or replay reserved). Fewer free rows stay on the free list for the next inserts.
    var hasSlack: Bool {
        let rows = rowCount
        if !identity.freeRows.isEmpty && identity.freeRows.count * 8 >= rows { return true }
        let slack = rows / 4 + 64
        return flags.capacity > rows + slack || values.count > (rows + slack) * stride
            || identity.rowOfSerial.capacity > identity.rowOfSerial.count + identity.rowOfSerial.count / 4 + 64
    }

    /// Whether nothing holds row numbers that ``renumberRows()`` cannot rewrite: no savepoint
    /// (a transaction, import, sync or save in progress), no `willSave` pass, no deleted rows
    /// waiting for their `didSave`.
    var canRenumber: Bool {
        changes.savepoints.isEmpty && changes.undo.isEmpty && changes.willSaveTouched == nil
            && changes.awaitingRelease.isEmpty
    }

    /// Moves the live rows (pending inserts and deletes included) to the front, keeping their
    /// order, and drops the free rows: the row storage is then as large as the rows it holds,
    /// as in a table that never had the freed ones. Returns the new row of each old row (-1 for
    /// a freed row), for the link tables (``LinkTable/renumber(_:)``).
    ///
    /// Instances nothing outside the table holds are released; the others point at their new
    /// rows. Rewritten here: the row arrays, the serial map, the pending transaction's row
    /// lists, the unique indexes (the same owners and duplicates), the secondary indexes (kept
    /// when up to date: the new numbers keep the rows' order, so (key, row) order holds) and
    /// the arena (rewritten with the live rows' bytes only, unless a pending change holds bytes
    /// in it: ``compactCommittedArena()``). Reference indexes are dropped and rebuilt at their
    /// next use.
    ///
    /// - Precondition: ``canRenumber``.
    func renumberRows() -> [Int32] {
        let n = rowCount
        var newRow = [Int32](repeating: -1, count: n)
        var kept: [Int] = []
        kept.reserveCapacity(identity.liveCount)
        var highestSerial: UInt64 = 0
        for r in 0..<n where flags[r] & Flags.live != 0 {
            newRow[r] = Int32(kept.count)
            kept.append(r)
            highestSerial = max(highestSerial, identity.serialOfRow[r])
        }
        let k = kept.count

        // Row storage, at its exact size.
        var newValues: [UInt64] = []
        newValues.reserveCapacity(k * stride)
        var newNulls: [UInt64] = []
        newNulls.reserveCapacity(k * maskWords)
        var newFlags: [UInt8] = []
        newFlags.reserveCapacity(k)
        var newSerials: [UInt64] = []
        newSerials.reserveCapacity(k)
        // Instance slots and before-image numbers are stored up to the last row that has one.
        var newInstances: [AnyObject?] = []
        var newBefore: [Int32] = []
        for r in kept {
            newValues.append(contentsOf: values[r * stride..<(r + 1) * stride])
            newNulls.append(contentsOf: nulls[r * maskWords..<(r + 1) * maskWords])
            newFlags.append(flags[r])
            newSerials.append(identity.serialOfRow[r])
            if let object = instances[r] {
                newInstances.append(contentsOf: repeatElement(nil, count: newFlags.count - 1 - newInstances.count))
                newInstances.append(object)
            }
            if case let b = changes.beforeIndex[r], b >= 0 {
                newBefore.append(contentsOf: repeatElement(-1, count: newFlags.count - 1 - newBefore.count))
                newBefore.append(b)
            }
        }
        // Consumed: a copy left in a local would make the next write to a column copy it.
        values = consume newValues
        nulls = consume newNulls
        flags = consume newFlags
        // stores nothing if row r now has serial r + 1
        identity.serialOfRow = CountingArray(consume newSerials, offset: 1)
        instances = RowSlots(consume newInstances, absent: nil)
        changes.beforeIndex = RowSlots(consume newBefore, absent: -1)
        identity.freeRows = []
        changes.stamps = []

        // The serial map: its entries past the highest serial a row holds are all -1.
        let mapLength = min(identity.rowOfSerial.count, Int(highestSerial))
        var newMap = Array(identity.rowOfSerial[0..<mapLength])
        for (j, r) in kept.enumerated() {
            let s = Int(identity.serialOfRow[j])
            if s >= 1, s <= mapLength, newMap[s - 1] == Int32(r) { newMap[s - 1] = Int32(j) }
        }
        identity.rowOfSerial = CountingArray(consume newMap, offset: 0)

        // The instances now live at their new rows (those only this table held are let go).
        releaseUnheldInstances()
        for j in 0..<instances.stored.count {
            guard let object = instances[j] else { continue }
            let e = asEntity(object)
            e._backing = ObjectBacking(table: self, row: Int32(j))
        }

        // The pending transaction.
        func renumbered(_ rows: [Int32]) -> [Int32] {
            rows.compactMap { r in
                let n = newRow[Int(r)]
                return n >= 0 ? n : nil
            }
        }
        changes.insertedRows = renumbered(changes.insertedRows)
        changes.deletedRows = renumbered(changes.deletedRows)
        changes.dirtyRows = renumbered(changes.dirtyRows)
        changes.vanishedRows = renumbered(changes.vanishedRows)
        if !changes.primitiveOnly.isEmpty {
            var moved: [Int32: UInt64] = [:]
            for (r, mask) in changes.primitiveOnly where newRow[Int(r)] >= 0 { moved[newRow[Int(r)]] = mask }
            changes.primitiveOnly = moved
        }

        // Indexes.
        for index in indexes.uniqueIndexes {
            let owners = index.buckets.compactMap { r in r >= 0 && newRow[Int(r)] >= 0 ? newRow[Int(r)] : nil }
            let duplicates = index.duplicates.compactMap { r in newRow[Int(r)] >= 0 ? newRow[Int(r)] : nil }
            index.reset(capacity: owners.count)
            place(owners: owners, in: index)
            index.duplicates = Set(duplicates)
        }
        for index in indexes.secondaryIndexes {
            if index.isBuilt { index.renumber(newRow) } else { index.discard() }
        }
        for index in indexes.identityIndexes { index.discard() }
        if !indexes.referenceSlots.isEmpty { invalidateReferenceIndexes() }

        // The bytes: only the live rows' and the defaults', unless a pending change's bytes
        // must stay where a rollback truncates them.
        compactCommittedArena()
        return newRow
    }
}

extension EntityTable {
    /// Lets go of the instances nothing outside this table holds: the next lookup of their
    /// objects materializes fresh ones (as after `reset()`, `awakeFromFetch` included). Kept,
    /// the survivors' instances of a churned table would pin every heap page they share with
    /// the freed instances of the deleted objects.
    func releaseUnheldInstances() {
        for row in 0..<instances.stored.count where instances[row] != nil {
            if isKnownUniquelyReferenced(&instances[row]) { instances.clear(row) }
        }
        // The rows moved: the next sweep looks at the instances kept, at their new rows.
        sweepRows = (0..<instances.stored.count).filter { instances[$0] != nil }.map { Int32($0) }
        sweepThreshold = max(sweepFloor, 2 * sweepRows.count)
    }
}
