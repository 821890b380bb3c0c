/// A hash index of an entity's rows by the values of some of its attributes, for the
/// conversions of Swift values that find their object by attributes no unique constraint
/// covers (``ModelContext/upsert(structValue:as:identifiedBy:)``). Unlike a ``UniqueIndex`` it
/// allows several rows per key, and it is made on demand rather than declared: a table makes
/// one per set of key attributes at the first lookup that needs it, and keeps it, in memory
/// only, for the context's life.
///
/// Each distinct key has one bucket, which holds the first row of a doubly linked list of the
/// rows with that key (``next``, ``previous``), so that filing and removing a row are O(1)
/// however many rows share its key.
///
/// Maintained as a ``SecondaryIndex`` is: a change of a row's key, or of the row (allocated,
/// freed, restored), only marks it dirty (``touch(_:)``), and the next lookup files the dirty
/// rows again, each under the hash it has now (O(1) per row). A row stays filed while it is
/// deleted in the pending transaction; lookups check visibility. Replay and renumbering discard
/// the index, which the next lookup builds again from the table.
final class IdentityIndex {
    static let empty: Int32 = -1
    static let tombstone: Int32 = -2
    /// ``previous`` of a row that heads its key's list.
    static let head: Int32 = -1
    /// ``previous`` of a row that is not filed.
    static let unfiled: Int32 = -2

    /// The key attributes' slots, in ascending order.
    let slots: [Int]
    /// Bit `s` for each key slot `s` below 64, and bit 63 for key slots from 63 on.
    let slotMask: UInt64
    let seed = _KeyHasher.randomSeed()
    /// Whether the index is the table's, up to its dirty rows; false: built at the next lookup.
    var isBuilt = false

    /// Per distinct key, the first row of its list; ``empty`` or ``tombstone`` otherwise.
    @exclusivity(unchecked) var buckets: [Int32] = []
    /// Buckets not empty (heads and tombstones).
    @exclusivity(unchecked) var used = 0
    /// Per row: the next row with the same key, or -1.
    @exclusivity(unchecked) var next: [Int32] = []
    /// Per row: the row before it in its key's list, ``head`` or ``unfiled``.
    @exclusivity(unchecked) var previous: [Int32] = []
    /// Per row: the hash of the key the row is filed under.
    @exclusivity(unchecked) var hashes: [Int] = []
    /// Per row, 1 when the row is in ``dirty``; rows past its end are clean.
    @exclusivity(unchecked) var marks: [UInt8] = []
    /// Rows whose key may have changed since they were filed.
    @exclusivity(unchecked) var dirty: [Int32] = []

    /// Work counters, which tests read to check that a lookup costs O(1): the lookups made,
    /// the rows they compared with their key, and the times the index was built.
    @exclusivity(unchecked) var lookups = 0
    @exclusivity(unchecked) var rowsCompared = 0
    @exclusivity(unchecked) var builds = 0

    init(slots: [Int]) {
        self.slots = slots.sorted()
        var mask: UInt64 = 0
        for s in slots { mask |= 1 << UInt64(min(s, 63)) }
        slotMask = mask
    }

    /// Whether `slot` is a key attribute's (or may be: slots from 63 on share a bit).
    @inline(__always)
    func mayKey(_ slot: Int) -> Bool { slotMask & (1 << UInt64(min(slot, 63))) != 0 }

    /// Notes that `row`'s key may have changed (or the row was allocated, freed or restored).
    @inline(__always)
    func touch(_ row: Int) {
        guard isBuilt, row >= marks.count || marks[row] == 0 else { return }
        if row >= marks.count {
            marks.append(contentsOf: repeatElement(0, count: max(row + 1, marks.count * 2) - marks.count))
        }
        marks[row] = 1
        dirty.append(Int32(row))
    }

    /// Forgets the index; the next lookup builds it from the table.
    func discard() {
        isBuilt = false
        buckets = []
        used = 0
        next = []
        previous = []
        hashes = []
        marks = []
        dirty = []
    }

    /// Makes the per-row arrays at least `rows` long.
    func extend(toRows rows: Int) {
        guard previous.count < rows else { return }
        let more = rows - previous.count
        next.append(contentsOf: repeatElement(-1, count: more))
        previous.append(contentsOf: repeatElement(Self.unfiled, count: more))
        hashes.append(contentsOf: repeatElement(0, count: more))
    }
}

/// What a lookup in an ``IdentityIndex`` found among the visible rows.
enum IdentityMatch: Equatable {
    case none
    case one(Int)
    /// Several rows have the key: the two first found.
    case several(Int, Int)
}
