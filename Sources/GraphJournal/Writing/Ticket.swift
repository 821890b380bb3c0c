/// What an append hands to the sync step.
struct Ticket: Sendable {
    var sequence: UInt64
    var end: Int64
    var epoch: UInt64
    var segment: UInt64
    var syncDue: Bool
}
