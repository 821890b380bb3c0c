import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import Synchronization
import Testing

// Progress reports and cooperative cancellation of the long operations (Docs/Progress.md):
// each operation runs inside a `Task`, and its progress handler cancels that task at its N-th
// report; the store must then be exactly as before the operation, the user's pending changes
// included, in memory, on disk and after a reopen.

/// An item of the progress tests, identified by a unique key.
@Entity final class ProgressItem {
    @Attribute(.unique) var key: Int64 = 0
    var name: String = ""
    var size: Int = 0
    var note: String?
}

/// What an item is imported from.
struct ProgressItemSource: Sendable {
    var key: Int64
    var name: String
    var size: Int
}

extension ProgressItem: ImportableUniqueObject {
    typealias ImportSource = ProgressItemSource
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<ProgressItem, Int64> { \.key }
    static func uniqueID(from source: ProgressItemSource, in context: ModelContext) throws -> Int64? { source.key }
    func update(from source: ProgressItemSource, in context: ModelContext) throws {
        name = source.name
        size = source.size
    }
}

/// A line imported without an ID (``ImportableObject``).
@Entity final class ProgressLine {
    var text: String = ""
}

extension ProgressLine: ImportableObject {
    typealias ImportSource = String
    func didInsert(from source: String, in context: ModelContext) throws { text = source }
}

/// The seed of the random cancellation points; OBJECTGRAPH_PROGRESS_SEED replays a run.
private let progressSeed =
    ProcessInfo.processInfo.environment["OBJECTGRAPH_PROGRESS_SEED"].flatMap(UInt64.init)
    ?? UInt64.random(in: 0 ... .max)

private let progressSchema: Schema = {
    do { return try Schema(ProgressItem.self, ProgressLine.self) } catch { preconditionFailure("\(error)") }
}()

/// Items in the base store.
private let progressBaseItems = 12_000

/// The import's sources: keys 0..<16,000 (updates, then inserts) and the key the user inserts.
private let progressImportSources: [ProgressItemSource] =
    (0..<16_000).map { ProgressItemSource(key: Int64($0), name: "imported \($0)", size: $0 * 2) }
    + [ProgressItemSource(key: 900_000, name: "imported over the user's insert", size: 1)]

private let progressImportLines: [String] = (0..<10_000).map { "line \($0)" }

