/// The keys of an index's rows, read from the table's columns and arena for the span of one
/// closure (``EntityTable/withKeys(of:_:)``).
struct IndexKeyReader {
    let index: SecondaryIndex
    let columns: ColumnsHandle
    let arena: ArenaBytes

    /// How row `a`'s key attribute `i` orders against row `b`'s: -1, 0 or 1. An unset
    /// optional attribute comes first; an unset non-optional one reads as its type's zero
    /// value (the empty string), as in a predicate.
    @inline(__always)
    func compare(_ a: Int, _ b: Int, at i: Int) -> Int {
        let slot = index.slots[i]
        let an = columns.isNull(row: a, slot: slot), bn = columns.isNull(row: b, slot: slot)
        if index.optional[i] && (an || bn) { return an == bn ? 0 : (an ? -1 : 1) }
        let x = an ? 0 : columns.cell(row: a, slot: slot), y = bn ? 0 : columns.cell(row: b, slot: slot)
        let kind = index.kinds[i]
        if kind == .string { return x == y ? 0 : arena.stringOrder(ArenaRef(x), ArenaRef(y)) }
        let kx = SecondaryIndex.orderKey(x, kind), ky = SecondaryIndex.orderKey(y, kind)
        return kx < ky ? -1 : (kx == ky ? 0 : 1)
    }

    /// How row `a`'s whole key orders against row `b`'s.
    @inline(__always)
    func compareKeys(_ a: Int, _ b: Int) -> Int {
        for i in 0..<index.slots.count {
            let c = compare(a, b, at: i)
            if c != 0 { return c }
        }
        return 0
    }

    /// The index order: by key, then by row.
    @inline(__always)
    func less(_ a: Int32, _ b: Int32) -> Bool {
        let c = compareKeys(Int(a), Int(b))
        return c < 0 || (c == 0 && a < b)
    }

    /// How `row`'s first `probes.count` key attributes order against `probes`: -1, 0 or 1.
    /// An unset optional attribute orders before every probe.
    @inline(__always)
    func compare(_ row: Int, _ probes: [IndexProbe]) -> Int {
        for (i, probe) in probes.enumerated() {
            let slot = index.slots[i]
            let isNull = columns.isNull(row: row, slot: slot)
            if isNull && index.optional[i] { return -1 }
            let x = isNull ? 0 : columns.cell(row: row, slot: slot)
            let c: Int
            switch probe {
            case .fixed(let k):
                let kx = SecondaryIndex.orderKey(x, index.kinds[i])
                c = kx < k ? -1 : (kx == k ? 0 : 1)
            case .string(let k):
                c = arena.stringOrder(ArenaRef(x), against: k.utf8, utf8IsASCII: k.isASCII, string: k.string)
            }
            if c != 0 { return c }
        }
        return 0
    }

    /// The first position `p` in `range` of the index's ``SecondaryIndex/sorted`` such that
    /// every clean entry before `p` satisfies `isBefore` and no clean entry from `p` on does
    /// (`isBefore` must hold for a prefix of the clean entries). Dirty entries are skipped:
    /// their place says nothing about their key.
    func partition(_ range: Range<Int>, _ isBefore: (Int32) -> Bool) -> Int {
        let sorted = index.sorted
        var lo = range.lowerBound, hi = range.upperBound
        while lo < hi {
            let mid = (lo + hi) >> 1
            var m = mid
            while m < hi && index.isDirty(Int(sorted[m])) { m += 1 }
            if m == hi {
                hi = mid
            } else if isBefore(sorted[m]) {
                lo = m + 1
            } else {
                hi = mid
            }
        }
        return lo
    }
}
