// Relationships stored as links: many-to-many relationships, and ordered to-manys with their
// to-one inverse (Docs/Relationships.md).

/// Where one object's list on one side is: `count` members at `start` in the side's flat
/// array when `count` ≥ 0, else its own ``LinkList`` number `-count - 1`.
struct LinkHead {
    var start: Int32 = 0
    var count: Int32 = 0
}

/// Pairs to link (rows: side 0, side 1) as a replay reads them: runs of consecutive pairs of
/// one side-0 row, which is how saves and compactions write them. For a compaction's links the
/// members of the runs, in order, are side 0's flat array already.
struct LinkRuns {
    /// Per run: its side-0 row.
    var rows: [Int32] = []
    /// Per run: the end of its members in ``members``.
    var ends: [Int32] = []
    /// The side-1 rows of every run, one run after the other.
    var members: [Int32] = []

    var isEmpty: Bool { members.isEmpty }

    @inline(__always)
    mutating func append(_ a: Int32, _ b: Int32) {
        if rows.last != a {
            rows.append(a)
            ends.append(Int32(members.count))
        }
        members.append(b)
        ends[ends.count - 1] += 1
    }

    /// Every pair, in order.
    func forEachPair(_ body: (Int32, Int32) -> Bool) {
        var start = 0
        for (a, end) in zip(rows, ends) {
            for i in start..<Int(end) where !body(a, members[i]) { return }
            start = Int(end)
        }
    }
}

/// One change to a link table in the pending transaction, with the positions it happened at,
/// so that undoing it restores an ordered list exactly.
struct LinkChange {
    enum Kind: UInt8 {
        /// `a` and `b` were linked: `b` went to `posA` in `a`'s list, `a` to `posB` in `b`'s.
        case link
        /// `a` and `b` were unlinked, from those positions.
        case unlink
        /// In `a`'s (side 0) list, `b` moved from `posA` to `posB`.
        case move0
        /// In `b`'s (side 1) list, `a` moved from `posA` to `posB`.
        case move1
    }

    var kind: Kind
    /// The row on side 0.
    var a: Int32
    /// The row on side 1.
    var b: Int32
    var posA: Int32
    var posB: Int32
}

/// The links of one relationship stored as links (``ResolvedLink``) in one context: per row of
/// each side's entity, the rows of the related objects on the other side; and the pending
/// transaction's changes, in order, which rollback (to the last save or to a savepoint) undoes
/// and a save encodes.
///
/// Storage: each side keeps its lists **flat**, one `Int32` array holding every object's list
/// one after another, with a ``LinkHead`` (8 bytes) per row saying where its list is. An object
/// whose list a transaction changes gets a ``LinkList`` of its own (a copy of its flat slice),
/// which it keeps; ``flattenIfWorthIt()`` folds the own lists back into the flat arrays after a
/// save or an open once they are many (all but the chunked ones: long ordered lists). So a store opens without an allocation per object (a
/// replay of a compaction's links fills the flat arrays directly), and one link costs 8 bytes
/// (4 per side) plus the heads of the objects that have links.
///
/// A link joins two rows. Deleting an object does not touch its links: readers skip members
/// that are not visible (deleted or vanished), and the links go when the row is freed (save or
/// replay; see ``EntityTable/releaseRow(_:)``). So rolling back a delete brings its links
/// back, and a save's journal record leaves the links of deleted objects implicit.
final class LinkTable {
    let index: Int
    let link: ResolvedLink
    unowned let context: ModelContext
    /// Per side, per row: where the row's list is.
    @exclusivity(unchecked) var heads: [[LinkHead]] = [[], []]
    /// Per side: the flat lists.
    @exclusivity(unchecked) var flat: [[Int32]] = [[], []]
    /// Per side: the lists of objects changed since the flat arrays were built.
    @exclusivity(unchecked) var owned: [[LinkList]] = [[], []]
    /// Per side: the numbers of ``owned`` lists free for reuse.
    var freeOwned: [[Int32]] = [[], []]
    /// Per side: flat entries no head points at any more.
    var flatGarbage = [0, 0]
    /// The pending transaction's changes, oldest first.
    @exclusivity(unchecked) var log: [LinkChange] = []