/// A document of the items `keys`, for the mapping and the sync.
private func progressItemsJSON(_ keys: Range<Int>, name: String) -> Data {
    Data(
        ("[" + keys.map { #"{"key": \#($0), "name": "\#(name) \#($0)", "size": \#($0 % 97)}"# }.joined(separator: ",")
            + "]").utf8)
}

private let progressMappingJSON = progressItemsJSON(0..<16_000, name: "mapped")
/// The sync lists keys 3,000 on: its sweep removes the first 3,000 items.
private let progressSyncJSON = progressItemsJSON(3_000..<16_000, name: "synced")

private func progressItemMapping() throws -> EntityMapping<ProgressItem> {
    var m = EntityMapping(ProgressItem.self)
    try m.map("key", "name", "size")
    return m
}

/// The base store, written once: 12,000 items in 6 saves of 2,000 with notes that compress
/// poorly (so that the open's replay makes several reports, one per 256 KiB), then a save
/// that updates every eighth item (superseded values for the compaction), and 100 lines.
private let progressBaseStore: URL = {
    let dir = temporaryStoreDirectory("progressBase")
    do {
        let store = try ObjectStore.open(at: dir, schema: progressSchema, options: StoreOptions(durability: .none))
        let context = store.context
        var rng = SeededGenerator(seed: 7)
        for save in 0..<6 {
            for i in (save * 2_000)..<((save + 1) * 2_000) {
                let item = try context.insert(ProgressItem.self)
                item.key = Int64(i)
                item.name = "item \(i)"
                item.size = i
                item.note = Data((0..<48).map { _ in UInt8.random(in: 0 ... .max, using: &rng) }).base64EncodedString()
            }
            try context.save()
        }
        for item in try context.objects(of: ProgressItem.self) where item.key % 8 == 0 { item.size = -item.size }
        for i in 0..<100 { try context.insert(ProgressLine.self).text = "base line \(i)" }
        try context.save()
        try store.close()
    } catch {
        preconditionFailure("base store: \(error)")
    }
    return dir
}()

/// A copy of the base store in a fresh directory.
private func copyOfProgressBaseStore(_ name: String = #function) throws -> URL {
    let dir = temporaryStoreDirectory(name)
    try FileManager.default.createDirectory(at: dir.deletingLastPathComponent(), withIntermediateDirectories: true)
    try FileManager.default.copyItem(at: progressBaseStore, to: dir)
    return dir
}

/// The user's pending changes before the operation: one that the operation also changes
/// (an update of item 10, which every operation touches), an insert the import updates, a
/// deletion, and an object of another entity.
private func makeProgressUserChanges(_ context: ModelContext) throws {
    guard let ten = try context.object(ProgressItem.self, where: \.key, equals: 10) else {
        throw CocoaError(.fileReadUnknown)
    }
    ten.name = "edited by the user"
    ten.note = nil
    let mine = try context.insert(ProgressItem.self)
    mine.key = 900_000
    mine.name = "inserted by the user"
    if let twenty = try context.object(ProgressItem.self, where: \.key, equals: 20) { context.delete(twenty) }
    try context.insert(ProgressLine.self).text = "the user's line"
}

/// Every object's values, one line each, sorted: what a store holds.
private func progressValuesDump(_ context: ModelContext) throws -> String {
    var lines: [String] = []
    for entity in context.schema.entities {
        for object in try context.objects(ofEntityNamed: entity.name) {
            let values = try entity.attributes.map {
                "\($0.name)=\(String(describing: try object.attributeValue(forKey: $0.name)))"
            }
            lines.append("\(entity.name)/\(object.objectID?.serial ?? 0) " + values.joined(separator: " "))
        }
    }
    return lines.sorted().joined(separator: "\n")
}

/// ``progressValuesDump(_:)`` and the pending changes: which objects are inserted, updated (with
/// their committed values) and deleted.
private func progressFullDump(_ context: ModelContext) throws -> String {
    var lines = [try progressValuesDump(context), "hasChanges \(context.hasChanges)"]
    lines += context.insertedObjects.map { "inserted \($0.objectID.map { "\($0)" } ?? "?")" }.sorted()
    lines += try context.updatedObjects.map { object in
        let committed = try object.committedValues().sorted { $0.key < $1.key }.map {
            "\($0.key)=\(String(describing: $0.value))"
        }
        return "updated \(object.objectID.map { "\($0)" } ?? "?") committed " + committed.joined(separator: " ")
    }.sorted()
    lines += context.deletedObjects.map { "deleted \($0.objectID.map { "\($0)" } ?? "?")" }.sorted()
    return lines.joined(separator: "\n")
}

/// The first line where two dumps differ, both versions; nil when they are equal (a failure
/// then names one line, not two dumps of thousands).
private func difference(_ a: String, _ b: String) -> String? {
    guard a != b else { return nil }
    let x = a.split(separator: "\n", omittingEmptySubsequences: false),
        y = b.split(separator: "\n", omittingEmptySubsequences: false)
    let i = zip(x, y).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(x.count, y.count)
    return "line \(i): \(i < x.count ? String(x[i]) : "(none)") / \(i < y.count ? String(y[i]) : "(none)")"
}

/// Every file of a store directory and its bytes.
private func progressStoreFiles(_ dir: URL) throws -> [String: Data] {
    var result: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
        result[name] = try Data(contentsOf: dir.appendingPathComponent(name))
    }
    return result
}

/// Records the reports of an operation and cancels the task running it at the `cancelAt`-th.
private final class ProgressLog: Sendable {
    private let state = Mutex<[WorkProgress]>([])
    let cancelAt: Int?

    init(cancelAt: Int?) { self.cancelAt = cancelAt }

