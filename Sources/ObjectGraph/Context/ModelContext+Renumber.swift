// Giving back the memory of freed rows: after a compaction, each table moves its live rows to
// the front and every structure that names rows is rewritten with the new numbers.

extension ModelContext {
    /// Gives back the memory of the rows freed since the tables were last renumbered: every
    /// table with free rows or spare room renumbers its rows (``EntityTable/renumberRows()``)
    /// and the link tables follow. Objects keep their ``ObjectID``s and the instances the
    /// application holds stay valid (they point at their new rows); the instances nothing else
    /// holds are released, to be materialized afresh when next looked up; pending changes stay
    /// pending.
    ///
    /// Skipped (returns false) while row numbers are held where they cannot be rewritten: inside
    /// a transaction, import, sync or save, or a lifecycle hook called by one of the context's
    /// loops (``rowsInUse``).
    @discardableResult
    func releaseFreedRows() -> Bool {
        guard savepointDepth == 0, rowsInUse == 0, links.allSatisfy(\.marks.isEmpty),
            tables.allSatisfy(\.canRenumber)
        else { return false }
        var maps: [[Int32]?] = []
        maps.reserveCapacity(tables.count)
        for t in tables {
            if t.hasSlack {
                maps.append(t.renumberRows())
            } else {
                t.releaseUnheldInstances()
                maps.append(nil)
            }
        }
        for l in links {
            if maps[l.link.entities[0]] != nil || maps[l.link.entities[1]] != nil {
                l.renumber(maps)
            } else {
                l.flattenIfWorthIt()
            }
        }
        return true
    }
}
