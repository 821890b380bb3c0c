/// One table's pending changes, listed once (``EntityTable/pendingRows``): the rows of
/// `pendingInserts`, `pendingUpdates` and `pendingDeletes` at that moment.
///
/// The inserts are 32-bit rows, as the table's own list of inserted rows: a save of 1M new
/// objects shares that list instead of copying it into 8 MB of `Int`s.
struct PendingRows {
    var inserts: [Int32]
    var updates: [Int]
    var deletes: [Int]

    var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty }
}