    /// The log's length at each open savepoint.
    var marks: [Int] = []
    /// The number of links.
    var count = 0
    /// Whether changes are logged (off while replaying the journal: replayed state is
    /// committed state).
    var tracking = true
    /// Per side, the rows whose lists the last save changed (what a snapshot publish copies);
    /// kept only while ``collectsTouched`` is set.
    var touched: [Set<Int32>] = [[], []]
    var collectsTouched = false
    /// Per side: whether the pending transaction put a member anywhere but at the end of an
    /// ordered list (then a save works out order edits).
    var midInserted = [false, false]

    init(index: Int, link: ResolvedLink, context: ModelContext) {
        self.index = index
        self.link = link
        self.context = context
    }

    @inline(__always)
    func table(_ side: Int) -> EntityTable { context.tables[link.entities[side]] }

    // MARK: Reading

    /// The length of `row`'s raw list on `side`.
    @inline(__always)
    func listCount(_ side: Int, _ row: Int) -> Int {
        guard row < heads[side].count else { return 0 }
        let h = heads[side][row]
        return h.count >= 0 ? Int(h.count) : owned[side][Int(-h.count - 1)].count
    }

    /// The raw list of `row` on `side`, members not visible included.
    @inline(__always)
    func members(_ side: Int, _ row: Int) -> [Int32] {
        guard row < heads[side].count else { return [] }
        let h = heads[side][row]
        if h.count < 0 { return owned[side][Int(-h.count - 1)].array }
        if h.count == 0 { return [] }
        return Array(flat[side][Int(h.start)..<Int(h.start + h.count)])
    }

    /// The rows related to `row` on `side` that are visible (not deleted, not vanished), in the
    /// list's order.
    func visibleMembers(_ side: Int, _ row: Int) -> [Int] {
        let other = table(1 - side)
        var result: [Int] = []
        let list = members(side, row)
        result.reserveCapacity(list.count)
        for m in list where other.isVisible(row: Int(m)) { result.append(Int(m)) }
        return result
    }

    /// Whether the visible members of `row`'s list on `side` are exactly `targets` (distinct
    /// rows), in that order when `ordered`: ``visibleMembers(_:_:)`` compared without building
    /// it, the list read where it lies. A resync asks this of every object it connects again.
    func visibleMembersAre(_ side: Int, _ row: Int, _ targets: [Int], ordered: Bool) -> Bool {
        guard row < heads[side].count else { return targets.isEmpty }
        let h = heads[side][row]
        if h.count == 0 { return targets.isEmpty }
        let other = table(1 - side)
        func compare(_ list: UnsafeBufferPointer<Int32>) -> Bool {
            var visible = 0
            for m in list where other.isVisible(row: Int(m)) {
                if ordered {
                    guard visible < targets.count, targets[visible] == Int(m) else { return false }
                } else if !targets.contains(Int(m)) {
                    return false
                }
                visible += 1
            }
            // As many visible members as targets, each one a target: the same rows, since a list
            // holds each member once (a repeated pair is refused wherever links are made).
            return visible == targets.count
        }
        if h.count < 0 { return members(side, row).withUnsafeBufferPointer(compare) }
        return flat[side].withUnsafeBufferPointer { all in
            compare(UnsafeBufferPointer(rebasing: all[Int(h.start)..<Int(h.start + h.count)]))
        }
    }

    /// The position of `member` in `owner`'s list on `side`, if it is there.
    func position(of member: Int32, side: Int, owner: Int) -> Int? {
        guard owner < heads[side].count else { return nil }
        let h = heads[side][owner]
        if h.count < 0 { return owned[side][Int(-h.count - 1)].position(of: member) }
        var i = Int(h.start)
        let end = i + Int(h.count)
        while i < end {
            if flat[side][i] == member { return i - Int(h.start) }
            i += 1
        }
        return nil
    }

    /// Whether rows `a` (side 0) and `b` (side 1) are linked; looks in the shorter list.
    func contains(_ a: Int, _ b: Int) -> Bool {
        if listCount(0, a) <= listCount(1, b) {
            return position(of: Int32(b), side: 0, owner: a) != nil
        }
        return position(of: Int32(a), side: 1, owner: b) != nil
    }

