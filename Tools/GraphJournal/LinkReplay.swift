import GraphJournal
import ObjectGraph

/// One object's list on one side of a relationship stored as links, as a replay keeps it: the
/// members' serials in the order the library keeps them (on an unordered side, in the order
/// they were added, a removed member's place taken by the last one).
///
/// An unordered list of 64 members or more also keeps each member's position, so that finding
/// and removing one is O(1) whatever the list's length; shorter lists are scanned, and so are
/// ordered lists, whose removals shift the members after it anyway (as the library's lists).
struct LinkMembers {
    var order: [UInt64] = []
    var positions: [UInt64: Int]?

    static let indexedFrom = 64
    static let unindexedBelow = 32

    /// Where `member` is in the list.
    func index(of member: UInt64) -> Int? {
        if let positions { return positions[member] }
        return order.firstIndex(of: member)
    }

    /// Appends `member`; an unordered list (`ordered` false) is indexed from 64 members.
    mutating func append(_ member: UInt64, ordered: Bool) {
        order.append(member)
        if positions != nil {
            positions?[member] = order.count - 1
        } else if !ordered && order.count >= Self.indexedFrom {
            var p: [UInt64: Int] = [:]
            p.reserveCapacity(order.count * 2)
            for (i, m) in order.enumerated() { p[m] = i }
            positions = p
        }
    }

    /// Takes `member` out: on an ordered side the members after it close up, on an unordered
    /// one the last member takes its place. Returns false when it was not there.
    mutating func remove(_ member: UInt64, ordered: Bool) -> Bool {
        guard let i = index(of: member) else { return false }
        if ordered {
            order.remove(at: i)
        } else {
            let last = order.removeLast()
            if i < order.count {
                order[i] = last
                positions?[last] = i
            }
        }
        positions?[member] = nil
        if order.count < Self.unindexedBelow { positions = nil }
        return true
    }

    /// Replaces the order with `order`, the same members rearranged (an ordered list: not
    /// indexed).
    mutating func reorder(_ order: [UInt64]) {
        self.order = order
        positions = nil
    }
}

/// The links of one relationship stored as links (``StoredSchema/Link``), replayed from the
/// journal's link records as the library applies them (`ReplayVisitor`): removals, then
/// additions appended to both objects' lists (a to-one side's previous link is removed
/// first), then the order edits; a deleted object's links go with it.
///
/// Memory: 8 bytes per member on each side (16 per link), an array per object with links on
/// each side, and a position index per unordered list of 64 members or more.
struct LinkState {
    /// The relationship as the schema in force stores it.
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

    /// Whether the objects `serial0` (side 0) and `serial1` (side 1) are linked; looks in the
    /// shorter list.
    func contains(_ serial0: UInt64, _ serial1: UInt64) -> Bool {
        guard let a = lists[0][serial0], let b = lists[1][serial1] else { return false }
        return a.order.count <= b.order.count ? a.index(of: serial1) != nil : b.index(of: serial0) != nil
    }

    /// `owner`'s list on `side`: in order on an ordered side, by serial otherwise.
    func members(_ side: Int, _ owner: UInt64) -> [UInt64] {
        guard let m = lists[side][owner] else { return [] }
        return link.ordered[side] ? m.order : m.order.sorted()
    }

    /// Links `serial0` and `serial1`, appending each to the other's list; on a to-one side the
    /// object's previous link is removed first. Returns false (changing nothing) when they are
    /// linked already.
    @discardableResult
    mutating func add(_ serial0: UInt64, _ serial1: UInt64) -> Bool {
        guard !contains(serial0, serial1) else { return false }
        if link.toOne[0] { for old in lists[0][serial0]?.order ?? [] { remove(serial0, old) } }
        if link.toOne[1] { for old in lists[1][serial1]?.order ?? [] { remove(old, serial1) } }
        lists[0][serial0, default: LinkMembers()].append(serial1, ordered: link.ordered[0])
        lists[1][serial1, default: LinkMembers()].append(serial0, ordered: link.ordered[1])
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
        guard let list = lists[side][owner] else { return placements.isEmpty }
        let moving = Set(placements.map(\.member))
        guard moving.count == placements.count, moving.allSatisfy({ list.index(of: $0) != nil }) else { return false }
        var order = list.order.filter { !moving.contains($0) }
        for p in placements {
            guard p.index <= order.count else { return false }
            order.insert(p.member, at: p.index)
        }
        lists[side][owner]?.reorder(order)
        return true
    }

    /// Takes the object `serial` of `side` out of every list: it was deleted.
    mutating func drop(_ side: Int, _ serial: UInt64) {
        guard let list = lists[side].removeValue(forKey: serial) else { return }
        for other in list.order {
            _ = take(serial, side: 1 - side, owner: other)
            count -= 1
        }
    }

    /// Makes the sides' order follow `ordered` (a new schema): a side that becomes ordered
    /// keeps its lists' order as they are, without their position index.
    mutating func setOrdered(_ ordered: [Bool]) {
        for side in 0..<2 where ordered[side] && !link.ordered[side] {
            for owner in Array(lists[side].keys) { lists[side][owner]?.positions = nil }
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

    /// Takes `member` out of `owner`'s list on `side`; false when it was not there.
    private mutating func take(_ member: UInt64, side: Int, owner: UInt64) -> Bool {
        let ordered = link.ordered[side]
        guard lists[side][owner]?.remove(member, ordered: ordered) == true else { return false }
        if lists[side][owner]?.order.isEmpty == true { lists[side][owner] = nil }
        return true
    }

    /// An estimate of the bytes these links take in a compaction's snapshot payload, before
    /// compression: every link as an added pair, in one run per side-0 owner (owners in serial
    /// order), plus the block's header.
    var estimatedSnapshotBytes: Int64 {
        guard count > 0 else { return 0 }
        // The pairs in runs, one per side-0 owner: the owner's serial delta and member count,
        // then each member's serial as a delta from the member before (across runs).
        var total: Int64 = 6
        var previous0: Int64 = 0, previous1: Int64 = 0
        for owner in lists[0].keys.sorted() {
            let members = lists[0][owner]?.order ?? []
            guard !members.isEmpty else { continue }
            total += Int64(
                Self.signedSize(Int64(bitPattern: owner) &- previous0) + Self.varintSize(UInt64(members.count)))
            previous0 = Int64(bitPattern: owner)
            for m in members {
                total += Int64(Self.signedSize(Int64(bitPattern: m) &- previous1))
                previous1 = Int64(bitPattern: m)
            }
        }
        return total
    }

    private static func signedSize(_ value: Int64) -> Int {
        varintSize(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
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