    var reports: [WorkProgress] { state.withLock { $0 } }

    var handler: ProgressHandler {
        { [self] progress in
            let n = state.withLock { reports in
                reports.append(progress)
                return reports.count
            }
            // The handler runs on the operation's thread, inside its task: a real Task.cancel().
            if n == cancelAt { withUnsafeCurrentTask { $0?.cancel() } }
        }
    }
}

/// What a run of an operation on a copy of the base store did.
private struct ProgressOperationRun: Sendable {
    var directory: URL
    var reports: [WorkProgress]
    var cancelled = false
    var failure: String?
    var before = ""
    var after = ""
    var valuesBefore = ""
    var filesBefore: [String: Data] = [:]
    var filesAfter: [String: Data] = [:]
}

/// An operation on an open store, reporting to the handler it is given.
private typealias ProgressStoreOperation = @Sendable (ObjectStore, @escaping ProgressHandler) throws -> Void

/// Runs `operation` inside a task on a copy of the base store with the user's pending changes,
/// cancelling the task at report `cancelAt`. A cancelled operation's store then saves the
/// user's changes (it must still be usable) and closes.
private func runProgressOperation(
    _ operation: @escaping ProgressStoreOperation, cancelAt: Int?, name: String = #function
) async throws -> ProgressOperationRun {
    let dir = try copyOfProgressBaseStore(name)
    return try await Task { () throws -> ProgressOperationRun in
        let store = try ObjectStore.open(at: dir, schema: progressSchema)
        try makeProgressUserChanges(store.context)
        let log = ProgressLog(cancelAt: cancelAt)
        var result = ProgressOperationRun(directory: dir, reports: [])
        result.before = try progressFullDump(store.context)
        result.valuesBefore = try progressValuesDump(store.context)
        result.filesBefore = try progressStoreFiles(dir)
        do {
            try operation(store, log.handler)
        } catch is CancellationError {
            result.cancelled = true
        } catch let error as StoreError where error.code == .cancelled {
            result.cancelled = true
        } catch {
            result.failure = "\(error)"
        }
        result.reports = log.reports
        result.after = try progressFullDump(store.context)
        result.filesAfter = try progressStoreFiles(dir)
        if result.cancelled { try store.context.save() }
        try store.close()
        return result
    }.value
}

