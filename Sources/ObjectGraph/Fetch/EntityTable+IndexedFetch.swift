import Foundation

// Fetches answered through a secondary index (SecondaryIndex.swift): the rows a predicate's
// comparisons with constants allow, or the first rows in the order of a sort key. The index
// only narrows the rows looked at: each candidate is still checked against the whole condition
// in the fetch's view, so the result is exactly the scan's. Nothing here changes the table
// beyond bringing an index up to date.

/// One comparison of a key attribute with a constant, taken from a conjunction.
struct IndexAtom {
    let slot: Int
    let op: StorageCondition.Operator
    let probe: IndexProbe
    let kind: IndexKeyKind
}

/// How a lookup in one index narrows a condition: equality on the index's first
/// `equal.count` key attributes, then optionally bounds on the next one.
struct IndexPlan {
    let index: SecondaryIndex
    var equal: [IndexProbe] = []
    var lower: (probe: IndexProbe, inclusive: Bool)?
    var upper: (probe: IndexProbe, inclusive: Bool)?

    /// How much the plan narrows: two per equal attribute, one for bounds.
    var score: Int { equal.count * 2 + (lower != nil || upper != nil ? 1 : 0) }

    /// The plan for `index` given the condition's `atoms`: as many leading equalities as
    /// there are, then the bounds of the next key attribute (`bounded: false` skips them).
    init(index: SecondaryIndex, atoms: [IndexAtom], equalities limit: Int = .max) {
        self.index = index
        var i = 0
        while i < min(limit, index.slots.count),
            let a = atoms.first(where: { $0.slot == index.slots[i] && $0.op == .equal && $0.kind == index.kinds[i] })
        {
            equal.append(a.probe)
            i += 1
        }
        guard i < index.slots.count else { return }
        for a in atoms where a.slot == index.slots[i] && a.kind == index.kinds[i] {
            switch a.op {
            case .greater where lower == nil: lower = (a.probe, false)
            case .greaterOrEqual where lower == nil: lower = (a.probe, true)
            case .less where upper == nil: upper = (a.probe, false)
            case .lessOrEqual where upper == nil: upper = (a.probe, true)
            default: break
            }
        }
    }
}

extension StorageCondition {
    /// The comparisons with constants this condition is a conjunction of (all of them must
    /// hold for a row to match; other parts are left out).
    func indexAtoms(into atoms: inout [IndexAtom]) {
        switch self {
        case .and(let a, let b):
            a.indexAtoms(into: &atoms)
            b.indexAtoms(into: &atoms)
        case .int(let slot, let op, let k, _) where op != .notEqual:
            atoms.append(
                IndexAtom(
                    slot: slot, op: op, probe: .fixed(SecondaryIndex.orderKey(UInt64(bitPattern: k), .signed)),
                    kind: .signed))
        case .uint(let slot, let op, let k, _) where op != .notEqual:
            atoms.append(IndexAtom(slot: slot, op: op, probe: .fixed(k), kind: .unsigned))
        case .double(let slot, let op, let k, _) where op != .notEqual:
            atoms.append(
                IndexAtom(slot: slot, op: op, probe: .fixed(SecondaryIndex.orderKey(double: k)), kind: .double))
        case .float(let slot, let op, let k, _) where op != .notEqual:
            atoms.append(IndexAtom(slot: slot, op: op, probe: .fixed(SecondaryIndex.orderKey(double: k)), kind: .float))
        case .bool(let slot, .equal, let k, _):
            atoms.append(IndexAtom(slot: slot, op: .equal, probe: .fixed(k ? 1 : 0), kind: .bool))
        case .string(let slot, let op, let k, _) where op != .notEqual:
            atoms.append(IndexAtom(slot: slot, op: op, probe: .string(k), kind: .string))
        default:
            break
        }
    }
}

