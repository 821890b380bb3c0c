internal import CoreMetrics
public import Foundation
import GraphJournal
import NATSJetStream
public import ObjectGraph
internal import Tracing

/// A read-only replica of a shipping store: it replays the stream into its own local journal,
/// continuously, and serves reads from snapshots that hold whole transactions of the writer.
///
/// ```swift
/// let follower = try await ObjectStore.follow(at: replicaDirectory, schema: schema, source: target)
/// let count = try follower.store.snapshot.fetchCount(FetchDescriptor<Package>())
/// print(follower.status.lagRecords)
/// try await follower.stop()
/// ```
///
/// A follower resumes after a restart from the last record it applied: the position lives in
/// its journal, written with each record (``ObjectStore/origin``). A new follower, or one the
/// stream was trimmed past, starts from the stream's newest base. Saves through its store are
/// refused (``StoreError`` code `readOnly`).
///
/// The records of an encrypted writer travel sealed, and the replica keeps them sealed: give
/// the follower the writer's keys in its options' `journal.encryption`. Without them, or with
/// others, it applies nothing and stops (``Status/storeError``, journal code `keyUnavailable`
/// or `wrongKey` naming the key).
public final class Follower: Sendable {
    /// Where the follower is, for monitoring.
    public struct Status: Sendable, Hashable {
        /// The writer's record applied last (its sequence in the writer's journal).
        public var appliedSequence: UInt64
        /// The stream message that carried it.
        public var streamSequence: UInt64
        /// The stream's last sequence when the follower last looked.
        public var streamLastSequence: UInt64
        /// Stream messages not applied yet (`streamLastSequence - streamSequence`).
        public var lagMessages: UInt64 { streamLastSequence > streamSequence ? streamLastSequence - streamSequence : 0 }
        /// When the server stored the message applied last.
        public var appliedMessageTime: Date?
        /// Records applied since the follower started.
        public var recordsApplied: Int
        /// The last error, cleared by the next success.
        public var lastError: String?
        /// Set when the follower stopped for good (a record that does not apply, a gap).
        public var failed: String?
        /// The local store's error when that was one: code `migration` for a record of another
        /// version of the model than the replica's (``StoreError/storedVersion`` names the
        /// version met, ``StoreError/modelVersion`` the replica's), which it refused before
        /// writing anything of it; code `journal` for a sealed record whose key the replica's
        /// `journal.encryption` lacks (``StoreError/journalError`` code `keyUnavailable`, the
        /// key's identifier) or does not match (`wrongKey`), or a record its writer did not seal
        /// reaching an encrypted replica (`notEncrypted`), refused before anything of it was
        /// written.
        public var storeError: StoreError?
    }

    /// The replica; reads through ``AsyncStore/snapshot`` and ``AsyncStore/read(_:)``.
    public let store: AsyncStore
    let target: ReplicationTarget
    let metrics: FollowerMetrics
    let client: JetStreamClient
    /// The replica's keys, which open the writer's sealed records.
    let keys: ReplicaKeys
    private let box: Box

    private final class Box: @unchecked Sendable {
        // Every field is read and written with `condition` locked.
        let condition = NSCondition()
        var status: Status
        var stopping = false
        var threadDone = false
        var batches: AsyncStream<[StoredMessage]>.Continuation?
        var applierDone = false

        init(status: Status) { self.status = status }

        /// Records the lag (`objectgraph_follower_lag_messages` and `_seconds`) from the status.
        func reportLag(_ metrics: FollowerMetrics) {
            let lag = status.lagMessages
            metrics.lagMessages.record(Int64(lag))
            let behind = lag == 0 ? 0 : status.appliedMessageTime.map { max(0, -$0.timeIntervalSinceNow) } ?? 0
            metrics.lagSeconds.record(behind)
        }

        /// Runs `body` with the condition locked (callable from async code).
        func locked<R>(_ body: (Box) throws -> R) rethrows -> R {
            condition.lock()
            defer { condition.unlock() }
            return try body(self)
        }
    }

    /// A replica's store options by default: `.batched(milliseconds: 50)` durability. A
    /// replica's durability is its source's: what a power loss takes from its journal it reads
    /// again from the stream (its position is in the journal too), so it need not sync each
    /// record it applies.
    public static var defaultOptions: StoreOptions { StoreOptions(durability: .batched(milliseconds: 50)) }

