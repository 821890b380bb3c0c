/// A live segment file.
struct LiveFile: Sendable {
    var name: String
    var header: SegmentHeader
    /// Bytes of valid records (the file may be longer while a torn tail awaits truncation).
    var size: Int64
}
