import CPrefetch

/// Software prefetching for the bulk import's lookups in tables that outgrow the CPU caches.
///
/// With a million objects, one upsert by ID touches an index bucket, the row's cells, flags and
/// null bits, its instance slot and the instance: each a cache miss of about 150 ns on this
/// kind of machine (`Tools/Benchmarks/Latency/chase.c`), paid one after the other because each
/// address comes from the previous load. A bulk import knows its IDs in advance, so it asks for
/// the lines of the IDs a few places ahead in three stages: the bucket (its address needs only
/// the hash), then the rows the bucket chain names (the bucket is cached by then), then their
/// instances and the bytes of their strings (the instance slots and cells are cached by then;
/// an update compares each new string with the old one). The misses of several IDs then overlap.
/// A prefetch never faults and changes nothing: a wrong guess costs a little bandwidth only.
final class RowPrefetcher {
    /// How many buckets of a chain the later stages look at.
    private static let chainLimit = 4

    unowned(unsafe) let table: EntityTable
    unowned(unsafe) let index: UniqueIndex
    // The row arrays' base addresses when the import began. Only ever prefetched, never read:
    // should a hook grow an array (moving it), a prefetch of the old address is a wasted hint,
    // not a fault.
    private let values: UnsafeRawPointer?
    private let nulls: UnsafeRawPointer?
    private let flags: UnsafeRawPointer?
    private let beforeIndex: UnsafeRawPointer?
    private let instanceSlots: UnsafeRawPointer?
    private let arena: UnsafeRawPointer?
    private let rowBytes: Int
    private let maskBytes: Int
    /// The slots whose cells point into the arena.
    private let variableSlots: [Int]

    /// Addresses for `table`'s rows as they are now; take it after the table is pre-sized.
    init(table: EntityTable, index: UniqueIndex) {
        self.table = table
        self.index = index
        values = table.values.withUnsafeBytes { $0.baseAddress }
        nulls = table.nulls.withUnsafeBytes { $0.baseAddress }
        flags = table.flags.withUnsafeBytes { $0.baseAddress }
        beforeIndex = table.beforeIndex.withUnsafeBytes { $0.baseAddress }
        instanceSlots = table.instances.withUnsafeBytes { $0.baseAddress }
        arena = table.arena.baseAddress
        rowBytes = table.stride * 8
        maskBytes = table.maskWords * 8
        variableSlots = table.types.indices.filter { table.types[$0].isVariableLength }
    }

    // Stage 1, the bucket, is EntityTable.prefetchBucket(hash:in:): its address needs no row.

    /// Stage 2: what an update reads and writes of the rows the chain at `hash` names (the
    /// cells, flags, null bits, before-image slot and instance slot).
    func rows(hash: Int) {
        forEachCandidate(hash: hash) { row in
            if let values { cprefetch_write(values + row * rowBytes) }
            if let nulls { cprefetch_write(nulls + row * maskBytes) }
            if let flags { cprefetch_write(flags + row) }
            if let beforeIndex { cprefetch_write(beforeIndex + row * 4) }
            if let instanceSlots { cprefetch_read(instanceSlots + row * 8) }
        }
    }

    /// Stage 3: the instances of the rows the chain at `hash` names (read without retaining)
    /// and the arena bytes their variable-length cells point to.
    func instancesAndStrings(hash: Int) {
        let stride = table.stride
        table.instances.withUnsafeBytes { slots in
            table.values.withUnsafeBufferPointer { cells in
                forEachCandidate(hash: hash) { row in
                    guard row < slots.count / 8 else { return }
                    // `AnyObject?` is one pointer, nil being 0.
                    let bits = slots.load(fromByteOffset: row * 8, as: UInt.self)
                    if let object = UnsafeRawPointer(bitPattern: bits) { cprefetch_write(object) }
                    guard let arena, (row + 1) * stride <= cells.count else { return }
                    for slot in variableSlots {
                        // A null cell's bits are stale or 0: a wasted hint at worst.
                        cprefetch_read(arena + ArenaRef(cells[row * stride + slot]).offset)
                    }
                }
            }
        }
    }

    /// Calls `body` with the rows in the first ``chainLimit`` buckets of the chain at `hash`.
    @inline(__always)
    private func forEachCandidate(hash: Int, _ body: (Int) -> Void) {
        index.buckets.withUnsafeBufferPointer { buckets in
            let mask = buckets.count - 1
            var b = hash & mask
            for _ in 0..<Self.chainLimit {
                let r = buckets[b]
                if r == UniqueIndex.empty { return }
                if r >= 0 { body(Int(r)) }
                b = (b + 1) & mask
            }
        }
    }
}

extension EntityTable {
    /// Prefetches the index bucket where a probe for `hash` starts.
    func prefetchBucket(hash: Int, in index: UniqueIndex) {
        let b = index.home(hash)
        index.buckets.withUnsafeBytes { if let base = $0.baseAddress { cprefetch_read(base + b * 4) } }
    }

    /// Prefetches the cell of `row` at `slot`.
    func prefetchCell(row: Int, slot: Int) {
        values.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_read(base + row * stride + slot) } }
    }
}
