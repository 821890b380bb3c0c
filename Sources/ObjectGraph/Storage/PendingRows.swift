/// One table's pending changes, listed once (``EntityTable/pendingRows``): the rows of
/// `pendingInserts`, `pendingUpdates` and `pendingDeletes` at that moment.
struct PendingRows {
    var inserts: [Int]
    var updates: [Int]
    var deletes: [Int]

    var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty }
}
