import Foundation
import GraphJournal
import ObjectGraph
import ObjectGraphTestSupport
import PropertyBased
import Synchronization
import Testing

/// A shelf holds books (one-to-many); both have a unique key.
@Entity final class Stack {
    @Attribute(.unique) var code: String = ""
    var room: String = ""
    @Relationship(inverse: "stack") var volumes: [Volume]
}

@Entity final class Volume {
    @Attribute(.unique) var isbn: Int64 = 0
    var title: String = ""
    var pages: Int = 0
    var note: String?
    @Relationship(inverse: "volumes") var stack: Stack?
}

/// A book as a plain value, for readers that send what they read to other tasks.
struct VolumeRecord: Codable, Sendable, Equatable {
    var isbn: Int64
    var title: String
    var pages: Int
    var note: String?
}

private let librarySchema: Schema = {
    do { return try Schema(Stack.self, Volume.self) } catch { preconditionFailure("\(error)") }
}()

private func openLibrary(_ name: String = #function) throws -> AsyncStore {
    var options = StoreOptions()
    options.durability = .none
    return try AsyncStore(at: temporaryStoreDirectory(name), schema: librarySchema, options: options)
}

private struct Boom: Error {}

@Suite("AsyncStore: transactions on the actor, snapshots for readers, changes across tasks")
struct AsyncStoreTests {
    @Test func aSnapshotShowsOneSaveAndNeverChangesAfterwards() async throws {
        let store = try openLibrary()
        #expect(store.snapshot.version == 0)
        try await store.perform { context in
            for i in 1...3 {
                try context.insert(Volume.self) {
                    $0.isbn = Int64(i); $0.title = "Volume \(i)"; $0.pages = 100 * i
                }
            }
        }
        let first = store.snapshot
        #expect(first.version == 1)
        #expect(try first.count(of: Volume.self) == 3)
        try await store.perform { context in
            try context.upsert(Volume.self, where: \.isbn, equals: 2) { $0.title = "Renamed" }
            if let b = try context.object(Volume.self, where: \.isbn, equals: 3) { context.delete(b) }
        }
        let second = store.snapshot
        #expect(second.version == 2)
        // The old snapshot still shows the first save.
        #expect(try first.object(Volume.self, where: \.isbn, equals: 2)?.title == "Volume 2")
        #expect(try first.object(Volume.self, where: \.isbn, equals: 3) != nil)
        #expect(try second.object(Volume.self, where: \.isbn, equals: 2)?.title == "Renamed")
        #expect(try second.object(Volume.self, where: \.isbn, equals: 3) == nil)
        #expect(try second.count(of: Volume.self) == 2)
        try await store.close()
    }

