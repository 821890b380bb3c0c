extension EntityTable {
    /// The identity index of exactly `slots` (any order), made (unbuilt) when there is none.
    func identityIndex(slots: [Int]) -> IdentityIndex {
        let wanted = slots.sorted()
        if let index = indexes.identityIndexes.first(where: { $0.slots == wanted }) { return index }
        let index = IdentityIndex(slots: wanted)
        indexes.identityIndexes.append(index)
        indexes.identitySlotMask |= index.slotMask
        return index
    }

    /// The visible rows whose key in `index` is `cells` (in the index's slot order): none, one,
    /// or the first two of several. O(1) but for the rows that share the key.
    func identityMatch(cells: [RawCell], in index: IdentityIndex) -> IdentityMatch {
        prepare(index)
        index.lookups += 1
        let h = Self.keyHash(cells: cells, seed: index.seed)
        guard let head = headRow(hash: h, in: index, matches: { self.row($0, hasKey: cells, slots: index.slots) })
        else { return .none }
        var found: Int?
        var r = Int32(head)
        while r >= 0 {
            if isVisible(row: Int(r)) {
                guard let first = found else {
                    found = Int(r)
                    r = index.next[Int(r)]
                    continue
                }
                return .several(first, Int(r))
            }
            r = index.next[Int(r)]
        }
        return found.map { .one($0) } ?? .none
    }

    /// Builds `index`, or files its dirty rows again.
    func prepare(_ index: IdentityIndex) {
        guard index.isBuilt else {
            build(index)
            return
        }
        guard !index.dirty.isEmpty else { return }
        index.extend(toRows: rowCount)
        let dirty = index.dirty
        index.dirty = []
        for r in dirty {
            index.marks[Int(r)] = 0
            if Int(r) < index.previous.count && index.previous[Int(r)] != IdentityIndex.unfiled {
                unfile(Int(r), from: index)
            }
        }
        for r in dirty where Int(r) < rowCount && flags[Int(r)] & Flags.live != 0 { file(Int(r), in: index) }
    }

    /// Files every live row in the empty `index`.
    private func build(_ index: IdentityIndex) {
        index.discard()
        index.buckets = Array(
            repeating: IdentityIndex.empty, count: UniqueIndex.bucketCount(forKeys: identity.liveCount))
        index.extend(toRows: rowCount)
        index.isBuilt = true
        index.builds += 1
        for row in 0..<rowCount where flags[row] & Flags.live != 0 { file(row, in: index) }
    }

    /// Adds `row` (live, not filed) under its current key, second in its key's list when the
    /// key has one; a row with a nil key attribute is not filed.
    private func file(_ row: Int, in index: IdentityIndex) {
        guard let h = keyHash(row: row, slots: index.slots, seed: index.seed) else { return }
        if (index.used + 1) * 2 > index.buckets.count { grow(index) }
        let mask = index.buckets.count - 1
        var b = h & mask
        var firstTombstone = -1
        index.hashes[row] = h
        while true {
            let r = index.buckets[b]
            if r == IdentityIndex.empty { break }
            if r == IdentityIndex.tombstone {
                if firstTombstone < 0 { firstTombstone = b }
            } else if index.hashes[Int(r)] == h && sameKey(Int(r), row, slots: index.slots) {
                // Second in the list: O(1), and the bucket keeps its head.
                let after = index.next[Int(r)]
                index.next[row] = after
                index.previous[row] = r
                if after >= 0 { index.previous[Int(after)] = Int32(row) }
                index.next[Int(r)] = Int32(row)
                return
            }
            b = (b + 1) & mask
        }
        index.next[row] = -1
        index.previous[row] = IdentityIndex.head
        if firstTombstone >= 0 {
            index.buckets[firstTombstone] = Int32(row)
        } else {
            index.buckets[b] = Int32(row)
            index.used += 1
        }
    }

    /// Removes the filed `row` from its key's list (and its bucket, when it heads the list).
    private func unfile(_ row: Int, from index: IdentityIndex) {
        let before = index.previous[row], after = index.next[row]
        index.previous[row] = IdentityIndex.unfiled
        index.next[row] = -1
        if before >= 0 {
            index.next[Int(before)] = after
            if after >= 0 { index.previous[Int(after)] = before }
            return
        }
        // The head: its bucket passes to the next row, or becomes a tombstone.
        if after >= 0 { index.previous[Int(after)] = IdentityIndex.head }
        let mask = index.buckets.count - 1
        var b = index.hashes[row] & mask
        while index.buckets[b] != IdentityIndex.empty {
            if index.buckets[b] == Int32(row) {
                index.buckets[b] = after >= 0 ? after : IdentityIndex.tombstone
                return
            }
            b = (b + 1) & mask
        }
    }

    /// The head row of the list whose key `matches` accepts, probing from the hash `h`.
    private func headRow(hash h: Int, in index: IdentityIndex, matches: (Int) -> Bool) -> Int? {
        guard !index.buckets.isEmpty else { return nil }
        let mask = index.buckets.count - 1
        var b = h & mask
        while true {
            let r = index.buckets[b]
            if r == IdentityIndex.empty { return nil }
            if r >= 0 && index.hashes[Int(r)] == h {
                index.rowsCompared += 1
                if matches(Int(r)) { return Int(r) }
            }
            b = (b + 1) & mask
        }
    }

    /// Doubles the buckets (or more, to be at most a third full), dropping tombstones. Heads
    /// have distinct keys: they are placed without comparing keys.
    private func grow(_ index: IdentityIndex) {
        let heads = index.buckets.filter { $0 >= 0 }
        var size = max(16, index.buckets.count)
        while size < (heads.count + 1) * 3 { size <<= 1 }
        index.buckets = Array(repeating: IdentityIndex.empty, count: size)
        index.used = 0
        let mask = size - 1
        for r in heads {
            var b = index.hashes[Int(r)] & mask
            while index.buckets[b] != IdentityIndex.empty { b = (b + 1) & mask }
            index.buckets[b] = r
            index.used += 1
        }
    }

    /// Whether `row`'s attributes at `slots` hold `cells`, byte for byte.
    private func row(_ row: Int, hasKey cells: [RawCell], slots: [Int]) -> Bool {
        for (i, s) in slots.enumerated() {
            if isNull(row: row, slot: s) { return false }
            let x = values[row * stride + s]
            switch cells[i] {
            case .fixed(let bits): if types[s].isVariableLength || x != bits { return false }
            case .bytes(let buffer): if !types[s].isVariableLength || !arenaHolds(x, buffer) { return false }
            }
        }
        return true
    }

    /// Whether rows `a` and `b` hold the same bytes at `slots` (neither nil there).
    private func sameKey(_ a: Int, _ b: Int, slots: [Int]) -> Bool {
        for s in slots {
            let x = values[a * stride + s], y = values[b * stride + s]
            if x == y { continue }
            if !types[s].isVariableLength || !arena.equal(ArenaRef(x), ArenaRef(y)) { return false }
        }
        return true
    }
}
