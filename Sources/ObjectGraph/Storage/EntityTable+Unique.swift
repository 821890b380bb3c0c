internal import GraphJournal

// The key-path and key lookups behind ModelContext+Unique.swift (object(where:), upsert).

extension EntityTable {
    func slot(for keyPath: AnyKeyPath) throws(ObjectGraphError) -> Int {
        guard let slot = entity.slot(for: keyPath) else {
            throw ObjectGraphError(
                .unknownKey,
                "\(keyPath) is not an attribute of \(entity.name) (hand-written models pass keyPaths: to EntityDescription)",
                entity: entity.name)
        }
        return slot
    }

    /// The index of the constraint that is exactly the attribute at `slot`.
    func uniqueIndex(slot: Int) -> UniqueIndex? {
        for i in indexes.indexesBySlot[slot] where indexes.uniqueIndexes[i].slots.count == 1 {
            return indexes.uniqueIndexes[i]
        }
        return nil
    }

    /// The index of the constraint whose keys are exactly `slots` (in any order).
    func uniqueIndex(slots: [Int]) -> UniqueIndex? {
        let wanted = Set(slots)
        return indexes.uniqueIndexes.first { Set($0.slots) == wanted && $0.slots.count == slots.count }
    }
}

extension EntityTable {
    /// The first unique index other than `index` in which both `row` and `owner` have a key
    /// (no nil attribute) and the keys' stored bytes differ: the key a merge of `row` into
    /// `owner` would change. Nil when a merge changes no other unique key (giving `owner` a key
    /// it did not have is not a change of identity).
    func otherUniqueKeyThatDiffers(_ row: Int, _ owner: Int, besides index: UniqueIndex) -> UniqueIndex? {
        indexes.uniqueIndexes.first { other in
            other !== index
                && !other.slots.contains { isNull(row: row, slot: $0) || isNull(row: owner, slot: $0) }
                && !sameKey(row, owner, other)
        }
    }
}

// Keeping the unique indexes up to date with the rows.

extension EntityTable {
    /// The hash of `row`'s key in `index`, or nil when a key attribute is nil (not indexed).
    @inline(__always)
    func keyHash(row: Int, _ index: UniqueIndex) -> Int? { keyHash(row: row, slots: index.slots, seed: index.seed) }

    /// The hash of a probe key given as cells, matching ``keyHash(row:_:)``.
    func keyHash(cells: [RawCell], _ index: UniqueIndex) -> Int { Self.keyHash(cells: cells, seed: index.seed) }

    /// The hash, under `seed`, of `row`'s cells at `slots` (a unique or an identity index's
    /// key), or nil when one of them is nil.
    @inline(__always)
    func keyHash(row: Int, slots: [Int], seed: UInt64) -> Int? {
        var hasher = _KeyHasher(seed: seed)
        for slot in slots {
            if isNull(row: row, slot: slot) { return nil }
            let cell = values[row * stride + slot]
            if types[slot].isVariableLength {
                arena.withBytes(ArenaRef(cell)) { hasher.combine(bytes: $0) }
            } else {
                hasher.combine(cell)
            }
        }
        return hasher.finalize()
    }

    /// The hash, under `seed`, of a probe key given as cells, matching
    /// ``keyHash(row:slots:seed:)``.
    static func keyHash(cells: [RawCell], seed: UInt64) -> Int {
        var hasher = _KeyHasher(seed: seed)
        for cell in cells {
            switch cell {
            case .fixed(let bits): hasher.combine(bits)
            case .bytes(let buffer): hasher.combine(bytes: buffer)
            }
        }
        return hasher.finalize()
    }

    @inline(__always)
    func sameKey(_ a: Int, _ b: Int, _ index: UniqueIndex) -> Bool {
        for slot in index.slots {
            let x = values[a * stride + slot], y = values[b * stride + slot]
            if x == y { continue }
            if !types[slot].isVariableLength || !arena.equal(ArenaRef(x), ArenaRef(y)) { return false }
        }
        return true
    }

    func rowHasKey(_ row: Int, cells: [RawCell], _ index: UniqueIndex) -> Bool {
        for (i, slot) in index.slots.enumerated() {
            if isNull(row: row, slot: slot) { return false }
            let x = values[row * stride + slot]
            switch cells[i] {
            case .fixed(let bits): if x != bits { return false }
            case .bytes(let buffer): if !arenaHolds(x, buffer) { return false }
            }
        }
        return true
    }

    /// The row owning `row`'s key, if any (possibly `row` itself).
    func owner(ofKeyOf row: Int, in index: UniqueIndex) -> Int? {
        guard let h = keyHash(row: row, index) else { return nil }
        var b = h & index.mask
        while true {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { return nil }
            if r >= 0 && (Int(r) == row || sameKey(Int(r), row, index)) { return Int(r) }
            b = (b + 1) & index.mask
        }
    }

