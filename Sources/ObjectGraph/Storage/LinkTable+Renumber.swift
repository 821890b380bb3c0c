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
                Set(
                    touched[side].compactMap { r in
                        let n = rename(side, r)
                        return n >= 0 ? n : nil
                    })
            }
        }
    }
}