    /// Opens (creating if needed) the replica in `directory` and starts following `source`.
    ///
    /// A replica never migrates itself (``StoreOptions/migrationPlan`` is ignored): when
    /// `schema` is a later version of the model than the replica's, the replica is replaced by
    /// the stream's newest base, the writer's migrated state, when that base is of `schema`'s
    /// version. A follower of an earlier version than its source's stops at the base (or the
    /// schema record) of the later one (``Status/storeError``), its replica as it was
    /// (Docs/Replication.md, "Migrations").
    ///
    /// - Throws: ``ReplicationError`` (`server`, `unavailable` when a new replica finds neither
    ///   a base nor the stream's start), ``StoreError`` from opening the local store; code
    ///   `migration` when the replica, or the base a new or trimmed-past replica would start
    ///   from, is of another version of the model than `schema`'s and the stream holds no base
    ///   of that version (nothing was changed); code `journal` with the journal's
    ///   `keyUnavailable` or `wrongKey` when the base is sealed with a key `options`'
    ///   `journal.encryption` lacks or does not match (nothing was installed).
    public static func start(
        at directory: URL, schema: Schema, source: ReplicationTarget, options: StoreOptions = Follower.defaultOptions
    ) async throws -> Follower {
        let client: JetStreamClient
        do {
            client = try JetStreamClient(servers: source.servers, name: "objectgraph-follower", timeout: source.timeout)
            try client.ensureStream(source.streamConfiguration)
        } catch {
            throw ReplicationError(
                error, while: "connecting to \(source.servers.joined(separator: ",")) for stream \(source.stream)")
        }
        var options = options
        options.readOnly = true
        options.autoCompactionRatio = nil
        // The writer's migrated base, not a migration of its own: a custom stage run here could
        // reach another state than the writer's (another set of records, its own clock or IDs).
        options.migrationPlan = nil
        let model = schema.versionIdentifier
        let keys = ReplicaKeys(options.journal.encryption)
        let opened = try openReplica(directory, client: client, target: source, keys: keys, model: model) {
            try ObjectStore.open(at: directory, schema: schema, options: options)
        }
        let store = AsyncStore(store: opened)
        let position = Position(store.shippingSource.origin) ?? Position(recordSequence: 0, streamSequence: 0)
        return Follower(store: store, target: source, client: client, keys: keys, position: position, model: model)
    }

    private init(
        store: AsyncStore, target: ReplicationTarget, client: JetStreamClient, keys: ReplicaKeys, position: Position,
        model: String?
    ) {
        self.store = store
        self.target = target
        self.client = client
        self.keys = keys
        self.metrics = FollowerMetrics(store.instruments)
        self.box = Box(
            status: Status(
                appliedSequence: position.recordSequence, streamSequence: position.streamSequence,
                streamLastSequence: position.streamSequence,
                appliedMessageTime: nil, recordsApplied: 0, lastError: nil, failed: nil, storeError: nil))
        let (stream, continuation) = AsyncStream<[StoredMessage]>.makeStream(bufferingPolicy: .bufferingOldest(64))
        box.batches = continuation
        let schema = store.shippingSource.schema
        Task { [self] in await self.apply(stream, schema: schema, position: position, model: model) }
        let thread = Thread { [self] in self.read(from: position.streamSequence + 1) }
        thread.name = "ObjectGraph follower"
        thread.start()
    }

    deinit { client.close() }

    /// The follower's position and lag.
    public var status: Status {
        box.condition.lock()
        defer { box.condition.unlock() }
        return box.status
    }

    /// Waits until the follower applied the writer's record `sequence`.
    ///
    /// - Returns: false when `timeout` passed first or the follower failed.
    public func waitUntilApplied(_ sequence: UInt64, timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let s = status
            if s.appliedSequence >= sequence { return true }
            if s.failed != nil { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return status.appliedSequence >= sequence
    }

    /// Stops following and closes the replica. It resumes from where it stopped when started again.
    ///
    /// - Throws: ``StoreError`` from closing the store.
    public func stop() async throws {
        box.locked { b in
            b.stopping = true
            b.condition.broadcast()
        }
        while true {
            if box.locked({ $0.threadDone && $0.applierDone }) { break }
            try? await Task.sleep(for: .milliseconds(5))
        }
        try await store.close()
    }

    // MARK: Reading the stream (a thread: libnats calls block)

    private func read(from start: UInt64) {
        var next = start
        var reader: JetStreamReader?
        var backoff = 0.05
        var lastStateCheck = Date.distantPast
        defer {
            reader?.close()
            box.condition.lock()
            box.batches?.finish()
            box.threadDone = true
            box.condition.broadcast()
            box.condition.unlock()
        }
        while true {
            box.condition.lock()
            let stop = box.stopping || box.status.failed != nil
            box.condition.unlock()
            if stop { return }
            do {
                if reader == nil {
                    reader = try client.reader(stream: target.stream, subject: target.logSubject, from: next)
                }
                guard let current = reader else { continue }
                let batch = try current.next(max: 256, timeout: .milliseconds(100))
                if Date().timeIntervalSince(lastStateCheck) > 0.5 || batch.isEmpty {
                    let state = try client.streamState(target.stream)
                    lastStateCheck = Date()
                    box.condition.lock()
                    box.status.streamLastSequence = max(state.lastSequence, batch.last?.sequence ?? 0)
                    box.reportLag(metrics)
                    box.condition.unlock()
                }
                guard !batch.isEmpty else { continue }
                next = (batch.last?.sequence ?? next) + 1
                box.condition.lock()
                if let last = batch.last?.sequence, last > box.status.streamLastSequence {
                    box.status.streamLastSequence = last
                }
                box.status.lastError = nil
                let continuation = box.batches
                box.condition.unlock()
                // Backpressure: the buffer holds 64 batches; wait while it is full.
                while case .dropped = continuation?.yield(batch) {
                    Thread.sleep(forTimeInterval: 0.005)
                    box.condition.lock()
                    let stop = box.stopping
                    box.condition.unlock()
                    if stop { return }
                }
                backoff = 0.05
            } catch {
                reader?.close()
                reader = nil
                box.condition.lock()
                box.status.lastError = "\(error)"
                box.condition.unlock()
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 1)
            }
        }
    }

