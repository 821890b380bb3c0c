internal import GraphJournal

/// One unique constraint's hash index: an open-addressing table of row numbers, hashed and
/// compared by the rows' key cells, so it stores 4 bytes per slot and no copy of any key.
///
/// Holds at most one *owner* row per key. A row whose key is already owned by another row is
/// kept in ``duplicates`` until the save validates it (Docs/Semantics.md, rule 13).
final class UniqueIndex {
    static let empty: Int32 = -1
    static let tombstone: Int32 = -2

    let constraint: UniqueConstraint
    let slots: [Int]
    @exclusivity(unchecked) var buckets: [Int32]
    /// Buckets not empty (owners and tombstones).
    @exclusivity(unchecked) var used = 0
    /// Rows whose key another row owned when they were indexed.
    @exclusivity(unchecked) var duplicates: Set<Int32> = []
    /// The seed of this index's key hashes (``_KeyHasher``).
    let seed = _KeyHasher.randomSeed()
    /// Counts every change of the index (insert, remove, reset). A bulk import that inserts
    /// keys it knows to be absent without comparing them (``EntityTable/indexInsertAbsent(row:cell:into:)``)
    /// checks it to notice that a hook changed the index behind its back.
    @exclusivity(unchecked) var changes = 0
    /// Whether the index was filled by an ``IndexFillJob`` at open (tests read it).
    var filledDuringReplay = false

    init(constraint: UniqueConstraint, slots: [Int]) {
        self.constraint = constraint
        self.slots = slots
        buckets = Array(repeating: Self.empty, count: 16)
    }

    var mask: Int { buckets.count - 1 }

    /// Empties the index and sizes it for `count` keys at a load factor of at most one half.
    func reset(capacity count: Int) {
        buckets = []  // the old buckets are freed first: never both at once
        buckets = HugePages.filledArray(repeating: Self.empty, count: Self.bucketCount(forKeys: count))
        used = 0
        duplicates = []
        changes += 1
        filledDuringReplay = false
    }

    /// The buckets an index of `count` keys gets: a power of two, at least 16, at least twice
    /// the keys.
    static func bucketCount(forKeys count: Int) -> Int {
        var size = 16
        while size < count * 2 { size <<= 1 }
        return size
    }

    /// The bucket where a probe for a key of hash `hash` starts.
    @inline(__always)
    func home(_ hash: Int) -> Int { hash & (buckets.count - 1) }

    /// The hash of a one-attribute key given as its cell; equal to ``EntityTable/keyHash(row:_:)``
    /// of a row holding it.
    @inline(__always)
    func hash(cell: RawCell) -> Int {
        var hasher = _KeyHasher(seed: seed)
        switch cell {
        case .fixed(let bits): hasher.combine(bits)
        case .bytes(let buffer): hasher.combine(bytes: buffer)
        }
        return hasher.finalize()
    }
}
