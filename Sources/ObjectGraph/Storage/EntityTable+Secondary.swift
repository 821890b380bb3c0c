extension EntityTable {
    /// Runs `body` with a reader of `index`'s keys. Runs no user code; nothing may append to
    /// the arena inside.
    func withKeys<R>(of index: SecondaryIndex, _ body: (IndexKeyReader) -> R) -> R {
        read { columns in arena.read { arena in body(IndexKeyReader(index: index, columns: columns, arena: arena)) } }
    }

    /// Makes `index` ready for a lookup: built, and with at most ``SecondaryIndex/refreshBound``
    /// dirty rows.
    func prepare(_ index: SecondaryIndex) {
        if !index.isBuilt {
            var rows: [Int32] = []
            rows.reserveCapacity(identity.liveCount)
            for row in 0..<rowCount where flags[row] & Flags.live != 0 { rows.append(Int32(row)) }
            sortByKey(&rows, index)
            index.sorted = rows
            index.marks = []
            index.dirty = []
            index.isBuilt = true
        } else if index.dirty.count > index.refreshBound {
            refresh(index)
        }
    }

    /// Brings `index.sorted` up to date: drops the dirty rows and puts back the live ones at
    /// their places, each found by binary search among the clean entries.
    func refresh(_ index: SecondaryIndex) {
        var added = index.dirty.filter { Int($0) < rowCount && flags[Int($0)] & Flags.live != 0 }
        sortByKey(&added, index)
        let kept = index.sorted.filter { !index.isDirty(Int($0)) }
        for r in index.dirty { index.marks[Int(r)] = 0 }
        index.dirty = []
        guard !added.isEmpty else {
            index.sorted = kept
            return
        }
        var merged: [Int32] = []
        merged.reserveCapacity(kept.count + added.count)
        withKeys(of: index) { keys in
            var from = 0
            for r in added {
                // The first kept entry that comes after `r` (kept entries are all clean now).
                var lo = from, hi = kept.count
                while lo < hi {
                    let mid = (lo + hi) >> 1
                    if keys.less(kept[mid], r) { lo = mid + 1 } else { hi = mid }
                }
                merged.append(contentsOf: kept[from..<lo])
                merged.append(r)
                from = lo
            }
            merged.append(contentsOf: kept[from...])
        }
        index.sorted = merged
    }

    /// Sorts `rows` (live rows, distinct) into `index`'s (key, row) order.
    func sortByKey(_ rows: inout [Int32], _ index: SecondaryIndex) {
        // Row order first: the radix sorts below keep the order of equal keys. (Rows collected
        // from the table are in order already, which the sort sees in one pass.)
        rows.sort()
        if index.slots.count == 1 && index.kinds[0] != .string {
            // One fixed-size key: sort (order key, row) pairs, no reads of the table while sorting.
            let slot = index.slots[0], kind = index.kinds[0], optional = index.optional[0]
            var unset: [Int32] = []
            var pairs: [(key: UInt64, row: Int32)] = []
            pairs.reserveCapacity(rows.count)
            read { columns in
                for r in rows {
                    let isNull = columns.isNull(row: Int(r), slot: slot)
                    if isNull && optional {
                        unset.append(r)
                    } else {
                        pairs.append(
                            (SecondaryIndex.orderKey(isNull ? 0 : columns.cell(row: Int(r), slot: slot), kind), r))
                    }
                }
            }
            unset.sort()
            var high = pairs.map(\.key), low = [UInt64](repeating: 0, count: pairs.count), sortedRows = pairs.map(\.row)
            pairs = []
            Self.radixSort(high: &high, low: &low, rows: &sortedRows)
            rows = unset
            rows.append(contentsOf: sortedRows)
            return
        }
        if index.slots.count == 1 {
            sortByString(&rows, index)
            return
        }
        withKeys(of: index) { keys in rows.sort { keys.less($0, $1) } }
    }

    /// ``sortByKey(_:_:)`` for an index of one string key: each row's first 16 bytes are taken
    /// once, as two big-endian words, so that most comparisons are two integer comparisons
    /// instead of two reads of the arena. Words decide when both strings are ASCII without NUL
    /// bytes (byte order is then `String` order, and zero padding sorts a prefix first); when
    /// both strings also fit in 16 bytes, equal words are equal strings. Anything else is
    /// compared as `String`s.
    private func sortByString(_ rows: inout [Int32], _ index: SecondaryIndex) {
        struct Entry {
            var high: UInt64
            var low: UInt64
            var row: Int32
            /// 0: null (optional), 1: compared as String, 2: ASCII without NUL, 3: that and ≤ 16 bytes.
            var kind: UInt8
        }
        let slot = index.slots[0], optional = index.optional[0]
        var sortedRows: [Int32]?
        var entries: [Entry] = []
        entries.reserveCapacity(rows.count)
        withKeys(of: index) { keys in
            for r in rows {
                let isNull = keys.columns.isNull(row: Int(r), slot: slot)
                if isNull && optional {
                    entries.append(Entry(high: 0, low: 0, row: r, kind: 0))
                    continue
                }
                let ref = ArenaRef(isNull ? 0 : keys.columns.cell(row: Int(r), slot: slot))
                let (high, low, plain, short) = keys.arena.prefixWords(ref)
                entries.append(Entry(high: high, low: low, row: r, kind: plain ? (short ? 3 : 2) : 1))
            }
            if entries.allSatisfy({ $0.kind == 0 || $0.kind == 3 }) {
                // Every string is short plain ASCII: its words are its key.
                var unset: [Int32] = [], high: [UInt64] = [], low: [UInt64] = [], keyed: [Int32] = []
                high.reserveCapacity(entries.count)
                low.reserveCapacity(entries.count)
                keyed.reserveCapacity(entries.count)
                for e in entries {
                    if e.kind == 0 {
                        unset.append(e.row)
                    } else {
                        high.append(e.high)
                        low.append(e.low)
                        keyed.append(e.row)
                    }
                }
                entries = []
                unset.sort()
                Self.radixSort(high: &high, low: &low, rows: &keyed)
                sortedRows = unset + keyed
                return
            }
            entries.sort { a, b in
                if a.kind == 0 || b.kind == 0 {
                    if a.kind != b.kind { return a.kind == 0 }
                    return a.row < b.row
                }
                if a.kind >= 2 && b.kind >= 2 {
                    if a.high != b.high { return a.high < b.high }
                    if a.low != b.low { return a.low < b.low }
                    if a.kind == 3 && b.kind == 3 { return a.row < b.row }
                }
                return keys.less(a.row, b.row)
            }
        }
        rows = sortedRows ?? entries.map(\.row)
    }

    /// Sorts `rows` by the 128-bit keys (`high`, `low`), ties kept in their order (stable):
    /// a least-significant-byte-first radix sort that skips the bytes all keys share, so keys
    /// such as `"Section 42"` or small integers take two or three passes over the arrays.
    static func radixSort(high: inout [UInt64], low: inout [UInt64], rows: inout [Int32]) {
        let n = rows.count
        guard n > 1 else { return }
        // The bits in which some key differs from the first.
        let first = (high: high[0], low: low[0])
        var any = (high: UInt64(0), low: UInt64(0))
        for i in 0..<n {
            any.high |= high[i] ^ first.high
            any.low |= low[i] ^ first.low
        }
        var high2 = [UInt64](repeating: 0, count: n), low2 = [UInt64](repeating: 0, count: n),
            rows2 = [Int32](repeating: 0, count: n)
        var counts = [Int](repeating: 0, count: 256)
        for pass in 0..<16 {
            let inHigh = pass >= 8
            let shift = UInt64((pass % 8) * 8)
            guard ((inHigh ? any.high : any.low) >> shift) & 0xFF != 0 else { continue }
            for b in 0..<256 { counts[b] = 0 }
            high.withUnsafeBufferPointer { h in
                low.withUnsafeBufferPointer { l in
                    let k = inHigh ? h : l
                    for i in 0..<n { counts[Int((k[i] >> shift) & 0xFF)] += 1 }
                    var total = 0
                    for b in 0..<256 {
                        let c = counts[b]
                        counts[b] = total
                        total += c
                    }
                    rows.withUnsafeBufferPointer { r in
                        high2.withUnsafeMutableBufferPointer { h2 in
                            low2.withUnsafeMutableBufferPointer { l2 in
                                rows2.withUnsafeMutableBufferPointer { r2 in
                                    for i in 0..<n {
                                        let b = Int((k[i] >> shift) & 0xFF)
                                        let j = counts[b]
                                        counts[b] = j + 1
                                        h2[j] = h[i]
                                        l2[j] = l[i]
                                        r2[j] = r[i]
                                    }
                                }
                            }
                        }
                    }
                }
            }
            swap(&high, &high2)
            swap(&low, &low2)
            swap(&rows, &rows2)
        }
    }

    // MARK: Maintenance hooks

    /// Notes a possible change of `row`'s key in every index `slot` belongs to.
    /// Notes a possible change of `row`'s key in every index `slot` belongs to, identity
    /// indexes (IdentityIndex.swift) included.
    @inline(__always)
    func touchIndexes(row: Int, slot: Int) {
        let bit = UInt64(1) << UInt64(min(slot, 63))
        if (indexes.secondarySlotMask | indexes.identitySlotMask) & bit == 0 { return }
        for i in indexes.secondaryBySlot[slot] { indexes.secondaryIndexes[i].touch(row) }
        if indexes.identitySlotMask & bit != 0 {
            for index in indexes.identityIndexes where index.mayKey(slot) { index.touch(row) }
        }
    }

    /// Notes a possible change of `row`'s key in every index (the row was allocated, freed or
    /// restored as a whole).
    @inline(__always)
    func touchIndexes(row: Int) {
        for index in indexes.secondaryIndexes { index.touch(row) }
        for index in indexes.identityIndexes { index.touch(row) }
    }

    /// Forgets every index, identity indexes included; each is rebuilt at its next lookup
    /// (after replay).
    func discardSecondaryIndexes() {
        for index in indexes.secondaryIndexes { index.discard() }
        for index in indexes.identityIndexes { index.discard() }
    }
}
