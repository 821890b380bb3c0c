// The link section of a transaction payload: what changed in the relationships stored as links.
//
// ```
// payload    := u8 version(=3) varint blockCount block*  links     (version 3: with links)
// links      := varint n  linkBlock × n                     (ascending link index)
// linkBlock  := varint link (index in the schema record's link list)
//               pairs(removed)  pairs(added)  [orders of side 0 if ordered]  [orders of side 1 if ordered]
// pairs      := varint n  varint runs  run × runs           (the runs hold n pairs in all)
// run        := signed-varint serial0 − previous serial0  varint k (≥ 1)
//               (signed-varint serial1 − previous serial1) × k
// orders     := varint owners  (varint owner  varint k  (varint member  varint index) × k) × owners
// ```
//
// A run is consecutive pairs of one side-0 object; both previous serials start at 0 in each
// pairs list and carry from run to run, so an object's members with nearby serials take a
// byte each. Version 2 (still read) wrote each pair alone:
// `pairs := varint n  (signed-varint serial0 − previous serial0  varint serial1) × n`.
//
// Applied after every block of the payload: removals, then additions (each appended to the end
// of both objects' lists), then the order edits. A deleted object's links are not listed: the
// deletion removes them. An order edit names only the members that moved (or joined somewhere
// other than the end): they are taken out, then put back at their final index in ascending
// order; the members not named keep their relative order.

/// One link table's changes as a payload records them.
struct LinkBlock {
    var link: Int
    /// Serial pairs (side 0, side 1).
    var removed: [(UInt64, UInt64)] = []
    var added: [(UInt64, UInt64)] = []
    /// Per side: the owners whose order needs edits, with (member, final index) placements.
    var orders: [[(owner: UInt64, placements: [(UInt64, Int)])]] = [[], []]
    /// Per side: whether it is ordered (its orders are written).
    var ordered: [Bool] = [false, false]

    var isEmpty: Bool { removed.isEmpty && added.isEmpty && orders[0].isEmpty && orders[1].isEmpty }
}

extension TransactionCodec {
    /// The version of a payload with a link section, its pairs in runs.
    static let linkVersion: UInt8 = 3
    /// The earlier version of a payload with a link section, each pair written alone (read,
    /// no longer written).
    static let pairLinkVersion: UInt8 = 2

    /// The pending changes of every link table, as the payload records them.
    static func pendingLinkBlocks(_ context: ModelContext) -> [LinkBlock] {
        context.links.compactMap { l in
            guard !l.log.isEmpty else { return nil }
            let block = l.pendingBlock()
            return block.isEmpty ? nil : block
        }
    }

    /// Every committed link, as a base snapshot records them.
    static func snapshotLinkBlocks(_ context: ModelContext) -> [LinkBlock] {
        context.links.compactMap { l in
            let block = l.committedBlock()
            return block.isEmpty ? nil : block
        }
    }

    static func writeLinks(_ blocks: [LinkBlock], into w: inout ByteWriter) {
        w.varint(blocks.count)
        for b in blocks {
            w.varint(b.link)
            for pairs in [b.removed, b.added] { writeRuns(pairs, into: &w) }
            for side in 0..<2 {
                // Written only for an ordered side (the reader knows which from the schema).
                guard b.ordered[side] else { continue }
                w.varint(b.orders[side].count)
                for (owner, placements) in b.orders[side] {
                    w.varint(owner)
                    w.varint(placements.count)
                    for (member, index) in placements {
                        w.varint(member)
                        w.varint(index)
                    }
                }
            }
        }
    }

    /// Writes `pairs` (`pairs` in the grammar above) as runs of consecutive pairs of one
    /// side-0 object.
    private static func writeRuns(_ pairs: [(UInt64, UInt64)], into w: inout ByteWriter) {
        w.varint(pairs.count)
        var runs = 0
        var i = 0
        while i < pairs.count {
            let s0 = pairs[i].0
            repeat { i += 1 } while i < pairs.count && pairs[i].0 == s0
            runs += 1
        }
        w.varint(runs)
        var previous0: Int64 = 0, previous1: Int64 = 0
        i = 0
        while i < pairs.count {
            let s0 = pairs[i].0
            var end = i + 1
            while end < pairs.count && pairs[end].0 == s0 { end += 1 }
            w.signed(Int64(bitPattern: s0) &- previous0)
            previous0 = Int64(bitPattern: s0)
            w.varint(end - i)
            for j in i..<end {
                w.signed(Int64(bitPattern: pairs[j].1) &- previous1)
                previous1 = Int64(bitPattern: pairs[j].1)
                if j & 0x3FFF == 0x3FFF { w.cutIfFull() }
            }
            i = end
        }
    }
}

