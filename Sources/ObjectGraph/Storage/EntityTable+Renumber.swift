#if canImport(Glibc)
import Glibc
#endif

// Giving back the memory of freed rows: after a compaction, each table moves its live rows to
// the front and every structure that names rows is rewritten with the new numbers.

extension EntityTable {
    /// Whether ``renumberRows()`` is worth its copy of every live row: an eighth of the rows or
    /// more are free, or the row storage has a quarter more room than the rows use (room a bulk
    /// import or replay reserved). Fewer free rows stay on the free list for the next inserts.
    var hasSlack: Bool {
        let rows = rowCount
        if !freeRows.isEmpty && freeRows.count * 8 >= rows { return true }
        let slack = rows / 4 + 64
        return flags.capacity > rows + slack || values.count > (rows + slack) * stride
            || rowOfSerial.capacity > rowOfSerial.count + rowOfSerial.count / 4 + 64
    }

    /// Whether nothing holds row numbers that ``renumberRows()`` cannot rewrite: no savepoint
    /// (a transaction, import, sync or save in progress), no `willSave` pass, no deleted rows
    /// waiting for their `didSave`.
    var canRenumber: Bool {
        savepoints.isEmpty && undo.isEmpty && willSaveTouched == nil && awaitingRelease.isEmpty
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
        kept.reserveCapacity(liveCount)
        var highestSerial: UInt64 = 0
        for r in 0..<n where flags[r] & Flags.live != 0 {
            newRow[r] = Int32(kept.count)
            kept.append(r)
            highestSerial = max(highestSerial, serialOfRow[r])
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
            newSerials.append(serialOfRow[r])
            if let object = instances[r] {
                newInstances.append(contentsOf: repeatElement(nil, count: newFlags.count - 1 - newInstances.count))
                newInstances.append(object)
            }
            if case let b = beforeIndex[r], b >= 0 {
                newBefore.append(contentsOf: repeatElement(-1, count: newFlags.count - 1 - newBefore.count))
                newBefore.append(b)
            }
        }
        // Consumed: a copy left in a local would make the next write to a column copy it.
        values = consume newValues
        nulls = consume newNulls
        flags = consume newFlags
        serialOfRow = CountingArray(consume newSerials, offset: 1)  // stores nothing if row r now has serial r + 1
        instances = RowSlots(consume newInstances, absent: nil)
        beforeIndex = RowSlots(consume newBefore, absent: -1)
        freeRows = []
        stamps = []

        // The serial map: its entries past the highest serial a row holds are all -1.
        let mapLength = min(rowOfSerial.count, Int(highestSerial))
        var newMap = Array(rowOfSerial[0..<mapLength])
        for (j, r) in kept.enumerated() {
            let s = Int(serialOfRow[j])
            if s >= 1, s <= mapLength, newMap[s - 1] == Int32(r) { newMap[s - 1] = Int32(j) }
        }
        rowOfSerial = CountingArray(consume newMap, offset: 0)

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
        insertedRows = renumbered(insertedRows)
        deletedRows = renumbered(deletedRows)
        dirtyRows = renumbered(dirtyRows)
        vanishedRows = renumbered(vanishedRows)
        if !primitiveOnly.isEmpty {
            var moved: [Int32: UInt64] = [:]
            for (r, mask) in primitiveOnly where newRow[Int(r)] >= 0 { moved[newRow[Int(r)]] = mask }
            primitiveOnly = moved
        }

        // Indexes.
        for index in uniqueIndexes {
            let owners = index.buckets.compactMap { r in r >= 0 && newRow[Int(r)] >= 0 ? newRow[Int(r)] : nil }
            let duplicates = index.duplicates.compactMap { r in newRow[Int(r)] >= 0 ? newRow[Int(r)] : nil }
            index.reset(capacity: owners.count)
            place(owners: owners, in: index)
            index.duplicates = Set(duplicates)
        }
        for index in secondaryIndexes {
            if index.isBuilt { index.renumber(newRow) } else { index.discard() }
        }
        for index in identityIndexes { index.discard() }
        if !referenceSlots.isEmpty { invalidateReferenceIndexes() }

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
    }
}

extension SecondaryIndex {
    /// Renames the rows after ``EntityTable/renumberRows()`` (`newRow`: old row to new, -1 for
    /// freed rows). The renumbering keeps the rows' order, so an index with no dirty row stays
    /// sorted; one with dirty rows is rebuilt at its next lookup.
    func renumber(_ newRow: [Int32]) {
        guard dirty.isEmpty else {
            discard()
            return
        }
        var rows: [Int32] = []
        rows.reserveCapacity(sorted.count)
        for r in sorted {
            let n = Int(r) < newRow.count ? newRow[Int(r)] : -1
            guard n >= 0 else {
                discard()
                return
            }
            rows.append(n)
        }
        sorted = rows
        marks = []
    }
}