    /// Every row of `side` that has a non-empty list.
    func rowsWithLinks(_ side: Int) -> [Int] {
        (0..<heads[side].count).filter { heads[side][$0].count != 0 }
    }

    // MARK: Changing

    /// Links rows `a` (side 0) and `b` (side 1), placing each at `atA` / `atB` in the other's
    /// list when that side is ordered (the end when `nil` or past it). On a to-one side the
    /// row's previous link is removed first. Returns `false` (and changes nothing) when they
    /// are linked already.
    @discardableResult
    func link(_ a: Int, _ b: Int, atA: Int? = nil, atB: Int? = nil) -> Bool {
        if contains(a, b) { return false }
        if link.toOne[0] { for old in members(0, a) { unlink(a, Int(old)) } }
        if link.toOne[1] { for old in members(1, b) { unlink(Int(old), b) } }
        let posA = insert(Int32(b), side: 0, owner: a, at: atA)
        let posB = insert(Int32(a), side: 1, owner: b, at: atB)
        count += 1
        if tracking {
            log.append(LinkChange(kind: .link, a: Int32(a), b: Int32(b), posA: Int32(posA), posB: Int32(posB)))
        }
        return true
    }

    /// Unlinks rows `a` and `b`. Returns `false` when they were not linked.
    @discardableResult
    func unlink(_ a: Int, _ b: Int) -> Bool {
        guard let posA = remove(Int32(b), side: 0, owner: a) else { return false }
        let posB = remove(Int32(a), side: 1, owner: b) ?? 0
        count -= 1
        if tracking {
            log.append(LinkChange(kind: .unlink, a: Int32(a), b: Int32(b), posA: Int32(posA), posB: Int32(posB)))
        }
        return true
    }

    /// Moves the member at `from` in `owner`'s ordered list on `side` to `to` (both positions in
    /// the raw list, `to` counted after the removal). Returns `false` when nothing moved.
    @discardableResult
    func move(side: Int, owner: Int, from: Int, to: Int) -> Bool {
        guard from != to else { return false }
        let n = listCount(side, owner)
        guard from >= 0, from < n, to >= 0, to < n else { return false }
        let o = ownedIndex(side, owner)
        let m = owned[side][o][from]
        owned[side][o].move(from: from, to: to)
        if tracking {
            let (a, b) = side == 0 ? (Int32(owner), m) : (m, Int32(owner))
            log.append(LinkChange(kind: side == 0 ? .move0 : .move1, a: a, b: b, posA: Int32(from), posB: Int32(to)))
        }
        return true
    }

    /// Makes `row`'s list on `side` hold exactly `wanted` (rows of the other side, visible, no
    /// duplicates), in that order when the side is ordered: members that leave are unlinked,
    /// new ones linked, and an ordered list is then rearranged with the fewest moves: the
    /// members outside a longest run already in order each move to just after the member that
    /// precedes them in `wanted`.
    func setMembers(_ side: Int, _ row: Int, to wanted: [Int]) {
        let current = visibleMembers(side, row)
        if !current.isEmpty {
            let wantedSet = Set(wanted)
            for m in current where !wantedSet.contains(m) { _ = side == 0 ? unlink(row, m) : unlink(m, row) }
        }
        for m in wanted { _ = side == 0 ? link(row, m) : link(m, row) }
        if current.isEmpty { return }  // appended in `wanted`'s order
        guard link.ordered[side] else { return }
        let now = visibleMembers(side, row)
        guard now != wanted else { return }
        let wantedRows = wanted.map { Int32($0) }
        // Each member placed, in `wanted`'s order, lands right after its predecessor there,
        // which is either in the run left in place or placed already.
        for (member, index) in Self.placements(from: now.map { Int32($0) }, to: wantedRows) {
            guard let from = position(of: member, side: side, owner: row) else { continue }
            var to = 0
            if index > 0, let previous = position(of: wantedRows[index - 1], side: side, owner: row) {
                to = from < previous ? previous : previous + 1
            }
            if from != to { move(side: side, owner: row, from: from, to: to) }
        }
    }

