// Relationships stored as links: many-to-many relationships, and ordered to-manys with their
// to-one inverse (Docs/Relationships.md).

/// One object's list on one side of a link table: the rows of the related objects on the other
/// side, in order for an ordered side, in no particular order otherwise.
///
/// An unordered list of 64 members or more also keeps each member's position, so that finding
/// and removing one member is O(1) whatever the list's length (a swap with the last member);
/// shorter lists are scanned. An ordered list is an array: removing or moving a member shifts
/// the ones after it.
struct LinkList {
    var members: [Int32] = []
    var positions: [Int32: Int32]?

    static let indexedFrom = 64
    static let unindexedBelow = 32
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
/// each side's entity, its ``LinkList``; and the pending transaction's changes, in order, which
/// rollback (to the last save or to a savepoint) undoes and a save encodes.
///
/// A link joins two rows. Deleting an object does not touch its links: readers skip members
/// that are not visible (deleted or vanished), and the links go when the row is freed (save or
/// replay; see ``EntityTable/releaseRow(_:)``). So rolling back a delete brings its links
/// back, and a save's journal record leaves the links of deleted objects implicit.
///
/// Memory: 4 bytes per member on each side (8 per link), plus one array per object with links
/// on each side; a list of 64 members or more adds its position index.
final class LinkTable {
    let index: Int
    let link: ResolvedLink
    unowned let context: ModelContext
    @exclusivity(unchecked) var lists: [[LinkList]] = [[], []]
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

