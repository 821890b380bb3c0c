/// The progress reports and cancellation checks of one mapping run: to the run's own handler
/// (operation `mapping`) and, for a run inside a sync, to the sync's (operation `sync`, counting
/// the records of every run of the sync).
struct RunProgress {
    private var mapping: _WorkReporter
    private let sync: SyncOperation?
    /// The records the sync's earlier runs mapped.
    private let syncBase: Int

    /// The reports of a run of `total` top-level sources.
    init(_ handler: ProgressHandler?, sync: SyncOperation?, total: Int = 0) {
        mapping = _WorkReporter(handler, .mapping, unit: .records, total: total)
        self.sync = sync
        syncBase = sync?.recordsMapped ?? 0
    }

    /// The first report (no source mapped yet), then a cancellation check.
    func begin() throws(CancellationError) {
        mapping.report(0)
        sync?.reportMapped(syncBase, total: syncBase + (mapping.total ?? 0))
        try mapping.checkCancellation()
    }

    /// Reports and checks cancellation when `i` sources are mapped and a report is due.
    @inline(__always)
    mutating func advance(to i: Int) throws(CancellationError) {
        guard i >= mapping.next else { return }
        mapping.next = i + mapping.stride
        mapping.report(i)
        sync?.reportMapped(syncBase + i, total: syncBase + (mapping.total ?? 0))
        try mapping.checkCancellation()
    }

    /// Throws when the run's task was cancelled.
    func checkCancellation() throws(CancellationError) {
        try mapping.checkCancellation()
    }

    /// The final report: every source mapped (the sync's count includes them from now on).
    mutating func finish() {
        let total = mapping.total ?? 0
        mapping.finish(total)
        guard let sync else { return }
        sync.recordsMapped = syncBase + total
        sync.reportMapped(sync.recordsMapped, total: sync.recordsMapped)
    }
}