    @Test func fetchFiltersSortsAndWindowsLikeTheContext() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            for i in 1...50 {
                try context.insert(Volume.self) {
                    $0.isbn = Int64(i)
                    $0.title = "T\(i % 7)"
                    $0.pages = (i * 37) % 100
                    $0.note = i % 3 == 0 ? nil : "n\(i)"
                }
            }
        }
        let snapshot = store.snapshot
        let predicates: [Predicate<Volume>] = [
            #Predicate { $0.pages > 40 },
            #Predicate { $0.title == "T3" || $0.pages < 10 },
            #Predicate { $0.note == nil },
            #Predicate { $0.title.contains("3") },  // evaluated by Foundation
        ]
        let sorts: [[SortDescriptor<Volume>]] = [
            [], [SortDescriptor(\.pages, order: .reverse)], [SortDescriptor(\.title), SortDescriptor(\.isbn)],
        ]
        for predicate in predicates {
            for sort in sorts {
                var descriptor = FetchDescriptor<Volume>(predicate: predicate, sortBy: sort)
                descriptor.fetchLimit = 7
                descriptor.fetchOffset = 2
                let window = descriptor
                let fromSnapshot = try snapshot.fetch(window).map(\.isbn)
                let fromContext = try await store.perform { context in try context.fetch(window).map(\.isbn) }
                #expect(fromSnapshot == fromContext)
                #expect(try snapshot.fetchCount(descriptor) == fromContext.count)
            }
        }
        let records = try snapshot.fetch(
            FetchDescriptor<Volume>(predicate: #Predicate { $0.isbn == 3 }), as: VolumeRecord.self)
        #expect(records == [VolumeRecord(isbn: 3, title: "T3", pages: 11, note: nil)])
        try await store.close()
    }

    @Test func uniqueLookupUsesTheIndexEqualityAndRefusesANonUniqueKey() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            try context.insert(Stack.self) {
                $0.code = "café"; $0.room = "A"
            }
            try context.insert(Stack.self) {
                $0.code = "cafe\u{301}"; $0.room = "B"
            }
        }
        let snapshot = store.snapshot
        // Byte equality, as the context's unique index: two spellings, two shelves.
        #expect(try snapshot.object(Stack.self, where: \.code, equals: "café")?.room == "A")
        #expect(try snapshot.object(Stack.self, where: \.code, equals: "cafe\u{301}")?.room == "B")
        #expect(try snapshot.object(Stack.self, uniqueKey: ["code": "café"])?.room == "A")
        #expect(try snapshot.object(Stack.self, where: \.code, equals: "nope") == nil)
        #expect(throws: ObjectGraphError.self) { try snapshot.object(Stack.self, where: \.room, equals: "A") }
        try await store.close()
    }

    @Test(arguments: [513, 600, 5000])
    func everyKeyIsFoundAcrossIndexGrowth(count: Int) async throws {
        // An empty store's index doubles when its 513th key arrives, and that object is the
        // first row of a new row page: the rebuilt index must hold it too. Inserted in one
        // save, and again one save each up to the same count in a second store.
        for oneByOne in [false, true] {
            let store = try openLibrary("growth-\(count)-\(oneByOne)")
            if oneByOne {
                for isbn in 1...count {
                    try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = Int64(isbn) } }
                }
            } else {
                try await store.perform { context in
                    for isbn in 1...count { try context.insert(Volume.self) { $0.isbn = Int64(isbn) } }
                }
            }
            var missing: [Int64] = []
            for isbn in Int64(1)...Int64(count)
            where try store.snapshot.object(Volume.self, where: \.isbn, equals: isbn) == nil {
                missing.append(isbn)
            }
            #expect(missing == [], "one by one: \(oneByOne)")
            try await store.close()
            // And in the first snapshot of the reopened store.
            let reopened = try AsyncStore(at: store.directory, schema: librarySchema)
            missing = []
            for isbn in Int64(1)...Int64(count)
            where try reopened.snapshot.object(Volume.self, where: \.isbn, equals: isbn) == nil {
                missing.append(isbn)
            }
            #expect(missing == [], "after reopen")
            try await reopened.close()
        }
    }

    /// Key paths resolve through a cache shared by every task (by identity, without a lock):
    /// tasks that use literal key paths and tasks that build a new key path object for every
    /// lookup, which keeps replacing the cache's entries, all find the right attribute.
    @Test func keyPathLookupsFromManyTasksAgree() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            for isbn in 1...200 {
                try context.insert(Volume.self) {
                    $0.isbn = Int64(isbn); $0.title = "t\(isbn)"; $0.pages = isbn * 3
                }
            }
        }
        let snapshot = store.snapshot
        let wrong = await withTaskGroup(of: Int.self) { group in
            for task in 0..<6 {
                group.addTask {
                    var wrong = 0
                    let root: KeyPath<Volume, Volume> = \Volume.self
                    for i in 0..<2_000 {
                        let isbn = Int64(1 + (i * 7 + task) % 200)
                        let keyPath: KeyPath<Volume, Int64> =
                            task.isMultiple(of: 2) ? \Volume.isbn : root.appending(path: \Volume.isbn)
                        let volume = try? snapshot.object(Volume.self, where: keyPath, equals: isbn)
                        if volume?.isbn != isbn || volume?.pages != Int(isbn) * 3 { wrong += 1 }
                        // A non-unique attribute's key path: resolved, then refused.
                        if (try? snapshot.object(Volume.self, where: \.pages, equals: 3)) != nil { wrong += 1 }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
        try await store.close()
    }

    @Test func relationshipsLeadToObjectsOfTheSameSnapshot() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            let shelf = try context.insert(Stack.self) { $0.code = "S1" }
            for i in 1...4 {
                let b = try context.insert(Volume.self) {
                    $0.isbn = Int64(i); $0.title = "B\(i)"
                }
                b.stack = shelf
            }
        }
        let before = store.snapshot
        try await store.perform { context in
            let other = try context.insert(Stack.self) { $0.code = "S2" }
            try context.object(Volume.self, where: \.isbn, equals: 1)?.stack = other
        }
        let after = store.snapshot
        #expect(try before.object(Stack.self, where: \.code, equals: "S1")?.volumes.map(\.isbn) == [1, 2, 3, 4])
        #expect(try after.object(Stack.self, where: \.code, equals: "S1")?.volumes.map(\.isbn) == [2, 3, 4])
        #expect(try after.object(Stack.self, where: \.code, equals: "S2")?.volumes.map(\.isbn) == [1])
        #expect(try after.object(Volume.self, where: \.isbn, equals: 1)?.stack?.code == "S2")
        #expect(try before.object(Volume.self, where: \.isbn, equals: 1)?.stack?.code == "S1")
        try await store.close()
    }

    @Test func aSnapshotObjectIsReadOnlyForTheStore() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            _ = try context.insert(Volume.self) {
                $0.isbn = 1; $0.title = "Kept"
            }
        }
        let snapshot = store.snapshot
        let book = try #require(try snapshot.object(Volume.self, where: \.isbn, equals: 1))
        #expect(book.objectID == ObjectID(entityName: "Volume", serial: 1))
        #expect(book.modelContext == nil)
        book.title = "Changed locally"  // detaches this instance only
        #expect(book.title == "Changed locally")
        #expect(try snapshot.object(Volume.self, where: \.isbn, equals: 1)?.title == "Kept")
        let title = try await store.perform { context in
            try context.object(Volume.self, where: \.isbn, equals: 1)?.title
        }
        #expect(title == "Kept")
        let fresh = try #require(try snapshot.object(Volume.self, where: \.isbn, equals: 1))
        // It is in the store already: inserting it into a context is refused.
        let context = ModelContext(schema: librarySchema)
        #expect(throws: ObjectGraphError.self) { try context.insert(fresh) }
        try await store.close()
    }

    @Test func aThrowingTransactionLeavesStoreAndSnapshotAsBefore() async throws {
        let store = try openLibrary()
        try await store.perform { context in
            _ = try context.insert(Volume.self) {
                $0.isbn = 1; $0.title = "One"
            }
        }
        await #expect(throws: Boom.self) {
            try await store.perform { context in
                try context.insert(Volume.self) { $0.isbn = 2 }
                try context.object(Volume.self, where: \.isbn, equals: 1)?.title = "Changed"
                throw Boom()
            }
        }
        #expect(store.snapshot.version == 1)
        let state = try await store.perform { context in
            (
                context.hasChanges, try context.count(of: Volume.self),
                try context.object(Volume.self, where: \.isbn, equals: 1)?.title
            )
        }
        #expect(state.0 == false && state.1 == 1 && state.2 == "One")
        // A save that fails validation: rolled back too, nothing left pending.
        await #expect(throws: ValidationError.self) {
            try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = 1 } }
        }
        #expect(try await store.perform { context in context.hasChanges } == false)
        try await store.close()
    }

    @Test func batchesSaveOneByOneAndCancellationStopsBeforeTheNext() async throws {
        let store = try openLibrary()
        let started = BatchCounter()
        let batches = (0..<20).map { b in (0..<10).map { Int64(b * 10 + $0) } }
        let task = Task {
            try await store.performBatches(batches) { context, batch in
                let n = started.value.withLock {
                    $0 += 1; return $0
                }
                for isbn in batch { try context.insert(Volume.self) { $0.isbn = isbn } }
                if n == 5 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        do {
            _ = try await task.value
            Issue.record("the batches were not cancelled")
        } catch is CancellationError {}
        // Five batches ran and saved; the sixth never started.
        #expect(started.value.withLock { $0 } == 5)
        #expect(try store.snapshot.count(of: Volume.self) == 50)
        let saved = try await store.performBatches(batches.suffix(2)) { context, batch in
            for isbn in batch { try context.insert(Volume.self) { $0.isbn = isbn } }
        }
        #expect(saved == 2)
        #expect(try store.snapshot.count(of: Volume.self) == 70)
        try await store.close()
    }

    @Test func changesReachAnotherTaskAndCoalesceForASlowConsumer() async throws {
        let store = try openLibrary()
        let changes = store.changes
        try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = 1 } }
        try await store.perform { context in
            try context.insert(Volume.self) { $0.isbn = 2 }
            try context.object(Volume.self, where: \.isbn, equals: 1)?.title = "x"
        }
        try await store.perform { context in
            if let b = try context.object(Volume.self, where: \.isbn, equals: 2) { context.delete(b) }
            try context.insert(Volume.self) { $0.isbn = 3 }
        }
        var iterator = changes.makeAsyncIterator()
        let merged = try #require(await iterator.next())
        // Three saves in one element: 1 inserted (its update folded in), 2 inserted and deleted
        // (gone), 3 inserted.
        #expect(merged.saves == 3)
        #expect(merged.version == 3)
        #expect(merged.changes.inserted.map(\.serial) == [1, 3])
        #expect(merged.changes.updated.isEmpty && merged.changes.deleted.isEmpty)
        let consumer = Task { await iterator.next() }
        try await store.perform { context in try context.object(Volume.self, where: \.isbn, equals: 3)?.pages = 9 }
        let next = try #require(await consumer.value)
        #expect(next.saves == 1 && next.changes.updated.map(\.changedKeys) == [["pages"]])
        try await store.close()
        var ended = changes.makeAsyncIterator()
        #expect(await ended.next() == nil)
    }

    @Test func concurrentDurableTransactionsShareTheirSyncs() async throws {
        // `.always`: each transaction returns once its record is durable; transactions of
        // other tasks that commit meanwhile share an fdatasync.
        let directory = temporaryStoreDirectory("groupcommit")
        let store = try AsyncStore(at: directory, schema: librarySchema)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for i in 0..<25 {
                        try await store.perform { context in
                            _ = try context.insert(Volume.self) { $0.isbn = Int64(task * 1000 + i) }
                        }
                        // Returned: durable, and the snapshot shows it.
                        if try store.snapshot.object(Volume.self, where: \.isbn, equals: Int64(task * 1000 + i)) == nil
                        {
                            Issue.record("transaction \(task)/\(i) returned before its snapshot was published")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.snapshot.count(of: Volume.self) == 200)
        #expect(store.snapshot.version == 200)
        #expect(store.stats.records >= 200)  // one record per transaction, and the schema
        let syncs = store.groupCommitStatistics
        #expect(syncs.transactions == 200)
        #expect(syncs.syncs < 200, "no two transactions shared an fdatasync")
        try await store.close()
        let reopened = try ObjectStore.open(at: directory, schema: librarySchema)
        #expect(try reopened.context.count(of: Volume.self) == 200)
        try reopened.close()
    }

    @Test func aSaveInsideATransactionThatThrowsIsMadeDurableAndPublished() async throws {
        let directory = temporaryStoreDirectory("groupcommitsavedthenthrew")
        let store = try AsyncStore(at: directory, schema: librarySchema)
        await #expect(throws: Boom.self) {
            try await store.perform { context in
                _ = try context.insert(Volume.self) { $0.isbn = 1 }
                try context.save()
                _ = try context.insert(Volume.self) { $0.isbn = 2 }
                throw Boom()
            }
        }
        // The save before the throw stands and readers see it; what came after is rolled back.
        #expect(try store.snapshot.object(Volume.self, where: \.isbn, equals: 1) != nil)
        #expect(try store.snapshot.object(Volume.self, where: \.isbn, equals: 2) == nil)
        try await store.close()
    }

    @Test func aFailedGroupSyncRefusesFurtherWritesAndPublishesNothingItDidNotCover() async throws {
        let directory = temporaryStoreDirectory("groupcommitfault")
        let plan = JournalIO.FaultPlan()
        var options = StoreOptions(durability: .always)
        options.journal.io = .faulty(plan)
        let store = try AsyncStore(at: directory, schema: librarySchema, options: options)
        try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = 1 } }
        plan.arm(.error(5 /* EIO */), atCall: 1, of: [.fdatasync, .fsync])
        await #expect(throws: StoreError.self) {
            try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = 2 } }
        }
        plan.disarm()
        // Readers never saw the save the disk may have lost; writers are refused.
        #expect(try store.snapshot.object(Volume.self, where: \.isbn, equals: 2) == nil)
        #expect(store.snapshot.version == 1)
        await #expect(throws: StoreError.self) {
            try await store.perform { context in _ = try context.insert(Volume.self) { $0.isbn = 3 } }
        }
        try? await store.close()
        // Reopened: what was durable.
        let reopened = try ObjectStore.open(at: directory, schema: librarySchema)
        #expect(try reopened.context.objects(of: Volume.self).map(\.isbn).contains(1))
        try reopened.close()
    }

    @Test func snapshotsStayConsistentWhileAWriterSaves() async throws {
        // Random writer transactions, while readers on other tasks check every snapshot they
        // take against the reference model recorded for its version.
        let runs = max(4, propertyRuns / 10)
        await propertyCheck(count: runs, input: Gen.int(in: 0...1_000_000).array(of: 5...40)) { codes in
            do {
                try await checkInterleaving(codes)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    private func checkInterleaving(_ codes: [Int]) async throws {
        let directory = temporaryStoreDirectory("interleaving")
        var options = StoreOptions()
        options.durability = .none
        let store = try AsyncStore(at: directory, schema: librarySchema, options: options)
        // Reference: isbn → record, per snapshot version.
        let shared = InterleavingState()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    while !shared.done.load(ordering: .acquiring) {
                        let snapshot = store.snapshot
                        guard let model = shared.expected.withLock({ $0[snapshot.version] }) else {
                            shared.problems.withLock {
                                $0.append("version \(snapshot.version) published before it was recorded")
                            }
                            return
                        }
                        let books = try snapshot.fetch(
                            FetchDescriptor<Volume>(sortBy: [SortDescriptor(\.isbn)]), as: VolumeRecord.self)
                        if books != model.values.sorted(by: { $0.isbn < $1.isbn }) {
                            shared.problems.withLock { $0.append("version \(snapshot.version): \(books) != \(model)") }
                            return
                        }
                        for isbn in Int64(0)..<23
                        where try snapshot.object(Volume.self, where: \.isbn, equals: isbn)?.decode(
                            as: VolumeRecord.self) != model[isbn]
                        {
                            shared.problems.withLock {
                                $0.append("version \(snapshot.version): lookup of \(isbn) differs")
                            }
                            return
                        }
                        await Task.yield()
                    }
                }
            }
            var model: [Int64: VolumeRecord] = [:]
            var version: UInt64 = 0
            for chunk in stride(from: 0, to: codes.count, by: 3).map({ Array(codes[$0..<min($0 + 3, codes.count)]) }) {
                // One transaction per chunk; each changes something, so each publishes.
                var next = model
                var ops: [(kind: Int, isbn: Int64, pages: Int, title: String)] = []
                for code in chunk {
                    let isbn = Int64(code % 23)
                    var kind = next[isbn] == nil ? 0 : (code / 23) % 4
                    // Kind 3 moves the object to another key: only to a free one.
                    let target = Int64((code / 92) % 23)
                    if kind == 3 && next[target] != nil { kind = 1 }
                    ops.append((kind, isbn, kind == 3 ? Int(target) : code % 500, "t\(code)"))
                    switch kind {
                    case 0: next[isbn] = VolumeRecord(isbn: isbn, title: "t\(code)", pages: code % 500, note: nil)
                    case 1: next[isbn]?.pages = code % 500
                    case 2: next[isbn] = nil
                    default:
                        next[target] = next[isbn].map {
                            VolumeRecord(isbn: target, title: $0.title, pages: $0.pages, note: $0.note)
                        }
                        next[isbn] = nil
                    }
                }
                guard next != model else { continue }
                version += 1
                let recorded = next
                shared.expected.withLock { $0[version] = recorded }
                let operations = ops
                try await store.perform { context in
                    for op in operations {
                        switch op.kind {
                        case 0:
                            try context.upsert(Volume.self, where: \.isbn, equals: op.isbn) { b in
                                b.title = op.title
                                b.pages = op.pages
                            }
                        case 1: try context.object(Volume.self, where: \.isbn, equals: op.isbn)?.pages = op.pages
                        case 3: try context.object(Volume.self, where: \.isbn, equals: op.isbn)?.isbn = Int64(op.pages)
                        default:
                            if let b = try context.object(Volume.self, where: \.isbn, equals: op.isbn) {
                                context.delete(b)
                            }
                        }
                    }
                }
                model = next
                await Task.yield()
            }
            shared.done.store(true, ordering: .releasing)
            try await group.waitForAll()
            #expect(store.snapshot.version == version)
            let final = try store.snapshot.fetch(
                FetchDescriptor<Volume>(sortBy: [SortDescriptor(\.isbn)]), as: VolumeRecord.self)
            #expect(final == model.values.sorted { $0.isbn < $1.isbn })
        }
        #expect(shared.problems.withLock { $0 } == [])
        try await store.close()
        // The journal holds the same state.
        let reopened = try AsyncStore(at: directory, schema: librarySchema, options: options)
        let afterReopen = try reopened.snapshot.fetch(
            FetchDescriptor<Volume>(sortBy: [SortDescriptor(\.isbn)]), as: VolumeRecord.self)
        let final = try store.snapshot.fetch(
            FetchDescriptor<Volume>(sortBy: [SortDescriptor(\.isbn)]), as: VolumeRecord.self)
        #expect(afterReopen == final)
        try await reopened.close()
    }
}

/// What the writer and the readers of the interleaving test share.
///
/// Guarded by `Locked` (an `NSLock`), not `Mutex`: see `Locked`.
private final class InterleavingState: @unchecked Sendable {
    let expected = Locked<[UInt64: [Int64: VolumeRecord]]>([0: [:]])
    let problems = Locked<[String]>([])
    let done = Atomic<Bool>(false)
}

private final class BatchCounter: Sendable {
    let value = Mutex(0)
}
