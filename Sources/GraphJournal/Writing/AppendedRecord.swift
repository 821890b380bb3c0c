extension Journal {
    /// What an append's record step wrote: the transaction record's raw and stored payload
    /// lengths, the chunks to write after the buffer, and, for a record that copies from the
    /// segment's history while records are shipped, its self-contained wire form.
    struct AppendedRecord {
        var raw: Int
        var stored: Int
        var blocks: [[UInt8]] = []
        var selfContained: [UInt8]?
    }
}
