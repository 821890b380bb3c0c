import CPrefetch

/// Software prefetching for the bulk import's lookups in tables that outgrow the CPU caches.
///
/// With a million objects, one upsert by ID touches an index bucket, the row's cells, flags and
/// null bits, its instance slot and the instance: each a cache miss of about 150 ns on this
/// kind of machine (`Tools/Benchmarks/Latency/chase.c`), paid one after the other because each
/// address comes from the previous load. A bulk import knows its IDs in advance, so it asks for
/// the lines of the IDs a few places ahead in three stages: the bucket (its address needs only
/// the hash), then the rows the bucket chain names (the bucket is cached by then), then their
/// instances (the instance slots are cached by then). The misses of several IDs then overlap.
/// A prefetch never faults and changes nothing: a wrong guess costs a little bandwidth only.
extension EntityTable {
    /// Prefetches the cell of `row` at `slot`.
    func prefetchCell(row: Int, slot: Int) {
        values.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_read(base + row * stride + slot) } }
    }

    /// How many buckets of a chain the later stages look at.
    private static let chainLimit = 4

    /// Stage 1: the index bucket where a probe for `hash` starts.
    func prefetchBucket(hash: Int, in index: UniqueIndex) {
        let b = index.home(hash)
        index.buckets.withUnsafeBufferPointer { buckets in
            if let base = buckets.baseAddress { cprefetch_read(base + b) }
        }
    }

    /// Stage 2: what an update reads and writes of the rows the chain at `hash` names (the key
    /// cell and the row's other cells, flags, null bits, before-image slot, instance slot).
    func prefetchRows(hash: Int, in index: UniqueIndex) {
        forEachCandidate(hash: hash, in: index) { row in
            values.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_write(base + row * stride) } }
            nulls.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_write(base + row * maskWords) } }
            flags.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_write(base + row) } }
            beforeIndex.withUnsafeBufferPointer { if let base = $0.baseAddress { cprefetch_write(base + row) } }
            instances.withUnsafeBytes { if let base = $0.baseAddress { cprefetch_read(base + row * MemoryLayout<AnyObject?>.stride) } }
        }
    }

    /// Stage 3: the instances of the rows the chain at `hash` names (read without retaining).
    func prefetchInstances(hash: Int, in index: UniqueIndex) {
        forEachCandidate(hash: hash, in: index) { row in
            instances.withUnsafeBytes { raw in
                // `AnyObject?` is one pointer, nil being 0.
                let bits = raw.load(fromByteOffset: row * MemoryLayout<AnyObject?>.stride, as: UInt.self)
                if let object = UnsafeRawPointer(bitPattern: bits) { cprefetch_write(object) }
            }
        }
    }

    /// Calls `body` with the rows in the first ``chainLimit`` buckets of the chain at `hash`.
    @inline(__always)
    private func forEachCandidate(hash: Int, in index: UniqueIndex, _ body: (Int) -> Void) {
        let mask = index.mask
        var b = index.home(hash)
        for _ in 0..<Self.chainLimit {
            let r = index.buckets[b]
            if r == UniqueIndex.empty { return }
            if r >= 0, Int(r) < rowCount { body(Int(r)) }
            b = (b + 1) & mask
        }
    }
}