extension EntityTable {
    /// The index lookup that narrows `condition` most, or nil when no index helps.
    func indexPlan(for condition: StorageCondition) -> IndexPlan? {
        guard !indexes.secondaryIndexes.isEmpty else { return nil }
        var atoms: [IndexAtom] = []
        condition.indexAtoms(into: &atoms)
        guard !atoms.isEmpty else { return nil }
        var best: IndexPlan?
        for index in indexes.secondaryIndexes {
            let plan = IndexPlan(index: index, atoms: atoms)
            if plan.score > (best?.score ?? 0) { best = plan }
        }
        return best
    }

    /// The positions of `plan.index.sorted` whose clean entries have keys in the plan's range
    /// (dirty entries inside it are anywhere as far as their keys go).
    func range(of plan: IndexPlan, _ keys: IndexKeyReader) -> Range<Int> {
        let n = plan.index.sorted.count
        let equal = plan.equal
        let lo: Int
        if let (probe, inclusive) = plan.lower {
            let probes = equal + [probe]
            lo = keys.partition(0..<n) {
                let c = keys.compare(Int($0), probes); return inclusive ? c < 0 : c <= 0
            }
        } else if !equal.isEmpty {
            lo = keys.partition(0..<n) { keys.compare(Int($0), equal) < 0 }
        } else {
            lo = 0
        }
        let hi: Int
        if let (probe, inclusive) = plan.upper {
            let probes = equal + [probe]
            hi = keys.partition(lo..<n) {
                let c = keys.compare(Int($0), probes); return inclusive ? c <= 0 : c < 0
            }
        } else if !equal.isEmpty {
            hi = keys.partition(lo..<n) { keys.compare(Int($0), equal) <= 0 }
        } else {
            hi = n
        }
        return lo..<max(lo, hi)
    }

    /// Calls `body` with each row whose key may have changed in the fetch's view and that
    /// the index's clean entries therefore do not stand for: the index's dirty rows, and in the
    /// committed view the rows changed in the pending transaction (their entries hold their
    /// current keys).
    @inline(__always)
    private func forEachUnindexedRow(_ index: SecondaryIndex, committedOnly: Bool, _ body: (Int32) -> Void) {
        for r in index.dirty { body(r) }
        if committedOnly {
            for r in changes.dirtyRows where changes.beforeIndex[Int(r)] >= 0 && !index.isDirty(Int(r)) { body(r) }
        }
    }

    /// Whether the entry at a clean position of the index stands for its row in the view.
    @inline(__always)
    private func isIndexed(_ row: Int, _ index: SecondaryIndex, committedOnly: Bool) -> Bool {
        !index.isDirty(row) && !(committedOnly && changes.beforeIndex[row] >= 0)
    }

    /// The rows in view that meet `condition`, found through `plan`, in storage order (as
    /// ``scanRows(committedOnly:condition:limit:)`` returns them); nil when the lookup would
    /// look at more rows than a scan should (then the caller scans).
    func indexedRows(_ plan: IndexPlan, condition: StorageCondition, committedOnly: Bool) -> [Int32]? {
        let index = plan.index
        prepare(index)
        let hidden = Self.hiddenFlags(committedOnly: committedOnly)
        var result: [Int32] = []
        var ordered = true
        let answered: Bool = withKeys(of: index) { keys in
            let range = range(of: plan, keys)
            // A wide range reads rows in key order, scattered: a scan reads them in order.
            if range.count > max(256, rowCount / 8) { return false }
            let columns = keys.columns, arena = keys.arena
            let sorted = index.sorted
            var last: Int32 = -1
            for p in range {
                let r = sorted[p], row = Int(r)
                guard isIndexed(row, index, committedOnly: committedOnly), columns.isInView(row: row, hidden: hidden),
                    condition.matches(columns.cells(row: row, committed: committedOnly, arena: arena))
                else { continue }
                if r < last { ordered = false }
                last = r
                result.append(r)
            }
            forEachUnindexedRow(index, committedOnly: committedOnly) { r in
                let row = Int(r)
                guard columns.isInView(row: row, hidden: hidden),
                    condition.matches(columns.cells(row: row, committed: committedOnly, arena: arena))
                else { return }
                ordered = false
                result.append(r)
            }
            return true
        }
        guard answered else { return nil }
        if !ordered { result.sort() }
        return result
    }

