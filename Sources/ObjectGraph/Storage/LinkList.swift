// An object's own list of links (see LinkTable): a plain array for most lists; for a set side
// of 64 members or more, the array with each member's position; for an ordered side of 2048
// members or more, chunks, so that removing a member is O(log n) and not a shift of the whole
// list.

/// An object's list once a transaction changed it (see ``LinkTable``): the rows of the related
/// objects on the other side, in order for an ordered side, in no particular order otherwise.
///
/// - A set side's list of 64 members or more keeps each member's position: finding and
///   removing one member is O(1) whatever the list's length (a swap with the last member).
///   Shorter lists are scanned.
/// - An ordered side's list is an array below 2048 members: removing, inserting or moving a
///   member shifts the ones after it. From 2048 members it is a ``ChunkedList``: finding or
///   removing a member, and inserting or moving one, cost O(log n) plus a shift inside one
///   chunk of at most 1024 members.
struct LinkList {
    /// The members, when the list is not chunked.
    private(set) var plain: [Int32] = []
    /// A set side's position index, or a long ordered list's chunks (then ``plain`` is empty).
    /// One reference, so that a list is 16 bytes: a context holds one per object whose list a
    /// transaction changed, a million after a bulk build.
    private var extra: Extra?

    private enum Extra {
        /// Each member's position in ``plain``.
        case positions(Box<[Int32: Int32]>)
        case chunks(Box<ChunkedList>)
    }

    /// A value behind a reference (so that ``Extra`` is one word), copied on write.
    final class Box<Value> {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    static let indexedFrom = 64
    static let unindexedBelow = 32
    static let chunkedFrom = 2048
    static let unchunkedBelow = 512

    /// A list of `members`, in that order; `ordered` says which side it is on (the link table
    /// passes it to every call that depends on it).
    init(ordered: Bool, members: [Int32] = []) {
        replace(with: members, ordered: ordered)
    }

    /// The chunks' box, read in place (no copy of the chunked list for a read).
    private var chunkBox: Box<ChunkedList>? {
        if case .chunks(let b)? = extra { return b }
        return nil
    }

    private var positions: [Int32: Int32]? {
        if case .positions(let p)? = extra { return p.value }
        return nil
    }

    var count: Int { chunkBox?.value.count ?? plain.count }

    var isChunked: Bool { chunkBox != nil }

    /// The members, in order.
    var array: [Int32] { chunkBox?.value.array ?? plain }

    subscript(position: Int) -> Int32 { chunkBox?.value[position] ?? plain[position] }

    /// Makes the list hold `members`, in that order.
    mutating func replace(with members: [Int32], ordered: Bool) {
        extra = nil
        plain = members
        if ordered {
            if members.count >= Self.chunkedFrom {
                extra = .chunks(Box(ChunkedList(members)))
                plain = []
            }
        } else if members.count >= Self.indexedFrom {
            extra = .positions(Box(Self.positions(of: members)))
        }
    }

    /// The position of `member`, or nil. O(1) on an indexed set side, O(log n) plus a scan of
    /// one chunk on a chunked list (whose member index is built on first use), else a scan.
    mutating func position(of member: Int32) -> Int? {
        if isChunked { return withChunks { $0.position(of: member) } ?? nil }
        if let positions { return positions[member].map(Int.init) }
        return plain.firstIndex(of: member)
    }

    /// Adds `member` at the end.
    mutating func append(_ member: Int32, ordered: Bool) {
        if isChunked {
            withChunks { $0.insert(member, at: $0.count) }
            return
        }
        let n = plain.count
        plain.append(member)
        if withPositions({ $0[member] = Int32(n) }) {
            return
        } else if ordered {
            if n + 1 >= Self.chunkedFrom { replace(with: plain, ordered: true) }
        } else if n + 1 >= Self.indexedFrom {
            extra = .positions(Box(Self.positions(of: plain)))
        }
    }

    /// Inserts `member` at `position` of an ordered list (at most ``count``).
    mutating func insert(_ member: Int32, at position: Int) {
        if isChunked {
            withChunks { $0.insert(member, at: position) }
            return
        }
        plain.insert(member, at: position)
        if plain.count >= Self.chunkedFrom { replace(with: plain, ordered: true) }
    }

    /// Removes and returns the member at `position` of an ordered list.
    mutating func remove(at position: Int) -> Int32 {
        if let m = withChunks({ $0.remove(at: position) }) {
            shrinkIfShort()
            return m
        }
        return plain.remove(at: position)
    }

