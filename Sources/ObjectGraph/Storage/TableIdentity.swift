/// Which row holds which object: an ``EntityTable``'s map between serials (the stable number in
/// an ``ObjectID``) and rows (the row's place in the columns), the next serial to hand out, and
/// the rows free for reuse.
///
/// Invariants (with `rows` the table's row count):
/// - `serialOfRow` has one entry per row: the row's serial, 0 for a freed row.
/// - `rowOfSerial[s - 1]` is the row holding serial `s`, -1 when none does (its row was freed
///   or its insert vanished, or the serial was never used); where it is a row,
///   `serialOfRow[rowOfSerial[s - 1]] == s`.
/// - `nextSerial` is greater than every serial ever mapped: a retired serial is never reused.
/// - `freeRows` lists exactly the rows with serial 0 (flags 0), `liveCount` the others.
struct TableIdentity {
    /// Per row, its serial (0 for a freed row): counting (stored as nothing) while row `r` has
    /// serial `r + 1` (``CountingArray``).
    var serialOfRow = CountingArray<UInt64>(offset: 1)
    /// Row `serial - 1`; -1 for a serial with no live row. Counting while serial `s` is row
    /// `s - 1`.
    var rowOfSerial = CountingArray<Int32>(offset: 0)
    /// The serial the next inserted object gets.
    var nextSerial: UInt64 = 1
    /// Freed rows, reused by the next allocations (last freed first).
    var freeRows: [Int32] = []
    /// The rows not free: live rows, including deleted and vanished ones not yet released.
    var liveCount = 0

    /// The row of `serial`, nil when no live row has it.
    @inline(__always)
    func row(ofSerial serial: UInt64) -> Int? {
        guard serial >= 1, serial <= UInt64(rowOfSerial.count) else { return nil }
        let r = rowOfSerial[Int(serial - 1)]
        return r < 0 ? nil : Int(r)
    }
}