    /// For a fetch sorted first by the attribute at `sortSlot` (non-optional, with a storage
    /// sort column) and needing only its first `end` objects: rows that contain those first
    /// `end` in the fetch's order, read from an index in key order (`reverse`: backwards)
    /// instead of sorting every match. The caller sorts the rows returned by the descriptors
    /// and takes its window. `condition` must be the predicate exactly (or nil for none).
    ///
    /// The walk stops once it has `end` matches and the next match's sort key differs from the
    /// last one's, so ties (ordered by later descriptors or by row) are all there; rows the
    /// index does not stand for are added whole. Nil when no index has the attribute after
    /// keys the condition fixes, or a matching row's key is NaN (whose place in a sort is not
    /// the index's).
    func indexWalk(
        sortSlot: Int, reverse: Bool, condition: StorageCondition?, end: Int, committedOnly: Bool
    ) -> [Int32]? {
        guard !indexes.secondaryIndexes.isEmpty else { return nil }
        var atoms: [IndexAtom] = []
        condition?.indexAtoms(into: &atoms)
        var chosen: (plan: IndexPlan, position: Int)?
        for index in indexes.secondaryIndexes {
            guard let e = index.slots.firstIndex(of: sortSlot) else { continue }
            let plan = IndexPlan(index: index, atoms: atoms, equalities: e)
            if plan.equal.count == e { chosen = (plan, e); break }
        }
        guard let (plan, e) = chosen else { return nil }
        let index = plan.index
        prepare(index)
        let hidden = Self.hiddenFlags(committedOnly: committedOnly)
        let kind = index.kinds[e]
        let mayBeNaN = kind == .double || kind == .float
        return withKeys(of: index) { keys -> [Int32]? in
            let columns = keys.columns, arena = keys.arena
            let sorted = index.sorted
            let range = range(of: plan, keys)
            func matches(_ row: Int) -> Bool {
                guard columns.isInView(row: row, hidden: hidden) else { return false }
                guard let condition else { return true }
                return condition.matches(columns.cells(row: row, committed: committedOnly, arena: arena))
            }
            func isNaN(_ row: Int, committed: Bool) -> Bool {
                let c = columns.cell(row: row, slot: sortSlot, committed: committed)
                return !c.isNull && SecondaryIndex.orderKey(c.bits, kind) == .max
            }
            var unindexed: [Int32] = []
            forEachUnindexedRow(index, committedOnly: committedOnly) { r in if matches(Int(r)) { unindexed.append(r) } }
            if mayBeNaN {
                if unindexed.contains(where: { isNaN(Int($0), committed: committedOnly) }) { return nil }
                // NaNs are the last keys of the range.
                var p = range.upperBound - 1
                while p >= range.lowerBound {
                    let row = Int(sorted[p])
                    if isIndexed(row, index, committedOnly: committedOnly) {
                        guard isNaN(row, committed: false) else { break }
                        if matches(row) { return nil }
                    }
                    p -= 1
                }
            }
            var picked: [Int32] = []
            var last = -1
            func take(_ p: Int) -> Bool {
                let row = Int(sorted[p])
                guard isIndexed(row, index, committedOnly: committedOnly), matches(row) else { return true }
                if picked.count >= end && (last < 0 || keys.compare(row, last, at: e) != 0) { return false }
                picked.append(sorted[p])
                last = row
                return true
            }
            if reverse {
                for p in range.reversed() { if !take(p) { break } }
            } else {
                for p in range { if !take(p) { break } }
            }
            return picked + unindexed
        }
    }
}
