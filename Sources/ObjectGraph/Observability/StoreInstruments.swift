package import CoreMetrics
package import Foundation
internal import GraphJournal
package import Tracing

/// The metrics and spans of one store (Docs/Observability.md lists every name and dimension).
///
/// Made once per opened journal from ``StoreOptions/metricsFactory`` and
/// ``StoreOptions/tracer`` (the process's bootstrapped `MetricsSystem` and
/// `InstrumentationSystem` when they are nil, which are no-ops until an application bootstraps
/// them), so that a save touches no global lock: it increments handlers made here. Every metric
/// carries the dimension `store`, ``StoreOptions/metricsLabel`` or the directory's name.
///
/// `package` so that the replication product reports its own figures through the same
/// instruments and names.
package final class StoreInstruments: Sendable {
    package let tracer: any Tracer
    package let factory: any MetricsFactory
    /// `[("store", label)]`: the dimension every metric of this store carries.
    package let dimensions: [(String, String)]

    let saves: Counter
    let saveDuration: CoreMetrics.Timer
    let groupCommitSize: Recorder
    let fsyncDuration: CoreMetrics.Timer
    let journalBytes: Gauge
    let journalRecords: Gauge
    let compactions: Counter
    let failedCompactions: Counter
    let compactionDuration: CoreMetrics.Timer
    let snapshotPublishDuration: CoreMetrics.Timer
    let syncs: Counter
    let mappingRuns: Counter

    package init(options: StoreOptions, directory: URL) {
        factory = options.metricsFactory ?? MetricsSystem.factory
        tracer = options.tracer ?? InstrumentationSystem.tracer
        let label = options.metricsLabel ?? directory.lastPathComponent
        dimensions = [("store", label)]
        saves = Counter(label: "objectgraph_saves_total", dimensions: dimensions, factory: factory)
        saveDuration = CoreMetrics.Timer(
            label: "objectgraph_save_duration_seconds", dimensions: dimensions, factory: factory)
        groupCommitSize = Recorder(
            label: "objectgraph_group_commit_transactions", dimensions: dimensions, aggregate: true, factory: factory)
        fsyncDuration = CoreMetrics.Timer(
            label: "objectgraph_fsync_duration_seconds", dimensions: dimensions, factory: factory)
        journalBytes = Gauge(label: "objectgraph_journal_bytes", dimensions: dimensions, factory: factory)
        journalRecords = Gauge(label: "objectgraph_journal_records", dimensions: dimensions, factory: factory)
        compactions = Counter(label: "objectgraph_compactions_total", dimensions: dimensions, factory: factory)
        failedCompactions = Counter(
            label: "objectgraph_compaction_failures_total", dimensions: dimensions, factory: factory)
        compactionDuration = Timer(
            label: "objectgraph_compaction_duration_seconds", dimensions: dimensions, factory: factory)
        snapshotPublishDuration = Timer(
            label: "objectgraph_snapshot_publish_duration_seconds", dimensions: dimensions, factory: factory)
        syncs = Counter(label: "objectgraph_syncs_total", dimensions: dimensions, factory: factory)
        mappingRuns = Counter(label: "objectgraph_mapping_runs_total", dimensions: dimensions, factory: factory)
    }

    /// `io` with each `fdatasync` timed into `objectgraph_fsync_duration_seconds`.
    func timingSyncs(_ io: JournalIO) -> JournalIO {
        var timed = io
        let sync = io.fdatasync
        let timer = fsyncDuration
        timed.fdatasync = { (fd) throws(JournalIO.Failure) in
            let start = ContinuousClock.now
            try sync(fd)
            timer.recordNanoseconds(Self.nanoseconds(ContinuousClock.now - start))
        }
        return timed
    }

    // MARK: Spans

    /// Starts a span named `name` (`objectgraph.save`, …) as a child of the task's current
    /// `ServiceContext`, if any.
    package func span(_ name: String, kind: SpanKind = .internal) -> any Span {
        tracer.startSpan(name, context: ServiceContext.current ?? .topLevel, ofKind: kind)
    }

    // MARK: Figures

    /// A save that failed: counted by the code of its error (a ``StoreError`` code, or
    /// `validation`, `cancelled`, `other`).
    func saveFailed(_ error: any Error) {
        factory.makeCounter(
            label: "objectgraph_save_failures_total", dimensions: dimensions + [("code", Self.code(of: error))]
        ).increment(by: 1)
    }

    /// A committed, acknowledged save that began at `start`.
    func saved(since start: ContinuousClock.Instant) {
        saves.increment()
        saveDuration.recordNanoseconds(Self.nanoseconds(ContinuousClock.now - start))
    }

    /// The journal's figures after a save or a compaction.
    func journal(bytes: Int64, records: Int) {
        journalBytes.record(bytes)
        journalRecords.record(records)
    }

    /// One entity's counts of a sync that saved.
    func synced(entity: String, _ counts: SyncCounts) {
        for (outcome, n) in [
            ("inserted", counts.inserted), ("updated", counts.updated), ("unchanged", counts.unchanged),
            ("swept", counts.swept), ("discarded", counts.discarded), ("tombstoned", counts.tombstoned),
            ("invalid", counts.invalid),
        ] where n > 0 {
            factory.makeCounter(
                label: "objectgraph_sync_objects_total",
                dimensions: dimensions + [("entity", entity), ("outcome", outcome)]
            ).increment(by: Int64(n))
        }
    }

    /// A counter of this store with more dimensions (made through the factory, which caches it
    /// for the factories that cache; the replication product's per-subject counters).
    package func counter(_ label: String, _ more: [(String, String)] = []) -> Counter {
        Counter(label: label, dimensions: dimensions + more, factory: factory)
    }

    /// A gauge of this store.
    package func gauge(_ label: String) -> Gauge {
        Gauge(label: label, dimensions: dimensions, factory: factory)
    }

    /// A timer of this store.
    package func timer(_ label: String) -> CoreMetrics.Timer {
        CoreMetrics.Timer(label: label, dimensions: dimensions, factory: factory)
    }

    package static func nanoseconds(_ d: Duration) -> Int64 {
        let (s, a) = d.components
        return s * 1_000_000_000 + a / 1_000_000_000
    }

    /// The dimension value naming why a save failed.
    static func code(of error: any Error) -> String {
        switch error {
        case let e as StoreError: e.code.rawValue
        case is ValidationError: "validation"
        case is CancellationError: "cancelled"
        default: "other"
        }
    }
}

extension Span {
    /// Records `error` on the span and marks it failed.
    package func fail(_ error: any Error) {
        recordError(error)
        setStatus(SpanStatus(code: .error))
    }
}
