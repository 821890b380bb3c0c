import Foundation

// Read-only scans of an entity table for fetching. Nothing here changes the table.
extension EntityTable {
    /// The flags a row must not have to be seen: with pending changes, deleted and vanished
    /// rows are hidden; in the committed view, pending inserts (and vanished rows) are.
    @inline(__always)
    static func hiddenFlags(committedOnly: Bool) -> UInt8 {
        committedOnly ? Flags.inserted | Flags.vanished : Flags.deleted | Flags.vanished
    }

    /// The rows in view that meet `condition` (all rows in view when `nil`), in storage order,
    /// stopping after `limit` rows.
    ///
    /// Runs no user code, so the buffers it reads cannot change under it.
    func scanRows(committedOnly: Bool, condition: StorageCondition?, limit: Int? = nil) -> [Int32] {
        let hidden = Self.hiddenFlags(committedOnly: committedOnly)
        let limit = limit ?? Int.max
        var result: [Int32] = []
        guard limit > 0 else { return result }
        guard let condition else {
            for row in 0..<rowCount where flags[row] & (Flags.live | hidden) == Flags.live {
                result.append(Int32(row))
                if result.count >= limit { break }
            }
            return result
        }
        let rowCount = self.rowCount
        read { columns in
            arena.read { arena in
                for row in 0..<rowCount where columns.isInView(row: row, hidden: hidden) {
                    if condition.matches(columns.cells(row: row, committed: committedOnly, arena: arena)) {
                        result.append(Int32(row))
                        if result.count >= limit { break }
                    }
                }
            }
        }
        return result
    }

    /// The row's instance as a `T`, created (and kept) on first use like ``instance(row:)``.
    ///
    /// - Precondition: this is `T`'s table.
    @inline(__always)
    func object<T: Entity>(row: Int, as type: T.Type) -> T {
        unsafeDowncast(instances[row] ?? makeInstance(row: row), to: T.self)
    }

    /// What a predicate or sort descriptor is evaluated on: the row's instance, or in the
    /// committed view of a row changed since the last save, a throw-away standalone instance
    /// holding its committed values (no lifecycle hook runs on it).
    func evaluationObject<T: Entity>(row: Int, committedOnly: Bool, as type: T.Type) -> T {
        guard committedOnly, changes.beforeIndex[row] >= 0 else { return object(row: row, as: T.self) }
        let snapshot = StandaloneValues(entity: entity)
        for slot in 0..<stride { snapshot.values[slot] = .some(committedValue(row: row, slot: slot)) }
        return T(_backing: ObjectBacking(standalone: snapshot))
    }

    /// The cell and null bit of `slot` in the row's current or committed image.
    @inline(__always)
    func cell(row: Int, slot: Int, committedOnly: Bool) -> (bits: UInt64, isNull: Bool) {
        let bit = UInt64(1) << UInt64(slot % 64)
        if committedOnly, changes.beforeIndex[row] >= 0 {
            let b = Int(changes.beforeIndex[row])
            return (changes.beforeValues[b * stride + slot], changes.beforeNulls[b * maskWords + slot / 64] & bit != 0)
        }
        return (values[row * stride + slot], nulls[row * maskWords + slot / 64] & bit != 0)
    }
}
