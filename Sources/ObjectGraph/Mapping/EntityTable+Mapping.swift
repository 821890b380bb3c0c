extension EntityTable {
    /// Whether `row`'s `slot` holds exactly `cell` (not null, same bytes).
    @inline(__always)
    func holds(_ cell: RawCell, row: Int, slot: Int) -> Bool {
        guard !isNull(row: row, slot: slot) else { return false }
        switch cell {
        case .fixed(let bits): return values[row * stride + slot] == bits
        case .bytes(let b): return arenaHolds(values[row * stride + slot], b)
        }
    }
}