    // MARK: Applying (a task: the store is an actor)

    private func apply(
        _ batches: AsyncStream<[StoredMessage]>, schema initial: [UInt8]?, position: Position, model: String?
    ) async {
        var assembler = RecordAssembler()
        var schema = initial
        var applied = position.recordSequence
        defer {
            box.locked { b in
                b.applierDone = true
                b.condition.broadcast()
            }
        }
        for await messages in batches {
            var pending: [(record: ShippedRecord, schema: [UInt8], origin: [UInt8])] = []
            var lastTime: Date?
            var lastStream: UInt64 = 0
            // A schema record of another version of the model: the records before it are
            // applied, then the follower stops, nothing of that version written.
            var refusal: StoreError?
            do {
                reading: for message in messages {
                    let info = try LogMessageInfo(message)
                    guard let batch = try assembler.add(message, info) else { continue }
                    for (i, record) in batch.records.enumerated() {
                        // Applied already (a batch read again after a restart, or published
                        // again by a restarted writer): skipped.
                        if record.sequence <= applied { continue }
                        let previous = i == 0 ? batch.previous : batch.records[i - 1].sequence
                        if previous != applied {
                            guard i == 0, previous > applied,
                                let base = baseCovers(before: batch.firstStreamSequence), base.covers == previous
                            else {
                                throw ReplicationError(
                                    .unavailable,
                                    "stream message \(batch.lastStreamSequence) carries record \(record.sequence) after \(previous), but this follower applied \(applied) last: records are missing (trimmed below a newer base?); restart it from a base"
                                )
                            }
                            // The base's schema is in force after it: the log goes on without a
                            // schema record of its own (a migration's base is of the new version).
                            let crossed = try client.baseSchema(base, target, keys: keys)
                            if let model, let theirs = try StoredSchema.decode(crossed).versionIdentifier,
                                theirs != model
                            {
                                refusal = StoreError.replicaRefusal(
                                    "the base ending at stream message \(base.lastStreamSequence)",
                                    storedVersion: theirs, modelVersion: model, sequence: previous)
                                break reading
                            }
                            schema = crossed
                        }
                        if record.kind == .schema, let model {
                            let payload = try keys.payload(of: record)
                            let theirs = try StoredSchema.decode(payload).versionIdentifier
                            if let theirs, theirs != model {
                                refusal = StoreError.replicaRefusal(
                                    "schema record \(record.sequence) at stream message \(batch.lastStreamSequence)",
                                    storedVersion: theirs, modelVersion: model, sequence: record.sequence)
                                break reading
                            }
                        }
                        applied = record.sequence
                        switch record.kind {
                        case .schema:
                            schema = try keys.payload(of: record)
                        case .transaction:
                            guard let schema else {
                                throw ReplicationError(
                                    .badMessage,
                                    "record \(record.sequence) at stream message \(batch.lastStreamSequence) comes before any schema record"
                                )
                            }
                            pending.append((record, schema, batch.position(of: i).encoded(stream: target.stream)))
                        case .base:
                            throw ReplicationError(
                                .badMessage,
                                "a base record on the log subject at stream message \(batch.lastStreamSequence)")
                        }
                    }
                    lastTime = batch.time
                    lastStream = batch.lastStreamSequence
                }
                if !pending.isEmpty {
                    let span = store.instruments.span("objectgraph.apply", kind: .consumer)
                    defer { span.end() }
                    span.attributes["objectgraph.records"] = pending.count
                    span.attributes["objectgraph.bytes"] = pending.reduce(0) { $0 + $1.record.byteCount }
                    span.attributes["objectgraph.last_sequence"] = Int(applied)
                    do { try await store.applyShipped(pending) } catch {
                        span.fail(error)
                        throw error
                    }
                    metrics.appliedRecords.increment(by: pending.count)
                }
                let count = pending.count
                box.locked { b in
                    if lastStream > 0 {
                        b.status.appliedSequence = applied
                        b.status.streamSequence = lastStream
                        b.status.appliedMessageTime = lastTime
                    }
                    b.status.recordsApplied += count
                    b.reportLag(metrics)
                    b.condition.broadcast()
                }
                if let refusal { throw refusal }
            } catch {
                box.locked { b in
                    b.status.failed = "\(error)"
                    b.status.storeError = error as? StoreError
                    b.condition.broadcast()
                }
                return
            }
        }
    }

