/// The to-many side of a one-to-many relationship, derived from the to-one side: for one
/// to-one slot of an entity, the visible rows (not deleted, not vanished) pointing at each
/// destination serial.
///
/// Built on first use by one scan of the table, then maintained by every set and delete of the
/// slot. Rollback, savepoint rollback and replay restore or write cells wholesale, so they drop
/// the index instead (``EntityTable/invalidateReferenceIndexes()``) and the next use rebuilds it:
/// a store that never reads a to-many pays nothing at open.
final class ReferenceIndex {
    let slot: Int
    var isBuilt = false
    var rowsBySerial: [UInt64: Set<Int32>] = [:]

    init(slot: Int) { self.slot = slot }
}