extension LinkTable {
    /// Renames the rows after the tables renumbered theirs (`newRows`: per entity, old row to
    /// new, -1 for freed rows; nil when that entity's table kept its numbers), and rebuilds each
    /// side's flat array at its exact size. Every list keeps its order, so the pending log's
    /// positions still hold; a chunked list stays chunked.
    ///
    /// - Precondition: no open savepoint (``marks`` is empty).
    func renumber(_ newRows: [[Int32]?]) {
        let maps = [newRows[link.entities[0]], newRows[link.entities[1]]]
        @inline(__always)
        func rename(_ side: Int, _ row: Int32) -> Int32 {
            guard let map = maps[side] else { return row }
            return Int(row) < map.count ? map[Int(row)] : -1
        }
        var newHeads: [[LinkHead]] = [[], []]
        var newFlat: [[Int32]] = [[], []]
        var newOwned: [[LinkList]] = [[], []]
        for side in 0..<2 {
            let other = 1 - side
            var lists: [(row: Int32, members: [Int32], chunked: Bool)] = []
            var total = 0
            var highest: Int32 = -1
            for row in 0..<heads[side].count where heads[side][row].count != 0 {
                let owner = rename(side, Int32(row))
                guard owner >= 0 else { continue }
                let h = heads[side][row]
                let chunked = h.count < 0 && owned[side][Int(-h.count - 1)].isChunked
                let members = self.members(side, row).compactMap { m in
                    let n = rename(other, m)
                    return n >= 0 ? n : nil
                }
                guard !members.isEmpty else { continue }
                lists.append((owner, members, chunked))
                if !chunked { total += members.count }
                highest = max(highest, owner)
            }
            var sideHeads = [LinkHead](repeating: LinkHead(), count: Int(highest) + 1)
            var sideFlat: [Int32] = []
            sideFlat.reserveCapacity(total)
            var kept: [LinkList] = []
            for list in lists {
                if list.chunked {
                    sideHeads[Int(list.row)] = LinkHead(start: 0, count: Int32(-kept.count - 1))
                    kept.append(LinkList(ordered: link.ordered[side], members: list.members))
                } else {
                    sideHeads[Int(list.row)] = LinkHead(start: Int32(sideFlat.count), count: Int32(list.members.count))
                    sideFlat.append(contentsOf: list.members)
                }
            }
            newHeads[side] = sideHeads
            newFlat[side] = sideFlat
            newOwned[side] = kept
        }
        heads = newHeads
        flat = newFlat
        owned = newOwned
        freeOwned = [[], []]
        flatGarbage = [0, 0]
        log = log.compactMap { c in
            let a = rename(0, c.a), b = rename(1, c.b)
            guard a >= 0, b >= 0 else { return nil }
            return LinkChange(kind: c.kind, a: a, b: b, posA: c.posA, posB: c.posB)
        }
        if collectsTouched {
            touched = (0..<2).map { side in
                Set(touched[side].compactMap { r in
                    let n = rename(side, r)
                    return n >= 0 ? n : nil
                })
            }
        }
    }
}

extension ModelContext {
    /// Gives back the memory of the rows freed since the tables were last renumbered: every
    /// table with free rows or spare room renumbers its rows (``EntityTable/renumberRows()``)
    /// and the link tables follow. Objects keep their ``ObjectID``s and the instances the
    /// application holds stay valid (they point at their new rows); the instances nothing else
    /// holds are released, to be materialized afresh when next looked up; pending changes stay
    /// pending.
    ///
    /// Skipped (returns false) while row numbers are held where they cannot be rewritten: inside
    /// a transaction, import, sync or save, or a lifecycle hook called by one of the context's
    /// loops (``rowsInUse``).
    @discardableResult
    func releaseFreedRows() -> Bool {
        guard savepointDepth == 0, rowsInUse == 0, links.allSatisfy(\.marks.isEmpty),
              tables.allSatisfy(\.canRenumber)
        else { return false }
        var maps: [[Int32]?] = []
        maps.reserveCapacity(tables.count)
        for t in tables {
            if t.hasSlack {
                maps.append(t.renumberRows())
            } else {
                t.releaseUnheldInstances()
                maps.append(nil)
            }
        }
        for l in links {
            if maps[l.link.entities[0]] != nil || maps[l.link.entities[1]] != nil {
                l.renumber(maps)
            } else {
                l.flattenIfWorthIt()
            }
        }
        return true
    }
}

/// Returning freed heap memory to the system.
enum HeapTrim {
    /// Calls glibc's `malloc_trim(0)`, which releases the free memory at the top of the heap
    /// and the free pages inside it, when the C library has it (looked up by name: `malloc.h`
    /// is not in the Glibc module). Without it, glibc keeps a large freed heap resident.
    static func trim() {
        #if canImport(Glibc)
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return }
        let trim = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        _ = trim(0)
        #endif
    }
}