    /// The row owning the key given as cells, if any. O(1).
    func owner(ofCells cells: [RawCell], in index: UniqueIndex) -> Int? {
        let h = keyHash(cells: cells, index)
        var b = h & index.mask
        while true {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { return nil }
            if r >= 0 && rowHasKey(Int(r), cells: cells, index) { return Int(r) }
            b = (b + 1) & index.mask
        }
    }

    /// The row owning the one-attribute key `cell`, if any. O(1), allocation-free.
    ///
    /// With `prefetchingRowState` (an object about to be read or changed), each probed row's
    /// flags, instance slot and before-image index are prefetched with its key; a connection,
    /// which needs only the row, passes `false`: taking the three arrays' buffers retained and
    /// released each, four pairs of atomic operations per lookup.
    func owner(ofCell cell: RawCell, in index: UniqueIndex, prefetchingRowState: Bool = true) -> Int? {
        let slot = index.slots[0]
        var b = index.home(index.hash(cell: cell))
        while true {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { return nil }
            if r >= 0 && prefetchingRowState { prefetchRowState(Int(r)) }
            if r >= 0, !isNull(row: Int(r), slot: slot) {
                let x = values[Int(r) * stride + slot]
                switch cell {
                case .fixed(let bits): if x == bits { return Int(r) }
                case .bytes(let buffer):
                    if arenaHolds(x, buffer) { return Int(r) }
                }
            }
            b = (b + 1) & index.mask
        }
    }

    /// Indexes `row` under its current key: as owner when the key is free, else as a duplicate.
    func indexInsert(row: Int, into index: UniqueIndex) {
        guard let h = keyHash(row: row, index) else { return }
        index.changes += 1
        if (index.used + 1) * 2 > index.buckets.count { grow(index) }
        var b = h & index.mask
        var firstTombstone = -1
        while true {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { break }
            if r == UniqueIndex.tombstone {
                if firstTombstone < 0 { firstTombstone = b }
            } else if Int(r) == row {
                return
            } else if sameKey(Int(r), row, index) {
                index.duplicates.insert(Int32(row))
                return
            }
            b = (b + 1) & index.mask
        }
        if firstTombstone >= 0 {
            index.buckets[firstTombstone] = Int32(row)
        } else {
            index.buckets[b] = Int32(row)
            index.used += 1
        }
    }

    /// Indexes `row` under the one-attribute key `cell`, which the caller knows no row of the
    /// index holds: takes the first free bucket without comparing any key, so it reads no other
    /// row (each such read is a cache miss in a large table). A bulk import into an empty entity
    /// uses it while ``UniqueIndex/changes`` shows that only its own inserts changed the index.
    func indexInsertAbsent(row: Int, cell: RawCell, into index: UniqueIndex) {
        index.changes += 1
        if (index.used + 1) * 2 > index.buckets.count { grow(index) }
        index.claimFreeBucket(from: index.home(index.hash(cell: cell)), row: row)
    }

    /// Removes `row` (indexed under its current key) from the index.
    func indexRemove(row: Int, from index: UniqueIndex) {
        index.changes += 1
        if !index.duplicates.isEmpty, index.duplicates.remove(Int32(row)) != nil { return }
        guard let h = keyHash(row: row, index) else { return }
        var b = h & index.mask
        while true {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { return }
            if Int(r) == row {
                index.buckets[b] = UniqueIndex.tombstone
                return
            }
            b = (b + 1) & index.mask
        }
    }

    private func grow(_ index: UniqueIndex) {
        let owners = index.buckets.filter { $0 >= 0 }
        var size = index.buckets.count
        // At most a third full afterwards: room to double the keys before the next growth,
        // without the factor of 4 that, just past a power of two, made the table 8x the keys.
        while size < (owners.count + 1) * 3 { size <<= 1 }
        index.buckets = Array(repeating: UniqueIndex.empty, count: size)
        index.used = 0
        place(owners: owners, in: index)
    }

