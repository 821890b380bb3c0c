extension EntityTable {
    /// Prefetches the index bucket where a probe for `hash` starts.
    func prefetchBucket(hash: Int, in index: UniqueIndex) { index.prefetchHome(hash) }
}