    /// Links many pairs at once, as a replay does, without logging. Returns the first pair that
    /// is linked already or that a to-one side refuses (then the pairs before it are linked and
    /// the rest are not), or nil.
    ///
    /// Into a table with no links (a store's first record with links, typically a
    /// compaction's), the pairs go straight into the flat arrays: side 0's members are the
    /// runs' members as they are, side 1's are counted, then placed, with no allocation per
    /// object. A duplicate pair is caught by one stamp per side-1 row while each side-0 object
    /// has one run (a compaction and a save write them so); otherwise, and into a table that
    /// has links, each pair is linked on its own.
    func linkMany(_ runs: LinkRuns) -> (Int32, Int32)? {
        if count == 0, runs.members.count >= 256, heads[0].allSatisfy({ $0.count == 0 }) {
            return buildFlat(runs)
        }
        return linkOneByOne(runs)
    }

    private func linkOneByOne(_ runs: LinkRuns) -> (Int32, Int32)? {
        var failed: (Int32, Int32)?
        runs.forEachPair { a, b in
            if linkStrictly(a, b) { return true }
            failed = (a, b)
            return false
        }
        return failed
    }

    /// Links a replayed pair, refusing (returning false) a pair linked already and one whose
    /// to-one side holds a link: a journal removes a to-one's link before it adds another.
    private func linkStrictly(_ a: Int32, _ b: Int32) -> Bool {
        if link.toOne[0] && listCount(0, Int(a)) > 0 { return false }
        if link.toOne[1] && listCount(1, Int(b)) > 0 { return false }
        return link(Int(a), Int(b))
    }

    /// Fills the flat arrays of an empty table with `runs`; returns the first refused pair, as
    /// ``linkMany(_:)`` does (the pairs before it linked one by one, the general path's
    /// outcome), or nil. Runs that repeat a side-0 object are linked one by one.
    private func buildFlat(_ runs: LinkRuns) -> (Int32, Int32)? {
        let rows0 = table(0).rowCount, rows1 = table(1).rowCount
        // Side 0's lists are the runs' members as they stand; side 1's lists are counted
        // first, then placed.
        var h0 = [LinkHead](repeating: LinkHead(), count: rows0)
        var h1 = [LinkHead](repeating: LinkHead(), count: rows1)
        var start = Int32(0)
        for (a, end) in zip(runs.rows, runs.ends) {
            // A side-0 object in two runs, or a to-one side-0 object with two members.
            guard h0[Int(a)].count == 0, !link.toOne[0] || end - start == 1 else { return linkOneByOne(runs) }
            h0[Int(a)] = LinkHead(start: start, count: end - start)
            start = end
        }
        for b in runs.members { h1[Int(b)].count += 1 }
        var next = Int32(0)
        for r in 0..<rows1 where h1[r].count > 0 {
            let n = h1[r].count
            // A to-one side-1 object with two links.
            if link.toOne[1] && n > 1 { return linkOneByOne(runs) }
            h1[r] = LinkHead(start: next, count: 0)
            next += n
        }
        // Side 1's list of `b` ends with the side-0 object placed last: within a run, a side-1
        // row placed twice is a repeated pair. Every entry is written once (unless a repeat
        // stops the placing, and then the array is dropped), so it starts uninitialized.
        var duplicate: (Int32, Int32)?
        let f1 = [Int32](unsafeUninitializedCapacity: runs.members.count) { f1, initialized in
            var start = 0
            placing: for (a, end) in zip(runs.rows, runs.ends) {
                for i in start..<Int(end) {
                    let b = Int(runs.members[i])
                    let end1 = Int(h1[b].start + h1[b].count)
                    if h1[b].count > 0, f1[end1 - 1] == a {
                        duplicate = (a, Int32(b))
                        break placing
                    }
                    f1[end1] = a
                    h1[b].count += 1
                }
                start = Int(end)
            }
            if duplicate != nil { f1.initialize(repeating: 0) }
            initialized = f1.count
        }
        if let duplicate {
            // The general path's outcome: the pairs before the repeat linked, one by one.
            runs.forEachPair { a, b in
                if a == duplicate.0 && b == duplicate.1 && contains(Int(a), Int(b)) { return false }
                _ = link(Int(a), Int(b))
                return true
            }
            return duplicate
        }
        heads = [h0, h1]
        flat = [runs.members, f1]
        owned = [[], []]
        freeOwned = [[], []]
        flatGarbage = [0, 0]
        count = runs.members.count
        return nil
    }