    /// Puts `owners`, rows whose keys are distinct and not in `index`, into free buckets without
    /// comparing keys. Reading each owner's key and writing its bucket are both cache misses in
    /// a large table; the key and the bucket of the owners a few places ahead are prefetched.
    func place(owners: [Int32], in index: UniqueIndex) {
        let mask = index.mask
        let keySlot = index.slots[0]
        if index.slots.count == 1 && !types[keySlot].isVariableLength {
            // A key of one fixed-size cell (an integer ID): its hash straight from the cell.
            read { columns in index.placeFixedKeys(of: owners, slot: keySlot, in: columns) }
            return
        }
        for j in owners.indices {
            if j + 16 < owners.count { prefetchCell(row: Int(owners[j + 16]), slot: keySlot) }
            if j + 8 < owners.count, let h = keyHash(row: Int(owners[j + 8]), index) {
                prefetchBucket(hash: h, in: index)
            }
            let r = owners[j]
            guard let h = keyHash(row: Int(r), index) else { continue }
            var b = h & mask
            while index.buckets[b] != UniqueIndex.empty { b = (b + 1) & mask }
            index.buckets[b] = r
            index.used += 1
        }
    }

    /// Removes `row` from every index that `slot` belongs to (before a change of `slot`).
    @inline(__always)
    func unindex(row: Int, slot: Int) {
        for i in indexes.indexesBySlot[slot] { indexRemove(row: row, from: indexes.uniqueIndexes[i]) }
    }

    /// Indexes `row` in every index that `slot` belongs to (after a change of `slot`).
    @inline(__always)
    func reindex(row: Int, slot: Int) {
        for i in indexes.indexesBySlot[slot] { indexInsert(row: row, into: indexes.uniqueIndexes[i]) }
    }

    func unindexAll(row: Int) { for index in indexes.uniqueIndexes { indexRemove(row: row, from: index) } }
    func indexAll(row: Int) { for index in indexes.uniqueIndexes { indexInsert(row: row, into: index) } }

    /// Rebuilds every index from the live rows (after replay), pre-sized from the row count.
    /// Returns the number of committed duplicates found (possible when a constraint was added
    /// to a model whose stored data violates it).
    ///
    /// The rows are indexed in serial order, so that of two rows with the same key the older
    /// object owns it and the newer one is the duplicate, whatever rows they were replayed
    /// into. Replay appends rows in serial order; only a table whose rows were reused needs
    /// sorting.
    @discardableResult
    func rebuildIndexes() -> Int {
        if !indexes.referenceSlots.isEmpty { invalidateReferenceIndexes() }
        // Replay wrote cells without telling the secondary indexes: rebuilt at their next lookup.
        discardSecondaryIndexes()
        guard !indexes.uniqueIndexes.isEmpty else { return 0 }
        // Fills done during replay hold what the fill below would build when the table's rows
        // are still exactly the block's they were started for.
        var filled: [UniqueIndex] = []
        for job in indexes.indexFillJobs {
            if job.count == rowCount && identity.liveCount == rowCount {
                job.install()
                filled.append(job.index)
            } else {
                job.wait()
            }
        }
        indexes.indexFillJobs = []
        let unfilled = indexes.uniqueIndexes.filter { index in !filled.contains { $0 === index } }
        if !unfilled.isEmpty {
            var rows: [Int32] = []
            rows.reserveCapacity(identity.liveCount)
            var inSerialOrder = true
            var previous: UInt64 = 0
            for row in 0..<rowCount where isVisible(row: row) {
                let serial = identity.serialOfRow[row]
                if serial < previous { inSerialOrder = false }
                previous = serial
                rows.append(Int32(row))
            }
            if !inSerialOrder { rows.sort { identity.serialOfRow[Int($0)] < identity.serialOfRow[Int($1)] } }
            for index in unfilled {
                index.reset(capacity: rows.count)
                fill(index, from: rows)
            }
        }
        return indexes.uniqueIndexes.reduce(0) { $0 + $1.duplicates.count }
    }

    /// Indexes `rows` (in serial order) in the empty `index`.
    ///
    /// Each row's key is hashed once, in row order, so its cells are read as they lie in
    /// memory; the low 32 bits of each hash, all a probe needs of it (they name its home
    /// bucket), are kept per row for the fill (4 bytes a row). A probe that meets
    /// another row compares the two hashes before it compares keys: a probe often meets another
    /// row, and comparing keys would read that row's cells, a cache miss in a large table. Only
    /// rows whose hashes agree are compared (``UniqueIndex/placeRows(_:hashes:sameKey:)``).
    private func fill(_ index: UniqueIndex, from rows: [Int32]) {
        var hashes = [UInt32](repeating: 0, count: rowCount)
        var keyed = rows
        var nilKeys = false
        for row in rows {
            if let h = keyHash(row: Int(row), index) {
                hashes[Int(row)] = UInt32(truncatingIfNeeded: h)
            } else {
                nilKeys = true
            }
        }
        if nilKeys {
            // A row with a nil key attribute is not indexed.
            keyed = rows.filter { keyHash(row: Int($0), index) != nil }
        }
        index.placeRows(keyed, hashes: hashes) { sameKey($0, $1, index) }
    }
}
