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

    /// The table whose rows are prefetched. Strong, as is `index`: the import that makes a
    /// prefetcher holds both anyway, and a method called on an `unowned(unsafe)` reference
    /// retains it for the call.
    let table: EntityTable
    /// The unique index the import looks its IDs up in.
    let index: UniqueIndex
    // The row arrays' addresses when the import began. Only ever prefetched, never read:
    // should a hook grow an array (moving it), a prefetch of the old address is a wasted hint,
    // not a fault.
    /// Where the cells are.
    private let values: PrefetchHint
    /// Where the null words are.
    private let nulls: PrefetchHint
    /// Where the row flags are.
    private let flags: PrefetchHint
    /// Where the rows' before-image indexes are.
    private let beforeIndex: PrefetchHint
    /// Where the instance slots are.
    private let instanceSlots: PrefetchHint
    /// Where the arena's bytes are.
    private let arena: PrefetchHint
    /// Bytes of cells per row.
    private let rowBytes: Int
    /// Bytes of null words per row.
    private let maskBytes: Int
    /// The slots whose cells point into the arena.
    private let variableSlots: [Int]

    /// Addresses for `table`'s rows as they are now; take it after the table is pre-sized.
    init(table: EntityTable, index: UniqueIndex) {
        self.table = table
        self.index = index
        values = PrefetchHint(table.values)
        nulls = PrefetchHint(table.nulls)
        flags = PrefetchHint(table.flags)
        beforeIndex = PrefetchHint(table.changes.beforeIndex.stored)
        instanceSlots = PrefetchHint(table.instances.stored)
        arena = PrefetchHint(table.arena)
        rowBytes = table.stride * 8
        maskBytes = table.maskWords * 8
        variableSlots = table.types.indices.filter { table.types[$0].isVariableLength }
    }

    // Stage 1, the bucket, is EntityTable.prefetchBucket(hash:in:): its address needs no row.

    /// Stage 2: what an update reads and writes of the rows the chain at `hash` names (the
    /// cells, flags, null bits, before-image slot and instance slot).
    func rows(hash: Int) {
        UniqueIndex.forEachRow(in: index.buckets, chainOf: hash, limit: Self.chainLimit) { row in
            values.write(row * rowBytes)
            nulls.write(row * maskBytes)
            flags.write(row)
            beforeIndex.write(row * 4)
            instanceSlots.read(row * 8)
        }
    }

    /// Stage 2 for a probe that only compares keys (a mapping into an entity that was empty):
    /// the key cell at `slot` and the null bits of the rows the chain at `hash` names.
    func keys(hash: Int, slot: Int) {
        UniqueIndex.forEachRow(in: index.buckets, chainOf: hash, limit: Self.chainLimit) { row in
            values.read(row * rowBytes + slot * 8)
            nulls.read(row * maskBytes + (slot >> 6) * 8)
        }
    }

    /// Stage 3: the instances of the rows the chain at `hash` names (read without retaining)
    /// and the arena bytes their variable-length cells point to.
    func instancesAndStrings(hash: Int) {
        table.prefetchInstancesAndStrings(
            ofChainOf: hash, in: index.buckets, limit: Self.chainLimit, variableSlots: variableSlots, arena: arena)
    }
}
