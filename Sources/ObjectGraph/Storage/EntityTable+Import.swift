internal import CPrefetch

extension EntityTable {
    /// Pre-sizes an index before a bulk import.
    func growIndex(_ index: UniqueIndex, toHold count: Int) {
        let owners = index.buckets.filter { $0 >= 0 }
        let saved = index.duplicates
        index.reset(capacity: max(count, owners.count))
        place(owners: owners, in: index)  // owners hold distinct keys: no comparisons needed
        index.duplicates = saved
    }
}