extension LinkTable {
    /// Whether `row` on `side` exists once the pending transaction is saved.
    @inline(__always)
    private func survives(_ side: Int, _ row: Int32) -> Bool { table(side).isVisible(row: Int(row)) }

    /// Whether `row` on `side` is part of the last saved state.
    @inline(__always)
    private func wasSaved(_ side: Int, _ row: Int32) -> Bool {
        table(side).flags[Int(row)] & (EntityTable.Flags.live | EntityTable.Flags.inserted | EntityTable.Flags.vanished)
            == EntityTable.Flags.live
    }

    private func serials(_ pairs: [(Int32, Int32)]) -> [(UInt64, UInt64)] {
        let t0 = table(0), t1 = table(1)
        return pairs.map { (t0.identity.serialOfRow[Int($0.0)], t1.identity.serialOfRow[Int($0.1)]) }
    }

    /// The pending transaction's net changes: pairs removed and added between objects that
    /// outlive the save, and the order edits of ordered sides.
    func pendingBlock() -> LinkBlock {
        var block = LinkBlock(link: index)
        block.ordered = link.ordered
        var added: [(Int32, Int32)] = []
        var removed: [(Int32, Int32)] = []
        if !log.contains(where: { $0.kind == .unlink }) {
            // Without an unlink, every logged link stands (a pair is linked at most once).
            for c in log where c.kind == .link && survives(0, c.a) && survives(1, c.b) { added.append((c.a, c.b)) }
        } else {
            var net: [UInt64: (count: Int, last: Int)] = [:]
            for (i, c) in log.enumerated() where c.kind == .link || c.kind == .unlink {
                let key = UInt64(UInt32(bitPattern: c.a)) << 32 | UInt64(UInt32(bitPattern: c.b))
                var entry = net[key] ?? (0, -1)
                if c.kind == .link {
                    entry.count += 1
                    entry.last = i
                } else {
                    entry.count -= 1
                }
                net[key] = entry
            }
            for (key, entry) in net {
                let a = Int32(bitPattern: UInt32(key >> 32)), b = Int32(bitPattern: UInt32(key & 0xFFFF_FFFF))
                guard survives(0, a) && survives(1, b) else { continue }
                if entry.count > 0 { added.append((a, b)) } else if entry.count < 0 { removed.append((a, b)) }
            }
            // Additions in the order they were made (the order the replay appends them in).
            let lastOf = net.mapValues(\.last)
            added.sort {
                lastOf[UInt64(UInt32(bitPattern: $0.0)) << 32 | UInt64(UInt32(bitPattern: $0.1))]!
                    < lastOf[UInt64(UInt32(bitPattern: $1.0)) << 32 | UInt64(UInt32(bitPattern: $1.1))]!
            }
            removed.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        }
        block.added = serials(added)
        block.removed = serials(removed)
        for side in 0..<2 where link.ordered[side] {
            block.orders[side] = pendingOrders(side, added: added, removed: removed)
        }
        return block
    }

    /// The order edits of `side`'s owners whose lists the transaction rearranged beyond what
    /// removing `removed` and appending `added` does.
    private func pendingOrders(
        _ side: Int, added: [(Int32, Int32)], removed: [(Int32, Int32)]
    ) -> [(owner: UInt64, placements: [(UInt64, Int)])] {
        // Removals keep the others' order and additions are appended, which the replay does
        // too; only an insert before the end, a move, or a pair unlinked and linked again (back
        // at the end, not where it was) rearranges a list.
        var rearranged = midInserted[side]
        var unlinked = Set<UInt64>()
        for c in log where !rearranged {
            let key = UInt64(UInt32(bitPattern: c.a)) << 32 | UInt64(UInt32(bitPattern: c.b))
            switch c.kind {
            case .unlink: unlinked.insert(key)
            case .link: if unlinked.contains(key) { rearranged = true }
            case .move0: if side == 0 { rearranged = true }
            case .move1: if side == 1 { rearranged = true }
            }
        }
        guard rearranged else { return [] }
        var byOwner: [Int32: [LinkChange]] = [:]
        for c in log {
            switch c.kind {
            case .link, .unlink: byOwner[side == 0 ? c.a : c.b, default: []].append(c)
            case .move0: if side == 0 { byOwner[c.a, default: []].append(c) }
            case .move1: if side == 1 { byOwner[c.b, default: []].append(c) }
            }
        }
        var removedBy: [Int32: Set<Int32>] = [:]
        for (a, b) in removed {
            if side == 0 { removedBy[a, default: []].insert(b) } else { removedBy[b, default: []].insert(a) }
        }
        var addedBy: [Int32: [Int32]] = [:]
        for (a, b) in added { side == 0 ? addedBy[a, default: []].append(b) : addedBy[b, default: []].append(a) }
        var result: [(owner: UInt64, placements: [(UInt64, Int)])] = []
        let other = table(1 - side)
        for owner in changedOwners(side) where survives(side, Int32(owner)) {
            let committed = committedMembers(side, owner, changes: byOwner[Int32(owner)] ?? [])
            let gone = removedBy[Int32(owner)] ?? []
            let expected =
                committed.filter { survives(1 - side, $0) && !gone.contains($0) } + (addedBy[Int32(owner)] ?? [])
            let final = members(side, owner).filter { survives(1 - side, $0) }
            guard expected != final else { continue }
            let placements = Self.placements(from: expected, to: final)
            result.append(
                (
                    table(side).identity.serialOfRow[owner],
                    placements.map { (other.identity.serialOfRow[Int($0.0)], $0.1) }
                ))
        }
        result.sort { $0.owner < $1.owner }
        return result
    }