    /// Removes `member` and returns where it was; nil when it is not a member. An ordered list
    /// closes up; a set side's last member takes the removed one's place.
    mutating func remove(_ member: Int32, ordered: Bool) -> Int? {
        if isChunked {
            let p = withChunks { $0.remove(member) } ?? nil
            if p != nil { shrinkIfShort() }
            return p
        }
        guard let i = position(of: member) else { return nil }
        if ordered {
            plain.remove(at: i)
            return i
        }
        let last = plain.removeLast()
        let moved = i < plain.count
        if moved { plain[i] = last }
        _ = withPositions { p in
            if moved { p[last] = Int32(i) }
            p[member] = nil
        }
        if plain.count < Self.unindexedBelow { extra = nil }
        return i
    }

    /// Moves the member at `from` of an ordered list to `to` (counted after its removal).
    mutating func move(from: Int, to: Int) {
        let m = remove(at: from)
        insert(m, at: to)
    }

    /// Runs `body` on the chunks, copied first if another list shares them; nil when the list
    /// is not chunked.
    private mutating func withChunks<R>(_ body: (inout ChunkedList) -> R) -> R? {
        guard case .chunks(var b)? = extra else { return nil }
        extra = nil
        if !isKnownUniquelyReferenced(&b) { b = Box(b.value) }
        defer { extra = .chunks(b) }
        return body(&b.value)
    }

    /// Runs `body` on the position index, copied first if another list shares it; false when
    /// the list has none.
    private mutating func withPositions(_ body: (inout [Int32: Int32]) -> Void) -> Bool {
        guard case .positions(var b)? = extra else { return false }
        extra = nil
        if !isKnownUniquelyReferenced(&b) { b = Box(b.value) }
        body(&b.value)
        extra = .positions(b)
        return true
    }

    private mutating func shrinkIfShort() {
        if let box = chunkBox, box.value.count < Self.unchunkedBelow { replace(with: box.value.array, ordered: true) }
    }

    private static func positions(of members: [Int32]) -> [Int32: Int32] {
        var p: [Int32: Int32] = [:]
        p.reserveCapacity(members.count * 2)
        for (i, m) in members.enumerated() { p[m] = Int32(i) }
        return p
    }
}

/// A long ordered list in chunks of at most ``maximum`` members, with the chunks' lengths in a
/// Fenwick tree (so a position and the chunk holding it are found in O(log n)) and, once a
/// member is looked up, each member's chunk.
///
/// Costs, for n members in c chunks: finding a member's position O(log c) plus a scan of its
/// chunk; removing one, or inserting at a position, O(log c) plus a shift inside its chunk;
/// a chunk that outgrows ``maximum`` splits in two, and one that empties goes, which rebuilds
/// the O(c) chunk order and tree: at most once per ``target`` / 2 insertions or a chunk's
/// worth of removals. The member index (a dictionary) is built, in O(n), by the first lookup.
struct ChunkedList {
    static let target = 512
    static let maximum = 1024

    /// The chunks, by number; a chunk not in ``order`` is free.
    private var chunks: [[Int32]] = []
    /// The numbers of the chunks, in list order.
    private var order: [Int32] = []
    /// Per chunk number: its index in ``order`` (-1: free).
    private var rank: [Int32] = []
    /// The chunks' lengths in ``order``'s order, as a Fenwick tree (1-based).
    private var tree: [Int32] = [0]
    /// Each member's chunk number; built by the first lookup of a member.
    private var chunkOf: [Int32: Int32]?
    private var free: [Int32] = []
    private(set) var count = 0

    init(_ members: [Int32]) {
        rebuild(members)
    }

    /// The members, in order.
    var array: [Int32] {
        var result: [Int32] = []
        result.reserveCapacity(count)
        for id in order { result.append(contentsOf: chunks[Int(id)]) }
        return result
    }

    subscript(position: Int) -> Int32 {
        let (i, offset) = locate(position)
        return chunks[Int(order[i])][offset]
    }

    /// The position of `member`, or nil.
    mutating func position(of member: Int32) -> Int? {
        if chunkOf == nil { buildIndex() }
        guard let id = chunkOf?[member], let offset = chunks[Int(id)].firstIndex(of: member) else { return nil }
        return prefix(Int(rank[Int(id)])) + offset
    }

