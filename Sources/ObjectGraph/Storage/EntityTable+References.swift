extension EntityTable {
    /// The visible rows whose to-one `index.slot` holds `serial`.
    func referencingRows(_ index: ReferenceIndex, serial: UInt64) -> Set<Int32> {
        if !index.isBuilt { build(index) }
        return index.rowsBySerial[serial] ?? []
    }

    func build(_ index: ReferenceIndex) {
        var map: [UInt64: Set<Int32>] = [:]
        let slot = index.slot
        for row in 0..<rowCount where isVisible(row: row) {
            if let serial = reference(row: row, slot: slot) { map[serial, default: []].insert(Int32(row)) }
        }
        index.rowsBySerial = map
        index.isBuilt = true
    }

    /// Drops every reference index; the next use rebuilds it from the cells.
    func invalidateReferenceIndexes() {
        for case let index? in indexes.referenceIndexOfSlot where index.isBuilt {
            index.isBuilt = false
            index.rowsBySerial = [:]
        }
    }

    /// Takes `row` out of the index of `slot` (before the cell changes or the row is deleted).
    @inline(__always)
    func unreference(row: Int, slot: Int) {
        guard let index = indexes.referenceIndexOfSlot[slot], index.isBuilt,
            let serial = reference(row: row, slot: slot)
        else { return }
        index.rowsBySerial[serial]?.remove(Int32(row))
        if index.rowsBySerial[serial]?.isEmpty == true { index.rowsBySerial[serial] = nil }
    }

    /// Puts `row` into the index of `slot` (after the cell changed).
    @inline(__always)
    func rereference(row: Int, slot: Int) {
        guard let index = indexes.referenceIndexOfSlot[slot], index.isBuilt,
            let serial = reference(row: row, slot: slot)
        else { return }
        index.rowsBySerial[serial, default: []].insert(Int32(row))
    }

    /// Takes a row being deleted out of every reference index.
    func unreferenceAll(row: Int) {
        for slot in indexes.referenceSlots { unreference(row: row, slot: slot) }
    }
}