    /// Every committed link: side 0's owners in serial order, each list in its order, so that
    /// appending the pairs rebuilds side 0's lists; side 1's orders follow where it is ordered.
    func committedBlock() -> LinkBlock {
        var block = LinkBlock(link: index)
        block.ordered = link.ordered
        guard count > 0 || !log.isEmpty else { return block }
        var byOwner: [[Int32: [LinkChange]]] = [[:], [:]]
        for c in log {
            switch c.kind {
            case .link, .unlink:
                byOwner[0][c.a, default: []].append(c)
                byOwner[1][c.b, default: []].append(c)
            case .move0: byOwner[0][c.a, default: []].append(c)
            case .move1: byOwner[1][c.b, default: []].append(c)
            }
        }
        func committed(_ side: Int, _ row: Int) -> [Int32] {
            let list = byOwner[side][Int32(row)].map { committedMembers(side, row, changes: $0) } ?? members(side, row)
            return list.filter { wasSaved(1 - side, $0) }
        }
        let t0 = table(0), t1 = table(1)
        var owners: [Int] = []
        for row in 0..<t0.rowCount where wasSaved(0, Int32(row)) {
            if listCount(0, row) > 0 || byOwner[0][Int32(row)] != nil { owners.append(row) }
        }
        owners.sort { t0.identity.serialOfRow[$0] < t0.identity.serialOfRow[$1] }
        var added: [Int32: [Int32]] = [:]  // side 1 owner -> members in the order appended
        for a in owners {
            let s0 = t0.identity.serialOfRow[a]
            for b in committed(0, a) {
                block.added.append((s0, t1.identity.serialOfRow[Int(b)]))
                if link.ordered[1] { added[b, default: []].append(Int32(a)) }
            }
        }
        if link.ordered[1] {
            for (b, expected) in added.sorted(by: {
                t1.identity.serialOfRow[Int($0.key)] < t1.identity.serialOfRow[Int($1.key)]
            }) {
                let final = committed(1, Int(b))
                guard expected != final else { continue }
                block.orders[1].append(
                    (
                        t1.identity.serialOfRow[Int(b)],
                        Self.placements(from: expected, to: final).map { (t0.identity.serialOfRow[Int($0.0)], $0.1) }
                    ))
            }
        }
        return block
    }

    /// The members of `final` to take out and put back at their index (ascending) so that
    /// `expected` (the same members in another order) becomes `final`: all but a longest run
    /// already in order (a longest increasing subsequence of their positions in `expected`).
    static func placements(from expected: [Int32], to final: [Int32]) -> [(Int32, Int)] {
        var position: [Int32: Int] = [:]
        position.reserveCapacity(expected.count)
        for (i, m) in expected.enumerated() { position[m] = i }
        let sequence = final.map { position[$0] ?? -1 }
        // Patience sorting: tails[k] = index in `sequence` ending the best run of length k+1.
        var tails: [Int] = []
        var previous = [Int](repeating: -1, count: sequence.count)
        for (i, v) in sequence.enumerated() where v >= 0 {
            var lo = 0, hi = tails.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if sequence[tails[mid]] < v { lo = mid + 1 } else { hi = mid }
            }
            if lo > 0 { previous[i] = tails[lo - 1] }
            if lo == tails.count { tails.append(i) } else { tails[lo] = i }
        }
        var keep = Set<Int>()
        var i = tails.last ?? -1
        while i >= 0 {
            keep.insert(i)
            i = previous[i]
        }
        return final.enumerated().compactMap { keep.contains($0.offset) ? nil : ($0.element, $0.offset) }
    }
}
