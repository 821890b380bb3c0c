import CoreMetrics
import Foundation
import InMemoryTracing
import MetricsTestKit
import ObjectGraph
import Testing
import Tracing

@Entity final class ObservedItem {
    @Attribute(.unique) var id: Int64 = 0
    var name: String = ""
}

private func observedMapping() throws -> EntityMapping<ObservedItem> {
    var m = EntityMapping(ObservedItem.self)
    try m.map("id", "name")
    return m
}

private func items(_ ids: ClosedRange<Int>, name: String = "n") -> Data {
    Data(("[" + ids.map { #"{"id": \#($0), "name": "\#(name)\#($0)"}"# }.joined(separator: ",") + "]").utf8)
}

@Suite("Observability: metrics and spans after a known workload")
struct ObservabilityTests {
    let store = [("store", "observed")]

    private func options(_ metrics: TestMetrics, tracer: InMemoryTracer? = nil) -> StoreOptions {
        var options = StoreOptions()
        options.metricsFactory = metrics
        options.tracer = tracer
        options.metricsLabel = "observed"
        return options
    }

    @Test func storeMetricsCountWhatAKnownWorkloadDid() throws {
        let metrics = TestMetrics()
        let dir = temporaryStoreDirectory()
        let opened = try ObjectStore.open(
            at: dir, schema: try Schema(ObservedItem.self), options: options(metrics))
        let context = opened.context
        // Two plain saves, one of them with nothing to write.
        _ = try context.insert(ObservedItem.self) { $0.id = 100 }
        try context.save()
        try context.save()
        // A sync inserting 3 and sweeping the object of the plain save, then one updating 1,
        // leaving 1 unchanged and sweeping id 3.
        let mapping = try observedMapping()
        try context.sync([ObservedItem.self], sweepLimit: .unlimited) { try $0.map(items(1...3), with: mapping) }
        let second = Data(#"[{"id": 1, "name": "renamed"}, {"id": 2, "name": "n2"}]"#.utf8)
        try context.sync([ObservedItem.self], sweepLimit: .unlimited) { try $0.map(second, with: mapping) }
        try opened.compact()
        let stats = opened.stats
        try opened.close()
        // A save after close is refused, and counted by its error's code.
        _ = try context.insert(ObservedItem.self) { $0.id = 200 }
        #expect(throws: StoreError.self) { try context.save() }

        #expect(try metrics.expectCounter("objectgraph_saves_total", store).totalValue == 4)
        #expect(try metrics.expectTimer("objectgraph_save_duration_seconds", store).values.count == 4)
        #expect(
            try metrics.expectCounter("objectgraph_save_failures_total", store + [("code", "closed")]).totalValue == 1)
        // Each save that wrote a record synced it (`.always`), and so did the compaction.
        #expect(try metrics.expectTimer("objectgraph_fsync_duration_seconds", store).values.count >= 3)
        #expect(try metrics.expectCounter("objectgraph_compactions_total", store).totalValue == 1)
        #expect(try metrics.expectTimer("objectgraph_compaction_duration_seconds", store).values.count == 1)
        #expect(try metrics.expectGauge("objectgraph_journal_bytes", store).lastValue == Double(stats.bytesOnDisk))
        #expect(try metrics.expectGauge("objectgraph_journal_records", store).lastValue == Double(stats.records))
        #expect(try metrics.expectCounter("objectgraph_syncs_total", store).totalValue == 2)
        #expect(try metrics.expectCounter("objectgraph_mapping_runs_total", store).totalValue == 2)
        func synced(_ outcome: String) throws -> Int64 {
            try metrics.expectCounter(
                "objectgraph_sync_objects_total", store + [("entity", "ObservedItem"), ("outcome", outcome)]
            ).totalValue
        }
        #expect(try synced("inserted") == 3)
        #expect(try synced("updated") == 1)
        #expect(try synced("unchanged") == 1)
        #expect(try synced("swept") == 2)
    }

    @Test func groupCommitAndSnapshotsAreMeasured() async throws {
        let metrics = TestMetrics()
        let store = try AsyncStore(
            at: temporaryStoreDirectory(), schema: try Schema(ObservedItem.self), options: options(metrics))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    try await store.perform { context in
                        _ = try context.insert(ObservedItem.self) { $0.id = Int64(i) }
                    }
                }
            }
            try await group.waitForAll()
        }
        try await store.close()
        #expect(try metrics.expectCounter("objectgraph_saves_total", self.store).totalValue == 40)
        #expect(try metrics.expectTimer("objectgraph_save_duration_seconds", self.store).values.count == 40)
        // Each shared sync records how many transactions it covered: 40 in all.
        let sizes = try metrics.expectRecorder("objectgraph_group_commit_transactions", self.store).values
        #expect(sizes.reduce(0, +) == 40)
        // One sync more covered the close, which is no transaction.
        #expect(sizes.count == store.groupCommitStatistics.syncs - 1)
        #expect(try metrics.expectTimer("objectgraph_snapshot_publish_duration_seconds", self.store).values.count == 40)
    }

    @Test func spansWrapOpenSaveMappingSyncAndCompaction() throws {
        let tracer = InMemoryTracer()
        let metrics = TestMetrics()
        let opened = try ObjectStore.open(
            at: temporaryStoreDirectory(), schema: try Schema(ObservedItem.self),
            options: options(metrics, tracer: tracer))
        let context = opened.context
        let mapping = try observedMapping()
        try context.sync([ObservedItem.self]) { try $0.map(items(1...5), with: mapping) }
        try opened.compact()
        try opened.close()
        _ = try context.insert(ObservedItem.self) { $0.id = 6 }
        #expect(throws: StoreError.self) { try context.save() }  // closed: the span says it failed

        let spans = tracer.finishedSpans
        #expect(
            spans.map(\.operationName) == [
                "objectgraph.open", "objectgraph.mapping", "objectgraph.save", "objectgraph.sync",
                "objectgraph.compaction", "objectgraph.save",
            ])
        let mappingSpan = try #require(spans.first { $0.operationName == "objectgraph.mapping" })
        #expect(mappingSpan.attributes["objectgraph.sources"]?.toSpanAttribute() == .int64(5))
        #expect(mappingSpan.attributes["objectgraph.inserted"]?.toSpanAttribute() == .int64(5))
        let syncSpan = try #require(spans.first { $0.operationName == "objectgraph.sync" })
        #expect(syncSpan.attributes["objectgraph.inserted"]?.toSpanAttribute() == .int64(5))
        // The sync's save ends inside it and reports what it wrote; a failed save is marked.
        let saves = spans.filter { $0.operationName == "objectgraph.save" }
        #expect(saves[0].attributes["objectgraph.inserted"]?.toSpanAttribute() == .int64(5))
        #expect((saves[0].attributes["objectgraph.record_bytes"]?.toSpanAttribute()).map { $0 != .int64(0) } == true)
        #expect(saves[0].status == nil)
        #expect(saves[1].status?.code == .error)
        #expect(saves[1].errors.count == 1)
        let compaction = try #require(spans.first { $0.operationName == "objectgraph.compaction" })
        #expect(compaction.attributes["objectgraph.objects"]?.toSpanAttribute() == .int64(5))
    }
}
