/// Software prefetching for identification by one unique attribute over a large index
/// (EntityTable+Prefetch.swift). A run into an empty store, or over a document in another order
/// than the rows', probes the index at a random bucket per source, then compares the key of
/// each row in the bucket's chain: each a cache miss with a million keys (perf: the probe was a
/// quarter of a 1M first run's map phase). So the run maps each top-level source ``distance``
/// places behind its walk over the array: a source entering the window has its key read (at
/// the field where the key was last found, without a search) and hashed, and its bucket
/// prefetched; six places before it is mapped, the rows of its chain; three places before,
/// when the entity had objects, their instances and strings (what an update reads). The walk
/// also prefetches the document's tape and strings a few records past it, which the parse wrote
/// and the caches no longer hold.
///
/// The keys are read and hashed only while identification's guess of the next row misses
/// (``MappingPlan/guessScore``): a document in storage order finds its objects at the guess, on
/// rows the hardware prefetches by itself, and those reads and hashes would only add to its
/// time. Only for a
/// source that can peek (``MappingSource/peeksFields``), one identification attribute of one
/// key holding a string or a 64-bit integer, and an index of at least ``minimumBuckets``
/// buckets (a smaller one stays in the caches).
final class IdentificationLookahead<Source: MappingSource> {
    /// How many places ahead of the mapping a source is walked to.
    static var distance: Int { 12 }
    /// The size of the window of sources walked and not yet mapped (a power of two, the count
    /// of `nodes` and `hashes`).
    private static var window: Int { 16 }
    /// The smallest index for which the lookahead runs: 512 KB of buckets.
    static var minimumBuckets: Int { 1 << 17 }
    /// While the guess score is below this, the sources entering the window are prefetched.
    private static var scoreLimit: Int { 16 }

    private let plan: MappingPlan
    private let hintIndex: Int
    private let key: MappingKey
    private let type: AttributeType
    private let slot: Int
    private let index: UniqueIndex
    private let source: Source
    /// Whether the entity had objects when the run began, which the run may then update: the
    /// stages then fetch what an update reads and writes. Into an empty entity the rows of a
    /// chain are only compared.
    private let updates: Bool
    // Addresses for the hints, taken again every 4,096 sources: the table and the index may
    // grow while the run inserts (a stale address makes a wasted hint, never a fault).
    private var prefetcher: RowPrefetcher
    private var buckets: PrefetchHint
    private var bucketMask: Int
    /// The sources walked, the `j`-th at `nodes[j % window]`. Fixed-size arrays held inline:
    /// no allocation, and an index masked by `window - 1` is within their bounds.
    @exclusivity(unchecked) private var nodes = InlineArray<16, Source.Node?>(repeating: nil)
    /// The hash of the key of the `j`-th source at `hashes[j % window]`, when `hashed` has bit
    /// `j % window`.
    @exclusivity(unchecked) private var hashes = InlineArray<16, Int>(repeating: 0)
    private var hashed: UInt32 = 0
    /// How many sources were walked, and how many handed out for mapping.
    private var entered = 0
    private var mapped = 0

    init?(_ plan: MappingPlan, source: Source) {
        guard Source.peeksFields, plan.identification.count == 1, let index = plan.index,
            index.buckets.count >= Self.minimumBuckets, index.slots.count == 1
        else { return nil }
        let step = plan.attributes[plan.identification[0]]
        guard step.keys.count == 1, !step.isCodable, step.type == .int64 || step.type == .string else { return nil }
        self.plan = plan
        hintIndex = step.hintBase
        key = step.keys[0]
        type = step.type
        slot = index.slots[0]
        self.index = index
        self.source = source
        updates = plan.table.identity.liveCount > 0
        prefetcher = RowPrefetcher(table: plan.table, index: index)
        buckets = index.prefetchHint
        bucketMask = index.buckets.count - 1
    }

    /// Takes `node`, the next source of the walk, into the window and runs the stages that are
    /// due; returns the source to map now (``distance`` places back), nil while the window fills.
    @inline(__always)
    func enter(_ node: Source.Node) -> Source.Node? {
        let j = entered
        if j & 4095 == 4095 { refresh() }
        let w = j & (Self.window - 1)
        nodes[w] = node
        source.prefetchPast(node)
        hashed &= ~(1 << UInt32(w))
        if plan.guessScore < Self.scoreLimit, let h = keyHash(node) {
            hashes[w] = h
            hashed |= 1 << UInt32(w)
            buckets.read((h & bucketMask) * 4)
        }
        entered = j + 1
        guard j >= Self.distance else { return nil }
        return next()
    }

    /// The next source to map once the walk is over, nil when every source was handed out.
    @inline(__always)
    func drain() -> Source.Node? {
        mapped < entered ? next() : nil
    }

    /// Hands out the next source to map after running its row stages: the chain rows of the
    /// source six places after it, the instances and strings of the one three places after.
    @inline(__always)
    private func next() -> Source.Node? {
        let i = mapped
        mapped = i + 1
        let rows = i + 6, instances = i + 3
        if rows < entered, let h = hash(of: rows) {
            if updates { prefetcher.rows(hash: h) } else { prefetcher.keys(hash: h, slot: slot) }
        }
        if updates, instances < entered, let h = hash(of: instances) { prefetcher.instancesAndStrings(hash: h) }
        return nodes[i & (Self.window - 1)]
    }

    @inline(__always)
    private func hash(of j: Int) -> Int? {
        let w = j & (Self.window - 1)
        return hashed & (1 << UInt32(w)) != 0 ? hashes[w] : nil
    }

    /// The index hash of the source's identification value, when it is where the key was last
    /// found and needs no transformation beyond the mapping's fast path (a JSON integer for an
    /// `Int64` attribute, a JSON string for a `String` one).
    @inline(__always)
    private func keyHash(_ node: Source.Node) -> Int? {
        guard let value = source.peekField(node, key, hint: plan.hints[hintIndex]) else { return nil }
        switch (source.scalar(value), type) {
        case (.int(let v), .int64): return index.hash(cell: .fixed(UInt64(bitPattern: v)))
        case (.utf8(let b), .string): return index.hash(cell: .bytes(b))
        default: return nil
        }
    }

    private func refresh() {
        prefetcher = RowPrefetcher(table: plan.table, index: index)
        buckets = index.prefetchHint
        bucketMask = index.buckets.count - 1
    }
}
