import Foundation
import GraphJournal
import ObjectGraph
import Synchronization
import Testing

/// A member with two unique keys, so that replicas are checked through their indexes.
@Entity final class ReplicaMember {
    @Attribute(.unique) var id: Int64 = 0
    @Attribute(.unique) var email: String = ""
    var name: String = ""
    var age: Int = 18
}

private let replicaMemberSchema: Schema = {
    do { return try Schema(ReplicaMember.self) } catch { preconditionFailure("\(error)") }
}()

/// A new member.
@discardableResult
private func member(_ context: ModelContext, id: Int64, name: String, email: String) throws -> ReplicaMember {
    let m = try context.insert(ReplicaMember.self)
    m.id = id
    m.name = name
    m.email = email
    return m
}

/// A store's durable records applied to a read-only replica, without any server in between: the
/// core doors the replication product uses (`onDurable`, `applyShipped`, `origin`, read-only
/// stores, save confirmation).
@Suite struct ShippedRecordApplyTests {
    /// Records handed out by a journal's `onDurable`, in order.
    final class Collected: Sendable {
        let records = Mutex<[ShippedRecord]>([])
        func take() -> [ShippedRecord] {
            records.withLock { r in
                defer { r = [] }; return r
            }
        }
    }

    private func writer(_ collected: Collected, _ name: String = #function) throws -> ObjectStore {
        var options = StoreOptions()
        options.journal.onDurable = { records in collected.records.withLock { $0.append(contentsOf: records) } }
        return try ObjectStore.open(
            at: temporaryStoreDirectory(name + "-writer"), schema: replicaMemberSchema, options: options)
    }

    private func replicaOptions() -> StoreOptions {
        var options = StoreOptions()
        options.readOnly = true
        return options
    }

    /// Applies `records` to `replica`, keeping the schema in force; origins count the records.
    private func apply(_ records: [ShippedRecord], to replica: ObjectStore, schema: inout [UInt8]?) throws {
        for r in records {
            switch r.kind {
            case .schema: schema = try r.payload()
            case .transaction:
                guard let schema else { Issue.record("a transaction before any schema"); return }
                try replica.applyShipped(r, schema: schema, origin: Array("at \(r.sequence)".utf8))
            case .base: Issue.record("a base on the log")
            }
        }
    }

    private func people(_ context: ModelContext) throws -> [Int64: String] {
        Dictionary(
            uniqueKeysWithValues: try context.objects(of: ReplicaMember.self).map {
                ($0.id, "\($0.name)/\($0.email)/\($0.age)")
            })
    }

