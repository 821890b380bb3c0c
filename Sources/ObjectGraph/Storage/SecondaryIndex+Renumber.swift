extension SecondaryIndex {
    /// Renames the rows after ``EntityTable/renumberRows()`` (`newRow`: old row to new, -1 for
    /// freed rows). The renumbering keeps the rows' order, so an index with no dirty row stays
    /// sorted; one with dirty rows is rebuilt at its next lookup.
    func renumber(_ newRow: [Int32]) {
        guard dirty.isEmpty else {
            discard()
            return
        }
        var rows: [Int32] = []
        rows.reserveCapacity(sorted.count)
        for r in sorted {
            let n = Int(r) < newRow.count ? newRow[Int(r)] : -1
            guard n >= 0 else {
                discard()
                return
            }
            rows.append(n)
        }
        sorted = rows
        marks = []
    }
}
