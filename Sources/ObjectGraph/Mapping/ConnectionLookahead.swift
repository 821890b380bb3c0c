// Prefetching for a connection by lists of names, a few objects ahead of the one connected.

/// Hides the misses of a connection's name lookups (a package's dependencies, each looked up
/// by name in the destination's unique index) behind the connecting of the objects before it.
///
/// A lookup of one name waits for three misses in a row: the index's bucket, then the key cell
/// of the row the bucket names, then that key's bytes in the arena, which `memcmp` compares.
/// The names of one object are few (four, typically), so prefetching them only when the object
/// is connected overlaps little. This runs one stage per object ahead instead, as a pipeline:
/// while object *i* is connected, the key bytes of object *i + 1*'s names are prefetched, the
/// key cells of object *i + 2*'s, and the buckets of object *i + 3*'s (whose hashes are kept
/// for the two later stages). Hints only: what is prefetched is never trusted, and a lookup
/// reads and compares everything itself.
struct ConnectionLookahead {
    /// How many objects ahead the buckets are prefetched (the key cells one fewer, the bytes
    /// two fewer).
    static let distance = 3
    /// The most names of one object prefetched.
    static let namesPerObject = 16

    private let source: EntityTable
    private let sourceSlot: Int
    private let destination: EntityTable
    private let destinationSlot: Int
    private let index: UniqueIndex
    private let rows: [Int32]
    /// Per ring position, `namesPerObject` hashes of that object's names; flat, so that the
    /// stages read it without retaining an inner array.
    private var hashes: [Int]
    /// Per ring position, how many of its hashes are set.
    private var hashCounts: [Int]

    /// A lookahead over `rows` (the order the connection goes through them) for connection `c`,
    /// or nil when `c` is not a list of strings looked up in a unique index of one string
    /// attribute.
    init?(_ c: MappingPlan.Connection, source: EntityTable, rows: [Int32]) {
        guard let index = c.index, c.isCollection, c.mySlots.count == 1, c.destinationSlots.count == 1,
            source.types[c.mySlots[0]] == .stringList,
            c.destination.types[c.destinationSlots[0]] == .string
        else { return nil }
        self.source = source
        self.sourceSlot = c.mySlots[0]
        self.destination = c.destination
        self.destinationSlot = c.destinationSlots[0]
        self.index = index
        self.rows = rows
        self.hashes = Array(repeating: 0, count: (Self.distance + 1) * Self.namesPerObject)
        self.hashCounts = Array(repeating: 0, count: Self.distance + 1)
    }

    /// Prefetches for the objects after position `i` of the rows, before position `i` is
    /// connected: one stage each for positions `i + 1` to `i + distance`.
    mutating func advance(to i: Int) {
        if i == 0 {
            // The pipeline fills: the first objects get their earlier stages now.
            for ahead in 0..<Self.distance { prefetchBuckets(at: ahead) }
            prefetchKeyCells(at: 0)
            prefetchKeyCells(at: 1)
            prefetchKeyBytes(at: 0)
        }
        prefetchBuckets(at: i + Self.distance)
        prefetchKeyCells(at: i + Self.distance - 1)
        prefetchKeyBytes(at: i + 1)
    }

    /// Hashes the names of the object at `position` and prefetches their buckets.
    private mutating func prefetchBuckets(at position: Int) {
        let ring = position % hashCounts.count
        hashCounts[ring] = 0
        guard position < rows.count else { return }
        let row = Int(rows[position])
        guard row < source.rowCount, !source.isNull(row: row, slot: sourceSlot) else { return }
        let index = self.index
        let buckets = PrefetchHint(index.buckets)
        var count = 0
        hashes.withUnsafeMutableBufferPointer { hashes in
            let first = ring * Self.namesPerObject
            source.arena.withBytes(ArenaRef(source.values[row * source.stride + sourceSlot])) { bytes in
                ListCoding.forEachString(bytes) { utf8 in
                    guard count < Self.namesPerObject else { return }
                    let hash = index.hash(cell: .bytes(utf8))
                    buckets.read(index.home(hash) * MemoryLayout<Int32>.stride)
                    hashes[first + count] = hash
                    count += 1
                }
            }
        }
        hashCounts[ring] = count
    }

    /// Calls `body` with the rows in the first two buckets of the chains of the object at
    /// `position`'s names, the ring read in place and the buckets taken once.
    @inline(__always)
    private func forEachCandidate(at position: Int, _ body: (Int) -> Void) {
        let ring = position % hashCounts.count
        let count = hashCounts[ring]
        guard count > 0 else { return }
        let buckets = index.buckets
        hashes.withUnsafeBufferPointer { hashes in
            for k in 0..<count {
                UniqueIndex.forEachRow(in: buckets, chainOf: hashes[ring * Self.namesPerObject + k], limit: 2, body)
            }
        }
    }

    /// Prefetches the key cells of the rows in the first buckets of the probes of the object at
    /// `position` (its buckets prefetched one stage before), with the null word a lookup reads
    /// before the cell and the flags the connection reads after (whether the row is visible):
    /// three lines whose addresses need only the row.
    private func prefetchKeyCells(at position: Int) {
        guard position < rows.count else { return }
        let cells = PrefetchHint(destination.values)
        let nulls = PrefetchHint(destination.nulls)
        let flags = PrefetchHint(destination.flags)
        let stride = destination.stride, slot = destinationSlot, maskWords = destination.maskWords
        let word = MemoryLayout<UInt64>.stride
        forEachCandidate(at: position) { row in
            cells.read((row * stride + slot) * word)
            nulls.read((row * maskWords + (slot >> 6)) * word)
            flags.read(row)  // one byte a row
        }
    }

    /// Prefetches the key bytes those cells point to, for the object at `position`.
    private func prefetchKeyBytes(at position: Int) {
        guard position < rows.count else { return }
        let stride = destination.stride, slot = destinationSlot
        let arena = PrefetchHint(destination.arena)
        destination.values.withUnsafeBufferPointer { cells in
            forEachCandidate(at: position) { row in
                let i = row * stride + slot
                // A null cell's bits are stale or 0: a wasted hint at worst.
                if i < cells.count { arena.read(ArenaRef(cells[i]).offset) }
            }
        }
    }
}