    /// Inserts `member` at `position` (at most ``count``).
    mutating func insert(_ member: Int32, at position: Int) {
        let i: Int, offset: Int
        if position >= count {
            i = order.count - 1
            offset = chunks[Int(order[i])].count
        } else {
            (i, offset) = locate(position)
        }
        let id = Int(order[i])
        chunks[id].insert(member, at: offset)
        chunkOf?[member] = Int32(id)
        count += 1
        add(i, 1)
        if chunks[id].count > Self.maximum { split(i) }
    }

    /// Removes and returns the member at `position`.
    mutating func remove(at position: Int) -> Int32 {
        let (i, offset) = locate(position)
        let id = Int(order[i])
        let member = chunks[id].remove(at: offset)
        chunkOf?[member] = nil
        removed(fromChunkAt: i)
        return member
    }

    /// Removes `member` and returns where it was, or nil when it is not a member.
    mutating func remove(_ member: Int32) -> Int? {
        if chunkOf == nil { buildIndex() }
        guard let id = chunkOf?[member], let offset = chunks[Int(id)].firstIndex(of: member) else { return nil }
        let i = Int(rank[Int(id)])
        let position = prefix(i) + offset
        chunks[Int(id)].remove(at: offset)
        chunkOf?[member] = nil
        removed(fromChunkAt: i)
        return position
    }

    // MARK: Chunks

    private mutating func rebuild(_ members: [Int32]) {
        chunks = stride(from: 0, to: max(members.count, 1), by: Self.target).map {
            Array(members[min($0, members.count)..<min($0 + Self.target, members.count)])
        }
        order = (0..<Int32(chunks.count)).map { $0 }
        rank = order
        free = []
        count = members.count
        chunkOf = nil
        rebuildTree()
    }

    private mutating func buildIndex() {
        var index: [Int32: Int32] = [:]
        index.reserveCapacity(count)
        for id in order { for m in chunks[Int(id)] { index[m] = id } }
        chunkOf = index
    }

    /// After a removal from the chunk at `i` of ``order``: counts it, and drops the chunk if it
    /// emptied (unless it is the only one).
    private mutating func removed(fromChunkAt i: Int) {
        count -= 1
        add(i, -1)
        let id = Int(order[i])
        guard chunks[id].isEmpty, order.count > 1 else { return }
        order.remove(at: i)
        rank[id] = -1
        free.append(Int32(id))
        renumber(from: i)
        rebuildTree()
    }

    /// Splits the chunk at `i` of ``order`` in two halves.
    private mutating func split(_ i: Int) {
        let id = Int(order[i])
        let half = chunks[id].count / 2
        let second = Array(chunks[id][half...])
        chunks[id].removeSubrange(half...)
        let newID: Int
        if let f = free.popLast() {
            newID = Int(f)
            chunks[newID] = second
        } else {
            newID = chunks.count
            chunks.append(second)
            rank.append(-1)
        }
        if chunkOf != nil { for m in second { chunkOf?[m] = Int32(newID) } }
        order.insert(Int32(newID), at: i + 1)
        renumber(from: i + 1)
        rebuildTree()
    }

    private mutating func renumber(from i: Int) {
        for j in i..<order.count { rank[Int(order[j])] = Int32(j) }
    }

    // MARK: The Fenwick tree of chunk lengths

    /// Builds the tree in O(c).
    private mutating func rebuildTree() {
        tree = [Int32](repeating: 0, count: order.count + 1)
        for (i, id) in order.enumerated() {
            let j = i + 1
            tree[j] += Int32(chunks[Int(id)].count)
            let parent = j + (j & -j)
            if parent < tree.count { tree[parent] += tree[j] }
        }
    }

    private mutating func add(_ i: Int, _ delta: Int32) {
        var j = i + 1
        while j < tree.count {
            tree[j] += delta
            j += j & -j
        }
    }

    /// The members in the chunks before the one at `i` of ``order``.
    private func prefix(_ i: Int) -> Int {
        var sum = 0
        var j = i
        while j > 0 {
            sum += Int(tree[j])
            j -= j & -j
        }
        return sum
    }

    /// The index in ``order`` of the chunk holding `position` (below ``count``), and the
    /// position's offset in it.
    private func locate(_ position: Int) -> (Int, Int) {
        var i = 0
        var rest = position
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            let next = i + step
            if next < tree.count && Int(tree[next]) <= rest {
                i = next
                rest -= Int(tree[next])
            }
            step /= 2
        }
        return (i, rest)
    }
}
