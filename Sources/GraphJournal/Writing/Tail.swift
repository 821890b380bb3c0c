/// The end of the log and the counters as of that end; kept as one value so a failed sync
/// can return to the last synced one.
struct Tail: Sendable, Hashable {
    var end: Int64
    var nextSequence: UInt64
    var schema: [UInt8]?
    var records = 0
    var rawBytes: Int64 = 0
    var storedBytes: Int64 = 0
    var schemaVersions = 0
    /// The payload of the origin record of the last data record that had one.
    var origin: [UInt8]?
    /// An origin record's payload that no data record followed yet.
    var pendingOrigin: [UInt8]?

    mutating func add(rawBytes raw: Int, storedBytes stored: Int) {
        nextSequence += 1
        records += 1
        rawBytes += Int64(raw)
        storedBytes += Int64(stored)
    }

    /// Tracks origins: an origin record is pending until a base or transaction record follows
    /// it (a schema record may come between), which it then describes; a second origin record
    /// replaces a pending one. An empty origin says the record after it has none: a writer
    /// puts one before a record without origin when an origin record is pending (left by a
    /// torn append), so that the leftover is never taken for that record.
    mutating func noteOrigin(type: UInt8, payload: @autoclosure () -> [UInt8]?) {
        switch JournalFormat.RecordType(rawValue: type) {
        case .origin: pendingOrigin = payload() ?? []
        case .transaction, .base: settleOrigin()
        case .schema, nil: break
        }
    }

    /// A pending origin becomes the origin (an empty one changes nothing).
    mutating func settleOrigin() {
        if let p = pendingOrigin, !p.isEmpty { origin = p }
        pendingOrigin = nil
    }
}
