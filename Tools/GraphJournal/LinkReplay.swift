import GraphJournal
import ObjectGraph

/// One object's list on one side of a relationship stored as links, as a replay keeps it.
struct LinkMembers {
    /// The members' serials, in the list's order; kept on an ordered side only.
    var order: [UInt64] = []
    /// The members' serials.
    var set: Set<UInt64> = []
}

/// The links of one relationship stored as links (``StoredSchema/Link``), replayed from the
/// journal's link records as the library applies them (`ReplayVisitor`): removals, then
/// additions appended to both objects' lists (a to-one side's previous link is removed
/// first), then the order edits; a deleted object's links go with it.
///
/// An unordered side keeps a set per object (its lists are written sorted by serial); an
/// ordered side also keeps the order.
struct LinkState {
    /// The relationship as the schema in force (or the last schema that had it) stores it.
    var link: StoredSchema.Link
    /// Per side: the entity's name.
    var entityNames: [String]
    /// Its two sides, as ``StoredSchema/Link/describe(in:)`` names them.
    var description: String
    /// Per side: each object's list, by the object's serial (objects without links are absent).
    var lists: [[UInt64: LinkMembers]] = [[:], [:]]
    /// The number of links.
    private(set) var count = 0
    /// False when the links are not known exactly: they came from to-one values the replay did
    /// not keep (a to-one relationship that became one stored as links, replayed by `verify`).
    /// Then a removal of a pair that is not linked, an addition of one that is, and an order
    /// edit naming a member the list does not have are not reported.
    var exact = true
    /// What the records held: pairs added and removed, and order edits (one per list).
    var pairsAdded = 0
    var pairsRemoved = 0
    var orderEdits = 0

    init(link: StoredSchema.Link, in schema: StoredSchema) {
        self.link = link
        entityNames = link.entities.map { schema.entities.indices.contains($0) ? schema.entities[$0].name : "#\($0)" }
        description = link.describe(in: schema)
    }

    /// "Playlist.tracks ↔ Track.playlists", for messages.
    var shortName: String { "\(entityNames[0]).\(link.names[0]) ↔ \(entityNames[1]).\(link.names[1])" }

    /// Whether the objects `serial0` (side 0) and `serial1` (side 1) are linked.
    func contains(_ serial0: UInt64, _ serial1: UInt64) -> Bool {
        lists[0][serial0]?.set.contains(serial1) ?? false
    }

    /// `owner`'s list on `side`: in order on an ordered side, by serial otherwise.
    func members(_ side: Int, _ owner: UInt64) -> [UInt64] {
        guard let m = lists[side][owner] else { return [] }
        return link.ordered[side] ? m.order : m.set.sorted()
    }

    /// Links `serial0` and `serial1`, appending each to the other's list; on a to-one side the
    /// object's previous link is removed first. Returns false (changing nothing) when they are
    /// linked already.
    @discardableResult
    mutating func add(_ serial0: UInt64, _ serial1: UInt64) -> Bool {
        guard !contains(serial0, serial1) else { return false }
        if link.toOne[0] { for old in lists[0][serial0]?.set ?? [] { remove(serial0, old) } }
        if link.toOne[1] { for old in lists[1][serial1]?.set ?? [] { remove(old, serial1) } }
        append(serial1, side: 0, owner: serial0)
        append(serial0, side: 1, owner: serial1)
        count += 1
        return true
    }

    /// Unlinks `serial0` and `serial1`. Returns false when they were not linked.
    @discardableResult
    mutating func remove(_ serial0: UInt64, _ serial1: UInt64) -> Bool {
        guard take(serial1, side: 0, owner: serial0) else { return false }
        _ = take(serial0, side: 1, owner: serial1)
        count -= 1
        return true
    }