    // MARK: Bases

    /// The base that ends right before stream message `sequence`, if one does: a
    /// compaction consumed the sequences between the last log record before it and the first
    /// after it, and the base holds the same state as those log records.
    private func baseCovers(before sequence: UInt64) -> BaseLocation? {
        guard sequence > 1, let m = try? client.message(stream: target.stream, sequence: sequence - 1),
            m.subject == target.baseSubject
        else {
            return nil
        }
        return try? client.baseLocation(endingWith: m, target)
    }

    /// Opens the replica with `open`, its journal read once, by `open`. A new replica (no
    /// journal yet) first gets the stream's newest base, when there is one; a replica the
    /// stream was trimmed past is closed, rebuilt from that base and opened again.
    ///
    /// With `model`, the version of the replica's model: a replica of another version is
    /// replaced by the newest base when that base is of `model`'s version (its source migrated
    /// to the model's version), and kept as it is otherwise; a base of another version than
    /// `model`'s is never installed (``StoreError`` code `migration`).
    static func openReplica(
        _ directory: URL, client: JetStreamClient, target: ReplicationTarget, keys: ReplicaKeys, model: String? = nil,
        open: () throws -> ObjectStore
    ) throws -> ObjectStore {
        guard hasJournal(directory) else {
            try installNewestBaseIfNew(directory, client: client, target: target, keys: keys, model: model)
            return try open()
        }
        let store: ObjectStore
        do {
            store = try open()
        } catch let error as StoreError where error.code == .migration && model != nil {
            // The replica is at another version than the model (nothing was changed by the open).
            guard let base = try client.newestBase(target) else {
                throw StoreError.replicaRefusal(
                    "the replica in \(directory.path) (the stream holds no base to replace it with)",
                    storedVersion: error.storedVersion, modelVersion: model)
            }
            let records = try client.readBase(base, target)
            let theirs = try version(ofBase: records, keys: keys)
            guard theirs == model else {
                throw StoreError.replicaRefusal(
                    "the replica in \(directory.path) (and the stream's newest base, version \(theirs ?? "(unversioned)"), ending at stream message \(base.lastStreamSequence))",
                    storedVersion: error.storedVersion, modelVersion: model)
            }
            try installReplacing(directory, with: base, records: records, keys: keys)
            return try open()
        }
        if model != nil, store.origin == nil, store.stats.lastSequence == 0 {
            // Nothing applied yet (a follower that refused the stream's first record, of another
            // version): as a new replica, it starts from the newest base if there is one.
            guard let base = try client.newestBase(target) else { return store }
            try store.close()
            let records = try checkedBase(base, client: client, target: target, keys: keys, model: model)
            try installReplacing(directory, with: base, records: records, keys: keys)
            return try open()
        }
        let state: StreamState
        do { state = try client.streamState(target.stream) } catch {
            try? store.close()
            throw ReplicationError(error, while: "reading stream \(target.stream)")
        }
        guard (Position(store.origin)?.streamSequence ?? 0) + 1 < state.firstSequence else { return store }
        try store.close()
        guard let base = try client.newestBase(target) else {
            throw ReplicationError(
                .unavailable, "the stream was trimmed past this replica and holds no base to restart from")
        }
        let records = try checkedBase(base, client: client, target: target, keys: keys, model: model)
        try installReplacing(directory, with: base, records: records, keys: keys)
        return try open()
    }

