internal import CPrefetch

extension EntityTable {
    /// Pre-sizes the rows and every unique index for `count` new objects, when the entity holds
    /// none: then most of a bulk operation's sources are inserts, and growing the rows and the
    /// indexes as they come copied every row and rehashed every key several times. Into a
    /// populated entity most may be updates, and nothing is done.
    func prepareForInserts(count: Int) {
        guard identity.liveCount == 0, count > 0 else { return }
        reserve(count)
        warm(rows: count)
        reserveRows(count)
        for index in indexes.uniqueIndexes where (index.used + count) * 2 > index.buckets.count {
            growIndex(index, toHold: index.used + count)
        }
    }

    /// Pre-sizes an index before a bulk import.
    func growIndex(_ index: UniqueIndex, toHold count: Int) {
        let owners = index.buckets.filter { $0 >= 0 }
        let saved = index.duplicates
        index.reset(capacity: max(count, owners.count))
        place(owners: owners, in: index)  // owners hold distinct keys: no comparisons needed
        index.duplicates = saved
    }
}