    /// Whether ``linkFresh(side:_:)`` can fill this table: it holds no link and has no pending
    /// change, and neither side is a to-one (a to-one member named by two owners must move,
    /// which only the one-by-one path does).
    var acceptsFreshLists: Bool {
        count == 0 && log.isEmpty && !link.toOne[0] && !link.toOne[1]
            && heads[0].allSatisfy({ $0.count == 0 }) && heads[1].allSatisfy({ $0.count == 0 })
    }

    /// Sets the lists of many objects of `side` at once in a table that holds no link
    /// (``acceptsFreshLists``), logged as the pending transaction's links exactly as calling
    /// ``setMembers(_:_:to:)`` for each run in turn would log them: the same pairs, in the same
    /// order, at the same positions. Each run's owner must appear once and its members be
    /// distinct rows of the other side; otherwise, or when the table is not empty, the runs
    /// are set one by one.
    ///
    /// A first sync's connection (a package's dependencies, by name) links each object once
    /// into an empty table: one by one, every member's list becomes a list of its own, grown
    /// one member at a time. Here the lists go straight into the flat arrays, as a replay's do.
    func linkFresh(side: Int, _ runs: LinkRuns) {
        guard acceptsFreshLists, runs.members.count >= 256, let built = freshFlat(side: side, runs) else {
            var start = 0
            for (owner, end) in zip(runs.rows, runs.ends) {
                setMembers(side, Int(owner), to: runs.members[start..<Int(end)].map(Int.init))
                start = Int(end)
            }
            return
        }
        heads = built.heads
        flat = built.flat
        owned = [[], []]
        freeOwned = [[], []]
        flatGarbage = [0, 0]
        count = runs.members.count
        if tracking { log = built.log }
    }

    /// The heads, flat arrays and log of ``linkFresh(side:_:)``; nil when an owner repeats or a
    /// run repeats a member.
    private func freshFlat(side: Int, _ runs: LinkRuns) -> (heads: [[LinkHead]], flat: [[Int32]], log: [LinkChange])? {
        let other = 1 - side
        var hOwners = [LinkHead](repeating: LinkHead(), count: table(side).rowCount)
        var hMembers = [LinkHead](repeating: LinkHead(), count: table(other).rowCount)
        var start = Int32(0)
        for (owner, end) in zip(runs.rows, runs.ends) {
            guard Int(owner) < hOwners.count, hOwners[Int(owner)].count == 0 else { return nil }
            hOwners[Int(owner)] = LinkHead(start: start, count: end - start)
            start = end
        }
        for m in runs.members {
            guard m >= 0, Int(m) < hMembers.count else { return nil }
            hMembers[Int(m)].count += 1
        }
        var next = Int32(0)
        for r in hMembers.indices where hMembers[r].count > 0 {
            let n = hMembers[r].count
            hMembers[r] = LinkHead(start: next, count: 0)
            next += n
        }
        var memberFlat = [Int32](repeating: 0, count: runs.members.count)
        var log: [LinkChange] = []
        if tracking { log.reserveCapacity(runs.members.count) }
        var first = 0
        for (owner, end) in zip(runs.rows, runs.ends) {
            for i in first..<Int(end) {
                let m = Int(runs.members[i])
                let h = hMembers[m]
                // Members are placed owner by owner: a member whose list ends with this owner
                // was named twice in its run.
                if h.count > 0, memberFlat[Int(h.start + h.count) - 1] == owner { return nil }
                memberFlat[Int(h.start + h.count)] = owner
                hMembers[m].count += 1
                guard tracking else { continue }
                let ownerPosition = Int32(i - first)
                log.append(
                    side == 0
                        ? LinkChange(kind: .link, a: owner, b: Int32(m), posA: ownerPosition, posB: h.count)
                        : LinkChange(kind: .link, a: Int32(m), b: owner, posA: h.count, posB: ownerPosition))
            }
            first = Int(end)
        }
        var heads: [[LinkHead]] = [[], []]
        var flat: [[Int32]] = [[], []]
        heads[side] = hOwners
        heads[other] = hMembers
        flat[side] = runs.members
        flat[other] = memberFlat
        return (heads, flat, log)
    }

