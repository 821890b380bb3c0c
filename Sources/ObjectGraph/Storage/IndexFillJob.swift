import Dispatch
internal import GraphJournal

/// The fill of a unique index of one fixed-size attribute, run on another core while replay
/// decodes the rest of a large block of inserts into a table that was empty.
///
/// Once a block's key column is in, the fill needs nothing else: this job hashes those cells
/// and places the rows in a bucket array of its own, while the replaying thread decodes the
/// block's other columns (a million objects: some 20 ms of fill, against some 35 ms of
/// columns). It reads the key cells through an address taken before it starts; meanwhile
/// replay writes only other cells of the block's rows (other memory locations) and does not
/// reallocate the cells until the block is done. The key column must have no nil value, so
/// the job never reads null bits, which replay keeps writing in the same words.
///
/// Replay discards the job, waiting for it first, as soon as anything else could change the
/// table or the block: another block for the entity, an update, a delete, or a payload that
/// fails. ``EntityTable/rebuildIndexes()`` installs its result only if the table still holds
/// exactly the block's rows, which is then what the fill on the replaying thread would build.
final class IndexFillJob: @unchecked Sendable {
    /// Blocks of fewer rows are filled after replay, as before: the job's dispatch and its
    /// wait would cost more than they save. Changed by tests only, for the task they run in.
    @TaskLocal static var minimumRows = 65_536

    let index: UniqueIndex
    /// The rows 0..<count are the block's, all with a key.
    let count: Int
    /// Kept alive while the job reads its cells.
    private let table: EntityTable
    private let cells: UnsafePointer<UInt64>
    private let stride: Int
    private let slot: Int
    private let seed: UInt64
    private let done = DispatchGroup()
    // Written by the job before it leaves `done`; read after `wait()`.
    private var buckets: [Int32] = []
    private var placed = 0
    private var duplicates: [Int32] = []

    /// Starts the fill of `index` (of the fixed-size attribute at `slot`) with the table's
    /// rows 0..<`count`, whose key cells are written. Nil when the table has no cells.
    init?(table: EntityTable, index: UniqueIndex, slot: Int, count: Int) {
        guard let cells = table.values.withUnsafeBufferPointer({ $0.baseAddress }),
            count * table.stride <= table.values.count
        else {
            return nil
        }
        self.table = table
        self.index = index
        self.count = count
        self.cells = cells
        stride = table.stride
        self.slot = slot
        seed = index.seed
        DispatchQueue.global().async(group: done) { self.run() }
    }

    /// Hashes the keys in row order (as ``EntityTable/keyHash(row:_:)`` does) and places the
    /// rows as ``UniqueIndex/placeRows(_:hashes:sameKey:)`` does, at the size
    /// ``UniqueIndex/reset(capacity:)`` gives `count` keys.
    private func run() {
        let n = count, cells = cells, stride = stride, slot = slot
        let hashes = [UInt32](unsafeUninitializedCapacity: n) { h, initialized in
            HugePages.advise(h, count: n)
            for row in 0..<n {
                var hasher = _KeyHasher(seed: seed)
                hasher.combine(cells[row * stride + slot])
                h.initializeElement(at: row, to: UInt32(truncatingIfNeeded: hasher.finalize()))
            }
            initialized = n
        }
        var buckets = HugePages.filledArray(repeating: UniqueIndex.empty, count: UniqueIndex.bucketCount(forKeys: n))
        let (placed, duplicates) = buckets.withUnsafeMutableBufferPointer { b in
            hashes.withUnsafeBufferPointer { h in
                UniqueIndex.place(nil, count: n, hashes: h, into: b) {
                    cells[$0 * stride + slot] == cells[$1 * stride + slot]
                }
            }
        }
        self.buckets = buckets
        self.placed = placed
        self.duplicates = duplicates
    }

    /// Waits for the job to end.
    func wait() { done.wait() }

    /// Waits for the job, then makes its buckets the index's: the index then holds what
    /// ``UniqueIndex/reset(capacity:)`` and ``UniqueIndex/placeRows(_:hashes:sameKey:)`` give
    /// the rows 0..<count.
    func install() {
        done.wait()
        index.install(buckets: buckets, used: placed, duplicates: duplicates)
        buckets = []
    }
}