    /// The raw list of `row` on `side`, members not visible included.
    @inline(__always)
    func members(_ side: Int, _ row: Int) -> [Int32] {
        row < lists[side].count ? lists[side][row].members : []
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

    /// The position of `member` in `owner`'s list on `side`, if it is there.
    func position(of member: Int32, side: Int, owner: Int) -> Int? {
        guard owner < lists[side].count else { return nil }
        if let p = lists[side][owner].positions { return p[member].map(Int.init) }
        return lists[side][owner].members.firstIndex(of: member)
    }

    /// Whether rows `a` (side 0) and `b` (side 1) are linked; looks in the shorter list.
    func contains(_ a: Int, _ b: Int) -> Bool {
        if members(0, a).count <= members(1, b).count {
            return position(of: Int32(b), side: 0, owner: a) != nil
        }
        return position(of: Int32(a), side: 1, owner: b) != nil
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
        if tracking { log.append(LinkChange(kind: .link, a: Int32(a), b: Int32(b), posA: Int32(posA), posB: Int32(posB))) }
        return true
    }

    /// Unlinks rows `a` and `b`. Returns `false` when they were not linked.
    @discardableResult
    func unlink(_ a: Int, _ b: Int) -> Bool {
        guard let posA = remove(Int32(b), side: 0, owner: a) else { return false }
        let posB = remove(Int32(a), side: 1, owner: b) ?? 0
        count -= 1
        if tracking { log.append(LinkChange(kind: .unlink, a: Int32(a), b: Int32(b), posA: Int32(posA), posB: Int32(posB))) }
        return true
    }

    /// Moves the member at `from` in `owner`'s ordered list on `side` to `to` (both positions in
    /// the raw list, `to` counted after the removal). Returns `false` when nothing moved.
    @discardableResult
    func move(side: Int, owner: Int, from: Int, to: Int) -> Bool {
        guard owner < lists[side].count, from != to else { return false }
        let n = lists[side][owner].members.count
        guard from >= 0, from < n, to >= 0, to < n else { return false }
        let m = lists[side][owner].members.remove(at: from)
        lists[side][owner].members.insert(m, at: to)
        if tracking {
            let (a, b) = side == 0 ? (Int32(owner), m) : (m, Int32(owner))
            log.append(LinkChange(kind: side == 0 ? .move0 : .move1, a: a, b: b, posA: Int32(from), posB: Int32(to)))
        }
        return true
    }

    /// Makes `row`'s list on `side` hold exactly `wanted` (rows of the other side, visible, no
    /// duplicates), in that order when the side is ordered: members that leave are unlinked,
    /// new ones linked, and an ordered list is then rearranged with the fewest moves.
    func setMembers(_ side: Int, _ row: Int, to wanted: [Int]) {
        let current = visibleMembers(side, row)
        let wantedSet = Set(wanted)
        for m in current where !wantedSet.contains(m) { _ = side == 0 ? unlink(row, m) : unlink(m, row) }
        for m in wanted { _ = side == 0 ? link(row, m) : link(m, row) }
        guard link.ordered[side], visibleMembers(side, row) != wanted else { return }
        // Visible members are now exactly `wanted`; move each into place, front to back.
        let other = table(1 - side)
        for (target, m) in wanted.enumerated() {
            // The raw position of the `target`-th visible member.
            var seen = 0
            var rawTarget = 0
            for (i, x) in members(side, row).enumerated() where other.isVisible(row: Int(x)) {
                if seen == target { rawTarget = i; break }
                seen += 1
            }
            if let from = position(of: Int32(m), side: side, owner: row), from != rawTarget {
                move(side: side, owner: row, from: from, to: rawTarget)
            }
        }
    }

    /// Links many pairs (rows: side 0, side 1) at once, as a replay does, without logging:
    /// each list grows once to its final size. Returns the first pair that is linked already
    /// (then the pairs before it are linked and the rest are not), or nil.
    ///
    /// A pair is checked against the lists by position lookups only when one of its lists
    /// held members before the batch or the batch stops listing side 0's pairs grouped by
    /// object (a compaction writes them grouped); otherwise a duplicate can only be a repeat
    /// within its object's run, which one stamp per side-1 row catches.
    func linkMany(_ pairs: [(Int32, Int32)]) -> (Int32, Int32)? {
        if link.toOne[0] || link.toOne[1] || pairs.count < 256 {
            for (a, b) in pairs where !link(Int(a), Int(b)) { return (a, b) }
            return nil
        }
        let rows0 = table(0).rowCount, rows1 = table(1).rowCount
        if lists[0].count < rows0 { lists[0].append(contentsOf: repeatElement(LinkList(), count: rows0 - lists[0].count)) }
        if lists[1].count < rows1 { lists[1].append(contentsOf: repeatElement(LinkList(), count: rows1 - lists[1].count)) }
        var added0 = [Int32](repeating: 0, count: lists[0].count)
        var added1 = [Int32](repeating: 0, count: lists[1].count)
        for (a, b) in pairs {
            added0[Int(a)] += 1
            added1[Int(b)] += 1
        }
        // Rows whose list was not empty before: their pairs are checked by lookup.
        var prior0 = [Bool](repeating: false, count: lists[0].count)
        var prior1 = [Bool](repeating: false, count: lists[1].count)
        for row in 0..<lists[0].count where added0[row] > 0 {
            let n = lists[0][row].members.count
            prior0[row] = n > 0
            lists[0][row].members.reserveCapacity(n + Int(added0[row]))
        }
        for row in 0..<lists[1].count where added1[row] > 0 {
            let n = lists[1][row].members.count
            prior1[row] = n > 0
            lists[1][row].members.reserveCapacity(n + Int(added1[row]))
        }
        var lastOwner = [Int32](repeating: -1, count: lists[1].count)
        var started = [Bool](repeating: false, count: lists[0].count)
        var grouped = true
        var previous: Int32 = -1
        for (a, b) in pairs {
            if a != previous {
                if started[Int(a)] { grouped = false }
                started[Int(a)] = true
                previous = a
            }
            let duplicate = grouped && !prior0[Int(a)] && !prior1[Int(b)] ? lastOwner[Int(b)] == a : contains(Int(a), Int(b))
            if duplicate { return (a, b) }
            lastOwner[Int(b)] = a
            _ = insert(b, side: 0, owner: Int(a), at: nil)
            _ = insert(a, side: 1, owner: Int(b), at: nil)
            count += 1
        }
        return nil
    }

    /// Applies a journal's order edit to `row`'s ordered list on `side`: takes the `placing`
    /// members out, then puts each back at its index, in the given (ascending) order. Not
    /// logged. Returns `false`, changing nothing, when a member is not in the list or an index
    /// is past the end.
    func reorder(_ side: Int, _ row: Int, placing: [(Int32, Int)]) -> Bool {
        guard row < lists[side].count else { return placing.isEmpty }
        let moving = Set(placing.map(\.0))
        var list = lists[side][row].members
        let before = list.count
        list.removeAll { moving.contains($0) }
        guard before - list.count == placing.count, moving.count == placing.count else { return false }
        for (member, index) in placing {
            guard index <= list.count else { return false }
            list.insert(member, at: index)
        }
        lists[side][row].members = list
        return true
    }

    /// ``reorder(_:_:placing:)`` as logged moves (a change set applied as a transaction, which
    /// a failure rolls back): each placed member moves to the end, then to its index.
    func reorderLogged(_ side: Int, _ row: Int, placing: [(Int32, Int)]) -> Bool {
        guard row < lists[side].count else { return placing.isEmpty }
        guard Set(placing.map(\.0)).count == placing.count else { return false }
        for (member, _) in placing {
            guard let from = position(of: member, side: side, owner: row) else { return false }
            move(side: side, owner: row, from: from, to: lists[side][row].members.count - 1)
        }
        for (member, index) in placing {
            guard index < lists[side][row].members.count, let from = position(of: member, side: side, owner: row) else { return false }
            move(side: side, owner: row, from: from, to: index)
        }
        return true
    }

    /// Takes `row` out of every list, without logging: the row is being freed (its object's
    /// deletion was saved or replayed, or it never existed past a rollback).
    func drop(_ side: Int, _ row: Int) {
        guard row < lists[side].count, !lists[side][row].members.isEmpty else { return }
        for m in lists[side][row].members {
            _ = remove(Int32(row), side: 1 - side, owner: Int(m))
            count -= 1
            if collectsTouched { touched[1 - side].insert(m) }
        }
        lists[side][row] = LinkList()
    }

    @inline(__always)
    private func ensure(_ side: Int, _ row: Int) {
        if row >= lists[side].count {
            lists[side].append(contentsOf: repeatElement(LinkList(), count: max(row + 1, table(side).rowCount) - lists[side].count))
        }
    }

    /// Puts `member` into `owner`'s list: at `position` on an ordered side, else at the end.
    /// Returns where it went.
    private func insert(_ member: Int32, side: Int, owner: Int, at position: Int?) -> Int {
        ensure(side, owner)
        let n = lists[side][owner].members.count
        if link.ordered[side], let position, position < n {
            if tracking { midInserted[side] = true }
            lists[side][owner].members.insert(member, at: max(0, position))
            return max(0, position)
        }
        lists[side][owner].members.append(member)
        if lists[side][owner].positions != nil {
            lists[side][owner].positions![member] = Int32(n)
        } else if !link.ordered[side] && n + 1 >= LinkList.indexedFrom {
            var p: [Int32: Int32] = [:]
            p.reserveCapacity(n * 2)
            for (i, m) in lists[side][owner].members.enumerated() { p[m] = Int32(i) }
            lists[side][owner].positions = p
        }
        return n
    }

    /// Takes `member` out of `owner`'s list and returns where it was; `nil` when absent.
    private func remove(_ member: Int32, side: Int, owner: Int) -> Int? {
        guard let i = position(of: member, side: side, owner: owner) else { return nil }
        if link.ordered[side] {
            lists[side][owner].members.remove(at: i)
            return i
        }
        let last = lists[side][owner].members.removeLast()
        if i < lists[side][owner].members.count {
            lists[side][owner].members[i] = last
            lists[side][owner].positions?[last] = Int32(i)
        }
        if lists[side][owner].positions != nil {
            lists[side][owner].positions![member] = nil
            if lists[side][owner].members.count < LinkList.unindexedBelow { lists[side][owner].positions = nil }
        }
        return i
    }

    // MARK: Transactions

    var hasChanges: Bool { !log.isEmpty }

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
                let m = lists[0][a].members.remove(at: Int(c.posB))
                lists[0][a].members.insert(m, at: Int(c.posA))
            case .move1:
                let m = lists[1][b].members.remove(at: Int(c.posB))
                lists[1][b].members.insert(m, at: Int(c.posA))
            }
        }
    }

    /// Removes `member` from an ordered list at `position` where it was put, or by value.
    private func takeOut(_ member: Int32, side: Int, owner: Int, at position: Int) {
        if link.ordered[side], position < lists[side][owner].members.count, lists[side][owner].members[position] == member {
            lists[side][owner].members.remove(at: position)
        } else {
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
                if ordered, pos < list.count, list[pos] == member { list.remove(at: pos) } else if let i = list.firstIndex(of: member) { list.remove(at: i) }
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