    /// Applies an order edit to `owner`'s list on the ordered side `side`: the placed members
    /// are taken out, then put back at their index, in ascending index order. Returns false
    /// (changing nothing) when a member is not in the list or an index is past its end.
    mutating func reorder(_ side: Int, _ owner: UInt64, _ placements: [LinkChanges.Placement]) -> Bool {
        guard link.ordered[side] else { return true }  // no longer ordered: the order is dropped
        guard var list = lists[side][owner] else { return placements.isEmpty }
        let moving = Set(placements.map(\.member))
        guard moving.count == placements.count, moving.isSubset(of: list.set) else { return false }
        var order = list.order.filter { !moving.contains($0) }
        for p in placements {
            guard p.index <= order.count else { return false }
            order.insert(p.member, at: p.index)
        }
        list.order = order
        lists[side][owner] = list
        return true
    }

    /// Takes the object `serial` of `side` out of every list: it was deleted.
    mutating func drop(_ side: Int, _ serial: UInt64) {
        guard let list = lists[side].removeValue(forKey: serial) else { return }
        for other in list.set {
            _ = take(serial, side: 1 - side, owner: other)
            count -= 1
        }
    }

    /// Makes the sides' order follow `ordered` (a new schema): a side that becomes ordered
    /// starts in serial order, one that no longer is drops its order.
    mutating func setOrdered(_ ordered: [Bool]) {
        for side in 0..<2 where ordered[side] != link.ordered[side] {
            for (owner, list) in lists[side] {
                lists[side][owner]?.order = ordered[side] ? list.set.sorted() : []
            }
        }
        link.ordered = ordered
    }

    /// Exchanges the two sides (a new schema names the relationship's inverse first).
    mutating func swapSides() {
        lists.swapAt(0, 1)
        entityNames.swapAt(0, 1)
        link.entities.swapAt(0, 1)
        link.names.swapAt(0, 1)
        link.ordered.swapAt(0, 1)
        link.toOne.swapAt(0, 1)
    }

    private mutating func append(_ member: UInt64, side: Int, owner: UInt64) {
        let ordered = link.ordered[side]
        if lists[side][owner] == nil { lists[side][owner] = LinkMembers() }
        lists[side][owner]?.set.insert(member)
        if ordered { lists[side][owner]?.order.append(member) }
    }

    /// Takes `member` out of `owner`'s list on `side`; false when it was not there.
    private mutating func take(_ member: UInt64, side: Int, owner: UInt64) -> Bool {
        guard lists[side][owner]?.set.remove(member) != nil else { return false }
        if link.ordered[side], let i = lists[side][owner]?.order.firstIndex(of: member) { lists[side][owner]?.order.remove(at: i) }
        if lists[side][owner]?.set.isEmpty == true { lists[side][owner] = nil }
        return true
    }

    /// An estimate of the bytes these links take in a compaction's snapshot payload, before
    /// compression: every link as an added pair (side 0's owners in serial order, a signed
    /// varint serial delta and a varint serial each), plus the block's header.
    var estimatedSnapshotBytes: Int64 {
        guard count > 0 else { return 0 }
        var total: Int64 = 4
        var previous: Int64 = 0
        for owner in lists[0].keys.sorted() {
            let delta = Int64(bitPattern: owner) &- previous
            previous = Int64(bitPattern: owner)
            let members = lists[0][owner]?.set ?? []
            total += Int64(Self.varintSize(UInt64(bitPattern: (delta << 1) ^ (delta >> 63))))
            total += Int64(members.count - 1)  // the next pairs of the same owner: delta 0, one byte
            for m in members { total += Int64(Self.varintSize(m)) }
        }
        return total
    }

    private static func varintSize(_ value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }
}

extension JournalReplay {
    /// The key of a relationship stored as links, by its two sides' entity and relationship
    /// names, in side order.
    static func linkKey(_ entityNames: [String], _ relationshipNames: [String]) -> String {
        "\(entityNames[0]).\(relationshipNames[0])\u{0}\(entityNames[1]).\(relationshipNames[1])"
    }
}