    /// Applies a journal's order edit to `row`'s ordered list on `side`: takes the `placing`
    /// members out, then puts each back at its index, in the given (ascending) order. Not
    /// logged. Returns `false`, changing nothing, when a member is not in the list or an index
    /// is past the end.
    func reorder(_ side: Int, _ row: Int, placing: [(Int32, Int)]) -> Bool {
        guard row < heads[side].count else { return placing.isEmpty }
        let moving = Set(placing.map(\.0))
        var list = members(side, row)
        let before = list.count
        list.removeAll { moving.contains($0) }
        guard before - list.count == placing.count, moving.count == placing.count else { return false }
        for (member, index) in placing {
            guard index <= list.count else { return false }
            list.insert(member, at: index)
        }
        owned[side][ownedIndex(side, row)].replace(with: list, ordered: link.ordered[side])
        return true
    }

    /// ``reorder(_:_:placing:)`` as logged moves (a change set applied as a transaction, which
    /// a failure rolls back): each placed member moves to the end, then to its index. Indexes
    /// count visible members only: members deleted in the same transaction are still in the
    /// list until it commits.
    func reorderLogged(_ side: Int, _ row: Int, placing: [(Int32, Int)]) -> Bool {
        guard row < heads[side].count else { return placing.isEmpty }
        let placed = Set(placing.map(\.0))
        guard placed.count == placing.count else { return false }
        for (member, _) in placing {
            guard let from = position(of: member, side: side, owner: row) else { return false }
            move(side: side, owner: row, from: from, to: listCount(side, row) - 1)
        }
        let other = table(1 - side)
        var waiting = placed
        for (member, index) in placing {
            // The raw position of the `index`-th visible member not waiting at the tail.
            let list = members(side, row)
            var seen = 0
            var target = list.count
            for (i, m) in list.enumerated() where !waiting.contains(m) && other.isVisible(row: Int(m)) {
                if seen == index { target = i; break }
                seen += 1
            }
            guard seen == index || target < list.count, let from = position(of: member, side: side, owner: row) else {
                return false
            }
            if target == list.count { target = list.count - waiting.count }
            if from != target { move(side: side, owner: row, from: from, to: target) }
            waiting.remove(member)
        }
        return true
    }

    /// Takes `row` out of every list, without logging: the row is being freed (its object's
    /// deletion was saved or replayed, or it never existed past a rollback).
    func drop(_ side: Int, _ row: Int) {
        guard row < heads[side].count, heads[side][row].count != 0 else { return }
        for m in members(side, row) {
            _ = remove(Int32(row), side: 1 - side, owner: Int(m))
            count -= 1
            if collectsTouched { touched[1 - side].insert(m) }
        }
        release(side, row)
    }

    /// Empties `row`'s head on `side`, freeing its own list or its flat slice.
    private func release(_ side: Int, _ row: Int) {
        let h = heads[side][row]
        if h.count < 0 {
            let o = Int(-h.count - 1)
            owned[side][o] = LinkList(ordered: link.ordered[side])
            freeOwned[side].append(Int32(o))
        } else {
            flatGarbage[side] += Int(h.count)
        }
        heads[side][row] = LinkHead()
    }

    /// The number of `row`'s own list on `side`, made from its flat slice if it has none yet.
    @inline(__always)
    private func ownedIndex(_ side: Int, _ row: Int) -> Int {
        if row >= heads[side].count {
            heads[side].append(
                contentsOf: repeatElement(LinkHead(), count: max(row + 1, table(side).rowCount) - heads[side].count))
        }
        let h = heads[side][row]
        if h.count < 0 { return Int(-h.count - 1) }
        var list = LinkList(ordered: link.ordered[side])
        if h.count > 0 {
            list.replace(with: Array(flat[side][Int(h.start)..<Int(h.start + h.count)]), ordered: link.ordered[side])
            flatGarbage[side] += Int(h.count)
        }
        let o: Int
        if let free = freeOwned[side].popLast() {
            o = Int(free)
            owned[side][o] = list
        } else {
            o = owned[side].count
            owned[side].append(list)
        }
        heads[side][row] = LinkHead(start: 0, count: Int32(-o - 1))
        return o
    }