/// Checks the rules every operation's reports follow: the first reports 0, `completed` never
/// decreases, the total never shrinks once known, the last has `completed == total`, one
/// operation and unit throughout, and at most one report per `stride` units besides the
/// first, the final and one per `extra` point (a sync's runs, a compaction's columns).
private func expectWellFormedProgress(
    _ reports: [WorkProgress], _ operation: WorkProgress.Operation, _ unit: WorkProgress.Unit, stride: Int = 4_096,
    extra: Int = 0,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let first = reports.first, let last = reports.last else {
        Issue.record("no report", sourceLocation: sourceLocation)
        return
    }
    #expect(first.completed == 0, sourceLocation: sourceLocation)
    #expect(reports.allSatisfy { $0.operation == operation && $0.unit == unit }, sourceLocation: sourceLocation)
    for (a, b) in zip(reports, reports.dropFirst()) {
        #expect(a.completed <= b.completed, "\(a) then \(b)", sourceLocation: sourceLocation)
        if let t = a.total { #expect((b.total ?? -1) >= t, "\(a) then \(b)", sourceLocation: sourceLocation) }
    }
    #expect(last.total != nil && last.completed == last.total, "\(last)", sourceLocation: sourceLocation)
    #expect(last.fractionCompleted == 1, sourceLocation: sourceLocation)
    let bound = 2 + (last.total ?? 0) / stride + extra
    #expect(reports.count <= bound, "\(reports.count) reports, at most \(bound)", sourceLocation: sourceLocation)
}

@Suite("Progress reports and cancellation of long operations")
struct ProgressCancellationTests {
    private static let importUnique: ProgressStoreOperation = { store, progress in
        _ = try store.context.importUniqueObjects(
            ProgressItem.self, sourceArray: progressImportSources, progress: progress)
    }
    private static let importPlain: ProgressStoreOperation = { store, progress in
        _ = try store.context.importObjects(ProgressLine.self, sourceArray: progressImportLines, progress: progress)
    }
    private static let mapping: ProgressStoreOperation = { store, progress in
        try store.context.map(progressMappingJSON, with: try progressItemMapping(), progress: progress)
    }
    // The sync sweeps most stored items (their keys are not in its document): it consents with
    // `.unlimited`, past the default limit of half.
    private static let sync: ProgressStoreOperation = { store, progress in
        try store.context.sync([ProgressItem.self], sweepLimit: .unlimited, progress: progress) { sync in
            try sync.map(progressSyncJSON, with: try progressItemMapping())
        }
    }
    private static let compaction: ProgressStoreOperation = { store, progress in
        try store.compact(progress: progress)
    }

    // MARK: Reports

    @Test func importReportsStartAtZeroRiseEvery4096ObjectsAndEndAtTheTotal() async throws {
        let unique = try await runProgressOperation(Self.importUnique, cancelAt: nil)
        #expect(!unique.cancelled && unique.failure == nil)
        expectWellFormedProgress(unique.reports, .import, .objects)
        #expect(unique.reports.map(\.completed) == [0, 4_096, 8_192, 12_288, 16_001])
        #expect(unique.reports.allSatisfy { $0.total == 16_001 }, "the distinct IDs")
        let plain = try await runProgressOperation(Self.importPlain, cancelAt: nil)
        expectWellFormedProgress(plain.reports, .import, .objects)
        #expect(plain.reports.map(\.completed) == [0, 4_096, 8_192, 10_000])
        #expect(plain.reports.allSatisfy { $0.total == 10_000 })
        #expect(plain.reports[1].description == "import: 4,096 of 10,000 objects (40.9 %)")
    }

    @Test func anImportFromASequenceThatIsNotARandomAccessCollectionReportsItsTotalAtTheEnd() throws {
        let context = ModelContext(schema: progressSchema)
        let log = ProgressLog(cancelAt: nil)
        // A lazy filter is a collection whose count would call the filter on every source.
        let filtered = progressImportLines.lazy.filter { !$0.isEmpty }
        _ = try context.importObjects(ProgressLine.self, sourceArray: filtered, progress: log.handler)
        expectWellFormedProgress(log.reports, .import, .objects)
        #expect(log.reports.dropLast().allSatisfy { $0.total == nil })
        #expect(log.reports.last?.total == 10_000)
        #expect(log.reports.first?.fractionCompleted == nil)
    }

    @Test func mappingSyncCompactionAndOpenReportWellFormedProgress() async throws {
        let mapping = try await runProgressOperation(Self.mapping, cancelAt: nil)
        #expect(mapping.failure == nil)
        expectWellFormedProgress(mapping.reports, .mapping, .records)
        #expect(mapping.reports.last?.completed == 16_000)

        let sync = try await runProgressOperation(Self.sync, cancelAt: nil)
        #expect(sync.failure == nil)
        // Before the body maps anything the sync knows no total; its one run then reports
        // when it starts, every 4,096 records and when it ends; the final report follows the save.
        expectWellFormedProgress(sync.reports, .sync, .records, extra: 2)
        #expect(sync.reports.first?.total == nil)
        #expect(sync.reports.last?.completed == 13_000)

        let compaction = try await runProgressOperation(Self.compaction, cancelAt: nil)
        #expect(compaction.failure == nil)
        expectWellFormedProgress(compaction.reports, .compaction, .objects, extra: 8)
        #expect(
            compaction.reports.last?.total == progressBaseItems + 100,
            "the committed objects; pending ones stay pending")
        #expect(compaction.reports.count >= 4, "the large entity's objects count column by column")

        let dir = try copyOfProgressBaseStore()
        let log = ProgressLog(cancelAt: nil)
        var options = StoreOptions()
        options.progress = log.handler
        let store = try ObjectStore.open(at: dir, schema: progressSchema, options: options)
        let onDisk = store.stats.bytesOnDisk
        try store.close()
        expectWellFormedProgress(log.reports, .open, .bytes, stride: 1 << 18, extra: 1)
        #expect(log.reports.last?.total == Int(onDisk))
        #expect(log.reports.count >= 3, "\(log.reports)")
    }

    @Test func cancellingAtTheFinalReportChangesNothing() async throws {
        // The final report comes once the work is done: a cancellation then is too late to
        // undo it, and the operation returns normally.
        let counted = try await runProgressOperation(Self.importUnique, cancelAt: nil)
        let late = try await runProgressOperation(Self.importUnique, cancelAt: counted.reports.count)
        #expect(!late.cancelled && late.failure == nil)
        #expect(difference(counted.after, late.after) == nil)
    }

    // MARK: Cancellation

    /// Cancels `operation` at random reports (not the final one) and checks that the store is
    /// as before: the full dump in memory (the user's pending changes included), the files,
    /// and after saving the user's changes, closing and reopening, every value.
    private func cancelAtRandomReports(
        _ label: String, _ operation: @escaping ProgressStoreOperation, changesObjects: Bool = true, rounds: Int = 3
    ) async throws {
        var rng = SeededGenerator(seed: progressSeed ^ UInt64(label.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) }))
        let counted = try await runProgressOperation(operation, cancelAt: nil, name: label)
        #expect(counted.failure == nil && !counted.cancelled)
        let reports = counted.reports.count
        #expect(reports >= 3, "\(label): \(reports) reports")
        if changesObjects {
            #expect(
                difference(counted.before, counted.after) != nil,
                "\(label): the operation changes the store when not cancelled")
        } else {
            #expect(
                counted.filesAfter != counted.filesBefore,
                "\(label): the operation rewrites the files when not cancelled")
        }
        var points = Set([1])
        while points.count < min(rounds, reports - 1) { points.insert(Int.random(in: 1..<reports, using: &rng)) }
        print(
            "\(label): seed \(progressSeed) (OBJECTGRAPH_PROGRESS_SEED), \(reports) reports, cancelled at \(points.sorted())"
        )
        for point in points.sorted() {
            let cancelled = try await runProgressOperation(operation, cancelAt: point, name: label)
            #expect(cancelled.cancelled, "\(label) cancelled at report \(point): \(cancelled.failure ?? "completed")")
            #expect(cancelled.reports.count == point, "\(label): no report after the cancellation was noticed")
            #expect(
                difference(cancelled.before, cancelled.after) == nil,
                "\(label) cancelled at report \(point): the context changed")
            #expect(
                cancelled.filesAfter == cancelled.filesBefore,
                "\(label) cancelled at report \(point): the files changed")
            let reopened = try ObjectStore.open(at: cancelled.directory, schema: progressSchema)
            let values = try progressValuesDump(reopened.context)
            try reopened.close()
            #expect(
                difference(cancelled.valuesBefore, values) == nil,
                "\(label) cancelled at report \(point): the user's changes, saved, reopen otherwise")
        }
    }

    @Test func aCancelledUniqueImportLeavesTheStoreAsBefore() async throws {
        try await cancelAtRandomReports("importUniqueObjects", Self.importUnique)
    }

    @Test func aCancelledImportOfObjectsLeavesTheStoreAsBefore() async throws {
        try await cancelAtRandomReports("importObjects", Self.importPlain)
    }

    @Test func aCancelledMappingLeavesTheStoreAsBefore() async throws {
        try await cancelAtRandomReports("map", Self.mapping)
    }

    @Test func aCancelledSyncSweepsNothingAndLeavesTheStoreAsBefore() async throws {
        try await cancelAtRandomReports("sync", Self.sync)
    }

    @Test func aCancelledCompactionKeepsTheOldJournalIntactAndTheStoreUsable() async throws {
        try await cancelAtRandomReports("compact", Self.compaction, changesObjects: false)
    }

    @Test func aCompactionAbandonedJustBeforeTheSwitchRemovesItsFilesAndKeepsTheJournal() throws {
        // The last point at which a compaction notices its task's cancellation: the new base
        // and log are written and synced, MANIFEST not yet replaced.
        let dir = try copyOfProgressBaseStore()
        let original = try progressStoreFiles(dir)
        let journal = try Journal.open(directory: dir)
        let records = try journal.records()
        var asked = false
        let switched = try journal.compact(
            base: [[1, 2, 3]], schema: [9],
            proceed: {
                asked = true
                return false
            })
        #expect(asked && !switched)
        #expect(try progressStoreFiles(dir) == original)
        #expect(try journal.records() == records)
        try journal.close()
        let store = try ObjectStore.open(at: dir, schema: progressSchema)
        #expect(try store.context.count(of: ProgressItem.self) == progressBaseItems)
        try store.close()
    }

    @Test func aSyncWhoseBodyCatchesTheCancellationStillThrowsIt() async throws {
        let outcome = try await runProgressOperation(
            { store, progress in
                try store.context.sync([ProgressItem.self], sweepLimit: .unlimited, progress: progress) { sync in
                    _ = try? sync.map(progressSyncJSON, with: try progressItemMapping())
                }
            }, cancelAt: 3)
        #expect(outcome.cancelled, "\(outcome.failure ?? "completed")")
        #expect(difference(outcome.before, outcome.after) == nil)
    }

    @Test func aCancelledOpenLeavesTheDirectoryByteIdenticalAndUnlocked() async throws {
        var rng = SeededGenerator(seed: progressSeed)
        let dir = try copyOfProgressBaseStore()
        let original = try progressStoreFiles(dir)
        let counted = ProgressLog(cancelAt: nil)
        var options = StoreOptions()
        options.progress = counted.handler
        try ObjectStore.open(at: dir, schema: progressSchema, options: options).close()
        let reports = counted.reports.count
        #expect(reports >= 3)
        #expect(try progressStoreFiles(dir) == original, "an open writes nothing")
        var points = Set([1])
        while points.count < min(3, reports - 1) { points.insert(Int.random(in: 1..<reports, using: &rng)) }
        print(
            "open: seed \(progressSeed) (OBJECTGRAPH_PROGRESS_SEED), \(reports) reports, cancelled at \(points.sorted())"
        )
        for point in points.sorted() {
            let log = ProgressLog(cancelAt: point)
            var cancelling = StoreOptions()
            cancelling.progress = log.handler
            let outcome = await Task { () -> String in
                do throws(StoreError) {
                    try ObjectStore.open(at: dir, schema: progressSchema, options: cancelling).close()
                    return "opened"
                } catch {
                    return error.code == .cancelled ? "cancelled" : "\(error)"
                }
            }.value
            #expect(outcome == "cancelled", "cancelled at report \(point)")
            #expect(log.reports.count == point)
            #expect(try progressStoreFiles(dir) == original, "cancelled at report \(point): the directory changed")
        }
        // The lock was released: the store opens, with every object.
        let store = try ObjectStore.open(at: dir, schema: progressSchema)
        #expect(try store.context.count(of: ProgressItem.self) == progressBaseItems)
        try store.close()
    }

    @Test func anOpenCancelledBeforeItStartsCreatesNothing() async throws {
        let dir = temporaryStoreDirectory()
        let outcome = await Task { () -> String in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(StoreError) {
                try ObjectStore.open(at: dir, schema: progressSchema).close()
                return "opened"
            } catch {
                return error.code == .cancelled ? "cancelled" : "\(error)"
            }
        }.value
        #expect(outcome == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: dir.path))
    }
}

