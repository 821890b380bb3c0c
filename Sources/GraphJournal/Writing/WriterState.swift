internal import Foundation

/// Everything `state` protects.
struct WriterState: Sendable {
    var files: [LiveFile]
    var activeFD: Int32
    var activeHeader: SegmentHeader
    var activeSeed: UInt32
    var tail: Tail
    /// The tail when the active segment started (durable: roll and compaction sync).
    var segmentStartTail: Tail
    var pendingTruncation: Int64?
    var nextFileNumber: UInt64
    var lockFD: Int32 = -1
    var epoch: UInt64 = 0
    var closed = false
    var broken: JournalError?
    var lastSync = ContinuousClock.now
    /// Descriptors of segments no longer active, closed under `gate`.
    var retiredFDs: [Int32] = []
    /// Segment number and end of the last successful fdatasync.
    var lastSynced: (segment: UInt64, end: Int64) = (0, 0)
    /// Records below this sequence are durable (for ``JournalOptions/onDurable``).
    var durableBefore: UInt64 = 0
    /// Records appended but not yet handed to ``JournalOptions/onDurable``, in order.
    var undelivered: [ShippedRecord] = []
    /// The active segment's compression history (``HistoryEncoder``).
    var history: WriterHistory = .rebuild
    /// Seals the records this writer run writes, when the journal is encrypted.
    var sealer: Sealer?
    /// Whether a live record is sealed (the journal's identity is then settled).
    var holdsSealedRecords = false
    /// The identifiers of the keys the live sealed records name.
    var keyIDs: Set<String> = []

    /// Where the writer stands with the active segment's history.
    enum WriterHistory: Sendable {
        /// The segment has none (version 1), or it could not be rebuilt: records are written
        /// self-contained until the next segment.
        case off
        /// Unknown (after open, or after an append was cut off): rebuilt from the segment's
        /// records before the next append.
        case rebuild
        /// Up to date with the segment's last record.
        case ready(HistoryEncoder)
    }

    /// The history of a segment just started with `header`.
    static func freshHistory(for header: SegmentHeader) -> WriterHistory {
        guard header.usesHistory, let encoder = HistoryEncoder() else { return .off }
        return .ready(encoder)
    }

    /// Whether records were written since the last fdatasync.
    var isDirty: Bool { lastSynced != (activeHeader.number, tail.end) }

    func checkUsable() throws(JournalError) {
        if closed { throw JournalError(.closed, "the journal is closed") }
        if let broken { throw broken }
    }
}