    /// Puts `member` into `owner`'s list: at `position` on an ordered side, else at the end.
    /// Returns where it went.
    private func insert(_ member: Int32, side: Int, owner: Int, at position: Int?) -> Int {
        let o = ownedIndex(side, owner)
        let n = owned[side][o].count
        if link.ordered[side], let position, position < n {
            if tracking { midInserted[side] = true }
            owned[side][o].insert(member, at: max(0, position))
            return max(0, position)
        }
        owned[side][o].append(member, ordered: link.ordered[side])
        return n
    }

    /// Takes `member` out of `owner`'s list and returns where it was; `nil` when absent.
    private func remove(_ member: Int32, side: Int, owner: Int) -> Int? {
        guard owner < heads[side].count else { return nil }
        let h = heads[side][owner]
        if h.count < 0 { return owned[side][Int(-h.count - 1)].remove(member, ordered: link.ordered[side]) }
        // A flat list is searched where it is: only a member found makes the list its own.
        guard let i = position(of: member, side: side, owner: owner) else { return nil }
        let o = ownedIndex(side, owner)
        if link.ordered[side] {
            _ = owned[side][o].remove(at: i)
            return i
        }
        return owned[side][o].remove(member, ordered: false)
    }

    /// Folds the own lists back into the flat arrays when they hold a quarter of the links or
    /// more, or the flat arrays are mostly garbage (after a save or an open; never while
    /// changes are pending, whose log names positions in the lists, which folding keeps).
    func flattenIfWorthIt() {
        guard log.isEmpty else { return }
        for side in 0..<2 {
            let ownedLists = owned[side].count - freeOwned[side].count
            guard ownedLists >= 1024 || flatGarbage[side] >= 1 << 16 else { continue }
            let ownedMembers = count - (flat[side].count - flatGarbage[side])
            guard ownedMembers * 4 >= count || flatGarbage[side] * 2 >= flat[side].count else { continue }
            flatten(side)
        }
    }

    /// Rebuilds `side`'s flat array from every list, in row order, and drops the own lists,
    /// except chunked ones: a long ordered list taken out of its chunks would cost its next
    /// change O(n) again.
    func flatten(_ side: Int) {
        var total = 0
        for row in 0..<heads[side].count { total += listCount(side, row) }
        var fresh: [Int32] = []
        fresh.reserveCapacity(total)
        var kept: [LinkList] = []
        for row in 0..<heads[side].count {
            let h = heads[side][row]
            if h.count == 0 { continue }
            let start = fresh.count
            if h.count < 0 {
                let list = owned[side][Int(-h.count - 1)]
                if list.isChunked {
                    heads[side][row] = LinkHead(start: 0, count: Int32(-kept.count - 1))
                    kept.append(list)
                    continue
                }
                fresh.append(contentsOf: list.array)
            } else {
                fresh.append(contentsOf: flat[side][Int(h.start)..<Int(h.start + h.count)])
            }
            let n = fresh.count - start
            heads[side][row] = n == 0 ? LinkHead() : LinkHead(start: Int32(start), count: Int32(n))
        }
        flat[side] = fresh
        owned[side] = kept
        freeOwned[side] = []
        flatGarbage[side] = 0
    }

    // MARK: Transactions

    /// Whether the pending transaction changed any link or order: a pair linked and unlinked
    /// again, or a member moved back, is no change (as an attribute set back to its saved
    /// value). With additions only (a bulk build), the first pair whose objects both outlive
    /// the save answers; otherwise the net change is worked out.
    var hasChanges: Bool {
        if log.isEmpty { return false }
        if !log.contains(where: { $0.kind != .link }) {
            let t0 = table(0), t1 = table(1)
            return log.contains { t0.isVisible(row: Int($0.a)) && t1.isVisible(row: Int($0.b)) }
        }
        return !pendingBlock().isEmpty
    }

    func beginSavepoint() { marks.append(log.count) }

    func releaseSavepoint() { _ = marks.popLast() }