    @Test func aReplicaAppliesShippedRecordsAndReopensToTheSameStateAndOrigin() throws {
        let collected = Collected()
        let source = try writer(collected)
        let replicaDirectory = temporaryStoreDirectory("replica")
        var replica = try ObjectStore.open(at: replicaDirectory, schema: replicaMemberSchema, options: replicaOptions())
        var schema: [UInt8]?
        for round in 0..<5 {
            for i in 0..<10 {
                try member(source.context, id: Int64(round * 10 + i), name: "p\(i)", email: "p\(round)-\(i)@x")
            }
            if round > 0 {
                try source.context.object(ReplicaMember.self, where: \.id, equals: Int64(round * 10 - 1))?.age =
                    40 + round
                if let gone = try source.context.object(ReplicaMember.self, where: \.id, equals: Int64(round * 10 - 10))
                {
                    source.context.delete(gone)
                }
            }
            try source.context.save()
            try apply(collected.take(), to: replica, schema: &schema)
            #expect(try people(replica.context) == people(source.context))
            // Unique lookups on the replica see the applied records.
            #expect(
                try replica.context.object(ReplicaMember.self, where: \.email, equals: "p\(round)-3@x")?.id
                    == Int64(round * 10 + 3))
        }
        let last = source.stats.lastSequence
        #expect(replica.origin == Array("at \(last)".utf8))
        try replica.close()
        replica = try ObjectStore.open(at: replicaDirectory, schema: replicaMemberSchema, options: replicaOptions())
        #expect(try people(replica.context) == people(source.context))
        #expect(replica.origin == Array("at \(last)".utf8))
        // Compaction keeps the position.
        try replica.compact()
        try replica.close()
        replica = try ObjectStore.open(at: replicaDirectory, schema: replicaMemberSchema, options: replicaOptions())
        #expect(replica.origin == Array("at \(last)".utf8))
        #expect(try people(replica.context) == people(source.context))
        try replica.close()
        try source.close()
    }

    @Test func aReadOnlyStoreRefusesSavesAndKeepsThePendingChanges() throws {
        let replica = try ObjectStore.open(
            at: temporaryStoreDirectory(), schema: replicaMemberSchema, options: replicaOptions())
        try member(replica.context, id: 1, name: "a", email: "a@x")
        let error = #expect(throws: StoreError.self) { try replica.context.save() }
        #expect(error?.code == .readOnly)
        #expect(replica.context.hasChanges)
        #expect(replica.stats.lastSequence == 0)
        // A shipped record is not applied over pending changes.
        replica.context.rollback()
        try replica.close()
    }

    @Test func aRecordThatDoesNotApplyClosesTheReplicaAndReopeningNamesIt() throws {
        let collected = Collected()
        let source = try writer(collected)
        try member(source.context, id: 1, name: "a", email: "a@x")
        try source.context.save()
        let first = collected.take()
        let replicaDirectory = temporaryStoreDirectory("replica")
        let replica = try ObjectStore.open(at: replicaDirectory, schema: replicaMemberSchema, options: replicaOptions())
        var schema: [UInt8]?
        try apply(first, to: replica, schema: &schema)
        // The same insert again: the replica diverged from its source.
        let insert = try #require(first.last)
        let error = #expect(throws: StoreError.self) {
            try replica.applyShipped(insert, schema: schema ?? [], origin: [1])
        }
        #expect(error?.code == .corruptPayload)
        #expect(error?.message.contains("diverged") == true)
        // Closed: nothing more is written.
        #expect(throws: StoreError.self) { try replica.applyShipped(insert, schema: schema ?? [], origin: [2]) }
        let reopened = #expect(throws: StoreError.self) {
            _ = try ObjectStore.open(at: replicaDirectory, schema: replicaMemberSchema)
        }
        #expect(reopened?.sequence != nil)
        try source.close()
    }

    @Test func aRecordThatDoesNotDecodeChangesNothing() throws {
        let collected = Collected()
        let source = try writer(collected)
        try member(source.context, id: 1, name: "a", email: "a@x")
        try source.context.save()
        let records = collected.take()
        let replica = try ObjectStore.open(
            at: temporaryStoreDirectory("replica"), schema: replicaMemberSchema, options: replicaOptions())
        let transaction = try #require(records.last)
        // A schema that is not one.
        let error = #expect(throws: StoreError.self) {
            try replica.applyShipped(transaction, schema: [0xFF, 0x00], origin: [1])
        }
        #expect(error != nil)
        #expect(replica.stats.lastSequence == 0)
        #expect(try replica.context.objects(of: ReplicaMember.self).isEmpty)
        try replica.close()
        try source.close()
    }

    @Test func saveConfirmationRunsOnceTheSaveIsDurableAndItsErrorComesWithTheSaveStanding() throws {
        struct NotConfirmed: Error {}
        let confirmed = Mutex<[UInt64]>([])
        let refuse = Mutex(false)
        var options = StoreOptions()
        options.saveConfirmation = { sequence in
            confirmed.withLock { $0.append(sequence) }
            if refuse.withLock({ $0 }) { throw NotConfirmed() }
        }
        let store = try ObjectStore.open(at: temporaryStoreDirectory(), schema: replicaMemberSchema, options: options)
        try member(store.context, id: 1, name: "a", email: "a@x")
        try store.context.save()
        #expect(confirmed.withLock { $0 } == [store.stats.lastSequence])
        try store.context.save()  // nothing to write: no confirmation
        #expect(confirmed.withLock { $0 }.count == 1)
        refuse.withLock { $0 = true }
        try member(store.context, id: 2, name: "b", email: "b@x")
        #expect(throws: NotConfirmed.self) { try store.context.save() }
        #expect(!store.context.hasChanges)
        #expect(try store.context.object(ReplicaMember.self, where: \.id, equals: 2) != nil)
        try store.close()
    }

    @Test func anAsyncStoreWithGroupCommitConfirmsAfterTheSharedSync() async throws {
        let confirmed = Mutex<[UInt64]>([])
        let durableAtConfirmation = Mutex<[Bool]>([])
        let delivered = Mutex<UInt64>(0)
        var options = StoreOptions()
        options.journal.onDurable = { records in delivered.withLock { $0 = max($0, records.last?.sequence ?? 0) } }
        options.saveConfirmation = { sequence in
            confirmed.withLock { $0.append(sequence) }
            durableAtConfirmation.withLock { $0.append(delivered.withLock { $0 } >= sequence) }
        }
        let store = try AsyncStore(at: temporaryStoreDirectory(), schema: replicaMemberSchema, options: options)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    try await store.perform { context in try member(context, id: Int64(i), name: "n", email: "\(i)@x") }
                }
            }
            try await group.waitForAll()
        }
        #expect(confirmed.withLock { $0 }.count == 8)
        #expect(durableAtConfirmation.withLock { $0 }.allSatisfy { $0 })
        try await store.close()
    }
}