    /// Whether `directory` holds a journal.
    static func hasJournal(_ directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("MANIFEST").path)
    }

    /// A new replica (no journal yet) starts from the stream's newest base, when there is one
    /// (of `model`'s version, when given).
    static func installNewestBaseIfNew(
        _ directory: URL, client: JetStreamClient, target: ReplicationTarget, keys: ReplicaKeys, model: String? = nil
    ) throws {
        guard !hasJournal(directory), let base = try client.newestBase(target) else { return }
        let records = try checkedBase(base, client: client, target: target, keys: keys, model: model)
        try installReplacing(directory, with: base, records: records, keys: keys)
    }

    /// The version of the model a base (its records, schema first) was written with.
    static func version(ofBase records: [ShippedRecord], keys: ReplicaKeys) throws -> String? {
        guard let schema = records.first else { return nil }
        return try StoredSchema.decode(try keys.payload(of: schema)).versionIdentifier
    }

    /// The records of `base`, read; with `model`, refused (``StoreError`` code `migration`,
    /// nothing written) when the base is of another version of the model.
    private static func checkedBase(
        _ base: BaseLocation, client: JetStreamClient, target: ReplicationTarget, keys: ReplicaKeys, model: String?
    ) throws -> [ShippedRecord] {
        let records = try client.readBase(base, target)
        // Its schema opens with the replica's keys, or the base is refused before anything is
        // written: a replica without the key installs nothing.
        let theirs = try version(ofBase: records, keys: keys)
        if let model, let theirs, theirs != model {
            throw StoreError.replicaRefusal(
                "the stream's newest base (ending at stream message \(base.lastStreamSequence))",
                storedVersion: theirs, modelVersion: model)
        }
        return records
    }

    /// Writes `base` (its `records`) into a staging directory, then puts it in place of
    /// `directory`.
    private static func installReplacing(
        _ directory: URL, with base: BaseLocation, records: [ShippedRecord], keys: ReplicaKeys
    ) throws {
        let fm = FileManager.default
        let staging = directory.deletingLastPathComponent().appendingPathComponent(
            directory.lastPathComponent + ".base-install")
        try? fm.removeItem(at: staging)
        do { try install(base, records: records, into: staging, keys: keys) } catch {
            try? fm.removeItem(at: staging)
            throw error
        }
        if fm.fileExists(atPath: directory.path) {
            let old = directory.deletingLastPathComponent().appendingPathComponent(
                directory.lastPathComponent + ".replaced")
            try? fm.removeItem(at: old)
            try fm.moveItem(at: directory, to: old)
            try fm.moveItem(at: staging, to: directory)
            try? fm.removeItem(at: old)
        } else {
            try fm.moveItem(at: staging, to: directory)
        }
    }

    /// Writes `base` (its `records`, read from the stream) as a new journal in `directory`
    /// (which must not hold one), its origin the base's position in the stream, encrypted
    /// with `keys` (a sealed base stays sealed, under its writer's identity).
    static func install(_ base: BaseLocation, records: [ShippedRecord], into directory: URL, keys: ReplicaKeys) throws {
        try keys.checkSealed(base: records, what: "the base ending at stream message \(base.lastStreamSequence)")
        try ReplicaKeys.writing {
            let journal = try Journal.open(directory: directory.path, options: keys.journalOptions())
            defer { try? journal.close() }
            // The base's records as they came: nothing decompressed or compressed again.
            try journal.compact(
                shipped: records,
                origin: base.origin)
            try journal.close()
        }
    }
}

extension ObjectStore {
    /// Opens (creating if needed) a read-only replica in `directory` that follows `source`
    /// continuously (``Follower``).
    ///
    /// - Throws: as ``Follower/start(at:schema:source:options:)``.
    public static func follow(
        at directory: URL, schema: Schema, source: ReplicationTarget, options: StoreOptions = Follower.defaultOptions
    ) async throws -> Follower {
        try await Follower.start(at: directory, schema: schema, source: source, options: options)
    }
}

/// A follower's metrics (Docs/Observability.md), with its replica's `store` dimension.
struct FollowerMetrics: Sendable {
    /// `objectgraph_follower_lag_messages`: stream messages not applied yet.
    let lagMessages: Gauge
    /// `objectgraph_follower_lag_seconds`: how long ago the server stored the message applied
    /// last, while messages wait (0 when none does).
    let lagSeconds: Gauge
    /// `objectgraph_follower_applied_records_total`.
    let appliedRecords: Counter

    init(_ instruments: StoreInstruments) {
        lagMessages = instruments.gauge("objectgraph_follower_lag_messages")
        lagSeconds = instruments.gauge("objectgraph_follower_lag_seconds")
        appliedRecords = instruments.counter("objectgraph_follower_applied_records_total")
    }
}