    func rollbackToSavepoint() {
        guard let mark = marks.popLast() else { return }
        undo(to: mark)
    }

    func rollback() {
        undo(to: 0)
        marks.removeAll()
        midInserted = [false, false]
    }

    /// The save made the pending changes the committed state.
    func commit() {
        if collectsTouched {
            for c in log {
                touched[0].insert(c.a)
                touched[1].insert(c.b)
            }
        }
        log.removeAll()
        marks.removeAll()
        midInserted = [false, false]
        flattenIfWorthIt()
    }

    /// Undoes the logged changes after the first `mark`, newest first.
    private func undo(to mark: Int) {
        let wasTracking = tracking
        tracking = false
        defer { tracking = wasTracking }
        while log.count > mark, let c = log.popLast() {
            let a = Int(c.a), b = Int(c.b)
            switch c.kind {
            case .link:
                takeOut(c.b, side: 0, owner: a, at: Int(c.posA))
                takeOut(c.a, side: 1, owner: b, at: Int(c.posB))
                count -= 1
            case .unlink:
                _ = insert(c.b, side: 0, owner: a, at: link.ordered[0] ? Int(c.posA) : nil)
                _ = insert(c.a, side: 1, owner: b, at: link.ordered[1] ? Int(c.posB) : nil)
                count += 1
            case .move0:
                owned[0][ownedIndex(0, a)].move(from: Int(c.posB), to: Int(c.posA))
            case .move1:
                owned[1][ownedIndex(1, b)].move(from: Int(c.posB), to: Int(c.posA))
            }
        }
    }

    /// Removes `member` from an ordered list at `position` where it was put, or by value.
    private func takeOut(_ member: Int32, side: Int, owner: Int, at position: Int) {
        if link.ordered[side], position < listCount(side, owner) {
            let o = ownedIndex(side, owner)
            if owned[side][o][position] == member {
                _ = owned[side][o].remove(at: position)
                return
            }
        }
        do {
            _ = remove(member, side: side, owner: owner)
        }
    }

    // MARK: The committed state

    /// The log entries that touched `row`'s list on `side`, oldest first.
    private func changes(side: Int, row: Int) -> [LinkChange] {
        let r = Int32(row)
        return log.filter { c in
            switch c.kind {
            case .link, .unlink: return side == 0 ? c.a == r : c.b == r
            case .move0: return side == 0 && c.a == r
            case .move1: return side == 1 && c.b == r
            }
        }
    }

    /// `row`'s list on `side` as the last save left it (raw: members deleted since included).
    func committedMembers(_ side: Int, _ row: Int) -> [Int32] {
        committedMembers(side, row, changes: changes(side: side, row: row))
    }

    /// ``committedMembers(_:_:)`` given the log entries touching that list.
    func committedMembers(_ side: Int, _ row: Int, changes: [LinkChange]) -> [Int32] {
        var list = members(side, row)
        guard !changes.isEmpty else { return list }
        let ordered = link.ordered[side]
        for c in changes.reversed() {
            let member = side == 0 ? c.b : c.a
            let pos = Int(side == 0 ? c.posA : c.posB)
            switch c.kind {
            case .link:
                if ordered, pos < list.count, list[pos] == member {
                    list.remove(at: pos)
                } else if let i = list.firstIndex(of: member) {
                    list.remove(at: i)
                }
            case .unlink:
                if ordered { list.insert(member, at: min(pos, list.count)) } else { list.append(member) }
            case .move0, .move1:
                let m = list.remove(at: Int(c.posB))
                list.insert(m, at: Int(c.posA))
            }
        }
        return list
    }

    /// The rows whose list on `side` the pending transaction changed, in first-change order.
    func changedOwners(_ side: Int) -> [Int] {
        var seen = Set<Int32>()
        var result: [Int] = []
        for c in log {
            let r: Int32
            switch c.kind {
            case .link, .unlink: r = side == 0 ? c.a : c.b
            case .move0: guard side == 0 else { continue }; r = c.a
            case .move1: guard side == 1 else { continue }; r = c.b
            }
            if seen.insert(r).inserted { result.append(Int(r)) }
        }
        return result
    }
}