// MARK: Docs/Progress.md's worked example, compiled (its `Package` is `ProgressDocPackage` here)

/// A package of the example daemon, identified by its name.
@Entity final class ProgressDocPackage {
    @Attribute(.unique) var name: String = ""
    var version: String = ""
}

/// One record of the package index, as the daemon reads it.
struct ProgressDocRecord: Sendable {
    var name: String
    var version: String
}

extension ProgressDocPackage: ImportableUniqueObject {
    typealias ImportSource = ProgressDocRecord
    static var uniqueIDKeyPath: ReferenceWritableKeyPath<ProgressDocPackage, String> { \.name }
    static func uniqueID(from source: ProgressDocRecord, in context: ModelContext) throws -> String? { source.name }
    func update(from source: ProgressDocRecord, in context: ModelContext) throws { version = source.version }
}

/// A one-line progress bar on standard error, drawn only on a terminal.
struct ProgressDocBar: Sendable {
    let label: String
    private let onTerminal = isatty(STDERR_FILENO) == 1

    init(label: String) { self.label = label }

    /// Draws a report: `importing [=========>          ]  45%  45,056 of 100,000 objects`.
    @Sendable func draw(_ progress: WorkProgress) {
        guard onTerminal, let fraction = progress.fractionCompleted else { return }
        let filled = Int(fraction * 30)
        let bar =
            String(repeating: "=", count: filled)
            + (filled < 30 ? ">" + String(repeating: " ", count: 29 - filled) : "")
        let line =
            "\r\(label) [\(bar)] \(Int(fraction * 100))%  \(progress.completed) of \(progress.total ?? 0) \(progress.unit.rawValue)\u{1B}[K"
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Erases the line.
    func finish() {
        if onTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}

/// Waits for `task`, cancelling it when the process receives one of `signals` meanwhile
/// (they do not end the process until the task is done).
private func value<T: Sendable>(of task: Task<T, any Error>, cancelledBy signals: [Int32]) async throws -> T {
    let watched = signals.map { number in
        let previous = signal(number, SIG_IGN)  // the dispatch source receives it instead
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        return (number, previous, source)
    }
    defer {
        for (number, previous, source) in watched {
            source.cancel()
            signal(number, previous)
        }
    }
    return try await task.value
}

/// Imports `records` into the store at `url` from a task that SIGTERM or SIGINT cancels:
/// then nothing of the import is kept and the store is as it was.
private func importPackages(_ records: [ProgressDocRecord], into url: URL) async throws -> Int {
    let work = Task { () throws -> Int in
        let store = try ObjectStore.open(at: url, schema: try Schema(ProgressDocPackage.self))
        defer { try? store.close() }
        let bar = ProgressDocBar(label: "importing")
        defer { bar.finish() }
        let packages = try store.context.importUniqueObjects(
            ProgressDocPackage.self, sourceArray: records, progress: bar.draw)
        try store.context.save()
        return packages.count
    }
    return try await value(of: work, cancelledBy: [SIGTERM, SIGINT])  // CancellationError after a signal
}

@Suite("Docs/Progress.md's example")
struct ProgressDocExampleTests {
    @Test func theDaemonImportsAndACancelledRunKeepsNothing() async throws {
        let dir = temporaryStoreDirectory()
        let records = (0..<10_000).map { ProgressDocRecord(name: "package-\($0)", version: "1.\($0)") }
        #expect(try await importPackages(records, into: dir) == 10_000)
        // The same task, cancelled as the signal handler would: the import is undone.
        let cancelled = Task { () throws -> Int in
            let store = try ObjectStore.open(at: dir, schema: try Schema(ProgressDocPackage.self))
            defer { try? store.close() }
            let newer = records.map { ProgressDocRecord(name: $0.name, version: $0.version + "+1") }
            let packages = try store.context.importUniqueObjects(
                ProgressDocPackage.self, sourceArray: newer,
                progress: { progress in
                    if progress.completed >= 4_096 { withUnsafeCurrentTask { $0?.cancel() } }
                })
            try store.context.save()
            return packages.count
        }
        let outcome = await cancelled.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        let store = try ObjectStore.open(at: dir, schema: try Schema(ProgressDocPackage.self))
        defer { try? store.close() }
        #expect(try store.context.objects(of: ProgressDocPackage.self).allSatisfy { !$0.version.hasSuffix("+1") })
    }
}
